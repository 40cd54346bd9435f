/*
 * Reading the event trace of a profile (see trace_read.h).  Sums are
 * grouped in SQL where a group needs no per-event work; a time window,
 * which matches each free to its allocation, and the timeline, which
 * needs the running sum in time order, read the events once in C.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout_v1.h"
#include "profile/trace_read.h"
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
	return (int64_t)((fp + HP_OBJ_FP_ONE / 2) / HP_OBJ_FP_ONE);
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
	sqlite3_stmt *st;
	int rc;

	memset(t, 0, sizeof(*t));
	if (!rd_has_table(db, "heapprof_event"))
		return 0;
	st = rd_prepare(db, subsys,
	                "SELECT coalesce(sum(kind = 'alloc'), 0),"
	                " coalesce(sum(kind = 'free'), 0), min(ts), max(ts)"
	                " FROM heapprof_event WHERE upid = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		t->allocs = sqlite3_column_int64(st, 0);
		t->frees = sqlite3_column_int64(st, 1);
		t->first_ts = sqlite3_column_int64(st, 2);
		t->last_ts = sqlite3_column_int64(st, 3);
		rc = SQLITE_DONE;
	}
	if (rd_finish(db, subsys, st, rc))
		return -EIO;
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

int tr_leaks(sqlite3 *db, const char *subsys, int64_t upid, struct tr_set *out,
             struct tr_leak_src *src)
{
	sqlite3_stmt *st;
	int rc, err;

	memset(out, 0, sizeof(*out));
	if ((err = final_dump(db, subsys, upid, src)) < 0)
		return err;
	if (!src->have_dump)
		return 0;
	if (src->from_blocks) {
		st = rd_prepare(db, subsys,
		                "SELECT heap_name, coalesce(callsite_id, 0),"
		                " count(*), sum(charged), sum(objects_fp)"
		                " FROM heapprof_block WHERE dump_id = ?"
		                " GROUP BY 1, 2 ORDER BY 1, 2");
		if (!st)
			return -EIO;
		sqlite3_bind_int64(st, 1, src->dump_id);
	} else {
		st = rd_prepare(db, subsys,
		                "SELECT heap_name, callsite_id, sum(count),"
		                " sum(size), sum(count) FROM"
		                " heap_profile_allocation WHERE upid = ? AND"
		                " ts <= ? GROUP BY 1, 2 ORDER BY 1, 2");
		if (!st)
			return -EIO;
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_int64(st, 2, src->dump_ts);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t n = sqlite3_column_int64(st, 2);
		int64_t bytes = sqlite3_column_int64(st, 3);
		int64_t objs = sqlite3_column_int64(st, 4);
		int64_t v[RD_NVIEWS];
		if (!n && !bytes)
			continue;
		views_of(bytes,
		         src->from_blocks ? (uint64_t)objs
		                          : (uint64_t)objs * HP_OBJ_FP_ONE,
		         v);
		struct tr_heap *h =
		        set_heap(out, (const char *)sqlite3_column_text(st, 0));
		if (!h || heap_add(h, sqlite3_column_int64(st, 1), v, n) < 0) {
			rc = SQLITE_NOMEM;
			break;
		}
	}
	err = rd_finish(db, subsys, st, rc);
	if (err)
		tr_set_free(out);
	else
		set_sort(out);
	return err;
}

/* ---- temporary allocations ---------------------------------------------- */

