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
 *            the trace ("window").
 *
 * Everything is streamed: the samples of each dump are written as they are
 * summed, then the nodes and functions they reached.  The states of a
 * heap's dumps are summed in one pass over its allocation rows
 * (profile/calltree.h, which also builds the functions and nodes), so the
 * work is linear in the rows, the callsites and the output.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph/assets.h"
#include "flamegraph/page.h"
#include "profile/aggregate.h"
#include "profile/calltree.h"
#include "profile/procid.h"
#include "profile/reader.h"
#include "profile/trace_read.h"
#include "util/err.h"

#define SUBSYS "flamegraph"

/* Buckets of a heap's timeline: a few hundred points across the page. */
#define TIMELINE_POINTS 400

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

/* One dump's state: {"d":[node, 4 views, ...], "tot":[4 views]}. */
static int write_dump_state(struct jw *w, struct calltree *g,
                            const struct ct_state *a)
{
	int64_t tot[RD_NVIEWS] = {0};
	int first = 1;

	jw_raw(w, "{\"d\":[");
	for (size_t k = 0; k < a->ntouched; k++) {
		const int64_t *v = &a->v[a->touched[k] * RD_NVIEWS];
		if (!v[0] && !v[1] && !v[2] && !v[3])
			continue;
		int32_t node = ct_slot_node(g, a->touched[k]);
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
	jw_raw(w, "]}");
	return 0;
}

struct dumps_ctx {
	struct jw *w;
	struct calltree *g;
};

/* ct_walk_dumps' at_dump: the state at dump d, after a comma if not the
 * first. */
static int write_walked_state(void *ctx, size_t d, const struct ct_state *a)
{
	struct dumps_ctx *c = ctx;

	if (d)
		jw_char(c->w, ',');
	return write_dump_state(c->w, c->g, a);
}

/*
 * The states of heap `heap` of process upid at each of its dumps, as a
 * JSON array, from one pass over its rows in ts order (a dump's state is
 * the sum of the rows up to its ts).
 */
static int write_heap_dumps(struct jw *w, sqlite3 *db, struct calltree *g,
                            struct ct_state *a, int64_t upid, const char *heap,
                            const struct rd_dump *dumps, size_t ndumps)
{
	struct dumps_ctx c = {w, g};

	jw_char(w, '[');
	int err = ct_walk_dumps(db, SUBSYS, g->s, a, upid, heap, dumps, ndumps,
	                        write_walked_state, &c);
	jw_char(w, ']');
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	return err;
}

/*
 * The memory of the process beside a dump (heapprof_dump_memory: RSS, and
 * mallinfo2 at exit) as "mem":{name:value,...}; nothing if the profile
 * has none (or predates the table).  st is NULL when the table is absent.
 */
static void write_dump_memory(struct jw *w, sqlite3_stmt *st, int64_t upid,
                              int64_t ts)
{
	int n = 0;

	if (!st)
		return;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_int64(st, 2, ts);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		if (!name)
			continue;
		jw_raw(w, n++ ? "," : ",\"mem\":{");
		jw_str(w, name);
		jw_char(w, ':');
		jw_int(w, sqlite3_column_int64(st, 1));
	}
	if (n)
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
                             const struct trace_span *sp)
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
		err = tr_leaks(db, SUBSYS, p->upid, &leaks, &src);
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
static int write_window_state(struct jw *w, sqlite3 *db, struct calltree *g,
                              struct ct_state *a, int64_t upid,
                              const char *heap, const struct trace_span *sp)
{
	struct tr_heap win;
	int err = tr_window(db, SUBSYS, upid, heap, sp->from, sp->to, &win);

	if (err)
		return err;
	ct_state_reset(a);
	for (size_t i = 0; i < win.n; i++)
		ct_state_add_sample(a, g->s, &win.s[i]);
	tr_heap_free(&win);
	jw_char(w, '[');
	err = write_dump_state(w, g, a);
	jw_char(w, ']');
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	return err;
}

static int write_process(struct jw *w, sqlite3 *db, struct calltree *g,
                         struct ct_state *a, const struct rd_process *p,
                         const char *id, const struct fg_page_opts *o)
{
	sqlite3_stmt *mem = NULL;
	struct rd_dump *dumps = NULL;
	char **heaps = NULL;
	size_t ndumps = 0, nheaps = 0;
	struct tr_info trace;
	struct trace_span span;
	int err = reader_load_dumps(db, SUBSYS, p->upid, &dumps, &ndumps);

	if (!err)
		err = reader_load_heaps(db, SUBSYS, p->upid, &heaps, &nheaps);
	if (!err)
		err = tr_load_info(db, SUBSYS, p->upid, &trace);
	if (err)
		goto out;
	span_of(p, &trace, o, &span);
	if (o->win.window) {
		/* One "dump": the window, at its end; none without a trace. */
		reader_free_dumps(dumps, ndumps);
		dumps = NULL;
		ndumps = 0;
		if (!trace.present) {
			reader_free_heaps(heaps, nheaps);
			heaps = NULL;
			nheaps = 0;
		}
	}
	/* Absent in profiles written before it existed: then no "mem". */
	if (sqlite3_prepare_v2(db,
	                       "SELECT name, value FROM heapprof_dump_memory"
	                       " WHERE upid = ? AND ts = ? ORDER BY name",
	                       -1, &mem, NULL) != SQLITE_OK) {
		sqlite3_finalize(mem);
		mem = NULL;
	}
	jw_raw(w, "{\"upid\":");
	jw_int(w, p->upid);
	jw_raw(w, ",\"pid\":");
	jw_int(w, p->pid);
	/* The id report and pprof use (profile/procid.h): "PID" or "PID.N". */
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
		write_trace_info(w, p, &trace, &span);
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
		write_dump_memory(w, mem, p->upid, dumps[i].ts);
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
			err = write_heap_dumps(w, db, g, a, p->upid, heaps[h],
			                       dumps, ndumps);
		if (!err && trace.present)
			err = write_timeline(w, db, p, heaps[h], &span);
		jw_char(w, '}');
	}
	jw_raw(w, "]}");
out:
	sqlite3_finalize(mem);
	reader_free_dumps(dumps, ndumps);
	reader_free_heaps(heaps, nheaps);
	return err;
}

/* ---- the data block ----------------------------------------------------- */

static void write_ints(struct jw *w, const char *key, const struct ct_ivec *a)
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

static void write_tables(struct jw *w, const struct calltree *g)
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
	write_ints(w, "parent", &g->node_parent);
	jw_char(w, ',');
	write_ints(w, "func", &g->node_func);
	jw_char(w, ',');
	write_ints(w, "line", &g->node_line);
	jw_char(w, '}');
}

static int write_data(struct jw *w, sqlite3 *db, const struct rd_stacks *s,
                      const struct fg_page_opts *o)
{
	struct rd_process *procs = NULL;
	size_t nprocs = 0;
	struct calltree g;
	struct ct_state a;
	int err = reader_load_processes(db, SUBSYS, &procs, &nprocs);

	if (err)
		return err;
	err = ct_init(&g, s);
	if (ct_state_init(&a, s) < 0 || err) {
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
		err = write_process(w, db, &g, &a, &procs[i], id, o);
	}
	jw_char(w, ']');
	if (!err)
		write_tables(w, &g);
	jw_char(w, '}');
out:
	ct_state_free(&a);
	ct_free(&g);
	reader_free_processes(procs, nprocs);
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
