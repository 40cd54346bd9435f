/*
 * Event chunks (see evchunk.h): the columnar encoding of a process's trace
 * events and its zstd compression.  Columns keep values of one kind
 * together (small time differences, small table indices, sizes), which
 * zstd then packs far better than rows; a free of a block allocated in the
 * same chunk, the common case for short-lived blocks, costs its tag, time
 * and back reference only.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "store/evchunk.h"

#define EVC_VERSION 1
#define CODEC_ZSTD  1

/* Tag bits. */
#define T_FREE    0x01u
#define T_REF     0x02u
#define T_TID     0x04u
#define T_CHARGED 0x08u
#define T_HEAP    0x10u
#define T_ATS     0x20u
#define T_ALL     0x3fu

enum col {
	C_TAG,
	C_TS,
	C_REF,
	C_TID,
	C_ADDR,
	C_SIZE,
	C_CHARGED,
	C_STACK,
	C_HEAP,
	C_ATS,
	C_COUNT
};

/* ---- growable bytes, varints --------------------------------------------- */

struct bytes {
	uint8_t *b;
	size_t n, cap;
};

static int bytes_room(struct bytes *s, size_t more)
{
	if (s->n + more <= s->cap)
		return 0;
	size_t cap = s->cap ? s->cap : 4096;
	while (cap < s->n + more)
		cap *= 2;
	uint8_t *b = realloc(s->b, cap);
	if (!b)
		return -ENOMEM;
	s->b = b;
	s->cap = cap;
	return 0;
}

/* Room for 10 bytes is made by the caller (bytes_room per event). */
static inline void put_var(struct bytes *s, uint64_t v)
{
	uint8_t *p = s->b + s->n;
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	s->n = (size_t)(p - s->b);
}

static inline uint64_t zigzag(uint64_t d)
{
	return (d << 1) ^ (0 - (d >> 63));
}

static inline uint64_t unzigzag(uint64_t z)
{
	return (z >> 1) ^ (0 - (z & 1));
}

/* ---- a small map from 64-bit keys to indices, cleared by generation ------ */

struct u64map {
	uint64_t *keys;
	uint32_t *vals, *gen;
	size_t mask;
	uint32_t cur;
};

static int map_reset(struct u64map *m, size_t want)
{
	size_t cap = 64;
	while (cap < want * 2)
		cap *= 2;
	if (cap > m->mask + 1 || !m->keys) {
		free(m->keys);
		free(m->vals);
		free(m->gen);
		m->keys = malloc(cap * sizeof(*m->keys));
		m->vals = malloc(cap * sizeof(*m->vals));
		m->gen = calloc(cap, sizeof(*m->gen));
		if (!m->keys || !m->vals || !m->gen) {
			free(m->keys);
			free(m->vals);
			free(m->gen);
			memset(m, 0, sizeof(*m));
			return -ENOMEM;
		}
		m->mask = cap - 1;
		m->cur = 0;
	}
	if (++m->cur == 0) {
		memset(m->gen, 0, (m->mask + 1) * sizeof(*m->gen));
		m->cur = 1;
	}
	return 0;
}

static void map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->gen);
	memset(m, 0, sizeof(*m));
}

static inline size_t map_hash(const struct u64map *m, uint64_t k)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 20) & m->mask;
}

/* The slot of key k: its own, or the empty one it would take. */
static inline size_t map_slot(const struct u64map *m, uint64_t k)
{
	size_t i = map_hash(m, k);
	while (m->gen[i] == m->cur && m->keys[i] != k)
		i = (i + 1) & m->mask;
	return i;
}

static inline bool map_used(const struct u64map *m, size_t i)
{
	return m->gen[i] == m->cur;
}

static inline void map_set(struct u64map *m, size_t i, uint64_t k, uint32_t v)
{
	m->gen[i] = m->cur;
	m->keys[i] = k;
	m->vals[i] = v;
}

/* ---- encoding ----------------------------------------------------------- */

struct evc_enc {
	struct bytes col[C_COUNT];
	struct bytes head, raw, out;
	struct u64map tids, stacks, addrs;
	uint64_t *tid_tab, *stack_tab;
	size_t ntids, nstacks, captab;
	ZSTD_CCtx *zc;
};

struct evc_enc *evc_enc_new(void)
{
	struct evc_enc *e = calloc(1, sizeof(*e));
	if (e && !(e->zc = ZSTD_createCCtx())) {
		free(e);
		e = NULL;
	}
	return e;
}

