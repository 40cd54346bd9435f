/*
 * Operations on a region (layout v2, and v1 for reading): the collector plans
 * and formats it, the client binds to it and inserts into its tables, the
 * collector reads it.  All table operations are lock-free and
 * async-signal-safe: they never allocate, never block and do a bounded amount
 * of work.
 */
#ifndef HEAPPROF_LAYOUT_REGION_H
#define HEAPPROF_LAYOUT_REGION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "layout/layout_v2.h"

/* A bound region: pointers and capacities, checked against region_size. */
struct hp_region {
	uint8_t *base;
	uint64_t size;
	struct hp_header_v1 *hdr;
	uint32_t version;             /* header.version: 1 or 2 */
	struct hp_header_ext_v2 *ext; /* v2 header part; NULL in v1 */
	_Atomic uint64_t *stack_index;
	uint64_t stack_index_cap; /* power of two */
	struct hp_stack_v1 *stacks;
	uint64_t stacks_cap;
	uint64_t *frames;
	uint64_t frames_cap;
	_Atomic uint64_t *live_keys;
	/* v2 values; NULL in a v1 region, whose values (read only, through
	 * livetab_read) are live_v1. */
	struct hp_live_v2 *live_values;
	const struct hp_live_v1 *live_v1;
	uint64_t live_cap; /* power of two, multiple of HP_LIVE_BUCKET */
	/* Levels of the live table (hp_header_ext_v2.live_levels): level 0
	 * is [0, live_level0), level j >= 1 is [live_level0 << (j - 1),
	 * live_level0 << j).  One level of live_cap slots in a region
	 * formatted without levels. */
	uint64_t live_level0;
	uint32_t live_levels;
	/* Levels an insert may use (hp_header_ext_v2.live_limit, or all),
	 * read at bind. */
	uint32_t live_usable;
	/* The client's level (hp_header_ext_v2.live_open) and the
	 * collector's prepared levels (live_ready); NULL in v1. */
	_Atomic uint32_t *live_open;
	_Atomic uint32_t *live_ready;
	_Atomic uint32_t *live_first;
	_Atomic uint8_t *live_fill; /* one per bucket */
	bool use_fill; /* off at interval 1, where every free finds its block */
	/* Counts of live keys per cell (HP_TAB_LIVE_FILTER), when sampling;
	 * NULL in regions without it. */
	_Atomic uint8_t *live_filter;
	uint64_t live_filter_mask;
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
	/* v2 HP_TAB_TRACE; NULL, 0 without a trace (and in v1). */
	struct hp_event_v2 *trace;
	uint64_t trace_cap;  /* power of two */
	uint32_t trace_mode; /* enum hp_trace_mode, cached at bind */
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
	/* 0: HP_LAYOUT_VERSION; HP_LAYOUT_V1 for a client that speaks only
	 * v1 (no thread, time or trace). */
	uint32_t layout_version;
	/* v2: this region's place in its attach (0, or 1.. for GROW) and,
	 * in region 0 only, the event trace: trace_bytes of the region
	 * (rounded down to a power of two of events) go to HP_TAB_TRACE. */
	uint32_t region_index;
	uint32_t trace_mode; /* enum hp_trace_mode */
	uint32_t trace_block_ms;
	uint64_t trace_bytes;
};

/* Smallest region region_format accepts. */
#define HP_REGION_MIN_SIZE (1u << 20)

/*
 * Lays out tables in a zeroed region of `size` bytes and writes the header.
 * The trace table (v2, region_index 0, trace_mode set) takes trace_bytes
 * first; the caller adds them to the size it would use without a trace.
 * The live table is sized for the interval: every allocation needs a slot at
 * interval 1, few do when sampling.  With HP_CFG_TRACK_MAX the stack budget
 * includes a STACK_MAX entry per stack.  Returns 0 or -EINVAL (also for an
 * adaptive_threshold_pct above 100).
 */
int region_format(void *base, uint64_t size, const struct hp_config *cfg);

/*
 * Checks a header (version 1 or 2) and fills r.  Every table must lie inside
 * [0, size). STACK_MAX is optional (capacity 0: r->stack_max = NULL); when
 * present it must have one 64-byte entry per stack.  A v1 header written before
 * the session options existed (zeros) binds as "all options off". Returns 0,
 * -EPROTO (bad magic/version) or -EINVAL (bad geometry).
 */
