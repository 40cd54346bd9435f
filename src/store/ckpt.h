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
 *
 * On a full disk a checkpoint that runs out of room part way leaves the
 * database file part old and part new, whole only with its WAL.  So every
 * checkpoint here first reserves the file's blocks for the snapshot it
 * copies (ckpt_room), and is not made when they cannot be had: the file
 * alone is always a whole database of what the last checkpoint copied,
 * which the writer keeps when the WAL cannot be folded in at the end.
 */
#ifndef HEAPPROF_STORE_CKPT_H
#define HEAPPROF_STORE_CKPT_H

#include <sqlite3.h>

struct ckpt;

/*
 * Room in the database file (fd, open on it) for a checkpoint of db's
 * snapshot (the latest, or that of db's open read transaction): the
 * file's blocks up to the snapshot's size are reserved (fallocate, the
 * file's size kept), so that the checkpoint's writes cannot fail for
 * room.  0; -ENOSPC or -EDQUOT when the file system has no room for them,
 * -EFBIG when the file would pass the file size limit (ulimit -f).  0 as
 * well when fd is -1 or the file system cannot reserve (no fallocate):
 * the checkpoint then goes ahead unguarded.
 */
int ckpt_room(int fd, sqlite3 *db);
/* The one integer a statement (a pragma, a count) answers; -1 if it does
 * not.  The writer counts what a file kept with it too. */
int64_t ckpt_query_int(sqlite3 *db, const char *sql);
/*
 * Start checkpointing path for writer (a connection in WAL mode): the
 * writer's commits that leave at least `pages` pages in the WAL kick the
 * thread (sqlite3_wal_hook; this replaces the writer's own automatic
 * checkpoint).  Its checkpoints reserve room first through fd (see
 * ckpt_room; not closed here).  NULL if it cannot start: the writer is
 * then left with its automatic checkpoint.
 */
struct ckpt *ckpt_start(sqlite3 *writer, const char *path, int pages, int fd);
/*
 * A passive checkpoint now, on the writer's connection, in the writer's
 * thread: it copies every frame of the WAL into the database file that no
 * reader still needs (one reading an older snapshot keeps the frames after
 * it in the WAL until a later checkpoint).  Waits for the thread's
 * checkpoint when one runs (SQLite allows one at a time).  c may be NULL
 * (no thread).  Returns SQLite's result code; when ckpt_room(fd, writer)
 * finds no room, nothing is copied, *room is its error and the result
 * SQLITE_FULL (*room is 0 otherwise).
 */
int ckpt_now(struct ckpt *c, sqlite3 *writer, int fd, int *room);
/* Wait for a checkpoint in progress, end the thread; the writer is left
 * with no automatic checkpoint (its last one is the closing one, made
 * with room).  NULL is fine. */
void ckpt_stop(struct ckpt *c);

#endif
