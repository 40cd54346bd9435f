/*
 * The page of `heapprof flamegraph` (src/cli/cmd_flamegraph.c): one
 * self-contained HTML page with an interactive flame graph of a profile
 * (docs/FLAMEGRAPH.md).
 *
 * The page is the template embedded from src/flamegraph/ (HTML, CSS and
 * JS, inlined) plus the profile's data as one JSON document in a
 * <script type="application/json">.  The JSON is compact and the page
 * builds its trees itself:
 *
 *   funcs    functions: name, module (index into modules), source file
 *            (index into files, -1 if unknown)
 *   nodes    the call tree, callers before callees: parent (-1 at a root),
 *            func, line (0 unknown, -1 several).  A recorded callsite
 *            becomes one node per function of its frame's inline chain
 *            (offline symbols, outermost first), and callsites of the same
 *            function under the same parent share a node, as usual in a
 *            flame graph.
 *   procs    per process its dumps (ts, reason) and per heap and dump the
 *            state of every node with a value: a flat array
 *            [node, space, alloc_space, objects, alloc_objects, ...] and
 *            the totals of the four views.  A process with an event trace
 *            (record --trace) also has what the trace kept ("trace") and
 *            per heap its live bytes over time ("timeline", a few hundred
 *            buckets); with --from/--to its one "dump" is that window of
 *            the trace ("window").  Per heap, a traced process's
 *            allocation events ("ev": time, node, size, thread, when
 *            freed), up to PAGE_EVENTS_MAX over the page, from which the
 *            page computes time windows, threads and exact sizes; and per
 *            dump that kept its live blocks (heapprof_block) their sizes
 *            in power-of-two buckets ("sizes").  Memory over time, where
 *            the profile has it (collector/curve.c): the process's RSS
 *            ("rss") and per heap its live bytes ("curve"), each
 *            {"t": [ns since the start], "v": [bytes]}.
 *
 * Everything is streamed: the samples of each dump are written as they are
 * summed, then the nodes and functions they reached.  The states of a
 * heap's dumps are summed in one pass over its allocation rows by the
 * heap model (model/state.h), and the functions and nodes are its call
 * tree's (model/tree.h), so the work is linear in the rows, the callsites
 * and the output.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph/assets.h"
#include "flamegraph/page.h"
#include "model/state.h"
#include "model/tree.h"
#include "analysis/aggregate.h"
#include "store/blocks.h"
#include "store/procid.h"
#include "store/procinfo.h"
#include "store/reader.h"
#include "store/profile.h"
#include "store/trace_read.h"
#include "util/err.h"
#include "util/grow.h"
#include "util/hmap.h"

#define SUBSYS "flamegraph"

/* Buckets of a heap's timeline: a few hundred points across the page. */
#define TIMELINE_POINTS 400

/* Most allocation events a page carries, over all its processes: a
 * process whose trace would go beyond has its events left out (the page
 * then says so, and works from the dumps). */
#define PAGE_EVENTS_MAX 1000000

/* Allocation sizes in power-of-two buckets: 0 for a size of 0, k for
 * [2^(k-1), 2^k). */
#define SIZE_BUCKETS 65

/* ---- buffered JSON writer ----------------------------------------------- */

struct jw {
	FILE *f;
	char buf[1 << 16];
	size_t len;
	int err; /* errno of the first failed write, or 0 */
};

static void jw_flush(struct jw *w)
{
	if (w->len && !w->err && fwrite(w->buf, 1, w->len, w->f) != w->len)
		w->err = errno ? errno : EIO;
	w->len = 0;
}

static void jw_mem(struct jw *w, const char *s, size_t n)
{
	while (n) {
		if (w->len == sizeof(w->buf))
			jw_flush(w);
		size_t k = sizeof(w->buf) - w->len;
		k = k < n ? k : n;
		memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
	}
}

static void jw_raw(struct jw *w, const char *s)
{
	jw_mem(w, s, strlen(s));
}

static void jw_char(struct jw *w, char c)
{
	if (w->len == sizeof(w->buf))
		jw_flush(w);
	w->buf[w->len++] = c;
}

