/*
 * One aggregation of a dump's stacks, shared by the commands that show
 * them (report, diff, flamegraph, pprof; see docs/ARCHITECTURE.md):
 *
 *  - by function, self and inclusive, in one view (`heapprof report`'s
 *    tables of the top functions of a heap, of its leaks and of its
 *    temporary allocations);
 *  - a diff of two dumps, possibly of two files, by stack and by leaf
 *    function matched by what they mean (`heapprof diff`), and the
 *    loading of each side;
 *  - the top N of either, largest first;
 *  - the window of a trace that pprof and flamegraph --from/--to show.
 *
 * The flame graph's aggregation by call path (a tree of nodes, and the
 * state of a heap at each dump) is calltree.h.
 *
 * The input is a heap's state at a dump as reader_load_samples gives it
 * (or a set of the trace's, trace_read.h): one rd_sample per leaf
 * callsite.  The aggregations print nothing: errors are returned (-ENOMEM)
 * and the command says them; loading a side prints the reader's messages.
 */
#ifndef HEAPPROF_PROFILE_AGGREGATE_H
#define HEAPPROF_PROFILE_AGGREGATE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/reader.h"
#include "profile/trace_read.h"
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

/* ---- by function, self and inclusive ----------------------------------- */

/* A function (name + module, or an unnamed frame) and its amounts. */
struct ag_fn {
	const char *name; /* NULL: unknown, shown as 0x<rel_pc> */
	const char *module;
	int64_t rel_pc;
	/* Source position in this function on its heaviest stack (offline
	 * symbols); file NULL if unknown. */
	const char *file;
	int64_t line, loc_value;
	int64_t self, incl;
	int64_t self2; /* self in the table's second column, if any */
	int64_t best_callsite, best_value; /* heaviest stack ending here */
	size_t nstacks;
	size_t stamp; /* last stack counted into incl */
};

struct ag_funcs {
	struct hmap idx;
	struct ag_fn *fns;
	size_t n, cap;
	/* The function of each frame and of each offline symbol (by index
	 * in the stack tables) + 1, 0 until looked up: a stack's frames are
	 * mostly frames other stacks had, and building ag_fn's key costs
	 * more than the rest of a frame's work. */
	size_t *frame_fn, *sym_fn;
};

/*
 * The functions of n leaves by view v (and v2 in self2, unless v2 < 0):
 * each leaf's value charged to its innermost function (self) and once to
 * every function on its stack (inclusive), each frame expanded into the
 * functions inlined at its address.  0 or -ENOMEM; free with
 * ag_funcs_free either way.
 */
int ag_funcs_build(struct ag_funcs *g, const struct rd_stacks *s,
                   const struct rd_sample *leaves, size_t n, enum rd_view v,
                   int v2);
void ag_funcs_free(struct ag_funcs *g);

/* Indices of g's functions with a nonzero amount (self or inclusive),
 * largest first; NULL if out of memory. */
size_t *ag_funcs_order(const struct ag_funcs *g, int self, size_t *n);

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
 * they mean: per frame, the module's file name and the function name (the
 * frame's address in its module when the name is unknown).  Stacks that
 * differ only in call sites inside the same functions are one stack here.
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
/* Add side k's (0: A, 1: B) n samples over stacks s.  0 or -ENOMEM. */
int ag_diff_add(struct ag_diff *d, int k, const struct rd_stacks *s,
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
