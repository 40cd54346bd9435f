/*
 * What the commands that compare and rank the heap model's states share
 * (report, diff, flamegraph, pprof; see docs/ARCHITECTURE.md):
 *
 *  - a diff of two dumps, possibly of two files, by stack and by leaf
 *    function matched by what they mean (`heapprof diff`), and the
 *    loading of each side;
 *  - the top N of a ranking, largest first;
 *  - the window of a trace that pprof and flamegraph --from/--to show.
 *
 * The state of a heap at a dump is model/state.h, its call tree and
 * functions model/tree.h and model/funcs.h.  The input here is a state as
 * state_at_dump gives it (or a set of the trace's, trace_read.h): one
 * rd_sample per leaf callsite.  Nothing here prints: errors are returned
 * (-ENOMEM) and the command says them; loading a side prints the
 * reader's messages.
 */
#ifndef HEAPPROF_ANALYSIS_AGGREGATE_H
#define HEAPPROF_ANALYSIS_AGGREGATE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "model/tree.h"
#include "store/reader.h"
#include "store/trace_read.h"
#include "util/hmap.h"

/* A path's last component ("?" if none): how modules and source files are
 * named in tables and matched across files. */
const char *ag_basename(const char *path);

/* The sum of each view over n samples. */
void ag_totals(const struct rd_sample *x, size_t n, int64_t tot[RD_NVIEWS]);

/* Which entries ag_rank keeps, and how it orders them. */
enum ag_rank {
	AG_NONZERO,  /* key != 0, largest key first */
	AG_POSITIVE, /* key > 0, largest first */
	AG_NEGATIVE, /* key < 0, largest absolute value first */
};

/*
 * The indices of the n keys that `which` keeps, in its order (ties: by
 * index, i.e. first seen first); *count gets how many.  Malloc'ed; NULL if
 * out of memory.
 */
size_t *ag_rank(const int64_t *key, size_t n, enum ag_rank which,
                size_t *count);

/* ---- a window of the trace (--from/--to) ------------------------------- */

/* --from/--to of pprof and flamegraph: since each process's start, ns. */
struct ag_window {
	int window, have_from, have_to;
	int64_t from_ns, to_ns;
};

/*
 * The window w of the trace t of process p in boot time: [*from, *to),
 * `to` at most the end of what was recorded (so messages name a real
 * time).  *begin and *end get what the trace covers: from its first event
 * or the process's start, whichever is first (the trace may start a little
 * before the recorded start), to after its last event or the process's
 * end; without --from the window starts at *begin, without --to it ends
 * at *end.
 */
void ag_window_bounds(const struct rd_process *p, const struct tr_info *t,
                      const struct ag_window *w, int64_t *begin, int64_t *end,
                      int64_t *from, int64_t *to);

/* ---- a diff of two ----------------------------------------------------- */

/* A stack or function (by symbolic identity) and its values in A and B. */
struct ag_entry {
	int64_t v[2][RD_NVIEWS];
	int rep_side; /* where to find a callsite to print it */
	int64_t rep_callsite;
};

struct ag_table {
	struct hmap idx;
	struct ag_entry *e;
	size_t n, cap;
};

/*
 * Stacks of two files have different ids, so stacks are matched by what
 * they mean: by the path of their nodes in the heap model's tree
 * (model/tree.h), each function by its module's file name, its source
 * file's name and its name ("module+0xrelpc" when it has none).  Stacks
 * that differ only in call sites inside the same functions are one stack
 * here.
 */
struct ag_diff {
	struct ag_table stacks; /* by the whole chain */
	struct ag_table fns;    /* by the leaf frame (self) */
};

/* One side of a diff: a dump of a process of a profile file, and the state
 * of a heap at it. */
struct ag_side {
	const char *file;
	/* Loaded; db and stacks may be shared with the other side. */
	sqlite3 *db;
	struct rd_stacks *s;
	struct tree *tree; /* the heap model's tree of s */
	int owns;
	struct rd_process *procs;
	size_t nprocs;
	const struct rd_process *proc; /* chosen by the caller */
	struct rd_dump *dumps;         /* of proc, loaded by the caller */
	size_t ndumps, dump_index;     /* 1-based, chosen by the caller */
	struct rd_sample *samples;
	size_t nsamples;
	int64_t total[RD_NVIEWS];
};

/*
 * Open sd->file and load its stacks and processes; other's file and stacks
 * when other (NULL: none) is the same file.  0 or -1 (message "heapprof:
 * <subsys>: ..." printed).
 */
int ag_side_open(struct ag_side *sd, const struct ag_side *other,
                 const char *subsys);
/* Whether the process of sd has allocations in heap `heap`: 1, 0, or -1
 * (message printed). */
int ag_side_has_heap(const struct ag_side *sd, const char *heap,
                     const char *subsys);
/* The state of heap `heap` at sd's dump, and its totals.  0 or -1 (message
 * printed). */
int ag_side_load(struct ag_side *sd, const char *heap, const char *subsys);
void ag_side_free(struct ag_side *sd);

void ag_diff_init(struct ag_diff *d);
void ag_diff_free(struct ag_diff *d);
/* Add side k's (0: A, 1: B) n samples over the tree g of its stacks.  0
 * or -ENOMEM. */
int ag_diff_add(struct ag_diff *d, int k, struct tree *g,
                const struct rd_sample *x, size_t n);

/* B - A of e in view v. */
static inline int64_t ag_delta(const struct ag_entry *e, enum rd_view v)
{
	return e->v[1][v] - e->v[0][v];
}

/* Indices of t's entries that grew (grow) or shrank in view v, largest
 * change first; NULL if out of memory. */
size_t *ag_diff_order(const struct ag_table *t, enum rd_view v, int grow,
                      size_t *n);

#endif
