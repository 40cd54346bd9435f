/*
 * The first lines of a process in `heapprof report` (issue 33): the
 * question a user runs the profiler for answered first.  The heap's peak,
 * when, and the function holding most of it; then what was left at the
 * end (leaks, at exit) and what was allocated in all (the churn), each
 * with its function.  The rest of the report shows one dump in detail.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/report.h"
#include "model/summary.h"
#include "util/human.h"

#define SUBSYS "report"

/* ", 98% in FN" when there is a function. */
static void print_where(const struct summary_part *x)
{
	if (x->fn[0] && x->bytes > 0)
		printf(", %.0f%% in %s", x->pct, x->fn);
}

void rep_print_lead(sqlite3 *db, const struct rd_stacks *s,
                    const struct rd_process *p, const struct session_info *si)
{
	char name[256], b[HP_FMT_BYTES_MAX];
	rep_display_name(p, name, sizeof(name));
	printf("Process %s (%s)\n", si->id, name);
	if (p->rejected_concurrent)
		return;
	struct summary sm;
	if (summary_of(db, SUBSYS, s, p->upid, &sm) < 0 || sm.ndumps == 0)
		return;
	if (sm.have_peak) {
		printf("  heap peak      %s at +%.3f s",
		       hp_fmt_bytes_short(b, sizeof(b), sm.peak.bytes),
		       rep_secs(sm.peak_ts - p->start_ts));
		print_where(&sm.peak);
		printf(" (--dump peak: dump %zu of %zu)\n", sm.peak_dump,
		       sm.ndumps);
	}
	if (!sm.end_at_peak) {
		const char *when = p->has_exit ? "left at exit"
		                   : !strcmp(sm.end_reason, "exec")
		                           ? "left at exec"
		                           : "live at end";
		printf("  %-14s %s in %" PRId64 " object%s", when,
		       hp_fmt_bytes_short(b, sizeof(b), sm.end.bytes),
		       sm.end.objects, sm.end.objects == 1 ? "" : "s");
		print_where(&sm.end);
		putchar('\n');
	}
	printf("  churned        %s in %" PRId64 " allocation%s (%s)",
	       hp_fmt_bytes_short(b, sizeof(b), sm.all.bytes), sm.all.objects,
	       sm.all.objects == 1 ? "" : "s",
	       sm.end_at_peak ? "up to the peak: every dump is at it"
	                      : "all, freed or not");
	print_where(&sm.all);
	putchar('\n');
}
