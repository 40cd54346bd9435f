/*
 * The heap model's call tree (tree.h): functions, frame chains, the
 * top-down tree and bottom-up paths.
 */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tree.h"
#include "util/clock.h"
#include "util/grow.h"

#define CS_UNRESOLVED (-1)
#define CS_BUSY       (-2) /* on the resolution stack: a parent loop */

static const int32_t zero_line;

/* ---- growable arrays ---------------------------------------------------- */

static int ivec_push(struct tree_ivec *a, int32_t x)
{
	int32_t *b = hp_grow(a->v, &a->cap, a->n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	a->v = b;
	a->v[a->n++] = x;
	return 0;
}

/* ---- functions, frames and nodes ---------------------------------------- */

/*
 * Lookups by id, with a fast path for the usual dense ids (id = index + 1)
 * before the reader's binary search.
 */
static const struct rd_callsite *callsite_get(const struct rd_stacks *s,
                                              int64_t id)
{
	if (id >= 1 && (uint64_t)id <= s->ncallsites &&
	    s->callsites[id - 1].id == id)
		return &s->callsites[id - 1];
	return rd_callsite_get(s, id);
}

static const struct rd_frame *frame_get(const struct rd_stacks *s, int64_t id)
{
	if (id >= 1 && (uint64_t)id <= s->nframes && s->frames[id - 1].id == id)
		return &s->frames[id - 1];
	return rd_frame_get(s, id);
}

static int32_t intern_file(struct tree *g, const char *file)
{
	if (!file || !*file)
		return -1;
	size_t len = strlen(file);
	int64_t *found = hmap_find(&g->file_idx, file, len);
	if (found)
		return (int32_t)*found;
	const char **b =
	        hp_grow((void *)g->files, &g->files_cap, g->nfiles, sizeof(*b));
	if (!b)
		return -2;
	g->files = b;
	if (hmap_put(&g->file_idx, file, len, (int64_t)g->nfiles) < 0)
		return -2;
	g->files[g->nfiles] = file;
	return (int32_t)g->nfiles++;
}

/* The function (module, file, name); -1 if out of memory. */
static int32_t intern_func(struct tree *g, int32_t module, int32_t file,
                           const char *name, int named, int64_t rel_pc)
{
	size_t nlen = strlen(name);
	size_t klen = 2 * sizeof(int32_t) + nlen;
	char small[256];
	char *key = klen <= sizeof(small) ? small : malloc(klen);
	int32_t id = -1;

	if (!key)
		return -1;
	memcpy(key, &module, sizeof(module));
	memcpy(key + sizeof(module), &file, sizeof(file));
	memcpy(key + 2 * sizeof(int32_t), name, nlen);
	int64_t *found = hmap_find(&g->func_idx, key, klen);
	if (found) {
		id = (int32_t)*found;
		goto out;
	}
	struct tree_func *b =
	        hp_grow(g->funcs, &g->funcs_cap, g->nfuncs, sizeof(*b));
	if (!b)
		goto out;
	g->funcs = b;
	char *copy = strdup(name);
	if (!copy || hmap_put(&g->func_idx, key, klen, (int64_t)g->nfuncs)) {
		free(copy);
		goto out;
	}
	g->funcs[g->nfuncs] =
	        (struct tree_func){copy, module, file, named, rel_pc};
	id = (int32_t)g->nfuncs++;
out:
	if (key != small)
		free(key);
	return id;
}

/* A frame without a name: "module+0xrelpc". */
static int32_t unnamed_func(struct tree *g, int32_t module,
                            const char *mod_path, int64_t rel_pc)
{
	char buf[320];

	snprintf(buf, sizeof(buf), "%s+0x%" PRIx64,
	         mod_path && *mod_path ? hp_base_name(mod_path) : "[unknown]",
	         (uint64_t)rel_pc);
	return intern_func(g, module, -1, buf, 0, rel_pc);
}

/* Compute the (func, line) chain of frame fi.  0 or -ENOMEM. */
static int frame_chain(struct tree *g, size_t fi)
{
	const struct rd_stacks *s = g->s;
	const struct rd_frame *f = &s->frames[fi];
	const struct rd_mapping *m = rd_mapping_get(s, f->mapping);
	int32_t module = m ? (int32_t)(m - s->mappings) : -1;
	const char *mod_path = m ? m->name : NULL;
	size_t nsym = 0;
	const struct rd_symbol *sym = rd_frame_symbols(s, f, &nsym);
	int32_t off = (int32_t)g->chain_func.n;

	if (nsym == 0) {
		int32_t fn =
		        f->name && *f->name
		                ? intern_func(g, module, -1, f->name, 1, 0)
		                : unnamed_func(g, module, mod_path, f->rel_pc);
		if (fn < 0 || ivec_push(&g->chain_func, fn) ||
		    ivec_push(&g->chain_line, 0))
			return -ENOMEM;
	}
	/* Symbols are innermost first: the chain wants callers first. */
	for (size_t k = nsym; k-- > 0;) {
		const struct rd_symbol *y = &sym[k];
		int32_t file = intern_file(g, y->source_file);
		const char *name = y->name && *y->name ? y->name : NULL;
		if (!name && k == nsym - 1 && f->name && *f->name)
			name = f->name; /* the outermost is the frame's own */
		if (file < -1)
			return -ENOMEM;
		int32_t fn =
		        name ? intern_func(g, module, file, name, 1, 0)
		             : unnamed_func(g, module, mod_path, f->rel_pc);
		int64_t line = y->line > 0 && y->line < INT32_MAX ? y->line : 0;
		if (fn < 0 || ivec_push(&g->chain_func, fn) ||
		    ivec_push(&g->chain_line, (int32_t)line))
			return -ENOMEM;
	}
	g->frame_off[fi] = off;
	g->frame_len[fi] = (int32_t)(g->chain_func.n - (size_t)off);
	return 0;
}

/* The child of node parent (-1: a root) for func in t; -2 if out of
 * memory. */
static int32_t child_node(struct tree_nodes *t, int32_t parent, int32_t func,
                          int32_t line)
{
	bool added;
	struct pairmap_slot *sl = pairmap_slot(&t->idx, parent, func, &added);

	if (!sl)
		return -2;
	if (!added) {
		int32_t n = (int32_t)(sl->v - 1);
		if (t->line.v[n] != line)
			t->line.v[n] = -1; /* several lines */
		return n;
	}
	int32_t n = (int32_t)t->parent.n;
	if (n == INT32_MAX || ivec_push(&t->parent, parent) ||
	    ivec_push(&t->func, func) || ivec_push(&t->line, line))
		return -2; /* sl stays empty */
	sl->v = (int64_t)n + 1;
	return n;
}

/* The node of the frame chain of callsite ci under parent; -1 on ENOMEM. */
static int32_t callsite_nodes(struct tree *g, size_t ci, int32_t parent)
{
	const int32_t *funcs, *lines;
	int len =
	        tree_frame_chain(g, g->s->callsites[ci].frame, &funcs, &lines);
	int32_t node = len < 0 ? -2 : parent;

	for (int k = 0; k < len && node >= -1; k++)
		node = child_node(&g->top, node, funcs[k], lines[k]);
	return node < -1 ? -1 : node;
}

/*
 * The leaf node of callsite ci, creating it and its callers' nodes (callers
 * first).  A parent loop or a chain deeper than RD_MAX_DEPTH is cut: the
 * callsite where it is cut becomes a root.  -1 if out of memory.
 */
static int32_t resolve(struct tree *g, size_t ci)
{
	const struct rd_stacks *s = g->s;
	size_t n = 0, cur = ci;
	int32_t node = -1;

	for (;;) {
		if (g->cs_node[cur] >= 0) {
			node = g->cs_node[cur];
			break;
		}
		if (g->cs_node[cur] == CS_BUSY || n > RD_MAX_DEPTH)
			break;
		g->cs_node[cur] = CS_BUSY;
		g->stack[n++] = cur;
		const struct rd_callsite *c = &s->callsites[cur];
		const struct rd_callsite *p =
		        c->parent ? callsite_get(s, c->parent) : NULL;
		if (!p)
			break;
		cur = (size_t)(p - s->callsites);
	}
	while (n) {
		cur = g->stack[--n];
		node = callsite_nodes(g, cur, node);
		if (node < 0) {
			/* Leave no callsite marked busy. */
			g->cs_node[cur] = CS_UNRESOLVED;
			while (n)
				g->cs_node[g->stack[--n]] = CS_UNRESOLVED;
			return -1;
		}
		g->cs_node[cur] = node;
	}
	return node;
}

int tree_init(struct tree *g, const struct rd_stacks *s)
{
	memset(g, 0, sizeof(*g));
	g->s = s;
	g->unknown_node = -1;
	g->unknown_frame = -1;
	hmap_init(&g->func_idx);
	hmap_init(&g->file_idx);
	tree_nodes_init(&g->top);
	g->frame_off = calloc(s->nframes + 1, sizeof(*g->frame_off));
	g->frame_len = calloc(s->nframes + 1, sizeof(*g->frame_len));
	g->cs_node = malloc((s->ncallsites + 1) * sizeof(*g->cs_node));
	g->stack = malloc((RD_MAX_DEPTH + 2) * sizeof(*g->stack));
	if (!g->frame_off || !g->frame_len || !g->cs_node || !g->stack)
		return -ENOMEM;
	for (size_t i = 0; i < s->ncallsites; i++)
		g->cs_node[i] = CS_UNRESOLVED;
	return 0;
}

void tree_free(struct tree *g)
{
	for (size_t i = 0; i < g->nfuncs; i++)
		free(g->funcs[i].name);
	free(g->funcs);
	free((void *)g->files);
	hmap_free(&g->func_idx);
	hmap_free(&g->file_idx);
	tree_nodes_free(&g->top);
	free(g->frame_off);
	free(g->frame_len);
	free(g->chain_func.v);
	free(g->chain_line.v);
	free(g->cs_node);
	free(g->stack);
}

int32_t tree_slot_node(struct tree *g, size_t i)
{
	if (i < g->s->ncallsites)
		return resolve(g, i);
	if (g->unknown_node < 0) {
		int32_t fn = intern_func(g, -1, -1, "[unknown callsite]", 0, 0);
		g->unknown_node = fn < 0 ? -1 : child_node(&g->top, -1, fn, 0);
	}
	return g->unknown_node;
}

int tree_frame_chain(struct tree *g, int64_t frame, const int32_t **funcs,
                     const int32_t **lines)
{
	const struct rd_frame *f = frame_get(g->s, frame);

	if (!f) {
		if (g->unknown_frame < 0)
			g->unknown_frame =
			        intern_func(g, -1, -1, "[unknown frame]", 0, 0);
		if (g->unknown_frame < 0)
			return -1;
		*funcs = &g->unknown_frame;
		*lines = &zero_line;
		return 1;
	}
	size_t fi = (size_t)(f - g->s->frames);
	if (!g->frame_len[fi] && frame_chain(g, fi) < 0)
		return -1;
	*funcs = &g->chain_func.v[g->frame_off[fi]];
	*lines = &g->chain_line.v[g->frame_off[fi]];
	return g->frame_len[fi];
}

size_t tree_slot(const struct rd_stacks *s, int64_t id)
{
	const struct rd_callsite *c = id ? callsite_get(s, id) : NULL;
	return c ? (size_t)(c - s->callsites) : s->ncallsites;
}

int32_t tree_leaf_node(struct tree *g, int64_t callsite)
{
	return tree_slot_node(g, tree_slot(g->s, callsite));
}

const char *tree_func_short(const struct tree *g, int32_t f, char *buf,
                            size_t len)
{
	const struct tree_func *fn = &g->funcs[f];

	if (fn->named || !fn->rel_pc)
		return fn->name;
	snprintf(buf, len, "0x%" PRIx64, (uint64_t)fn->rel_pc);
	return buf;
}

const char *tree_func_module(const struct tree *g, int32_t f)
{
	int32_t m = g->funcs[f].module;
	return m >= 0 ? g->s->mappings[m].name : NULL;
}

const char *tree_func_file(const struct tree *g, int32_t f)
{
	int32_t k = g->funcs[f].file;
	return k >= 0 ? g->files[k] : NULL;
}

/* ---- the bottom-up tree -------------------------------------------------- */

void tree_nodes_init(struct tree_nodes *t)
{
	memset(t, 0, sizeof(*t));
	pairmap_init(&t->idx);
}

void tree_nodes_free(struct tree_nodes *t)
{
	pairmap_free(&t->idx);
	free(t->parent.v);
	free(t->func.v);
	free(t->line.v);
	memset(t, 0, sizeof(*t));
}

int32_t tree_nodes_child(struct tree_nodes *t, int32_t parent, int32_t func,
                         int32_t line)
{
	int32_t n = child_node(t, parent, func, line);
	return n < 0 ? -1 : n;
}

int tree_bottom_up(const struct tree *g, struct tree_nodes *inv, int32_t node,
                   int32_t *out, size_t max)
{
	size_t n = 0;
	int32_t up = -1;

	for (; node >= 0 && n < max; node = g->top.parent.v[node]) {
		up = child_node(inv, up, g->top.func.v[node],
		                g->top.line.v[node]);
		if (up < 0)
			return -1;
		out[n++] = up;
	}
	return (int)n;
}

int tree_names_match(struct tree *g, const char *glob)
{
	for (size_t i = 0; i < g->s->nframes; i++) {
		const int32_t *funcs, *lines;
		int n = tree_frame_chain(g, g->s->frames[i].id, &funcs, &lines);
		if (n < 0)
			return -ENOMEM;
		for (int k = 0; k < n; k++)
			if (!fnmatch(glob, g->funcs[funcs[k]].name, 0))
				return 1;
	}
	return 0;
}
