/*
 * Reading a process's event trace (`heapprof record --trace`) back from a
 * profile, for `heapprof report` (leaks, temporary allocations),
 * `heapprof pprof --from/--to` and `heapprof flamegraph` (a time window,
 * live bytes over time).  docs/LEAKS.md says what the numbers mean.
 *
 * Events are heapprof_event rows.  A free carries its block's stack, size,
 * charge and allocation time (alloc_ts), so a free alone tells a block's
 * lifetime, and (address, alloc_ts) of a free names the allocation event
 * (address, ts) it ends.  heapprof_trace_stack maps an event's stack_key to
 * its leaf callsite; an event whose key has no mapping (its stack was in no
 * dump) counts under callsite 0, which no stack table holds.
 *
 * Amounts come in the four views of reader.h.  With sampling (-i above 1)
 * the trace holds the sampled allocations only: bytes are the charged
 * estimates and object counts are estimated as the dumps estimate them.
 *
 * A profile written before the trace tables existed reads as "no trace".
 * Errors: functions print one line "heapprof: <subsys>: ..." to stderr and
 * return a negative errno.
 */
#ifndef HEAPPROF_STORE_TRACE_READ_H
#define HEAPPROF_STORE_TRACE_READ_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "store/reader.h"

/* What the trace of a process kept and left out (heapprof_trace and a
 * count of its heapprof_event rows). */
struct tr_info {
	int present;   /* a heapprof_trace row, or events */
	int has_row;   /* the heapprof_trace row (else: only events) */
	char mode[16]; /* "streaming", "oneshot", "ring"; "" if unknown */
	int64_t buffer_bytes;
	int64_t allocs, frees;     /* events kept in the profile */
	int64_t first_ts, last_ts; /* of those; 0 if none */
	/* Never written by the program (no room, or a slot held). */
	int64_t dropped_allocs, dropped_frees;
	int64_t dropped_alloc_bytes, dropped_free_bytes;
	int64_t overwritten;    /* ring: replaced by newer events */
	int64_t incomplete;     /* reserved, never finished */
	int64_t full_ts;        /* oneshot: when it filled; 0 if it did not */
	int64_t waits, wait_ns; /* streaming with --block-client */
};

/* The trace of process upid; t->present 0 if it has none.  0 or errno. */
int tr_load_info(sqlite3 *db, const char *subsys, int64_t upid,
                 struct tr_info *t);

/* Events the program made that the profile lacks (dropped, overwritten,
 * incomplete); 0 when the trace is complete. */
int64_t tr_left_out(const struct tr_info *t);

/* Amounts of one heap per leaf callsite (callsite 0: unknown stack). */
struct tr_heap {
	char *name;
	struct rd_sample *s; /* by callsite id */
	size_t n;
	int64_t tot[RD_NVIEWS];
	int64_t records; /* events or blocks summed (samples, if sampled) */
	/* tr_temporaries: every allocation the trace knows of in this heap
	 * (allocation events, and frees of blocks allocated before the first
	 * event kept), count (estimated if sampled) and bytes. */
	int64_t all_count, all_bytes;
};

/* One tr_heap per heap with anything, "libc.malloc" first then by name. */
struct tr_set {
	struct tr_heap *h;
	size_t n;
};
void tr_set_free(struct tr_set *s);
/* The heap named name in s, or NULL. */
const struct tr_heap *tr_set_find(const struct tr_set *s, const char *name);

/* Where the live blocks at the end were found (state_leaks). */
struct tr_leak_src {
	int from_blocks; /* the final dump's heapprof_block rows (exact) */
	int have_dump;   /* the process has a dump at all */
	int64_t dump_id, dump_ts;
	int64_t in_flight; /* blocks being changed while it was taken */
};

/*
 * The blocks live at the final dump of process upid when that dump kept
 * them (heapprof_block rows: space = charged bytes, objects = objects_fp,
 * records = blocks; the alloc_* views repeat space and objects); *src says
 * which dump, and from_blocks 0 (out empty) when it kept none.  The heap
 * model's state_leaks (model/state.h) takes the per-stack state then.
 */
int tr_leak_blocks(sqlite3 *db, const char *subsys, int64_t upid,
                   struct tr_set *out, struct tr_leak_src *src);

/* Add v (and records) to callsite cs of heap `heap` of s (added if new).
 * 0 or -ENOMEM. */
/* The leaf callsite of each stack key of process upid's trace
 * (heapprof_trace_stack) into m (key: the int64 stack key).  0, or a
 * negative errno (message printed). */
struct hmap;
int tr_stack_keys(sqlite3 *db, const char *subsys, int64_t upid,
                  struct hmap *m);

int tr_set_add(struct tr_set *s, const char *heap, int64_t cs,
               const int64_t v[RD_NVIEWS], int64_t records);
/* Order s's heaps as everywhere: libc.malloc first, then by name. */
void tr_set_sort(struct tr_set *s);

/*
 * The free events of process upid whose block lived at most threshold_ns
 * (ts - alloc_ts), per heap and callsite of the allocation: bytes in
 * space and alloc_space, count in objects and alloc_objects.  all_count
 * and all_bytes of each heap get what the trace knows was allocated.
 */