int region_bind(struct hp_region *r, void *base, uint64_t size);
/* Faults in, at attach, the parts of a bound region that every sample
 * touches at random (the filter, the near parts of the live table and of
 * the stack index, the first stacks and frames: about 1.4 MiB of a 64 MiB
 * region), rather than one page fault at a time inside the program's
 * allocations.  Best effort (MADV_POPULATE_WRITE, Linux 5.14). */
void region_populate_hot(const struct hp_region *r);

/* Clock clk in nanoseconds (a vDSO read for the MONOTONIC, MONOTONIC_COARSE
 * and BOOTTIME clocks: async-signal-safe, no system call). */
static inline uint64_t hp_clock_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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

/*
 * A stack's hash starts as a fold of its frames from the outermost in, so
 * that a capture which took its outer frames from the last one (the
 * client's memo) folds only its new ones: the fold of pcs[n-1] down to
 * pcs[0] (leaf first) is hp_stack_fold(HP_STACK_FOLD_SEED, pc) applied
 * outermost first.  One multiply per frame; the rotation carries high
 * bits down at every frame, so the result is no polynomial in the pcs
 * (which two stacks could agree on by their small differences alone).
 */
#define HP_STACK_FOLD_SEED 0x6a09e667f3bcc909ull
static inline uint64_t hp_stack_fold(uint64_t h, uint64_t pc)
{
	return (((h << 29) | (h >> 35)) ^ pc) * 0x9e3779b97f4a7c15ull;
}
static inline uint64_t hp_stack_fold_all(const uint64_t *pcs, uint32_t n)
{
	uint64_t h = HP_STACK_FOLD_SEED;
	for (uint32_t i = n; i-- > 0;)
		h = hp_stack_fold(h, pcs[i]);
	return h;
}

/* Stack table. Returns the stack id; 0 is the overflow stack ("table
 * full").  `pcs` is leaf first.  *is_new tells whether a record was added.
 * stacktab_intern_folded takes the fold of all n frames, already made
 * (hp_stack_fold_all's value). */
uint32_t stacktab_intern_folded(struct hp_region *r, uint32_t heap_id,
                                const uint64_t *pcs, uint32_t n, uint64_t fold,
                                uint32_t flags, bool *is_new);
uint32_t stacktab_intern(struct hp_region *r, uint32_t heap_id,
                         const uint64_t *pcs, uint32_t n, uint32_t flags,
                         bool *is_new);

/* Live table (v2 regions: the client's).  insert: 0 or -ENOSPC when
 * every bucket of the key in the last level is full (it opens the next
 * level when the open one is full for the key); v->seq is ignored.  remove:
 * true and *out filled if addr was present. */
int livetab_insert(struct hp_region *r, uint64_t addr,
                   const struct hp_live_v2 *v);
/* Like livetab_insert; *pressure (0..16) tells how crowded the two
 * candidate buckets were: the slots used in the bucket the entry went to
 * (after the insert), plus 8 when the first bucket tried was full; 16 on
 * -ENOSPC.  With bucket fill (when sampling) the emptier bucket is tried
 * first, so a success is 1..8, and 8 means the emptier bucket is now
 * full (the other holds at least 7).
 * Without bucket fill (interval 1) it is 0 on success. */
int livetab_insert_p(struct hp_region *r, uint64_t addr,
                     const struct hp_live_v2 *v, uint32_t *pressure);
/* Slots of the live table's level 0 (region_format): when sampling
 * (a program's few thousand sampled blocks: 0.9 MiB) and at interval 1. */
#define HP_LIVE_LEVEL0_SAMPLED (16u << 10)
#define HP_LIVE_LEVEL0_EXACT   (128u << 10)
/* The fill at which the collector sends inserts to the next level
 * (livetab_advance): below it an insert seldom leaves its first bucket. */
#define HP_LIVE_FIRST_FULL_PCT 80
/* The live table's load in percent, estimated from the fill of the 64
 * buckets (one cache line of fill bytes) around addr's second bucket in
 * the last level; 0 before the last level (the table grows instead) and
 * without bucket fill (interval 1). */
uint32_t livetab_load_pct(const struct hp_region *r, uint64_t addr);
bool livetab_remove(struct hp_region *r, uint64_t addr, struct hp_live_v2 *out);

