/*
 * A function's callers and callees, merged (focus.h).
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "model/focus.h"

static int add_value(struct focus *f, int32_t node, int64_t v)
{
	if ((size_t)node >= f->cap) {
		size_t cap = f->cap ? f->cap : 64;
		while (cap <= (size_t)node)
			cap *= 2;
		int64_t *a = realloc(f->val, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		memset(a + f->cap, 0, (cap - f->cap) * sizeof(*a));
		f->val = a;
		f->cap = cap;
	}
	f->val[node] += v;
	return 0;
}

int focus_build(struct focus *f, struct tree *g, const struct rd_sample *x,
                size_t n, enum rd_view v, const char *glob, bool callers)
{
	int32_t path[RD_MAX_DEPTH + 1];
	unsigned char *match = NULL; /* per tree function: 0 unknown, 1, 2 */
	size_t nmatch = 0;
	int err = 0;

	memset(f, 0, sizeof(*f));
	tree_nodes_init(&f->n);
	for (size_t i = 0; !err && i < n; i++) {
		int64_t val = x[i].v[v];
		if (!val)
			continue;
		int32_t node = tree_leaf_node(g, x[i].callsite);
		if (node < 0) {
			err = -ENOMEM;
			break;
		}
		/* The stack, root first. */
		size_t len = 0;
		for (int32_t k = node; k >= 0 && len <= RD_MAX_DEPTH;
		     k = g->top.parent.v[k])
			path[len++] = k;
		for (size_t a = 0, b = len - 1; a < b; a++, b--) {
			int32_t t = path[a];
			path[a] = path[b];
			path[b] = t;
		}
		if (g->nfuncs > nmatch) {
			unsigned char *m = realloc(match, g->nfuncs);
			if (!m) {
				err = -ENOMEM;
				break;
			}
			memset(m + nmatch, 0, g->nfuncs - nmatch);
			match = m;
			nmatch = g->nfuncs;
		}
		size_t at = len;
		if (!match)
			continue; /* no function at all: nothing matches */
		for (size_t k = 0; k < len && at == len; k++) {
			int32_t fn = g->top.func.v[path[k]];
			if (!match[fn])
				match[fn] = fnmatch(glob, g->funcs[fn].name, 0)
				                    ? 1
				                    : 2;
			if (match[fn] == 2)
				at = k;
		}
		if (at == len)
			continue;
		f->total += val;
		f->stacks++;
		if (at == len - 1)
			f->self += val;
		int32_t up = -1;
		if (callers) {
			for (size_t k = at + 1; k-- > 0 && !err;) {
				up = tree_nodes_child(
				        &f->n, up, g->top.func.v[path[k]], 0);
				err = up < 0 ? -ENOMEM : add_value(f, up, val);
			}
		} else {
			for (size_t k = at; k < len && !err; k++) {
				up = tree_nodes_child(
				        &f->n, up, g->top.func.v[path[k]], 0);
				err = up < 0 ? -ENOMEM : add_value(f, up, val);
			}
		}
	}
	free(match);
	return err;
}

void focus_free(struct focus *f)
{
	tree_nodes_free(&f->n);
	free(f->val);
	memset(f, 0, sizeof(*f));
}
