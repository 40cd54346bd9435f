/*
 * `heapprof top`'s readings (top_read.h): the regions found and mapped by
 * live_snapshot_open, their stacks copied by snapshot_take_regions, made
 * the heap model of the process (model/live.h) and summed per function as
 * `heapprof report` sums a profile's (model/funcs.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inspect/live_snapshot.h"
#include "inspect/snapshot_proc.h"
#include "inspect/top_read.h"
#include "model/funcs.h"
#include "model/live.h"
#include "symbolize/symbolize.h"
#include "util/clock.h"
#include "util/grow.h"
#include "util/hmap.h"
#include "util/memcg.h"
#include "util/proc.h"

struct top_reader {
	pid_t pid;
	struct symbolizer *sym;
	char **names; /* by index */
	size_t nnames, capnames;
	struct hmap by_name;     /* name -> index */
	struct live_names cache; /* frame names, reading to reading */
	bool all_heaps;
};

struct top_reader *top_reader_new(pid_t pid)
{
	struct top_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->pid = pid;
	hmap_init(&r->by_name);
	r->sym = symbolizer_new();
	if (!r->sym) {
		free(r);
		return NULL;
	}
	return r;
}

void top_reader_all_heaps(struct top_reader *r)
{
	r->all_heaps = true;
}

void top_reader_free(struct top_reader *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nnames; i++)
		free(r->names[i]);
	free(r->names);
	hmap_free(&r->by_name);
	live_names_free(&r->cache);
	symbolizer_free(r->sym);
	free(r);
}

const char *top_name(const struct top_reader *r, uint32_t name)
{
	return name < r->nnames ? r->names[name] : "?";
}

/* The index of name (interned).  0 or -ENOMEM. */
static int intern(struct top_reader *r, const char *name, uint32_t *out)
{
	size_t len = strlen(name);
	int64_t *found = hmap_find(&r->by_name, name, len);
	if (found) {
		*out = (uint32_t)*found;
		return 0;
	}
	char **v = hp_grow(r->names, &r->capnames, r->nnames, sizeof(*v));
	if (!v)
		return -ENOMEM;
	r->names = v;
	char *copy = strdup(name);
	if (!copy || hmap_put(&r->by_name, name, len, (int64_t)r->nnames)) {
		free(copy);
		return -ENOMEM;
	}
	r->names[r->nnames] = copy;
	*out = (uint32_t)r->nnames++;
	return 0;
}

/* ---- the memory limit ---------------------------------------------------- */

/* The memory limit of pid's cgroup, as the session watches it
 * (util/memcg.h: the lowest of its cgroup's and their ancestors'). */
static void memory_limit(pid_t pid, struct top_reading *t)
{
	struct memcg m;

	if (memcg_find(pid, NULL, &m) < 0 || !m.limit)
		return;
	t->limit = m.limit;
	t->limit_src = m.version == 2 ? "cgroup v2 memory.max"
	                              : "cgroup v1 memory.limit_in_bytes";
}

/* ---- a reading ----------------------------------------------------------- */

int64_t top_value(const struct top_counts *c, enum top_view v)
{
	int64_t ao = (int64_t)prof_objects(c->alloc_objs_fp);
	int64_t fo = (int64_t)prof_objects(c->free_objs_fp);
	switch (v) {
	case TOP_SPACE:
		return (int64_t)c->alloc_bytes - (int64_t)c->free_bytes;
	case TOP_OBJECTS:
		return ao - fo;
	case TOP_ALLOC_SPACE:
		return (int64_t)c->alloc_bytes;
	case TOP_ALLOC_OBJECTS:
	case TOP_NVIEWS:
		break;
	}
	return ao;
}

