/*
 * The heap model by function: a state's leaves charged to the functions of
 * the call tree (tree.h says what a function is), self and inclusive, in
 * one view.  `heapprof report`'s tables of the top functions of a heap, of
 * its leaks and of its temporary allocations, and `heapprof check`'s
 * rules read functions from here.
 */
#ifndef HEAPPROF_MODEL_FUNCS_H
#define HEAPPROF_MODEL_FUNCS_H

#include <stddef.h>
#include <stdint.h>

#include "model/tree.h"
#include "store/reader.h"

/* A function of the tree and its amounts. */
struct funcs_fn {
	int32_t func; /* index into the tree's funcs */
	/* Source position in this function on its heaviest stack (offline
	 * symbols); file NULL if unknown. */
	const char *file;
	int64_t line, loc_value;
	int64_t self, incl;
	int64_t self2; /* self in the table's second column, if any */
	int64_t self_v[RD_NVIEWS];         /* self in each view */
	int64_t incl_v[RD_NVIEWS];         /* inclusive in each view */
	int64_t best_callsite, best_value; /* heaviest stack ending here */
	size_t nstacks;
	size_t stamp; /* last stack counted into incl */
};

struct funcs {
	struct tree tree;
	struct funcs_fn *fns; /* in the order first met */
	size_t n, cap;
	int32_t *of_func; /* tree function -> fns index + 1; 0: none */
	size_t of_func_cap;
};

/*
 * The functions of n leaves over stacks s by view v (and v2 in self2,
 * unless v2 < 0): each leaf's value charged to its innermost function
 * (self) and once to every function on its stack (inclusive).  Leaves
 * with a zero value in v are skipped.  0 or -ENOMEM; free with funcs_free
 * either way.
 */
int funcs_build(struct funcs *a, const struct rd_stacks *s,
                const struct rd_sample *leaves, size_t n, enum rd_view v,
                int v2);
void funcs_free(struct funcs *a);

/* Indices of a's functions with a nonzero amount (self or inclusive),
 * largest first, ties first met first; NULL if out of memory. */
size_t *funcs_order(const struct funcs *a, int self, size_t *n);

#endif
