/*
 * `heapprof top -p PID | -n NAME`: a live view of a process's heap in the
 * terminal, refreshed every second (docs/TOP.md).
 *
 * Each refresh reads the process's shared regions from the outside, as
 * `heapprof snapshot -p` does (src/collector/top_read.c): the process
 * and its session do nothing for it.  A process no session profiles gets
 * one of ours: `heapprof record -p PID` as a child (which attaches even to
 * a process that never loaded the library), its profile in a temporary
 * directory, ended (SIGINT) and removed when top quits.
 *
 * On a terminal: the alternate screen in raw mode (no echo, keys one at a
 * time), restored on every way out: q, Ctrl-C, SIGTERM, SIGHUP, the
 * target exiting.  Otherwise, or with --once / --iterations N: the same
 * lines as plain text, one block per refresh.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/record_child.h"
#include "collector/live_snapshot.h"
#include "collector/top_read.h"
#include "util/err.h"
#include "util/human.h"
#include "util/proc.h"

#define SUBSYS "top"

/* How long our own session may take to attach and show its region. */
#define OWN_SESSION_WAIT_MS 30000
/* How long a process whose region stopped may take to be gone, for
 * "exited" rather than "not profiled any more". */
#define EXIT_GRACE_MS 1000
/* How long its record may take to end after SIGINT before SIGKILL. */
#define OWN_SESSION_END_MS 20000

static const char *const view_names[TOP_NVIEWS] = {
        "space", "objects", "alloc_space", "alloc_objects"};

struct top_opts {
	long pid;              /* -p */
	const char *proc_name; /* -n */
	int64_t delay_ns;      /* -d */
	int once;              /* --once */
	uint64_t iterations;   /* --iterations; 0: until quit */
	long rows;             /* --top; 0: as the screen fits */
	enum rd_view view;     /* --view */
	int by_rate;           /* --sort rate */
	const char *interval;  /* -i, for our own session */
	const char *file;      /* a stray FILE: refused */
};

static void usage(FILE *f)
{
	fputs("usage: heapprof top -p PID | -n NAME [-d SECONDS] [--once]"
	      " [--iterations N]\n"
	      "                   [--top N] [--view VIEW] [--sort value|rate]"
	      " [-i N]\n"
	      "\n"
	      "A live view of a process's heap, refreshed every second: the"
	      " four views'\n"
	      "totals, RSS and memory limit, allocation and free rates, and"
	      " the functions\n"
	      "holding the most (with their callers).  Read from the"
	      " process's shared\n"
	      "tables: it costs the process nothing.  A process that no"
	      " heapprof session\n"
	      "profiles gets one of top's own ('heapprof record -p PID'),"
	      " ended when top quits.\n"
	      "\n"
	      "  -p PID             the process\n"
	      "  -n NAME            your process whose command name is NAME\n"
	      "  -d SECONDS         time between refreshes (default 1;"
	      " at least 0.1)\n"
	      "  --once             one refresh as plain text, then exit\n"
	      "  --iterations N     N refreshes, then exit\n"
	      "  --top N            functions shown (default: as many as fit;"
	      " 20 as text)\n"
	      "  --view VIEW        space (default), objects, alloc_space,"
	      " alloc_objects\n"
	      "  --sort value|rate  by the view's value (default) or its"
	      " change per second\n"
	      "  -i N               sampling interval of top's own session"
	      " (default: record's)\n"
	      "\n"
	      "keys: v next view, 1-4 a view, s sort by value/rate, p pause,"
	      " q quit, h help\n"
	      "Plain text when stdout is not a terminal.\n",
	      f);
}

/* -d: decimal seconds, 0.1 to a day. */
static int parse_delay(const char *v, int64_t *out)
{
	char *end;
	errno = 0;
	double s = strtod(v, &end);
	if (errno || end == v || *end || !(s >= 0.1 && s <= 86400)) {
		hp_err(SUBSYS, "invalid -d '%s' (seconds, 0.1 to 86400)", v);
		return -1;
	}
	*out = (int64_t)(s * 1e9);
	return 0;
}

