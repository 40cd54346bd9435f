/*
 * The shared-memory format, version 2: version 1 (layout_v1.h) plus what
 * full live tracking and the event trace need.  What changed:
 *
 *   - the header grows from 768 to 1024 bytes: the v1 header unchanged,
 *     then struct hp_header_ext_v2 at offset 768;
 *   - a live-table value is struct hp_live_v2 (48 bytes): each entry is a
 *     seqlock and carries the allocating thread and the time, so a reader
 *     copies every live block whole while the program runs;
 *   - an optional event table (HP_TAB_TRACE, struct hp_event_v2).
 *
 * Everything else (tables, records, protocols) is v1's.  The collector
 * formats v2 for a client that speaks it and v1 for a client that only
 * speaks v1 (hp_hello.layout_version), and reads both: region_bind
 * accepts either, and a v1 region reads as a v2 one without thread, time
 * and trace.
 *
 * See docs/LAYOUT.md for the prose description.
 */
#ifndef HEAPPROF_LAYOUT_V2_H
#define HEAPPROF_LAYOUT_V2_H

#include "layout/layout_v1.h"

#define HP_LAYOUT_VERSION     2u /* what this build writes */
#define HP_LAYOUT_MIN_VERSION 1u /* the oldest it still reads */

/* HP_TAB_TRACE: struct hp_event_v2, capacity a power of two; capacity 0
 * without --trace (and in every GROW region: the trace lives in the
 * first region of an attach). */
#define HP_TAB_TRACE 11

/* HP_TAB_LIVE_FILTER: uint8 per cell, capacity = the live table's (a power
 * of two) in regions that sample (sampling_interval > 1), else 0.  A cell
 * (livetab_filter_cell: one per 64 bytes of address space, 4 KiB of filter
 * per 256 KiB) counts the live entries whose key falls in it, saturating
 * at 255 (then it stays 255).
 * Only the client uses it: a free whose cell is 0 was not sampled, one
 * byte load instead of a look into two buckets.  The collector ignores it
 * (a layout-2 region without it is read the same). */
#define HP_TAB_LIVE_FILTER 12

enum hp_trace_mode {
	HP_TRACE_OFF = 0,
	/* The collector reads events while the program runs and moves
	 * trace_tail; a writer that finds no room waits (--block-client,
	 * at most trace_block_ms) or drops the event and counts it. */
	HP_TRACE_STREAMING = 1,
	/* Events fill the table once; the first that does not fit sets
	 * trace_full_ts, and it and every later one are dropped and
	 * counted. */
	HP_TRACE_ONESHOT = 2,
	/* The newest `capacity` events: a writer overwrites the oldest.
	 * Stacks, frames and modules are in their own tables and are never
	 * overwritten, so every event left stays symbolizable. */
	HP_TRACE_RING = 3,
	/* Not a trace the user asked for: the live table's log at interval
	 * 1 (docs/LAYOUT.md, "The live table's log").  The client appends
	 * its allocations and frees as streaming does (log_state); the
	 * collector applies them to the live table and the stacks' free
	 * counters, in order, and writes none of them to the profile. */
	HP_TRACE_LOG = 4,
};
/* The log's size (bytes of events); how long a writer waits for room,
 * and the writers in all, before the client takes the table back
 * (HP_LOG_DIRECT). */
#define HP_LOG_BYTES     (16ull << 20)
#define HP_LOG_ROOM_MS   20u
#define HP_LOG_WAITS_MS  100u
#define HP_LOG_WAITS_MAX 1024u

/* header_ext.log_state: who keeps the live table. */
enum hp_log_state {
	/* The collector, from the log. */
	HP_LOG_LOGGING = 0,
	/* A writer found no room for HP_LOG_ROOM_MS (the program makes
	 * events faster than the collector applies them, or the collector
	 * is stopped), or the process has a second thread: that writer
	 * takes the table back (the collector finishes the event it holds,
	 * the writer applies the rest), the other writers wait for it. */
	HP_LOG_SWITCHING = 1,
	/* The client, in the table itself, as without a log; for the rest
	 * of the session. */
	HP_LOG_DIRECT = 2,
};
/* log_q's low 3 bits. */
enum hp_log_q {
	HP_LOGQ_ALLOC = 1,     /* collector: inserting into the slot */
	HP_LOGQ_FREE = 2,      /* collector: taking the slot's entry out */
	HP_LOGQ_CANCELLED = 3, /* client: the block the collector is putting
	                        * into the slot was freed meanwhile: the
	                        * collector takes it out again */
	HP_LOGQ_TAKEN = 7,     /* client: took the event over before the
	                        * collector named a slot: it applies none */
};