static void jw_int(struct jw *w, int64_t v)
{
	char tmp[24];
	size_t i = sizeof(tmp);
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	do {
		tmp[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		tmp[--i] = '-';
	if (w->len + sizeof(tmp) > sizeof(w->buf))
		jw_flush(w);
	memcpy(w->buf + w->len, tmp + i, sizeof(tmp) - i);
	w->len += sizeof(tmp) - i;
}

/*
 * A JSON string.  '<' is written as \u003c so no "</script" (or "<!--")
 * can appear inside the page's data block; other bytes >= 0x20 pass as is
 * (the page is UTF-8; an invalid byte shows as U+FFFD).
 */
static void jw_str(struct jw *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	jw_char(w, '"');
	for (; *p; p++) {
		unsigned char c = *p;
		if (c == '"' || c == '\\') {
			jw_char(w, '\\');
			jw_char(w, (char)c);
		} else if (c < 0x20 || c == '<' || c == 0x7f) {
			char e[6] = {'\\', 'u',         '0',
			             '0',  hex[c >> 4], hex[c & 15]};
			jw_mem(w, e, sizeof(e));
		} else {
			jw_char(w, (char)c);
		}
	}
	jw_char(w, '"');
}

static void jw_key(struct jw *w, const char *key)
{
	jw_char(w, '"');
	jw_raw(w, key);
	jw_raw(w, "\":");
}

/* ---- samples ------------------------------------------------------------ */

/* The bucket of an allocation of size bytes (SIZE_BUCKETS). */
static int size_bucket(int64_t size)
{
	return size <= 0 ? 0 : 64 - __builtin_clzll((uint64_t)size);
}

/* Per size bucket: objects (16.16 fixed point) and charged bytes. */
struct size_hist {
	uint64_t fp[SIZE_BUCKETS];
	int64_t bytes[SIZE_BUCKETS];
	int any;
};

/* ,"sizes":[bucket, objects, bytes, ...] for the non-empty buckets. */
static void write_sizes(struct jw *w, const struct size_hist *h)
{
	int first = 1;

	jw_raw(w, ",\"sizes\":[");
	for (int k = 0; k < SIZE_BUCKETS; k++) {
		if (!h->fp[k] && !h->bytes[k])
			continue;
		if (!first)
			jw_char(w, ',');
		first = 0;
		jw_int(w, k);
		jw_char(w, ',');
		jw_int(w, (int64_t)prof_objects(h->fp[k]));
		jw_char(w, ',');
		jw_int(w, h->bytes[k]);
	}
	jw_char(w, ']');
}

/* One dump's state: {"d":[node, 4 views, ...], "tot":[4 views]}, and the
 * sizes of its live blocks when it kept them (sizes NULL: none). */
static int write_dump_state(struct jw *w, struct tree *g, const struct state *a,
                            const struct size_hist *sizes)
{
	int64_t tot[RD_NVIEWS] = {0};
	int first = 1;

	jw_raw(w, "{\"d\":[");
	for (size_t k = 0; k < a->ntouched; k++) {
		const int64_t *v = &a->v[a->touched[k] * RD_NVIEWS];
		if (!v[0] && !v[1] && !v[2] && !v[3])
			continue;
		int32_t node = tree_slot_node(g, a->touched[k]);
		if (node < 0)
			return -ENOMEM;
		if (!first)
			jw_char(w, ',');
		first = 0;
		jw_int(w, node);
		for (int i = 0; i < RD_NVIEWS; i++) {
			jw_char(w, ',');
			jw_int(w, v[i]);
			tot[i] += v[i];
		}
	}
	jw_raw(w, "],\"tot\":[");
	for (int i = 0; i < RD_NVIEWS; i++) {
		if (i)
			jw_char(w, ',');
		jw_int(w, tot[i]);
	}
	jw_char(w, ']');
	if (sizes && sizes->any)
		write_sizes(w, sizes);
	jw_char(w, '}');
	return 0;
}

struct dumps_ctx {
	struct jw *w;
	struct tree *g;
	struct size_hist *const *sizes; /* per dump (NULL: none), or NULL */
};

/* state_walk_dumps' at_dump: the state at dump d, after a comma if not the
 * first. */
static int write_walked_state(void *ctx, size_t d, const struct state *a)
{
	struct dumps_ctx *c = ctx;

	if (d)
		jw_char(c->w, ',');
	return write_dump_state(c->w, c->g, a, c->sizes ? c->sizes[d] : NULL);
}

/*
 * The states of heap `heap` of process upid at each of its dumps, as a
 * JSON array, from one pass over its rows in ts order (a dump's state is
 * the sum of the rows up to its ts).
 */
static int write_heap_dumps(struct jw *w, sqlite3 *db, struct tree *g,
                            struct state *a, int64_t upid, const char *heap,
                            const struct rd_dump *dumps, size_t ndumps,
                            struct size_hist *const *sizes)
{
	struct dumps_ctx c = {w, g, sizes};

	jw_char(w, '[');
	int err = state_walk_dumps(db, SUBSYS, g->s, a, upid, heap, dumps,
	                           ndumps, write_walked_state, &c);
	jw_char(w, ']');
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	return err;
}

/* One memory row of a dump, after a comma: the first opens "mem". */
struct mem_rows {
	struct jw *w;
	int n;
};

static void mem_row(void *ctx, const char *name, int64_t value)
{
	struct mem_rows *m = ctx;

	jw_raw(m->w, m->n++ ? "," : ",\"mem\":{");
	jw_str(m->w, name);
	jw_char(m->w, ':');
	jw_int(m->w, value);
}

/*
 * The memory of the process beside a dump (heapprof_dump_memory: RSS, and
 * mallinfo2 at exit) as "mem":{name:value,...}; nothing if the profile
 * has none (or predates the table).
 */
static void write_dump_memory(struct jw *w, sqlite3 *db, int64_t upid,
                              int64_t ts)
{
	struct mem_rows m = {w, 0};

	pi_dump_memory_rows(db, upid, ts, mem_row, &m);
	if (m.n)
		jw_char(w, '}');
}

/* ---- the event trace: timeline and window -------------------------------- */

/* The times a traced process's page covers (boot time). */
struct trace_span {
	int64_t t0, t1;   /* the timeline: [t0, t1) */
	int64_t from, to; /* --from/--to: the window [from, to) */
	/* The running sum starts from the final state (a ring that lost its
	 * oldest events), not from 0. */
	int anchor_end;
};

static void span_of(const struct rd_process *p, const struct tr_info *t,
                    const struct fg_page_opts *o, struct trace_span *sp)
{
	int64_t begin, end;

	memset(sp, 0, sizeof(*sp));
	ag_window_bounds(p, t, &o->win, &begin, &end, &sp->from, &sp->to);
	sp->anchor_end = t->overwritten > 0;
	/* A ring that lost its oldest events knows nothing before its
	 * first event kept. */
	sp->t0 = sp->anchor_end && t->first_ts ? t->first_ts : begin;
	sp->t1 = end > sp->t0 ? end : sp->t0 + 1;
}

/* "trace":{mode, complete, events, left_out, first, last, ...}, times
 * relative to the process's start. */
static void write_trace_info(struct jw *w, const struct rd_process *p,
                             const struct tr_info *t,
                             const struct trace_span *sp, int in_page)
{
	jw_raw(w, ",\"trace\":{\"mode\":");
	jw_str(w, t->mode);
	jw_raw(w, ",\"complete\":");
	jw_int(w, tr_left_out(t) == 0);
	jw_raw(w, ",\"events\":");
	jw_int(w, t->allocs + t->frees);
	jw_raw(w, ",\"left_out\":");
	jw_int(w, tr_left_out(t));
	jw_raw(w, ",\"dropped\":");
	jw_int(w, t->dropped_allocs + t->dropped_frees);
	jw_raw(w, ",\"overwritten\":");
	jw_int(w, t->overwritten);
	jw_raw(w, ",\"first\":");
	jw_int(w, t->first_ts ? t->first_ts - p->start_ts : 0);
	jw_raw(w, ",\"last\":");
	jw_int(w, t->last_ts ? t->last_ts - p->start_ts : 0);
	if (t->full_ts) {
		jw_raw(w, ",\"full\":");
		jw_int(w, t->full_ts - p->start_ts);
	}
	jw_raw(w, ",\"anchor\":");
	jw_str(w, sp->anchor_end ? "end" : "start");
	/* The allocation events are in the page ("ev" of each heap), or
	 * left out: more than the page's limit. */
	jw_raw(w, ",\"in_page\":");
	jw_int(w, in_page);
	if (!in_page) {
		jw_raw(w, ",\"page_limit\":");
		jw_int(w, PAGE_EVENTS_MAX);
	}
	jw_char(w, '}');
}

/*
 * ,"timeline":{"t0":ns,"t1":ns,"base":bytes,"live":[...],"peak":[...]}: the
 * heap's live bytes at the end of each of TIMELINE_POINTS buckets of
 * [t0, t1), and the highest within each (times since the process's start),
 * from base at t0.  A ring that lost its oldest events counts back from the
 * final dump's live bytes (base: what was live before its first event).
 */
static int write_timeline(struct jw *w, sqlite3 *db, const struct rd_process *p,
                          const char *heap, const struct trace_span *sp)
{
	int64_t *live = malloc(2 * TIMELINE_POINTS * sizeof(*live));
	int64_t *peak = live ? live + TIMELINE_POINTS : NULL;
	int64_t base = 0;
	int err = live ? 0 : -ENOMEM;

	if (!err && sp->anchor_end) {
		struct tr_set leaks;
		struct tr_leak_src src;
		int64_t net = 0;
		err = state_leaks(db, SUBSYS, p->upid, &leaks, &src);
		if (!err)
			err = tr_net_bytes(db, SUBSYS, p->upid, heap, &net);
		if (!err) {
			const struct tr_heap *h = tr_set_find(&leaks, heap);
			base = (h ? h->tot[RD_SPACE] : 0) - net;
			base = base > 0 ? base : 0;
			tr_set_free(&leaks);
		}
	}
	if (!err)
		err = tr_timeline(db, SUBSYS, p->upid, heap, sp->t0, sp->t1,
		                  TIMELINE_POINTS, base, live, peak);
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	if (err) {
		free(live);
		return err;
	}
	jw_raw(w, ",\"timeline\":{\"t0\":");
	jw_int(w, sp->t0 - p->start_ts);
	jw_raw(w, ",\"t1\":");
	jw_int(w, sp->t1 - p->start_ts);
	jw_raw(w, ",\"base\":");
	jw_int(w, base);
	jw_raw(w, ",\"live\":[");
	for (size_t i = 0; i < TIMELINE_POINTS; i++) {
		if (i)
			jw_char(w, ',');
		jw_int(w, live[i]);
	}
	jw_raw(w, "],\"peak\":[");
	for (size_t i = 0; i < TIMELINE_POINTS; i++) {
		if (i)
			jw_char(w, ',');
		jw_int(w, peak[i]);
	}
	jw_raw(w, "]}");
	free(live);
	return 0;
}

/* The heap's state in the window, as a one-dump array like
 * write_heap_dumps'. */
static int write_window_state(struct jw *w, sqlite3 *db, struct tree *g,
                              struct state *a, int64_t upid, const char *heap,
                              const struct trace_span *sp)
{
	struct tr_heap win;
	int err = tr_window(db, SUBSYS, upid, heap, sp->from, sp->to, &win);

	if (err)
		return err;
	state_reset(a);
	for (size_t i = 0; i < win.n; i++)
		state_add_sample(a, g->s, &win.s[i]);
	tr_heap_free(&win);
	jw_char(w, '[');
	err = write_dump_state(w, g, a, NULL);
	jw_char(w, ']');
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	return err;
}

/* ---- what the page computes itself: sizes and events --------------------- */

/*
 * The sizes of the live blocks that dumps of process upid kept
 * (heapprof_block: named snapshots, and the final dump of a traced
 * process), per heap and dump: (*out)[h * ndumps + d], NULL where a dump
 * kept none of that heap; *out NULL when none kept any.  0 or -errno.
 */
struct sizes_ctx {
	const struct rd_dump *dumps;
	size_t ndumps;
	char **heaps;
	size_t nheaps;
	struct size_hist **hist;
	size_t d, h; /* the last match: rows come grouped by dump */
};

static int add_block_size(void *arg, int64_t id, const char *heap, int64_t size,
                          int64_t charged, int64_t fp)
{
	struct sizes_ctx *c = arg;
	if (c->dumps[c->d].id != id) {
		for (c->d = 0; c->d < c->ndumps && c->dumps[c->d].id != id;
		     c->d++)
			;
		if (c->d == c->ndumps) {
			c->d = 0;
			return 0;
		}
	}
	if (!heap)
		return 0;
	if (strcmp(c->heaps[c->h], heap)) {
		for (c->h = 0; c->h < c->nheaps && strcmp(c->heaps[c->h], heap);
		     c->h++)
			;
		if (c->h == c->nheaps) {
			c->h = 0;
			return 0;
		}
	}
	if (!c->hist &&
	    !(c->hist = calloc(c->nheaps * c->ndumps, sizeof(*c->hist))))
		return -ENOMEM;
	struct size_hist **x = &c->hist[c->h * c->ndumps + c->d];
	if (!*x && !(*x = calloc(1, sizeof(**x))))
		return -ENOMEM;
	int k = size_bucket(size);
	(*x)->fp[k] += fp > 0 ? (uint64_t)fp : 0;
	(*x)->bytes[k] += charged;
	(*x)->any = 1;
	return 0;
}

static int load_block_sizes(sqlite3 *db, int64_t upid,
                            const struct rd_dump *dumps, size_t ndumps,
                            char **heaps, size_t nheaps,
                            struct size_hist ***out)
{
	struct sizes_ctx c = {.dumps = dumps,
	                      .ndumps = ndumps,
	                      .heaps = heaps,
	                      .nheaps = nheaps};

	*out = NULL;
	if (!ndumps || !nheaps)
		return 0;
	int err = blocks_each(db, SUBSYS, upid, add_block_size, &c);
	if (err) {
		for (size_t i = 0; c.hist && i < nheaps * ndumps; i++)
			free(c.hist[i]);
		free(c.hist);
		return err;
	}
	*out = c.hist;
	return 0;
}

/* The sampling interval of heap `heap` (heapprof_heap), else dflt. */
static int64_t heap_interval(sqlite3 *db, int64_t upid, const char *heap,
                             int64_t dflt)
{
	int64_t iv = pi_heap_interval(db, upid, heap);
	return iv > 0 ? iv : dflt;
}

/* An allocation event of the trace, and when it was freed. */
struct pg_alloc {
	int64_t ts, freed; /* freed: its free event's ts, or -1 */
	int64_t addr, size, charged, tid, seq;
	int32_t node;
};

/* A free event: the block (address, allocation time) and when. */
struct pg_free {
	int64_t addr, alloc_ts, ts;
};

static int cmp_alloc(const void *x, const void *y)
{
	const struct pg_alloc *a = x, *b = y;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* One array of the events: "key":[f(0), f(1), ...]. */
enum ev_col { EV_T, EV_NODE, EV_SIZE, EV_CHARGED, EV_FREE, EV_TID, EV_FP };

static void write_ev_col(struct jw *w, const char *key, enum ev_col c,
                         const struct pg_alloc *al, size_t n,
                         const struct rd_process *p, int64_t interval)
{
	jw_raw(w, ",\"");
	jw_raw(w, key);
	jw_raw(w, "\":[");
	for (size_t i = 0; i < n; i++) {
		const struct pg_alloc *a = &al[i];
		int64_t v = 0;
		if (i)
			jw_char(w, ',');
		switch (c) {
		case EV_T:
			v = a->ts - (i ? al[i - 1].ts : p->start_ts);
			break;
		case EV_NODE:
			v = a->node;
			break;
		case EV_SIZE:
			v = a->size;
			break;
		case EV_CHARGED:
			v = a->charged;
			break;
		case EV_FREE:
			v = a->freed < 0 ? -1 : a->freed - a->ts;
			break;
		case EV_TID:
			v = a->tid;
			break;
		case EV_FP:
			v = (int64_t)tr_objects_fp(a->size, a->charged,
			                           interval);
			break;
		}
		jw_int(w, v);
	}
	jw_char(w, ']');
}

/*
 * ,"ev":{"t":[...],"node":[...],...}: the allocation events of heap `heap`
 * of process p, in time order, each with when it was freed (its free
 * event matched by address and allocation time).  keys maps the trace's
 * stack keys to leaf callsites.
 */
static int write_events(struct jw *w, sqlite3 *db, struct tree *g,
                        const struct rd_process *p, const char *heap,
                        const struct hmap *keys)
{
	struct tr_events *it = NULL;
	const struct tr_event *e;
	struct pg_alloc *al = NULL;
	struct pg_free *fr = NULL;
	size_t nal = 0, capal = 0, nfr = 0, capfr = 0;
	struct hmap idx;
	int rc, err;

	hmap_init(&idx);
	err = tr_events_open(db, SUBSYS, p->upid, TR_TS_MIN, TR_TS_MAX, 0, &it);
	if (err)
		return err;
	while ((rc = tr_events_next(it, &e)) == 1) {
		if (strcmp(e->heap ? e->heap : "", heap))
			continue;
		if (e->free) {
			if (!e->alloc_ts)
				continue;
			struct pg_free *f =
			        hp_grow(fr, &capfr, nfr, sizeof(*f));
			if (!f) {
				rc = -ENOMEM;
				break;
			}
			fr = f;
			fr[nfr++] = (struct pg_free){e->address, e->alloc_ts,
			                             e->ts};
			continue;
		}
		const int64_t *cs =
		        hmap_find(keys, &e->stack_key, sizeof(e->stack_key));
		int32_t node = tree_leaf_node(g, cs ? *cs : 0);
		struct pg_alloc *a =
		        node < 0 ? NULL : hp_grow(al, &capal, nal, sizeof(*a));
		if (!a) {
			rc = -ENOMEM;
			break;
		}
		al = a;
		al[nal] = (struct pg_alloc){
		        .ts = e->ts,
		        .freed = -1,
		        .addr = e->address,
		        .size = e->size,
		        .charged = e->charged,
		        .tid = e->tid,
		        .seq = (int64_t)nal,
		        .node = node,
		};
		nal++;
	}
	tr_events_close(it);
	if (rc < 0) {
		err = rc;
		goto out;
	}
	if (nal > 1)
		qsort(al, nal, sizeof(*al), cmp_alloc);
	/* The same (address, ts) again: the later one gets the free. */
	for (size_t i = 0; i < nal; i++) {
		int64_t key[2] = {al[i].addr, al[i].ts};
		if (hmap_put(&idx, key, sizeof(key), (int64_t)i) < 0) {
			err = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < nfr; i++) {
		int64_t key[2] = {fr[i].addr, fr[i].alloc_ts};
		const int64_t *k = hmap_find(&idx, key, sizeof(key));
		if (!k || !al || al[*k].freed >= 0)
			continue;
		al[*k].freed = fr[i].ts > al[*k].ts ? fr[i].ts : al[*k].ts;
	}
	int64_t interval = heap_interval(db, p->upid, heap, p->interval);
	int same = 1, one = 1;
	for (size_t i = 0; i < nal; i++) {
		same &= al[i].charged == al[i].size;
		one &= tr_objects_fp(al[i].size, al[i].charged, interval) ==
		       HP_OBJ_FP_ONE;
	}
	jw_raw(w, ",\"ev\":{\"n\":");
	jw_int(w, (int64_t)nal);
	write_ev_col(w, "t", EV_T, al, nal, p, interval);
	write_ev_col(w, "node", EV_NODE, al, nal, p, interval);
	write_ev_col(w, "size", EV_SIZE, al, nal, p, interval);
	if (!same)
		write_ev_col(w, "charged", EV_CHARGED, al, nal, p, interval);
	write_ev_col(w, "free", EV_FREE, al, nal, p, interval);
	write_ev_col(w, "tid", EV_TID, al, nal, p, interval);
	if (!one)
		write_ev_col(w, "fp", EV_FP, al, nal, p, interval);
	jw_char(w, '}');
out:
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	hmap_free(&idx);
	free(al);
	free(fr);
	return err;
}

/*
 * One process.  *ev_budget is how many allocation events the page may
 * still carry: the process's go in if they all fit.
 */
/*
 * ,"KEY":{"t":[ns since the start...],"v":[...]}: a counter track of the
 * process (memory over time, collector/curve.c); nothing when it has no
 * values.
 */
static int write_counter(struct jw *w, sqlite3 *db, const struct rd_process *p,
                         const char *key, const char *track)
{
	struct rd_counter c;
	int err = rd_load_counter(db, SUBSYS, p->upid, track, &c);
	if (err || !c.n) {
		rd_free_counter(&c);
		return err;
	}
	jw_raw(w, ",\"");
	jw_raw(w, key);
	jw_raw(w, "\":{\"t\":[");
	for (size_t i = 0; i < c.n; i++) {
		if (i)
			jw_char(w, ',');
		jw_int(w, c.ts[i] - p->start_ts);
	}
	jw_raw(w, "],\"v\":[");
	for (size_t i = 0; i < c.n; i++) {
		if (i)
			jw_char(w, ',');
		jw_int(w, (int64_t)c.v[i]);
	}
	jw_raw(w, "]}");
	rd_free_counter(&c);
	return 0;
}

static int write_process(struct jw *w, sqlite3 *db, struct tree *g,
                         struct state *a, const struct rd_process *p,
                         const char *id, const struct fg_page_opts *o,
                         int64_t *ev_budget)
{
	struct rd_dump *dumps = NULL;
	char **heaps = NULL;
	size_t ndumps = 0, nheaps = 0;
	struct tr_info trace;
	struct trace_span span;
	struct size_hist **sizes = NULL;
	struct hmap keys;
	int with_events = 0;
	int err = rd_load_dumps(db, SUBSYS, p->upid, &dumps, &ndumps);

	hmap_init(&keys);

	if (!err)
		err = rd_load_heaps(db, SUBSYS, p->upid, &heaps, &nheaps);
	if (!err)
		err = tr_load_info(db, SUBSYS, p->upid, &trace);
	if (err)
		goto out;
	span_of(p, &trace, o, &span);
	if (o->win.window) {
		/* One "dump": the window, at its end; none without a trace. */
		rd_free_dumps(dumps, ndumps);
		dumps = NULL;
		ndumps = 0;
		if (!trace.present) {
			rd_free_heaps(heaps, nheaps);
			heaps = NULL;
			nheaps = 0;
		}
	}
	if (trace.present && trace.allocs <= *ev_budget) {
		with_events = 1;
		*ev_budget -= trace.allocs;
		err = tr_stack_keys(db, SUBSYS, p->upid, &keys);
	}
	if (!err && !o->win.window)
		err = load_block_sizes(db, p->upid, dumps, ndumps, heaps,
		                       nheaps, &sizes);
	if (err)
		goto out;
	jw_raw(w, "{\"upid\":");
	jw_int(w, p->upid);
	jw_raw(w, ",\"pid\":");
	jw_int(w, p->pid);
	/* The id report and pprof use (store/procid.h): "PID" or "PID.N". */
	jw_raw(w, ",\"id\":");
	jw_str(w, id);
	jw_raw(w, ",\"name\":");
	jw_str(w, p->name);
	jw_raw(w, ",\"cmdline\":");
	jw_str(w, p->cmdline);
	jw_raw(w, ",\"interval\":");
	jw_int(w, p->interval);
	jw_raw(w, ",\"start\":");
	jw_int(w, p->start_ts);
	jw_raw(w, ",\"end\":");
	jw_int(w, p->end_ts);
	if (trace.present)
		write_trace_info(w, p, &trace, &span, with_events);
	err = write_counter(w, db, p, "rss", "mem.rss");
	if (err)
		goto out;
	for (size_t i = 0; i < o->nopen; i++)
		if (o->open[i].upid == p->upid && !o->win.window) {
			jw_raw(w, ",\"open\":");
			jw_int(w, o->open[i].index);
		}
	if (o->win.window && trace.present) {
		jw_raw(w, ",\"window\":{\"from\":");
		jw_int(w, span.from - p->start_ts);
		jw_raw(w, ",\"to\":");
		jw_int(w, span.to - p->start_ts);
		jw_raw(w, "},\"dumps\":[{\"ts\":");
		jw_int(w, span.to);
		jw_raw(w, ",\"reason\":\"window\"}");
	} else {
		jw_raw(w, ",\"dumps\":[");
	}
	for (size_t i = 0; i < ndumps; i++) {
		jw_raw(w, i ? ",{\"ts\":" : "{\"ts\":");
		jw_int(w, dumps[i].ts);
		jw_raw(w, ",\"reason\":");
		jw_str(w, dumps[i].reason);
		if (dumps[i].at_max)
			jw_raw(w, ",\"at_max\":1");
		write_dump_memory(w, db, p->upid, dumps[i].ts);
		jw_char(w, '}');
	}
	jw_raw(w, "],\"heaps\":[");
	for (size_t h = 0; !err && h < nheaps; h++) {
		jw_raw(w, h ? ",{\"name\":" : "{\"name\":");
		jw_str(w, heaps[h]);
		jw_raw(w, ",\"dumps\":");
		if (o->win.window)
			err = write_window_state(w, db, g, a, p->upid, heaps[h],
			                         &span);
		else
			err = write_heap_dumps(
			        w, db, g, a, p->upid, heaps[h], dumps, ndumps,
			        sizes ? sizes + h * ndumps : NULL);
		if (!err && trace.present)
			err = write_timeline(w, db, p, heaps[h], &span);
		if (!err) {
			char track[256];
			snprintf(track, sizeof(track), "mem.heap.%s", heaps[h]);
			err = write_counter(w, db, p, "curve", track);
		}
		if (!err && with_events)
			err = write_events(w, db, g, p, heaps[h], &keys);
		jw_char(w, '}');
	}
	jw_raw(w, "]}");
out:
	for (size_t i = 0; sizes && i < nheaps * ndumps; i++)
		free(sizes[i]);
	free(sizes);
	hmap_free(&keys);
	rd_free_dumps(dumps, ndumps);
	rd_free_heaps(heaps, nheaps);
	return err;
}

/* ---- the data block ----------------------------------------------------- */

static void write_ints(struct jw *w, const char *key, const struct tree_ivec *a)
{
	jw_key(w, key);
	jw_char(w, '[');
	for (size_t i = 0; i < a->n; i++) {
		if (i)
			jw_char(w, ',');
		jw_int(w, a->v[i]);
	}
	jw_char(w, ']');
}

static void write_tables(struct jw *w, const struct tree *g)
{
	const struct rd_stacks *s = g->s;

	jw_raw(w, ",\"modules\":[");
	for (size_t i = 0; i < s->nmappings; i++) {
		if (i)
			jw_char(w, ',');
		jw_str(w, s->mappings[i].name);
	}
	jw_raw(w, "],\"files\":[");
	for (size_t i = 0; i < g->nfiles; i++) {
		if (i)
			jw_char(w, ',');
		jw_str(w, g->files[i]);
	}
	jw_raw(w, "],\"funcs\":{\"name\":[");
	for (size_t i = 0; i < g->nfuncs; i++) {
		if (i)
			jw_char(w, ',');
		jw_str(w, g->funcs[i].name);
	}
	jw_raw(w, "],\"module\":[");
	for (size_t i = 0; i < g->nfuncs; i++) {
		if (i)
			jw_char(w, ',');
		jw_int(w, g->funcs[i].module);
	}
	jw_raw(w, "],\"file\":[");
	for (size_t i = 0; i < g->nfuncs; i++) {
		if (i)
			jw_char(w, ',');
		jw_int(w, g->funcs[i].file);
	}
	jw_raw(w, "]},\"nodes\":{");
	write_ints(w, "parent", &g->top.parent);
	jw_char(w, ',');
	write_ints(w, "func", &g->top.func);
	jw_char(w, ',');
	write_ints(w, "line", &g->top.line);
	jw_char(w, '}');
}

static int write_data(struct jw *w, sqlite3 *db, const struct rd_stacks *s,
                      const struct fg_page_opts *o)
{
	struct rd_process *procs = NULL;
	size_t nprocs = 0;
	struct tree g;
	struct state a;
	int64_t ev_budget = PAGE_EVENTS_MAX;
	int err = rd_load_processes(db, SUBSYS, &procs, &nprocs);

	if (err)
		return err;
	err = tree_init(&g, s);
	if (state_init(&a, s) < 0 || err) {
		hp_err(SUBSYS, "out of memory");
		err = -ENOMEM;
		goto out;
	}
	jw_raw(w, "{\"format\":\"heapprof-flamegraph\",\"version\":1,"
	          "\"file\":");
	jw_str(w, ag_basename(o->file));
	jw_raw(w, ",\"view\":");
	jw_str(w, rd_view_names[o->view]);
	jw_raw(w, ",\"views\":[");
	for (int v = 0; v < RD_NVIEWS; v++) {
		if (v)
			jw_char(w, ',');
		jw_str(w, rd_view_names[v]);
	}
	jw_raw(w, "],\"procs\":[");
	for (size_t i = 0; !err && i < nprocs; i++) {
		if (i)
			jw_char(w, ',');
		char id[48];
		procid_format(procs, nprocs, i, id, sizeof(id));
		err = write_process(w, db, &g, &a, &procs[i], id, o,
		                    &ev_budget);
	}
	jw_char(w, ']');
	if (!err)
		write_tables(w, &g);
	jw_char(w, '}');
out:
	state_free(&a);
	tree_free(&g);
	rd_free_processes(procs, nprocs);
	return err;
}

/* ---- the page ----------------------------------------------------------- */

/*
 * The template with its markers replaced: a marker is
 * "/\*@HEAPPROF_CSS@*\/", "..._JS@..." or "..._DATA@...".
 */
static int write_page(struct jw *w, sqlite3 *db, const struct rd_stacks *s,
                      const struct fg_page_opts *o)
{
	static const char open[] = "/*@HEAPPROF_";
	const char *p = hp_fg_html;
	const char *end = hp_fg_html_end;

	/* hp_fg_html and hp_fg_html_end are labels around one blob
	 * (assets.c): the same object, which cppcheck cannot see. */
	// cppcheck-suppress comparePointers
	while (p < end) {
		const char *m = strstr(p, open);
		if (!m || m >= end) {
			jw_mem(w, p, hp_fg_len(p, end));
			break;
		}
		jw_mem(w, p, hp_fg_len(p, m));
		const char *name = m + strlen(open);
		const char *close = strstr(name, "@*/");
		if (!close) {
			hp_err(SUBSYS, "internal error: bad page template");
			return -EINVAL;
		}
		size_t nlen = hp_fg_len(name, close);
		if (nlen == 3 && !strncmp(name, "CSS", 3)) {
			jw_mem(w, hp_fg_css,
			       hp_fg_len(hp_fg_css, hp_fg_css_end));
		} else if (nlen == 2 && !strncmp(name, "JS", 2)) {
			jw_mem(w, hp_fg_js, hp_fg_len(hp_fg_js, hp_fg_js_end));
		} else if (nlen == 4 && !strncmp(name, "DATA", 4)) {
			int err = write_data(w, db, s, o);
			if (err)
				return err;
		} else {
			hp_err(SUBSYS, "internal error: bad page template");
			return -EINVAL;
		}
		p = close + 3;
	}
	return 0;
}

int fg_page_write(FILE *f, sqlite3 *db, const struct rd_stacks *s,
                  const struct fg_page_opts *o, int *werr)
{
	struct jw *w = malloc(sizeof(*w));
	int err;

	*werr = 0;
	if (!w) {
		hp_err(SUBSYS, "out of memory");
		return -ENOMEM;
	}
	w->f = f;
	w->len = 0;
	w->err = 0;
	err = write_page(w, db, s, o);
	jw_flush(w);
	*werr = w->err;
	free(w);
	return err;
}
