/*
 * `heapprof flamegraph FILE [-o OUT.html]`: one self-contained HTML page
 * with an interactive flame graph of a profile (docs/FLAMEGRAPH.md).
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
 * heap's dumps are summed in one pass over its allocation rows, so the work
 * is linear in the rows, the callsites and the output.  The file is written
 * next to OUT under a temporary name and renamed at the end, so a failure
 * never leaves a partial page.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/procid.h"
#include "flamegraph/assets.h"
#include "profile/pairmap.h"
#include "profile/reader.h"
#include "profile/trace_read.h"
#include "util/err.h"
#include "util/hmap.h"

#define SUBSYS "flamegraph"

#define CS_UNRESOLVED (-1)
#define CS_BUSY       (-2) /* on the resolution stack: a parent loop */

struct fg_opts {
	const char *file;
	const char *out;
	enum rd_view view;
	/* --from/--to: since each process's start, ns. */
	int window, have_from, have_to;
	int64_t from_ns, to_ns;
};

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

/* ---- growable arrays ---------------------------------------------------- */

struct ivec {
	int32_t *v;
	size_t n, cap;
};

static int ivec_push(struct ivec *a, int32_t x)
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

struct fg_func {
	char *name;
	int32_t module; /* index into s->mappings, -1 if unknown */
	int32_t file;   /* index into files, -1 if unknown */
};

struct fg {
	const struct rd_stacks *s;
	/* Functions, interned by (module, file, name). */
	struct fg_func *funcs;
	size_t nfuncs, funcs_cap;
	struct hmap func_idx;
	/* Source files, interned by name (the strings belong to s). */
	const char **files;
	size_t nfiles, files_cap;
	struct hmap file_idx;
	/* Per frame (index into s->frames): its chain of (func, line),
	 * outermost first, at chain[frame_off[i]..]; frame_len 0 until
	 * computed. */
	int32_t *frame_off, *frame_len;
	struct ivec chain_func, chain_line;
	/* The node tree, parents first. */
	struct ivec node_parent, node_func, node_line;
	struct pairmap node_idx; /* (parent, func) -> node + 1 */
	/* Per callsite (index into s->callsites): its node, or CS_*. */
	int32_t *cs_node;
	size_t *stack;        /* RD_MAX_DEPTH + 1 callsite indices */
	int32_t unknown_node; /* for rows with an unknown callsite; or -1 */
};

static const char *base_name(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;
	return b ? b + 1 : (path ? path : "");
}

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

static int32_t intern_file(struct fg *g, const char *file)
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
static int32_t intern_func(struct fg *g, int32_t module, int32_t file,
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
		struct fg_func *b = realloc(g->funcs, ncap * sizeof(*b));
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
	g->funcs[g->nfuncs] = (struct fg_func){copy, module, file};
	id = (int32_t)g->nfuncs++;
out:
	if (key != small)
		free(key);
	return id;
}

/* A frame without a name: "module+0xrelpc". */
static int32_t unnamed_func(struct fg *g, int32_t module, const char *mod_path,
                            int64_t rel_pc)
{
	char buf[320];

	snprintf(buf, sizeof(buf), "%s+0x%" PRIx64,
	         mod_path && *mod_path ? base_name(mod_path) : "[unknown]",
	         (uint64_t)rel_pc);
	return intern_func(g, module, -1, buf);
}

