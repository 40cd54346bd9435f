/*
 * Reading a profile back: open a file read-only after checking it is a
 * heapprof profile, and load the stack tables (mappings, frames,
 * callsites) into memory for walking call stacks.
 *
 * Errors: functions print one line "heapprof: <subsys>: ..." to stderr and
 * return NULL or a negative errno.  A reader never trusts the file: ids may
 * dangle and parent chains may loop; lookups return NULL for unknown ids.
 */
#ifndef HEAPPROF_PROFILE_READER_H
#define HEAPPROF_PROFILE_READER_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Open path read-only.  Prints why and returns NULL if it is missing, not
 * a SQLite database, or lacks the heapprof tables.  Close with
 * sqlite3_close().
 */
sqlite3 *reader_open(const char *path, const char *subsys);

struct rd_mapping {
	int64_t id;
	char *name;     /* path; never NULL ("" if unknown) */
	char *build_id; /* lowercase hex or NULL */
};

struct rd_frame {
	int64_t id;
	int64_t mapping;
	int64_t rel_pc;
	char *name; /* demangled; NULL if unknown */
};

struct rd_callsite {
	int64_t id;
	int64_t parent; /* 0 at the root */
	int64_t frame;
	int64_t depth;
};

/* The stack tables, each sorted by id. */
struct rd_stacks {
	struct rd_mapping *mappings;
	size_t nmappings;
	struct rd_frame *frames;
	size_t nframes;
	struct rd_callsite *callsites;
	size_t ncallsites;
};

/* Load every mapping, frame and callsite.  0 or negative errno. */
int reader_load_stacks(sqlite3 *db, const char *subsys, struct rd_stacks *s);
void reader_free_stacks(struct rd_stacks *s);

const struct rd_mapping *rd_mapping_get(const struct rd_stacks *s, int64_t id);
const struct rd_frame *rd_frame_get(const struct rd_stacks *s, int64_t id);
const struct rd_callsite *rd_callsite_get(const struct rd_stacks *s,
                                          int64_t id);

/* Longest caller chain followed; guards against loops in a bad file. */
#define RD_MAX_DEPTH 4096

#endif