void evc_enc_free(struct evc_enc *e)
{
	if (!e)
		return;
	for (int i = 0; i < C_COUNT; i++)
		free(e->col[i].b);
	free(e->head.b);
	free(e->raw.b);
	free(e->out.b);
	map_free(&e->tids);
	map_free(&e->stacks);
	map_free(&e->addrs);
	free(e->tid_tab);
	free(e->stack_tab);
	ZSTD_freeCCtx(e->zc);
	free(e);
}

/* Index of v in a chunk table (added if new). */
static inline uint32_t tab_index(struct u64map *m, uint64_t *tab, size_t *n,
                                 uint64_t v)
{
	size_t i = map_slot(m, v);
	if (map_used(m, i))
		return m->vals[i];
	map_set(m, i, v, (uint32_t)*n);
	tab[*n] = v;
	return (uint32_t)(*n)++;
}

/* Whether free f can be stored as a reference to allocation a. */
static inline bool same_block(const struct evc_event *a,
                              const struct evc_event *f)
{
	return !a->free && a->ts == f->alloc_ts && f->alloc_ts &&
	       a->address == f->address && a->size == f->size &&
	       a->charged == f->charged && a->stack_key == f->stack_key &&
	       a->heap == f->heap;
}

static int encode_columns(struct evc_enc *e, const struct evc_event *ev,
                          size_t n)
{
	uint64_t prev_ts = 0, prev_addr = 0;
	uint32_t prev_tid = 0, prev_heap = 0;

	for (int c = 0; c < C_COUNT; c++) {
		e->col[c].n = 0;
		if (bytes_room(&e->col[c], n * (c == C_TAG ? 1 : 10)))
			return -ENOMEM;
	}
	if (e->captab < n) {
		uint64_t *t = realloc(e->tid_tab, n * sizeof(*t));
		if (t)
			e->tid_tab = t;
		uint64_t *s = t ? realloc(e->stack_tab, n * sizeof(*s)) : NULL;
		if (!s)
			return -ENOMEM;
		e->stack_tab = s;
		e->captab = n;
	}
	e->ntids = e->nstacks = 0;
	if (map_reset(&e->tids, n) || map_reset(&e->stacks, n) ||
	    map_reset(&e->addrs, n))
		return -ENOMEM;
	/* The thread of the event before the first: thread table entry 0,
	 * the first event's. */
	tab_index(&e->tids, e->tid_tab, &e->ntids, ev[0].tid);
	prev_tid = ev[0].tid;
	for (size_t i = 0; i < n; i++) {
		const struct evc_event *x = &ev[i];
		uint8_t tag = x->free ? T_FREE : 0;
		put_var(&e->col[C_TS], zigzag((uint64_t)x->ts - prev_ts));
		prev_ts = (uint64_t)x->ts;
		if (x->tid != prev_tid) {
			tag |= T_TID;
			put_var(&e->col[C_TID], tab_index(&e->tids, e->tid_tab,
			                                  &e->ntids, x->tid));
			prev_tid = x->tid;
		}
		size_t slot = map_slot(&e->addrs, (uint64_t)x->address);
		if (x->free && map_used(&e->addrs, slot) &&
		    same_block(&ev[e->addrs.vals[slot]], x)) {
			tag |= T_REF;
			put_var(&e->col[C_REF], i - e->addrs.vals[slot]);
			e->col[C_TAG].b[e->col[C_TAG].n++] = tag;
			continue;
		}
		if (!x->free)
			map_set(&e->addrs, slot, (uint64_t)x->address,
			        (uint32_t)i);
		put_var(&e->col[C_ADDR],
		        zigzag((uint64_t)x->address - prev_addr));
		prev_addr = (uint64_t)x->address;
		put_var(&e->col[C_SIZE], (uint64_t)x->size);
		if (x->charged != x->size) {
			tag |= T_CHARGED;
			put_var(&e->col[C_CHARGED], (uint64_t)x->charged);
		}
		put_var(&e->col[C_STACK],
		        tab_index(&e->stacks, e->stack_tab, &e->nstacks,
		                  (uint64_t)x->stack_key));
		if (x->heap != prev_heap) {
			tag |= T_HEAP;
			put_var(&e->col[C_HEAP], x->heap);
			prev_heap = x->heap;
		}
		if (x->alloc_ts) {
			tag |= T_ATS;
			put_var(&e->col[C_ATS], zigzag((uint64_t)x->ts -
			                               (uint64_t)x->alloc_ts));
		}
		e->col[C_TAG].b[e->col[C_TAG].n++] = tag;
	}
	return 0;
}