/*
 * The filter cell of a key (HP_TAB_LIVE_FILTER): the counts of the live
 * keys in it tell a free of an unsampled block (nearly every free, when
 * sampling) that there is nothing to look for, with one load of a byte
 * that only changes when a sampled block comes or goes.  A key is counted
 * before it is published and uncounted after it left, so a free never sees
 * 0 while its block is in the table.  A cell at 255 stays there (never
 * wraps to a false 0).
 *
 * One cell per 64 bytes of address space, and each 256 KiB of address
 * space maps to 4 KiB of the filter (its window placed by a hash of the
 * 256 KiB chunk): the frees of blocks that lie near each other, as blocks
 * allocated together do, read the same line and page of the filter.  A
 * filter hashed per block put every free on a line of its own, which
 * evicted a line of the program's from the cache per free (sqlite3: its
 * own code ran 8% slower next to that).
 */
static inline _Atomic uint8_t *livetab_filter_cell(const struct hp_region *r,
                                                   uint64_t addr)
{
	uint64_t window = ((addr >> 18) * 0x9e3779b97f4a7c15ull) >> 32;
	return &r->live_filter[((window << 12) | ((addr >> 6) & 4095)) &
	                       r->live_filter_mask];
}

/* false when addr is certainly not in the live table (its filter cell is
 * 0); true when it may be, or when the region has no filter. */
static inline bool livetab_maybe_live(const struct hp_region *r, uint64_t addr)
{
	return !r->live_filter ||
	       atomic_load_explicit(livetab_filter_cell(r, addr),
	                            memory_order_acquire) != 0;
}
/* Starts loading the lines an insert of addr will touch (its first
 * bucket's keys, fill and first entry, its filter cell), so that the
 * misses overlap with other work:
 * the recorder calls it before it unwinds. */
void livetab_prefetch(const struct hp_region *r, uint64_t addr);

/*
 * The reader's side (a snapshot), v1 or v2: slot i of the live table.
 * HP_LIVE_READ_OK: *key and *out hold a whole entry (v1: tid and ts_ns
 * 0); EMPTY: no block; BUSY: a writer held the slot through every retry
 * (a block being recorded or removed right now).  Never blocks.
 */
enum hp_live_read {
	HP_LIVE_READ_EMPTY = 0,
	HP_LIVE_READ_OK = 1,
	HP_LIVE_READ_BUSY = 2,
};
enum hp_live_read livetab_read(const struct hp_region *r, uint64_t i,
                               uint64_t *key, struct hp_live_v2 *out);

/* Level j's first slot and its slots. */
static inline uint64_t livetab_level_start(const struct hp_region *r,
                                           uint32_t j)
{
	return j == 0 ? 0 : r->live_level0 << (j - 1);
}
static inline uint64_t livetab_level_slots(const struct hp_region *r,
                                           uint32_t j)
{
	return j == 0 ? r->live_level0 : r->live_level0 << (j - 1);
}
/* The highest level that may hold a block (0 in a region without
 * levels). */
static inline uint32_t livetab_open_level(const struct hp_region *r)
{
	if (!r->live_open)
		return 0;
	uint32_t l = atomic_load_explicit(r->live_open, memory_order_acquire);
	return l < r->live_levels ? l : r->live_levels - 1;
}
/* The level an insert tries first. */
static inline uint32_t livetab_first_level(const struct hp_region *r)
{
	if (!r->live_first)
		return 0;
	uint32_t l = atomic_load_explicit(r->live_first, memory_order_relaxed);
	return l < r->live_levels ? l : r->live_levels - 1;
}
/* Slots a reader needs to look at: the levels opened so far (a level
 * opened after this call holds blocks allocated after it).  Reading the
 * rest would only fault in pages nobody wrote. */
static inline uint64_t livetab_used_slots(const struct hp_region *r)
{
	uint32_t l = livetab_open_level(r);
	return livetab_level_start(r, l) + livetab_level_slots(r, l);
}
/* Of level j's slots, those in use among `samples` spread over it, in
 * percent (the collector's estimate; the client keeps no count). */
uint32_t livetab_level_load_pct(const struct hp_region *r, uint32_t j,
                                uint32_t samples);
/* The collector's part (collector_tend): moves live_first up when its
 * level is HP_LIVE_FIRST_FULL_PCT full, and returns how many levels
 * should be prepared (allocated) by now: every level opened, the one
 * inserts go to, and the one after it once that is 60% full.  *load_pct:
 * the fill of the level inserts go to, as read. */