/* The allocations the trace knows of, per heap (all_count, all_bytes). */
static int known_allocs(sqlite3 *db, const char *subsys, int64_t upid,
                        const struct intervals *iv, struct tr_set *out)
{
	sqlite3_stmt *st = rd_prepare(
	        db, subsys,
	        "SELECT heap_name, size, charged, count(*) FROM heapprof_event"
	        " WHERE upid = ?1 AND (kind = 'alloc' OR (kind = 'free' AND"
	        " alloc_ts < (SELECT min(ts) FROM heapprof_event"
	        " WHERE upid = ?1))) GROUP BY 1, 2, 3");
	int rc;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	/* Per heap the estimated objects in 16.16, summed before rounding. */
	uint64_t *fp = NULL;
	size_t nfp = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		int64_t size = sqlite3_column_int64(st, 1);
		int64_t charged = sqlite3_column_int64(st, 2);
		int64_t n = sqlite3_column_int64(st, 3);
		struct tr_heap *h = set_heap(out, name);
		if (!h) {
			rc = SQLITE_NOMEM;
			break;
		}
		size_t k = (size_t)(h - out->h);
		if (k >= nfp) {
			uint64_t *a = realloc(fp, (k + 1) * sizeof(*a));
			if (!a) {
				rc = SQLITE_NOMEM;
				break;
			}
			memset(a + nfp, 0, (k + 1 - nfp) * sizeof(*a));
			fp = a;
			nfp = k + 1;
		}
		fp[k] += (uint64_t)n *
		         tr_objects_fp(size, charged, interval_of(iv, name));
		h->all_bytes += n * charged;
	}
	for (size_t k = 0; k < nfp; k++)
		out->h[k].all_count = fp_round(fp[k]);
	free(fp);
	return rd_finish(db, subsys, st, rc);
}

