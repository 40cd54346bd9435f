/*
 * The trace's events one by one (trace_read.h, "the events one by one"):
 * the chunks of heapprof_event_chunk decoded in turn (evchunk.h), or the
 * rows of an older profile's heapprof_event table, as one stream of
 * struct tr_event.  Every reader of events, and heapprof_event itself for
 * SQL (event_vtab.c), reads through it.
 *
 * In ts order (TR_EV_BY_TS) the chunks are still read once, in order:
 * each chunk's lowest ts is known from its row, so an event is handed out
 * once no chunk after it can hold an earlier one; until then it waits,
 * sorted, with the events read so far.  Events of one thread are in order
 * and threads interleave closely, so what waits is about one chunk.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/evchunk.h"
#include "store/trace_read.h"
#include "util/err.h"
#include "util/grow.h"
#include "util/hmap.h"

/* How often (events) the progress function hears of an iterator. */
#define PROGRESS_EVERY 65536

static tr_progress_fn progress_fn;
static void *progress_arg;

void tr_set_progress(tr_progress_fn fn, void *arg)
{
	progress_fn = fn;
	progress_arg = arg;
}

enum tr_form tr_events_form(sqlite3 *db)
{
	if (rd_has_table(db, "heapprof_event_chunk"))
		return TR_FORM_CHUNKS;
	return rd_has_table(db, "heapprof_event") ? TR_FORM_ROWS : TR_FORM_NONE;
}

struct tr_events {
	sqlite3 *db;
	const char *subsys;
	int64_t upid, from, to;
	bool lo, hi; /* from, to in effect */
	unsigned flags;
	enum tr_form form;
	sqlite3_stmt *st;
	struct evc_dec *dec;
	/* Heap names met, numbered; (upid, heapprof_event_heap.id) to
	 * that number. */
	struct hmap names, dict;
	char **name_tab;
	size_t nnames, capnames;
	/* The chunk being read. */
	const struct evc_event *ev;
	size_t n, i;
	int64_t chunk_id, chunk_upid;
	uint32_t last_heap, last_idx;
	bool have_last;
	/* TR_EV_BY_TS over chunks: per chunk (in the order read), the
	 * lowest ts of the chunks after it; the events read and not yet
	 * handed out, sorted, [pi, ready) of them handed out next. */
	int64_t *horizon;
	size_t nchunks, k;
	struct tr_event *pend, *tmp;
	size_t npend, cappend, captmp, pi, ready;
	/* Every chunk's id and the rowid of its first event - 1 (the
	 * events before it, every process's): rowids number the events
	 * 1, 2, ... in position order, as the table of rows did. */
	int64_t *cid, *cbase;
	size_t ncid, cp;
	int64_t base;
	struct tr_event cur;
	int64_t done, total, reported;
	char msg[200]; /* the last error */
	bool eof;      /* the statement is done */
	bool ended;    /* and every event handed out */
};

/* An error: kept for tr_events_error, printed unless subsys is NULL. */
__attribute__((format(printf, 2, 3))) static void say(struct tr_events *it,
                                                      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(it->msg, sizeof(it->msg), fmt, ap);
	va_end(ap);
	if (it->subsys)
		hp_err(it->subsys, "%s", it->msg);
}

const char *tr_events_error(const struct tr_events *it)
{
	return it->msg[0] ? it->msg : "error";
}

/* The number of heap name `name`, numbered if new; -ENOMEM. */
static int64_t intern(struct tr_events *it, const char *name)
{
	size_t len = strlen(name);
	int64_t *v = hmap_find(&it->names, name, len);
	if (v)
		return *v;
	char **a = hp_grow(it->name_tab, &it->capnames, it->nnames, sizeof(*a));
	if (!a)
		return -ENOMEM;
	it->name_tab = a;
	if (!(a[it->nnames] = strdup(name)))
		return -ENOMEM;
	if (hmap_put(&it->names, name, len, (int64_t)it->nnames) < 0) {
		free(a[it->nnames]);
		return -ENOMEM;
	}
	return (int64_t)it->nnames++;
}

