/*
 * `heapprof report FILE`: a text summary of a profile.  For each process:
 * how it was recorded (how the session chose it, from startup or attached,
 * intervals configured and used, when profiling started and ended, how it
 * ended), what was dropped, totals of the four views at one dump, and the
 * functions holding the most memory, both as the direct caller of malloc
 * (self) and anywhere on the stack (inclusive), with the call path of the
 * top self entries so a reader sees where they come from.  A process that
 * another session was already profiling has a row but nothing recorded.
 *
 * A process with an event trace (record --trace) also gets a trace line
 * (what it kept and left out), its leaks (the blocks live at the final
 * dump) and its temporary allocations (freed within --temporary-threshold),
 * see docs/LEAKS.md and src/store/trace_read.h.
 *
 * The state at a dump is the sum of heap_profile_allocation rows up to its
 * ts (rows are per-dump deltas); alloc_* views sum only the positive rows.
 *
 * The functions come from analysis/aggregate.h, the rest of a process from
 * store/procinfo.h; report_header.c prints the head of each process and
 * report_table.c the tables (cli/report.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/progress.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/procid.h"
#include "cli/report.h"
#include "layout/layout_v2.h"
#include "model/focus.h"
#include "model/state.h"
#include "util/err.h"
#include "util/human.h"

struct report_opts {
	const char *file;
	enum rd_view view;
	long top;
	struct dump_ref dump;
	int have_pid;
	struct procsel pid; /* --pid PID or PID.N (cli/procid.h) */
	int64_t temp_ns;    /* --temporary-threshold */
	const char *focus;  /* --callers / --callees FUNC: a glob */
	bool callers;       /* --callers (else --callees) */
};

struct dump_sel {
	size_t count, index; /* index is 1-based */
	int64_t ts;
	char reason[32];
	char name[HP_SNAPSHOT_NAME_MAX]; /* a named snapshot's; "" if none */
	int at_max;
	int64_t max_ts, max_live_bytes;
};

/* ---- arguments ---------------------------------------------------------- */

static void report_usage(FILE *f)
{
	fputs("usage: heapprof report FILE [--view VIEW] [--top N] [--dump N]"
	      " [--pid P]\n"
	      "                      [--callers FUNC | --callees FUNC]"
	      " [--temporary-threshold DURATION]\n"
	      "\n"
	      "  --view VIEW  space (default), alloc_space, objects or"
	      " alloc_objects\n"
	      "  --top N      show the N largest entries (default 10)\n"
	      "  --dump N     use the N-th dump of each process (1 = first,"
	      " -1 = last;\n"
	      "               peak, end, or a snapshot's name; default: the"
	      " last)\n"
	      "  --pid P      only the processes of pid P; P.N: the N-th of"
	      " them\n"
	      "  --callers FUNC  who calls FUNC (a glob): its stacks merged"
	      " at it, callers\n"
	      "               below it, instead of the top tables\n"
	      "  --callees FUNC  what FUNC calls, merged over every stack"
	      " it is on\n"
	      "  --temporary-threshold DURATION\n"
	      "               with a trace (record --trace): an allocation"
	      " freed at most\n"
	      "               this long after it was made is temporary"
	      " (default 1ms;\n"
	      "               units ns, us, ms, s)\n",
	      f);
}

