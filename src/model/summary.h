/*
 * The first answer about a process's heap (issue 33): its peak and the
 * function holding most of it, what was left at the end and where, and
 * what was allocated in all (churned) and where.  Every heap together, in
 * charged bytes, from the heap model's states (state.h) at the peak dump
 * (the last one at the peak: peaks only rise) and at the last dump.
 * `heapprof report` leads with it; `heapprof record` says it when it ends.
 */
#ifndef HEAPPROF_MODEL_SUMMARY_H
#define HEAPPROF_MODEL_SUMMARY_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/reader.h"

/* A heap state's total in one view and the function with the largest
 * self share of it. */
struct summary_part {
	int64_t bytes, objects;
	char fn[256]; /* "" when none */
	double pct;   /* fn's share of bytes, 0..100 */
};

struct summary {
	bool have_peak;   /* a dump at the peak (tracked, not --no-peak) */
	bool end_at_peak; /* the last dump is at the peak (--dump-at-max) */
	size_t peak_dump, end_dump; /* 1-based, of ndumps */
	size_t ndumps;
	int64_t peak_ts;          /* when the peak was reached (boot time ns) */
	struct summary_part peak; /* space at the peak */
	struct summary_part end;  /* space at the last dump */
	struct summary_part all;  /* alloc_space up to the last dump */
	const char *end_reason;   /* the last dump's reason (copied below) */
	char end_reason_buf[32];
};

/*
 * Fills *out for process upid.  0 (ndumps 0: no dumps, nothing else
 * set), or a negative errno (message printed).
 */
int summary_of(sqlite3 *db, const char *subsys, const struct rd_stacks *s,
               int64_t upid, struct summary *out);

#endif
