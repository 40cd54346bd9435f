/*
 * The shared-memory format, version 1: the only definitions that both the
 * client (inside the profiled program) and the collector rely on.
 *
 * One region per profiled process, created by the collector (memfd), mapped
 * read-write by the client and by the collector.  The client writes; the
 * collector reads at any time, also after the client has exited, without the
 * client's help.  Every record is fixed-width with explicit alignment and a
 * size check, the version comes first, and the collector never trusts a
 * value the client could have written: it keeps its own copy of the geometry
 * it planned and clamps every count and index it reads.
 *
 * Version 2 (layout_v2.h) extends it; this file keeps v1's definitions,
 * which v2 shares.  See docs/LAYOUT.md for the prose description.
 */
#ifndef HEAPPROF_LAYOUT_V1_H
#define HEAPPROF_LAYOUT_V1_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HP_MAGIC     0x31464f5250504148ull /* "HAPPROF1" little endian */
#define HP_LAYOUT_V1 1u                    /* header.version of a v1 region */

#define HP_MAX_FRAMES     256u /* hard cap on --max-frames */
#define HP_DEFAULT_FRAMES 64u  /* default --max-frames */
#define HP_BUILD_ID_MAX   32u  /* bytes of a GNU build ID we keep */
#define HP_MAX_HEAPS      64u  /* heap ids 0..63; 0 is libc.malloc */
#define HP_HEAP_NAME_MAX  64u

enum hp_unwind_mode {
	HP_UNWIND_DWARF = 0, /* DWARF CFI (.eh_frame) */
	HP_UNWIND_FP = 1,    /* frame-pointer chain */
};

/* header.client_state, written by the client. */
enum hp_client_state {
	HP_STATE_OFFERED = 0, /* collector made the region, client not yet on */
	HP_STATE_ACTIVE = 1,  /* client is recording */
	HP_STATE_STOPPED = 2, /* client stopped recording; see stop_reason */
};

/* header.stop_reason: why the client stopped (HP_STATE_STOPPED). */
enum hp_stop_reason {
	HP_STOP_NONE = 0,
	HP_STOP_REQUESTED = 1, /* collector set control = HP_CONTROL_STOP */
	HP_STOP_EXEC = 2,      /* the process image was replaced */
	HP_STOP_INTERNAL = 3,  /* internal failure inside the client */
	HP_STOP_EXIT = 4,      /* the process ran its exit handlers */
	HP_STOP_COLLECTOR_GONE = 5, /* its connection to the collector closed */
};

/* header.control, written by the collector, read by the client. */
enum hp_control {
	HP_CONTROL_RUN = 0,
	HP_CONTROL_STOP = 1,
};