/* One option at argv[*i]: 0 handled, 1 not an option, -1 error. */
static int parse_opt(int argc, char **argv, int *i, void *ctx)
{
	struct report_opts *o = ctx;
	int missing = 0;
	const char *v;

	if ((v = opt_value(argc, argv, i, "--view", &missing)))
		return opt_parse_view(SUBSYS, v, &o->view);
	if ((v = opt_value(argc, argv, i, "--top", &missing)))
		return opt_parse_top(SUBSYS, v, &o->top);
	if ((v = opt_value(argc, argv, i, "--dump", &missing)))
		return opt_parse_dump(SUBSYS, v, &o->dump);
	if ((v = opt_value(argc, argv, i, "--pid", &missing))) {
		o->have_pid = 1;
		return procsel_parse(SUBSYS, v, &o->pid);
	}
	bool callers = true;
	if ((v = opt_value(argc, argv, i, "--callers", &missing)) ||
	    (callers = false,
	     v = opt_value(argc, argv, i, "--callees", &missing))) {
		if (o->focus && o->callers != callers) {
			hp_err(SUBSYS,
			       "--callers and --callees: one at a time");
			return -1;
		}
		o->callers = callers;
		return opt_nonempty(SUBSYS, v, "empty function name",
		                    &o->focus);
	}
	if ((v = opt_value(argc, argv, i, "--temporary-threshold", &missing)))
		return opt_parse_duration(SUBSYS, "--temporary-threshold", v,
		                          &o->temp_ns);
	if (missing) {
		hp_err(SUBSYS, "option '%s' needs a value", argv[*i]);
		return -1;
	}
	return 1;
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, struct report_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->view = RD_SPACE;
	o->top = 10;
	o->temp_ns = 1000000;
	size_t n;
	int rc = opt_walk(SUBSYS, argc, argv, parse_opt, o, report_usage,
	                  &o->file, 1, &n);
	if (rc)
		return rc;
	if (!o->file) {
		hp_err(SUBSYS, "missing FILE (see heapprof report --help)");
		return 2;
	}
	return 0;
}

/* ---- one process -------------------------------------------------------- */

/* Pick the dump opts->dump of process upid.  0, or -1 (message printed). */
static int select_dump(sqlite3 *db, const struct rd_process *p,
                       const struct report_opts *o, struct dump_sel *d)
{
	struct rd_dump *dumps = NULL;
	size_t n = 0;

	memset(d, 0, sizeof(*d));
	if (rd_load_dumps(db, SUBSYS, p->upid, &dumps, &n) < 0)
		return -1;
	d->count = n;
	long idx = 0;
	if (n) {
		idx = procid_pick_dump(SUBSYS, NULL, p, dumps, n, &o->dump) + 1;
		if (idx == 0) {
			rd_free_dumps(dumps, n);
			return -1;
		}
	}
	if (n) {
		const struct rd_dump *x = &dumps[idx - 1];
		d->index = (size_t)idx;
		d->ts = x->ts;
		snprintf(d->reason, sizeof(d->reason), "%s", x->reason);
		snprintf(d->name, sizeof(d->name), "%s",
		         x->name ? x->name : "");
		d->at_max = x->at_max;
		d->max_ts = x->max_ts;
		d->max_live_bytes = x->max_live_bytes;
	}
	rd_free_dumps(dumps, n);
	return 0;
}

static int report_heap(sqlite3 *db, const struct rd_stacks *s,
                       const struct rd_process *p, const struct dump_sel *d,
                       const struct state_heap *h, const struct report_opts *o)
{
	struct rd_sample *leaves = NULL;
	struct funcs g;
	size_t n;

	if (state_at_dump(db, SUBSYS, p->upid, h->name, d->ts, &leaves, &n) < 0)
		return -1;
	if (o->focus) {
		printf("\n  Heap %s, view %s: %s\n", h->name,
		       rd_view_names[o->view], report_view_help[o->view]);
		int err = rep_print_focus(s, leaves, n, o->view, h->t[o->view],
		                          o->focus, o->callers, o->top);
		if (err)
			hp_err(SUBSYS, "out of memory");
		free(leaves);
		return err ? -1 : 0;
	}
	int err = rep_build_funcs(&g, s, leaves, n, o->view, -1);
	if (!err) {
		printf("\n  Heap %s, view %s: %s\n", h->name,
		       rd_view_names[o->view], report_view_help[o->view]);
		rep_print_top(s, &g, o->view, h->t[o->view], o->top, 1);
		rep_print_top(s, &g, o->view, h->t[o->view], o->top, 0);
	}
	funcs_free(&g);
	free(leaves);
	return err;
}