static int oom(struct tr_events *it)
{
	say(it, "out of memory");
	return -ENOMEM;
}

static int db_err(struct tr_events *it)
{
	say(it, "%s", sqlite3_errmsg(it->db));
	return -EIO;
}

/* The WHERE clause of the chunks an iterator reads. */
static void chunk_where(const struct tr_events *it, char *buf, size_t len)
{
	snprintf(buf, len,
	         " FROM heapprof_event_chunk WHERE (?1 < 0 OR"
	         " upid = ?1)%s%s",
	         it->lo ? " AND max_ts >= ?2" : "",
	         it->hi ? " AND min_ts < ?3" : "");
}

static sqlite3_stmt *prep(struct tr_events *it, const char *sql)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(it->db, sql, -1, &st, NULL) != SQLITE_OK) {
		db_err(it);
		sqlite3_finalize(st);
		return NULL;
	}
	sqlite3_bind_int64(st, 1, it->upid);
	if (it->lo)
		sqlite3_bind_int64(st, 2, it->from);
	if (it->hi)
		sqlite3_bind_int64(st, 3, it->to);
	return st;
}

static int load_dict(struct tr_events *it)
{
	sqlite3_stmt *st = prep(it, "SELECT upid, id, name FROM"
	                            " heapprof_event_heap WHERE ?1 < 0 OR"
	                            " upid = ?1");
	int rc;
	if (!st)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t key[2] = {sqlite3_column_int64(st, 0),
		                  sqlite3_column_int64(st, 1)};
		const char *name = (const char *)sqlite3_column_text(st, 2);
		int64_t idx = intern(it, name ? name : "");
		if (idx < 0 || hmap_put(&it->dict, key, sizeof(key), idx) < 0) {
			sqlite3_finalize(st);
			return oom(it);
		}
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_err(it);
}

static int load_bases(struct tr_events *it)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int64_t sum = 0;
	int rc;
	if (sqlite3_prepare_v2(it->db,
	                       "SELECT id, events FROM heapprof_event_chunk"
	                       " ORDER BY id",
	                       -1, &st, NULL) != SQLITE_OK) {
		sqlite3_finalize(st);
		return db_err(it);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (it->ncid >= cap) {
			size_t c2 = cap ? cap * 2 : 256;
			int64_t *a = realloc(it->cid, c2 * sizeof(*a));
			if (a)
				it->cid = a;
			int64_t *b =
			        a ? realloc(it->cbase, c2 * sizeof(*b)) : NULL;
			if (!b) {
				sqlite3_finalize(st);
				return oom(it);
			}
			it->cbase = b;
			cap = c2;
		}
		it->cid[it->ncid] = sqlite3_column_int64(st, 0);
		it->cbase[it->ncid++] = sum;
		sum += sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_err(it);
}

/* Chunk counts for progress, and the horizons of TR_EV_BY_TS. */
static int load_chunks(struct tr_events *it)
{
	char where[256], sql[400];
	chunk_where(it, where, sizeof(where));
	snprintf(sql, sizeof(sql), "SELECT events, min_ts%s ORDER BY id",
	         where);
	sqlite3_stmt *st = prep(it, sql);
	size_t cap = 0;
	int rc;
	if (!st)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		it->total += sqlite3_column_int64(st, 0);
		if (!(it->flags & TR_EV_BY_TS))
			continue;
		int64_t *a =
		        hp_grow(it->horizon, &cap, it->nchunks, sizeof(*a));
		if (!a) {
			sqlite3_finalize(st);
			return oom(it);
		}
		it->horizon = a;
		a[it->nchunks++] = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return db_err(it);
	/* horizon[k]: the lowest ts of chunks k+1.. (none: INT64_MAX). */
	int64_t low = INT64_MAX;
	for (size_t k = it->nchunks; k-- > 0;) {
		int64_t mine = it->horizon[k];
		it->horizon[k] = low;
		if (mine < low)
			low = mine;
	}
	return 0;
}

