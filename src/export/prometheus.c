/*
 * heapprof's metrics in Prometheus' text format (prometheus.h).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "export/prometheus.h"

/* The length of the valid UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_len(const unsigned char *p)
{
	size_t n = p[0] < 0x80                             ? 1
	           : (p[0] & 0xe0) == 0xc0 && p[0] >= 0xc2 ? 2
	           : (p[0] & 0xf0) == 0xe0                 ? 3
	           : (p[0] & 0xf8) == 0xf0 && p[0] <= 0xf4 ? 4
	                                                   : 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3 &&
	    ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
		return 0; /* overlong, or a surrogate */
	if (n == 4 &&
	    ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)))
		return 0; /* overlong, or past U+10FFFF */
	return n;
}

/* A label value as the exposition format quotes it.  Prometheus refuses
 * a whole scrape over one label that is not UTF-8 (a command name cut at
 * 15 bytes in the middle of a character): such bytes become U+FFFD. */
static void put_label(FILE *f, const char *v)
{
	const unsigned char *p = (const unsigned char *)v;
	while (*p) {
		size_t n = utf8_len(p);
		if (!n) {
			fputs("\xef\xbf\xbd", f);
			p++;
		} else if (*p == '\\' || *p == '"') {
			fputc('\\', f);
			fputc(*p++, f);
		} else if (*p == '\n') {
			fputs("\\n", f);
			p++;
		} else {
			fwrite(p, 1, n, f);
			p += n;
		}
	}
}

/* {pid="..",comm=".."[,heap=".."] and no closing brace. */
static void labels_open(FILE *f, const struct prom_process *g, const char *heap)
{
	fprintf(f, "{pid=\"%d\",comm=\"", (int)g->pid);
	put_label(f, g->comm);
	fputc('"', f);
	if (heap) {
		fputs(",heap=\"", f);
		put_label(f, heap);
		fputc('"', f);
	}
}

static void series(FILE *f, const char *name, const struct prom_process *g,
                   const char *heap, const char *extra_key,
                   const char *extra_val, int64_t v)
{
	fputs(name, f);
	labels_open(f, g, heap);
	if (extra_key) {
		fprintf(f, ",%s=\"", extra_key);
		put_label(f, extra_val);
		fputc('"', f);
	}
	fprintf(f, "} %" PRId64 "\n", v);
}

static void help(FILE *f, const char *name, const char *type, const char *text)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static const struct metric {
	const char *name, *type, *help;
	enum prom_heap_metric m;
} heap_metrics[] = {
        {"heapprof_live_bytes", "gauge",
         "Bytes of the heap live now (estimated for sampled heaps).",
         PROM_LIVE_BYTES},
        {"heapprof_live_objects", "gauge",
         "Objects of the heap live now (estimated for sampled heaps).",
         PROM_LIVE_OBJECTS},
        {"heapprof_allocated_bytes_total", "counter",
         "Bytes allocated since the session attached.", PROM_ALLOC_BYTES},
        {"heapprof_freed_bytes_total", "counter",
         "Bytes freed since the session attached.", PROM_FREED_BYTES},
        {"heapprof_allocated_objects_total", "counter",
         "Objects allocated since the session attached.", PROM_ALLOC_OBJECTS},
        {"heapprof_freed_objects_total", "counter",
         "Objects freed since the session attached.", PROM_FREED_OBJECTS},
        {"heapprof_sampling_interval_bytes", "gauge",
         "Mean bytes between samples (1: every allocation).", PROM_INTERVAL},
};

static void put_counters(FILE *f, const struct prom_process *g, size_t n,
                         const char *name, const char *key, bool errors)
{
	for (size_t i = 0; i < n; i++) {
		const struct prom_counter *cs =
		        errors ? g[i].errors : g[i].dropped;
		size_t ncs = errors ? g[i].nerrors : g[i].ndropped;
		for (size_t k = 0; g[i].ok && k < ncs; k++)
			series(f, name, &g[i], NULL, key, cs[k].label,
			       cs[k].value);
	}
}

