/*
 * The heap model of a running process (live.h): a reading's stacks as
 * stack tables in memory, and its per-stack counters as heap states.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/live.h"
#include "symbolize/symbolize.h"
#include "util/grow.h"
#include "util/str.h"

/* What a (leaf callsite, heap) gathered: the writer's merged entry. */
struct acc {
	int64_t callsite;
	uint32_t heap;
	uint64_t alloc_objs_fp, alloc_bytes, free_objs_fp, free_bytes;
};

static int64_t i64(uint64_t x)
{
	return (int64_t)x;
}

/* A new mapping row; its id, or -ENOMEM. */
static int64_t add_mapping(struct live_model *m, const char *name,
                           const struct prof_module *mod)
{
	struct rd_stacks *s = &m->s;
	struct rd_mapping *a =
	        hp_grow(s->mappings, &m->cap_maps, s->nmappings, sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->mappings = a;
	struct rd_mapping *r = &a[s->nmappings];
	memset(r, 0, sizeof(*r));
	r->id = (int64_t)s->nmappings + 1;
	r->name = strdup(name);
	if (!r->name)
		return -ENOMEM;
	if (mod) {
		r->start = i64(mod->start);
		r->end = i64(mod->end);
		r->exact_offset = i64(mod->exact_offset);
		r->load_bias = i64(mod->load_bias);
		if (mod->build_id_len) {
			r->build_id = malloc(2 * mod->build_id_len + 1);
			if (!r->build_id) {
				free(r->name);
				return -ENOMEM;
			}
			for (uint32_t k = 0; k < mod->build_id_len; k++)
				snprintf(r->build_id + 2 * k, 3, "%02x",
				         mod->build_id[k]);
		}
	}
	s->nmappings++;
	return r->id;
}

/* The names of rel_pc in module mod into *r (malloc'd): from the cache,
 * else from the symbolizer (and then kept).  0 or -ENOMEM. */
static int lookup(struct live_model *m, struct symbolizer *sym,
                  const struct prof_module *mod, uint64_t rel_pc,
                  struct sym_result *r)
{
	struct live_names *c = m->cache;
	uint64_t key[2] = {mod->start, rel_pc};
	int oom = 0;

	int64_t *at = c ? hmap_find(&c->idx, key, sizeof(key)) : NULL;
	if (at) {
		r->name = hp_strdup_opt(c->e[*at - 1].name, &oom);
		r->system_name = hp_strdup_opt(c->e[*at - 1].system_name, &oom);
		return oom ? -ENOMEM : 0;
	}
	if (symbolizer_lookup(sym, mod->path, mod->build_id, mod->build_id_len,
	                      rel_pc, r))
		return -ENOMEM;
	struct sym_result *e =
	        c ? hp_grow(c->e, &c->cap, c->n, sizeof(*e)) : NULL;
	if (!e)
		return 0; /* no cache, or no room for it: named all the same */
	c->e = e;
	e[c->n].name = hp_strdup_opt(r->name, &oom);
	e[c->n].system_name = hp_strdup_opt(r->system_name, &oom);
	if (oom || hmap_put(&c->idx, key, sizeof(key), (int64_t)c->n + 1)) {
		sym_result_fini(&e[c->n]);
		return 0;
	}
	c->n++;
	return 0;
}

void live_names_free(struct live_names *c)
{
	for (size_t i = 0; i < c->n; i++)
		sym_result_fini(&c->e[i]);
	free(c->e);
	hmap_free(&c->idx);
	memset(c, 0, sizeof(*c));
}

/* FNV-1a over the modules' addresses and paths: a module loaded or
 * unloaded since the last reading empties the cache. */
static uint64_t modules_hash(const struct prof_dump *d)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < d->nmodules; i++) {
		const struct prof_module *m = &d->modules[i];
		uint64_t v[3] = {m->start, m->end, m->base};
		for (size_t k = 0; k < 3; k++)
			h = (h ^ v[k]) * 1099511628211ull;
		for (const char *p = m->path ? m->path : ""; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211ull;
	}
	return h;
}

/* The frame (mapping, rel_pc), named on first sight (fixed, or from mod
 * through sym); its id, or -ENOMEM. */