uint32_t livetab_advance(struct hp_region *r, uint32_t *load_pct);
/* The collector, before hand-over: the live table's first `levels`
 * levels only (0: all); returns the levels usable. */
uint32_t livetab_limit(struct hp_region *r, uint32_t levels);
/* Bytes of the live table's levels 0..j-1 (keys, values, fill). */
uint64_t livetab_levels_bytes(const struct hp_region *r, uint32_t j);
/* The byte ranges of level j in the region (keys, values, bucket fill),
 * for the collector to allocate ahead of the client. */
struct hp_range {
	uint64_t off, len;
};
int livetab_level_ranges(const struct hp_region *r, uint32_t j,
                         struct hp_range out[3]);

/*
 * The event trace (v2, HP_TAB_TRACE; see enum hp_trace_mode).
 * trace_put writes *ev (ev->seq ignored) at the next position:
 *   0        written;
 *   -EAGAIN  streaming, no room now: the caller may wait and call again,
 *            or give up with trace_drop (nothing was counted yet);
 *   -ENOSPC  oneshot, full (counted as dropped; the first sets
 *            trace_full_ts);
 *   -EBUSY   ring, another writer held the slot (counted);
 *   -ENODEV  the region has no trace (nothing counted).
 * Lock-free, bounded, async-signal-safe.
 */
int trace_put(struct hp_region *r, const struct hp_event_v2 *ev);
/* Counts ev as dropped (trace_dropped[]). */
void trace_drop(struct hp_region *r, const struct hp_event_v2 *ev);

/*
 * The live table's log (HP_TRACE_LOG; docs/LAYOUT.md, "The live table's
 * log").  Positions' seq: HP_LOG_CLAIMED / HP_LOG_GONE (layout_v2.h).
 *
 * Writer (the client): livelog_reserve takes the next position while
 * there is room (NULL, nothing taken, when there is none), and what its
 * slot's seq held (*was, for the publish); NULL with *gone: a client
 * taking the table over gave up on the position (the operation is to be
 * applied directly).  livelog_publish makes the event whole (a CAS from
 * *was); false: the takeover gave up on it meanwhile (apply it directly).
 */
struct hp_event_v2 *livelog_reserve(struct hp_region *r, uint64_t *pos,
                                    uint64_t *was, bool *gone);
bool livelog_publish(struct hp_event_v2 *e, const struct hp_event_v2 *ev,
                     uint64_t pos, uint64_t was);
/* What livelog_take and livelog_steal found at a position. */
enum hp_loggrab {
	HP_LOGGRAB_TAKEN = 1,     /* whole: copied into *out, and now ours */
	HP_LOGGRAB_NOT_YET = 0,   /* a writer has not made it whole */
	HP_LOGGRAB_COLLECTOR = 2, /* the collector took it */
	HP_LOGGRAB_CLIENT = 3,    /* a client taking the table over took it */
	HP_LOGGRAB_ABANDONED = 4, /* steal with abandon: given up on; its
	                           * writer applies it directly */
};
/* The fields of the event at pos, whatever its seq says (a client taking
 * the table over reads the one the collector holds). */
void livelog_peek(const struct hp_region *r, uint64_t pos,
                  struct hp_event_v2 *out);
/* A logged allocation's live-table entry (alloc_ts_ns carries the
 * objects charged, 16.16, in a log). */
static inline struct hp_live_v2 livelog_entry(const struct hp_event_v2 *ev)
{
	return (struct hp_live_v2){.stack_id = ev->stack_id,
	                           .heap_id = ev->heap_id,
	                           .tid = ev->tid,
	                           .size = ev->size,
	                           .charged = ev->charged,
	                           .objects_fp = ev->alloc_ts_ns,
	                           .ts_ns = ev->ts_ns};
}
/* The collector: takes the event at pos to apply it. */
int livelog_take(const struct hp_region *r, uint64_t pos,
                 struct hp_event_v2 *out);
/* A client taking the table over: takes the event at pos to apply it
 * itself; with abandon, a position no writer made whole is given up on. */
int livelog_steal(const struct hp_region *r, uint64_t pos,
                  struct hp_event_v2 *out, bool abandon);

