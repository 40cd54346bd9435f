/*
 * The heap model's state: the one code that turns recorded rows into a
 * heap's state per call stack (tree.h says what a stack's functions and
 * nodes are).  A state holds, per leaf callsite, the four views of
 * reader.h (enum rd_view):
 *
 *   space, objects              what was allocated and not freed
 *   alloc_space, alloc_objects  what was allocated, freed or not
 *
 * at a dump: the sum of the process's rows of that heap up to the dump's
 * ts (rows are per-dump deltas; the alloc_* views sum only the positive
 * ones).  The peak is the dump written at it (--dump-at-max), the end the
 * last; a time window of a trace is trace_read.h's tr_window, in the same
 * four views.
 *
 * Errors: "heapprof: <subsys>: ..." printed, a negative errno returned.
 */
#ifndef HEAPPROF_MODEL_STATE_H
#define HEAPPROF_MODEL_STATE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/reader.h"
#include "store/trace_read.h"

/*
 * Running state of one heap while its rows are read in ts order: per slot
 * (tree.h's tree_slot: a callsite's index, the last slot for rows whose
 * callsite is unknown) the sum of the four views, and the slots ever
 * touched.
 */
struct state {
	int64_t *v; /* (ncallsites + 1) * RD_NVIEWS */
	uint8_t *seen;
	size_t *touched;
	size_t ntouched;
};

/* 0 or -ENOMEM; state_free either way. */
int state_init(struct state *a, const struct rd_stacks *s);
void state_free(struct state *a);
void state_reset(struct state *a);
/* Add one leaf's four views (callsite 0: unknown). */
void state_add_sample(struct state *a, const struct rd_stacks *s,
                      const struct rd_sample *x);

/*
 * The states of heap `heap` of process upid at each of its ndumps dumps,
 * from one pass over its rows in ts order: at_dump(ctx, d, a) is called
 * for d = 0, 1, ... with a holding the state at dumps[d].  0, the first
 * error of at_dump, or -EIO (message printed).
 */
int state_walk_dumps(sqlite3 *db, const char *subsys, const struct rd_stacks *s,
                     struct state *a, int64_t upid, const char *heap,
                     const struct rd_dump *dumps, size_t ndumps,
                     int (*at_dump)(void *ctx, size_t d, const struct state *a),
                     void *ctx);

/*
 * The state of heap `heap` (NULL: every heap together) of process upid at
 * the dump at ts: one entry per leaf callsite with any non-zero value, by
 * callsite id.  0 or a negative errno (message printed).
 */
int state_at_dump(sqlite3 *db, const char *subsys, int64_t upid,
                  const char *heap, int64_t ts, struct rd_sample **out,
                  size_t *n);

/* A heap's totals at a dump. */
struct state_heap {
	char *name;
	int64_t t[RD_NVIEWS];
};

/*
 * The heaps of process upid with rows up to ts, libc.malloc first then by
 * name, with their totals.  Their number, or -1 (message printed); free
 * with state_free_heaps.
 */
ssize_t state_heaps_at(sqlite3 *db, const char *subsys, int64_t upid,
                       int64_t ts, struct state_heap **out);
void state_free_heaps(struct state_heap *h, size_t n);

/* The totals of every heap of process upid at ts together.  0 or a
 * negative errno (message printed). */
int state_totals_at(sqlite3 *db, const char *subsys, int64_t upid, int64_t ts,
                    int64_t tot[RD_NVIEWS]);

/*
 * The blocks live at the end of process upid (its final dump), per heap
 * and leaf callsite, in the four views of trace_read.h's sets (the alloc_*
 * views repeat space and objects): the dump's blocks when it kept them
 * (exact), else its state (space, objects).  0 or a negative errno
 * (message printed).
 */
int state_leaks(sqlite3 *db, const char *subsys, int64_t upid,
                struct tr_set *out, struct tr_leak_src *src);

#endif
