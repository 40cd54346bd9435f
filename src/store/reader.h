/*
 * Reading a profile back: open a file read-only after checking it is a
 * heapprof profile, and load the stack tables (mappings, frames,
 * callsites) into memory for walking call stacks.
 *
 * Errors: functions print one line "heapprof: <subsys>: ..." to stderr and
 * return NULL or a negative errno.  A reader never trusts the file: ids may
 * dangle and parent chains may loop; lookups return NULL for unknown ids.
 */
#ifndef HEAPPROF_STORE_READER_H
#define HEAPPROF_STORE_READER_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "store/schema.h"

/*
 * Open path read-only.  Prints why and returns NULL if it is missing, not
 * a SQLite database, or lacks the heapprof tables.  Close with
 * sqlite3_close().
 */
sqlite3 *rd_open(const char *path, const char *subsys);

/* As rd_open, but read-write (for `heapprof symbolize`). */
sqlite3 *rd_open_rw(const char *path, const char *subsys);

/*
 * Small helpers for code that reads a profile with its own SQL.  Tables
 * and columns are added to the format over time, so a reader asks before
 * it reads (rd_has_table: a table or view; rd_has_column).  rd_prepare
 * prints "heapprof: <subsys>: reading profile: ..." and returns NULL on
 * error; rd_finish ends a row loop whose last sqlite3_step returned rc
 * (SQLITE_DONE, an error, or -ENOMEM from the caller), finalizes st and
 * returns 0 or a negative errno (message printed).
 */
int rd_has_table(sqlite3 *db, const char *name);
int rd_has_column(sqlite3 *db, const char *table, const char *col);
sqlite3_stmt *rd_prepare(sqlite3 *db, const char *subsys, const char *sql);
int rd_finish(sqlite3 *db, const char *subsys, sqlite3_stmt *st, int rc);

struct rd_mapping {
	int64_t id;
	char *name;     /* path; never NULL ("" if unknown) */
	char *build_id; /* lowercase hex or NULL */
	/* Where the module was loaded: [start, end) is its executable
	 * segment's address range, exact_offset that segment's file offset,
	 * load_bias its p_vaddr - p_offset.  The load base (where ELF vaddr
	 * 0 is) is start - exact_offset - load_bias, and a frame's absolute
	 * address is that base + rel_pc. */
	int64_t start, end, exact_offset, start_offset, load_bias;
};

/*
 * A frame: the return address rel_pc (an ELF virtual address of the
 * module: pc - load bias) in a mapping.  Every frame heapprof records is a
 * return address, the leaf too (the return address into the caller of
 * malloc), so the call instruction is at rel_pc - 1.
 */
struct rd_frame {
	int64_t id;
	int64_t mapping;
	int64_t rel_pc;
	char *name;            /* demangled; NULL if unknown */
	char *system_name;     /* as in the symbol table (mangled); or NULL */
	int64_t symbol_set_id; /* into stack_profile_symbol; 0 if none */
};

/*
 * A row of stack_profile_symbol (written by `heapprof symbolize`): one
 * source-level function at a frame's address.  A frame's symbol set has
 * one row per function, ordered by id with the innermost (inlined) first
 * and the function the code was inlined into last.
 */
struct rd_symbol {
	int64_t id;
	int64_t symbol_set_id;
	char *name;        /* demangled; NULL if unknown */
	char *source_file; /* NULL if unknown */
	int64_t line;      /* 0 if unknown */
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
	struct rd_symbol *symbols; /* sorted by (symbol_set_id, id) */
	size_t nsymbols;
};

/* Load every mapping, frame, callsite and symbol.  0 or negative errno. */
int rd_load_stacks(sqlite3 *db, const char *subsys, struct rd_stacks *s);
void rd_free_stacks(struct rd_stacks *s);

const struct rd_mapping *rd_mapping_get(const struct rd_stacks *s, int64_t id);
const struct rd_frame *rd_frame_get(const struct rd_stacks *s, int64_t id);
const struct rd_callsite *rd_callsite_get(const struct rd_stacks *s,
                                          int64_t id);

/*
 * The symbols of a frame (offline symbolization), innermost first; *n gets
 * their count.  NULL (and *n = 0) if the frame was not symbolized offline;
 * then use the frame's own name.
 */
const struct rd_symbol *rd_frame_symbols(const struct rd_stacks *s,
                                         const struct rd_frame *f, size_t *n);

/* ---- processes, dumps, heaps and the state of a heap at a dump --------- */

/*
 * A process and how it was profiled (process + heapprof_process).  A
 * profile written before a column existed reads it as 0 / NULL.
 */