static int by_heap_name(const void *a, const void *b)
{
	const struct top_func *x = a, *y = b;
	if (x->heap != y->heap)
		return x->heap < y->heap ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

const struct top_func *top_find(const struct top_reading *t, uint32_t name)
{
	struct top_func key = {.heap = 0, .name = name};
	if (!t->nfuncs)
		return NULL;
	return bsearch(&key, t->funcs, t->nfuncs, sizeof(key), by_heap_name);
}

/* The heap of id in t, added (named from d) when new; NULL: no memory. */
static struct top_heap *heap_of(struct top_reading *t,
                                const struct prof_dump *d, uint32_t id)
{
	for (size_t i = 0; i < t->nheaps; i++)
		if (t->heaps[i].id == id)
			return &t->heaps[i];
	struct top_heap *v = realloc(t->heaps, (t->nheaps + 1) * sizeof(*v));
	if (!v)
		return NULL;
	t->heaps = v;
	struct top_heap *h = &v[t->nheaps++];
	memset(h, 0, sizeof(*h));
	h->id = id;
	const char *name =
	        id < d->nheaps && d->heaps[id].name && d->heaps[id].name[0]
	                ? d->heaps[id].name
	                : NULL;
	if (name)
		snprintf(h->name, sizeof(h->name), "%s", name);
	else
		snprintf(h->name, sizeof(h->name), "heap%" PRIu32, id);
	/* 0: the process's interval (hp_heap_select_interval) */
	h->interval = id < d->nheaps ? d->heaps[id].interval : 0;
	if (!h->interval)
		h->interval = t->interval;
	return h;
}

/* Counts from the four views of the heap model (objects exact in 16.16). */
static struct top_counts counts_of(const int64_t v[RD_NVIEWS])
{
	return (struct top_counts){
	        .alloc_bytes = (uint64_t)v[RD_ALLOC_SPACE],
	        .free_bytes = (uint64_t)(v[RD_ALLOC_SPACE] - v[RD_SPACE]),
	        .alloc_objs_fp = (uint64_t)v[RD_ALLOC_OBJECTS] * HP_OBJ_FP_ONE,
	        .free_objs_fp =
	                (uint64_t)(v[RD_ALLOC_OBJECTS] - v[RD_OBJECTS]) *
	                HP_OBJ_FP_ONE,
	};
}

/*
 * The name of function f of g as top shows it: its name, with its
 * module's (and source file's) name after it when another function of the
 * reading has the same name (two static functions, say).
 */
static int func_label(struct top_reader *r, const struct tree *g, int32_t f,
                      const struct hmap *seen, uint32_t *out)
{
	const char *name = g->funcs[f].name;
	const int64_t *count = hmap_find(seen, name, strlen(name));
	if (!count || *count < 2)
		return intern(r, name, out);
	const char *mod = tree_func_module(g, f);
	const char *file = tree_func_file(g, f);
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s (%s%s%s)", name,
	         mod ? hp_base_name(mod) : "?", file ? " " : "",
	         file ? hp_base_name(file) : "");
	return intern(r, buf, out);
}

/*
 * The functions of heap h of the reading's model lm (each leaf charged to
 * its function, as report does), appended to t.
 */
static int add_heap_funcs(struct top_reader *r, const struct live_model *lm,
                          const struct live_heap *h, struct top_reading *t,
                          size_t *cap)
{
	struct funcs a;
	struct hmap seen; /* name -> functions of that name */
	int err = funcs_build(&a, &lm->s, h->x, h->n, RD_ALLOC_SPACE, -1);
	struct tree *g = &a.tree;
	int64_t *best = calloc(a.n + 1, sizeof(*best));
	int64_t *best_cs = calloc(a.n + 1, sizeof(*best_cs));

	hmap_init(&seen);
	if (!best || !best_cs)
		err = -ENOMEM;
	/* The stack holding the most live bytes of each function. */
	for (size_t i = 0; !err && i < h->n; i++) {
		int32_t node = tree_leaf_node(g, h->x[i].callsite);
		if (node < 0) {
			err = -ENOMEM;
			break;
		}
		int32_t k = a.of_func[g->top.func.v[node]];
		if (k && (!best_cs[k] || h->x[i].v[RD_SPACE] > best[k])) {
			best[k] = h->x[i].v[RD_SPACE];
			best_cs[k] = h->x[i].callsite;
		}
	}
	for (size_t i = 0; !err && i < a.n; i++) {
		const char *name = g->funcs[a.fns[i].func].name;
		int64_t *c = hmap_find(&seen, name, strlen(name));
		if (c)
			++*c;
		else if (hmap_put(&seen, name, strlen(name), 1) < 0)
			err = -ENOMEM;
	}
	for (size_t i = 0; !err && i < a.n; i++) {
		const struct funcs_fn *fn = &a.fns[i];
		struct top_func *v =
		        hp_grow(t->funcs, cap, t->nfuncs, sizeof(*v));
		if (!v) {
			err = -ENOMEM;
			break;
		}
		t->funcs = v;
		struct top_func *f = &t->funcs[t->nfuncs];
		memset(f, 0, sizeof(*f));
		f->heap = h->id;
		f->c = counts_of(fn->self_v);
		f->incl = counts_of(fn->incl_v);
		f->best_live = best[i + 1];
		if ((err = func_label(r, g, fn->func, &seen, &f->name)))
			break;
		t->nfuncs++;
		/* A caller only has no stack of its own to show. */
		int32_t node =
		        best_cs[i + 1] ? tree_leaf_node(g, best_cs[i + 1]) : -1;
		for (node = node >= 0 ? g->top.parent.v[node] : -1;
		     node >= 0 && f->ncallers < TOP_CALLERS;
		     node = g->top.parent.v[node]) {
			err = func_label(r, g, g->top.func.v[node], &seen,
			                 &f->callers[f->ncallers]);
			if (err)
				break;
			f->ncallers++;
		}
	}
	hmap_free(&seen);
	free(best);
	free(best_cs);
	funcs_free(&a);
	return err;
}

