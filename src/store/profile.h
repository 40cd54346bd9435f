/*
 * The profile file: a SQLite database with Perfetto's stack_profile_* and
 * heap_profile_allocation tables plus heapprof's process and dump metadata.
 *
 * The collector hands the writer one `prof_dump` per process per dump, with
 * cumulative counters since the process attached; the writer interns
 * mappings, frames and callsites, symbolizes new frames from ELF symbols,
 * and stores per-dump deltas (a positive row for allocations, a negative
 * row for frees), so that summing rows up to a dump's ts gives the state at
 * that dump.  (A dump big enough to be written in batches may give one
 * callsite two such rows, when equal stacks of two regions fall in two
 * batches: the sums are the same.)
 *
 * Errors: functions return 0 or a negative errno.  A write error (a full
 * disk, ...) is not printed: the writer keeps the first one, and its
 * caller says in one line what became of the file (profile_finish, struct
 * profile_status).  Other errors (out of memory, a process the writer
 * never heard of) print one line, prefixed "heapprof: profile:", to
 * stderr.
 */
#ifndef HEAPPROF_STORE_PROFILE_H
#define HEAPPROF_STORE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout/layout_v2.h"
#include "store/schema.h"

struct profile; /* opaque writer handle */

struct prof_module {
	const char *path; /* as the client saw it; "" if unknown */
	const uint8_t *build_id;
	uint32_t build_id_len; /* 0 if none */
	uint64_t start, end;   /* executable mapping in the target */
	uint64_t base;         /* ELF vaddr 0 is at this address (dlpi_addr) */
	uint64_t load_bias;    /* p_vaddr - p_offset of the exec segment */
	uint64_t exact_offset; /* file offset of the mapping */
};

struct prof_stack {
	/* Where the client keeps it: region index << 32 | stack id.  Events
	 * of the trace name their stack by this key. */
	uint64_t key;
	uint32_t heap_id;
	uint32_t nframes;
	const uint64_t *pcs; /* leaf first; return addresses */
	uint32_t flags;      /* HP_STACK_* */
	/* Cumulative since the process attached. */
	uint64_t alloc_count, alloc_bytes, alloc_objects_fp;
	uint64_t free_count, free_bytes, free_objects_fp;
};

/* The synthetic frames (in the "[heapprof]" mapping, rel_pc telling them
 * apart) and pseudo mappings of the stack tables, as the profile writer and
 * the heap model of a live process (model/live.c) name them. */
#define PROF_FRAME_STACK_FULL "[stack table full]"
#define PROF_FRAME_EMPTY      "[empty stack]"
#define PROF_MAPPING_HEAPPROF "[heapprof]"
#define PROF_MAPPING_UNKNOWN  "[unknown]"

/* Objects that a sum of 16.16 object weights stands for, rounded as every
 * dump's rows are (so that deltas of rounded sums telescope exactly). */
static inline uint64_t prof_objects(uint64_t fp)
{
	return (fp + HP_OBJ_FP_ONE / 2) / HP_OBJ_FP_ONE;
}

struct prof_heap {
	const char *name;
	uint64_t interval;
};

/*
 * The memory of the process beside the profile at a dump, so a reader can
 * tell profiled heap from allocator overhead and fragmentation.  Bytes.
 */
struct prof_memory {
	unsigned have_rss : 1, have_peak : 1, have_malloc : 1;
	/* the program's malloc is not one mallinfo2 describes */
	unsigned malloc_foreign : 1;
	/* "proc": read from /proc/PID/status at the dump; "exit": the
	 * process's own reading at exit (it was gone at the dump). */
	const char *rss_source;
	uint64_t rss, rss_anon, rss_file, rss_shmem, rss_peak;
	/* glibc mallinfo2() at exit: held from the OS, in use, free. */
	uint64_t malloc_system, malloc_in_use, malloc_free;
	/* Its memory cgroup (session/memwatch.c): version 1 or 2 (0: none
	 * known), the limit (0: none), its usage and peak. */
	int cg_version;
	uint64_t cg_limit, cg_usage, cg_peak;
	/* heapprof's own: its shared tables (the regions) in memory, and of
	 * them what the collector allocated, charged to its own memory
	 * cgroup rather than the process's (collector/tend.c). */
	unsigned have_tables : 1;
	uint64_t tables, tables_ours;
};

