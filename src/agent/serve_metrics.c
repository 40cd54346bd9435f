/*
 * GET /metrics of `heapprof serve` (serve_int.h, docs/FLEET.md "What each
 * request reads"): for each process served, one top_read of its shared
 * regions (every heap, the client's counters, memory), turned into the
 * values export/prometheus.c writes.  A reader is kept per process across
 * requests for its cache of function names, keyed by pid and start time.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/serve_int.h"
#include "agent/targets.h"
#include "inspect/top_read.h"
#include "export/prometheus.h"
#include "util/proc.h"

/* The reader of pid, kept for the next request (its name cache); the
 * readers of processes no longer targets (or whose pid now names
 * another process) are freed first. */
static struct top_reader *reader_of(struct serve_server *s, pid_t pid,
                                    const pid_t *live, size_t nlive)
{
	for (size_t i = 0; i < s->nslots;) {
		bool keep = false;
		for (size_t j = 0; j < nlive; j++)
			keep |= live[j] == s->slots[i].pid;
		if (keep &&
		    proc_start_time(s->slots[i].pid) == s->slots[i].start) {
			i++;
			continue;
		}
		top_reader_free(s->slots[i].r);
		s->slots[i] = s->slots[--s->nslots];
	}
	for (size_t i = 0; i < s->nslots; i++)
		if (s->slots[i].pid == pid)
			return s->slots[i].r;
	if (s->nslots == SERVE_MAX_TARGETS)
		return NULL;
	struct top_reader *r = top_reader_new(pid);
	if (!r)
		return NULL;
	top_reader_all_heaps(r);
	s->slots[s->nslots++] = (struct reader_slot){
	        .pid = pid, .start = proc_start_time(pid), .r = r};
	return r;
}

/* The client's counters, by what they mean to a scraper: samples the
 * profile lacks (dropped), and what went wrong recording the others. */
static const struct counter_series {
	int ctr;
	const char *label;
} dropped[] =
        {
                {HP_CTR_REENTRANT, "reentrant"},
                {HP_CTR_STACK_LOW, "stack_low"},
                {HP_CTR_STARTUP_MISSED, "startup_missed"},
                {HP_CTR_LIVE_FULL, "live_table_full"},
},
  errors[] = {
          {HP_CTR_UNWIND_ERRORS, "unwind_failed"},
          {HP_CTR_UNWIND_STOPPED, "unwind_stopped"},
          {HP_CTR_TRUNCATED_STACKS, "stack_truncated"},
          {HP_CTR_STACK_FULL, "stack_table_full"},
          {HP_CTR_MODULE_FULL, "module_table_full"},
          {HP_CTR_CONTROL_LOST, "control_lost"},
};
#define NDROPPED (sizeof(dropped) / sizeof(dropped[0]))
#define NERRORS  (sizeof(errors) / sizeof(errors[0]))

/* One process: its reading, and the values written of it. */
struct reading {
	pid_t pid;
	char comm[64];
	struct top_reader *r;
	struct top_reading t;
	bool ok;
	struct prom_heap *heaps;
	struct prom_counter dropped[NDROPPED], errors[NERRORS];
	struct prom_func *funcs;
	size_t nfuncs;
};

static int64_t heap_value(const struct top_heap *h, enum prom_heap_metric m)
{
	const struct top_counts *c = &h->total;
	switch (m) {
	case PROM_LIVE_BYTES:
		return top_value(c, TOP_SPACE);
	case PROM_LIVE_OBJECTS:
		return top_value(c, TOP_OBJECTS);
	case PROM_ALLOC_BYTES:
		return (int64_t)c->alloc_bytes;
	case PROM_FREED_BYTES:
		return (int64_t)c->free_bytes;
	case PROM_ALLOC_OBJECTS:
		return top_value(c, TOP_ALLOC_OBJECTS);
	case PROM_FREED_OBJECTS:
		return top_value(c, TOP_ALLOC_OBJECTS) -
		       top_value(c, TOP_OBJECTS);
	case PROM_INTERVAL:
		return (int64_t)h->interval;
	case PROM_NHEAP_METRICS:
		break;
	}
	return 0;
}

static int by_heap_live_desc(const void *a, const void *b)
{
	const struct top_func *x = a, *y = b;
	if (x->heap != y->heap)
		return x->heap < y->heap ? -1 : 1;
	int64_t lx = top_value(&x->c, TOP_SPACE);
	int64_t ly = top_value(&y->c, TOP_SPACE);
	return lx < ly ? 1 : lx > ly ? -1 : 0;
}

static const char *heap_name(const struct top_reading *t, uint32_t id)
{
	for (size_t i = 0; i < t->nheaps; i++)
		if (t->heaps[i].id == id)
			return t->heaps[i].name;
	return "?";
}