/* The process metrics (no heap label): RSS, its peak, the limit. */
static const struct process_metric {
	const char *name, *help;
	size_t at;   /* offsetof the value in struct prom_process */
	bool by_rss; /* there when have_rss; else when not 0 */
} process_metrics[] = {
        {"heapprof_resident_bytes", "Resident set size of the process.",
         offsetof(struct prom_process, rss), true},
        {"heapprof_resident_peak_bytes",
         "Peak resident set size of the process.",
         offsetof(struct prom_process, rss_peak), true},
        {"heapprof_memory_limit_bytes",
         "Memory limit of the process's cgroup (absent: none).",
         offsetof(struct prom_process, limit), false},
        {"heapprof_tables_bytes",
         "heapprof's own shared tables of the process, in memory (mapped "
         "in it, part of its resident set).",
         offsetof(struct prom_process, tables), false},
};

static void put_process(FILE *f, const struct prom_process *g, size_t n)
{
	for (size_t m = 0;
	     m < sizeof(process_metrics) / sizeof(process_metrics[0]); m++) {
		const struct process_metric *pm = &process_metrics[m];
		help(f, pm->name, "gauge", pm->help);
		for (size_t i = 0; i < n; i++) {
			uint64_t v;
			memcpy(&v, (const char *)&g[i] + pm->at, sizeof(v));
			if (g[i].ok && (pm->by_rss ? g[i].have_rss : v != 0))
				series(f, pm->name, &g[i], NULL, NULL, NULL,
				       (int64_t)v);
		}
	}
	help(f, "heapprof_samples_dropped_total", "counter",
	     "Samples the profile lacks, by reason (live_table_full: "
	     "recorded, their free not tracked).");
	put_counters(f, g, n, "heapprof_samples_dropped_total", "reason",
	             false);
	help(f, "heapprof_client_errors_total", "counter",
	     "Samples recorded with a stack cut short or charged to an "
	     "overflow entry, and other client errors, by error.");
	put_counters(f, g, n, "heapprof_client_errors_total", "error", true);
}

void prom_write(FILE *f, const struct prom_agent *a,
                const struct prom_process *g, size_t n)
{
	size_t nok = 0;
	for (size_t i = 0; i < n; i++)
		nok += g[i].ok;
	help(f, "heapprof_targets", "gauge",
	     "Processes asked for that run now.");
	fprintf(f, "heapprof_targets %zu\n", n);
	help(f, "heapprof_profiled", "gauge",
	     "Processes whose heap could be read.");
	fprintf(f, "heapprof_profiled %zu\n", nok);
	help(f, "heapprof_http_requests_total", "counter", "Requests served.");
	fprintf(f, "heapprof_http_requests_total %" PRIu64 "\n", a->requests);
	help(f, "heapprof_http_bad_requests_total", "counter",
	     "Requests answered 4xx.");
	fprintf(f, "heapprof_http_bad_requests_total %" PRIu64 "\n",
	        a->bad_requests);
	help(f, "heapprof_http_connections_cut_total", "counter",
	     "Connections closed for taking too long to send a request.");
	fprintf(f, "heapprof_http_connections_cut_total %" PRIu64 "\n",
	        a->connections_cut);
	for (size_t m = 0; m < sizeof(heap_metrics) / sizeof(heap_metrics[0]);
	     m++) {
		help(f, heap_metrics[m].name, heap_metrics[m].type,
		     heap_metrics[m].help);
		for (size_t i = 0; i < n; i++)
			for (size_t h = 0; g[i].ok && h < g[i].nheaps; h++)
				series(f, heap_metrics[m].name, &g[i],
				       g[i].heaps[h].name, NULL, NULL,
				       g[i].heaps[h].v[heap_metrics[m].m]);
	}
	put_process(f, g, n);
	help(f, "heapprof_function_live_bytes", "gauge",
	     "Live bytes allocated by the function (the allocator's caller), "
	     "the top N of each process and heap.");
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; g[i].ok && k < g[i].nfuncs; k++)
			series(f, "heapprof_function_live_bytes", &g[i],
			       g[i].funcs[k].heap, "function",
			       g[i].funcs[k].function,
			       g[i].funcs[k].live_bytes);
}
