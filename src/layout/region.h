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
	/* The session's heap selection (HP_TAB_HEAP_SELECT); NULL, 0 when
	 * it has none (libc.malloc only). */
	const struct hp_heap_select_v1 *heap_select;
	uint64_t heap_select_cap;
	/* HP_CFG_TRACK_MAX: parallel to stacks (stacks_cap entries); NULL
	 * when the region has no STACK_MAX table. */
	struct hp_stack_max_v1 *stack_max;
};

struct hp_config {
	uint64_t sampling_interval;
	uint32_t unwind_mode;
	uint32_t max_frames;
	uint64_t session_id;
	/* Heaps: HP_CFG_ALL_HEAPS in config_flags and these entries (at most
	 * HP_MAX_HEAPS), copied into HP_TAB_HEAP_SELECT.  None: libc.malloc
	 * only.  See struct hp_heap_select_v1. */
	const struct hp_heap_select_v1 *heap_select;
	uint32_t nheap_select;
	/* Session options (header fields of the same names).  0 means off /
	 * the default: adaptive_threshold_pct 0 = 90 and
	 * adaptive_max_interval 0 = 64 * sampling_interval when
	 * HP_CFG_ADAPTIVE is set. */
	uint32_t config_flags; /* HP_CFG_* */
	uint32_t adaptive_threshold_pct;
	uint64_t adaptive_max_interval;
	uint32_t block_timeout_ms;
};

/* Smallest region region_format accepts. */
#define HP_REGION_MIN_SIZE (1u << 20)

/*
 * Lays out tables in a zeroed region of `size` bytes and writes the header.
 * The live table is sized for the interval: every allocation needs a slot at
 * interval 1, few do when sampling.  With HP_CFG_TRACK_MAX the stack budget
 * includes a STACK_MAX entry per stack.  Returns 0 or -EINVAL (also for an
 * adaptive_threshold_pct above 100).
 */
int region_format(void *base, uint64_t size, const struct hp_config *cfg);

/*
 * Checks a header and fills r.  Every table must lie inside [0, size).
 * STACK_MAX is optional (capacity 0: r->stack_max = NULL); when present it
 * must have one 64-byte entry per stack.  A v1 header written before the
 * session options existed (zeros) binds as "all options off".
 * Returns 0, -EPROTO (bad magic/version) or -EINVAL (bad geometry).
 */
int region_bind(struct hp_region *r, void *base, uint64_t size);

/* splitmix64's finalizer: a bijection of 64-bit values that spreads
 * low-entropy keys (stack hashes; custom heaps' live keys). */
uint64_t hp_mix64(uint64_t x);

/*
 * The interval at which a heap called `name` is profiled under a heap
 * selection (struct hp_heap_select_v1: `all` is HP_CFG_ALL_HEAPS, `dflt`
 * the header's sampling_interval); 0 when it is not profiled.  Entry names
 * are compared within HP_HEAP_NAME_MAX bytes, so a selection read from
 * shared memory needs no terminator.
 */
uint64_t hp_heap_select_interval(const struct hp_heap_select_v1 *sel,
                                 uint64_t n, bool all, uint64_t dflt,
                                 const char *name);
/* The smallest interval of any heap the selection can profile (dflt
 * when none is smaller): what the live table must be sized for. */
uint64_t hp_heap_select_min_interval(const struct hp_heap_select_v1 *sel,
                                     uint64_t n, uint64_t dflt);
/* The same for a bound region's own selection. */
uint64_t region_heap_interval(const struct hp_region *r, const char *name);

/* Stack table. Returns the stack id; 0 is the overflow stack ("table
 * full").  `pcs` is leaf first.  *is_new tells whether a record was added. */
uint32_t stacktab_intern(struct hp_region *r, uint32_t heap_id,
                         const uint64_t *pcs, uint32_t n, uint32_t flags,
                         bool *is_new);

/* Live table. insert: 0 or -ENOSPC when both buckets are full.
 * remove: true and *out filled if addr was present. */
int livetab_insert(struct hp_region *r, uint64_t addr,
                   const struct hp_live_v1 *v);
/* Like livetab_insert; *pressure (0..16) tells how crowded the two
 * candidate buckets were: the slots used in the bucket the entry went to
 * (after the insert), plus 8 when the first bucket tried was full; 16 on
 * -ENOSPC.  With bucket fill (when sampling) the emptier bucket is tried
 * first, so a success is 1..8, and 8 means the emptier bucket is now
 * full (the other holds at least 7).
 * Without bucket fill (interval 1) it is 0 on success. */
int livetab_insert_p(struct hp_region *r, uint64_t addr,
                     const struct hp_live_v1 *v, uint32_t *pressure);
/* The live table's load in percent, estimated from the fill of the 64
 * buckets (one cache line of fill bytes) around addr's first bucket; 0
 * without bucket fill (interval 1). */
uint32_t livetab_load_pct(const struct hp_region *r, uint64_t addr);
bool livetab_remove(struct hp_region *r, uint64_t addr, struct hp_live_v1 *out);

/* Appends a module path to the string table; returns its offset or
 * UINT64_MAX when full. Single writer (the client's module scan). */
uint64_t strtab_append(struct hp_region *r, const char *s, size_t len);

/*
 * Peak tracking (HP_CFG_TRACK_MAX, --dump-at-max): the lazy copy-on-epoch
 * protocol of struct hp_stack_max_v1.  The writer (the client) calls
 * stackmax_touch before it changes any counter of stack id, and
 * stackmax_alloc / stackmax_free after an allocation / free has changed
 * the counters by `bytes` charged bytes.  All are no-ops when the region
 * has no STACK_MAX table.  Exact for a single writer; with several threads
 * a stack changed by two of them at the peak may show one change more or
 * less.
 */
struct hp_stack_counts {
	uint64_t alloc_count, alloc_bytes, alloc_objects_fp;
	uint64_t free_count, free_bytes, free_objects_fp;
};
void stackmax_touch(struct hp_region *r, uint32_t id);
/* Raises live_bytes; a new peak stores max_live_bytes, max_ts_ns
 * (CLOCK_BOOTTIME) and raises max_epoch.  Returns true at a new peak. */
bool stackmax_alloc(struct hp_region *r, uint64_t bytes);
void stackmax_free(struct hp_region *r, uint64_t bytes);
/*
 * The reader's side (the collector): the counters of stack id as they were
 * at the peak of live bytes: the STACK_MAX copy when its epoch equals the
 * header's max_epoch (the stack changed after the peak), else the stack's
 * current counters.  Without a STACK_MAX table: the current counters.
 * id must be < r->stacks_cap (else *out is zeroed).
 */
void stackmax_read(const struct hp_region *r, uint64_t id,
                   struct hp_stack_counts *out);
/* The current counters of stack id (relaxed loads). */
void stack_counts(const struct hp_region *r, uint64_t id,
                  struct hp_stack_counts *out);

static inline void region_count(struct hp_region *r, enum hp_counter c,
                                uint64_t n)
{
	atomic_fetch_add_explicit(&r->hdr->counters[c], n,
	                          memory_order_relaxed);
}

#endif