int tr_temporaries(sqlite3 *db, const char *subsys, int64_t upid,
                   int64_t threshold_ns, struct tr_set *out)
{
	struct intervals iv;
	sqlite3_stmt *st;
	int rc, err;

	memset(out, 0, sizeof(*out));
	if (!rd_has_table(db, "heapprof_event"))
		return 0;
	if ((err = intervals_load(db, subsys, upid, &iv)) < 0)
		return err;
	int stacks = rd_has_table(db, "heapprof_trace_stack");
	/* Grouped by what the object estimate needs, then mapped to
	 * callsites: one lookup per group, not per event. */
	st = rd_prepare(
	        db, subsys,
	        stacks ? "SELECT t.heap_name, coalesce(s.callsite_id, 0),"
	                 " t.size, t.charged, t.n FROM (SELECT heap_name,"
	                 " stack_key, size, charged, count(*) AS n FROM"
	                 " heapprof_event WHERE upid = ?1 AND"
	                 " kind = 'free' AND ts - alloc_ts <= ?2"
	                 " GROUP BY 1, 2, 3, 4) t LEFT JOIN"
	                 " heapprof_trace_stack s ON s.upid = ?1 AND"
	                 " s.stack_key = t.stack_key ORDER BY 1, 2"
	               : "SELECT heap_name, 0, size, charged, count(*)"
	                 " FROM heapprof_event WHERE upid = ?1 AND"
	                 " kind = 'free' AND ts - alloc_ts <= ?2"
	                 " GROUP BY 1, 2, 3, 4 ORDER BY 1");
	if (!st) {
		intervals_free(&iv);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_int64(st, 2, threshold_ns);
	/* Objects are rounded per callsite: sum a callsite's groups (they
	 * come in callsite order) in 16.16, then add. */
	struct tr_heap *cur = NULL;
	int64_t cur_cs = 0, cur_bytes = 0, cur_n = 0;
	uint64_t cur_fp = 0;
	for (;;) {
		rc = sqlite3_step(st);
		const char *name =
		        rc == SQLITE_ROW
		                ? (const char *)sqlite3_column_text(st, 0)
		                : NULL;
		int64_t cs = rc == SQLITE_ROW ? sqlite3_column_int64(st, 1) : 0;
		if (cur && (rc != SQLITE_ROW || cs != cur_cs ||
		            strcmp(cur->name, name ? name : ""))) {
			int64_t v[RD_NVIEWS];
			views_of(cur_bytes, cur_fp, v);
			if (heap_add(cur, cur_cs, v, cur_n) < 0) {
				rc = SQLITE_NOMEM;
				break;
			}
			cur = NULL;
		}
		if (rc != SQLITE_ROW)
			break;
		if (!cur) {
			if (!(cur = set_heap(out, name))) {
				rc = SQLITE_NOMEM;
				break;
			}
			cur_cs = cs;
			cur_bytes = cur_n = 0;
			cur_fp = 0;
		}
		int64_t size = sqlite3_column_int64(st, 2);
		int64_t charged = sqlite3_column_int64(st, 3);
		int64_t n = sqlite3_column_int64(st, 4);
		cur_bytes += n * charged;
		cur_n += n;
		cur_fp += (uint64_t)n *
		          tr_objects_fp(size, charged, interval_of(&iv, name));
	}
	err = rd_finish(db, subsys, st, rc);
	if (!err)
		err = known_allocs(db, subsys, upid, &iv, out);
	intervals_free(&iv);
	if (err)
		tr_set_free(out);
	else
		set_sort(out);
	return err;
}

/* ---- a time window ------------------------------------------------------ */

/* An allocation of the window, until its free is seen. */
struct win_block {
	uint32_t slot; /* into the heap's samples, by first appearance */
	int64_t charged;
	uint64_t objs_fp;
};

struct win_slot {
	int64_t callsite;
	int64_t v[RD_NVIEWS];
	uint64_t fp_alloc, fp_live;
};

static int cmp_sample(const void *a, const void *b)
{
	const struct rd_sample *x = a, *y = b;

	return x->callsite < y->callsite ? -1 : x->callsite > y->callsite;
}

int tr_window(sqlite3 *db, const char *subsys, int64_t upid, const char *heap,
              int64_t from, int64_t to, struct tr_heap *out)
{
	struct intervals iv;
	struct hmap live, slot_idx;
	struct win_block *blocks = NULL;
	struct win_slot *slots = NULL;
	size_t nblocks = 0, capblocks = 0, nslots = 0, capslots = 0;
	sqlite3_stmt *st = NULL;
	int rc = SQLITE_DONE, err;

	memset(out, 0, sizeof(*out));
	if (!(out->name = strdup(heap))) {
		hp_err(subsys, "out of memory");
		return -ENOMEM;
	}
	if (!rd_has_table(db, "heapprof_event"))
		return 0;
	if ((err = intervals_load(db, subsys, upid, &iv)) < 0) {
		tr_heap_free(out);
		return err;
	}
	int64_t interval = interval_of(&iv, heap);
	intervals_free(&iv);
	hmap_init(&live);
	hmap_init(&slot_idx);
	int stacks = rd_has_table(db, "heapprof_trace_stack");

	/* The allocations made in the window, each live until its free. */
	st = rd_prepare(
	        db, subsys,
	        stacks ? "SELECT e.ts, e.address, e.size, e.charged,"
	                 " coalesce(s.callsite_id, 0) FROM heapprof_event"
	                 " e LEFT JOIN heapprof_trace_stack s ON"
	                 " s.upid = e.upid AND s.stack_key = e.stack_key"
	                 " WHERE e.upid = ?1 AND e.heap_name = ?2 AND"
	                 " e.kind = 'alloc' AND e.ts >= ?3 AND e.ts < ?4"
	               : "SELECT ts, address, size, charged, 0 FROM"
	                 " heapprof_event WHERE upid = ?1 AND"
	                 " heap_name = ?2 AND kind = 'alloc' AND"
	                 " ts >= ?3 AND ts < ?4");
	if (!st) {
		err = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, from);
	sqlite3_bind_int64(st, 4, to);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t key[2] = {sqlite3_column_int64(st, 1),
		                  sqlite3_column_int64(st, 0)};
		int64_t size = sqlite3_column_int64(st, 2);
		int64_t charged = sqlite3_column_int64(st, 3);
		int64_t cs = sqlite3_column_int64(st, 4);
		int64_t *si = hmap_find(&slot_idx, &cs, sizeof(cs));
		if (!si) {
			struct win_slot *a =
			        hp_grow(slots, &capslots, nslots, sizeof(*a));
			if (!a) {
				rc = SQLITE_NOMEM;
				break;
			}
			slots = a;
			memset(&slots[nslots], 0, sizeof(slots[nslots]));
			slots[nslots].callsite = cs;
			if (hmap_put(&slot_idx, &cs, sizeof(cs),
			             (int64_t)nslots) < 0) {
				rc = SQLITE_NOMEM;
				break;
			}
			si = hmap_find(&slot_idx, &cs, sizeof(cs));
			nslots++;
		}
		struct win_block *nb =
		        hp_grow(blocks, &capblocks, nblocks, sizeof(*nb));
		if (!nb) {
			rc = SQLITE_NOMEM;
			break;
		}
		blocks = nb;
		struct win_block *b = &blocks[nblocks];
		b->slot = (uint32_t)*si;
		b->charged = charged;
		b->objs_fp = tr_objects_fp(size, charged, interval);
		if (hmap_put(&live, key, sizeof(key), (int64_t)nblocks) < 0) {
			rc = SQLITE_NOMEM;
			break;
		}
		nblocks++;
		/* slots holds every index slot_idx gave out (grown above);
		 * the analyzer cannot follow the map: a false positive. */
		struct win_slot *w = &slots[b->slot];
		// NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
		w->v[RD_ALLOC_SPACE] += charged;
		w->v[RD_SPACE] += charged;
		w->fp_alloc += b->objs_fp;
		w->fp_live += b->objs_fp;
		out->records++;
	}
	if ((err = rd_finish(db, subsys, st, rc)) < 0)
		goto out;

	/* Their frees before `to` (a free of an allocation before `from`,
	 * or one whose allocation event the trace lacks, finds nothing). */
	st = rd_prepare(db, subsys,
	                "SELECT address, alloc_ts FROM heapprof_event"
	                " WHERE upid = ?1 AND heap_name = ?2 AND kind = 'free'"
	                " AND ts >= ?3 AND ts < ?4 AND alloc_ts >= ?3");
	if (!st) {
		err = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, from);
	sqlite3_bind_int64(st, 4, to);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t key[2] = {sqlite3_column_int64(st, 0),
		                  sqlite3_column_int64(st, 1)};
		int64_t *bi = hmap_find(&live, key, sizeof(key));
		if (!bi || *bi < 0)
			continue;
		/* Every index in live is a block filled above: a false
		 * positive of the analyzer, which cannot follow the map. */
		struct win_block *b = &blocks[*bi];
		// NOLINTNEXTLINE(clang-analyzer-core.uninitialized.ArraySubscript,clang-analyzer-core.NullDereference)
		struct win_slot *w = &slots[b->slot];
		w->v[RD_SPACE] -= b->charged;
		w->fp_live -= b->objs_fp;
		*bi = -1; /* freed: a second free of it finds nothing */
	}
	if ((err = rd_finish(db, subsys, st, rc)) < 0)
		goto out;

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
	hmap_free(&live);
	hmap_free(&slot_idx);
	free(blocks);
	free(slots);
	if (err)
		tr_heap_free(out);
	return err;
}

