/*
 * The heap model by function (funcs.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/funcs.h"
#include "util/grow.h"
#include "analysis/aggregate.h"

void funcs_free(struct funcs *a)
{
	tree_free(&a->tree);
	free(a->fns);
	free(a->of_func);
	memset(a, 0, sizeof(*a));
}

/* The entry of tree function f, added if new; NULL if out of memory. */
static struct funcs_fn *fn_get(struct funcs *a, int32_t f)
{
	if ((size_t)f >= a->of_func_cap) {
		size_t cap = a->of_func_cap ? a->of_func_cap : 1024;
		while (cap <= (size_t)f)
			cap *= 2;
		int32_t *b = realloc(a->of_func, cap * sizeof(*b));
		if (!b)
			return NULL;
		memset(b + a->of_func_cap, 0,
		       (cap - a->of_func_cap) * sizeof(*b));
		a->of_func = b;
		a->of_func_cap = cap;
	}
	if (a->of_func[f])
		return &a->fns[a->of_func[f] - 1];
	struct funcs_fn *b = hp_grow(a->fns, &a->cap, a->n, sizeof(*b));
	if (!b)
		return NULL;
	a->fns = b;
	struct funcs_fn *fn = &a->fns[a->n++];
	memset(fn, 0, sizeof(*fn));
	fn->func = f;
	a->of_func[f] = (int32_t)a->n;
	return fn;
}

/* Charge one stack's value to its leaf (self) and every function on it,
 * innermost first. */
static int add_stack(struct funcs *a, const struct rd_sample *l, int64_t value,
                     int64_t value2, size_t stamp)
{
	struct tree *g = &a->tree;
	const struct rd_stacks *s = g->s;
	const struct rd_callsite *c = rd_callsite_get(s, l->callsite);

	for (int depth = 0; c && depth < RD_MAX_DEPTH; depth++) {
		const int32_t *funcs, *lines;
		int len = tree_frame_chain(g, c->frame, &funcs, &lines);
		if (len < 0)
			return -ENOMEM;
		for (int k = len; k-- > 0;) {
			struct funcs_fn *fn = fn_get(a, funcs[k]);
			if (!fn)
				return -ENOMEM;
			if (depth == 0 && k == len - 1) {
				fn->self += value;
				fn->self2 += value2;
				for (int v = 0; v < RD_NVIEWS; v++)
					fn->self_v[v] += l->v[v];
				fn->nstacks++;
				if (!fn->best_callsite ||
				    value > fn->best_value) {
					fn->best_callsite = l->callsite;
					fn->best_value = value;
				}
			}
			const char *file = tree_func_file(g, funcs[k]);
			if (file && (!fn->file || value > fn->loc_value)) {
				fn->file = file;
				fn->line = lines[k];
				fn->loc_value = value;
			}
			/* Recursion: count a function once per stack. */
			if (fn->stamp != stamp) {
				fn->stamp = stamp;
				fn->incl += value;
				for (int v = 0; v < RD_NVIEWS; v++)
					fn->incl_v[v] += l->v[v];
			}
		}
		c = c->parent ? rd_callsite_get(s, c->parent) : NULL;
	}
	return 0;
}

int funcs_build(struct funcs *a, const struct rd_stacks *s,
                const struct rd_sample *leaves, size_t n, enum rd_view v,
                int v2)
{
	memset(a, 0, sizeof(*a));
	if (tree_init(&a->tree, s) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (leaves[i].v[v] == 0)
			continue;
		if (add_stack(a, &leaves[i], leaves[i].v[v],
		              v2 >= 0 ? leaves[i].v[v2] : 0, i + 1) < 0)
			return -ENOMEM;
	}
	return 0;
}

size_t *funcs_order(const struct funcs *a, int self, size_t *n)
{
	int64_t *key = malloc((a->n ? a->n : 1) * sizeof(*key));

	*n = 0;
	if (!key)
		return NULL;
	for (size_t i = 0; i < a->n; i++)
		key[i] = self ? a->fns[i].self : a->fns[i].incl;
	size_t *order = ag_rank(key, a->n, AG_NONZERO, n);
	free(key);
	return order;
}
