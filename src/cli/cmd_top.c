/*
 * `heapprof top -p PID | -n NAME`: a live view of a process's heap in the
 * terminal, refreshed every second (docs/TOP.md).  Here: its options;
 * the view itself is src/top/ (the loop, the screen, top's own session
 * for a process no session profiles).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "top/top.h"
#include "util/err.h"

#define SUBSYS "top"

struct top_opts {
	long pid;              /* -p */
	const char *proc_name; /* -n */
	int64_t delay_ns;      /* -d */
	int once;              /* --once */
	uint64_t iterations;   /* --iterations; 0: until quit */
	long rows;             /* --top; 0: as the screen fits */
	enum rd_view view;     /* --view */
	enum top_sort sort;    /* --sort */
	int inclusive;         /* --inclusive */
	const char *interval;  /* -i, for our own session */
	const char *file;      /* a stray FILE: refused */
};

static void usage(FILE *f)
{
	fputs("usage: heapprof top -p PID | -n NAME [-d SECONDS] [--once]"
	      " [--iterations N]\n"
	      "                   [--top N] [--view VIEW]"
	      " [--sort value|rate|count] [--inclusive] [-i N]\n"
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
	      "  --once             one refresh as plain text, then exit"
	      " (after one -d when\n"
	      "                     top had to start its own session)\n"
	      "  --iterations N     N refreshes, then exit\n"
	      "  --top N            functions shown (default: as many as fit;"
	      " 20 as text)\n"
	      "  --view VIEW        space (default), objects, alloc_space,"
	      " alloc_objects\n"
	      "  --sort value|rate|count\n"
	      "                     by the view's value (default), its change"
	      " per second, or\n"
	      "                     the objects behind it (live or"
	      " allocated, as the view)\n"
	      "  --inclusive        functions with what is allocated under"
	      " them too (default:\n"
	      "                     as the allocator's direct caller)\n"
	      "  -i N               sampling interval of top's own session"
	      " (default: record's)\n"
	      "\n"
	      "keys: v next view, 1-4 a view, s sort by value/rate/count,"
	      " i inclusive,\n"
	      "      p pause, q quit, h help\n"
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
		if (!strcmp(v, "value"))
			o->sort = TOP_SORT_VALUE;
		else if (!strcmp(v, "rate"))
			o->sort = TOP_SORT_RATE;
		else if (!strcmp(v, "count"))
			o->sort = TOP_SORT_COUNT;
		else {
			hp_err(SUBSYS,
			       "invalid --sort '%s' (value, rate or count)", v);
			return -1;
		}
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
	if (!strcmp(argv[*i], "--inclusive")) {
		o->inclusive = 1;
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

int cmd_top(int argc, char **argv)
{
	struct top_opts o;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	struct top_config c = {.pid = (pid_t)o.pid,
	                       .proc_name = o.proc_name,
	                       .delay_ns = o.delay_ns,
	                       .iterations = o.iterations,
	                       .rows = o.rows,
	                       .view = o.view,
	                       .sort = o.sort,
	                       .inclusive = o.inclusive,
	                       .interval = o.interval};
	rc = top_run(&c);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	return rc;
}
