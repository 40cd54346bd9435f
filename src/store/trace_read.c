/*
 * Reading the event trace of a profile (see trace_read.h).  Every sum over
 * events reads them once through the event iterator (trace_events.c): the
 * chunks decoded in C, never a query per event; counts come from the
 * chunks' rows.  The leaks come from the last dump's blocks, in SQL.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout_v1.h"
#include "store/profile.h"
#include "store/trace_read.h"
#include "util/err.h"
#include "util/grow.h"
#include "util/hmap.h"

/* ---- small helpers ------------------------------------------------------ */

uint64_t tr_objects_fp(int64_t size, int64_t charged, int64_t interval)
{
	if (interval <= 1 || charged == size || size <= 0)
		return HP_OBJ_FP_ONE;
	/* As the client's recorder_objects_fp: a block of `size` bytes is
	 * sampled with probability 1 - exp(-size / interval). */
	double p = -expm1(-(double)size / (double)interval);
	if (!(p > 0.0))
		return HP_OBJ_FP_ONE;
	return (uint64_t)((double)HP_OBJ_FP_ONE / p + 0.5);
}

static int64_t fp_round(uint64_t fp)
{
	return (int64_t)prof_objects(fp);
}

/* The sampling interval of each heap of a process (heapprof_heap), else
 * the process's. */
struct intervals {
	char **names;
	int64_t *iv;
	size_t n;
	int64_t dflt;
};

static void intervals_free(struct intervals *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->names[i]);
	free(v->names);
	free(v->iv);
	memset(v, 0, sizeof(*v));
}

static int intervals_load(sqlite3 *db, const char *subsys, int64_t upid,
                          struct intervals *v)
{
	sqlite3_stmt *st = NULL;
	int rc = SQLITE_DONE;

	memset(v, 0, sizeof(*v));
	v->dflt = 1;
	if (sqlite3_prepare_v2(db,
	                       "SELECT sampling_interval FROM heapprof_process"
	                       " WHERE upid = ?",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_int64(st, 0) > 0)
			v->dflt = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	if (!rd_has_table(db, "heapprof_heap"))
		return 0;
	st = rd_prepare(db, subsys,
	                "SELECT name, max(sampling_interval) FROM heapprof_heap"
	                " WHERE upid = ? AND name IS NOT NULL GROUP BY name");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		char **nn = realloc(v->names, (v->n + 1) * sizeof(*nn));
		if (nn)
			v->names = nn;
		int64_t *ni =
		        nn ? realloc(v->iv, (v->n + 1) * sizeof(*ni)) : NULL;
		if (ni)
			v->iv = ni;
		const char *name = (const char *)sqlite3_column_text(st, 0);
		char *copy = ni ? strdup(name ? name : "") : NULL;
		if (!copy) {
			rc = SQLITE_NOMEM;
			break;
		}
		v->names[v->n] = copy;
		v->iv[v->n++] = sqlite3_column_int64(st, 1);
	}
	int err = rd_finish(db, subsys, st, rc);
	if (err)
		intervals_free(v);
	return err;
}

static int64_t interval_of(const struct intervals *v, const char *heap)
{
	for (size_t i = 0; heap && i < v->n; i++)
		if (!strcmp(v->names[i], heap) && v->iv[i] > 0)
			return v->iv[i];
	return v->dflt;
}

/* ---- trace info --------------------------------------------------------- */

int tr_load_info(sqlite3 *db, const char *subsys, int64_t upid,
                 struct tr_info *t)
{
	struct tr_count c;
	sqlite3_stmt *st;
	int rc, err;

