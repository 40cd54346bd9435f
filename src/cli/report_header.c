/*
 * The head of each process in `heapprof report` (cmd_report.c): how it
 * was recorded, its counters and warnings, its heaps' totals at the dump,
 * its memory beside the profile and what its event trace kept.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/report.h"
#include "layout/layout_v2.h"
#include "store/procinfo.h"
#include "util/human.h"

static void print_counter_warnings(sqlite3 *db, const struct rd_process *p)
{
	char b[HP_FMT_BYTES_MAX];
	int64_t full = pi_stat(db, p->upid, "stack_table_full");
	int64_t live = pi_stat(db, p->upid, "live_table_full");
	int64_t mods = pi_stat(db, p->upid, "module_table_full");
	int64_t unw = pi_stat(db, p->upid, "unwind_errors");
	int64_t trunc = pi_stat(db, p->upid, "truncated_stacks");

	if (full)
		printf("  warning: %" PRId64 " samples (%s) were charged to "
		       "[stack table full]: the stack table was full; raise "
		       "--shmem-size\n",
		       full,
		       hp_fmt_bytes(
		               b, sizeof(b),
		               pi_stat(db, p->upid, "stack_table_full_bytes")));
	int64_t held = pi_stat(db, p->upid, "live_table_limit_bytes");
	char h[HP_FMT_BYTES_MAX + 160] = "raise --shmem-size";
	if (held > 0) {
		char l[HP_FMT_BYTES_MAX];
		snprintf(h, sizeof(h),
		         "the table was held to %s, an eighth of the room left "
		         "in the memory cgroup heapprof shared with it; give "
		         "that cgroup more room, or run heapprof outside it",
		         hp_fmt_bytes_short(l, sizeof(l), held));
	}
	if (live)
		printf("  warning: %" PRId64 " samples (%s) could not be "
		       "tracked until freed (live table full): counted as "
		       "freed at once, so space and objects understate live "
		       "memory; %s\n",
		       live,
		       hp_fmt_bytes(
		               b, sizeof(b),
		               pi_stat(db, p->upid, "live_table_full_bytes")),
		       h);
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

void rep_print_warnings(sqlite3 *db, const struct rd_process *p)
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
void rep_display_name(const struct rd_process *p, char *buf, size_t len)
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
	        {"exec", "after an exec (the same process, a new image)"},
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
/* A wall-clock time (ns since the epoch) as "2026-12-02 13:58:12 UTC"
 * (with the date) or "13:58:12" (without); "" when unknown. */
static const char *wall_str(char *buf, size_t len, int64_t ns, bool date)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	if (ns <= 0 || !gmtime_r(&t, &tm) ||
	    !strftime(buf, len, date ? "%Y-%m-%d %H:%M:%S UTC" : "%H:%M:%S",
	              &tm))
		buf[0] = '\0';
	return buf;
}

static void print_recorded(sqlite3 *db, const struct rd_process *p,
                           const struct session_info *si)
{
	int multi = si->nprocs > 1;
	char w0[40], w1[40];

	printf("  recorded       %s",
	       p->from_startup ? "from startup" : "attached while running");
	if (multi)
		printf(" at +%.3f s", rep_secs(p->start_ts - si->start));
	if (p->has_end && multi)
		printf(" until +%.3f s", rep_secs(p->end_ts - si->start));
	/* When, by the wall clock (to the second, as the file says it;
	 * exact for a snapshot's), then by the boot-time clock the rows
	 * use. */
	wall_str(w0, sizeof(w0), pi_wall_time_exact(db, p->start_ts), true);
	wall_str(w1, sizeof(w1),
	         p->has_end ? pi_wall_time_exact(db, p->end_ts) : 0, false);
	if (p->has_end && w0[0] && w1[0])
		printf(", %.3f s, %s to %s (boot time %.3f s to %.3f s)\n",
		       rep_secs(p->end_ts - p->start_ts), w0, w1,
		       rep_secs(p->start_ts), rep_secs(p->end_ts));
	else if (p->has_end)
		printf(", %.3f s (boot time %.3f s to %.3f s)\n",
		       rep_secs(p->end_ts - p->start_ts), rep_secs(p->start_ts),
		       rep_secs(p->end_ts));
	else
		printf(", from %s%sboot time %.3f s; no end recorded\n", w0,
		       w0[0] ? ", " : "", rep_secs(p->start_ts));
}

