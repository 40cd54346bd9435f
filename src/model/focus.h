/*
 * Who calls a function, and what it calls: the stacks a function is on,
 * merged at it (`heapprof report --callers FUNC` and `--callees FUNC`;
 * the flame graph page's focus computes the same in the page).
 *
 * A stack counts when one of its functions matches the glob (fnmatch on
 * the heap model's function names, tree.h); at its outermost match, so
 * that recursion counts a stack once.  Callers: the matched function at
 * a root, its caller below it, and so on out to the stack's root.
 * Callees: the matched function at a root, what it called below it, down
 * to the allocator's caller.  Each node has the view's value of the
 * stacks through it.
 */
#ifndef HEAPPROF_MODEL_FOCUS_H
#define HEAPPROF_MODEL_FOCUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/tree.h"
#include "store/reader.h"

struct focus {
	struct tree_nodes n; /* functions of g */
	int64_t *val;        /* per node */
	size_t cap;
	int64_t total; /* the stacks the function is on */
	int64_t self;  /* of those, where it called the allocator */
	size_t stacks; /* how many */
};

/* The focus on glob of the n leaves x (view v) over g's stacks.  0 or
 * -ENOMEM; focus_free either way. */
int focus_build(struct focus *f, struct tree *g, const struct rd_sample *x,
                size_t n, enum rd_view v, const char *glob, bool callers);
void focus_free(struct focus *f);

#endif