	memset(t, 0, sizeof(*t));
	if (tr_events_form(db) == TR_FORM_NONE)
		return 0;
	/* Counted from the chunks' rows: nothing is decoded. */
	if ((err = tr_events_count(db, subsys, upid < 0 ? 0 : upid, &c)) < 0)
		return err;
	t->allocs = c.allocs;
	t->frees = c.frees;
	t->first_ts = c.first_ts;
	t->last_ts = c.last_ts;
	t->present = t->allocs + t->frees > 0;
	if (!rd_has_table(db, "heapprof_trace"))
		return 0;
	st = rd_prepare(
	        db, subsys,
	        "SELECT mode, buffer_bytes, dropped_allocs,"
	        " dropped_frees, dropped_alloc_bytes, dropped_free_bytes,"
	        " overwritten, incomplete, full_ts, waits, wait_ns"
	        " FROM heapprof_trace WHERE upid = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *m = (const char *)sqlite3_column_text(st, 0);
		t->present = t->has_row = 1;
		snprintf(t->mode, sizeof(t->mode), "%s", m ? m : "");
		t->buffer_bytes = sqlite3_column_int64(st, 1);
		t->dropped_allocs = sqlite3_column_int64(st, 2);
		t->dropped_frees = sqlite3_column_int64(st, 3);
		t->dropped_alloc_bytes = sqlite3_column_int64(st, 4);
		t->dropped_free_bytes = sqlite3_column_int64(st, 5);
		t->overwritten = sqlite3_column_int64(st, 6);
		t->incomplete = sqlite3_column_int64(st, 7);
		t->full_ts = sqlite3_column_int64(st, 8);
		t->waits = sqlite3_column_int64(st, 9);
		t->wait_ns = sqlite3_column_int64(st, 10);
		rc = SQLITE_DONE;
	}
	return rd_finish(db, subsys, st, rc) ? -EIO : 0;
}

int64_t tr_left_out(const struct tr_info *t)
{
	return t->dropped_allocs + t->dropped_frees + t->overwritten +
	       t->incomplete;
}

/* ---- sets of per-heap amounts ------------------------------------------- */

void tr_heap_free(struct tr_heap *h)
{
	free(h->name);
	free(h->s);
	memset(h, 0, sizeof(*h));
}

void tr_set_free(struct tr_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		tr_heap_free(&s->h[i]);
	free(s->h);
	s->h = NULL;
	s->n = 0;
}

const struct tr_heap *tr_set_find(const struct tr_set *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->h[i].name, name))
			return &s->h[i];
	return NULL;
}

/* The heap named name in s, added if new; NULL if out of memory. */
static struct tr_heap *set_heap(struct tr_set *s, const char *name)
{
	if (!name)
		name = "";
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->h[i].name, name))
			return &s->h[i];
	struct tr_heap *a = realloc(s->h, (s->n + 1) * sizeof(*a));
	if (!a)
		return NULL;
	s->h = a;
	memset(&a[s->n], 0, sizeof(a[s->n]));
	if (!(a[s->n].name = strdup(name)))
		return NULL;
	return &a[s->n++];
}

/*
 * Add v (and records) to callsite cs of h.  Callers add in callsite order
 * or not: an existing sample is found by binary search, a new one goes in
 * its place.  0 or -ENOMEM.
 */
static int heap_add(struct tr_heap *h, int64_t cs, const int64_t v[RD_NVIEWS],
                    int64_t records)
{
	size_t lo = 0, hi = h->n;

	if (h->n && h->s[h->n - 1].callsite < cs) {
		lo = h->n; /* the usual case: in order */
	} else {
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (h->s[mid].callsite < cs)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	if (lo == h->n || h->s[lo].callsite != cs) {
		/* Grow by doubling: n a power of two means full. */
		if ((h->n & (h->n - 1)) == 0 || h->n < 16) {
			size_t cap = h->n < 16 ? 16 : h->n * 2;
			struct rd_sample *a = realloc(h->s, cap * sizeof(*a));
			if (!a)
				return -ENOMEM;
			h->s = a;
		}
		memmove(&h->s[lo + 1], &h->s[lo], (h->n - lo) * sizeof(*h->s));
		memset(&h->s[lo], 0, sizeof(h->s[lo]));
		h->s[lo].callsite = cs;
		h->n++;
	}
	for (int i = 0; i < RD_NVIEWS; i++) {
		h->s[lo].v[i] += v[i];
		h->tot[i] += v[i];
	}
	h->records += records;
	return 0;
}

static int cmp_heap(const void *a, const void *b)
{
	const struct tr_heap *x = a, *y = b;
	int xm = !strcmp(x->name, "libc.malloc");
	int ym = !strcmp(y->name, "libc.malloc");

	if (xm != ym)
		return xm ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void set_sort(struct tr_set *s)
{
	if (s->n > 1)
		qsort(s->h, s->n, sizeof(*s->h), cmp_heap);
}

/* Bytes and objects (fp) of `count` records into the four views. */
static void views_of(int64_t bytes, uint64_t objs_fp, int64_t v[RD_NVIEWS])
{
	v[RD_SPACE] = v[RD_ALLOC_SPACE] = bytes;
	v[RD_OBJECTS] = v[RD_ALLOC_OBJECTS] = fp_round(objs_fp);
}

/* ---- leaks -------------------------------------------------------------- */

/* The final dump of upid and whether it carries its blocks. */
static int final_dump(sqlite3 *db, const char *subsys, int64_t upid,
                      struct tr_leak_src *src)
{
	sqlite3_stmt *st;
	int rc;
	int inflight_col =
	        rd_has_column(db, "heapprof_dump", "blocks_in_flight");
	int blocks_tab = rd_has_table(db, "heapprof_block");

	memset(src, 0, sizeof(*src));
	st = rd_prepare(db, subsys,
	                inflight_col
	                        ? "SELECT id, ts, blocks_in_flight FROM"
	                          " heapprof_dump WHERE upid = ?"
	                          " ORDER BY ts DESC, id DESC LIMIT 1"
	                        : "SELECT id, ts, NULL FROM heapprof_dump"
	                          " WHERE upid = ? ORDER BY ts DESC, id DESC"
	                          " LIMIT 1");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		src->have_dump = 1;
		src->dump_id = sqlite3_column_int64(st, 0);
		src->dump_ts = sqlite3_column_int64(st, 1);
		/* The writer sets it on every dump that carries blocks. */
		src->from_blocks =
		        blocks_tab && sqlite3_column_type(st, 2) != SQLITE_NULL;
		src->in_flight = sqlite3_column_int64(st, 2);
		rc = SQLITE_DONE;
	}
	if (rd_finish(db, subsys, st, rc))
		return -EIO;
	if (!src->have_dump || src->from_blocks || !blocks_tab)
		return 0;
	/* A profile whose writer left blocks_in_flight NULL: rows decide. */
	st = rd_prepare(
	        db, subsys,
	        "SELECT 1 FROM heapprof_block WHERE dump_id = ? LIMIT 1");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, src->dump_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		src->from_blocks = 1;
		rc = SQLITE_DONE;
	}
	return rd_finish(db, subsys, st, rc) ? -EIO : 0;
}