/* The table-full and client-error counters, zero or not. */
static void print_counters(sqlite3 *db, const struct rd_process *p)
{
	char b1[HP_FMT_BYTES_MAX], b2[HP_FMT_BYTES_MAX];

	printf("  dropped        stack table full %" PRId64 " (%s),"
	       " live table full %" PRId64 " (%s),"
	       " module table full %" PRId64 "\n",
	       pi_stat(db, p->upid, "stack_table_full"),
	       hp_fmt_bytes_short(
	               b1, sizeof(b1),
	               pi_stat(db, p->upid, "stack_table_full_bytes")),
	       pi_stat(db, p->upid, "live_table_full"),
	       hp_fmt_bytes_short(
	               b2, sizeof(b2),
	               pi_stat(db, p->upid, "live_table_full_bytes")),
	       pi_stat(db, p->upid, "module_table_full"));
	printf("  client errors  %" PRId64 " unwind errors, %" PRId64
	       " truncated stacks, %" PRId64 " reentrant calls skipped\n",
	       pi_stat(db, p->upid, "unwind_errors"),
	       pi_stat(db, p->upid, "truncated_stacks"),
	       pi_stat(db, p->upid, "reentrant_skipped"));
	/* Stacks the capture kept short, only when there are any. */
	int64_t stopped = pi_stat(db, p->upid, "unwind_stopped");
	int64_t unbounded = pi_stat(db, p->upid, "stack_unbounded");
	int64_t low = pi_stat(db, p->upid, "stack_low");
	if (stopped > 0 || unbounded > 0 || low > 0)
		printf("  short stacks   %" PRId64 " ended early (no proven"
		       " read or rule), %" PRId64 " on a stack heapprof"
		       " cannot bound (caller only), %" PRId64 " not recorded"
		       " (under 1 KiB of stack left)\n",
		       stopped, unbounded, low);
	/* Allocations before heapprof's constructor, only when there are
	 * any (a profile from before they were kept has no rows). */
	int64_t early = pi_stat(db, p->upid, "startup_recorded");
	int64_t early_missed = pi_stat(db, p->upid, "startup_missed");
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
	int64_t zero = pi_stat(db, p->upid, "zero_size_allocations");
	if (zero > 0)
		printf("  zero-size      %" PRId64 " allocations of 0 bytes"
		       " (malloc(0), new of an empty array) recorded as 0 B;"
		       " the allocator serves at least one byte each\n",
		       zero);
	int64_t sandboxed = pi_stat(db, p->upid, "sandboxed_children");
	if (sandboxed > 0)
		printf("  not followed   %" PRId64 " children: the program runs"
		       " under a seccomp filter it installed, and heapprof "
		       "makes"
		       " no system call such a filter may forbid\n",
		       sandboxed);
	if (pi_stat(db, p->upid, "control_lost") > 0)
		printf("  connection     the program closed or reused "
		       "heapprof's"
		       " connection to the collector (as daemons do): recorded"
		       " on, but tables could not grow and named snapshots"
		       " failed from then on\n");
	/* Signal handlers against the hook, only when there were any. */
	int64_t nested = pi_stat(db, p->upid, "nested_recorded");
	int64_t stale = pi_stat(db, p->upid, "stale_guards_cleared");
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
	double avg;

	if (pi_short_stacks(db, upid, &avg))
		printf("  stacks         %.1f frames deep on average:"
		       " the program was likely built without frame"
		       " pointers; use the default --unwind dwarf\n",
		       avg);
}

