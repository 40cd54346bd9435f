/*
 * A profile's stacks by call path (see calltree.h): the flame graph's
 * functions, frame chains and call tree, and the state of a heap at each
 * of its dumps.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/calltree.h"
#include "util/err.h"
#include "util/clock.h"

#define CS_UNRESOLVED (-1)
#define CS_BUSY       (-2) /* on the resolution stack: a parent loop */

/* ---- growable arrays ---------------------------------------------------- */

static int ivec_push(struct ct_ivec *a, int32_t x)
{
	if (a->n == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 1024;
		int32_t *b = realloc(a->v, ncap * sizeof(*b));
		if (!b)
			return -ENOMEM;
		a->v = b;
		a->cap = ncap;
	}
	a->v[a->n++] = x;
	return 0;
}

/* ---- functions, frames and nodes ---------------------------------------- */

/* After the last '/' (empty when the path ends with one): the module of an
 * unnamed frame's "module+0xrelpc". */
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

static int32_t intern_file(struct calltree *g, const char *file)
{
	if (!file || !*file)
		return -1;
	size_t len = strlen(file);
	int64_t *found = hmap_find(&g->file_idx, file, len);
	if (found)
		return (int32_t)*found;
	if (g->nfiles == g->files_cap) {
		size_t ncap = g->files_cap ? g->files_cap * 2 : 64;
		const char **b = realloc(g->files, ncap * sizeof(*b));
		if (!b)
			return -2;
		g->files = b;
		g->files_cap = ncap;
	}
	if (hmap_put(&g->file_idx, file, len, (int64_t)g->nfiles) < 0)
		return -2;
	g->files[g->nfiles] = file;
	return (int32_t)g->nfiles++;
}

/* The function (module, file, name); -1 if out of memory. */
static int32_t intern_func(struct calltree *g, int32_t module, int32_t file,
                           const char *name)
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
	if (g->nfuncs == g->funcs_cap) {
		size_t ncap = g->funcs_cap ? g->funcs_cap * 2 : 1024;
		struct ct_func *b = realloc(g->funcs, ncap * sizeof(*b));
		if (!b)
			goto out;
		g->funcs = b;
		g->funcs_cap = ncap;
	}
	char *copy = strdup(name);
	if (!copy || hmap_put(&g->func_idx, key, klen, (int64_t)g->nfuncs)) {
		free(copy);
		goto out;
	}
	g->funcs[g->nfuncs] = (struct ct_func){copy, module, file};
	id = (int32_t)g->nfuncs++;
out:
	if (key != small)
		free(key);
	return id;
}

/* A frame without a name: "module+0xrelpc". */
static int32_t unnamed_func(struct calltree *g, int32_t module,
                            const char *mod_path, int64_t rel_pc)
{
	char buf[320];

	snprintf(buf, sizeof(buf), "%s+0x%" PRIx64,
	         mod_path && *mod_path ? hp_base_name(mod_path) : "[unknown]",
	         (uint64_t)rel_pc);
	return intern_func(g, module, -1, buf);
}

/* Compute the (func, line) chain of frame fi.  0 or -ENOMEM. */
static int frame_chain(struct calltree *g, size_t fi)
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
		                ? intern_func(g, module, -1, f->name)
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
		        name ? intern_func(g, module, file, name)
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

/* The child of node parent (-1: a root) for func; -1 if out of memory. */
static int32_t child_node(struct calltree *g, int32_t parent, int32_t func,
                          int32_t line)
{
	bool added;
	struct pairmap_slot *sl =
	        pairmap_slot(&g->node_idx, parent, func, &added);

	if (!sl)
		return -1;
	if (!added) {
		int32_t n = (int32_t)(sl->v - 1);
		if (g->node_line.v[n] != line)
			g->node_line.v[n] = -1; /* several lines */
		return n;
	}
	int32_t n = (int32_t)g->node_parent.n;
	if (n == INT32_MAX || ivec_push(&g->node_parent, parent) ||
	    ivec_push(&g->node_func, func) || ivec_push(&g->node_line, line))
		return -1; /* sl stays empty */
	sl->v = (int64_t)n + 1;
	return n;
}

/* The node of the frame chain of callsite ci under parent; -1 on ENOMEM. */
static int32_t callsite_nodes(struct calltree *g, size_t ci, int32_t parent)
{
	const struct rd_stacks *s = g->s;
	const struct rd_frame *f = frame_get(s, s->callsites[ci].frame);

	if (!f) {
		int32_t fn = intern_func(g, -1, -1, "[unknown frame]");
		return fn < 0 ? -1 : child_node(g, parent, fn, 0);
	}
	size_t fi = (size_t)(f - s->frames);
	if (!g->frame_len[fi] && frame_chain(g, fi) < 0)
		return -1;
	int32_t node = parent;
	for (int32_t k = 0; k < g->frame_len[fi] && node >= -1; k++)
		node = child_node(g, node,
		                  g->chain_func.v[g->frame_off[fi] + k],
		                  g->chain_line.v[g->frame_off[fi] + k]);
	return node;
}

/*
 * The leaf node of callsite ci, creating it and its callers' nodes (callers
 * first).  A parent loop or a chain deeper than RD_MAX_DEPTH is cut: the
 * callsite where it is cut becomes a root.  -1 if out of memory.
 */