static int64_t frame_of(struct live_model *m, struct symbolizer *sym,
                        int64_t mapping, uint64_t rel_pc,
                        const struct prof_module *mod, const char *fixed)
{
	int64_t id = pairmap_get(&m->frame_idx, mapping, i64(rel_pc));
	if (id)
		return id;
	struct rd_stacks *s = &m->s;
	struct rd_frame *a =
	        hp_grow(s->frames, &m->cap_frames, s->nframes, sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->frames = a;
	struct sym_result r = {NULL, NULL};
	if (fixed) {
		if (!(r.name = strdup(fixed)))
			return -ENOMEM;
	} else if (mod && lookup(m, sym, mod, rel_pc, &r) < 0) {
		return -ENOMEM;
	}
	bool added;
	struct pairmap_slot *sl =
	        pairmap_slot(&m->frame_idx, mapping, i64(rel_pc), &added);
	if (!sl) {
		sym_result_fini(&r);
		return -ENOMEM;
	}
	id = (int64_t)s->nframes + 1;
	a[s->nframes++] = (struct rd_frame){.id = id,
	                                    .mapping = mapping,
	                                    .rel_pc = i64(rel_pc),
	                                    .name = r.name,
	                                    .system_name = r.system_name};
	sl->v = id;
	return id;
}

/* The callsite (parent, frame) at depth; its id, or -ENOMEM. */
static int64_t callsite_of(struct live_model *m, int64_t parent, int64_t frame,
                           int64_t depth)
{
	int64_t id = pairmap_get(&m->cs_idx, parent, frame);
	if (id)
		return id;
	struct rd_stacks *s = &m->s;
	struct rd_callsite *a =
	        hp_grow(s->callsites, &m->cap_cs, s->ncallsites, sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->callsites = a;
	bool added;
	struct pairmap_slot *sl =
	        pairmap_slot(&m->cs_idx, parent, frame, &added);
	if (!sl)
		return -ENOMEM;
	id = (int64_t)s->ncallsites + 1;
	a[s->ncallsites++] = (struct rd_callsite){id, parent, frame, depth};
	sl->v = id;
	return id;
}

/* The frame of return address pc in d's modules; its id, or -ENOMEM. */
static int64_t pc_frame(struct live_model *m, const struct prof_dump *d,
                        struct symbolizer *sym, uint64_t pc)
{
	/* A return address: the call is in the byte before it. */
	for (size_t i = 0; pc && i < d->nmodules; i++) {
		const struct prof_module *mod = &d->modules[i];
		if (pc - 1 < mod->start || pc - 1 >= mod->end)
			continue;
		if (!m->module_map[i]) {
			int64_t id =
			        add_mapping(m, mod->path ? mod->path : "", mod);
			if (id < 0)
				return id;
			m->module_map[i] = id;
		}
		return frame_of(m, sym, m->module_map[i], pc - mod->base, mod,
		                NULL);
	}
	if (!m->unknown_map &&
	    (m->unknown_map = add_mapping(m, PROF_MAPPING_UNKNOWN, NULL)) < 0)
		return m->unknown_map;
	return frame_of(m, sym, m->unknown_map, pc, NULL, NULL);
}

/* The leaf callsite of stack st; its id, or -ENOMEM. */
static int64_t stack_leaf(struct live_model *m, const struct prof_dump *d,
                          struct symbolizer *sym, const struct prof_stack *st)
{
	if ((st->flags & HP_STACK_OVERFLOW) || st->nframes == 0 || !st->pcs) {
		int full = (st->flags & HP_STACK_OVERFLOW) != 0;
		if (!m->heapprof_map &&
		    (m->heapprof_map =
		             add_mapping(m, PROF_MAPPING_HEAPPROF, NULL)) < 0)
			return m->heapprof_map;
		int64_t f = frame_of(
		        m, sym, m->heapprof_map, full ? 0 : 1, NULL,
		        full ? PROF_FRAME_STACK_FULL : PROF_FRAME_EMPTY);
		return f < 0 ? f : callsite_of(m, 0, f, 0);
	}
	int64_t parent = 0;
	for (uint32_t k = st->nframes; k-- > 0;) {
		int64_t f = pc_frame(m, d, sym, st->pcs[k]);
		if (f < 0)
			return f;
		parent = callsite_of(m, parent, f, st->nframes - 1 - k);
		if (parent < 0)
			return parent;
	}
	return parent;
}

static int cmp_heap(const void *a, const void *b)
{
	const struct live_heap *x = a, *y = b;
	return rd_heap_cmp(x->name, y->name);
}

static int cmp_sample(const void *a, const void *b)
{
	int64_t x = ((const struct rd_sample *)a)->callsite;
	int64_t y = ((const struct rd_sample *)b)->callsite;
	return x < y ? -1 : x > y;
}

/* The heap of id in m, added if new (named as the writer names it);
 * NULL if out of memory. */
static struct live_heap *heap_of(struct live_model *m,
                                 const struct prof_dump *d, uint32_t id,
                                 size_t *cap)
{
	for (size_t i = 0; i < m->nheaps; i++)
		if (m->heaps[i].id == id)
			return &m->heaps[i];
	struct live_heap *a = hp_grow(m->heaps, cap, m->nheaps, sizeof(*a));
	if (!a)
		return NULL;
	m->heaps = a;
	struct live_heap *h = &a[m->nheaps];
	memset(h, 0, sizeof(*h));
	h->id = id;
	char buf[32];
	const char *name = prof_heap_name(d, id, buf, sizeof(buf));
	if (!(h->name = strdup(name)))
		return NULL;
	m->nheaps++;
	return h;
}

/* The views of an entry, rounded as the writer rounds its rows. */
static void acc_views(const struct acc *a, int64_t v[RD_NVIEWS])
{
	uint64_t ao = prof_objects(a->alloc_objs_fp);
	uint64_t fo = prof_objects(a->free_objs_fp);

	v[RD_ALLOC_SPACE] = i64(a->alloc_bytes);
	v[RD_SPACE] = i64(a->alloc_bytes - a->free_bytes);
	v[RD_ALLOC_OBJECTS] = i64(ao);
	v[RD_OBJECTS] = i64(ao - fo);
}

/* Fill the heaps from the entries. */
static int fill_heaps(struct live_model *m, const struct prof_dump *d,
                      const struct acc *e, size_t n)
{
	size_t cap = 0;

	for (size_t i = 0; i < n; i++) {
		struct live_heap *h = heap_of(m, d, e[i].heap, &cap);
		if (!h)
			return -ENOMEM;
		struct rd_sample *x = hp_grow(h->x, &h->cap, h->n, sizeof(*x));
		if (!x)
			return -ENOMEM;
		h->x = x;
		struct rd_sample *y = &x[h->n++];
		y->callsite = e[i].callsite;
		acc_views(&e[i], y->v);
		for (int k = 0; k < RD_NVIEWS; k++)
			h->tot[k] += y->v[k];
	}
	for (size_t i = 0; i < m->nheaps; i++)
		if (m->heaps[i].n > 1)
			qsort(m->heaps[i].x, m->heaps[i].n,
			      sizeof(*m->heaps[i].x), cmp_sample);
	if (m->nheaps > 1)
		qsort(m->heaps, m->nheaps, sizeof(*m->heaps), cmp_heap);
	return 0;
}

int live_model_build(struct live_model *m, const struct prof_dump *d,
                     struct symbolizer *sym, struct live_names *cache,
                     int all_heaps)
{
	struct pairmap idx; /* (leaf callsite, heap) -> entry + 1 */
	struct acc *e = NULL;
	size_t ne = 0, cap = 0;
	int err = 0;

	memset(m, 0, sizeof(*m));
	if (cache) {
		uint64_t h = modules_hash(d);
		if (h != cache->modules_hash) {
			live_names_free(cache);
			hmap_init(&cache->idx);
			cache->modules_hash = h;
		}
		m->cache = cache;
	}
	pairmap_init(&m->frame_idx);
	pairmap_init(&m->cs_idx);
	pairmap_init(&idx);
	m->module_map = calloc(d->nmodules + 1, sizeof(*m->module_map));
	if (!m->module_map)
		err = -ENOMEM;
	for (size_t i = 0; !err && i < d->nstacks; i++) {
		const struct prof_stack *st = &d->stacks[i];
		if (st->heap_id != 0 && !all_heaps)
			continue;
		int64_t leaf = stack_leaf(m, d, sym, st);
		if (leaf < 0) {
			err = (int)leaf;
			break;
		}
		bool added;
		struct pairmap_slot *sl =
		        pairmap_slot(&idx, leaf, st->heap_id, &added);
		struct acc *a = sl ? hp_grow(e, &cap, ne, sizeof(*a)) : NULL;
		if (!a) {
			err = -ENOMEM;
			break;
		}
		e = a;
		size_t at = added ? ne : (size_t)(sl->v - 1);
		if (added) {
			e[ne++] = (struct acc){.callsite = leaf,
			                       .heap = st->heap_id};
			sl->v = (int64_t)ne;
		}
		a = &e[at];
		/* An entry found in idx was set when it was added; the
		 * analyzer cannot tell. */
		// NOLINTNEXTLINE(clang-analyzer-core.uninitialized.Assign)
		a->alloc_objs_fp += st->alloc_objects_fp;
		a->alloc_bytes += st->alloc_bytes;
		a->free_objs_fp += st->free_objects_fp;
		a->free_bytes += st->free_bytes;
	}
	if (!err)
		err = fill_heaps(m, d, e, ne);
	pairmap_free(&idx);
	free(e);
	return err;
}

void live_model_free(struct live_model *m)
{
	rd_free_stacks(&m->s);
	for (size_t i = 0; i < m->nheaps; i++) {
		free(m->heaps[i].name);
		free(m->heaps[i].x);
	}
	free(m->heaps);
	pairmap_free(&m->frame_idx);
	pairmap_free(&m->cs_idx);
	free(m->module_map);
	memset(m, 0, sizeof(*m));
}

const struct live_heap *live_model_heap(const struct live_model *m,
                                        const char *name)
{
	for (size_t i = 0; i < m->nheaps; i++)
		if (!strcmp(m->heaps[i].name, name))
			return &m->heaps[i];
	return NULL;
}
