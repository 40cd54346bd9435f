/*
 * The symbols of a profile, as `heapprof symbolize` reads and rewrites
 * them (symbolize/offline.c): the mappings and frames to symbolize, and
 * the rows it writes (stack_profile_symbol, stack_profile_frame's
 * symbol_set_id and name), all in one transaction (symstore_begin ...
 * symstore_end).  Errors are said through util/err.h as
 * "heapprof: symbolize: PATH: what: sqlite's message".
 */
#ifndef HEAPPROF_STORE_SYMBOLS_H
#define HEAPPROF_STORE_SYMBOLS_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct symstore {
	sqlite3 *db;
	const char *path; /* for messages */
	sqlite3_stmt *st[3];
	int64_t next_set; /* the next free symbol set id */
};

/* Whether the database is open read-only. */
bool symstore_readonly(sqlite3 *db);

/* BEGIN IMMEDIATE.  0 or -EIO. */
int symstore_begin(struct symstore *s, sqlite3 *db, const char *path);
/* COMMIT if ok (ROLLBACK if that fails: -EIO), else ROLLBACK (0);
 * frees the statements. */
int symstore_end(struct symstore *s, bool ok);

/* Each mapping some frame is in, by id: fn(arg, id, path, build_id),
 * path and build_id NULL when not recorded, owned by fn.  fn's non-zero
 * result stops the walk and is returned; else 0, -ENOMEM or -EIO. */
int symstore_mappings(struct symstore *s,
                      int (*fn)(void *arg, int64_t id, char *path,
                                char *build_id),
                      void *arg);
/* Each frame by id: fn(arg, id, mapping, rel_pc, unnamed).  As above. */
int symstore_frames(struct symstore *s,
                    int (*fn)(void *arg, int64_t id, int64_t mapping,
                              int64_t rel_pc, bool unnamed),
                    void *arg);

/* Drops the symbols of the n frames (they are symbolized again), finds
 * the first free symbol set id and prepares the writes.  0 or -EIO. */
int symstore_clear(struct symstore *s, const int64_t *frames, size_t n);

/* A new symbol set: its id. */
int64_t symstore_new_set(struct symstore *s);
/* One symbol of a set (innermost first); name, file NULL when unknown,
 * line <= 0 when unknown.  0 or -EIO. */
int symstore_add_symbol(struct symstore *s, int64_t set, const char *name,
                        const char *file, int64_t line);
/* A frame's symbol set.  0 or -EIO. */
int symstore_set_frame(struct symstore *s, int64_t frame, int64_t set);
/* A name for a frame recorded without one (system_name kept if it had
 * one).  0 or -EIO. */
int symstore_name_frame(struct symstore *s, int64_t frame, const char *name,
                        const char *system_name);

#endif