void rep_print_process_header(sqlite3 *db, const struct rd_process *p,
                              const struct session_info *si)
{
	printf("  command line   %s\n", p->cmdline);
	print_how(p);
	if (p->rejected_concurrent == PROF_NOT_PROFILED_GAVE_UP) {
		printf("  not profiled: it stopped waiting for the collector "
		       "(busy or stopped for over 100 ms) and ran "
		       "unprofiled\n");
		return;
	}
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
	print_recorded(db, p, si);
	printf("  exit status    ");
	if (!p->has_exit)
		printf("unknown\n");
	else if (p->exit_status > 128 && p->exit_status < 128 + 65)
		printf("%" PRId64 " (128 + signal %" PRId64 ": %s)\n",
		       p->exit_status, p->exit_status - 128,
		       strsignal((int)(p->exit_status - 128)));
	else
		printf("%" PRId64 "\n", p->exit_status);
	/* Why it may have little or nothing (an allocator of its own). */
	if (p->note && p->note[0])
		printf("  note           %s\n", p->note);
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
	       pi_stat(db, p->upid, "samples"),
	       pi_stat(db, p->upid, "frees_matched"),
	       pi_stat(db, p->upid, "reentrant_skipped"));
	print_counters(db, p);
}

/* Heaps the program registered that the session did not select. */
void rep_print_unselected(sqlite3 *db, int64_t upid)
{
	char **names;
	size_t n;

	if (pi_unselected_heaps(db, upid, &names, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		printf("%s%s", i ? ", " : "  not selected   ", names[i]);
	if (n)
		printf(" (registered by the program; --heaps or --all-heaps "
		       "records %s)\n",
		       n == 1 ? "it" : "them");
	pi_free_names(names, n);
}

void rep_print_totals(sqlite3 *db, int64_t upid, const char *heap,
                      const int64_t t[RD_NVIEWS])
{
	char b[HP_FMT_BYTES_MAX];
	int64_t iv = pi_heap_interval(db, upid, heap);

	if (iv == 1)
		printf("  heap %s (every allocation) at this dump:\n", heap);
	else if (iv > 1)
		printf("  heap %s (sampled every %s) at this dump:\n", heap,
		       hp_fmt_bytes(b, sizeof(b), (uint64_t)iv));
	else
		printf("  heap %s at this dump:\n", heap);
	for (int v = 0; v < RD_NVIEWS; v++)
		printf("    %-14s %-26s %s\n", rd_view_names[v],
		       rep_fmt_value(b, sizeof(b), (enum rd_view)v, t[v]),
		       report_view_help[v]);
}

/* ---- the process's memory beside the profile ------------------------------
 */

/*
 * Profiled heap beside the allocator's and the kernel's view (seed 002,
 * "heapprofd vs malloc_info() vs RSS"): the gaps are allocator overhead,
 * free memory it keeps, and fragmentation.
 */
void rep_print_memory(const struct pi_memory *m, int64_t space, int exact)
{
	char b[HP_FMT_BYTES_MAX];

	if (!m->have_rss && !m->have_malloc && !m->malloc_foreign &&
	    !m->cg_source[0])
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
	if (m->have_tables) {
		char o[HP_FMT_BYTES_MAX], l[128];
		int64_t theirs = m->tables > m->tables_ours
		                         ? m->tables - m->tables_ours
		                         : 0;
		snprintf(l, sizeof(l),
		         "heapprof's shared tables: %s allocated by heapprof "
		         "(charged to its cgroup), %s by the process",
		         hp_fmt_bytes_short(o, sizeof(o), m->tables_ours),
		         hp_fmt_bytes_short(b, sizeof(b), theirs));
		char t[HP_FMT_BYTES_MAX];
		printf("    %-20s %-12s %s\n", "heapprof's tables",
		       hp_fmt_bytes(t, sizeof(t), m->tables), l);
	}
	if (m->cg_source[0]) {
		char l[64];
		snprintf(l, sizeof(l), "%s", m->cg_source);
		printf("    %-20s %-12s %s\n", "memory limit",
		       m->cg_limit ? hp_fmt_bytes(b, sizeof(b), m->cg_limit)
		                   : "none",
		       m->cg_limit ? "of its memory cgroup (and ancestors)"
		                   : "its memory cgroup has none");
		printf("    %-20s %-12s %s usage%s\n", "cgroup usage",
		       hp_fmt_bytes(b, sizeof(b), m->cg_usage), l,
		       ", every process in the cgroup, page cache included");
		if (m->cg_peak)
			printf("    %-20s %s\n", "cgroup usage, peak",
			       hp_fmt_bytes(b, sizeof(b), m->cg_peak));
	}
}

/* ---- memory incidents (session/memwatch.c) ------------------------------ */

/* "64.00 MiB of its 64.00 MiB limit", or "64.00 MiB" without a limit. */
static const char *at_of_limit(char *buf, size_t len, int64_t at, int64_t limit)
{
	char a[HP_FMT_BYTES_MAX], l[HP_FMT_BYTES_MAX];
	if (limit)
		snprintf(buf, len, "%s of its %s limit",
		         hp_fmt_bytes_short(a, sizeof(a), at),
		         hp_fmt_bytes_short(l, sizeof(l), limit));
	else
		snprintf(buf, len, "%s", hp_fmt_bytes_short(a, sizeof(a), at));
	return buf;
}

/*
 * What the process's memory dumps say: the OOM kill, when the dump shown
 * is the one taken at it, and every dump taken because memory got tight
 * (--memory-dump, --pressure-dumps), with its number for --dump N.
 */
void rep_print_incidents(sqlite3 *db, const struct rd_process *p, size_t shown,
                         int64_t shown_ts)
{
	(void)shown_ts;
	struct rd_dump *d = NULL;
	size_t nd = 0;
	char b[160];
	if (rd_load_dumps(db, "report", p->upid, &d, &nd) < 0)
		return;
	for (size_t index = 1; index <= nd; index++) {
		int64_t ts = d[index - 1].ts;
		const char *r = d[index - 1].reason;
		if (strcmp(r, "memory") && strcmp(r, "pressure") &&
		    strcmp(r, "oom-kill"))
			continue;
		struct pi_memory m;
		if (pi_load_memory(db, "report", p->upid, ts, &m) < 0)
			break;
		int64_t at = m.cg_peak && !strcmp(r, "oom-kill") ? m.cg_peak
		             : m.have_rss                        ? m.rss
		                                                 : m.cg_usage;
		if (!strcmp(r, "oom-kill")) {
			if (index != shown)
				continue; /* the last dump: said when shown */
			printf("  OOM kill       killed by the OOM killer at "
			       "%s "
			       "(%s); this dump is its heap at the kill\n",
			       at_of_limit(b, sizeof(b), at, m.cg_limit),
			       m.cg_source[0] ? m.cg_source : "cgroup");
		} else {
			printf("  %s dump %-3zu%s at +%.3f s: %s %s%s\n",
			       r[0] == 'm' ? "memory  " : "pressure", index,
			       index == shown ? " (this one)" : "",
			       rep_secs(ts - p->start_ts),
			       m.have_rss ? "RSS" : "cgroup usage",
			       at_of_limit(b, sizeof(b), at, m.cg_limit),
			       r[0] == 'm' ? ""
			                   : "; its cgroup under pressure");
		}
	}
	rd_free_dumps(d, nd);
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
void rep_print_trace_info(const struct rd_process *p, const struct tr_info *t)
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
		printf(", from %+.3f s", rep_secs(t->first_ts - p->start_ts));
	printf(")");
	if (!tr_left_out(t)) {
		printf("; complete: nothing left out\n");
	} else {
		if (oneshot && t->full_ts)
			printf("; the buffer filled at %+.3f s",
			       rep_secs(t->full_ts - p->start_ts));
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
void rep_print_unknown(const struct tr_heap *h, enum rd_view v,
                       const char *what)
{
	char b[HP_FMT_BYTES_MAX];

	if (h->n && h->s[0].callsite == 0 && h->s[0].v[v])
		printf("    (%s of them without a known stack: %s)\n",
		       rep_fmt_value(b, sizeof(b), v, h->s[0].v[v]), what);
}