int top_read(struct top_reader *r, struct top_reading *out, char *why,
             size_t len)
{
	struct live_snapshot ls;
	struct live_model lm;
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	memset(&lm, 0, sizeof(lm));
	int err = live_snapshot_open(r->pid, &ls);
	if (err == -1)
		snprintf(why, len, "%s", ls.why);
	if (err)
		goto out;
	out->ts = hp_clock_ns(CLOCK_BOOTTIME);
	/* The per-stack counters only: the live blocks are not needed. */
	err = snapshot_take_regions(ls.rs, ls.nr, false, &ls.snap);
	if (!err)
		err = snapshot_resolve_paths(&ls.snap, r->pid, true, NULL);
	if (err)
		goto out;
	const struct prof_dump *d = &ls.snap.dump;
	out->interval = live_snapshot_interval(&ls);
	out->since = atomic_load_explicit(&ls.rs[0]->hdr->attach_time_ns,
	                                  memory_order_relaxed);
	memcpy(out->counters, d->counters, sizeof(out->counters));
	struct top_heap *malloc_heap = heap_of(out, d, 0);
	if (!malloc_heap) {
		err = -ENOMEM;
		goto out;
	}
	malloc_heap->interval = out->interval;
	/* libc.malloc, the heap `heapprof report` shows by default; the
	 * others when asked. */
	err = live_model_build(&lm, d, r->sym, &r->cache, r->all_heaps);
	for (size_t i = 0; !err && i < lm.nheaps; i++) {
		const struct live_heap *lh = &lm.heaps[i];
		struct top_heap *h = heap_of(out, d, lh->id);
		if (!h) {
			err = -ENOMEM;
			break;
		}
		h->total = counts_of(lh->tot);
		if (lh->id == 0)
			out->total = h->total;
		err = add_heap_funcs(r, &lm, lh, out, &cap);
	}
	if (err)
		goto out;
	if (out->nfuncs) /* funcs is NULL before the first */
		qsort(out->funcs, out->nfuncs, sizeof(*out->funcs),
		      by_heap_name);
	struct prof_memory m;
	memset(&m, 0, sizeof(m));
	if (snapshot_proc_memory(r->pid, &m) == 0) {
		out->have_rss = true;
		out->rss = m.rss;
		out->rss_peak = m.have_peak ? m.rss_peak : 0;
	}
	memory_limit(r->pid, out);
	for (int i = 0; i < ls.nr; i++)
		out->tables +=
		        region_resident(-1, ls.rs[i]->base, ls.rs[i]->size);
out:
	live_model_free(&lm);
	live_snapshot_close(&ls);
	if (err)
		top_reading_free(out);
	return err;
}

void top_reading_free(struct top_reading *t)
{
	free(t->funcs);
	t->funcs = NULL;
	t->nfuncs = 0;
	free(t->heaps);
	t->heaps = NULL;
	t->nheaps = 0;
}