int tr_events_open(sqlite3 *db, const char *subsys, int64_t upid, int64_t from,
                   int64_t to, unsigned flags, struct tr_events **out)
{
	struct tr_events *it = calloc(1, sizeof(*it));
	char sql[600], where[256];
	int err = 0;

	*out = NULL;
	if (!it) {
		if (subsys)
			hp_err(subsys, "out of memory");
		return -ENOMEM;
	}
	it->db = db;
	it->subsys = subsys;
	it->upid = upid < 0 ? -1 : upid;
	it->from = from;
	it->to = to;
	it->lo = from != TR_TS_MIN;
	it->hi = to != TR_TS_MAX;
	it->flags = flags;
	hmap_init(&it->names);
	hmap_init(&it->dict);
	it->form = tr_events_form(db);
	if (it->form == TR_FORM_CHUNKS) {
		if (!(it->dec = evc_dec_new()))
			err = oom(it);
		if (!err)
			err = load_dict(it);
		if (!err)
			err = load_chunks(it);
		if (!err)
			err = load_bases(it);
		chunk_where(it, where, sizeof(where));
		snprintf(sql, sizeof(sql),
		         "SELECT id, upid, data%s ORDER BY id", where);
	} else if (it->form == TR_FORM_ROWS) {
		snprintf(sql, sizeof(sql),
		         "SELECT rowid, upid, ts, kind = 'free', tid,"
		         " address, size, charged, heap_name, stack_key,"
		         " coalesce(alloc_ts, 0) FROM heapprof_event"
		         " WHERE (?1 < 0 OR upid = ?1)%s%s ORDER BY %s",
		         it->lo ? " AND ts >= ?2" : "",
		         it->hi ? " AND ts < ?3" : "",
		         flags & TR_EV_BY_TS ? "ts, rowid" : "rowid");
	}
	if (!err && it->form != TR_FORM_NONE && !(it->st = prep(it, sql)))
		err = -EIO;
	if (err) {
		tr_events_close(it);
		return err;
	}
	*out = it;
	return 0;
}

static void say_progress(struct tr_events *it)
{
	if (progress_fn && it->done - it->reported >= PROGRESS_EVERY) {
		it->reported = it->done;
		progress_fn(progress_arg, it->done, it->total);
	}
}

/* The next chunk decoded into it->ev: 1, 0 at the end, or errno. */
static int next_chunk(struct tr_events *it)
{
	if (it->eof)
		return 0;
	int rc = sqlite3_step(it->st);
	if (rc == SQLITE_DONE)
		it->eof = true;
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return db_err(it);
	it->chunk_id = sqlite3_column_int64(it->st, 0);
	it->chunk_upid = sqlite3_column_int64(it->st, 1);
	const void *blob = sqlite3_column_blob(it->st, 2);
	size_t len = (size_t)sqlite3_column_bytes(it->st, 2);
	int err = evc_decode(it->dec, blob, len, &it->ev, &it->n);
	if (err == -ENOMEM)
		return oom(it);
	if (err) {
		say(it,
		    "damaged trace: chunk %lld of heapprof_event_chunk "
		    "does not decode",
		    (long long)it->chunk_id);
		return -EINVAL;
	}
	while (it->cp < it->ncid && it->cid[it->cp] < it->chunk_id)
		it->cp++;
	it->base = it->cp < it->ncid && it->cid[it->cp] == it->chunk_id
	                   ? it->cbase[it->cp]
	                   : it->chunk_id << 20;
	it->i = 0;
	it->have_last = false;
	it->done += (int64_t)it->n;
	say_progress(it);
	return 1;
}