int tr_leak_blocks(sqlite3 *db, const char *subsys, int64_t upid,
                   struct tr_set *out, struct tr_leak_src *src)
{
	sqlite3_stmt *st;
	int rc, err;

	memset(out, 0, sizeof(*out));
	if ((err = final_dump(db, subsys, upid, src)) < 0)
		return err;
	if (!src->have_dump || !src->from_blocks)
		return 0;
	st = rd_prepare(db, subsys,
	                "SELECT heap_name, coalesce(callsite_id, 0),"
	                " count(*), sum(charged), sum(objects_fp)"
	                " FROM heapprof_block WHERE dump_id = ?"
	                " GROUP BY 1, 2 ORDER BY 1, 2");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, src->dump_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t n = sqlite3_column_int64(st, 2);
		int64_t bytes = sqlite3_column_int64(st, 3);
		int64_t objs = sqlite3_column_int64(st, 4);
		int64_t v[RD_NVIEWS];
		if (!n && !bytes)
			continue;
		views_of(bytes, (uint64_t)objs, v);
		if (tr_set_add(out, (const char *)sqlite3_column_text(st, 0),
		               sqlite3_column_int64(st, 1), v, n) < 0) {
			rc = SQLITE_NOMEM;
			break;
		}
	}
	err = rd_finish(db, subsys, st, rc);
	if (err)
		tr_set_free(out);
	else
		tr_set_sort(out);
	return err;
}

int tr_set_add(struct tr_set *s, const char *heap, int64_t cs,
               const int64_t v[RD_NVIEWS], int64_t records)
{
	struct tr_heap *h = set_heap(s, heap);
	return h ? heap_add(h, cs, v, records) : -ENOMEM;
}

void tr_set_sort(struct tr_set *s)
{
	set_sort(s);
}

/* ---- reading events ----------------------------------------------------- */

/*
 * The leaf callsite of each stack key of a process (heapprof_trace_stack;
 * 0: a key without one), with a small cache in front: a trace names a few
 * thousand stacks millions of times.
 */
#define SM_CACHE 4096
struct stackmap {
	struct hmap m;
	struct sm_hit {
		int64_t key, cs;
		int used;
	} * cache;
};

static void stackmap_free(struct stackmap *sm)
{
	hmap_free(&sm->m);
	free(sm->cache);
	sm->cache = NULL;
}