/* Counters the client keeps in the header (index into header.counters). */
enum hp_counter {
	/* Not kept by the client: one shared counter bumped by every thread
	 * costs too much.  Samples and matched frees are the sums of the
	 * stacks' alloc_count and free_count. */
	HP_CTR_SAMPLES = 0,
	HP_CTR_FREES_MATCHED,
	HP_CTR_STACK_FULL,       /* samples charged to the overflow stack */
	HP_CTR_STACK_FULL_BYTES, /* ... and their charged bytes */
	HP_CTR_LIVE_FULL,        /* samples whose free could not be tracked */
	HP_CTR_LIVE_FULL_BYTES,  /* ... and their charged bytes */
	HP_CTR_MODULE_FULL,      /* modules that did not fit */
	HP_CTR_UNWIND_ERRORS,    /* unwinds that returned no frame */
	HP_CTR_TRUNCATED_STACKS, /* stacks cut at max_frames */
	HP_CTR_REENTRANT,        /* samples not recorded: a hook of their
	                          * thread was running under them where
	                          * nesting is not safe (recorder.c, "The
	                          * re-entrancy guard") */
	HP_CTR_UNWIND_STOPPED,   /* unwinds that ended early: a read outside
	                          * the proven stack, or a frame no rule
	                          * describes (the stack keeps what it had) */
	HP_CTR_STACK_UNBOUNDED,  /* samples on a stack heapprof cannot bound,
	                          * or whose thread found every capture
	                          * context it may take busy: recorded with
	                          * their caller only */
	HP_CTR_STACK_LOW,        /* samples with less than 1 KiB of stack left:
	                          * not recorded */
	HP_CTR_NESTED,           /* samples recorded while a hook of their
	                          * thread ran under them (a signal handler
	                          * that interrupted it), or may have: a mark
	                          * left by a longjmp, not yet proven gone */
	HP_CTR_GUARD_STALE,      /* re-entrancy marks of hooks a longjmp out
	                          * of a signal handler left: found and cleared */
	HP_CTR_CONTROL_LOST,     /* the program closed (or reused the number of)
	                          * the client's connection to the collector:
	                          * given up unread, profiling goes on */
	HP_CTR_COUNT = 16,       /* header.counters; more in the v2 header's
	                          * counters_ext (layout_v2.h) */
	HP_CTR_SANDBOXED_CHILDREN =
	        HP_CTR_COUNT,    /* children --follow-fork
	                          * could not follow: the program runs under a
	                          * seccomp filter it installed (v2) */
	HP_CTR_STARTUP_RECORDED, /* allocations made before the client's
	                          * constructor attached (shared libraries'
	                          * constructors), recorded at attach (v2) */
	HP_CTR_STARTUP_MISSED,   /* ... and those it could not keep: its
	                          * buffer full, another thread's, nested */
	HP_CTR_ZERO_SIZE,        /* malloc-family allocations of 0 bytes
	                          * recorded (as 0 B; the allocator serves at
	                          * least one byte each) (v2) */
	HP_CTR_LIVE_UNPREPARED,  /* live-table levels the client opened before
	                          * the collector had allocated their pages:
	                          * those pages are charged to the program */
	HP_CTR_LIVE_LIMIT,       /* written by the collector before hand-over:
	                          * the bytes the live table is held to (it
	                          * shares the program's memory cgroup); 0:
	                          * none */
	HP_CTR_LIVE_LOG_EVENTS,  /* written by the collector: events of the
	                          * live table's log it applied */
	HP_CTR_LIVE_LOG_BACK,    /* the client took the live table back
	                          * from the log: why (enum hp_log_direct) */
	HP_CTR_ALL               /* counters in all */
};

/* Tables in the region; header.tables[i] describes table i. */
enum hp_table {
	HP_TAB_STACK_INDEX =
	        0,          /* uint64 slots: (hash32 << 32) | (stack_id + 1) */
	HP_TAB_STACKS,      /* struct hp_stack_v1 */
	HP_TAB_FRAMES,      /* uint64 program counters */
	HP_TAB_LIVE_KEYS,   /* uint64 addresses, buckets of HP_LIVE_BUCKET */
	HP_TAB_LIVE_VALUES, /* struct hp_live_v1, parallel to LIVE_KEYS */
	HP_TAB_MODULES,     /* struct hp_module_v1 */
	HP_TAB_STRINGS,     /* bytes: module paths, NUL terminated */
	HP_TAB_HEAPS,       /* struct hp_heap_v1 [HP_MAX_HEAPS] */
	HP_TAB_LIVE_FILL,   /* uint8 per live bucket: slots in use */
	HP_TAB_STACK_MAX,   /* struct hp_stack_max_v1, parallel to STACKS;
	                       capacity 0 unless HP_CFG_TRACK_MAX */
	HP_TAB_HEAP_SELECT, /* struct hp_heap_select_v1, written by the
	                       collector: the session's heaps by name;
	                       capacity 0 = libc.malloc only */
	HP_TAB_COUNT = 16
};

struct hp_table_desc {
	uint64_t offset;     /* from the start of the region, 64-aligned */
	uint64_t capacity;   /* entries */
	uint32_t entry_size; /* bytes */
	uint32_t reserved;
};
_Static_assert(sizeof(struct hp_table_desc) == 24, "hp_table_desc size");

