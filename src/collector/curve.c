/*
 * Memory over time (issue 33): a process's heaps and RSS, sampled by the
 * session about ten times a second without a dump, written as Perfetto's
 * process counters (store/writer_counters.c), so every profile has a
 * curve.
 *
 * The heaps' live bytes are summed from the stack table (what each stack
 * allocated minus what it freed, charged bytes: estimates when sampling),
 * read as a dump reads it, from our own mapping and geometry.  Nothing
 * touches the target.  A walk reads every stack in use: on a table of a
 * million stacks it takes milliseconds, so the next one waits a hundred
 * times as long as this one took (the collector's time stays under 1%).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/collector.h"
#include "util/clock.h"
#include "util/err.h"

/* Heaps with a curve of their own (the others count in "mem.heap"). */
#define CURVE_HEAPS 8
#define CURVE_NAME  (HP_HEAP_NAME_MAX + 16)

struct curve_job {
	struct profile *p;
	int64_t upid;
	uint64_t ts;
	size_t n;
	struct prof_counter v[CURVE_HEAPS + 2];
	char names[CURVE_HEAPS][CURVE_NAME];
};

static int curve_run(void *arg)
{
	struct curve_job *j = arg;
	return profile_write_counters(j->p, j->upid, j->ts, j->v, j->n);
}

static void curve_fin(void *arg, int rc)
{
	(void)rc; /* the writer keeps and says its first error */
	free(arg);
}

/* The name of heap h of t's first region as the client published it, if
 * the session profiles that heap; false if not. */
static bool heap_name(const struct collector *c, const struct target *t,
                      uint32_t h, char *out, size_t len)
{
	const struct hp_region *r = &t->reg[0].region;
	char name[HP_HEAP_NAME_MAX];
	if (h == 0) {
		snprintf(name, sizeof(name), "libc.malloc");
	} else {
		if (h >= r->heaps_cap ||
		    atomic_load_explicit(&r->heaps[h].ready,
		                         memory_order_acquire) != 1)
			return false;
		memcpy(name, r->heaps[h].name, sizeof(name));
		name[sizeof(name) - 1] = '\0';
		if (!name[0])
			return false;
	}
	if (!hp_heap_select_interval(c->opts.heap_select, c->opts.nheap_select,
	                             c->opts.config_flags & HP_CFG_ALL_HEAPS,
	                             c->opts.interval, name))
		return false;
	snprintf(out, len, "mem.heap.%s", name);
	return true;
}

int collector_curve(struct collector *c, struct target *t, uint64_t ts,
                    uint64_t rss, bool have_rss)
{
	if (t->retired || !t->nreg || !c->profile)
		return 0;
	uint64_t t0 = hp_clock_ns(CLOCK_MONOTONIC);
	uint64_t live[CURVE_HEAPS] = {0}, other = 0;
	bool seen[CURVE_HEAPS] = {false};
	for (int k = 0; k < t->nreg; k++) {
		const struct hp_region *r = &t->reg[k].region;
		uint64_t used = atomic_load_explicit(&r->hdr->stacks_used,
		                                     memory_order_acquire);
		if (used > r->stacks_cap)
			used = r->stacks_cap;
		for (uint64_t i = 0; i < used; i++) {
			const struct hp_stack_v1 *s = &r->stacks[i];
			if (!atomic_load_explicit(&s->ready,
			                          memory_order_acquire))
				continue;
			uint64_t a = atomic_load_explicit(&s->alloc_bytes,
			                                  memory_order_relaxed);
			uint64_t f = atomic_load_explicit(&s->free_bytes,
			                                  memory_order_relaxed);
			uint64_t v = a > f ? a - f : 0;
			uint32_t h = s->heap_id;
			if (h < CURVE_HEAPS) {
				live[h] += v;
				seen[h] = true;
			} else {
				other += v;
			}
		}
	}
	struct curve_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->p = c->profile;
	j->upid = t->upid;
	j->ts = ts;
	uint64_t total = 0;
	for (uint32_t h = 0; h < CURVE_HEAPS; h++) {
		if (!seen[h] ||
		    !heap_name(c, t, h, j->names[h], sizeof(j->names[h])))
			continue;
		total += live[h];
		j->v[j->n++] = (struct prof_counter){
		        .name = j->names[h],
		        .unit = "bytes",
		        .description =
		                "live bytes of this heap (allocated, not "
		                "freed; estimated when sampled)",
		        .value = (double)live[h]};
	}
	j->v[j->n++] = (struct prof_counter){
	        .name = "mem.heap",
	        .unit = "bytes",
	        .description = "live bytes of every heap profiled",
	        .value = (double)(total + other)};
	if (have_rss)
		j->v[j->n++] = (struct prof_counter){
		        .name = "mem.rss",
		        .unit = "bytes",
		        .description = "resident memory, heapprof's tables "
		                       "left out",
		        .value = (double)rss};
	uint64_t took = hp_clock_ns(CLOCK_MONOTONIC) - t0;
	t->curve_gap_ns = 100 * took;
	return jobq_submit(&c->wq, curve_run, curve_fin, NULL, j, sizeof(*j),
	                   0);
}