/* One option at argv[*i]: 0 handled, 1 not an option, -1 error. */
static int parse_opt(int argc, char **argv, int *i, void *ctx)
{
	struct top_opts *o = ctx;
	int missing = 0;
	const char *v;

	if ((v = opt_value(argc, argv, i, "-p", &missing)))
		return opt_parse_pid(SUBSYS, v, &o->pid);
	if ((v = opt_value(argc, argv, i, "-n", &missing)))
		return opt_nonempty(SUBSYS, v, "empty process name",
		                    &o->proc_name);
	if ((v = opt_value(argc, argv, i, "-d", &missing)))
		return parse_delay(v, &o->delay_ns);
	if ((v = opt_value(argc, argv, i, "--iterations", &missing)))
		return opt_parse_u64(SUBSYS, "--iterations", v, 1, UINT32_MAX,
		                     &o->iterations);
	if ((v = opt_value(argc, argv, i, "--top", &missing)))
		return opt_parse_top(SUBSYS, v, &o->rows);
	if ((v = opt_value(argc, argv, i, "--view", &missing)))
		return opt_parse_view(SUBSYS, v, &o->view);
	if ((v = opt_value(argc, argv, i, "--sort", &missing))) {
		if (strcmp(v, "value") && strcmp(v, "rate")) {
			hp_err(SUBSYS, "invalid --sort '%s' (value or rate)",
			       v);
			return -1;
		}
		o->by_rate = !strcmp(v, "rate");
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "-i", &missing))) {
		uint64_t n;
		if (opt_parse_u64(SUBSYS, "-i", v, 1, UINT32_MAX, &n) < 0)
			return -1;
		o->interval = v;
		return 0;
	}
	if (missing) {
		hp_err(SUBSYS, "option '%s' needs a value", argv[*i]);
		return -1;
	}
	if (!strcmp(argv[*i], "--once")) {
		o->once = 1;
		return 0;
	}
	return 1;
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, struct top_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->delay_ns = 1000000000;
	o->view = RD_SPACE;
	size_t n;
	int rc = opt_walk(SUBSYS, argc, argv, parse_opt, o, usage, &o->file, 1,
	                  &n);
	if (rc)
		return rc;
	const char *bad = NULL;
	if (o->pid && o->proc_name)
		bad = "-p and -n exclude each other";
	else if (!o->pid && !o->proc_name)
		bad = "need -p PID or -n NAME (see heapprof top --help)";
	else if (o->file)
		bad = "top takes no FILE (-p or -n names the process)";
	else if (o->once && o->iterations)
		bad = "--once and --iterations exclude each other";
	if (bad) {
		hp_err(SUBSYS, "%s", bad);
		return 2;
	}
	if (o->once)
		o->iterations = 1;
	return 0;
}

/* ---- signals and the terminal -------------------------------------------- */

static volatile sig_atomic_t got_quit, got_winch;
static struct termios saved_tio;
static bool tty_raw;

static void on_quit(int sig)
{
	got_quit = sig;
}

static void on_winch(int sig)
{
	(void)sig;
	got_winch = 1;
}

static void set_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	/* No SA_RESTART: a signal ends the wait for the next refresh. */
	sa.sa_handler = on_quit;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* A reader of our text gone (top | head): we end, and end our
	 * session, rather than die with it running. */
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
}

/* The alternate screen, no echo, keys as typed (Ctrl-C still a signal). */
static void tty_enter(void)
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

static void tty_leave(void)
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

static uint64_t now_ns(void)
{
	return hp_clock_ns(CLOCK_MONOTONIC);
}

/* ---- our own session ----------------------------------------------------- */

struct own_session {
	pid_t child; /* heapprof record; 0: none */
	char dir[PATH_MAX];
	char log[PATH_MAX + 16];
};

