/*
 * Operations on a v1 region: the collector plans and formats it, the client
 * binds to it and inserts into its tables, the collector reads it.  All
 * table operations are lock-free and async-signal-safe: they never allocate,
 * never block and do a bounded amount of work.
 */
#ifndef HEAPPROF_REGION_H
#define HEAPPROF_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout/layout_v1.h"

/* A bound region: pointers and capacities, checked against region_size. */
struct hp_region {
	uint8_t *base;
	uint64_t size;
	struct hp_header_v1 *hdr;
	_Atomic uint64_t *stack_index;
	uint64_t stack_index_cap; /* power of two */
	struct hp_stack_v1 *stacks;
	uint64_t stacks_cap;
	uint64_t *frames;
	uint64_t frames_cap;
	_Atomic uint64_t *live_keys;
	struct hp_live_v1 *live_values;
	uint64_t live_cap; /* power of two, multiple of HP_LIVE_BUCKET */
	_Atomic uint8_t *live_fill; /* one per bucket */
	bool use_fill; /* off at interval 1, where every free finds its block */
	struct hp_module_v1 *modules;
	uint64_t modules_cap;
	char *strings;
	uint64_t strings_cap;
	struct hp_heap_v1 *heaps;
	uint64_t heaps_cap;
};

struct hp_config {
	uint64_t sampling_interval;
	uint32_t unwind_mode;
	uint32_t max_frames;
	uint64_t session_id;
	uint64_t heap_enable_mask;
};

/* Smallest region region_format accepts. */
#define HP_REGION_MIN_SIZE (1u << 20)

/*
 * Lays out tables in a zeroed region of `size` bytes and writes the header.
 * The live table is sized for the interval: every allocation needs a slot at
 * interval 1, few do when sampling.  Returns 0 or -EINVAL.
 */
int region_format(void *base, uint64_t size, const struct hp_config *cfg);

/*
 * Checks a header and fills r.  Every table must lie inside [0, size).
 * Returns 0, -EPROTO (bad magic/version) or -EINVAL (bad geometry).
 */
int region_bind(struct hp_region *r, void *base, uint64_t size);

/* Stack table. Returns the stack id; 0 is the overflow stack ("table
 * full").  `pcs` is leaf first.  *is_new tells whether a record was added. */
uint32_t stacktab_intern(struct hp_region *r, uint32_t heap_id,
                         const uint64_t *pcs, uint32_t n, uint32_t flags,
                         bool *is_new);

/* Live table. insert: 0 or -ENOSPC when both buckets are full.
 * remove: true and *out filled if addr was present. */
int livetab_insert(struct hp_region *r, uint64_t addr,
                   const struct hp_live_v1 *v);
bool livetab_remove(struct hp_region *r, uint64_t addr, struct hp_live_v1 *out);

/* Appends a module path to the string table; returns its offset or
 * UINT64_MAX when full. Single writer (the client's module scan). */
uint64_t strtab_append(struct hp_region *r, const char *s, size_t len);

static inline void region_count(struct hp_region *r, enum hp_counter c,
                                uint64_t n)
{
	atomic_fetch_add_explicit(&r->hdr->counters[c], n,
	                          memory_order_relaxed);
}

#endif