static int32_t resolve(struct calltree *g, size_t ci)
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

int ct_init(struct calltree *g, const struct rd_stacks *s)
{
	memset(g, 0, sizeof(*g));
	g->s = s;
	g->unknown_node = -1;
	hmap_init(&g->func_idx);
	hmap_init(&g->file_idx);
	pairmap_init(&g->node_idx);
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

void ct_free(struct calltree *g)
{
	for (size_t i = 0; i < g->nfuncs; i++)
		free(g->funcs[i].name);
	free(g->funcs);
	free((void *)g->files);
	hmap_free(&g->func_idx);
	hmap_free(&g->file_idx);
	pairmap_free(&g->node_idx);
	free(g->frame_off);
	free(g->frame_len);
	free(g->chain_func.v);
	free(g->chain_line.v);
	free(g->node_parent.v);
	free(g->node_func.v);
	free(g->node_line.v);
	free(g->cs_node);
	free(g->stack);
}

int32_t ct_slot_node(struct calltree *g, size_t i)
{
	if (i < g->s->ncallsites)
		return resolve(g, i);
	if (g->unknown_node < 0) {
		int32_t fn = intern_func(g, -1, -1, "[unknown callsite]");
		g->unknown_node = fn < 0 ? -1 : child_node(g, -1, fn, 0);
	}
	return g->unknown_node;
}

/* ---- the state of a heap at a dump -------------------------------------- */

int ct_state_init(struct ct_state *a, const struct rd_stacks *s)
{
	size_t nslots = s->ncallsites + 1;

	a->v = calloc(nslots * RD_NVIEWS, sizeof(*a->v));
	a->seen = calloc(nslots, 1);
	a->touched = malloc(nslots * sizeof(*a->touched));
	a->ntouched = 0;
	return a->v && a->seen && a->touched ? 0 : -ENOMEM;
}

void ct_state_free(struct ct_state *a)
{
	free(a->v);
	free(a->seen);
	free(a->touched);
}

static void acc_add(struct ct_state *a, size_t slot, int64_t size,
                    int64_t count)
{
	int64_t *v = &a->v[slot * RD_NVIEWS];

	if (!a->seen[slot]) {
		a->seen[slot] = 1;
		a->touched[a->ntouched++] = slot;
	}
	v[RD_SPACE] += size;
	v[RD_ALLOC_SPACE] += size > 0 ? size : 0;
	v[RD_OBJECTS] += count;
	v[RD_ALLOC_OBJECTS] += count > 0 ? count : 0;
}

void ct_state_reset(struct ct_state *a)
{
	for (size_t k = 0; k < a->ntouched; k++) {
		memset(&a->v[a->touched[k] * RD_NVIEWS], 0,
		       RD_NVIEWS * sizeof(*a->v));
		a->seen[a->touched[k]] = 0;
	}
	a->ntouched = 0;
}

void ct_state_add_sample(struct ct_state *a, const struct rd_stacks *s,
                         const struct rd_sample *x)
{
	const struct rd_callsite *c =
	        x->callsite ? callsite_get(s, x->callsite) : NULL;
	size_t slot = c ? (size_t)(c - s->callsites) : s->ncallsites;
	int64_t *v = &a->v[slot * RD_NVIEWS];

	if (!a->seen[slot]) {
		a->seen[slot] = 1;
		a->touched[a->ntouched++] = slot;
	}
	for (int k = 0; k < RD_NVIEWS; k++)
		v[k] += x->v[k];
}

int ct_walk_dumps(sqlite3 *db, const char *subsys, const struct rd_stacks *s,
                  struct ct_state *a, int64_t upid, const char *heap,
                  const struct rd_dump *dumps, size_t ndumps,
                  int (*at_dump)(void *ctx, size_t d, const struct ct_state *a),
                  void *ctx)
{
	sqlite3_stmt *st = NULL;
	size_t d = 0;
	int rc, err = 0;

	if (sqlite3_prepare_v2(db,
	                       "SELECT ts, callsite_id, size, count FROM"
	                       " heap_profile_allocation WHERE upid = ? AND"
	                       " heap_name = ? ORDER BY ts",
	                       -1, &st, NULL) != SQLITE_OK) {
		hp_err(subsys, "reading allocations: %s", sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
	ct_state_reset(a);
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t ts = sqlite3_column_int64(st, 0);
		while (!err && d < ndumps && ts > dumps[d].ts) {
			err = at_dump(ctx, d, a);
			d++;
		}
		if (d == ndumps) {
			rc = SQLITE_DONE; /* later rows are in no dump */
			break;
		}
		int64_t id = sqlite3_column_int64(st, 1);
		const struct rd_callsite *c = callsite_get(s, id);
		size_t slot = c ? (size_t)(c - s->callsites) : s->ncallsites;
		acc_add(a, slot, sqlite3_column_int64(st, 2),
		        sqlite3_column_int64(st, 3));
		rc = SQLITE_DONE;
	}
	if (!err && rc != SQLITE_DONE) {
		hp_err(subsys, "reading allocations: %s", sqlite3_errmsg(db));
		err = -EIO;
	}
	sqlite3_finalize(st);
	for (; !err && d < ndumps; d++)
		err = at_dump(ctx, d, a);
	return err;
}
