/*
 * A profile's stacks by call path, the flame graph's aggregation (the
 * page of `heapprof flamegraph`, src/flamegraph/page.c; by function it is
 * aggregate.h):
 *
 *  - functions, interned by (module, source file, name);
 *  - the call tree, callers before callees: a recorded callsite becomes
 *    one node per function of its frame's inline chain (offline symbols,
 *    outermost first), and callsites of the same function under the same
 *    parent share a node;
 *  - the state of a heap at each of its dumps per leaf callsite, summed in
 *    one pass over its allocation rows in ts order (a dump's state is the
 *    sum of the rows up to its ts), so the work is linear in the rows.
 */
#ifndef HEAPPROF_PROFILE_CALLTREE_H
#define HEAPPROF_PROFILE_CALLTREE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/pairmap.h"
#include "profile/reader.h"
#include "util/hmap.h"

/* ---- growable arrays ---------------------------------------------------- */

struct ct_ivec {
	int32_t *v;
	size_t n, cap;
};

/* ---- functions, frames and nodes ---------------------------------------- */

struct ct_func {
	char *name;
	int32_t module; /* index into s->mappings, -1 if unknown */
	int32_t file;   /* index into files, -1 if unknown */
};

struct calltree {
	const struct rd_stacks *s;
	/* Functions, interned by (module, file, name). */
	struct ct_func *funcs;
	size_t nfuncs, funcs_cap;
	struct hmap func_idx;
	/* Source files, interned by name (the strings belong to s). */
	const char **files;
	size_t nfiles, files_cap;
	struct hmap file_idx;
	/* Per frame (index into s->frames): its chain of (func, line),
	 * outermost first, at chain[frame_off[i]..]; frame_len 0 until
	 * computed. */
	int32_t *frame_off, *frame_len;
	struct ct_ivec chain_func, chain_line;
	/* The node tree, parents first. */
	struct ct_ivec node_parent, node_func, node_line;
	struct pairmap node_idx; /* (parent, func) -> node + 1 */
	/* Per callsite (index into s->callsites): its node, or CS_*. */
	int32_t *cs_node;
	size_t *stack;        /* RD_MAX_DEPTH + 1 callsite indices */
	int32_t unknown_node; /* for rows with an unknown callsite; or -1 */
};

/* 0 or -ENOMEM; ct_free either way. */
int ct_init(struct calltree *g, const struct rd_stacks *s);
void ct_free(struct calltree *g);

/* ---- the state of a heap at a dump -------------------------------------- */

/*
 * Running state of one heap while its rows are read in ts order: per
 * callsite index (the last slot: rows whose callsite is unknown) the sum of
 * the four views, and the slots ever touched.
 */
struct ct_state {
	int64_t *v; /* (ncallsites + 1) * RD_NVIEWS */
	uint8_t *seen;
	size_t *touched;
	size_t ntouched;
};

/* 0 or -ENOMEM; ct_state_free either way. */
int ct_state_init(struct ct_state *a, const struct rd_stacks *s);
void ct_state_free(struct ct_state *a);
void ct_state_reset(struct ct_state *a);
/* Add one leaf's four views (callsite 0: unknown). */
void ct_state_add_sample(struct ct_state *a, const struct rd_stacks *s,
                         const struct rd_sample *x);

/* The node of state slot i (a callsite's leaf node, created with its
 * callers' nodes, or the unknown callsite's); -1 if out of memory. */
int32_t ct_slot_node(struct calltree *g, size_t i);

/*
 * The states of heap `heap` of process upid at each of its ndumps dumps,
 * from one pass over its rows in ts order: at_dump(ctx, d, a) is called
 * for d = 0, 1, ... with a holding the state at dumps[d].  0, the first
 * error of at_dump, or -EIO ("heapprof: <subsys>: reading allocations:
 * ..." printed).
 */
int ct_walk_dumps(sqlite3 *db, const char *subsys, const struct rd_stacks *s,
                  struct ct_state *a, int64_t upid, const char *heap,
                  const struct rd_dump *dumps, size_t ndumps,
                  int (*at_dump)(void *ctx, size_t d, const struct ct_state *a),
                  void *ctx);

#endif