/* Compute the (func, line) chain of frame fi.  0 or -ENOMEM. */
static int frame_chain(struct fg *g, size_t fi)
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
static int32_t child_node(struct fg *g, int32_t parent, int32_t func,
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
static int32_t callsite_nodes(struct fg *g, size_t ci, int32_t parent)
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
static int32_t resolve(struct fg *g, size_t ci)
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

static int fg_init(struct fg *g, const struct rd_stacks *s)
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

static void fg_free(struct fg *g)
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

/* ---- samples ------------------------------------------------------------ */

/*
 * Running state of one heap while its rows are read in ts order: per
 * callsite index (the last slot: rows whose callsite is unknown) the sum of
 * the four views, and the slots ever touched.
 */
struct heap_acc {
	int64_t *v; /* (ncallsites + 1) * RD_NVIEWS */
	uint8_t *seen;
	size_t *touched;
	size_t ntouched;
};

/* The node of accumulator slot i; -1 if out of memory. */
static int32_t slot_node(struct fg *g, size_t i)
{
	if (i < g->s->ncallsites)
		return resolve(g, i);
	if (g->unknown_node < 0) {
		int32_t fn = intern_func(g, -1, -1, "[unknown callsite]");
		g->unknown_node = fn < 0 ? -1 : child_node(g, -1, fn, 0);
	}
	return g->unknown_node;
}

/* One dump's state: {"d":[node, 4 views, ...], "tot":[4 views]}. */
static int write_dump_state(struct jw *w, struct fg *g,
                            const struct heap_acc *a)
{
	int64_t tot[RD_NVIEWS] = {0};
	int first = 1;

	jw_raw(w, "{\"d\":[");
	for (size_t k = 0; k < a->ntouched; k++) {
		const int64_t *v = &a->v[a->touched[k] * RD_NVIEWS];
		if (!v[0] && !v[1] && !v[2] && !v[3])
			continue;
		int32_t node = slot_node(g, a->touched[k]);
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

static void acc_add(struct heap_acc *a, size_t slot, int64_t size,
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

static void acc_reset(struct heap_acc *a)
{
	for (size_t k = 0; k < a->ntouched; k++) {
		memset(&a->v[a->touched[k] * RD_NVIEWS], 0,
		       RD_NVIEWS * sizeof(*a->v));
		a->seen[a->touched[k]] = 0;
	}
	a->ntouched = 0;
}

/*
 * The states of heap `heap` of process upid at each of its dumps, as a
 * JSON array, from one pass over its rows in ts order (a dump's state is
 * the sum of the rows up to its ts).
 */
static int write_heap_dumps(struct jw *w, sqlite3 *db, struct fg *g,
                            struct heap_acc *a, int64_t upid, const char *heap,
                            const struct rd_dump *dumps, size_t ndumps)
{
	sqlite3_stmt *st = NULL;
	size_t d = 0;
	int rc, err = 0;

	if (sqlite3_prepare_v2(db,
	                       "SELECT ts, callsite_id, size, count FROM"
	                       " heap_profile_allocation WHERE upid = ? AND"
	                       " heap_name = ? ORDER BY ts",
	                       -1, &st, NULL) != SQLITE_OK) {
		hp_err(SUBSYS, "reading allocations: %s", sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
	acc_reset(a);
	jw_char(w, '[');
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t ts = sqlite3_column_int64(st, 0);
		while (!err && d < ndumps && ts > dumps[d].ts) {
			if (d)
				jw_char(w, ',');
			err = write_dump_state(w, g, a);
			d++;
		}
		if (d == ndumps) {
			rc = SQLITE_DONE; /* later rows are in no dump */
			break;
		}
		int64_t id = sqlite3_column_int64(st, 1);
		const struct rd_callsite *c = callsite_get(g->s, id);
		size_t slot =
		        c ? (size_t)(c - g->s->callsites) : g->s->ncallsites;
		acc_add(a, slot, sqlite3_column_int64(st, 2),
		        sqlite3_column_int64(st, 3));
		rc = SQLITE_DONE;
	}
	if (!err && rc != SQLITE_DONE) {
		hp_err(SUBSYS, "reading allocations: %s", sqlite3_errmsg(db));
		err = -EIO;
	}
	sqlite3_finalize(st);
	for (; !err && d < ndumps; d++) {
		if (d)
			jw_char(w, ',');
		err = write_dump_state(w, g, a);
	}
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
                    const struct fg_opts *o, struct trace_span *sp)
{
	int64_t end = t->last_ts + 1;
	/* The trace may start a little before the recorded start. */
	int64_t begin = t->first_ts && t->first_ts < p->start_ts ? t->first_ts
	                                                         : p->start_ts;

	if (p->has_end && p->end_ts > end)
		end = p->end_ts;
	memset(sp, 0, sizeof(*sp));
	sp->anchor_end = t->overwritten > 0;
	/* A ring that lost its oldest events knows nothing before its
	 * first event kept. */
	sp->t0 = sp->anchor_end && t->first_ts ? t->first_ts : begin;
	sp->t1 = end > sp->t0 ? end : sp->t0 + 1;
	sp->from = o->have_from ? p->start_ts + o->from_ns : begin;
	sp->to = o->have_to ? p->start_ts + o->to_ns : end;
	if (o->have_to && sp->to > end)
		sp->to = end;
	if (sp->to < sp->from)
		sp->to = sp->from;
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
static int write_window_state(struct jw *w, sqlite3 *db, struct fg *g,
                              struct heap_acc *a, int64_t upid,
                              const char *heap, const struct trace_span *sp)
{
	struct tr_heap win;
	int err = tr_window(db, SUBSYS, upid, heap, sp->from, sp->to, &win);

	if (err)
		return err;
	acc_reset(a);
	for (size_t i = 0; i < win.n; i++) {
		const struct rd_callsite *c =
		        win.s[i].callsite
		                ? callsite_get(g->s, win.s[i].callsite)
		                : NULL;
		size_t slot =
		        c ? (size_t)(c - g->s->callsites) : g->s->ncallsites;
		int64_t *v = &a->v[slot * RD_NVIEWS];
		if (!a->seen[slot]) {
			a->seen[slot] = 1;
			a->touched[a->ntouched++] = slot;
		}
		for (int k = 0; k < RD_NVIEWS; k++)
			v[k] += win.s[i].v[k];
	}
	tr_heap_free(&win);
	jw_char(w, '[');
	err = write_dump_state(w, g, a);
	jw_char(w, ']');
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	return err;
}

static int write_process(struct jw *w, sqlite3 *db, struct fg *g,
                         struct heap_acc *a, const struct rd_process *p,
                         const char *id, const struct fg_opts *o)
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
	if (o->window) {
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
	/* The id report and pprof use (cli/procid.h): "PID" or "PID.N". */
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
	if (o->window && trace.present) {
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
		if (o->window)
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

static void write_ints(struct jw *w, const char *key, const struct ivec *a)
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

static void write_tables(struct jw *w, const struct fg *g)
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
                      const struct fg_opts *o)
{
	struct rd_process *procs = NULL;
	size_t nprocs = 0;
	struct fg g;
	struct heap_acc a = {0};
	size_t nslots = s->ncallsites + 1;
	int err = reader_load_processes(db, SUBSYS, &procs, &nprocs);

	if (err)
		return err;
	err = fg_init(&g, s);
	a.v = calloc(nslots * RD_NVIEWS, sizeof(*a.v));
	a.seen = calloc(nslots, 1);
	a.touched = malloc(nslots * sizeof(*a.touched));
	if (err || !a.v || !a.seen || !a.touched) {
		hp_err(SUBSYS, "out of memory");
		err = -ENOMEM;
		goto out;
	}
	jw_raw(w, "{\"format\":\"heapprof-flamegraph\",\"version\":1,"
	          "\"file\":");
	jw_str(w, base_name(o->file));
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
	free(a.v);
	free(a.seen);
	free(a.touched);
	fg_free(&g);
	reader_free_processes(procs, nprocs);
	return err;
}

/* ---- the page ----------------------------------------------------------- */

/*
 * The template with its markers replaced: a marker is
 * "/\*@HEAPPROF_CSS@*\/", "..._JS@..." or "..._DATA@...".
 */
static int write_page(struct jw *w, sqlite3 *db, const struct rd_stacks *s,
                      const struct fg_opts *o)
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

/* ---- arguments and output file ------------------------------------------ */

static void fg_usage(FILE *f)
{
	fputs("usage: heapprof flamegraph FILE [-o OUT.html] [--view VIEW]\n"
	      "                          [--from TIME] [--to TIME]\n"
	      "\n"
	      "Writes one self-contained HTML page (no network access) with "
	      "an\n"
	      "interactive flame graph of every process, heap and dump of the\n"
	      "profile FILE, switchable between the four views, a chart of "
	      "the\n"
	      "heap size over the dumps and a table of the top functions.\n"
	      "\n"
	      "  -o, --output OUT  the page (default: FILE with .db replaced\n"
	      "                    by .html; - for standard output)\n"
	      "  --view VIEW       the view shown first: space (default),\n"
	      "                    alloc_space, objects or alloc_objects\n"
	      "  --from, --to TIME from a trace (record --trace): the graph"
	      " of the\n"
	      "                    allocations made in [from, to) instead of"
	      " the dumps\n"
	      "                    (space: those still live at `to`); TIME is"
	      " since the\n"
	      "                    process started, as in 1.5s or 500ms\n"
	      "\n"
	      "With a trace, the page also charts the live bytes over time.\n",
	      f);
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, struct fg_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->view = RD_SPACE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;
		int is_out = 0, is_view = 0, is_from = 0, is_to = 0;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fg_usage(stdout);
			return 1;
		}
		if (!strcmp(a, "-o") || !strcmp(a, "--output"))
			is_out = 1;
		else if (!strncmp(a, "--output=", 9))
			is_out = 1, val = a + 9;
		else if (!strncmp(a, "-o", 2) && a[2])
			is_out = 1, val = a + 2;
		else if (!strcmp(a, "--view"))
			is_view = 1;
		else if (!strncmp(a, "--view=", 7))
			is_view = 1, val = a + 7;
		else if (!strcmp(a, "--from"))
			is_from = 1;
		else if (!strncmp(a, "--from=", 7))
			is_from = 1, val = a + 7;
		else if (!strcmp(a, "--to"))
			is_to = 1;
		else if (!strncmp(a, "--to=", 5))
			is_to = 1, val = a + 5;
		if ((is_out || is_view || is_from || is_to) && !val) {
			if (i + 1 >= argc) {
				hp_err(SUBSYS, "option '%s' needs a value", a);
				return 2;
			}
			val = argv[++i];
		}
		if (is_out) {
			if (!*val) {
				hp_err(SUBSYS, "empty output file name");
				return 2;
			}
			o->out = val;
		} else if (is_view) {
			if (opt_parse_view(SUBSYS, val, &o->view) < 0)
				return 2;
		} else if (is_from || is_to) {
			o->window = 1;
			*(is_from ? &o->have_from : &o->have_to) = 1;
			if (opt_parse_offset(
			            SUBSYS, is_from ? "--from" : "--to", val,
			            is_from ? &o->from_ns : &o->to_ns) < 0)
				return 2;
		} else if (a[0] == '-' && a[1]) {
			char hint[128];
			hp_err(SUBSYS, "unknown option '%s'%s", a,
			       opt_hint(a, fg_usage, hint, sizeof(hint)));
			return 2;
		} else if (o->file) {
			hp_err(SUBSYS, "unexpected argument '%s'", a);
			return 2;
		} else {
			o->file = a;
		}
	}
	if (!o->file) {
		hp_err(SUBSYS, "missing FILE (usage: heapprof flamegraph FILE "
		               "[-o OUT.html])");
		return 2;
	}
	if (o->have_from && o->have_to && o->from_ns >= o->to_ns) {
		char a[32], b[32];
		hp_err(SUBSYS, "--from %s is not before --to %s",
		       opt_duration_str(o->from_ns, a, sizeof(a)),
		       opt_duration_str(o->to_ns, b, sizeof(b)));
		return 2;
	}
	return 0;
}

/* --from/--to: 0 if some process has a trace, else -1 (message printed). */
static int check_traced(sqlite3 *db, const struct fg_opts *o)
{
	struct rd_process *procs = NULL;
	size_t n = 0;
	int traced = 0;

	if (reader_load_processes(db, SUBSYS, &procs, &n) < 0)
		return -1;
	for (size_t i = 0; !traced && i < n; i++) {
		struct tr_info t;
		if (tr_load_info(db, SUBSYS, procs[i].upid, &t) < 0) {
			reader_free_processes(procs, n);
			return -1;
		}
		traced = t.present;
	}
	reader_free_processes(procs, n);
	if (!traced)
		hp_err(SUBSYS,
		       "%s: --from/--to need an event trace (heapprof record"
		       " --trace), and this profile has none",
		       o->file);
	return traced ? 0 : -1;
}

/* FILE with ".db" replaced by ".html", or ".html" appended. */
static char *default_output(const char *file)
{
	size_t n = strlen(file);
	char *out = malloc(n + 6);

	if (!out)
		return NULL;
	if (n > 3 && !strcmp(file + n - 3, ".db"))
		n -= 3;
	memcpy(out, file, n);
	memcpy(out + n, ".html", 6);
	return out;
}

/* Open where the page goes; *tmp gets the temporary name, if any. */
static FILE *open_output(const char *out, const char *in, char **tmp)
{
	struct stat in_st, out_st;
	int exists = stat(out, &out_st) == 0;

	*tmp = NULL;
	if (!strcmp(out, "-"))
		return stdout;
	if (exists && S_ISDIR(out_st.st_mode)) {
		hp_err(SUBSYS, "cannot write %s: is a directory", out);
		return NULL;
	}
	if (exists && stat(in, &in_st) == 0 && in_st.st_dev == out_st.st_dev &&
	    in_st.st_ino == out_st.st_ino) {
		hp_err(SUBSYS, "%s: refusing to overwrite the profile", out);
		return NULL;
	}
	/* A pipe or a device (/dev/stdout) is written in place. */
	if (exists && !S_ISREG(out_st.st_mode)) {
		FILE *f = fopen(out, "w");
		if (!f)
			hp_err(SUBSYS, "cannot write %s: %s", out,
			       strerror(errno));
		return f;
	}
	size_t n = strlen(out) + 16;
	if (!(*tmp = malloc(n))) {
		hp_err(SUBSYS, "out of memory");
		return NULL;
	}
	snprintf(*tmp, n, "%s.tmp.XXXXXX", out);
	int fd = mkstemp(*tmp);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		hp_err(SUBSYS, "cannot write %s: %s", out, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(*tmp);
		}
		free(*tmp);
		*tmp = NULL;
		return NULL;
	}
	/* mkstemp makes it 0600: give it the mode a new file would get. */
	mode_t mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) < 0) {
		/* not fatal: the page stays private to its owner */
	}
	return f;
}

/*
 * Write the page to out: through a temporary file next to it, renamed over
 * out only when everything was written, so a failure leaves no partial
 * page (and an older page at out untouched).  "-" is standard output.
 * 0 or 1 (message printed).
 */
static int write_output(const char *out, sqlite3 *db, const struct rd_stacks *s,
                        const struct fg_opts *o)
{
	char *tmp = NULL;
	struct jw *w = malloc(sizeof(*w));
	int err;

	if (!w) {
		hp_err(SUBSYS, "out of memory");
		return 1;
	}
	w->len = 0;
	w->err = 0;
	w->f = open_output(out, o->file, &tmp);
	if (!w->f) {
		free(w);
		return 1;
	}
	err = write_page(w, db, s, o);
	jw_flush(w);
	if (fflush(w->f) != 0 && !w->err)
		w->err = errno ? errno : EIO;
	if (w->f != stdout && fclose(w->f) != 0 && !w->err)
		w->err = errno ? errno : EIO;
	if (!err && w->err) {
		hp_err(SUBSYS, "writing %s: %s", out, strerror(w->err));
		err = -w->err;
	}
	if (!err && tmp && rename(tmp, out) < 0) {
		hp_err(SUBSYS, "cannot write %s: %s", out, strerror(errno));
		err = -EIO;
	}
	if (err && tmp)
		unlink(tmp);
	free(tmp);
	free(w);
	return err ? 1 : 0;
}

int cmd_flamegraph(int argc, char **argv)
{
	struct fg_opts o;
	struct rd_stacks s;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	char *out = o.out ? strdup(o.out) : default_output(o.file);
	if (!out) {
		hp_err(SUBSYS, "out of memory");
		return 1;
	}
	sqlite3 *db = reader_open(o.file, SUBSYS);
	if (!db) {
		free(out);
		return 1;
	}
	rc = 1;
	if ((!o.window || check_traced(db, &o) == 0) &&
	    reader_load_stacks(db, SUBSYS, &s) == 0) {
		rc = write_output(out, db, &s, &o);
		reader_free_stacks(&s);
	}
	sqlite3_close(db);
	if (rc == 0 && strcmp(out, "-"))
		fprintf(stderr, "heapprof: flame graph written to %s\n", out);
	free(out);
	return rc;
}