/* Allocations still live at the end: from the final dump. */
static int report_leaks(sqlite3 *db, const struct rd_stacks *s,
                        const struct rd_process *p, const struct report_opts *o)
{
	struct tr_set leaks;
	struct tr_leak_src src;
	char b[HP_FMT_BYTES_MAX], heading[256];
	int err = 0;

	if (state_leaks(db, SUBSYS, p->upid, &leaks, &src) < 0)
		return -1;
	printf("\n  Leaks: allocations still live %s, ",
	       p->has_exit ? "at exit"
	                   : "at the end of the session (the process did not"
	                     " exit while profiled)");
	if (!src.have_dump)
		printf("but the process has no dump\n");
	else if (src.from_blocks)
		printf("from the final dump's live blocks%s\n",
		       p->interval > 1 ? " (sampled: estimates)" : " (exact)");
	else
		printf("from the final dump's per-stack counters (it kept no"
		       " blocks)\n");
	if (src.in_flight > 0)
		printf("    %" PRId64 " blocks were being changed while the"
		       " final dump was taken and are not in it\n",
		       src.in_flight);
	if (src.have_dump && leaks.n == 0)
		printf("    none\n");
	for (size_t i = 0; i < leaks.n; i++) {
		const struct tr_heap *h = &leaks.h[i];
		printf("    heap %-14s %" PRId64 " blocks, %s\n", h->name,
		       h->tot[RD_OBJECTS],
		       hp_fmt_bytes(b, sizeof(b), h->tot[RD_SPACE]));
		rep_print_unknown(h, RD_OBJECTS, "their stack is in no dump");
	}
	for (size_t i = 0; !err && i < leaks.n; i++) {
		const struct tr_heap *h = &leaks.h[i];
		if (!h->tot[RD_SPACE] && !h->tot[RD_OBJECTS])
			continue;
		snprintf(
		        heading, sizeof(heading),
		        "  Top %ld leaks in heap %s by bytes (the function that"
		        " called the allocator)",
		        o->top, h->name);
		err = rep_print_trace_top(s, h, heading, RD_SPACE, "bytes",
		                          RD_OBJECTS, "blocks", o->top);
	}
	tr_set_free(&leaks);
	return err;
}

/* Allocations freed within the threshold: from the trace's free events. */
static int report_temporaries(sqlite3 *db, const struct rd_stacks *s,
                              const struct rd_process *p,
                              const struct tr_info *t,
                              const struct report_opts *o)
{
	struct tr_set tmp;
	char b[HP_FMT_BYTES_MAX], dur[32], pct[16], heading[256];
	int err = 0;

	if (tr_temporaries(db, SUBSYS, p->upid, o->temp_ns, &tmp) < 0)
		return -1;
	opt_duration_str(o->temp_ns, dur, sizeof(dur));
	printf("\n  Temporary allocations: freed at most %s after they were"
	       " made (--temporary-threshold), from the trace%s\n",
	       dur,
	       tr_left_out(t)    ? " (incomplete: lower bounds)"
	       : p->interval > 1 ? " (sampled: estimates)"
	                         : "");
	if (tmp.n == 0)
		printf("    none: the trace holds no allocation\n");
	for (size_t i = 0; i < tmp.n; i++) {
		const struct tr_heap *h = &tmp.h[i];
		printf("    heap %-14s %" PRId64 " of %" PRId64
		       " allocations (%s), %s\n",
		       h->name, h->tot[RD_OBJECTS], h->all_count,
		       rep_fmt_pct(pct, sizeof(pct), h->tot[RD_OBJECTS],
		                   h->all_count),
		       hp_fmt_bytes(b, sizeof(b), h->tot[RD_SPACE]));
		rep_print_unknown(h, RD_OBJECTS, "their stack is in no dump");
	}
	for (size_t i = 0; !err && i < tmp.n; i++) {
		const struct tr_heap *h = &tmp.h[i];
		if (!h->tot[RD_OBJECTS])
			continue;
		snprintf(heading, sizeof(heading),
		         "  Top %ld temporary allocations in heap %s by count"
		         " (the function that called the allocator)",
		         o->top, h->name);
		err = rep_print_trace_top(s, h, heading, RD_OBJECTS, "count",
		                          RD_SPACE, "bytes", o->top);
	}
	tr_set_free(&tmp);
	return err;
}

