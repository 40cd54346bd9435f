/*
 * What `heapprof record` says when it ends on a terminal (issue 33, item
 * 7): per process, the heap's peak and in which function most of it,
 * what it held at the end (left at exit when the process exited) and
 * where, and what it allocated in all (model/summary.h, as `heapprof
 * report` leads with it); then the commands to run next.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/record_summary.h"
#include "model/state.h"
#include "model/summary.h"
#include "store/reader.h"
#include "util/clock.h"
#include "util/human.h"

#define SUBSYS    "record"
#define MAX_PROCS 4 /* processes said one by one; the rest counted */

static void say_process(sqlite3 *db, const struct rd_stacks *s,
                        const struct rd_process *p)
{
	struct summary sm;
	char a[HP_FMT_BYTES_MAX], b[HP_FMT_BYTES_MAX];
	if (summary_of(db, SUBSYS, s, p->upid, &sm) < 0 || !sm.ndumps)
		return;
	fprintf(stderr, "heapprof:   pid %lld (%s): ", (long long)p->pid,
	        hp_base_name(p->name));
	if (sm.have_peak) {
		fprintf(stderr, "peak %s at +%.2f s",
		        hp_fmt_bytes_short(a, sizeof(a), sm.peak.bytes),
		        (double)(sm.peak_ts - p->start_ts) / 1e9);
		if (sm.peak.fn[0] && sm.peak.bytes > 0)
			fprintf(stderr, ", %.0f%% in %s", sm.peak.pct,
			        sm.peak.fn);
		if (!sm.end_at_peak)
			fputs("; ", stderr);
	}
	if (!sm.end_at_peak) {
		fprintf(stderr, "%s %s",
		        hp_fmt_bytes_short(a, sizeof(a), sm.end.bytes),
		        p->has_exit                      ? "left at exit"
		        : !strcmp(sm.end_reason, "exec") ? "live when it exec'd"
		                                         : "live at the end");
		if (sm.end.fn[0] && sm.end.bytes > 0)
			fprintf(stderr, ", %.0f%% in %s", sm.end.pct,
			        sm.end.fn);
	}
	fprintf(stderr, "; %s allocated %s\n",
	        hp_fmt_bytes_short(b, sizeof(b), sm.all.bytes),
	        sm.end_at_peak ? "up to it" : "in all");
}

void record_summary(const char *path)
{
	sqlite3 *db = rd_open(path, SUBSYS);
	struct rd_stacks s;
	struct rd_process *procs = NULL;
	size_t n = 0;
	if (!db)
		return;
	if (rd_load_stacks(db, SUBSYS, &s) < 0) {
		sqlite3_close(db);
		return;
	}
	if (rd_load_processes(db, SUBSYS, &procs, &n) == 0) {
		/* The processes that allocated the most first: with a shim
		 * or a wrapper script, the program is not the first one. */
		struct ranked {
			size_t i;
			int64_t alloc;
		} *r = calloc(n ? n : 1, sizeof(*r));
		size_t nr = 0;
		for (size_t i = 0; r && i < n; i++) {
			struct rd_dump *dumps = NULL;
			size_t nd = 0;
			int64_t tot[RD_NVIEWS] = {0};
			if (procs[i].rejected_concurrent ||
			    rd_load_dumps(db, SUBSYS, procs[i].upid, &dumps,
			                  &nd) < 0 ||
			    !nd ||
			    state_totals_at(db, SUBSYS, procs[i].upid,
			                    dumps[nd - 1].ts, tot) < 0) {
				rd_free_dumps(dumps, nd);
				continue;
			}
			rd_free_dumps(dumps, nd);
			r[nr++] = (struct ranked){i, tot[RD_ALLOC_SPACE]};
		}
		for (size_t k = 1; k < nr; k++) /* largest first, stable */
			for (size_t j = k; j > 0 && r[j].alloc > r[j - 1].alloc;
			     j--) {
				struct ranked t = r[j];
				r[j] = r[j - 1];
				r[j - 1] = t;
			}
		for (size_t k = 0; k < nr && k < MAX_PROCS; k++)
			say_process(db, &s, &procs[r[k].i]);
		if (nr > MAX_PROCS)
			fprintf(stderr,
			        "heapprof:   and %zu more process%s (heapprof"
			        " report lists them)\n",
			        nr - MAX_PROCS,
			        nr - MAX_PROCS == 1 ? "" : "es");
		free(r);
		rd_free_processes(procs, n);
	}
	rd_free_stacks(&s);
	sqlite3_close(db);
	fprintf(stderr,
	        "heapprof: next: heapprof report %s; heapprof flamegraph %s\n",
	        path, path);
}