/* A live block of a snapshot (prof_dump.blocks). */
struct prof_block {
	uint64_t address;    /* malloc's pointer; a custom heap's id */
	uint64_t size;       /* requested bytes */
	uint64_t charged;    /* bytes charged (sampled: the estimate) */
	uint64_t objects_fp; /* objects charged, 16.16 fixed */
	uint32_t stack;      /* index into prof_dump.stacks */
	uint32_t stack_id;   /* the client's (for the reader's own use) */
	uint32_t heap_id;
	uint32_t tid;   /* allocating thread; 0 if unknown (layout v1) */
	uint64_t ts_ns; /* CLOCK_BOOTTIME of the allocation; 0 unknown */
};

struct prof_dump {
	uint64_t ts_ns; /* CLOCK_BOOTTIME */
	/* CLOCK_MONOTONIC when the collector started reading the region, the
	 * start of heapprof_dump.write_ms; 0: when the writer got the dump. */
	uint64_t started_ns;
	const char *reason; /* "end", "signal", "snapshot", ... */
	/* A named snapshot (heapprof_take_named_snapshot, heapprof
	 * snapshot): heapprof_dump.name; NULL for other dumps. */
	const char *name;
	/* Every live block (a snapshot): heapprof_block rows for this dump.
	 * NULL, 0: the dump keeps per-stack counters only. */
	const struct prof_block *blocks;
	size_t nblocks;
	uint64_t blocks_in_flight; /* see struct snapshot */
	const struct prof_module *modules;
	size_t nmodules;
	const struct prof_stack *stacks;
	size_t nstacks;
	const struct prof_heap *heaps; /* index = heap id */
	size_t nheaps;
	uint64_t counters[HP_CTR_ALL]; /* from the region header */
	uint32_t client_state, stop_reason;
	struct prof_memory memory;
	/* The interval the client samples with now (adaptive sampling may
	 * have raised it); 0 = the process's configured interval. */
	uint64_t interval_used;
	/* --dump-at-max: the stacks hold the state at the peak of live bytes,
	 * reached at max_ts_ns with max_live_bytes charged bytes live. */
	int at_max;
	uint64_t max_ts_ns, max_live_bytes;
};

/* The name of heap heap_id of d: the one it registered, "libc.malloc" for
 * heap 0, else "heapN" (in buf, len bytes). */
const char *prof_heap_name(const struct prof_dump *d, uint32_t heap_id,
                           char *buf, size_t len);

struct prof_process {
	/* The row's upid, when the caller numbers its processes (the
	 * collector: its writes are queued, and the upid is needed before
	 * the row is written); 0: the next free one. */
	int64_t upid;
	int pid;
	const char *name;    /* short command name */
	const char *cmdline; /* arguments joined by spaces */
	uint64_t sampling_interval;
	const char *unwind; /* "dwarf" or "fp" */
	uint32_t max_frames;
	uint64_t shmem_size;
	int from_startup;
	uint64_t start_ts_ns; /* CLOCK_BOOTTIME */
	/* How the session came to profile it: "command" (record -- CMD),
	 * "pid" (-p), "name" (-n), "fork" (--follow-fork), "exec"
	 * (--follow-exec).  NULL = "command". */
	const char *how;
	int ppid;            /* 0 if unknown */
	uint64_t session_id; /* daemon's session id; 0 for record -- CMD */
	/* A row for a process with nothing recorded (it has no dumps), and
	 * why (enum prof_not_profiled); 0 for a profiled process. */
	int rejected_concurrent;
	const char *note; /* why it was not profiled, or NULL */
};

struct prof_process_end {
	uint64_t end_ts_ns;
	int exit_status;  /* 0..255, or 128+signal; -1 if unknown */
	int disconnected; /* client went away before the session ended */
	int rejected_concurrent;
	/* What the process started and the session did not follow (no
	 * --follow-exec, no --follow-fork): the image it exec'd (its path,
	 * or its name when the path could not be read), and the pid of the
	 * first child it forked; NULL and 0 when none. */
	const char *exec_not_followed;
	int children_not_followed;
};

/*
 * What became of a profile file: its first error, and, once it is closed
 * (profile_finish), what the file kept.  The caller says it in one line.
 */
struct profile_status {
	int err;      /* the first error, a negative errno; 0: none */
	bool no_room; /* err is a full file system or quota (ENOSPC,
	               * EDQUOT) or the file size limit (EFBIG) */
	/* err in words, without the path: "No space left on device", "the
	 * file size limit was hit (ulimit -f: 2.00 MiB)", "cannot create:
	 * Not a directory", "disk I/O error (committing dump)". */
	char why[192];
	/* profile_finish, when err: the dumps (profile_write_dump calls) and
	 * trace events (profile_write_events) handed to the writer, and how
	 * many of them the file left holds (-1: not known). */
	int64_t dumps, dumps_kept;
	bool lost_last; /* the dumps lost are the last ones */
	int64_t events, events_kept;
	/* No file is left: nothing was kept, or what was left could not be
	 * made a whole database (damaged). */
	bool removed, damaged;
};