/* ---- live bytes over time ----------------------------------------------- */

int tr_timeline(sqlite3 *db, const char *subsys, int64_t upid, const char *heap,
                int64_t t0, int64_t t1, size_t nb, int64_t base, int64_t *live,
                int64_t *peak)
{
	sqlite3_stmt *st;
	int64_t cur = base;
	size_t b = 0;
	int rc = SQLITE_DONE;

	if (!nb)
		return 0;
	peak[0] = cur;
	if (t1 <= t0)
		t1 = t0 + 1;
	if (rd_has_table(db, "heapprof_event")) {
		st = rd_prepare(
		        db, subsys,
		        "SELECT ts, kind = 'alloc', charged FROM"
		        " heapprof_event WHERE upid = ? AND heap_name = ?"
		        " ORDER BY ts");
		if (!st)
			return -EIO;
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
		/* (ts - t0) * nb: fine for any real span (1e13 ns * 1e4). */
		double scale = (double)nb / (double)(t1 - t0);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			int64_t ts = sqlite3_column_int64(st, 0);
			double pos = (double)(ts - t0) * scale;
			size_t k = pos <= 0            ? 0
			           : pos >= (double)nb ? nb - 1
			                               : (size_t)pos;
			while (b < k) {
				live[b++] = cur;
				peak[b] = cur;
			}
			int64_t c = sqlite3_column_int64(st, 2);
			cur += sqlite3_column_int(st, 1) ? c : -c;
			if (cur > peak[b])
				peak[b] = cur;
		}
		if (rd_finish(db, subsys, st, rc))
			return -EIO;
	}
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
	sqlite3_stmt *st;
	int rc;

	*out = 0;
	if (!rd_has_table(db, "heapprof_event"))
		return 0;
	st = rd_prepare(
	        db, subsys,
	        "SELECT coalesce(sum(CASE kind WHEN 'alloc' THEN charged"
	        " ELSE -charged END), 0) FROM heapprof_event"
	        " WHERE upid = ? AND heap_name = ?");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(st, 0);
		rc = SQLITE_DONE;
	}
	return rd_finish(db, subsys, st, rc) ? -EIO : 0;
}