/*
 * The collector's side: applies one event it took.  HP_EV_ALLOC: its
 * entry goes into the live table (the client charged the stack already);
 * if it does not fit, or its key is not one a table can hold, it is
 * counted as freed at once (HP_CTR_LIVE_FULL).  HP_EV_FREE: the key's
 * entry, if any, leaves the table.  The slot it changes is named in
 * ext->log_q first (HP_LOGQ_*), so that a client taking the table over
 * while the collector is stopped in the middle of it leaves that slot
 * alone.  The stacks' free counters are not changed here: what to
 * discharge is added up in *a, and livelog_flush adds it to the stacks in
 * one go, so that the collector writes a stack's record once per batch
 * (not once per free) while the program reads it (an id past a->cap is
 * discharged at once, and asked for in a->want).  Events of other kinds
 * and stack ids beyond the table are ignored (the client's data are not
 * trusted).  Returns 1 if the
 * event changed the table, 0 if not, -1 if the client has taken the table
 * over (the collector applies nothing more).
 */
struct livelog_acc {
	uint64_t cap;      /* stack ids [0, cap) */
	uint64_t *d;       /* 3 words an id: count, bytes, objects (16.16) */
	uint32_t *touched; /* ids with a nonzero count, cap of them at most */
	uint64_t ntouched;
	/* Ids past cap met meanwhile (discharged at once, one atomic add
	 * each): the collector grows the arrays to want between batches.
	 * Sized to the stacks in use, not to the table: a process with ten
	 * stacks costs the collector a few pages, not the table's size. */
	uint64_t want;
	/* What the last event livelog_apply applied (0 or 1) did, for the
	 * collector's peak tracking: LIVELOG_* of stack last_id, charged
	 * last_bytes and last_objs (16.16). */
	int last;
	uint32_t last_id;
	uint64_t last_bytes, last_objs;
};
enum {
	LIVELOG_NONE = 0,   /* nothing counted */
	LIVELOG_IN = 1,     /* an allocation, live */
	LIVELOG_IN_OUT = 2, /* an allocation the table had no room for:
	                     * counted allocated and freed */
	LIVELOG_OUT = 3,    /* a free of a block that was live */
	LIVELOG_IN_GONE = 4 /* an allocation the client freed while we put
	                     * it in (HP_LOGQ_CANCELLED): counted allocated
	                     * and freed, live until the client's free
	                     * counts it out of live_bytes */
};
int livelog_apply(struct hp_region *r, const struct hp_event_v2 *ev,
                  struct livelog_acc *a);
/* Adds what *a holds to the stacks' free counters and clears it. */
void livelog_flush(struct hp_region *r, struct livelog_acc *a);

/*
 * The reader's side: the event at position pos.
 *   HP_EV_READ_OK    *out holds it whole;
 *   HP_EV_READ_NOT_YET  not written yet (or being written);
 *   HP_EV_READ_GONE  overwritten by a later event (ring), or pos is
 *                    beyond what oneshot keeps.
 */
enum hp_ev_read {
	HP_EV_READ_OK = 0,
	HP_EV_READ_NOT_YET = 1,
	HP_EV_READ_GONE = 2,
};
enum hp_ev_read trace_get(const struct hp_region *r, uint64_t pos,
                          struct hp_event_v2 *out);

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
/* stackmax_touch with the counters given (the collector's own count of
 * stack id, applying the live table's log: the table's run ahead). */
void stackmax_save(struct hp_region *r, uint32_t id,
                   const struct hp_stack_counts *c);
/* Raises live_bytes; a new peak stores max_live_bytes, max_ts_ns
 * (CLOCK_BOOTTIME) and raises max_epoch.  Returns true at a new peak. */
bool stackmax_alloc(struct hp_region *r, uint64_t bytes);
/* The same with the time of the allocation given (CLOCK_BOOTTIME). */
bool stackmax_alloc_at(struct hp_region *r, uint64_t bytes, uint64_t ts);
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

/* Counter c of the region: in the header, or (from HP_CTR_COUNT on) in
 * the v2 header's counters_ext; NULL in a v1 region for those. */
static inline _Atomic uint64_t *region_counter(const struct hp_region *r,
                                               enum hp_counter c)
{
	if ((int)c < HP_CTR_COUNT)
		return &r->hdr->counters[c];
	if (r->ext && (int)c < HP_CTR_ALL)
		return &r->ext->counters_ext[c - HP_CTR_COUNT];
	return NULL;
}

static inline void region_count(struct hp_region *r, enum hp_counter c,
                                uint64_t n)
{
	_Atomic uint64_t *p = region_counter(r, c);
	if (p)
		atomic_fetch_add_explicit(p, n, memory_order_relaxed);
}

#endif
