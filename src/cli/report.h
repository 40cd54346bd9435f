/*
 * The parts of `heapprof report` (cmd_report.c): the head of each process
 * (report_header.c) and the tables of functions (report_table.c).
 */
#ifndef HEAPPROF_CLI_REPORT_H
#define HEAPPROF_CLI_REPORT_H

#include <stdbool.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "model/funcs.h"
#include "analysis/aggregate.h"
#include "store/procinfo.h"
#include "store/reader.h"
#include "store/trace_read.h"

#define SUBSYS "report"

/* What each view holds, as the report says it. */
extern const char *const report_view_help[RD_NVIEWS];

/* What the report of one process needs of the whole profile. */
struct session_info {
	size_t nprocs; /* processes in the profile */
	char id[48];   /* the process's id (procid.h) */
	int64_t start; /* earliest start of profiling: the session's +0 */
};

/* ---- formatting (report_table.c) ---------------------------------------- */

char *rep_fmt_value(char *buf, size_t len, enum rd_view v, int64_t x);
char *rep_fmt_pct(char *buf, size_t len, int64_t part, int64_t total);
/* Seconds from ns, for boot-time timestamps and durations. */
double rep_secs(int64_t ns);
/* Print s cut to at most w bytes (with "..."), then pad to w if pad. */
void rep_put_cut(const char *s, int w, int pad);

/* ---- tables of functions (report_table.c) ------------------------------- */

/*
 * A table of functions: the value column (view v, headed col), an optional
 * second value column (view v2 >= 0 from fn->self2, headed col2; self
 * tables only), each row's share of total, and for self tables the call
 * path of each entry's heaviest stack.
 */
struct rep_table {
	const char *heading; /* printed after a blank line */
	enum rd_view v;
	const char *col;
	int v2;
	const char *col2;
	int64_t total;
	long top;
	int self;
};

/* funcs_build, saying why it failed.  0 or -1. */
/* --callers / --callees glob: the stacks of leaves through the functions
 * glob matches, merged at them (model/focus.h), as an indented tree, at
 * most top children a node.  0 or -ENOMEM. */
int rep_print_focus(const struct rd_stacks *s, const struct rd_sample *leaves,
                    size_t n, enum rd_view v, int64_t heap_total,
                    const char *glob, bool callers, long top);

int rep_build_funcs(struct funcs *g, const struct rd_stacks *s,
                    const struct rd_sample *leaves, size_t n, enum rd_view v,
                    int v2);
void rep_print_table(const struct rd_stacks *s, struct funcs *g,
                     const struct rep_table *t);
/* "Top N by self|inclusive VIEW" of g. */
void rep_print_top(const struct rd_stacks *s, struct funcs *g, enum rd_view v,
                   int64_t total, long top, int self);
/* The top functions of h by view v, with v2 beside it.  0 or -1. */
int rep_print_trace_top(const struct rd_stacks *s, const struct tr_heap *h,
                        const char *heading, enum rd_view v, const char *col,
                        enum rd_view v2, const char *col2, long top);

/* ---- the head of a process (report_header.c) ---------------------------- */

/*
 * The name a process had when it was recorded, as the report shows it:
 * without its directory, and whole where the kernel cut it to 15 bytes.
 */
void rep_display_name(const struct rd_process *p, char *buf, size_t len);
/* Command line, how and when it was recorded, counters (after the
 * "Process" line and the lead). */
void rep_print_process_header(sqlite3 *db, const struct rd_process *p,
                              const struct session_info *si);
/* ---- the lead (report_lead.c) ------------------------------------------ */
/* "Process ID (NAME)", then the first answer (model/summary.h): the heap's
 * peak and where, what was left at the end and where, what was churned. */
void rep_print_lead(sqlite3 *db, const struct rd_stacks *s,
                    const struct rd_process *p, const struct session_info *si);
/* Warnings from its counters and how it ended. */
void rep_print_warnings(sqlite3 *db, const struct rd_process *p);
/* Heaps the program registered that the session did not select. */
void rep_print_unselected(sqlite3 *db, int64_t upid);
/* A heap's totals in the four views at the dump. */
void rep_print_totals(sqlite3 *db, int64_t upid, const char *heap,
                      const int64_t t[RD_NVIEWS]);
/* Profiled heap beside the allocator's and the kernel's view. */
void rep_print_memory(const struct pi_memory *m, int64_t space, int exact);
/* The OOM kill (when dump `shown` is the one at it) and every memory or
 * pressure dump of the process, with its number (docs/INCIDENTS.md). */
void rep_print_incidents(sqlite3 *db, const struct rd_process *p, size_t shown,
                         int64_t shown_ts);
/* The trace line of the header, and what it means for the numbers. */
void rep_print_trace_info(const struct rd_process *p, const struct tr_info *t);
/* The blocks of h without a known stack, if any. */
void rep_print_unknown(const struct tr_heap *h, enum rd_view v,
                       const char *what);

#endif