/* `heapprof record -p PID -o DIR/top.db [-i N]`, its output to DIR/log,
 * in its own process group (a Ctrl-C at the terminal is ours to pass
 * on).  0, or -1 with the reason printed. */
static int own_start(struct own_session *s, pid_t pid, const char *interval)
{
	const char *tmp = getenv("TMPDIR");
	char db[PATH_MAX + 16], pidstr[16];

	snprintf(s->dir, sizeof(s->dir), "%s/heapprof-top.XXXXXX",
	         tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(s->dir)) {
		hp_err(SUBSYS, "creating a temporary directory in %s: %s",
		       tmp && tmp[0] ? tmp : "/tmp", strerror(errno));
		s->dir[0] = '\0';
		return -1;
	}
	snprintf(db, sizeof(db), "%s/top.db", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/record.log", s->dir);
	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	char *argv[] = {"heapprof",
	                "record",
	                "-p",
	                pidstr,
	                "-o",
	                db,
	                interval ? "-i" : NULL,
	                (char *)interval,
	                NULL};
	s->child = record_child_start(SUBSYS, argv, s->log);
	if (s->child < 0) {
		s->child = 0;
		return -1;
	}
	return 0;
}

/* Whether record still runs (reaps it when not). */
static bool own_running(struct own_session *s)
{
	if (!s->child)
		return false;
	if (waitpid(s->child, NULL, WNOHANG) == s->child) {
		s->child = 0;
		return false;
	}
	return true;
}

/* Ends record (SIGINT: its session detaches and writes its profile, which
 * we do not keep) and removes the directory. */
static void own_end(struct own_session *s)
{
	if (s->child) {
		kill(s->child, SIGINT);
		uint64_t until = now_ns() + OWN_SESSION_END_MS * 1000000ull;
		while (waitpid(s->child, NULL, WNOHANG) == 0) {
			if (now_ns() > until) {
				kill(s->child, SIGKILL);
				waitpid(s->child, NULL, 0);
				break;
			}
			poll(NULL, 0, 20);
		}
		s->child = 0;
	}
	if (!s->dir[0])
		return;
	DIR *d = opendir(s->dir);
	struct dirent *e;
	char path[PATH_MAX + 256];
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(s->dir);
	s->dir[0] = '\0';
}

/* ---- what is shown ------------------------------------------------------- */

struct screen {
	const struct top_opts *o;
	struct top_reader *r;
	pid_t pid;
	char comm[64];
	bool own; /* our own session */
	bool tty; /* interactive */
	enum top_view view;
	bool by_rate, paused, help;
	struct top_reading cur, prev;
	bool have_cur, have_prev;
	int rows, cols;
};

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

static int64_t func_rate_delta(const struct screen *sc,
                               const struct top_func *f)
{
	const struct top_func *was =
	        sc->have_prev ? top_find(&sc->prev, f->name) : NULL;
	int64_t before = was ? top_value(&was->c, sc->view) : 0;
	return top_value(&f->c, sc->view) - before;
}

static const struct screen *sort_sc;

static int func_cmp(const void *a, const void *b)
{
	const struct top_func *x = *(const struct top_func *const *)a;
	const struct top_func *y = *(const struct top_func *const *)b;
	int64_t kx = top_value(&x->c, sort_sc->view);
	int64_t ky = top_value(&y->c, sort_sc->view);
	if (sort_sc->by_rate && sort_sc->have_prev) {
		int64_t rx = func_rate_delta(sort_sc, x);
		int64_t ry = func_rate_delta(sort_sc, y);
		if (rx != ry)
			return rx > ry ? -1 : 1;
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
	line(sc, "  s        sort by the view's value or by its change per "
	         "second");
	line(sc, "  p        pause (the numbers stay as they are) or go on");
	line(sc, "  q        quit (also Ctrl-C)");
	line(sc, "  h        this help; any other key goes back");
	line(sc, "%s", "");
	line(sc, "space: live bytes; objects: live blocks; alloc_space, "
	         "alloc_objects: allocated");
	line(sc, "since profiling started. SPACE/s (and so on): the change "
	         "per second since the");
	line(sc, "last refresh. %%: the share of the total.");
}

static void show(struct screen *sc)
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
	char every[64];
	snprintf(every, sizeof(every), "%.1f s", (double)sc->o->delay_ns / 1e9);
	line(sc, "heapprof top - pid %d (%s) - every %s - %s%s", (int)sc->pid,
	     sc->comm, every,
	     sc->own ? "top's own session, ended when top quits"
	             : "reading beside its heapprof session",
	     sc->paused ? " - PAUSED" : "");
	if (t->interval <= 1)
		line(sc, "interval   every allocation (exact)");
	else
		line(sc,
		     "interval   sampled every %" PRIu64
		     " bytes (the values are estimates)",
		     t->interval);
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
	line(sc, "%-14s %-32s alloc rate  %s", "space",
	     hp_fmt_bytes(a, sizeof(a), v[TOP_SPACE]), ar);
	line(sc, "%-14s %-32" PRId64 " free rate   %s", "objects",
	     v[TOP_OBJECTS], frate);
	if (t->have_rss) {
		/* heapprof's own tables are part of that RSS: said apart. */
		char h[HP_FMT_BYTES_MAX + 16] = "";
		if (t->tables)
			snprintf(h, sizeof(h), ", heapprof %s",
			         hp_fmt_bytes_short(a, sizeof(a),
			                            (int64_t)t->tables));
		snprintf(e, sizeof(e), "%s (peak %s%s)",
		         hp_fmt_bytes_short(c, sizeof(c), (int64_t)t->rss),
		         hp_fmt_bytes_short(d, sizeof(d), (int64_t)t->rss_peak),
		         h);
	} else
		snprintf(e, sizeof(e), "unknown");
	line(sc, "%-14s %-32s RSS         %s", "alloc_space",
	     hp_fmt_bytes(a, sizeof(a), v[TOP_ALLOC_SPACE]), e);
	if (t->limit)
		snprintf(e, sizeof(e), "%s",
		         hp_fmt_bytes_short(c, sizeof(c), (int64_t)t->limit));
	line(sc, "%-14s %-32" PRId64 " limit       %s%s%s%s", "alloc_objects",
	     v[TOP_ALLOC_OBJECTS], t->limit ? e : "none",
	     t->limit_src ? " (" : "", t->limit_src ? t->limit_src : "",
	     t->limit_src ? ")" : "");
	line(sc, "%s", "");
	line(sc, "view: %s   sort: %s%s", view_names[sc->view],
	     sc->by_rate ? "rate" : "value",
	     sc->tty ? "   (v view, s sort, p pause, q quit, h help)" : "");

	const struct top_func **order =
	        t->nfuncs ? malloc(t->nfuncs * sizeof(*order)) : NULL;
	size_t n = order ? t->nfuncs : 0;
	for (size_t i = 0; i < n; i++)
		order[i] = &t->funcs[i];
	sort_sc = sc;
	qsort(order, n, sizeof(*order), func_cmp);
	long room = sc->o->rows ? sc->o->rows : sc->tty ? sc->rows - 10 : 20;
	if (room < 1)
		room = 1;
	char hv[32], hr[40];
	snprintf(hv, sizeof(hv), "%s", view_names[sc->view]);
	for (char *q = hv; *q; q++)
		*q = (char)(*q >= 'a' && *q <= 'z' ? *q - 'a' + 'A' : *q);
	snprintf(hr, sizeof(hr), "%s/s", hv);
	line(sc, "%14s %14s %6s  %s", hv, hr, "%", "FUNCTION <- CALLERS");
	int64_t total = v[sc->view];
	bool bytes = view_bytes(sc->view);
	for (size_t i = 0; i < n && (long)i < room; i++) {
		const struct top_func *f = order[i];
		int64_t val = top_value(&f->c, sc->view);
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
		              was ? top_value(&was->c, sc->view) : 0, bytes),
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

/* ---- the loop ------------------------------------------------------------ */

/* A new reading into sc->cur (the last one becomes prev).  0; -1 with why
 * when the process cannot be read; -ENOMEM. */
static int refresh(struct screen *sc, char *why, size_t len)
{
	struct top_reading t;
	int err = top_read(sc->r, &t, why, len);
	if (err)
		return err;
	if (sc->have_prev)
		top_reading_free(&sc->prev);
	sc->prev = sc->cur;
	sc->have_prev = sc->have_cur;
	sc->cur = t;
	sc->have_cur = true;
	return 0;
}

/* A key typed on the terminal.  Whether to redraw now. */
static bool key(struct screen *sc, int ch)
{
	if (ch == 'q' || ch == 'Q') {
		got_quit = -1;
		return false;
	}
	if (sc->help) {
		sc->help = false;
		return true;
	}
	switch (ch) {
	case 'v':
		sc->view = (enum top_view)((sc->view + 1) % TOP_NVIEWS);
		return true;
	case '1':
	case '2':
	case '3':
	case '4':
		sc->view = (enum top_view)(ch - '1');
		return true;
	case 's':
		sc->by_rate = !sc->by_rate;
		return true;
	case 'p':
		sc->paused = !sc->paused;
		return true;
	case 'h':
	case '?':
		sc->help = true;
		return true;
	}
	return false;
}

/* Waits until deadline (CLOCK_MONOTONIC ns), or a key or signal.  Whether
 * the screen wants a redraw now. */
static bool wait_until(struct screen *sc, uint64_t deadline)
{
	for (;;) {
		if (got_quit)
			return false;
		if (got_winch) {
			got_winch = 0;
			return true;
		}
		uint64_t now = now_ns();
		if (now >= deadline)
			return false;
		int ms = (int)((deadline - now + 999999) / 1000000);
		struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
		int rc = poll(&pf, sc->tty ? 1 : 0, ms);
		if (rc > 0 && (pf.revents & POLLIN)) {
			unsigned char ch;
			if (read(STDIN_FILENO, &ch, 1) == 1 && key(sc, ch))
				return true;
		} else if (rc > 0) {
			/* The terminal went away: keys are over, as is top. */
			got_quit = SIGHUP;
		}
	}
}

/* Whether pid is gone or going: an exiting process's client marks its
 * region stopped a moment before the process is a zombie. */
static bool exiting(pid_t pid)
{
	for (int i = 0; i < EXIT_GRACE_MS / 20; i++) {
		if (!proc_alive(pid))
			return true;
		poll(NULL, 0, 20);
	}
	return !proc_alive(pid);
}

/* The process named -n: a profiled one first (as snapshot -n), else
 * the one process of ours of that name.  0, or -1 with the reason
 * printed. */
static int find_pid(const char *name, pid_t *pid)
{
	char why[1024];
	if (live_snapshot_find(name, pid, why, sizeof(why)) == 0)
		return 0;
	pid_t pids[2];
	int n = proc_find_by_name(name, pids, 2);
	if (n == 1) {
		*pid = pids[0];
		return 0;
	}
	if (n > 1)
		hp_err(SUBSYS,
		       "several processes are named '%s': choose one with -p",
		       name);
	else
		hp_err(SUBSYS, "no process of yours is named '%s'", name);
	return -1;
}

/* Our own session: started, and waited for until its region is read (or
 * record says why not).  0, or -1 with the reason printed. */
static int start_own(struct screen *sc, struct own_session *own, char *why,
                     size_t len)
{
	char last[1024];
	if (own_start(own, sc->pid, sc->o->interval))
		return -1;
	sc->own = true;
	fprintf(stderr,
	        "heapprof: top: pid %d is not profiled: started "
	        "'heapprof record -p %d' (ended when top quits)\n",
	        (int)sc->pid, (int)sc->pid);
	uint64_t until = now_ns() + OWN_SESSION_WAIT_MS * 1000000ull;
	for (;;) {
		int err = refresh(sc, why, len);
		if (err == 0)
			return 0;
		if (err == -ENOMEM) {
			hp_err(SUBSYS, "out of memory");
			return -1;
		}
		if (!own_running(own)) {
			hp_err(SUBSYS,
			       "pid %d: heapprof record could not profile it: "
			       "%s",
			       (int)sc->pid,
			       record_child_last_line(own->log, last,
			                              sizeof(last)));
			return -1;
		}
		if (got_quit || now_ns() > until) {
			if (!got_quit)
				hp_err(SUBSYS,
				       "pid %d: heapprof record did not start "
				       "profiling it within %d s: %s",
				       (int)sc->pid, OWN_SESSION_WAIT_MS / 1000,
				       why);
			return -1;
		}
		poll(NULL, 0, 50);
	}
}

static int run(const struct top_opts *o)
{
	struct screen sc;
	struct own_session own;
	char why[1024];
	int rc = 1;

	memset(&sc, 0, sizeof(sc));
	memset(&own, 0, sizeof(own));
	sc.o = o;
	sc.pid = (pid_t)o->pid;
	for (int k = 0; k < TOP_NVIEWS; k++)
		if (!strcmp(view_names[k], rd_view_names[o->view]))
			sc.view = (enum top_view)k;
	sc.by_rate = o->by_rate;
	sc.tty =
	        !o->iterations && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
	if (o->proc_name && find_pid(o->proc_name, &sc.pid))
		return 1;
	if (!proc_alive(sc.pid)) {
		hp_err(SUBSYS, "no process with pid %d", (int)sc.pid);
		return 1;
	}
	proc_comm(sc.pid, sc.comm, sizeof(sc.comm));
	if (!(sc.r = top_reader_new(sc.pid))) {
		hp_err(SUBSYS, "out of memory");
		return 1;
	}
	set_signals();
	int err = refresh(&sc, why, sizeof(why));
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	else if (err && !proc_alive(sc.pid))
		hp_err(SUBSYS, "pid %d exited", (int)sc.pid);
	/* Not profiled now (or never): our own session. */
	if (err == -1 && proc_alive(sc.pid))
		err = start_own(&sc, &own, why, sizeof(why));
	if (err)
		goto out;
	if (sc.tty)
		tty_enter();
	const char *gone = NULL;
	uint64_t shown = 0;
	for (;;) {
		show(&sc);
		shown++;
		if (o->iterations && shown >= o->iterations) {
			rc = 0;
			break;
		}
		uint64_t next = now_ns() + (uint64_t)o->delay_ns;
		while (wait_until(&sc, next))
			show(&sc);
		if (got_quit) {
			rc = 0;
			break;
		}
		if (sc.paused)
			continue;
		err = refresh(&sc, why, sizeof(why));
		if (err == -ENOMEM) {
			gone = "out of memory";
			break;
		}
		if (err && exiting(sc.pid)) {
			gone = "exited";
			rc = 0;
			break;
		}
		if (err) {
			gone = why;
			break;
		}
	}
	if (sc.tty)
		tty_leave();
	if (gone && rc == 0)
		printf("heapprof top: pid %d (%s) exited\n", (int)sc.pid,
		       sc.comm);
	else if (gone)
		hp_err(SUBSYS, "%s", gone);
out:
	if (own.dir[0] && sc.tty)
		printf("heapprof top: ending its session of pid %d\n",
		       (int)sc.pid);
	own_end(&own);
	if (sc.have_cur)
		top_reading_free(&sc.cur);
	if (sc.have_prev)
		top_reading_free(&sc.prev);
	top_reader_free(sc.r);
	return rc;
}

int cmd_top(int argc, char **argv)
{
	struct top_opts o;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	rc = run(&o);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	return rc;
}
