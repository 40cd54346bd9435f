/*
 * A background checkpointer for the profile's write-ahead log.
 *
 * SQLite's automatic checkpoint runs inside the COMMIT that crosses its
 * threshold, so the dump that commits a big transaction also copies it
 * from the WAL into the database file: 0.6 s of a dump of a million
 * stacks, during which the session serves no client.  Instead, the
 * writer's commits kick this thread, which checkpoints on a connection
 * of its own (a passive checkpoint never blocks the writer; SQLite lets
 * one checkpointer run beside one writer), so the WAL stays about the
 * size of the last dump without the writer waiting for it.
 *
 * The writer also checkpoints itself at the end of each dump (ckpt_now),
 * so that the database file alone holds every dump committed: a copy of
 * it made without its -wal file, or left by a record that was killed,
 * is a complete profile.
 */
#ifndef HEAPPROF_PROFILE_CKPT_H
#define HEAPPROF_PROFILE_CKPT_H

#include <sqlite3.h>

struct ckpt;

/*
 * Start checkpointing path for writer (a connection in WAL mode): the
 * writer's commits that leave at least `pages` pages in the WAL kick the
 * thread (sqlite3_wal_hook; this replaces the writer's own automatic
 * checkpoint).  NULL if it cannot start: the writer is then left with
 * its automatic checkpoint.
 */
struct ckpt *ckpt_start(sqlite3 *writer, const char *path, int pages);
/*
 * A passive checkpoint now, on the writer's connection, in the writer's
 * thread: it copies every frame of the WAL into the database file that no
 * reader still needs (one reading an older snapshot keeps the frames after
 * it in the WAL until a later checkpoint).  Waits for the thread's
 * checkpoint when one runs (SQLite allows one at a time).  c may be NULL
 * (no thread).  Returns SQLite's result code.
 */
int ckpt_now(struct ckpt *c, sqlite3 *writer);
/* Wait for a checkpoint in progress, end the thread, restore the writer's
 * automatic checkpoint.  NULL is fine. */
void ckpt_stop(struct ckpt *c);

#endif