static int report_process(sqlite3 *db, const struct rd_stacks *s,
                          const struct rd_process *p,
                          const struct session_info *si,
                          const struct report_opts *o)
{
	struct dump_sel d;
	struct state_heap *heaps = NULL;
	struct tr_info trace;
	int err = 0;
	char b[HP_FMT_BYTES_MAX];

	rep_print_lead(db, s, p, si);
	rep_print_process_header(db, p, si);
	if (p->rejected_concurrent)
		return 0; /* nothing was recorded for it here */
	if (select_dump(db, p, o, &d) < 0 ||
	    tr_load_info(db, SUBSYS, p->upid, &trace) < 0)
		return -1;
	if (!d.count) {
		printf("  dumps          none\n");
		if (trace.present)
			rep_print_trace_info(p, &trace);
		rep_print_warnings(db, p);
		return 0;
	}
	bool oom = !strcmp(d.reason, "oom-kill");
	printf("  dumps          %zu; showing dump %zu at +%.3f s (%s)%s\n",
	       d.count, d.index, rep_secs(d.ts - p->start_ts),
	       d.reason[0] ? d.reason : "?",
	       d.index == d.count && p->has_exit && !d.at_max && !oom
	               ? "; space still allocated at exit = leaks"
	               : "");
	rep_print_incidents(db, p, d.index, d.ts);
	if (d.at_max)
		printf("  dump at max    state at the peak of live bytes: %s "
		       "at "
		       "+%.3f s\n",
		       hp_fmt_bytes(b, sizeof(b), d.max_live_bytes),
		       rep_secs(d.max_ts - p->start_ts));
	if (trace.present)
		rep_print_trace_info(p, &trace);
	ssize_t nheaps = state_heaps_at(db, SUBSYS, p->upid, d.ts, &heaps);
	if (nheaps < 0)
		return -1;
	for (ssize_t i = 0; i < nheaps; i++)
		rep_print_totals(db, p->upid, heaps[i].name, heaps[i].t);
	if (nheaps == 0)
		printf("  no allocations were sampled up to this dump%s\n",
		       p->exec_not_followed || p->children_not_followed
		               ? " (see \"not followed\" above)"
		               : "");
	rep_print_unselected(db, p->upid);
	struct pi_memory mem;
	if (pi_load_memory(db, SUBSYS, p->upid, d.ts, &mem) < 0)
		err = -1;
	int64_t malloc_space = 0;
	for (ssize_t i = 0; i < nheaps; i++)
		if (heaps[i].name && !strcmp(heaps[i].name, "libc.malloc"))
			malloc_space = heaps[i].t[RD_SPACE];
	/* Exact only while adaptive sampling left -i 1 alone. */
	rep_print_memory(&mem, malloc_space,
	                 p->interval == 1 && p->interval_used <= 1);
	rep_print_warnings(db, p);
	for (ssize_t i = 0; !err && i < nheaps; i++)
		err = report_heap(db, s, p, &d, &heaps[i], o);
	if (!err && trace.present)
		err = report_leaks(db, s, p, o);
	if (!err && trace.present)
		err = report_temporaries(db, s, p, &trace, o);
	state_free_heaps(heaps, (size_t)nheaps);
	return err;
}

/* The lines before the processes of a profile with several: their count,
 * then the tree, one line each: id, name, and how it was recorded. */