/* A log position's seq (HP_TRACE_LOG): position + 1 when whole, the
 * previous lap's value while a writer holds it, else a tag in the top two
 * bits with the position. */
#define HP_LOG_CLAIMED(p) ((2ull << 62) | (p)) /* the collector took it */
#define HP_LOG_GONE(p)    ((3ull << 62) | (p)) /* the client took it over */

enum hp_log_direct {
	HP_LOG_DIRECT_THREADS = 1, /* the program started a thread */
	HP_LOG_DIRECT_BEHIND = 2,  /* no room (HP_LOG_ROOM_MS ...) */
};

/* trace_dropped[] indexes: events not written, exactly. */
enum hp_trace_drop {
	HP_TDROP_ALLOCS = 0,  /* allocation events */
	HP_TDROP_FREES,       /* free events */
	HP_TDROP_ALLOC_BYTES, /* requested bytes of the dropped allocations */
	HP_TDROP_FREE_BYTES,  /* requested bytes of the dropped frees */
	HP_TDROP_COUNT = 4
};

/*
 * The v2 part of the header, at offset sizeof(struct hp_header_v1).
 * Written by the collector before the region is handed over, except the
 * atomic fields marked as the client's (and trace_tail: the collector's,
 * while the program runs).
 */
struct hp_header_ext_v2 {
	/* Collector, before hand-over. */
	uint32_t region_index;   /* 0: first region of an attach; GROW: 1.. */
	uint32_t trace_mode;     /* enum hp_trace_mode (region_index 0) */
	uint32_t trace_block_ms; /* streaming + HP_CFG_BLOCK_CLIENT */
	/* The live table in levels (docs/LAYOUT.md, "The live table"):
	 * live_levels levels, level 0 of live_level0 slots, level j >= 1 of
	 * live_level0 << (j - 1) slots after it, so that the table's
	 * capacity is live_level0 << (live_levels - 1).  0 (a region an
	 * older collector formatted): one level, the whole table. */
	uint32_t live_levels;
	uint64_t live_level0;
	/* Collector, while the program runs: levels whose pages it has
	 * allocated (fallocate: charged to the collector, not to the
	 * program); the client opens a level past them only when it must
	 * (counted in HP_CTR_LIVE_UNPREPARED). */
	_Atomic uint32_t live_ready;
	/* Client: the highest level that may hold a block (a free looks
	 * there and below); only grows. */
	_Atomic uint32_t live_open;
	/* Collector: the level an insert tries first (then the ones above
	 * it): it moves up when its level is 90% full. */
	_Atomic uint32_t live_first;
	/* Collector: the levels the client may use (0: all): fewer when
	 * the tables would take more than a share of the memory cgroup's
	 * room the program and the collector share. */
	uint32_t live_limit;
	/* HP_TRACE_LOG, on this line, which the client does not read while
	 * the collector keeps the table: the collector's position past the
	 * last event it applied; when the client took the table back
	 * (CLOCK_BOOTTIME, 0: never); the slot of the event the collector
	 * is applying (slot << 3 | HP_LOGQ_*, written by the collector and
	 * by a client taking the table over), 0 between events. */
	_Atomic uint64_t log_done;
	_Atomic uint64_t log_direct_ts;
	_Atomic uint64_t log_q;

	/* Client: next event position to hand out (events ever reserved,
	 * whether written or not). */
	_Atomic uint64_t trace_head;
	union {
		/* Client: HP_TRACE_ONESHOT: CLOCK_BOOTTIME when the first
		 * event did not fit; 0 while none was refused. */
		_Atomic uint64_t trace_full_ts;
		/* Client: HP_TRACE_LOG (on the line of trace_head, which
		 * every writer has in its cache): enum hp_log_state, only
		 * moving forward, and why it went to HP_LOG_DIRECT (enum
		 * hp_log_direct). */
		struct {
			_Atomic uint32_t log_state;
			_Atomic uint32_t log_direct_why;
		};
	};
	_Atomic uint64_t trace_dropped[HP_TDROP_COUNT];
	/* Client: streaming with HP_CFG_BLOCK_CLIENT: writers that waited
	 * for room, and the nanoseconds they waited in all. */
	_Atomic uint64_t trace_waits;
	_Atomic uint64_t trace_wait_ns;