static int stackmap_load(sqlite3 *db, const char *subsys, int64_t upid,
                         struct stackmap *sm)
{
	hmap_init(&sm->m);
	if (!(sm->cache = calloc(SM_CACHE, sizeof(*sm->cache)))) {
		hp_err(subsys, "out of memory");
		return -ENOMEM;
	}
	return tr_stack_keys(db, subsys, upid, &sm->m);
}

int tr_stack_keys(sqlite3 *db, const char *subsys, int64_t upid, struct hmap *m)
{
	sqlite3_stmt *st;
	int rc;

	if (!rd_has_table(db, "heapprof_trace_stack"))
		return 0;
	st = rd_prepare(db, subsys,
	                "SELECT stack_key, callsite_id FROM"
	                " heapprof_trace_stack WHERE upid = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t key = sqlite3_column_int64(st, 0);
		if (hmap_put(m, &key, sizeof(key),
		             sqlite3_column_int64(st, 1)) < 0) {
			rc = SQLITE_NOMEM;
			break;
		}
	}
	return rd_finish(db, subsys, st, rc);
}

static int64_t stackmap_get(struct stackmap *sm, int64_t key)
{
	struct sm_hit *c =
	        &sm->cache[((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 52];
	if (c->used && c->key == key)
		return c->cs;
	int64_t *v = hmap_find(&sm->m, &key, sizeof(key));
	*c = (struct sm_hit){key, v ? *v : 0, 1};
	return c->cs;
}

/* Whether an event's heap is the one named `name`: its name compared
 * once per heap number of the iterator. */
struct heapsel {
	const char *name;
	signed char *is; /* by heap_idx: -1 not yet, 0, 1 */
	size_t n;
};

static int heap_is(struct heapsel *s, const struct tr_event *e)
{
	if (e->heap_idx >= s->n) {
		size_t n = e->heap_idx + 16;
		signed char *a = realloc(s->is, n);
		if (!a)
			return -ENOMEM;
		memset(a + s->n, -1, n - s->n);
		s->is = a;
		s->n = n;
	}
	if (s->is[e->heap_idx] < 0)
		s->is[e->heap_idx] = !strcmp(e->heap, s->name);
	return s->is[e->heap_idx];
}

/* ts - alloc_ts <= limit, as SQL compares it (no overflow). */
static int lived_at_most(int64_t ts, int64_t alloc_ts, int64_t limit)
{
	return (__int128)ts - alloc_ts <= limit;
}

/* ---- temporary allocations ---------------------------------------------- */

/* Per (heap, callsite) of the temporaries: bytes, frees, objects. */
struct temp_acc {
	uint32_t heap;
	int64_t cs, bytes, n;
	uint64_t fp;
};

/* Per heap number of the iterator: its name, interval, known allocs. */
struct heap_acc {
	const char *name; /* NULL: not met */
	int64_t interval;
	uint64_t all_fp;
	int64_t all_bytes;
	int known;
};

static const struct temp_acc *sort_temps;
static const struct heap_acc *sort_heaps;

static int cmp_temp(const void *a, const void *b)
{
	const struct temp_acc *x = &sort_temps[*(const size_t *)a];
	const struct temp_acc *y = &sort_temps[*(const size_t *)b];
	if (x->heap != y->heap) {
		int c = strcmp(sort_heaps[x->heap].name,
		               sort_heaps[y->heap].name);
		if (c)
			return c;
		return x->heap < y->heap ? -1 : 1;
	}
	return x->cs < y->cs ? -1 : x->cs > y->cs;
}

static int grow_heaps(struct heap_acc **h, size_t *n, uint32_t idx)
{
	if (idx < *n)
		return 0;
	size_t m = idx + 8;
	struct heap_acc *a = realloc(*h, m * sizeof(*a));
	if (!a)
		return -ENOMEM;
	memset(a + *n, 0, (m - *n) * sizeof(*a));
	*h = a;
	*n = m;
	return 0;
}

/*
 * One pass over the events: the frees that lived at most threshold_ns,
 * summed per (heap, callsite of the allocation), and per heap what the
 * trace knows was allocated (allocations, and frees of blocks allocated
 * before its first event).  Objects are rounded per callsite and heap.
 */
int tr_temporaries(sqlite3 *db, const char *subsys, int64_t upid,
                   int64_t threshold_ns, struct tr_set *out)
{
	struct intervals iv;
	struct stackmap sm = {0};
	struct tr_events *it = NULL;
	struct tr_count cnt;
	struct hmap idx;
	struct temp_acc *acc = NULL;
	struct heap_acc *heaps = NULL;
	size_t nacc = 0, capacc = 0, nheaps = 0;
	size_t *order = NULL;
	const struct tr_event *e;
	int rc = 0, err;

	memset(out, 0, sizeof(*out));
	if (tr_events_form(db) == TR_FORM_NONE)
		return 0;
	if ((err = intervals_load(db, subsys, upid, &iv)) < 0)
		return err;
	hmap_init(&idx);
	if ((err = tr_events_count(db, subsys, upid, &cnt)) < 0 ||
	    (err = stackmap_load(db, subsys, upid, &sm)) < 0 ||
	    (err = tr_events_open(db, subsys, upid, TR_TS_MIN, TR_TS_MAX, 0,
	                          &it)) < 0)
		goto out;
	while ((rc = tr_events_next(it, &e)) == 1) {
		if (grow_heaps(&heaps, &nheaps, e->heap_idx) < 0) {
			rc = -ENOMEM;
			break;
		}
		struct heap_acc *h = &heaps[e->heap_idx];
		if (!h->name) {
			h->name = e->heap;
			h->interval = interval_of(&iv, e->heap);
		}
		bool known =
		        !e->free || (e->alloc_ts && e->alloc_ts < cnt.first_ts);
		bool temp = e->free && e->alloc_ts &&
		            lived_at_most(e->ts, e->alloc_ts, threshold_ns);
		if (!known && !temp)
			continue;
		uint64_t fp = tr_objects_fp(e->size, e->charged, h->interval);
		if (known) {
			h->known = 1;
			h->all_fp += fp;
			h->all_bytes += e->charged;
		}
		if (!temp)
			continue;
		int64_t cs = stackmap_get(&sm, e->stack_key);
		int64_t key[2] = {e->heap_idx, cs};
		int64_t *k = hmap_find(&idx, key, sizeof(key));
		size_t at = k ? (size_t)*k : nacc;
		if (!k) {
			struct temp_acc *a =
			        hp_grow(acc, &capacc, nacc, sizeof(*a));
			if (!a || hmap_put(&idx, key, sizeof(key),
			                   (int64_t)nacc) < 0) {
				acc = a ? a : acc;
				rc = -ENOMEM;
				break;
			}
			acc = a;
			acc[nacc] = (struct temp_acc){.heap = e->heap_idx,
			                              .cs = cs};
			nacc++;
		}
		if (!acc)
			break; /* found in idx: acc holds it; never so */
		struct temp_acc *a = &acc[at];
		a->bytes += e->charged;
		a->n++;
		a->fp += fp;
	}
	if (rc < 0) {
		err = rc;
		goto out;
	}
	/* Into the set, heap by heap in callsite order. */
	if (nacc && !(order = malloc(nacc * sizeof(*order)))) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nacc; i++)
		order[i] = i;
	sort_temps = acc; /* qsort has no context argument in C11 */
	sort_heaps = heaps;
	if (nacc > 1)
		qsort(order, nacc, sizeof(*order), cmp_temp);
	for (size_t i = 0; !err && i < nacc; i++) {
		const struct temp_acc *a = &acc[order[i]];
		struct tr_heap *h = set_heap(out, heaps[a->heap].name);
		int64_t v[RD_NVIEWS];
		views_of(a->bytes, a->fp, v);
		if (!h || heap_add(h, a->cs, v, a->n) < 0)
			err = -ENOMEM;
	}
	for (size_t k = 0; !err && k < nheaps; k++) {
		if (!heaps[k].known)
			continue;
		struct tr_heap *h = set_heap(out, heaps[k].name);
		if (!h) {
			err = -ENOMEM;
			break;
		}
		h->all_count += fp_round(heaps[k].all_fp);
		h->all_bytes += heaps[k].all_bytes;
	}
	if (err == -ENOMEM)
		hp_err(subsys, "out of memory");
out:
	tr_events_close(it);
	stackmap_free(&sm);
	hmap_free(&idx);
	intervals_free(&iv);
	free(acc);
	free(heaps);
	free(order);
	if (err)
		tr_set_free(out);
	else
		set_sort(out);
	return err;
}

/* ---- a time window ------------------------------------------------------ */

/*
 * The blocks allocated in the window and not freed yet, by (address, ts):
 * open addressing, deleted with backward shift, so that it holds only
 * what is live at the moment.  Two of them: the young blocks, the last
 * LM_YOUNG allocations', small enough to stay in the cache, where most
 * frees find their block, and the old ones, the blocks that outlived
 * them (moved over in bulk).  A window of millions of allocations then
 * costs a cache miss per long-lived block, not per block.
 */
#define LM_YOUNG 32768
struct lm_slot {
	int64_t addr, ts; /* ts 0 with used 0: empty */
	int64_t charged;
	uint64_t objs_fp;
	uint32_t slot; /* into the window's callsites */
	uint32_t used;
};

struct livemap {
	struct lm_slot *s;
	size_t mask, n;
};

/* The high bits of a multiplicative hash: addresses are multiples of 16
 * and times often of 10, which the low bits would show. */
static size_t lm_hash(const struct livemap *m, int64_t addr, int64_t ts)
{
	uint64_t h = ((uint64_t)addr ^ ((uint64_t)ts * 0xc2b2ae3d27d4eb4full)) *
	             0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & m->mask;
}

static struct lm_slot *lm_find(const struct livemap *m, int64_t addr,
                               int64_t ts)
{
	if (!m->s)
		return NULL;
	for (size_t i = lm_hash(m, addr, ts);; i = (i + 1) & m->mask) {
		struct lm_slot *x = &m->s[i];
		if (!x->used)
			return NULL;
		if (x->addr == addr && x->ts == ts)
			return x;
	}
}

static int lm_put(struct livemap *m, const struct lm_slot *v);

static int lm_grow(struct livemap *m)
{
	struct livemap old = *m;
	size_t cap = old.s ? (old.mask + 1) * 2 : 1024;
	m->s = calloc(cap, sizeof(*m->s));
	if (!m->s) {
		*m = old;
		return -ENOMEM;
	}
	m->mask = cap - 1;
	m->n = 0;
	for (size_t i = 0; old.s && i <= old.mask; i++)
		if (old.s[i].used)
			lm_put(m, &old.s[i]);
	free(old.s);
	return 0;
}

/* Insert or replace (the newest allocation of an (address, ts)). */
static int lm_put(struct livemap *m, const struct lm_slot *v)
{
	if (!m->s || (m->n + 1) * 2 > m->mask + 1) {
		if (lm_grow(m) < 0)
			return -ENOMEM;
	}
	size_t i = lm_hash(m, v->addr, v->ts);
	while (m->s[i].used &&
	       !(m->s[i].addr == v->addr && m->s[i].ts == v->ts))
		i = (i + 1) & m->mask;
	if (!m->s[i].used)
		m->n++;
	m->s[i] = *v;
	m->s[i].used = 1;
	return 0;
}

/* The young blocks still live into the old map, the young one emptied. */
static int lm_age(struct livemap *young, struct livemap *old)
{
	for (size_t i = 0; young->s && i <= young->mask; i++)
		if (young->s[i].used && lm_put(old, &young->s[i]) < 0)
			return -ENOMEM;
	if (young->s)
		memset(young->s, 0, (young->mask + 1) * sizeof(*young->s));
	young->n = 0;
	return 0;
}

static void lm_del(struct livemap *m, struct lm_slot *x)
{
	if (!m->s)
		return; /* x is one of m's slots: never so */
	size_t i = (size_t)(x - m->s);
	m->s[i].used = 0;
	m->n--;
	/* Backward shift: later slots of the run move up where their
	 * probe may start at or before the hole. */
	for (size_t j = (i + 1) & m->mask; m->s[j].used;
	     j = (j + 1) & m->mask) {
		size_t home = lm_hash(m, m->s[j].addr, m->s[j].ts);
		bool movable = i <= j ? (home <= i || home > j)
		                      : (home <= i && home > j);
		if (movable) {
			m->s[i] = m->s[j];
			m->s[j].used = 0;
			i = j;
		}
	}
}

struct win_slot {
	int64_t callsite;
	int64_t v[RD_NVIEWS];
	uint64_t fp_alloc, fp_live;
};

/* A free in the window, of a block allocated in it, that came before its
 * allocation: (address, alloc_ts), matched at the end. */
struct win_free {
	int64_t addr, ts;
};

static int cmp_sample(const void *a, const void *b)
{
	const struct rd_sample *x = a, *y = b;

	return x->callsite < y->callsite ? -1 : x->callsite > y->callsite;
}

/* The block of a free: young first (newer, when both hold its key). */
static struct lm_slot *lm_find2(struct livemap *young, struct livemap *old,
                                struct livemap **in, int64_t addr, int64_t ts)
{
	struct lm_slot *b = lm_find(young, addr, ts);
	*in = young;
	if (!b) {
		b = lm_find(old, addr, ts);
		*in = old;
	}
	return b;
}

static void win_freed(struct livemap *lm, struct lm_slot *b,
                      struct win_slot *slots)
{
	if (!slots)
		return; /* a block was put with its slot: never so */
	struct win_slot *w = &slots[b->slot];
	w->v[RD_SPACE] -= b->charged;
	w->fp_live -= b->objs_fp;
	lm_del(lm, b); /* a second free of it finds nothing */
}

/*
 * One pass in position order: an allocation in the window is live until
 * a free in the window names it (address, alloc_ts); a free of an
 * allocation before `from`, or one whose allocation event the trace
 * lacks, finds nothing.
 */
int tr_window(sqlite3 *db, const char *subsys, int64_t upid, const char *heap,
              int64_t from, int64_t to, struct tr_heap *out)
{
	struct intervals iv;
	struct hmap slot_idx;
	struct livemap lm = {0}, young = {0}, *in;
	size_t nyoung = 0;
	struct stackmap sm = {0};
	struct heapsel sel = {heap, NULL, 0};
	struct tr_events *it = NULL;
	struct win_slot *slots = NULL;
	struct win_free *early = NULL;
	size_t nslots = 0, capslots = 0, nearly = 0, capearly = 0;
	const struct tr_event *e;
	int rc = 0, err;

	memset(out, 0, sizeof(*out));
	if (!(out->name = strdup(heap))) {
		hp_err(subsys, "out of memory");
		return -ENOMEM;
	}
	if (tr_events_form(db) == TR_FORM_NONE)
		return 0;
	if ((err = intervals_load(db, subsys, upid, &iv)) < 0) {
		tr_heap_free(out);
		return err;
	}
	int64_t interval = interval_of(&iv, heap);
	intervals_free(&iv);
	hmap_init(&slot_idx);
	if ((err = stackmap_load(db, subsys, upid, &sm)) < 0 ||
	    (err = tr_events_open(db, subsys, upid, from, to, 0, &it)) < 0)
		goto out;

	while ((rc = tr_events_next(it, &e)) == 1) {
		int is = heap_is(&sel, e);
		if (is <= 0) {
			if (is < 0) {
				rc = -ENOMEM;
				break;
			}
			continue;
		}
		if (e->free) {
			if (!e->alloc_ts || e->alloc_ts < from)
				continue;
			struct lm_slot *b = lm_find2(&young, &lm, &in,
			                             e->address, e->alloc_ts);
			if (b) {
				win_freed(in, b, slots);
				continue;
			}
			struct win_free *f =
			        hp_grow(early, &capearly, nearly, sizeof(*f));
			if (!f) {
				rc = -ENOMEM;
				break;
			}
			early = f;
			early[nearly++] =
			        (struct win_free){e->address, e->alloc_ts};
			continue;
		}
		int64_t cs = stackmap_get(&sm, e->stack_key);
		int64_t *si = hmap_find(&slot_idx, &cs, sizeof(cs));
		if (!si) {
			struct win_slot *a =
			        hp_grow(slots, &capslots, nslots, sizeof(*a));
			if (!a) {
				rc = -ENOMEM;
				break;
			}
			slots = a;
			memset(&slots[nslots], 0, sizeof(slots[nslots]));
			slots[nslots].callsite = cs;
			if (hmap_put(&slot_idx, &cs, sizeof(cs),
			             (int64_t)nslots) < 0) {
				rc = -ENOMEM;
				break;
			}
			si = hmap_find(&slot_idx, &cs, sizeof(cs));
			nslots++;
		}
		struct lm_slot b = {
		        .addr = e->address,
		        .ts = e->ts,
		        .charged = e->charged,
		        .objs_fp = tr_objects_fp(e->size, e->charged, interval),
		        .slot = (uint32_t)*si,
		};
		/* The same (address, ts) again: the newer one is live. */
		if ((++nyoung % LM_YOUNG == 0 && lm_age(&young, &lm) < 0) ||
		    lm_put(&young, &b) < 0) {
			rc = -ENOMEM;
			break;
		}
		/* slots holds every index slot_idx gave out (grown above);
		 * the analyzer cannot follow the map: a false positive. */
		struct win_slot *w = &slots[b.slot];
		// NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
		w->v[RD_ALLOC_SPACE] += e->charged;
		w->v[RD_SPACE] += e->charged;
		w->fp_alloc += b.objs_fp;
		w->fp_live += b.objs_fp;
		out->records++;
	}
	if (rc < 0) {
		err = rc;
		if (err == -ENOMEM)
			hp_err(subsys, "out of memory");
		goto out;
	}
	/* Frees met before their allocation (another thread's, written
	 * first). */
	for (size_t i = 0; i < nearly; i++) {
		struct lm_slot *b =
		        lm_find2(&young, &lm, &in, early[i].addr, early[i].ts);
		if (b)
			win_freed(in, b, slots);
	}

	if (nslots && !(out->s = malloc(nslots * sizeof(*out->s)))) {
		hp_err(subsys, "out of memory");
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nslots; i++) {
		struct rd_sample *x = &out->s[out->n++];
		x->callsite = slots[i].callsite;
		x->v[RD_SPACE] = slots[i].v[RD_SPACE];
		x->v[RD_ALLOC_SPACE] = slots[i].v[RD_ALLOC_SPACE];
		x->v[RD_OBJECTS] = fp_round(slots[i].fp_live);
		x->v[RD_ALLOC_OBJECTS] = fp_round(slots[i].fp_alloc);
		for (int v = 0; v < RD_NVIEWS; v++)
			out->tot[v] += x->v[v];
	}
	if (out->n > 1)
		qsort(out->s, out->n, sizeof(*out->s), cmp_sample);
out:
	tr_events_close(it);
	stackmap_free(&sm);
	free(sel.is);
	free(lm.s);
	free(young.s);
	hmap_free(&slot_idx);
	free(slots);
	free(early);
	if (err)
		tr_heap_free(out);
	return err;
}

/* ---- live bytes over time ----------------------------------------------- */

int tr_timeline(sqlite3 *db, const char *subsys, int64_t upid, const char *heap,
                int64_t t0, int64_t t1, size_t nb, int64_t base, int64_t *live,
                int64_t *peak)
{
	struct heapsel sel = {heap, NULL, 0};
	struct tr_events *it = NULL;
	const struct tr_event *e;
	int64_t cur = base;
	size_t b = 0;
	int rc = 0;

	if (!nb)
		return 0;
	peak[0] = cur;
	if (t1 <= t0)
		t1 = t0 + 1;
	/* In time order: the running sum is what was live at each time. */
	if ((rc = tr_events_open(db, subsys, upid, TR_TS_MIN, TR_TS_MAX,
	                         TR_EV_BY_TS, &it)) < 0)
		return rc;
	/* (ts - t0) * nb: fine for any real span (1e13 ns * 1e4). */
	double scale = (double)nb / (double)(t1 - t0);
	while ((rc = tr_events_next(it, &e)) == 1) {
		int is = heap_is(&sel, e);
		if (is <= 0) {
			if (is < 0) {
				hp_err(subsys, "out of memory");
				rc = -ENOMEM;
				break;
			}
			continue;
		}
		double pos = (double)(e->ts - t0) * scale;
		size_t k = pos <= 0            ? 0
		           : pos >= (double)nb ? nb - 1
		                               : (size_t)pos;
		while (b < k) {
			live[b++] = cur;
			peak[b] = cur;
		}
		cur += e->free ? -e->charged : e->charged;
		if (cur > peak[b])
			peak[b] = cur;
	}
	tr_events_close(it);
	free(sel.is);
	if (rc < 0)
		return rc;
	for (; b < nb; b++) {
		live[b] = cur;
		if (b + 1 < nb)
			peak[b + 1] = cur;
	}
	return 0;
}

int tr_net_bytes(sqlite3 *db, const char *subsys, int64_t upid,
                 const char *heap, int64_t *out)
{
	struct heapsel sel = {heap, NULL, 0};
	struct tr_events *it = NULL;
	const struct tr_event *e;
	int rc;

	*out = 0;
	if ((rc = tr_events_open(db, subsys, upid, TR_TS_MIN, TR_TS_MAX, 0,
	                         &it)) < 0)
		return rc;
	while ((rc = tr_events_next(it, &e)) == 1) {
		int is = heap_is(&sel, e);
		if (is < 0) {
			hp_err(subsys, "out of memory");
			rc = -ENOMEM;
			break;
		}
		if (is)
			*out += e->free ? -e->charged : e->charged;
	}
	tr_events_close(it);
	free(sel.is);
	return rc < 0 ? rc : 0;
}
