/*
 * `heapprof report`'s tables of functions (cmd_report.c): the top
 * functions by self or inclusive amount of analysis/aggregate.h, with the
 * call path of each self entry's heaviest stack, and the formatting every
 * part of the report shares.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report.h"
#include "model/focus.h"
#include "util/err.h"
#include "util/human.h"

#define PATH_FRAMES 4  /* callers shown under a top self entry */
#define NAME_MAX_W  70 /* function names are cut to this width in tables */

const char *const report_view_help[RD_NVIEWS] = {
        "allocated and not freed at the dump",
        "allocated since the start, freed or not",
        "objects allocated and not freed at the dump",
        "objects allocated since the start, freed or not",
};

/* ---- small formatting helpers ------------------------------------------- */

char *rep_fmt_value(char *buf, size_t len, enum rd_view v, int64_t x)
{
	if (v == RD_SPACE || v == RD_ALLOC_SPACE)
		return hp_fmt_bytes(buf, len, x);
	snprintf(buf, len, "%" PRId64, x);
	return buf;
}

char *rep_fmt_pct(char *buf, size_t len, int64_t part, int64_t total)
{
	if (total <= 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f%%", 100.0 * (double)part / total);
	return buf;
}

/* Seconds from ns, for boot-time timestamps and durations. */
double rep_secs(int64_t ns)
{
	return (double)ns / 1e9;
}

/* Print s cut to at most w bytes (with "..."), then pad to w if pad. */
void rep_put_cut(const char *s, int w, int pad)
{
	int n = (int)strlen(s);

	if (n > w)
		printf("%.*s...", w - 3, s);
	else
		printf("%s%*s", s, pad ? w - n : 0, "");
}

/* ---- tables ------------------------------------------------------------- */

/* funcs_build, saying why it failed.  0 or -1. */
int rep_build_funcs(struct funcs *g, const struct rd_stacks *s,
                    const struct rd_sample *leaves, size_t n, enum rd_view v,
                    int v2)
{
	if (funcs_build(g, s, leaves, n, v, v2) < 0) {
		hp_err(SUBSYS, "out of memory");
		return -1;
	}
	return 0;
}

/*
 * Copy a C++ name with template arguments collapsed to "<...>", which
 * keeps the class and method visible in a narrow column.  0 if the angle
 * brackets do not balance (an operator< or a C name): dst untouched.
 */
static int collapse_templates(char *dst, size_t len, const char *src)
{
	size_t o = 0;
	int depth = 0;

	for (const char *p = src; *p && o + 6 < len; p++) {
		if (*p == '<' && depth++ == 0) {
			memcpy(dst + o, "<...>", 5);
			o += 5;
		} else if (*p == '>' && depth > 0) {
			depth--;
		} else if (depth == 0) {
			dst[o++] = *p;
		}
	}
	if (depth != 0)
		return 0;
	dst[o] = '\0';
	return 1;
}

/* A function's name for a table (tree_func_short: the module is in a
 * column of its own), long C++ names with their templates collapsed. */
static void fn_label(char *buf, size_t len, const struct tree *g, int32_t f)
{
	char pc[32];
	const char *name = tree_func_short(g, f, pc, sizeof(pc));

	if (strlen(name) <= NAME_MAX_W || !collapse_templates(buf, len, name))
		snprintf(buf, len, "%s", name);
}

/* The callers of the heaviest stack of a self entry, a few levels up. */
static void print_path(const struct rd_stacks *s, struct funcs *a,
                       const struct funcs_fn *fn)
{
	struct tree *g = &a->tree;
	const struct rd_callsite *c = rd_callsite_get(s, fn->best_callsite);
	const struct rd_callsite *leaf = c;
	char label[256];
	int shown = 0, depth = 0, hidden = 0;

	if (fn->nstacks > 1)
		printf("         (%zu call stacks; the largest:)\n",
		       fn->nstacks);
	for (; c && depth < RD_MAX_DEPTH; depth++) {
		const int32_t *funcs, *lines;
		int len = tree_frame_chain(g, c->frame, &funcs, &lines);
		/* The leaf's innermost function is the entry itself. */
		for (int k = len - (c == leaf ? 2 : 1); k >= 0; k--) {
			const char *file = tree_func_file(g, funcs[k]);
			if (shown >= PATH_FRAMES) {
				hidden++;
				continue;
			}
			fn_label(label, sizeof(label), g, funcs[k]);
			fputs("         <- ", stdout);
			rep_put_cut(label, 90, 0);
			printf("  (%s",
			       ag_basename(tree_func_module(g, funcs[k])));
			if (file)
				printf(" %s:%d", ag_basename(file), lines[k]);
			printf(")%s\n", k > 0 ? " inlined" : "");
			shown++;
		}
		c = c->parent ? rd_callsite_get(s, c->parent) : NULL;
	}
	if (hidden)
		printf("         <- ... %d more frame%s\n", hidden,
		       hidden == 1 ? "" : "s");
}

/* Widths of the value columns and the function column for the first
 * `rows` entries. */
static void top_widths(const struct funcs *g, const size_t *order, size_t rows,
                       const struct rep_table *t, int *val_w, int *val2_w,
                       int *fn_w)
{
	char val[HP_FMT_BYTES_MAX], label[256];

	*val_w = (int)strlen(t->col);
	*val2_w = t->v2 >= 0 ? (int)strlen(t->col2) : 0;
	*fn_w = (int)strlen("function");
	for (size_t i = 0; i < rows; i++) {
		const struct funcs_fn *fn = &g->fns[order[i]];
		int w = (int)strlen(rep_fmt_value(
		        val, sizeof(val), t->v, t->self ? fn->self : fn->incl));
		*val_w = w > *val_w ? w : *val_w;
		if (t->v2 >= 0) {
			w = (int)strlen(rep_fmt_value(val, sizeof(val),
			                              (enum rd_view)t->v2,
			                              fn->self2));
			*val2_w = w > *val2_w ? w : *val2_w;
		}
		fn_label(label, sizeof(label), &g->tree, fn->func);
		w = (int)strlen(label);
		*fn_w = w > *fn_w ? w : *fn_w;
	}
	*fn_w = *fn_w > NAME_MAX_W ? NAME_MAX_W : *fn_w;
}

void rep_print_table(const struct rd_stacks *s, struct funcs *g,
                     const struct rep_table *t)
{
	size_t n = 0;
	size_t *order = funcs_order(g, t->self, &n);
	char val[HP_FMT_BYTES_MAX], pct[16], label[256];
	int val_w, val2_w, fn_w;

	if (!order) {
		hp_err(SUBSYS, "out of memory");
		return;
	}
	size_t rows = n < (size_t)t->top ? n : (size_t)t->top;
	printf("\n%s:\n", t->heading);
	top_widths(g, order, rows, t, &val_w, &val2_w, &fn_w);
	if (n == 0) {
		printf("    (none)\n");
	} else {
		printf("    %3s  %*s  %6s  ", "#", val_w, t->col, "%");
		if (t->v2 >= 0)
			printf("%*s  ", val2_w, t->col2);
		printf("%-*s  %s\n", fn_w, "function", "module");
	}
	for (size_t i = 0; i < rows; i++) {
		const struct funcs_fn *fn = &g->fns[order[i]];
		int64_t x = t->self ? fn->self : fn->incl;
		fn_label(label, sizeof(label), &g->tree, fn->func);
		printf("    %3zu  %*s  %6s  ", i + 1, val_w,
		       rep_fmt_value(val, sizeof(val), t->v, x),
		       rep_fmt_pct(pct, sizeof(pct), x, t->total));
		if (t->v2 >= 0)
			printf("%*s  ", val2_w,
			       rep_fmt_value(val, sizeof(val),
			                     (enum rd_view)t->v2, fn->self2));
		rep_put_cut(label, fn_w, 1);
		printf("  %s",
		       ag_basename(tree_func_module(&g->tree, fn->func)));
		if (fn->file)
			printf("  %s:%" PRId64, ag_basename(fn->file),
			       fn->line);
		putchar('\n');
		if (t->self)
			print_path(s, g, fn);
	}
	if (n > rows)
		printf("    ... %zu more\n", n - rows);
	free(order);
}

void rep_print_top(const struct rd_stacks *s, struct funcs *g, enum rd_view v,
                   int64_t total, long top, int self)
{
	char heading[160];

	snprintf(heading, sizeof(heading), "  Top %ld by %s %s%s", top,
	         self ? "self" : "inclusive", rd_view_names[v],
	         self ? " (the function that called the allocator)"
	              : " (the function anywhere on the stack)");
	struct rep_table t = {.heading = heading,
	                      .v = v,
	                      .col = rd_view_names[v],
	                      .v2 = -1,
	                      .total = total,
	                      .top = top,
	                      .self = self};
	rep_print_table(s, g, &t);
}

/* The top functions of h by view v, with v2 beside it. */
int rep_print_trace_top(const struct rd_stacks *s, const struct tr_heap *h,
                        const char *heading, enum rd_view v, const char *col,
                        enum rd_view v2, const char *col2, long top)
{
	struct funcs g;
	int err = rep_build_funcs(&g, s, h->s, h->n, v, (int)v2);

	if (!err) {
		struct rep_table t = {.heading = heading,
		                      .v = v,
		                      .col = col,
		                      .v2 = (int)v2,
		                      .col2 = col2,
		                      .total = h->tot[v],
		                      .top = top,
		                      .self = 1};
		rep_print_table(s, &g, &t);
	}
	funcs_free(&g);
	return err;
}

/* ---- --callers / --callees ------------------------------------------- */

/* The children of every node of f, largest first: kids[first[i] ..
 * first[i + 1]) are node i's (i = n: the roots).  0 or -ENOMEM. */
static int focus_children(const struct focus *f, int32_t **kids_out,
                          size_t **first_out)
{
	size_t n = f->n.parent.n;
	size_t *first = calloc(n + 2, sizeof(*first));
	int32_t *kids = malloc((n ? n : 1) * sizeof(*kids));
	if (!first || !kids) {
		free(first);
		free(kids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		int32_t p = f->n.parent.v[i];
		first[(p < 0 ? n : (size_t)p) + 1]++;
	}
	for (size_t i = 0; i <= n; i++)
		first[i + 1] += first[i];
	size_t *at = calloc(n + 1, sizeof(*at));
	if (!at) {
		free(first);
		free(kids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		int32_t p = f->n.parent.v[i];
		size_t slot = p < 0 ? n : (size_t)p;
		kids[first[slot] + at[slot]++] = (int32_t)i;
	}
	free(at);
	/* Largest first (insertion sort: a node has few children). */
	for (size_t p = 0; p <= n; p++)
		for (size_t i = first[p] + 1; i < first[p + 1]; i++)
			for (size_t j = i;
			     j > first[p] &&
			     f->val[kids[j]] > f->val[kids[j - 1]];
			     j--) {
				int32_t t = kids[j];
				kids[j] = kids[j - 1];
				kids[j - 1] = t;
			}
	*kids_out = kids;
	*first_out = first;
	return 0;
}

static void print_focus_node(const struct focus *f, const struct tree *g,
                             enum rd_view v, int64_t total, const int32_t *kids,
                             const size_t *first, int32_t node, int depth,
                             long top)
{
	char val[HP_FMT_BYTES_MAX], pc[16], label[256];
	fn_label(label, sizeof(label), g, f->n.func.v[node]);
	printf("    %12s %6s  %*s",
	       rep_fmt_value(val, sizeof(val), v, f->val[node]),
	       rep_fmt_pct(pc, sizeof(pc), f->val[node], total), 2 * depth, "");
	rep_put_cut(label, 100, 0);
	const char *mod = tree_func_module(g, f->n.func.v[node]);
	printf("  (%s)\n", ag_basename(mod));
	if (depth >= RD_MAX_DEPTH)
		return;
	size_t n = first[node + 1] - first[node];
	for (size_t i = 0; i < n && (long)i < top; i++)
		print_focus_node(f, g, v, total, kids, first,
		                 kids[first[node] + i], depth + 1, top);
	if ((long)n > top)
		printf("    %22s %6s  %*s... %zu more\n", "", "",
		       2 * (depth + 1), "", n - (size_t)top);
}

int rep_print_focus(const struct rd_stacks *s, const struct rd_sample *leaves,
                    size_t n, enum rd_view v, int64_t heap_total,
                    const char *glob, bool callers, long top)
{
	struct tree g;
	struct focus f;
	int32_t *kids = NULL;
	size_t *first = NULL;
	char a[HP_FMT_BYTES_MAX], b[HP_FMT_BYTES_MAX], pc[16];

	if (tree_init(&g, s) < 0) {
		tree_free(&g);
		return -ENOMEM;
	}
	int err = focus_build(&f, &g, leaves, n, v, glob, callers);
	if (!err)
		err = focus_children(&f, &kids, &first);
	if (!err && !f.stacks) {
		printf("    no stack of this heap is through %s\n", glob);
	} else if (!err) {
		printf("    %s of %s: %s (%s of the heap) on %zu stack%s;"
		       " self %s\n",
		       callers ? "callers" : "callees", glob,
		       rep_fmt_value(a, sizeof(a), v, f.total),
		       rep_fmt_pct(pc, sizeof(pc), f.total, heap_total),
		       f.stacks, f.stacks == 1 ? "" : "s",
		       rep_fmt_value(b, sizeof(b), v, f.self));
		size_t roots = f.n.parent.n;
		for (size_t i = first[roots]; i < first[roots + 1]; i++)
			print_focus_node(&f, &g, v, heap_total, kids, first,
			                 kids[i], 0, top);
	}
	free(kids);
	free(first);
	focus_free(&f);
	tree_free(&g);
	return err;
}