static void print_session(const struct rd_process *procs, size_t n,
                          const size_t *order, const int *depth)
{
	size_t other = 0, gave_up = 0;

	for (size_t i = 0; i < n; i++) {
		other += procs[i].rejected_concurrent ==
		         PROF_NOT_PROFILED_CONCURRENT;
		gave_up += procs[i].rejected_concurrent ==
		           PROF_NOT_PROFILED_GAVE_UP;
	}
	printf("Profile of %zu processes", n);
	if (other || gave_up)
		printf(": %zu profiled, %zu not profiled (",
		       n - other - gave_up, other + gave_up);
	if (other && gave_up)
		printf("%zu already profiled by another session, %zu stopped "
		       "waiting for the collector)",
		       other, gave_up);
	else if (other)
		printf("already profiled by another session)");
	else if (gave_up)
		printf("stopped waiting for the collector)");
	putchar('\n');
	for (size_t k = 0; k < n; k++) {
		const struct rd_process *p = &procs[order[k]];
		char id[48], name[256];
		procid_format(procs, n, order[k], id, sizeof(id));
		rep_display_name(p, name, sizeof(name));
		const char *how = !strcmp(p->how, "exec")      ? "exec'd"
		                  : !strcmp(p->how, "fork")    ? "forked"
		                  : !strcmp(p->how, "command") ? "the command"
		                  : !strcmp(p->how, "pid")     ? "-p"
		                  : !strcmp(p->how, "name")    ? "-n"
		                                               : p->how;
		printf("  %*s%-*s %s (%s%s)\n", 2 * depth[k], "",
		       12 - 2 * (depth[k] < 6 ? depth[k] : 6), id, name, how,
		       p->rejected_concurrent ? ", not profiled" : "");
	}
	printf("\n");
}

static int report_all(sqlite3 *db, const struct rd_stacks *s,
                      const struct report_opts *o)
{
	struct rd_process *procs = NULL;
	struct session_info si = {0};
	size_t n = 0;
	int nproc = 0, err = 0;

	if (rd_load_processes(db, SUBSYS, &procs, &n) < 0)
		return -1;
	si.nprocs = n;
	/* The session's +0: its first process (a start of 0 is unknown). */
	for (size_t i = 0; i < n; i++)
		if (procs[i].start_ts > 0 &&
		    (!si.start || procs[i].start_ts < si.start))
			si.start = procs[i].start_ts;
	long *par = malloc((n ? n : 1) * sizeof(*par));
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	int *depth = malloc((n ? n : 1) * sizeof(*depth));
	if (!par || !order || !depth) {
		hp_err(SUBSYS, "out of memory");
		err = -1;
	} else {
		pi_tree(procs, n, par, order, depth);
	}
	if (!err && n > 1 && !o->have_pid)
		print_session(procs, n, order, depth);
	for (size_t k = 0; !err && k < n; k++) {
		size_t i = order[k];
		if (o->have_pid && !procsel_match(&o->pid, procs, n, i))
			continue;
		if (nproc++)
			printf("\n");
		procid_format(procs, n, i, si.id, sizeof(si.id));
		err = report_process(db, s, &procs[i], &si, o);
	}
	free(par);
	free(order);
	free(depth);
	rd_free_processes(procs, n);
	if (!err && nproc == 0 && o->have_pid) {
		char sel[48];
		procsel_format(&o->pid, sel, sizeof(sel));
		hp_err(SUBSYS, "%s: no process with pid %s", o->file, sel);
		err = -1;
	} else if (!err && nproc == 0) {
		printf("No processes in this profile.\n");
	}
	return err;
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o;
	struct rd_stacks s;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	progress_trace("report");
	sqlite3 *db = rd_open(o.file, SUBSYS);
	if (!db)
		return 1;
	int err = rd_load_stacks(db, SUBSYS, &s);
	if (!err && o.focus) {
		/* A typo (or a renamed function) names nothing: said, not
		 * shown as a heap without such stacks. */
		struct tree g;
		int any = tree_init(&g, &s) < 0 ? -ENOMEM
		                                : tree_names_match(&g, o.focus);
		tree_free(&g);
		if (any <= 0) {
			if (any < 0)
				hp_err(SUBSYS, "out of memory");
			else
				hp_err(SUBSYS,
				       "%s: '%s' matches no function in"
				       " %s",
				       o.callers ? "--callers" : "--callees",
				       o.focus, o.file);
			rd_free_stacks(&s);
			sqlite3_close(db);
			return any < 0 ? 1 : 2;
		}
	}
	if (!err) {
		err = report_all(db, &s, &o);
		rd_free_stacks(&s);
	}
	sqlite3_close(db);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	return err ? 1 : 0;
}