int tr_temporaries(sqlite3 *db, const char *subsys, int64_t upid,
                   int64_t threshold_ns, struct tr_set *out);

/*
 * The time window [from, to) (boot-time ns) of heap `heap` of process upid:
 * alloc_space and alloc_objects = the allocations made in it; space and
 * objects = those of them with no free event before `to`.
 */
int tr_window(sqlite3 *db, const char *subsys, int64_t upid, const char *heap,
              int64_t from, int64_t to, struct tr_heap *out);
void tr_heap_free(struct tr_heap *h);

/*
 * Live bytes of heap `heap` of process upid over [t0, t1) in nb buckets of
 * equal length: charged bytes allocated minus freed, from the events.
 * live[i] is the amount at the end of bucket i, peak[i] the highest within
 * it.  The running sum starts at base (the amount before the first event
 * kept; 0 when the trace holds every event from the start).  0 or errno.
 */
int tr_timeline(sqlite3 *db, const char *subsys, int64_t upid, const char *heap,
                int64_t t0, int64_t t1, size_t nb, int64_t base, int64_t *live,
                int64_t *peak);

/* Net charged bytes (allocated - freed) of all events of heap `heap`. */
int tr_net_bytes(sqlite3 *db, const char *subsys, int64_t upid,
                 const char *heap, int64_t *out);

/* ---- the events one by one ------------------------------------------------
 *
 * Every reader of the trace goes through this iterator.  A profile stores
 * the events in compressed chunks (heapprof_event_chunk, docs/TRACE.md);
 * one written before that holds heapprof_event as a table of rows, which
 * the iterator reads with SQL: both read the same.
 */

/* One event: a row of heapprof_event. */
struct tr_event {
	/* heapprof_event's rowid: 1, 2, ... in position order over every
	 * process (a table of rows: its rowid) */
	int64_t rowid;
	int64_t upid, ts;
	int free; /* kind: 0 'alloc', 1 'free' */
	int64_t tid, address, size, charged, stack_key;
	int64_t alloc_ts; /* 0: NULL */
	/* heap_name, valid until tr_events_close; heap_idx numbers the
	 * names the iterator met (equal names, equal numbers). */
	const char *heap;
	uint32_t heap_idx;
};

/* In ts order, events of equal ts in position order (else position). */
#define TR_EV_BY_TS 1u

/* No bound: from = TR_TS_MIN, to = TR_TS_MAX. */
#define TR_TS_MIN INT64_MIN
#define TR_TS_MAX INT64_MAX

struct tr_events;

/*
 * The events of process upid (every process: upid < 0) with from <= ts <
 * to (TR_TS_MIN / TR_TS_MAX: no bound on that side), in position order or
 * with TR_EV_BY_TS in ts order.  A profile without a trace gives none.
 * *out to tr_events_close.  0 or errno (printed with subsys; subsys NULL:
 * not printed, see tr_events_error).
 */
int tr_events_open(sqlite3 *db, const char *subsys, int64_t upid, int64_t from,
                   int64_t to, unsigned flags, struct tr_events **out);
/* The next event in *ev (valid until the next call): 1; 0 at the end;
 * or errno (printed: a damaged chunk, a failed query). */
int tr_events_next(struct tr_events *it, const struct tr_event **ev);
void tr_events_close(struct tr_events *it);
/* What the last error of it was (also when subsys was NULL, which
 * prints nothing). */
const char *tr_events_error(const struct tr_events *it);

/* How a profile stores its trace. */
enum tr_form {
	TR_FORM_NONE,   /* no trace tables (written before traces) */
	TR_FORM_ROWS,   /* heapprof_event, a table of rows */
	TR_FORM_CHUNKS, /* heapprof_event_chunk; heapprof_event the view */
};
enum tr_form tr_events_form(sqlite3 *db);

/* Events of process upid (every process: upid < 0) counted without
 * decoding them: allocs, frees, and the first and last ts (0 if none). */
struct tr_count {
	int64_t allocs, frees, first_ts, last_ts;
};
int tr_events_count(sqlite3 *db, const char *subsys, int64_t upid,
                    struct tr_count *c);

/*
 * Progress of reading events, for a command's progress line: fn(arg,
 * done, total) every few tens of thousands of events an iterator reads
 * (total: those it will read; 0 if unknown), and fn(arg, -1, total) when
 * it ends.  NULL: none.  Process-wide; set by the command line.
 */
typedef void (*tr_progress_fn)(void *arg, int64_t done, int64_t total);
void tr_set_progress(tr_progress_fn fn, void *arg);

/*
 * heapprof_event over the chunks, for SQL (an SQLite virtual table
 * module): every connection that reads or writes a profile registers it
 * (rd_open does); plain sqlite3 has no such module.  An SQLite result
 * code.
 */
int tr_events_register(sqlite3 *db);

/*
 * Objects a recorded block of size bytes, charged `charged`, stands for
 * in 16.16 fixed point (HP_OBJ_FP_ONE is one), as the client estimates
 * them: one when recorded exactly (interval <= 1, or charged == size),
 * else 1/p with p the chance a block of that size is sampled.
 */
uint64_t tr_objects_fp(int64_t size, int64_t charged, int64_t interval);

#endif