/*
 * The memory of the process as the client saw it, written by the client
 * when the process exits (its library destructor), for the dump taken
 * after the process is gone and /proc no longer has it.  A seqlock: the
 * writer makes seq odd, stores the fields, then makes it even; a reader
 * that sees an odd or changed seq retries or gives up.  Fields are bytes.
 * Layout v1 readers that predate it see zeros (reserved bytes).
 */
struct hp_memstat_v1 {
	_Atomic uint64_t seq;
	_Atomic uint64_t ts_ns;         /* CLOCK_BOOTTIME; 0: never written */
	_Atomic uint64_t rss;           /* resident set */
	_Atomic uint64_t rss_anon;      /* resident, anonymous (statm) */
	_Atomic uint64_t malloc_system; /* mallinfo2 arena + hblkhd */
	_Atomic uint64_t malloc_in_use; /* mallinfo2 uordblks + hblkhd */
	_Atomic uint64_t malloc_free;   /* mallinfo2 fordblks */
	_Atomic uint64_t flags;         /* HP_MEMSTAT_* */
};
_Static_assert(sizeof(struct hp_memstat_v1) == 64, "hp_memstat_v1 size");

#define HP_MEMSTAT_RSS    1u /* rss, rss_anon valid */
#define HP_MEMSTAT_MALLOC 2u /* malloc_* valid (glibc mallinfo2) */
/* The program's malloc is not the allocator mallinfo2 describes (jemalloc,
 * tcmalloc, ... without a mallinfo2 of their own): malloc_* do not apply. */
#define HP_MEMSTAT_FOREIGN 4u

/* header.config_flags */
#define HP_CFG_FOLLOW_FORK  0x1u  /* a forked child asks for its own region */
#define HP_CFG_TRACK_MAX    0x2u  /* keep the state at the peak of live bytes */
#define HP_CFG_ADAPTIVE     0x4u  /* double the interval when tables fill */
#define HP_CFG_BLOCK_CLIENT 0x8u  /* wait for the collector, see LAYOUT.md */
#define HP_CFG_ALL_HEAPS    0x10u /* every heap but HP_HEAPSEL_EXCLUDE ones */

/*
 * The region header, at offset 0.  Written once by the collector before it
 * hands the region to the client (magic .. tables), then only the atomic
 * fields change.
 */
struct hp_header_v1 {
	uint64_t magic;       /* HP_MAGIC */
	uint32_t version;     /* HP_LAYOUT_VERSION */
	uint32_t header_size; /* sizeof(struct hp_header_v1) */
	uint64_t region_size; /* bytes */

	/* Configuration, chosen by the collector. */
	uint64_t sampling_interval; /* bytes; 1 = every allocation */
	uint32_t unwind_mode;       /* enum hp_unwind_mode */
	uint32_t max_frames;        /* 1..HP_MAX_FRAMES */
	uint64_t session_id;        /* collector's id of the session */
	uint64_t heap_enable_mask;  /* bit 0: libc.malloc is profiled (the
	                               other heaps: HP_TAB_HEAP_SELECT) */

	struct hp_table_desc tables[HP_TAB_COUNT];

	/* Written by the client. */
	_Atomic uint32_t client_state; /* enum hp_client_state */
	_Atomic uint32_t stop_reason;  /* enum hp_stop_reason */
	_Atomic uint32_t control; /* enum hp_control, written by collector */
	int32_t pid;              /* of the client, set at attach */

	_Atomic uint64_t stacks_used;  /* next free stack id */
	_Atomic uint64_t frames_used;  /* next free frame slot */
	_Atomic uint64_t modules_used; /* next free module slot */
	_Atomic uint64_t strings_used; /* next free string byte */
	_Atomic uint64_t heaps_used;   /* next free heap id (0 = libc.malloc) */
	_Atomic uint64_t counters[HP_CTR_COUNT];
	_Atomic uint64_t attach_time_ns; /* CLOCK_BOOTTIME at client attach */
	struct hp_memstat_v1 memstat;