/* The top_n functions of each heap of g by live bytes, into g->funcs
 * (none when out of memory). */
static void pick_functions(struct reading *g, long top_n)
{
	if (!g->ok || !g->t.nfuncs)
		return;
	struct top_func *fs = malloc(g->t.nfuncs * sizeof(*fs));
	g->funcs = malloc(g->t.nfuncs * sizeof(*g->funcs));
	if (!fs || !g->funcs) {
		free(fs);
		free(g->funcs);
		g->funcs = NULL;
		return;
	}
	memcpy(fs, g->t.funcs, g->t.nfuncs * sizeof(*fs));
	qsort(fs, g->t.nfuncs, sizeof(*fs), by_heap_live_desc);
	long k = 0;
	for (size_t i = 0; i < g->t.nfuncs; i++) {
		k = i && fs[i].heap != fs[i - 1].heap ? 0 : k;
		int64_t v = top_value(&fs[i].c, TOP_SPACE);
		if (k >= top_n || v <= 0)
			continue;
		k++;
		g->funcs[g->nfuncs++] = (struct prom_func){
		        .heap = heap_name(&g->t, fs[i].heap),
		        .function = top_name(g->r, fs[i].name),
		        .live_bytes = v};
	}
	free(fs);
}

/* g's values as prometheus.h takes them.  0 or -1 (out of memory). */
static int to_prom(struct reading *g, long top_n, struct prom_process *pp)
{
	*pp = (struct prom_process){
	        .pid = g->pid, .comm = g->comm, .ok = g->ok};
	if (!g->ok)
		return 0;
	g->heaps = calloc(g->t.nheaps ? g->t.nheaps : 1, sizeof(*g->heaps));
	if (!g->heaps)
		return -1;
	for (size_t h = 0; h < g->t.nheaps; h++) {
		g->heaps[h].name = g->t.heaps[h].name;
		for (int m = 0; m < PROM_NHEAP_METRICS; m++)
			g->heaps[h].v[m] = heap_value(&g->t.heaps[h],
			                              (enum prom_heap_metric)m);
	}
	for (size_t k = 0; k < NDROPPED; k++)
		g->dropped[k] = (struct prom_counter){
		        dropped[k].label,
		        (int64_t)g->t.counters[dropped[k].ctr]};
	for (size_t k = 0; k < NERRORS; k++)
		g->errors[k] = (struct prom_counter){
		        errors[k].label, (int64_t)g->t.counters[errors[k].ctr]};
	pick_functions(g, top_n);
	pp->heaps = g->heaps;
	pp->nheaps = g->t.nheaps;
	pp->have_rss = g->t.have_rss;
	pp->rss = g->t.rss;
	pp->rss_peak = g->t.rss_peak;
	pp->limit = g->t.limit;
	pp->tables = g->t.tables;
	pp->dropped = g->dropped;
	pp->ndropped = NDROPPED;
	pp->errors = g->errors;
	pp->nerrors = NERRORS;
	pp->funcs = g->funcs;
	pp->nfuncs = g->nfuncs;
	return 0;
}

enum MHD_Result serve_metrics_answer(struct serve_server *s,
                                     struct MHD_Connection *conn)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = targets_list(&s->c, t);
	struct reading *g = calloc(n ? n : 1, sizeof(*g));
	struct prom_process *pp = calloc(n ? n : 1, sizeof(*pp));
	char *body = NULL;
	size_t len = 0;
	FILE *f = g && pp ? open_memstream(&body, &len) : NULL;
	int err = f ? 0 : -1;

	for (size_t i = 0; !err && i < n; i++) {
		char why[256];
		g[i].pid = t[i];
		proc_comm(t[i], g[i].comm, sizeof(g[i].comm));
		g[i].r = reader_of(s, t[i], t, n);
		g[i].ok = g[i].r &&
		          top_read(g[i].r, &g[i].t, why, sizeof(why)) == 0;
	}
	for (size_t i = 0; !err && i < n; i++)
		err = to_prom(&g[i], s->c.top_n, &pp[i]);
	if (!err) {
		struct prom_agent a = {.requests = s->requests,
		                       .bad_requests = s->bad_requests};
		pthread_mutex_lock(&s->mu);
		a.connections_cut = s->cut;
		pthread_mutex_unlock(&s->mu);
		prom_write(f, &a, pp, n);
	}
	for (size_t i = 0; g && i < n; i++) {
		if (g[i].ok)
			top_reading_free(&g[i].t);
		free(g[i].heaps);
		free(g[i].funcs);
	}
	free(g);
	free(pp);
	if (f && fclose(f) != 0)
		err = -1;
	if (err) {
		free(body);
		return serve_reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                        "out of memory\n");
	}
	return serve_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4", body,
	                   len);
}
