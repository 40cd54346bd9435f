/*
 * What `heapprof top` shows (screen.h): the header (the process, the four
 * views' totals, RSS and limit, allocation and free rates), the functions
 * holding the most with their callers, and the keys' help; on a terminal
 * on its alternate screen in raw mode, each line cut at its width, else as
 * plain text, one block per refresh.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "top/screen.h"
#include "util/human.h"

const char *const screen_view_names[TOP_NVIEWS] = {
        "space", "objects", "alloc_space", "alloc_objects"};

/* ---- the terminal -------------------------------------------------------- */

static struct termios saved_tio;
static bool tty_raw;

/* The alternate screen, no echo, keys as typed (Ctrl-C still a signal). */
void screen_tty_enter(void)
{
	if (tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		struct termios t = saved_tio;
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tty_raw = tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0;
	}
	fputs("\033[?1049h\033[?25l", stdout);
	fflush(stdout);
}

void screen_tty_leave(void)
{
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	if (tty_raw)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
	tty_raw = false;
}

static void tty_size(int *rows, int *cols)
{
	struct winsize ws;
	*rows = 24;
	*cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row &&
	    ws.ws_col) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	}
}

/* ---- what is shown ------------------------------------------------------- */

/* One line, cut at the screen's width (the table's last column is the
 * longest) and, on a terminal, cleared to its end. */
__attribute__((format(printf, 2, 3))) static void line(struct screen *sc,
                                                       const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (sc->tty) {
		if (sc->cols > 0 && (size_t)sc->cols < sizeof(buf))
			buf[sc->cols] = '\0';
		printf("%s\033[K\r\n", buf);
	} else {
		printf("%s\n", buf);
	}
}

static double seconds(const struct screen *sc)
{
	return (double)(sc->cur.ts - sc->prev.ts) / 1e9;
}

/* A view's value: bytes short ("1.50 MiB") or a count. */
static const char *fmt_value(char *buf, size_t len, int64_t v, bool bytes)
{
	if (bytes)
		return hp_fmt_bytes_short(buf, len, v);
	snprintf(buf, len, "%" PRId64, v);
	return buf;
}

/* A rate per second of counter now - before; "-" before two readings. */
static const char *fmt_rate(const struct screen *sc, char *buf, size_t len,
                            int64_t now, int64_t before, bool bytes)
{
	double dt = sc->have_prev ? seconds(sc) : 0;
	if (dt <= 0)
		return "-";
	int64_t r = (int64_t)((double)(now - before) / dt);
	char v[HP_FMT_BYTES_MAX];
	snprintf(buf, len, "%s/s", fmt_value(v, sizeof(v), r, bytes));
	return buf;
}

/* "1.20 MiB/s, 300 objects/s" of the allocations in now - before (the
 * frees: given as allocations); "-" before two readings. */
static void total_rate(const struct screen *sc, char *buf, size_t len,
                       const struct top_counts *now,
                       const struct top_counts *before)
{
	char b[64], o[64];
	const char *rb = fmt_rate(sc, b, sizeof(b), (int64_t)now->alloc_bytes,
	                          (int64_t)before->alloc_bytes, true);
	const char *ro =
	        fmt_rate(sc, o, sizeof(o), top_value(now, TOP_ALLOC_OBJECTS),
	                 top_value(before, TOP_ALLOC_OBJECTS), false);
	if (!strcmp(rb, "-"))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%s, %.*s objects/s", rb,
		         (int)(strlen(ro) - 2), ro);
}

static bool view_bytes(enum top_view v)
{
	return v == TOP_SPACE || v == TOP_ALLOC_SPACE;
}

/* A function's counts as the table shows them: self, or inclusive. */
static const struct top_counts *fc(const struct screen *sc,
                                   const struct top_func *f)
{
	return sc->inclusive ? &f->incl : &f->c;
}

static int64_t func_rate_delta(const struct screen *sc,
                               const struct top_func *f)
{
	const struct top_func *was =
	        sc->have_prev ? top_find(&sc->prev, f->name) : NULL;
	int64_t before = was ? top_value(fc(sc, was), sc->view) : 0;
	return top_value(fc(sc, f), sc->view) - before;
}

/* The objects behind a view: live ones for space, allocated ones for
 * alloc_space; the objects views are counts already. */
static enum top_view count_view(enum top_view v)
{
	return v == TOP_SPACE         ? TOP_OBJECTS
	       : v == TOP_ALLOC_SPACE ? TOP_ALLOC_OBJECTS
	                              : v;
}