struct rd_process {
	int64_t upid;
	int64_t pid;
	char *name;               /* never NULL */
	char *cmdline;            /* never NULL */
	int64_t interval;         /* sampling interval in bytes */
	int64_t start_ts, end_ts; /* end_ts 0 while running */
	int has_end;              /* end_ts was recorded */

	char *unwind; /* "dwarf", "fp"; never NULL ("" if unknown) */
	int64_t max_frames, shmem_size;
	int from_startup;
	/* Nothing was recorded for it (no dumps), and why (enum
	 * prof_not_profiled in store/schema.h); 0: profiled. */
	int rejected_concurrent;
	int disconnected; /* went away before the session ended */
	int has_exit;
	int64_t exit_status; /* 0..255 or 128+signal, if has_exit */
	int64_t client_state, stop_reason; /* hp_client_state, hp_stop_reason */
	/* "command", "pid", "name", "fork" or "exec"; never NULL ("command"
	 * in profiles before sessions). */
	char *how;
	int64_t ppid;          /* 0 if unknown */
	int64_t session_id;    /* daemon's session id; 0 for record -- CMD */
	char *note;            /* why it was not profiled, or NULL */
	int64_t interval_used; /* at the last dump (adaptive sampling may
	                          raise it); 0 if unknown */
	/* The highest peak of its at-max dumps (--dump-at-max); 0 if none. */
	int64_t max_live_bytes, max_ts;
	/* Not followed (no --follow-exec / --follow-fork): the image it
	 * exec'd, or NULL; the pid of the first child it forked, or 0. */
	char *exec_not_followed;
	int64_t children_not_followed;
};

struct rd_dump {
	int64_t ts;
	char *reason; /* never NULL */
	/* --dump-at-max: the dump holds the state at the peak of live bytes,
	 * max_live_bytes charged bytes at max_ts. */
	int at_max;
	int64_t max_ts, max_live_bytes;
	int64_t interval_used; /* the interval in effect; 0 if unknown */
	char *name; /* a named snapshot's name; NULL for other dumps */
	int64_t id; /* heapprof_dump.id (heapprof_block.dump_id) */
};

/* Every process, by upid.  0 or negative errno (message printed). */
int rd_load_processes(sqlite3 *db, const char *subsys, struct rd_process **out,
                      size_t *n);
void rd_free_processes(struct rd_process *p, size_t n);

/* The dumps of a process, by ts.  0 or negative errno (message printed). */
int rd_load_dumps(sqlite3 *db, const char *subsys, int64_t upid,
                  struct rd_dump **out, size_t *n);
void rd_free_dumps(struct rd_dump *d, size_t n);

/* Memory over time: the values of process upid's counter track `name`
 * ("mem.heap", "mem.heap.HEAP", "mem.rss": collector/curve.c) by ts.
 * n 0 when it has none (or the profile predates them).  0 or a negative
 * errno (message printed); free with rd_free_counter either way. */
struct rd_counter {
	int64_t *ts;
	double *v;
	size_t n;
};
int rd_load_counter(sqlite3 *db, const char *subsys, int64_t upid,
                    const char *name, struct rd_counter *out);
void rd_free_counter(struct rd_counter *c);

/*
 * The heap names with allocations in a process, "libc.malloc" first then
 * by name.  0 or negative errno (message printed).
 */
int rd_load_heaps(sqlite3 *db, const char *subsys, int64_t upid, char ***out,
                  size_t *n);
void rd_free_heaps(char **h, size_t n);

/* The four views of heapprof and pprof. */
enum rd_view {
	RD_SPACE,         /* bytes allocated and not freed at the dump */
	RD_ALLOC_SPACE,   /* bytes allocated up to the dump */
	RD_OBJECTS,       /* objects allocated and not freed */
	RD_ALLOC_OBJECTS, /* objects allocated up to the dump */
	RD_NVIEWS
};
extern const char *const rd_view_names[RD_NVIEWS];

/* One leaf callsite of a heap at a dump, with its value in each view. */
struct rd_sample {
	int64_t callsite;
	int64_t v[RD_NVIEWS];
};

/* Add one heap_profile_allocation row (size, count) to x's four views. */
void rd_sample_add(struct rd_sample *x, int64_t size, int64_t count);
/* The order of heap names everywhere: libc.malloc first, then by name. */
int rd_heap_cmp(const char *a, const char *b);

/* Longest caller chain followed; guards against loops in a bad file. */
#define RD_MAX_DEPTH 4096

#endif
