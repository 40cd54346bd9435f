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
 * see docs/LEAKS.md and src/profile/trace_read.h.
 *
 * The state at a dump is the sum of heap_profile_allocation rows up to its
 * ts (rows are per-dump deltas); alloc_* views sum only the positive rows.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/procid.h"
#include "layout/layout_v2.h"
#include "profile/aggregate.h"
#include "profile/reader.h"
#include "profile/trace_read.h"
#include "util/err.h"
#include "util/human.h"

#define SUBSYS "report"

static const char *const view_help[RD_NVIEWS] = {
        "allocated and not freed at the dump",
        "allocated since the start, freed or not",
        "objects allocated and not freed at the dump",
        "objects allocated since the start, freed or not",
};

#define PATH_FRAMES 4  /* callers shown under a top self entry */
#define NAME_MAX_W  70 /* function names are cut to this width in tables */

struct report_opts {
	const char *file;
	enum rd_view view;
	long top;
	struct dump_ref dump;
	int have_pid;
	struct procsel pid; /* --pid PID or PID.N (cli/procid.h) */
	int64_t temp_ns;    /* --temporary-threshold */
};

/* What the report of one process needs of the whole profile. */
struct session_info {
	size_t nprocs; /* processes in the profile */
	char id[48];   /* the process's id (procid.h) */
	int64_t start; /* earliest start of profiling: the session's +0 */
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
	      "                      [--temporary-threshold DURATION]\n"
	      "\n"
	      "  --view VIEW  space (default), alloc_space, objects or"
	      " alloc_objects\n"
	      "  --top N      show the N largest entries (default 10)\n"
	      "  --dump N     use the N-th dump of each process (1 = first,"
	      " -1 = last;\n"
	      "               default: the last)\n"
	      "  --pid P      only the processes of pid P; P.N: the N-th of"
	      " them\n"
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
	if ((v = opt_value(argc, argv, i, "--top", &missing))) {
		if (opt_parse_long(v, &o->top) < 0 || o->top < 1) {
			hp_err(SUBSYS,
			       "invalid --top '%s' (want a positive "
			       "number)",
			       v);
			return -1;
		}
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "--dump", &missing)))
		return opt_parse_dump(SUBSYS, v, &o->dump);
	if ((v = opt_value(argc, argv, i, "--pid", &missing))) {
		o->have_pid = 1;
		return procsel_parse(SUBSYS, v, &o->pid);
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

/* ---- small formatting helpers ------------------------------------------- */

static char *fmt_value(char *buf, size_t len, enum rd_view v, int64_t x)
{
	if (v == RD_SPACE || v == RD_ALLOC_SPACE)
		return hp_fmt_bytes(buf, len, x);
	snprintf(buf, len, "%" PRId64, x);
	return buf;
}

static char *fmt_pct(char *buf, size_t len, int64_t part, int64_t total)
{
	if (total <= 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f%%", 100.0 * (double)part / total);
	return buf;
}

/* Seconds from ns, for boot-time timestamps and durations. */
static double secs(int64_t ns)
{
	return (double)ns / 1e9;
}

/* Print s cut to at most w bytes (with "..."), then pad to w if pad. */
static void put_cut(const char *s, int w, int pad)
{
	int n = (int)strlen(s);

	if (n > w)
		printf("%.*s...", w - 3, s);
	else
		printf("%s%*s", s, pad ? w - n : 0, "");
}

/* ---- loading ------------------------------------------------------------ */

static int64_t stat_get(sqlite3 *db, int64_t upid, const char *name)
{
	sqlite3_stmt *st = NULL;
	int64_t v = 0;

	if (sqlite3_prepare_v2(db,
	                       "SELECT value FROM heapprof_process_stats"
	                       " WHERE upid = ? AND name = ?",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return v;
}

/* Pick the dump opts->dump of process upid.  0, or -1 (message printed). */
static int select_dump(sqlite3 *db, const struct rd_process *p,
                       const struct report_opts *o, struct dump_sel *d)
{
	struct rd_dump *dumps = NULL;
	size_t n = 0;

	memset(d, 0, sizeof(*d));
	if (reader_load_dumps(db, SUBSYS, p->upid, &dumps, &n) < 0)
		return -1;
	d->count = n;
	long idx = 0;
	if (n) {
		char who[64];
		snprintf(who, sizeof(who), "process %" PRId64, p->pid);
		idx = opt_pick_dump(SUBSYS, who, dumps, n, &o->dump) + 1;
		if (idx == 0) {
			reader_free_dumps(dumps, n);
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
	reader_free_dumps(dumps, n);
	return 0;
}

/* ag_funcs_build, saying why it failed.  0 or -1. */
static int build_funcs(struct ag_funcs *g, const struct rd_stacks *s,
                       const struct rd_sample *leaves, size_t n, enum rd_view v,
                       int v2)
{
	if (ag_funcs_build(g, s, leaves, n, v, v2) < 0) {
		hp_err(SUBSYS, "out of memory");
		return -1;
	}
	return 0;
}

/* ---- printing ----------------------------------------------------------- */

/*
 * Copy a C++ name with template arguments collapsed to "<...>", which
 * keeps the class and method visible in a narrow column.  0 if the angle
 * brackets do not balance (an operator< or a C name): dst untouched.
 */
static int collapse_templates(char *dst, size_t len, const char *src)
{
	size_t o = 0;
	int depth = 0;

	for (const char *p = src; *p && o + 6 < len; p++) {
		if (*p == '<' && depth++ == 0) {
			memcpy(dst + o, "<...>", 5);
			o += 5;
		} else if (*p == '>' && depth > 0) {
			depth--;
		} else if (depth == 0) {
			dst[o++] = *p;
		}
	}
	if (depth != 0)
		return 0;
	dst[o] = '\0';
	return 1;
}

/* A function's name for a table: "0x<rel_pc>" if unknown. */
static void fn_label(char *buf, size_t len, const char *name, int64_t rel_pc)
{
	if (!name)
		snprintf(buf, len, "0x%" PRIx64, (uint64_t)rel_pc);
	else if (strlen(name) <= NAME_MAX_W ||
	         !collapse_templates(buf, len, name))
		snprintf(buf, len, "%s", name);
}

/* The callers of the heaviest stack of a self entry, a few levels up. */
static void print_path(const struct rd_stacks *s, const struct ag_fn *fn)
{
	const struct rd_callsite *c = rd_callsite_get(s, fn->best_callsite);
	const struct rd_callsite *leaf = c;
	char label[256];
	int shown = 0, depth = 0, hidden = 0;

	if (fn->nstacks > 1)
		printf("         (%zu call stacks; the largest:)\n",
		       fn->nstacks);
	for (; c && depth < RD_MAX_DEPTH; depth++) {
		const struct rd_frame *f = rd_frame_get(s, c->frame);
		const struct rd_mapping *m =
		        f ? rd_mapping_get(s, f->mapping) : NULL;
		size_t nsym;
		const struct rd_symbol *syms = rd_frame_symbols(s, f, &nsym);
		/* The leaf's innermost function is the entry itself. */
		for (size_t k = c == leaf ? 1 : 0; k < (nsym ? nsym : 1); k++) {
			const struct rd_symbol *y = nsym ? &syms[k] : NULL;
			if (shown >= PATH_FRAMES) {
				hidden++;
				continue;
			}
			fn_label(label, sizeof(label),
			         y && y->name ? y->name
			         : f          ? f->name
			                      : NULL,
			         f ? f->rel_pc : 0);
			fputs("         <- ", stdout);
			put_cut(label, 90, 0);
			printf("  (%s", ag_basename(m ? m->name : NULL));
			if (y && y->source_file)
				printf(" %s:%" PRId64,
				       ag_basename(y->source_file), y->line);
			printf(")%s\n", k + 1 < nsym ? " inlined" : "");
			shown++;
		}
		c = c->parent ? rd_callsite_get(s, c->parent) : NULL;
	}
	if (hidden)
		printf("         <- ... %d more frame%s\n", hidden,
		       hidden == 1 ? "" : "s");
}

/*
 * A table of functions: the value column (view v, headed col), an optional
 * second value column (view v2 >= 0 from fn->self2, headed col2; self
 * tables only), each row's share of total, and for self tables the call
 * path of each entry's heaviest stack.
 */
struct table {
	const char *heading; /* printed after a blank line */
	enum rd_view v;
	const char *col;
	int v2;
	const char *col2;
	int64_t total;
	long top;
	int self;
};

/* Widths of the value columns and the function column for the first
 * `rows` entries. */
static void top_widths(const struct ag_funcs *g, const size_t *order,
                       size_t rows, const struct table *t, int *val_w,
                       int *val2_w, int *fn_w)
{
	char val[HP_FMT_BYTES_MAX], label[256];

	*val_w = (int)strlen(t->col);
	*val2_w = t->v2 >= 0 ? (int)strlen(t->col2) : 0;
	*fn_w = (int)strlen("function");
	for (size_t i = 0; i < rows; i++) {
		const struct ag_fn *fn = &g->fns[order[i]];
		int w = (int)strlen(fmt_value(val, sizeof(val), t->v,
		                              t->self ? fn->self : fn->incl));
		*val_w = w > *val_w ? w : *val_w;
		if (t->v2 >= 0) {
			w = (int)strlen(fmt_value(val, sizeof(val),
			                          (enum rd_view)t->v2,
			                          fn->self2));
			*val2_w = w > *val2_w ? w : *val2_w;
		}
		fn_label(label, sizeof(label), fn->name, fn->rel_pc);
		w = (int)strlen(label);
		*fn_w = w > *fn_w ? w : *fn_w;
	}
	*fn_w = *fn_w > NAME_MAX_W ? NAME_MAX_W : *fn_w;
}

static void print_table(const struct rd_stacks *s, const struct ag_funcs *g,
                        const struct table *t)
{
	size_t n = 0;
	size_t *order = ag_funcs_order(g, t->self, &n);
	char val[HP_FMT_BYTES_MAX], pct[16], label[256];
	int val_w, val2_w, fn_w;

	if (!order) {
		hp_err(SUBSYS, "out of memory");
		return;
	}
	size_t rows = n < (size_t)t->top ? n : (size_t)t->top;
	printf("\n%s:\n", t->heading);
	top_widths(g, order, rows, t, &val_w, &val2_w, &fn_w);
	if (n == 0) {
		printf("    (none)\n");
	} else {
		printf("    %3s  %*s  %6s  ", "#", val_w, t->col, "%");
		if (t->v2 >= 0)
			printf("%*s  ", val2_w, t->col2);
		printf("%-*s  %s\n", fn_w, "function", "module");
	}
	for (size_t i = 0; i < rows; i++) {
		const struct ag_fn *fn = &g->fns[order[i]];
		int64_t x = t->self ? fn->self : fn->incl;
		fn_label(label, sizeof(label), fn->name, fn->rel_pc);
		printf("    %3zu  %*s  %6s  ", i + 1, val_w,
		       fmt_value(val, sizeof(val), t->v, x),
		       fmt_pct(pct, sizeof(pct), x, t->total));
		if (t->v2 >= 0)
			printf("%*s  ", val2_w,
			       fmt_value(val, sizeof(val), (enum rd_view)t->v2,
			                 fn->self2));
		put_cut(label, fn_w, 1);
		printf("  %s", ag_basename(fn->module));
		if (fn->file)
			printf("  %s:%" PRId64, ag_basename(fn->file),
			       fn->line);
		putchar('\n');
		if (t->self)
			print_path(s, fn);
	}
	if (n > rows)
		printf("    ... %zu more\n", n - rows);
	free(order);
}

static void print_top(const struct rd_stacks *s, const struct ag_funcs *g,
                      enum rd_view v, int64_t total, long top, int self)
{
	char heading[160];

	snprintf(heading, sizeof(heading), "  Top %ld by %s %s%s", top,
	         self ? "self" : "inclusive", rd_view_names[v],
	         self ? " (the function that called the allocator)"
	              : " (the function anywhere on the stack)");
	struct table t = {.heading = heading,
	                  .v = v,
	                  .col = rd_view_names[v],
	                  .v2 = -1,
	                  .total = total,
	                  .top = top,
	                  .self = self};
	print_table(s, g, &t);
}

static void print_counter_warnings(sqlite3 *db, const struct rd_process *p)
{
	char b[HP_FMT_BYTES_MAX];
	int64_t full = stat_get(db, p->upid, "stack_table_full");
	int64_t live = stat_get(db, p->upid, "live_table_full");
	int64_t mods = stat_get(db, p->upid, "module_table_full");
	int64_t unw = stat_get(db, p->upid, "unwind_errors");
	int64_t trunc = stat_get(db, p->upid, "truncated_stacks");

	if (full)
		printf("  warning: %" PRId64 " samples (%s) were charged to "
		       "[stack table full]: the stack table was full; raise "
		       "--shmem-size\n",
		       full,
		       hp_fmt_bytes(b, sizeof(b),
		                    stat_get(db, p->upid,
		                             "stack_table_full_bytes")));
	if (live)
		printf("  warning: %" PRId64 " samples (%s) could not be "
		       "tracked until freed (live table full): counted as "
		       "freed at once, so space and objects understate live "
		       "memory; raise --shmem-size\n",
		       live,
		       hp_fmt_bytes(
		               b, sizeof(b),
		               stat_get(db, p->upid, "live_table_full_bytes")));
	if (mods)
		printf("  warning: %" PRId64 " loaded modules did not fit in "
		       "the module table: their frames are [unknown]\n",
		       mods);
	if (unw)
		printf("  warning: %" PRId64 " stacks could not be unwound\n",
		       unw);
	if (trunc)
		printf("  warning: %" PRId64 " stacks were cut at %" PRId64
		       " frames (raise --max-frames)\n",
		       trunc, p->max_frames);
}

static void print_warnings(sqlite3 *db, const struct rd_process *p)
{
	print_counter_warnings(db, p);
	if (p->disconnected)
		printf("  warning: the process disconnected before the "
		       "session ended\n");
	if (p->stop_reason == HP_STOP_INTERNAL)
		printf("  warning: the profiler stopped recording early after "
		       "an internal failure in the process\n");
}

/*
 * The name a process had when it was recorded, as the report shows it:
 * without its directory (the command's name is its argv[0]), and whole
 * where the kernel cut it to 15 bytes (a forked child's name is its
 * comm): then the command line's first word, when it starts with it.
 * "?" when unknown.
 */
static void display_name(const struct rd_process *p, char *buf, size_t len)
{
	const char *name = p->name, *slash = strrchr(name, '/');
	if (slash && slash[1])
		name = slash + 1;
	size_t nl = strlen(name);
	size_t w = strcspn(p->cmdline, " ");
	const char *arg0 = p->cmdline;
	for (size_t i = 0; i < w; i++)
		if (p->cmdline[i] == '/')
			arg0 = p->cmdline + i + 1;
	size_t al = (size_t)(p->cmdline + w - arg0);
	if (nl == 15 && al > nl && !strncmp(arg0, name, nl))
		snprintf(buf, len, "%.*s", (int)al, arg0);
	else
		snprintf(buf, len, "%s", name[0] ? name : "?");
}

/* How the session came to profile the process (prof_process.how). */
static void print_how(const struct rd_process *p)
{
	static const char *const hows[][2] = {
	        {"command", "the command run by heapprof record"},
	        {"pid", "by pid (record -p)"},
	        {"name", "by name (record -n)"},
	        {"fork", "forked by a profiled process (--follow-fork)"},
	        {"exec", "after an exec (--follow-exec)"},
	};
	const char *text = p->how;

	for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++)
		if (!strcmp(p->how, hows[i][0]))
			text = hows[i][1];
	printf("  profiled as    %s", text);
	if (p->ppid > 0)
		printf(", parent pid %" PRId64, p->ppid);
	if (p->session_id)
		printf(", session %" PRId64, p->session_id);
	putchar('\n');
}

/* From startup or attached; when, relative to the session; how long. */
static void print_recorded(const struct rd_process *p,
                           const struct session_info *si)
{
	int multi = si->nprocs > 1;

	printf("  recorded       %s",
	       p->from_startup ? "from startup" : "attached while running");
	if (multi)
		printf(" at +%.3f s", secs(p->start_ts - si->start));
	if (p->has_end && multi)
		printf(" until +%.3f s", secs(p->end_ts - si->start));
	if (p->has_end)
		printf(", %.3f s (boot time %.3f s to %.3f s)\n",
		       secs(p->end_ts - p->start_ts), secs(p->start_ts),
		       secs(p->end_ts));
	else
		printf(", from boot time %.3f s; no end recorded\n",
		       secs(p->start_ts));
}

/* The table-full and client-error counters, zero or not. */
static void print_counters(sqlite3 *db, const struct rd_process *p)
{
	char b1[HP_FMT_BYTES_MAX], b2[HP_FMT_BYTES_MAX];

	printf("  dropped        stack table full %" PRId64 " (%s),"
	       " live table full %" PRId64 " (%s),"
	       " module table full %" PRId64 "\n",
	       stat_get(db, p->upid, "stack_table_full"),
	       hp_fmt_bytes_short(
	               b1, sizeof(b1),
	               stat_get(db, p->upid, "stack_table_full_bytes")),
	       stat_get(db, p->upid, "live_table_full"),
	       hp_fmt_bytes_short(
	               b2, sizeof(b2),
	               stat_get(db, p->upid, "live_table_full_bytes")),
	       stat_get(db, p->upid, "module_table_full"));
	printf("  client errors  %" PRId64 " unwind errors, %" PRId64
	       " truncated stacks, %" PRId64 " reentrant calls skipped\n",
	       stat_get(db, p->upid, "unwind_errors"),
	       stat_get(db, p->upid, "truncated_stacks"),
	       stat_get(db, p->upid, "reentrant_skipped"));
	/* Stacks the capture kept short, only when there are any. */
	int64_t stopped = stat_get(db, p->upid, "unwind_stopped");
	int64_t unbounded = stat_get(db, p->upid, "stack_unbounded");
	int64_t low = stat_get(db, p->upid, "stack_low");
	if (stopped > 0 || unbounded > 0 || low > 0)
		printf("  short stacks   %" PRId64 " ended early (no proven"
		       " read or rule), %" PRId64 " on a stack heapprof"
		       " cannot bound (caller only), %" PRId64 " not recorded"
		       " (under 1 KiB of stack left)\n",
		       stopped, unbounded, low);
	/* Allocations before heapprof's constructor, only when there are
	 * any (a profile from before they were kept has no rows). */
	int64_t early = stat_get(db, p->upid, "startup_recorded");
	int64_t early_missed = stat_get(db, p->upid, "startup_missed");
	if (early > 0 || early_missed > 0)
		printf("  before attach  %" PRId64 " allocations made before"
		       " heapprof's constructor (shared libraries'"
		       " constructors), recorded exactly with their stacks"
		       "%s",
		       early, early_missed > 0 ? "" : "\n");
	if (early_missed > 0)
		printf("; %" PRId64 " not recorded (more than heapprof"
		       " keeps before it attaches, or made by another thread"
		       " or a signal handler)\n",
		       early_missed);
	int64_t zero = stat_get(db, p->upid, "zero_size_allocations");
	if (zero > 0)
		printf("  zero-size      %" PRId64 " allocations of 0 bytes"
		       " (malloc(0), new of an empty array) recorded as 0 B;"
		       " the allocator serves at least one byte each\n",
		       zero);
	int64_t sandboxed = stat_get(db, p->upid, "sandboxed_children");
	if (sandboxed > 0)
		printf("  not followed   %" PRId64 " children: the program runs"
		       " under a seccomp filter it installed, and heapprof "
		       "makes"
		       " no system call such a filter may forbid\n",
		       sandboxed);
	if (stat_get(db, p->upid, "control_lost") > 0)
		printf("  connection     the program closed or reused "
		       "heapprof's"
		       " connection to the collector (as daemons do): recorded"
		       " on, but tables could not grow and named snapshots"
		       " failed from then on\n");
	/* Signal handlers against the hook, only when there were any. */
	int64_t nested = stat_get(db, p->upid, "nested_recorded");
	int64_t stale = stat_get(db, p->upid, "stale_guards_cleared");
	if (nested > 0 || stale > 0)
		printf("  hook signals   %" PRId64 " recorded inside a hook"
		       " (a signal handler's), %" PRId64 " hooks left by a"
		       " longjmp found and cleared\n",
		       nested, stale);
}

/*
 * --unwind fp stops at the first function built without frame pointers,
 * as most distributions build everything: the stacks are then one or two
 * frames, and nothing else says why.  Said when most of the process's
 * stacks (callsites with allocations) are that short.
 */
static void print_fp_note(sqlite3 *db, int64_t upid)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db,
	                       "SELECT count(*), sum(c.depth < 2),"
	                       " avg(c.depth + 1) FROM stack_profile_callsite c"
	                       " WHERE c.id IN (SELECT callsite_id FROM"
	                       " heap_profile_allocation WHERE upid = ?)",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_int64(st, 0) > 0 &&
		    2 * sqlite3_column_int64(st, 1) >
		            sqlite3_column_int64(st, 0))
			printf("  stacks         %.1f frames deep on average:"
			       " the program was likely built without frame"
			       " pointers; use the default --unwind dwarf\n",
			       sqlite3_column_double(st, 2));
	}
	sqlite3_finalize(st);
}

static void print_process_header(sqlite3 *db, const struct rd_process *p,
                                 const struct session_info *si)
{
	char name[256];
	display_name(p, name, sizeof(name));
	printf("Process %s (%s)\n", si->id, name);
	printf("  command line   %s\n", p->cmdline);
	print_how(p);
	if (p->rejected_concurrent) {
		printf("  not profiled: already profiled by another "
		       "session%s%s%s\n",
		       p->note ? " (" : "", p->note ? p->note : "",
		       p->note ? ")" : "");
		return;
	}
	printf("  sampling       ");
	if (p->interval == 1)
		printf("every allocation");
	else
		printf("one sample per %" PRId64 " bytes on average",
		       p->interval);
	printf(", unwind %s, max %" PRId64 " frames\n",
	       p->unwind[0] ? p->unwind : "?", p->max_frames);
	if (!strcmp(p->unwind, "fp"))
		print_fp_note(db, p->upid);
	if (p->interval_used && p->interval_used != p->interval)
		printf("  interval used  %" PRId64 " bytes at the last dump:"
		       " %s from %" PRId64 "\n",
		       p->interval_used,
		       p->interval_used > p->interval
		               ? "raised by adaptive sampling"
		               : "changed",
		       p->interval);
	print_recorded(p, si);
	printf("  exit status    ");
	if (!p->has_exit)
		printf("unknown\n");
	else if (p->exit_status > 128 && p->exit_status < 128 + 65)
		printf("%" PRId64 " (128 + signal %" PRId64 ": %s)\n",
		       p->exit_status, p->exit_status - 128,
		       strsignal((int)(p->exit_status - 128)));
	else
		printf("%" PRId64 "\n", p->exit_status);
	/* What it started that the session did not follow: where the
	 * work went when this process has little or nothing. */
	if (p->exec_not_followed)
		printf("  not followed   exec'd %s: use --follow-exec to "
		       "profile it\n",
		       p->exec_not_followed);
	if (p->children_not_followed)
		printf("  not followed   started child processes: use "
		       "--follow-fork to profile them\n");
	printf("  samples        %" PRId64 " allocations sampled, %" PRId64
	       " frees matched, %" PRId64 " reentrant calls skipped\n",
	       /* Sums of the per-stack counters: exact at the last dump. */
	       stat_get(db, p->upid, "samples"),
	       stat_get(db, p->upid, "frees_matched"),
	       stat_get(db, p->upid, "reentrant_skipped"));
	print_counters(db, p);
}

/* A heap's sampling interval from heapprof_heap (-1: not known, e.g. a
 * profile written before that table). */
static int64_t heap_interval(sqlite3 *db, int64_t upid, const char *heap)
{
	sqlite3_stmt *st = NULL;
	int64_t iv = -1;
	if (sqlite3_prepare_v2(
	            db,
	            "SELECT max(sampling_interval) FROM heapprof_heap"
	            " WHERE upid = ? AND name = ?",
	            -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_type(st, 0) != SQLITE_NULL)
			iv = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return iv;
}

/* Heaps the program registered that the session did not select. */
static void print_unselected(sqlite3 *db, int64_t upid)
{
	sqlite3_stmt *st = NULL;
	int n = 0;
	if (sqlite3_prepare_v2(db,
	                       "SELECT name FROM heapprof_heap WHERE upid = ?"
	                       " AND sampling_interval = 0 ORDER BY heap_id",
	                       -1, &st, NULL) != SQLITE_OK) {
		sqlite3_finalize(st);
		return;
	}
	sqlite3_bind_int64(st, 1, upid);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const unsigned char *name = sqlite3_column_text(st, 0);
		printf("%s%s", n++ ? ", " : "  not selected   ",
		       name ? (const char *)name : "?");
	}
	if (n)
		printf(" (registered by the program; --heaps or --all-heaps "
		       "records %s)\n",
		       n == 1 ? "it" : "them");
	sqlite3_finalize(st);
}

static void print_totals(sqlite3 *db, int64_t upid, const char *heap,
                         const int64_t t[RD_NVIEWS])
{
	char b[HP_FMT_BYTES_MAX];
	int64_t iv = heap_interval(db, upid, heap);

	if (iv == 1)
		printf("  heap %s (every allocation) at this dump:\n", heap);
	else if (iv > 1)
		printf("  heap %s (sampled every %s) at this dump:\n", heap,
		       hp_fmt_bytes(b, sizeof(b), (uint64_t)iv));
	else
		printf("  heap %s at this dump:\n", heap);
	for (int v = 0; v < RD_NVIEWS; v++)
		printf("    %-14s %-26s %s\n", rd_view_names[v],
		       fmt_value(b, sizeof(b), (enum rd_view)v, t[v]),
		       view_help[v]);
}

/* ---- the process's memory beside the profile ------------------------------
 */

struct mem_row {
	int64_t rss, rss_anon, rss_peak, m_system, m_in_use, m_free;
	unsigned have_rss : 1, have_peak : 1, have_malloc : 1, at_exit : 1;
	unsigned malloc_foreign : 1;
};

/* The memory rows of one dump (profiles before this table have none). */
static int load_memory(sqlite3 *db, int64_t upid, int64_t ts, struct mem_row *m)
{
	sqlite3_stmt *st = NULL;

	memset(m, 0, sizeof(*m));
	if (!rd_has_table(db, "heapprof_dump_memory"))
		return 0;
	if (sqlite3_prepare_v2(
	            db,
	            "SELECT name, value, source FROM"
	            " heapprof_dump_memory WHERE upid = ? AND ts = ?",
	            -1, &st, NULL) != SQLITE_OK) {
		hp_err(SUBSYS, "reading process memory: %s",
		       sqlite3_errmsg(db));
		return -1;
	}
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_int64(st, 2, ts);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *n = (const char *)sqlite3_column_text(st, 0);
		const char *src = (const char *)sqlite3_column_text(st, 2);
		int64_t v = sqlite3_column_int64(st, 1);
		if (!n)
			continue;
		if (!strcmp(n, "rss")) {
			m->rss = v;
			m->have_rss = 1;
			m->at_exit = src && !strcmp(src, "exit");
		} else if (!strcmp(n, "rss_anon")) {
			m->rss_anon = v;
		} else if (!strcmp(n, "rss_peak")) {
			m->rss_peak = v;
			m->have_peak = 1;
		} else if (!strcmp(n, "malloc_system")) {
			m->m_system = v;
			m->have_malloc = 1;
		} else if (!strcmp(n, "malloc_foreign")) {
			m->malloc_foreign = v != 0;
		} else if (!strcmp(n, "malloc_in_use")) {
			m->m_in_use = v;
		} else if (!strcmp(n, "malloc_free")) {
			m->m_free = v;
		}
	}
	sqlite3_finalize(st);
	return 0;
}

/*
 * Profiled heap beside the allocator's and the kernel's view (seed 002,
 * "heapprofd vs malloc_info() vs RSS"): the gaps are allocator overhead,
 * free memory it keeps, and fragmentation.
 */
static void print_memory(const struct mem_row *m, int64_t space, int exact)
{
	char b[HP_FMT_BYTES_MAX];

	if (!m->have_rss && !m->have_malloc && !m->malloc_foreign)
		return;
	printf("  memory of the process at this dump%s:\n",
	       m->at_exit ? " (read by the process at exit)" : "");
	printf("    %-20s %-12s %s\n", "profiled heap",
	       hp_fmt_bytes(b, sizeof(b), space),
	       exact ? "libc.malloc space, exact (-i 1)"
	             : "libc.malloc space, estimated from samples");
	if (m->malloc_foreign && !m->have_malloc) {
		printf("    %-20s %-12s %s\n", "malloc in use", "-",
		       "does not apply: the program's malloc is not glibc's,"
		       " and mallinfo2 describes glibc's arenas only");
	} else if (m->have_malloc) {
		printf("    %-20s %-12s %s\n", "malloc in use",
		       hp_fmt_bytes(b, sizeof(b), m->m_in_use),
		       "mallinfo2: blocks in use, with allocator headers");
		printf("    %-20s %-12s %s\n", "malloc free, kept",
		       hp_fmt_bytes(b, sizeof(b), m->m_free),
		       "mallinfo2: freed but kept (caches, fragmentation)");
		printf("    %-20s %-12s %s\n", "malloc from the OS",
		       hp_fmt_bytes(b, sizeof(b), m->m_system),
		       "mallinfo2: arenas and mmapped blocks");
	}
	if (m->have_rss) {
		printf("    %-20s %-12s %s\n", "RSS, anonymous",
		       hp_fmt_bytes(b, sizeof(b), m->rss_anon),
		       "resident heap, stacks and other private memory");
		printf("    %-20s %-12s %s\n", "RSS, total",
		       hp_fmt_bytes(b, sizeof(b), m->rss),
		       "also code, files and heapprof's shared tables");
	}
	if (m->have_peak)
		printf("    %-20s %s\n", "RSS, peak",
		       hp_fmt_bytes(b, sizeof(b), m->rss_peak));
}

/* ---- one process -------------------------------------------------------- */

struct heap_totals {
	char *name;
	int64_t t[RD_NVIEWS];
};

static int cmp_heap_totals(const void *a, const void *b)
{
	const struct heap_totals *x = a, *y = b;
	return rd_heap_cmp(x->name, y->name);
}

/*
 * Heaps with rows up to ts, libc.malloc first, with their totals.  Summed
 * in C: rows come in runs of one heap, and SQL's GROUP BY on a column
 * without an index sorts every row first.
 */
static ssize_t load_heaps(sqlite3 *db, int64_t upid, int64_t ts,
                          struct heap_totals **out)
{
	sqlite3_stmt *st = NULL;
	struct heap_totals *h = NULL;
	size_t n = 0, last = 0;
	int rc = sqlite3_prepare_v2(db,
	                            "SELECT heap_name, size, count FROM"
	                            " heap_profile_allocation"
	                            " WHERE upid = ? AND ts <= ?",
	                            -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_int64(st, 2, ts);
	}
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		if (!name)
			name = ""; /* a bad file */
		size_t i = last;
		if (i >= n || strcmp(h[i].name, name))
			for (i = 0; i < n && strcmp(h[i].name, name); i++)
				;
		if (i == n) {
			struct heap_totals *a =
			        realloc(h, (n + 1) * sizeof(*a));
			if (!a || !(a[n].name = strdup(name))) {
				h = a ? a : h;
				rc = SQLITE_NOMEM;
				break;
			}
			h = a;
			memset(h[n].t, 0, sizeof(h[n].t));
			n++;
		}
		last = i;
		struct rd_sample x;
		memcpy(x.v, h[i].t, sizeof(x.v));
		rd_sample_add(&x, sqlite3_column_int64(st, 1),
		              sqlite3_column_int64(st, 2));
		memcpy(h[i].t, x.v, sizeof(x.v));
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE && n > 1)
		qsort(h, n, sizeof(*h), cmp_heap_totals);
	if (rc != SQLITE_DONE) {
		hp_err(SUBSYS, "reading allocations: %s",
		       rc == SQLITE_NOMEM ? "out of memory"
		                          : sqlite3_errmsg(db));
		for (size_t i = 0; i < n; i++)
			free(h[i].name);
		free(h);
		return -1;
	}
	*out = h;
	return (ssize_t)n;
}