static const char *const sort_names[] = {"value", "rate", "count"};

static const struct screen *sort_sc;

static int func_cmp(const void *a, const void *b)
{
	const struct top_func *x = *(const struct top_func *const *)a;
	const struct top_func *y = *(const struct top_func *const *)b;
	int64_t kx = top_value(fc(sort_sc, x), sort_sc->view);
	int64_t ky = top_value(fc(sort_sc, y), sort_sc->view);
	if (sort_sc->sort == TOP_SORT_RATE && sort_sc->have_prev) {
		int64_t rx = func_rate_delta(sort_sc, x);
		int64_t ry = func_rate_delta(sort_sc, y);
		if (rx != ry)
			return rx > ry ? -1 : 1;
	}
	if (sort_sc->sort == TOP_SORT_COUNT) {
		enum top_view cv = count_view(sort_sc->view);
		int64_t cx = top_value(fc(sort_sc, x), cv);
		int64_t cy = top_value(fc(sort_sc, y), cv);
		if (cx != cy)
			return cx > cy ? -1 : 1;
	}
	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp(top_name(sort_sc->r, x->name),
	              top_name(sort_sc->r, y->name));
}

static void show_help(struct screen *sc)
{
	line(sc, "heapprof top - keys");
	line(sc, "%s", "");
	line(sc, "  v        next view: space, objects, alloc_space, "
	         "alloc_objects");
	line(sc, "  1 2 3 4  space, objects, alloc_space, alloc_objects");
	line(sc, "  s        sort by the view's value, its change per second,"
	         " or its objects");
	line(sc, "  i        inclusive: a function with all allocated under"
	         " it (or self)");
	line(sc, "  p        pause (the numbers stay as they are) or go on");
	line(sc, "  q        quit (also Ctrl-C)");
	line(sc, "  h        this help; any other key goes back");
	line(sc, "%s", "");
	line(sc, "space: live bytes; objects: live blocks; alloc_space, "
	         "alloc_objects: allocated");
	line(sc, "since profiling started. SPACE/s (and so on): the change "
	         "per second since the");
	line(sc, "last refresh. %%: the share of the total. Self: as the"
	         " allocator's caller;");
	line(sc, "inclusive: anywhere on the stack.");
}