/* Event i of the chunk as a tr_event: 1, 0 when out of range, errno. */
static int chunk_event(struct tr_events *it, size_t i, struct tr_event *o)
{
	const struct evc_event *x = &it->ev[i];
	if ((it->lo && x->ts < it->from) || (it->hi && x->ts >= it->to))
		return 0;
	if (!it->have_last || x->heap != it->last_heap) {
		int64_t key[2] = {it->chunk_upid, x->heap};
		int64_t *v = hmap_find(&it->dict, key, sizeof(key));
		if (!v) {
			say(it,
			    "damaged trace: chunk %lld names heap %u, "
			    "which heapprof_event_heap lacks",
			    (long long)it->chunk_id, x->heap);
			return -EINVAL;
		}
		it->last_heap = x->heap;
		it->last_idx = (uint32_t)*v;
		it->have_last = true;
	}
	*o = (struct tr_event){
	        .rowid = it->base + (int64_t)i + 1,
	        .upid = it->chunk_upid,
	        .ts = x->ts,
	        .free = (int)x->free,
	        .tid = x->tid,
	        .address = x->address,
	        .size = x->size,
	        .charged = x->charged,
	        .stack_key = x->stack_key,
	        .alloc_ts = x->alloc_ts,
	        .heap = it->name_tab[it->last_idx],
	        .heap_idx = it->last_idx,
	};
	return 1;
}

static int next_row(struct tr_events *it)
{
	sqlite3_stmt *st = it->st;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return db_err(it);
	const char *name = (const char *)sqlite3_column_text(st, 8);
	int64_t idx = intern(it, name ? name : "");
	if (idx < 0)
		return oom(it);
	it->cur = (struct tr_event){
	        .rowid = sqlite3_column_int64(st, 0),
	        .upid = sqlite3_column_int64(st, 1),
	        .ts = sqlite3_column_int64(st, 2),
	        .free = sqlite3_column_int(st, 3),
	        .tid = sqlite3_column_int64(st, 4),
	        .address = sqlite3_column_int64(st, 5),
	        .size = sqlite3_column_int64(st, 6),
	        .charged = sqlite3_column_int64(st, 7),
	        .heap = it->name_tab[idx],
	        .heap_idx = (uint32_t)idx,
	        .stack_key = sqlite3_column_int64(st, 9),
	        .alloc_ts = sqlite3_column_int64(st, 10),
	};
	it->done++;
	say_progress(it);
	return 1;
}

/* Stable sort of a[0..n) by ts (a merge sort through tmp). */
static int sort_by_ts(struct tr_events *it, struct tr_event *a, size_t n)
{
	size_t i;
	for (i = 1; i < n && a[i - 1].ts <= a[i].ts; i++)
		;
	if (i >= n)
		return 0;
	if (n > it->captmp) {
		struct tr_event *t = realloc(it->tmp, n * sizeof(*t));
		if (!t)
			return oom(it);
		it->tmp = t;
		it->captmp = n;
	}
	struct tr_event *src = a, *dst = it->tmp;
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n;
			size_t hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t x = lo, y = mid, o = lo;
			while (x < mid && y < hi)
				dst[o++] = src[y].ts < src[x].ts ? src[y++]
				                                 : src[x++];
			while (x < mid)
				dst[o++] = src[x++];
			while (y < hi)
				dst[o++] = src[y++];
		}
		struct tr_event *t = src;
		src = dst;
		dst = t;
	}
	if (src != a && n)
		memcpy(a, src, n * sizeof(*a));
	return 0;
}

/* TR_EV_BY_TS over chunks: read chunks until an event can go out. */
static int fill_by_ts(struct tr_events *it)
{
	/* What went out leaves the front. */
	if (it->npend > it->pi)
		memmove(it->pend, it->pend + it->pi,
		        (it->npend - it->pi) * sizeof(*it->pend));
	it->npend -= it->pi;
	it->pi = it->ready = 0;
	for (;;) {
		int rc = next_chunk(it);
		if (rc < 0)
			return rc;
		int64_t horizon = INT64_MAX;
		bool last = rc == 0;
		if (!last) {
			size_t old = it->npend;
			if (old + it->n > it->cappend) {
				size_t cap = it->cappend ? it->cappend : 4096;
				while (cap < old + it->n)
					cap *= 2;
				struct tr_event *a =
				        realloc(it->pend, cap * sizeof(*a));
				if (!a)
					return oom(it);
				it->pend = a;
				it->cappend = cap;
			}
			for (size_t i = 0; i < it->n; i++) {
				int r = chunk_event(it, i,
				                    &it->pend[it->npend]);
				if (r < 0)
					return r;
				it->npend += (size_t)r;
			}
			if (sort_by_ts(it, it->pend + old, it->npend - old))
				return -ENOMEM;
			/* The new events after the old ones: one merge. */
			if (old && it->npend > old &&
			    it->pend[old].ts < it->pend[old - 1].ts &&
			    sort_by_ts(it, it->pend, it->npend))
				return -ENOMEM;
			horizon = it->k < it->nchunks ? it->horizon[it->k]
			                              : INT64_MAX;
			it->k++;
		}
		size_t r = 0;
		if (last) {
			r = it->npend;
		} else {
			/* Events up to the horizon (a later chunk's events
			 * at it come after them in position order). */
			size_t lo = 0, hi = it->npend;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (it->pend[mid].ts <= horizon)
					lo = mid + 1;
				else
					hi = mid;
			}
			r = lo;
		}
		it->ready = r;
		if (r || last)
			return r ? 1 : 0;
	}
}