	/* Session options, chosen by the collector (carved from reserved
	 * bytes: a reader that predates them sees zeros = all off). */
	uint32_t config_flags;           /* HP_CFG_* */
	uint32_t adaptive_threshold_pct; /* table fill that doubles the
	                                    interval (HP_CFG_ADAPTIVE) */
	uint64_t adaptive_max_interval;  /* bytes; the interval never grows
	                                    past it */
	uint32_t block_timeout_ms;       /* HP_CFG_BLOCK_CLIENT */
	uint32_t reserved_cfg;

	/* Written by the client. */
	_Atomic uint64_t current_interval; /* interval in use; 0 = the
	                                      configured sampling_interval */
	/* HP_CFG_TRACK_MAX (--dump-at-max): charged bytes live now, the
	 * peak, the peak's epoch (raised at every new peak; starts at 1) and
	 * its time (CLOCK_BOOTTIME).  See struct hp_stack_max_v1. */
	_Atomic uint64_t live_bytes;
	_Atomic uint64_t max_live_bytes;
	_Atomic uint64_t max_epoch;
	_Atomic uint64_t max_ts_ns;
	uint8_t reserved[8];
};
_Static_assert(sizeof(struct hp_header_v1) % 64 == 0, "header 64-aligned");
_Static_assert(sizeof(struct hp_header_v1) == 768, "hp_header_v1 size");

/*
 * An interned call stack.  The stack is the identity of a callsite: its
 * counters are the per-callsite counters of the four views.  `ready` is
 * stored last with release order; a reader ignores a record whose ready is 0.
 * Frames are leaf first, in HP_TAB_FRAMES[frames_off .. frames_off+nframes).
 */
struct hp_stack_v1 {
	_Atomic uint32_t ready; /* 1 once the fields below are written */
	uint32_t heap_id;
	uint32_t nframes;
	uint32_t flags; /* HP_STACK_* */
	uint64_t frames_off;
	uint64_t hash;
	_Atomic uint64_t alloc_count;      /* sampled allocations */
	_Atomic uint64_t alloc_bytes;      /* charged (estimated) bytes */
	_Atomic uint64_t alloc_objects_fp; /* estimated objects, 16.16 fixed */
	_Atomic uint64_t free_count;
	_Atomic uint64_t free_bytes;
	_Atomic uint64_t free_objects_fp;
	uint64_t leaf_pc; /* frames[frames_off], for the client's lookups */
	/* TRACK_MAX: the epoch its STACK_MAX copy was saved at, mirrored
	 * here so that the writer's check reads the line it changes anyway
	 * (the copy's own line only when it copies).  Was reserved (0). */
	_Atomic uint64_t max_epoch_seen;
};
_Static_assert(sizeof(struct hp_stack_v1) == 96, "hp_stack_v1 size");

#define HP_STACK_TRUNCATED 0x1u     /* more frames than max_frames */
#define HP_STACK_OVERFLOW  0x2u     /* stack id 0: stands for "table full" */
#define HP_OBJ_FP_ONE      65536ull /* 1.0 in 16.16 fixed point */

/*
 * The state of one stack at the peak of live bytes (HP_CFG_TRACK_MAX),
 * parallel to the stack table and kept lazily: before the client changes a
 * stack's counters it compares the stack's `epoch` with header.max_epoch;
 * when they differ it first copies the current counters here and stores
 * the header's epoch.  A reader then takes, per stack, these values when
 * epoch == header.max_epoch (the stack changed after the peak) and the
 * stack's current counters otherwise (it has not changed since the peak).
 */
struct hp_stack_max_v1 {
	_Atomic uint64_t epoch;
	uint64_t alloc_count, alloc_bytes, alloc_objects_fp;
	uint64_t free_count, free_bytes, free_objects_fp;
	uint64_t reserved;
};
_Static_assert(sizeof(struct hp_stack_max_v1) == 64, "hp_stack_max_v1 size");