static int report_heap(sqlite3 *db, const struct rd_stacks *s,
                       const struct rd_process *p, const struct dump_sel *d,
                       const struct heap_totals *h, const struct report_opts *o)
{
	struct rd_sample *leaves = NULL;
	struct ag_funcs g;
	size_t n;

	if (reader_load_samples(db, SUBSYS, p->upid, h->name, d->ts, &leaves,
	                        &n) < 0)
		return -1;
	int err = build_funcs(&g, s, leaves, n, o->view, -1);
	if (!err) {
		printf("\n  Heap %s, view %s: %s\n", h->name,
		       rd_view_names[o->view], view_help[o->view]);
		print_top(s, &g, o->view, h->t[o->view], o->top, 1);
		print_top(s, &g, o->view, h->t[o->view], o->top, 0);
	}
	ag_funcs_free(&g);
	free(leaves);
	return err;
}

/* ---- the event trace (record --trace) ----------------------------------- */

/* "N allocations (B) and M frees (B)", the parts that are not zero. */
static void put_events(int64_t allocs, int64_t alloc_bytes, int64_t frees,
                       int64_t free_bytes)
{
	char b[HP_FMT_BYTES_MAX];

	if (allocs)
		printf("%" PRId64 " allocation%s (%s)", allocs,
		       allocs == 1 ? "" : "s",
		       hp_fmt_bytes_short(b, sizeof(b), alloc_bytes));
	if (allocs && frees)
		printf(" and ");
	if (frees)
		printf("%" PRId64 " free%s (%s)", frees, frees == 1 ? "" : "s",
		       hp_fmt_bytes_short(b, sizeof(b), free_bytes));
}