int evc_encode(struct evc_enc *e, const struct evc_event *ev, size_t n,
               int level, const void **out, size_t *len)
{
	if (!n || n > EVC_MAX_EVENTS)
		return -EINVAL;
	int err = encode_columns(e, ev, n);
	if (err)
		return err;
	struct bytes *h = &e->head;
	h->n = 0;
	if (bytes_room(h, 16 + 10 * (2 + e->ntids + e->nstacks + C_COUNT)))
		return -ENOMEM;
	h->b[h->n++] = EVC_VERSION;
	put_var(h, n);
	put_var(h, e->ntids);
	for (size_t i = 0; i < e->ntids; i++)
		put_var(h, e->tid_tab[i]);
	put_var(h, e->nstacks);
	for (size_t i = 0; i < e->nstacks; i++)
		put_var(h, e->stack_tab[i]);
	size_t total = 0;
	for (int c = 0; c < C_COUNT; c++) {
		put_var(h, e->col[c].n);
		total += e->col[c].n;
	}
	struct bytes *r = &e->raw;
	r->n = 0;
	if (bytes_room(r, h->n + total))
		return -ENOMEM;
	if (h->n)
		memcpy(r->b, h->b, h->n);
	r->n = h->n;
	for (int c = 0; c < C_COUNT; c++) {
		if (!e->col[c].n)
			continue; /* an empty column may have no buffer */
		memcpy(r->b + r->n, e->col[c].b, e->col[c].n);
		r->n += e->col[c].n;
	}
	size_t bound = ZSTD_compressBound(r->n);
	e->out.n = 0;
	if (bytes_room(&e->out, bound + 1))
		return -ENOMEM;
	e->out.b[0] = CODEC_ZSTD;
	size_t z = ZSTD_compressCCtx(e->zc, e->out.b + 1, bound, r->b, r->n,
	                             level);
	/* The bound is always enough: what fails is memory. */
	if (ZSTD_isError(z))
		return -ENOMEM;
	*out = e->out.b;
	*len = z + 1;
	return 0;
}

/* ---- decoding ----------------------------------------------------------- */

struct evc_dec {
	struct bytes raw;
	struct evc_event *ev;
	size_t capev;
	uint64_t *tid_tab, *stack_tab;
	size_t captid, capstack;
	ZSTD_DCtx *zd;
};

struct evc_dec *evc_dec_new(void)
{
	struct evc_dec *d = calloc(1, sizeof(*d));
	if (d && !(d->zd = ZSTD_createDCtx())) {
		free(d);
		d = NULL;
	}
	return d;
}

void evc_dec_free(struct evc_dec *d)
{
	if (!d)
		return;
	free(d->raw.b);
	free(d->ev);
	free(d->tid_tab);
	free(d->stack_tab);
	ZSTD_freeDCtx(d->zd);
	free(d);
}

/* A column being read: [p, end). */
struct rd {
	const uint8_t *p, *end;
};

/* A varint; false at the end of the column or on an overlong one. */
static inline bool get_var(struct rd *r, uint64_t *v)
{
	const uint8_t *p = r->p;
	if (p < r->end && *p < 0x80) {
		*v = *p;
		r->p = p + 1;
		return true;
	}
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (p >= r->end)
			return false;
		uint8_t b = *p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (b < 0x80) {
			*v = x;
			r->p = p;
			return true;
		}
	}
	return false;
}

static int table(struct rd *h, uint64_t **tab, size_t *cap, size_t *n,
                 size_t max)
{
	uint64_t k;
	if (!get_var(h, &k) || k > max)
		return -EINVAL;
	if (k > *cap) {
		uint64_t *t = realloc(*tab, k * sizeof(*t));
		if (!t)
			return -ENOMEM;
		*tab = t;
		*cap = k;
	}
	for (uint64_t i = 0; i < k; i++)
		if (!get_var(h, &(*tab)[i]))
			return -EINVAL;
	*n = k;
	return 0;
}