/*
 * Create the database at path (an old regular file and its -wal, -shm and
 * -journal are replaced; anything else is refused), its schema written.
 * NULL on error, with st saying why (nothing printed) and no file left
 * behind: st->no_room when the file system has no room for it.
 */
struct profile *profile_open(const char *path, const char *record_cmdline,
                             struct profile_status *st);
/* profile_open, printing one line "heapprof: profile: PATH: WHY" when it
 * fails. */
struct profile *profile_create(const char *path, const char *record_cmdline);
int profile_begin_process(struct profile *p, const struct prof_process *info,
                          int64_t *upid_out);
/* The stacks of d no dump of upid wrote yet, written ahead of a dump
 * (frames, callsites; no dump row, no allocation rows), in a transaction
 * of their own.  0 or a negative errno. */
int profile_intern_stacks(struct profile *p, int64_t upid,
                          const struct prof_dump *d);
int profile_write_dump(struct profile *p, int64_t upid,
                       const struct prof_dump *d);
int profile_end_process(struct profile *p, int64_t upid,
                        const struct prof_process_end *e);
/*
 * Memory over time (writer_counters.c): n values of process upid's
 * counters at ts (CLOCK_BOOTTIME), one Perfetto counter row each on the
 * process_counter_track of its name (made at its first value, with its
 * unit and description).  One transaction.  0 or a negative errno.
 */
struct prof_counter {
	const char *name, *unit, *description;
	double value;
};
int profile_write_counters(struct profile *p, int64_t upid, uint64_t ts,
                           const struct prof_counter *v, size_t n);
/*
 * The event trace of a process (record --trace): heapprof_event rows,
 * stored in compressed chunks (writer_trace.c): they wait in memory until
 * a chunk is full, the process's next dump or end, or profile_finish.
 * stack_key is the prof_stack.key of the allocation's stack; every dump of
 * the process maps the keys it has seen to callsites
 * (heapprof_trace_stack), so events written before the dump that first
 * holds their stack resolve once it is written.
 */
struct prof_event {
	uint64_t ts_ns; /* CLOCK_BOOTTIME */
	uint32_t kind;  /* HP_EV_ALLOC, HP_EV_FREE */
	uint32_t tid;
	uint64_t address, size, charged;
	uint64_t alloc_ts_ns; /* free: when the block was allocated */
	uint64_t stack_key;
	uint32_t heap_id;
};
int profile_write_events(struct profile *p, int64_t upid,
                         const struct prof_event *ev, size_t n);

/* What the trace of a process kept and left out (heapprof_trace, one row
 * per process, replaced at each call). */
struct prof_trace {
	const char *mode; /* "streaming", "oneshot", "ring" */
	uint64_t buffer_bytes;
	uint64_t events; /* written to the profile */
	/* Never written by the client: no room (streaming without
	 * --block-client, or after a wait timed out; oneshot once full),
	 * or a slot another writer held (ring). */
	uint64_t dropped_allocs, dropped_frees;
	uint64_t dropped_alloc_bytes, dropped_free_bytes;
	/* ring: written, then replaced by newer events before it was read */
	uint64_t overwritten;
	/* reserved by a writer that never finished it (the process died in
	 * the middle of writing it) */
	uint64_t incomplete;
	uint64_t full_ts_ns;     /* oneshot: when it filled; 0 if it did not */
	uint64_t waits, wait_ns; /* streaming + --block-client */
};
int profile_set_trace(struct profile *p, int64_t upid,
                      const struct prof_trace *t);

/*
 * Set a session-level key in heapprof_meta (replacing an earlier value),
 * e.g. "config": the session's config as config_print writes it.
 */
int profile_set_meta(struct profile *p, const char *key, const char *value);
/*
 * Close the file and leave it whole, with no -wal, -shm or -journal beside
 * it: every dump committed is copied into it when there is room; when there
 * is none, what the last copy left is kept and the rest is dropped.  After
 * a write error the file is checked and counted (st: the dumps and events
 * it kept), and removed when it kept no dump or is damaged.  0, or st->err.
 * p stays allocated for profile_events_kept until profile_free.
 */
int profile_finish(struct profile *p, struct profile_status *st);
/* Trace events of process upid in the file profile_finish left; -1 when
 * it did not count them (no write error). */
int64_t profile_events_kept(const struct profile *p, int64_t upid);
void profile_free(struct profile *p);
/* profile_finish and profile_free; 0 or negative errno; NULL is fine. */
int profile_close(struct profile *p);

#endif