	/* Collector (streaming): events consumed; a writer has room while
	 * head - tail < capacity.  Its own cache line. */
	_Atomic uint64_t trace_tail;
	uint64_t reserved2[7];

	/* Client: the counters past header.counters (enum hp_counter from
	 * HP_CTR_COUNT on; carved from reserved bytes: zeros in a region an
	 * older client wrote). */
	_Atomic uint64_t counters_ext[8];
};
_Static_assert(sizeof(struct hp_header_ext_v2) == 256, "hp_header_ext_v2 size");
_Static_assert(HP_CTR_ALL - HP_CTR_COUNT <= 8, "counters_ext size");

#define HP_HEADER_V2_SIZE                                                      \
	(sizeof(struct hp_header_v1) + sizeof(struct hp_header_ext_v2))

/*
 * A live block (HP_TAB_LIVE_VALUES in v2), parallel to HP_TAB_LIVE_KEYS.
 * `seq` makes each entry a seqlock: the writer, which owns the slot (its
 * key is HP_LIVE_BUSY), makes seq odd, writes the fields, makes it even,
 * then publishes the key (release).  A reader loads the key (acquire),
 * seq, copies the fields, then loads seq and the key again: the copy is
 * whole when both are unchanged and seq is even.  seq only grows, so a
 * slot freed and reused for the same address in between is seen.
 */
struct hp_live_v2 {
	_Atomic uint32_t seq;
	uint32_t stack_id;
	uint32_t heap_id;
	uint32_t tid;        /* thread that allocated it (gettid) */
	uint64_t size;       /* requested bytes */
	uint64_t charged;    /* bytes charged to the stack */
	uint64_t objects_fp; /* objects charged, 16.16 fixed */
	uint64_t ts_ns;      /* CLOCK_BOOTTIME when it was recorded */
};
_Static_assert(sizeof(struct hp_live_v2) == 48, "hp_live_v2 size");

/*
 * One event of the trace.  `seq` is position + 1 once the event at
 * `position` is written, HP_EVENT_BUSY while a writer holds the slot and 0
 * before its first use.  A writer claims the slot with a CAS from the
 * value it saw (never from BUSY), writes, then stores position + 1
 * (release); a reader of position p copies the event when seq == p + 1
 * and keeps the copy if seq is still p + 1 after it.
 *
 * A free carries the stack, size and charge of the block as it was
 * allocated, and when (alloc_ts_ns): a free alone tells a block's life.
 * stack_id indexes the stack table of region `region` (region_index) of
 * the same attach.
 */
struct hp_event_v2 {
	_Atomic uint64_t seq;
	uint64_t ts_ns;       /* CLOCK_BOOTTIME */
	uint64_t addr;        /* the block's address (custom heaps: its id) */
	uint64_t size;        /* requested bytes */
	uint64_t charged;     /* bytes charged (sampled: the estimate) */
	uint64_t alloc_ts_ns; /* HP_EV_FREE: when it was allocated */
	uint32_t stack_id;
	uint32_t tid; /* thread that allocated / freed */
	uint8_t kind; /* HP_EV_* */
	uint8_t region;
	uint16_t heap_id;
	uint32_t reserved;
};
_Static_assert(sizeof(struct hp_event_v2) == 64, "hp_event_v2 size");

#define HP_EVENT_BUSY UINT64_MAX

enum hp_event_kind {
	HP_EV_ALLOC = 1,
	HP_EV_FREE = 2,
};

/* --trace-buffer: default and bounds (bytes). */
#define HP_TRACE_DEFAULT_BYTES (64ull << 20)
#define HP_TRACE_MIN_BYTES     (64ull << 10)
#define HP_TRACE_MAX_BYTES     (16ull << 30)

#endif