static int decode_raw(struct evc_dec *d, const uint8_t *raw, size_t len,
                      size_t *nout)
{
	struct rd h = {raw, raw + len};
	uint64_t n, v;
	size_t ntids, nstacks;
	int err;

	if (len < 1 || *h.p++ != EVC_VERSION || !get_var(&h, &n) || !n ||
	    n > EVC_MAX_EVENTS)
		return -EINVAL;
	if ((err = table(&h, &d->tid_tab, &d->captid, &ntids, n)) ||
	    (err = table(&h, &d->stack_tab, &d->capstack, &nstacks, n)))
		return err;
	if (!ntids)
		return -EINVAL;
	struct rd col[C_COUNT];
	const uint8_t *p = NULL;
	uint64_t clen[C_COUNT];
	for (int c = 0; c < C_COUNT; c++)
		if (!get_var(&h, &clen[c]))
			return -EINVAL;
	p = h.p;
	for (int c = 0; c < C_COUNT; c++) {
		if (clen[c] > (uint64_t)(h.end - p))
			return -EINVAL;
		col[c] = (struct rd){p, p + clen[c]};
		p += clen[c];
	}
	if (p != h.end || clen[C_TAG] != n)
		return -EINVAL;
	if (n > d->capev) {
		struct evc_event *a = realloc(d->ev, n * sizeof(*a));
		if (!a)
			return -ENOMEM;
		d->ev = a;
		d->capev = n;
	}
	uint64_t ts = 0, addr = 0;
	uint32_t tid = (uint32_t)d->tid_tab[0], heap = 0;
	for (size_t i = 0; i < n; i++) {
		struct evc_event *x = &d->ev[i];
		uint8_t tag = col[C_TAG].p[i];
		if (tag & ~T_ALL)
			return -EINVAL;
		if (!get_var(&col[C_TS], &v))
			return -EINVAL;
		ts += unzigzag(v);
		if (tag & T_TID) {
			if (!get_var(&col[C_TID], &v) || v >= ntids)
				return -EINVAL;
			tid = (uint32_t)d->tid_tab[v];
		}
		if (tag & T_REF) {
			if (!(tag & T_FREE) ||
			    (tag & ~(T_FREE | T_REF | T_TID)) ||
			    !get_var(&col[C_REF], &v) || !v || v > i ||
			    x[-(ptrdiff_t)v].free)
				return -EINVAL;
			*x = x[-(ptrdiff_t)v];
			x->alloc_ts = x->ts;
			x->ts = (int64_t)ts;
			x->tid = tid;
			x->free = 1;
			continue;
		}
		x->ts = (int64_t)ts;
		x->tid = tid;
		x->free = tag & T_FREE ? 1 : 0;
		if (!get_var(&col[C_ADDR], &v))
			return -EINVAL;
		addr += unzigzag(v);
		x->address = (int64_t)addr;
		if (!get_var(&col[C_SIZE], &v))
			return -EINVAL;
		x->size = (int64_t)v;
		x->charged = x->size;
		if ((tag & T_CHARGED) && !get_var(&col[C_CHARGED], &v))
			return -EINVAL;
		if (tag & T_CHARGED)
			x->charged = (int64_t)v;
		if (!get_var(&col[C_STACK], &v) || v >= nstacks)
			return -EINVAL;
		x->stack_key = (int64_t)d->stack_tab[v];
		if (tag & T_HEAP) {
			if (!get_var(&col[C_HEAP], &v) || v > UINT32_MAX)
				return -EINVAL;
			heap = (uint32_t)v;
		}
		x->heap = heap;
		x->alloc_ts = 0;
		if (tag & T_ATS) {
			if (!get_var(&col[C_ATS], &v))
				return -EINVAL;
			x->alloc_ts = (int64_t)(ts - unzigzag(v));
		}
	}
	for (int c = 1; c < C_COUNT; c++)
		if (c != C_TAG && col[c].p != col[c].end)
			return -EINVAL;
	*nout = n;
	return 0;
}

int evc_decode(struct evc_dec *d, const void *blob, size_t len,
               const struct evc_event **ev, size_t *n)
{
	const uint8_t *b = blob;

	if (len < 2 || b[0] != CODEC_ZSTD)
		return -EINVAL;
	unsigned long long want = ZSTD_getFrameContentSize(b + 1, len - 1);
	/* No chunk holds more than ~80 bytes an event before compression. */
	if (want == ZSTD_CONTENTSIZE_UNKNOWN ||
	    want == ZSTD_CONTENTSIZE_ERROR || want > 128ull * EVC_MAX_EVENTS)
		return -EINVAL;
	d->raw.n = 0;
	if (bytes_room(&d->raw, (size_t)want + 1))
		return -ENOMEM;
	size_t got = ZSTD_decompressDCtx(d->zd, d->raw.b, (size_t)want, b + 1,
	                                 len - 1);
	if (ZSTD_isError(got) || got != want)
		return -EINVAL;
	int err = decode_raw(d, d->raw.b, got, n);
	if (!err)
		*ev = d->ev;
	return err;
}