/*
 * A live sampled allocation (v1; a v2 region holds struct hp_live_v2,
 * layout_v2.h, under the same keys).  Keys (addresses) live in their own array
 * so a lookup reads one cache line per bucket.  A key is published in two
 * steps: slot takes HP_LIVE_BUSY, the value is written, the key is stored with
 * release order.  A reader skips EMPTY and BUSY slots.
 *
 * HP_TAB_LIVE_FILL counts, per bucket, the slots in use.  It is raised
 * before a key is published and lowered after it is removed, so a free can
 * skip both buckets when their fill is 0 (the common case when sampling)
 * without reading any key.  It is kept only when sampling: at interval 1
 * every free finds its block anyway.
 */
#define HP_LIVE_EMPTY  0ull
#define HP_LIVE_BUSY   1ull
#define HP_LIVE_BUCKET 8u /* keys per bucket: one cache line */

struct hp_live_v1 {
	uint32_t stack_id;
	uint32_t heap_id;
	uint64_t size;       /* requested bytes */
	uint64_t charged;    /* bytes charged to the stack */
	uint64_t objects_fp; /* objects charged, 16.16 fixed */
};
_Static_assert(sizeof(struct hp_live_v1) == 32, "hp_live_v1 size");

/*
 * A loaded module's executable segment.  `ready` stored last (release).
 * Address of a PC inside the module as the ELF file sees it (what a
 * symbolizer wants): pc - base.
 */
struct hp_module_v1 {
	_Atomic uint32_t ready;
	uint32_t build_id_len;
	uint64_t path_off;  /* into HP_TAB_STRINGS, NUL terminated */
	uint64_t start;     /* first byte of the executable mapping */
	uint64_t end;       /* one past the last byte */
	uint64_t base;      /* dlpi_addr: ELF vaddr 0 is at this address */
	uint64_t load_bias; /* p_vaddr - p_offset of the executable segment */
	uint64_t exact_offset; /* file offset of the mapping (page aligned) */
	uint64_t generation;   /* module scan that found it */
	uint8_t build_id[HP_BUILD_ID_MAX];
};
_Static_assert(sizeof(struct hp_module_v1) == 96, "hp_module_v1 size");

/*
 * A heap of the process, by id: heap 0 is "libc.malloc" (written by the
 * collector when it formats the region), ids 1.. are the custom allocator
 * API's heaps, written by the client (the id registerHeap returned) when
 * it attaches or when the heap is registered later.  `ready` is stored
 * last (release); the same id always carries the same name.
 */
struct hp_heap_v1 {
	_Atomic uint32_t ready;
	uint32_t flags;    /* HP_HEAP_* */
	uint64_t interval; /* sampling interval in use; 0 = not profiled */
	char name[HP_HEAP_NAME_MAX];
};
_Static_assert(sizeof(struct hp_heap_v1) == 80, "hp_heap_v1 size");

#define HP_HEAP_ENABLED 0x1u /* the session profiles this heap */

/*
 * The session's choice of heaps, written by the collector before the
 * region is handed over (HP_TAB_HEAP_SELECT, capacity = entries):
 *   - HP_CFG_ALL_HEAPS: every heap, except entries with
 *     HP_HEAPSEL_EXCLUDE;
 *   - otherwise, with entries: exactly the listed heaps;
 *   - no entries: libc.malloc only.
 * A selected heap uses its entry's interval, or header.sampling_interval
 * when that is 0 (or it has no entry).  See hp_heap_select_interval.
 */
struct hp_heap_select_v1 {
	char name[HP_HEAP_NAME_MAX]; /* NUL terminated */
	uint64_t interval;           /* 0: header.sampling_interval */
	uint32_t flags;              /* HP_HEAPSEL_* */
	uint32_t reserved;
};
_Static_assert(sizeof(struct hp_heap_select_v1) == 80,
               "hp_heap_select_v1 size");

#define HP_HEAPSEL_EXCLUDE 0x1u /* with HP_CFG_ALL_HEAPS: not this one */

#endif