void screen_show(struct screen *sc)
{
	const struct top_reading *t = &sc->cur;
	const struct top_reading *p = &sc->prev;
	char a[HP_FMT_BYTES_MAX], c[64], d[64];
	char e[64];

	if (sc->tty) {
		tty_size(&sc->rows, &sc->cols);
		fputs("\033[H", stdout);
	}
	if (sc->help) {
		show_help(sc);
		goto end;
	}
	char every[64], since[64] = "";
	snprintf(every, sizeof(every), "%.1f s", (double)sc->o->delay_ns / 1e9);
	/* Two short lines, not one cut at 80 columns: who, then since
	 * when and whose session. */
	line(sc, "heapprof top - pid %d (%.32s) - every %s%s", (int)sc->pid,
	     sc->comm, every, sc->paused ? " - PAUSED" : "");
	if (t->since && t->since <= t->ts)
		snprintf(since, sizeof(since), "for the last %.1f s, ",
		         (double)(t->ts - t->since) / 1e9);
	line(sc, "counting %s%s", since,
	     sc->own ? "in top's own session (ended when top quits)"
	             : "beside its heapprof session");
	/* heapprof's own tables are part of the RSS below: said apart. */
	char tables[HP_FMT_BYTES_MAX + 32] = "";
	if (t->tables)
		snprintf(tables, sizeof(tables), "; heapprof's tables %s",
		         hp_fmt_bytes_short(a, sizeof(a), (int64_t)t->tables));
	if (t->interval <= 1)
		line(sc, "interval   every allocation (exact)%s", tables);
	else
		line(sc, "interval   every %" PRIu64 " bytes (estimates)%s",
		     t->interval, tables);
	int64_t v[TOP_NVIEWS];
	for (int k = 0; k < TOP_NVIEWS; k++)
		v[k] = top_value(&t->total, (enum top_view)k);
	const struct top_counts *pc = &p->total;
	struct top_counts fr = {.alloc_bytes = t->total.free_bytes,
	                        .alloc_objs_fp = t->total.free_objs_fp};
	struct top_counts pfr = {.alloc_bytes = pc->free_bytes,
	                         .alloc_objs_fp = pc->free_objs_fp};
	char ar[160], frate[160];
	total_rate(sc, ar, sizeof(ar), &t->total, pc);
	total_rate(sc, frate, sizeof(frate), &fr, &pfr);
	line(sc, "%-14s %-23s %-6s%s", "space",
	     hp_fmt_bytes(a, sizeof(a), v[TOP_SPACE]), "alloc", ar);
	line(sc, "%-14s %-23" PRId64 " %-6s%s", "objects", v[TOP_OBJECTS],
	     "free", frate);
	if (t->have_rss)
		snprintf(
		        e, sizeof(e), "%s (peak %s)",
		        hp_fmt_bytes_short(c, sizeof(c), (int64_t)t->rss),
		        hp_fmt_bytes_short(d, sizeof(d), (int64_t)t->rss_peak));
	else
		snprintf(e, sizeof(e), "unknown");
	line(sc, "%-14s %-23s %-6s%s", "alloc_space",
	     hp_fmt_bytes(a, sizeof(a), v[TOP_ALLOC_SPACE]), "RSS", e);
	if (t->limit)
		snprintf(e, sizeof(e), "%s",
		         hp_fmt_bytes_short(c, sizeof(c), (int64_t)t->limit));
	/* The file's name alone: "cgroup v2 memory.max" would not fit. */
	const char *src = t->limit_src ? strrchr(t->limit_src, ' ') : NULL;
	src = src ? src + 1 : t->limit_src;
	line(sc, "%-14s %-23" PRId64 " %-6s%s%s%s%s", "alloc_objects",
	     v[TOP_ALLOC_OBJECTS], "limit", t->limit ? e : "none",
	     src ? " (" : "", src ? src : "", src ? ")" : "");
	line(sc, "%s", "");
	line(sc, "view: %s %s  sort: %s%s", screen_view_names[sc->view],
	     sc->inclusive ? "(inclusive)" : "(self)", sort_names[sc->sort],
	     sc->tty ? "  (v view, s sort, i incl, p pause, q quit, h help)"
	             : "");

	const struct top_func **order =
	        t->nfuncs ? malloc(t->nfuncs * sizeof(*order)) : NULL;
	size_t n = order ? t->nfuncs : 0;
	size_t kept = 0;
	for (size_t i = 0; i < n; i++)
		/* Self: the allocator's callers only (a caller only has
		 * nothing of its own). */
		if (sc->inclusive ||
		    top_value(&t->funcs[i].c, TOP_ALLOC_OBJECTS))
			order[kept++] = &t->funcs[i];
	n = kept;
	sort_sc = sc;
	if (n > 1) /* none yet: order is NULL, which qsort may not get */
		qsort(order, n, sizeof(*order), func_cmp);
	long room = sc->o->rows ? sc->o->rows : sc->tty ? sc->rows - 10 : 20;
	if (room < 1)
		room = 1;
	char hv[32], hr[40];
	snprintf(hv, sizeof(hv), "%s", screen_view_names[sc->view]);
	for (char *q = hv; *q; q++)
		*q = (char)(*q >= 'a' && *q <= 'z' ? *q - 'a' + 'A' : *q);
	snprintf(hr, sizeof(hr), "%s/s", hv);
	line(sc, "%14s %14s %6s  %s", hv, hr, "%", "FUNCTION <- CALLERS");
	int64_t total = v[sc->view];
	bool bytes = view_bytes(sc->view);
	for (size_t i = 0; i < n && (long)i < room; i++) {
		const struct top_func *f = order[i];
		int64_t val = top_value(fc(sc, f), sc->view);
		const struct top_func *was =
		        sc->have_prev ? top_find(p, f->name) : NULL;
		char callers[512] = "", pct[16] = "-";
		size_t used = 0;
		for (uint32_t k = 0; k < f->ncallers && used < sizeof(callers);
		     k++)
			used += (size_t)snprintf(
			        callers + used, sizeof(callers) - used,
			        " <- %s", top_name(sc->r, f->callers[k]));
		if (total > 0)
			snprintf(pct, sizeof(pct), "%.1f%%",
			         100.0 * (double)val / (double)total);
		line(sc, "%14s %14s %6s  %s%s",
		     fmt_value(a, sizeof(a), val, bytes),
		     fmt_rate(sc, c, sizeof(c), val,
		              was ? top_value(fc(sc, was), sc->view) : 0,
		              bytes),
		     pct, top_name(sc->r, f->name), callers);
	}
	free(order);
end:
	if (sc->tty)
		fputs("\033[J", stdout);
	else
		printf("\n");
	fflush(stdout);
}
