/*
 * heapprof's metrics in Prometheus' text exposition format (version
 * 0.0.4), as `heapprof serve` answers /metrics (docs/FLEET.md): every
 * metric with its # HELP and # TYPE, per process labelled pid and comm,
 * and heap for what is per heap.  A pure function of the values given:
 * the caller reads the processes (src/agent/serve_metrics.c), this file
 * only writes them.
 *
 * Label values are written as the format quotes them, and bytes that are
 * not UTF-8 (a command name cut in the middle of a character) as U+FFFD:
 * Prometheus refuses a whole scrape over one such label.
 */
#ifndef HEAPPROF_EXPORT_PROMETHEUS_H
#define HEAPPROF_EXPORT_PROMETHEUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The series of each heap, in the order they are written. */
enum prom_heap_metric {
	PROM_LIVE_BYTES,
	PROM_LIVE_OBJECTS,
	PROM_ALLOC_BYTES,
	PROM_FREED_BYTES,
	PROM_ALLOC_OBJECTS,
	PROM_FREED_OBJECTS,
	PROM_INTERVAL, /* mean bytes between samples */
	PROM_NHEAP_METRICS
};

struct prom_heap {
	const char *name;
	int64_t v[PROM_NHEAP_METRICS];
};

/* One series of a labelled counter (reason="...", error="..."). */
struct prom_counter {
	const char *label;
	int64_t value;
};

/* One heapprof_function_live_bytes series. */
struct prom_func {
	const char *heap, *function;
	int64_t live_bytes;
};

struct prom_process {
	pid_t pid;
	const char *comm;
	/* Whether its heap could be read: else only counted in
	 * heapprof_targets, and nothing below is written. */
	bool ok;
	const struct prom_heap *heaps;
	size_t nheaps;
	bool have_rss;
	uint64_t rss, rss_peak;
	uint64_t limit;  /* 0: none (no series) */
	uint64_t tables; /* heapprof's own tables; 0: no series */
	/* heapprof_samples_dropped_total by reason, heapprof_client_errors_
	 * total by error, in the order given */
	const struct prom_counter *dropped, *errors;
	size_t ndropped, nerrors;
	/* written as given: the caller chooses and orders them */
	const struct prom_func *funcs;
	size_t nfuncs;
};

/* The agent's own counters. */
struct prom_agent {
	uint64_t requests, bad_requests, connections_cut;
};

/* The whole exposition of a and the n processes p into f. */
void prom_write(FILE *f, const struct prom_agent *a,
                const struct prom_process *p, size_t n);

#endif