int tr_events_next(struct tr_events *it, const struct tr_event **ev)
{
	int rc = 0;

	if (it->ended)
		return 0;
	if (it->form == TR_FORM_ROWS) {
		rc = next_row(it);
		if (rc == 1)
			*ev = &it->cur;
	} else if (it->form == TR_FORM_CHUNKS && (it->flags & TR_EV_BY_TS)) {
		if (it->pi >= it->ready)
			rc = fill_by_ts(it);
		else
			rc = 1;
		if (rc == 1)
			*ev = &it->pend[it->pi++];
	} else if (it->form == TR_FORM_CHUNKS) {
		for (;;) {
			while (it->i < it->n) {
				rc = chunk_event(it, it->i++, &it->cur);
				if (rc)
					break;
			}
			if (rc)
				break;
			if ((rc = next_chunk(it)) <= 0)
				break;
			rc = 0;
		}
		if (rc == 1)
			*ev = &it->cur;
	}
	if (rc <= 0) {
		it->ended = true;
		if (progress_fn && it->reported)
			progress_fn(progress_arg, -1, it->total);
	}
	return rc;
}

void tr_events_close(struct tr_events *it)
{
	if (!it)
		return;
	if (!it->ended && progress_fn && it->reported)
		progress_fn(progress_arg, -1, it->total);
	sqlite3_finalize(it->st);
	evc_dec_free(it->dec);
	for (size_t i = 0; i < it->nnames; i++)
		free(it->name_tab[i]);
	free(it->name_tab);
	hmap_free(&it->names);
	hmap_free(&it->dict);
	free(it->horizon);
	free(it->cid);
	free(it->cbase);
	free(it->pend);
	free(it->tmp);
	free(it);
}

int tr_events_count(sqlite3 *db, const char *subsys, int64_t upid,
                    struct tr_count *c)
{
	enum tr_form form = tr_events_form(db);
	sqlite3_stmt *st;
	int rc;

	memset(c, 0, sizeof(*c));
	if (form == TR_FORM_NONE)
		return 0;
	st = rd_prepare(db, subsys,
	                form == TR_FORM_CHUNKS
	                        ? "SELECT coalesce(sum(allocs), 0),"
	                          " coalesce(sum(events - allocs), 0),"
	                          " min(min_ts), max(max_ts) FROM"
	                          " heapprof_event_chunk WHERE ?1 < 0 OR"
	                          " upid = ?1"
	                        : "SELECT coalesce(sum(kind = 'alloc'), 0),"
	                          " coalesce(sum(kind = 'free'), 0), min(ts),"
	                          " max(ts) FROM heapprof_event"
	                          " WHERE ?1 < 0 OR upid = ?1");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid < 0 ? -1 : upid);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		c->allocs = sqlite3_column_int64(st, 0);
		c->frees = sqlite3_column_int64(st, 1);
		c->first_ts = sqlite3_column_int64(st, 2);
		c->last_ts = sqlite3_column_int64(st, 3);
		rc = SQLITE_DONE;
	}
	return rd_finish(db, subsys, st, rc) ? -EIO : 0;
}