/*
 * The trace line of the header: mode, events kept and what was left out,
 * then (if anything was) what that means for the numbers of the report.
 */
static void print_trace_info(const struct rd_process *p,
                             const struct tr_info *t)
{
	char b[HP_FMT_BYTES_MAX];
	int ring = !strcmp(t->mode, "ring");
	int oneshot = !strcmp(t->mode, "oneshot");
	int64_t dropped = t->dropped_allocs + t->dropped_frees;

	printf("  trace          %s", t->mode[0] ? t->mode : "event trace");
	if (t->buffer_bytes)
		printf(", %s buffer",
		       hp_fmt_bytes_short(b, sizeof(b), t->buffer_bytes));
	printf(": %s%" PRId64 " events kept (%" PRId64 " allocations, %" PRId64
	       " frees",
	       ring && t->overwritten ? "the newest " : "",
	       t->allocs + t->frees, t->allocs, t->frees);
	if (ring && t->overwritten && t->first_ts)
		printf(", from %+.3f s", secs(t->first_ts - p->start_ts));
	printf(")");
	if (!tr_left_out(t)) {
		printf("; complete: nothing left out\n");
	} else {
		if (oneshot && t->full_ts)
			printf("; the buffer filled at %+.3f s",
			       secs(t->full_ts - p->start_ts));
		if (t->overwritten)
			printf("; %" PRId64 " older events overwritten",
			       t->overwritten);
		if (dropped) {
			printf("; ");
			put_events(t->dropped_allocs, t->dropped_alloc_bytes,
			           t->dropped_frees, t->dropped_free_bytes);
			printf(" left out (%s)",
			       oneshot ? "made after it filled"
			       : ring  ? "their slot was being written"
			               : "no room in the buffer");
		}
		if (t->incomplete)
			printf("; %" PRId64 " events never finished (the "
			       "process died writing them)",
			       t->incomplete);
		putchar('\n');
	}
	if (t->waits)
		printf("  trace waits    %" PRId64 " waits for room"
		       " (--block-client), %.3f ms in all\n",
		       t->waits, (double)t->wait_ns / 1e6);
	if (p->interval > 1)
		printf("  trace sampling the trace holds the sampled "
		       "allocations"
		       " only (one sample per %" PRId64 " bytes on average):"
		       " its counts and bytes are estimates\n",
		       p->interval);
	if (tr_left_out(t))
		printf("  warning: the trace is incomplete (%" PRId64
		       " events left out): the temporary allocations below"
		       " count only the events kept and are lower bounds, and"
		       " pprof/flamegraph --from/--to miss what was left out;"
		       " the leaks below come from the final dump, not from"
		       " the trace\n",
		       tr_left_out(t));
}

/* The blocks of h without a known stack, if any. */
static void print_unknown(const struct tr_heap *h, enum rd_view v,
                          const char *what)
{
	char b[HP_FMT_BYTES_MAX];

	if (h->n && h->s[0].callsite == 0 && h->s[0].v[v])
		printf("    (%s of them without a known stack: %s)\n",
		       fmt_value(b, sizeof(b), v, h->s[0].v[v]), what);
}

/* The top functions of h by view v, with v2 beside it. */
static int print_trace_top(const struct rd_stacks *s, const struct tr_heap *h,
                           const char *heading, enum rd_view v, const char *col,
                           enum rd_view v2, const char *col2, long top)
{
	struct ag_funcs g;
	int err = build_funcs(&g, s, h->s, h->n, v, (int)v2);

	if (!err) {
		struct table t = {.heading = heading,
		                  .v = v,
		                  .col = col,
		                  .v2 = (int)v2,
		                  .col2 = col2,
		                  .total = h->tot[v],
		                  .top = top,
		                  .self = 1};
		print_table(s, &g, &t);
	}
	ag_funcs_free(&g);
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

	if (tr_leaks(db, SUBSYS, p->upid, &leaks, &src) < 0)
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
		print_unknown(h, RD_OBJECTS, "their stack is in no dump");
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
		err = print_trace_top(s, h, heading, RD_SPACE, "bytes",
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
		       fmt_pct(pct, sizeof(pct), h->tot[RD_OBJECTS],
		               h->all_count),
		       hp_fmt_bytes(b, sizeof(b), h->tot[RD_SPACE]));
		print_unknown(h, RD_OBJECTS, "their stack is in no dump");
	}
	for (size_t i = 0; !err && i < tmp.n; i++) {
		const struct tr_heap *h = &tmp.h[i];
		if (!h->tot[RD_OBJECTS])
			continue;
		snprintf(heading, sizeof(heading),
		         "  Top %ld temporary allocations in heap %s by count"
		         " (the function that called the allocator)",
		         o->top, h->name);
		err = print_trace_top(s, h, heading, RD_OBJECTS, "count",
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
	struct heap_totals *heaps = NULL;
	struct tr_info trace;
	int err = 0;
	char b[HP_FMT_BYTES_MAX];

	print_process_header(db, p, si);
	if (p->rejected_concurrent)
		return 0; /* nothing was recorded for it here */
	if (select_dump(db, p, o, &d) < 0 ||
	    tr_load_info(db, SUBSYS, p->upid, &trace) < 0)
		return -1;
	if (!d.count) {
		printf("  dumps          none\n");
		if (trace.present)
			print_trace_info(p, &trace);
		print_warnings(db, p);
		return 0;
	}
	printf("  dumps          %zu; showing dump %zu at +%.3f s (%s)%s\n",
	       d.count, d.index, secs(d.ts - p->start_ts),
	       d.reason[0] ? d.reason : "?",
	       d.index == d.count && p->has_exit && !d.at_max
	               ? "; space still allocated at exit = leaks"
	               : "");
	if (d.at_max)
		printf("  dump at max    state at the peak of live bytes: %s "
		       "at "
		       "+%.3f s\n",
		       hp_fmt_bytes(b, sizeof(b), d.max_live_bytes),
		       secs(d.max_ts - p->start_ts));
	if (trace.present)
		print_trace_info(p, &trace);
	ssize_t nheaps = load_heaps(db, p->upid, d.ts, &heaps);
	if (nheaps < 0)
		return -1;
	for (ssize_t i = 0; i < nheaps; i++)
		print_totals(db, p->upid, heaps[i].name, heaps[i].t);
	if (nheaps == 0)
		printf("  no allocations were sampled up to this dump%s\n",
		       p->exec_not_followed || p->children_not_followed
		               ? " (see \"not followed\" above)"
		               : "");
	print_unselected(db, p->upid);
	struct mem_row mem;
	if (load_memory(db, p->upid, d.ts, &mem) < 0)
		err = -1;
	int64_t malloc_space = 0;
	for (ssize_t i = 0; i < nheaps; i++)
		if (heaps[i].name && !strcmp(heaps[i].name, "libc.malloc"))
			malloc_space = heaps[i].t[RD_SPACE];
	/* Exact only while adaptive sampling left -i 1 alone. */
	print_memory(&mem, malloc_space,
	             p->interval == 1 && p->interval_used <= 1);
	print_warnings(db, p);
	for (ssize_t i = 0; !err && i < nheaps; i++)
		err = report_heap(db, s, p, &d, &heaps[i], o);
	if (!err && trace.present)
		err = report_leaks(db, s, p, o);
	if (!err && trace.present)
		err = report_temporaries(db, s, p, &trace, o);
	for (ssize_t i = 0; i < nheaps; i++)
		free(heaps[i].name);
	free(heaps);
	return err;
}

/*
 * The processes of a profile as a tree: procs[par[i]] is the parent of
 * procs[i], or par[i] = -1 for a root.  An exec'd image (how = exec) is
 * the child of the image it replaced (the row of the same pid before it);
 * any other process the child of the row of its parent pid that was
 * running when it started (the newest of them that started before it).
 * order[] gets the processes parent first, children by start time
 * (upid on ties), depth[] their depth.
 */
static void proc_tree(const struct rd_process *procs, size_t n, long *par,
                      size_t *order, int *depth)
{
	for (size_t i = 0; i < n; i++) {
		par[i] = -1;
		bool exec = !strcmp(procs[i].how, "exec");
		for (size_t k = 0; k < n; k++) {
			if (k == i)
				continue;
			if (exec ? (procs[k].pid != procs[i].pid || k > i)
			         : (procs[i].ppid <= 0 ||
			            procs[k].pid != procs[i].ppid ||
			            (procs[k].start_ts > procs[i].start_ts &&
			             procs[i].start_ts > 0)))
				continue;
			if (par[i] < 0 ||
			    procs[k].start_ts >= procs[par[i]].start_ts)
				par[i] = (long)k;
		}
	}
	/* Depth-first from the roots; siblings by start time.  A cycle
	 * (not possible from a recording, but the file is input) never
	 * reaches a root: its members are appended as roots. */
	size_t m = 0;
	bool *done = calloc(n ? n : 1, sizeof(*done));
	for (int pass = 0; pass < 2 && done; pass++)
		for (;;) {
			/* The next root: the earliest not done. */
			long r = -1;
			for (size_t i = 0; i < n; i++)
				if (!done[i] && (pass || par[i] < 0) &&
				    (r < 0 ||
				     procs[i].start_ts < procs[r].start_ts))
					r = (long)i;
			if (r < 0)
				break;
			/* Preorder: the root, then each time the earliest
			 * child not done of the deepest node that has one. */
			size_t first = m;
			done[r] = true;
			order[m] = (size_t)r;
			depth[m++] = 0;
			for (size_t at = first; at < m;) {
				long c = -1;
				size_t p = order[at];
				for (size_t i = 0; i < n; i++)
					if (!done[i] && par[i] == (long)p &&
					    (c < 0 ||
					     procs[i].start_ts <
					             procs[c].start_ts))
						c = (long)i;
				if (c < 0) {
					/* Back up to the parent's entry. */
					long up = par[p];
					size_t k = at;
					while (k > first &&
					       (long)order[k] != up)
						k--;
					if ((long)order[k] != up)
						break;
					at = k;
					continue;
				}
				/* Insert c right after p's subtree so far. */
				size_t ins = at + 1;
				while (ins < m && depth[ins] > depth[at])
					ins++;
				memmove(order + ins + 1, order + ins,
				        (m - ins) * sizeof(*order));
				memmove(depth + ins + 1, depth + ins,
				        (m - ins) * sizeof(*depth));
				order[ins] = (size_t)c;
				depth[ins] = depth[at] + 1;
				done[c] = true;
				m++;
				at = ins;
			}
		}
	for (size_t i = 0; done && i < n; i++)
		if (!done[i]) {
			order[m] = i;
			depth[m++] = 0;
		}
	if (!done)
		for (size_t i = 0; i < n; i++) {
			order[i] = i;
			depth[i] = 0;
		}
	free(done);
}

/* The lines before the processes of a profile with several: their count,
 * then the tree, one line each: id, name, and how it was recorded. */
static void print_session(const struct rd_process *procs, size_t n,
                          const size_t *order, const int *depth)
{
	size_t rejected = 0;

	for (size_t i = 0; i < n; i++)
		rejected += procs[i].rejected_concurrent != 0;
	printf("Profile of %zu processes", n);
	if (rejected)
		printf(": %zu profiled, %zu not profiled (already profiled "
		       "by another session)",
		       n - rejected, rejected);
	putchar('\n');
	for (size_t k = 0; k < n; k++) {
		const struct rd_process *p = &procs[order[k]];
		char id[48], name[256];
		procid_format(procs, n, order[k], id, sizeof(id));
		display_name(p, name, sizeof(name));
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

	if (reader_load_processes(db, SUBSYS, &procs, &n) < 0)
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
		proc_tree(procs, n, par, order, depth);
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
	reader_free_processes(procs, n);
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
	sqlite3 *db = reader_open(o.file, SUBSYS);
	if (!db)
		return 1;
	int err = reader_load_stacks(db, SUBSYS, &s);
	if (!err) {
		err = report_all(db, &s, &o);
		reader_free_stacks(&s);
	}
	sqlite3_close(db);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	return err ? 1 : 0;
}
