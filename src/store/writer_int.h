/*
 * The profile writer's own declarations, shared by its files (writer.c
 * describes the writer; profile.h is its interface):
 *   writer.c          the file: creating it, its schema and statements,
 *                     write errors, metadata, closing
 *   writer_process.c  process rows
 *   writer_stacks.c   mappings, frames and callsites, interned
 *   writer_dump.c     one dump: its transaction, in batches
 *   writer_rows.c     a dump's rows: allocations, stats, memory, the
 *                     dump row, blocks
 *   writer_trace.c    the event trace
 * Not for use outside src/profile/writer*.c.  The functions are described
 * where they are defined.
 */
#ifndef HEAPPROF_STORE_WRITER_INT_H
#define HEAPPROF_STORE_WRITER_INT_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/bulk.h"
#include "store/evchunk.h"
#include "util/jobq.h"
#include "util/pairmap.h"
#include "store/profile.h"
#include "util/hmap.h"

#define SUBSYS "heapprof: profile: "

/* Cumulative values last written for one (callsite, heap) of a process. */
struct cum {
	uint64_t alloc_objs, alloc_bytes; /* objects rounded to integers */
	uint64_t free_objs, free_bytes;
};

struct proc_state {
	int64_t upid;
	uint64_t interval;   /* configured; a dump's 0 interval_used means it */
	struct pairmap prev; /* (callsite id, heap id) -> index into cum + 1 */
	struct cum *cum;
	size_t ncum, capcum;
	/* Heap names as the process's dumps gave them (NULL before the first
	 * dump; "" = not named yet), for its events, which carry ids only.
	 * Events of a heap not named yet get a stand-in name ("heap<N>"),
	 * replaced by the first dump that names it (heap_guessed). */
	char (*heap_names)[HP_HEAP_NAME_MAX];
	uint64_t heap_guessed; /* bit per heap id */
	/* A traced process (profile_set_trace): its dumps map stack keys to
	 * callsites; the keys already mapped. */
	bool traced;
	struct pairmap tstacks; /* (key, 0) -> 1 */
	/* (stack key, 0) -> the stack's leaf callsite, for the stacks of
	 * the committed dumps: a region's stacks never change, so a later
	 * dump interns only the new ones (a dump of 23,000 stacks spent
	 * most of its time looking up the callsites of the same stacks
	 * again). */
	struct pairmap stack_leaf;
	/* Its events in the file profile_finish left (counted after a write
	 * error; -1 otherwise). */
	int64_t events_kept;
	/* Its peak dump (reason "peak"): one per process in the file.  A
	 * higher one folds the one before into the dump written after it
	 * (writer_dump.c, fold_peak): its allocation rows (ids peak_lo to
	 * peak_hi) take that dump's time, peak_next_ts, and its dump row
	 * goes, so every other dump's state is unchanged. */
	int64_t peak_dump_id, peak_lo, peak_hi;
	uint64_t peak_ts, peak_next_ts;
	/* Trace events not yet in a chunk (writer_trace.c), at most
	 * WR_CHUNK_EVENTS. */
	struct evc_event *pend;
	size_t npend;
	/* The heap names its events carry, by id (heapprof_event_heap):
	 * the first ev_heaps_written of them are in the file. */
	char **ev_heaps;
	size_t nev_heaps, capev_heaps, ev_heaps_written;
};

/* Events per chunk of the trace (heapprof_event_chunk). */
#define WR_CHUNK_EVENTS 65536

/* One (callsite, heap) of the dump being written, stacks merged. */
struct merged {
	int64_t callsite;
	uint32_t heap_id;
	uint32_t batch; /* the last batch that added to it, + 1 */
	uint64_t alloc_objs_fp, alloc_bytes, free_objs_fp, free_bytes;
	uint64_t alloc_count, free_count;
	int64_t cum;      /* index into proc_state.cum + 1; 0 = none yet */
	struct cum rowed; /* the previous dump's values + the rows written */
};

/* Rows written with one INSERT ... SELECT per dump (bulk.h). */
struct callsite_row {
	int64_t depth, parent, frame; /* parent 0: a root (NULL) */
};
struct alloc_row {
	int64_t callsite, count, size;
	const char *heap;
};
struct block_row {
	int64_t address, size, charged, objects_fp;
	const char *heap;
	int64_t callsite, tid, ts; /* 0: NULL */
};
struct trace_stack_row {
	int64_t key, callsite;
};

enum bulk_id { BK_CALLSITE, BK_ALLOC, BK_BLOCK, BK_TRACE_STACK, BK_COUNT };

enum stmt_id {
	ST_MAPPING,
	ST_FRAME,
	ST_CALLSITE,
	ST_ALLOC,
	ST_DUMP,
	ST_DUMP_TIME,
	ST_STAT,
	ST_DEL_STATS,
	ST_PROC_STATE,
	ST_HEAP,
	ST_MEMORY,
	ST_PROC_MAX,
	ST_BLOCK,
	ST_EVENT_CHUNK,
	ST_EVENT_HEAP_NEW,
	ST_TRACE_STACK,
	ST_TRACE,
	ST_EVENT_HEAP,
	ST_COUNTER_TRACK,
	ST_COUNTER,
	ST_ALLOC_MAX_ID,
	ST_FOLD_ROWS,
	ST_FOLD_DUMP,
	ST_FOLD_MEMORY,
	ST_COUNT
};

/* Row ids we assign; saved at BEGIN so a rollback can restore them. */
struct next_ids {
	int64_t mapping, frame, callsite;
};

struct profile {
	sqlite3 *db;
	char *path; /* for messages */
	/* The database file, open since we created it (profile_open): room
	 * for checkpoints is reserved through it (ckpt_room).  Closed only
	 * after every SQLite connection to the file: a close drops the
	 * process's POSIX locks on it, SQLite's too. */
	int fd;
	/* The first error, and at the end what the file kept. */
	struct profile_status status;
	/* Dumps handed to profile_write_dump, the number of the first of
	 * them that failed (0: none), events handed to
	 * profile_write_events. */
	int64_t dumps_tried, first_failed, events_tried;
	sqlite3_stmt *st[ST_COUNT];
	struct bulk_src bulk[BK_COUNT];
	struct ckpt *ckpt;   /* NULL: SQLite's own automatic checkpoint */
	struct evc_enc *enc; /* the trace's chunks, made when first needed */
	struct symbolizer *sym;
	struct hmap mappings;     /* serialized mapping -> id */
	struct hmap frames;       /* (mapping id, rel_pc) -> id */
	struct pairmap callsites; /* (parent id or 0, frame id) -> id */
	struct next_ids next, saved;
	/* While a dump is written: what goes into SQLite, in order.  Rows
	 * of mappings, frames and callsites are written by jobs, so that a
	 * big dump can intern its next stacks while SQLite writes. */
	struct jobq wq; /* JOBQ_STOP_ON_ERROR */
	/* Callsites interned and not yet handed to a job: the ids before
	 * next.callsite. */
	struct callsite_row *new_cs;
	size_t nnew_cs, capnew_cs;
	struct proc_state *procs;
	size_t nprocs;
	/* The counter tracks made (writer_counters.c): (upid, name) -> id. */
	struct counter_track *tracks;
	size_t ntracks, captracks;
};

#define PC_CACHE 509 /* a prime: pcs are aligned */

/* The state of one profile_write_dump call. */
struct dump_ctx {
	struct profile *p;
	const struct prof_dump *d;
	size_t *order;    /* module indices sorted by start */
	int64_t *map_ids; /* per module: mapping id, 0 until interned */
	/* pc -> frame id: a dump's modules are fixed, so a pc's frame is
	 * found once per dump instead of once per stack holding it. */
	struct pairmap pc_frames;
	struct pc_hit {
		uint64_t pc;
		int64_t frame; /* 0: empty */
	} pc_cache[PC_CACHE];
	/* (callsite, heap id) -> index into merged + 1 */
	struct pairmap merged_idx;
	/* Stand-in names of heaps the dump does not name (dump_heap), each
	 * its own allocation: queued rows point to them. */
	char **heap_bufs;
	uint32_t *heap_ids;
	size_t nheap_bufs, capheap_bufs;
	/* Merged entries a batch added to, in order (wr_emit_allocs). */
	size_t *touched;
	size_t ntouched, captouched;
	uint32_t batch;
	struct merged *merged;
	size_t nmerged, capmerged;
	int64_t *leaf;    /* per stack: its leaf callsite */
	size_t *new_leaf; /* stacks this dump interned (stack_leaf) */
	size_t nnew_leaf;
	int64_t dump_id;    /* heapprof_dump.id of this dump */
	uint64_t *new_keys; /* stack keys this dump mapped (traced) */
	size_t nnew_keys;
	uint64_t heaps_fixed; /* stand-in heap names this dump replaced */
};

/* writer.c */

/* Keep the SQLite error rc for `what` as the profile's first error (when
 * it is; nothing is printed) and return it as a negative errno. */
int wr_sql_err(struct profile *p, int rc, const char *what);
/* Keep err (a negative errno) for `what` the same way; returns err. */
int wr_err(struct profile *p, int err, const char *what);

/* Commit the open transaction once the database file has room for it
 * (ckpt_room: its checkpoint cannot fail for room, however late a reader
 * lets it run); 0, or the error kept (the caller rolls back). */
int wr_commit(struct profile *p, const char *what);

/* Copy what the WAL holds into the database file now; 0, or the error
 * kept (no room for it: nothing copied). */
int wr_fold_wal(struct profile *p, const char *what);

static inline int64_t i64(uint64_t v)
{
	/* SQLite integers are signed; values above 2^63 wrap, as intended. */
	return (int64_t)v;
}

/* Run sql; 0, or the error kept. */
static inline int exec(struct profile *p, const char *sql, const char *what)
{
	int rc = sqlite3_exec(p->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : wr_sql_err(p, rc, what);
}

/* Step a fully bound insert/update statement once and reset it. */
static inline int step(struct profile *p, enum stmt_id id, const char *what)
{
	sqlite3_stmt *st = p->st[id];
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : wr_sql_err(p, rc, what);
}

/* writer_process.c */

/* The writer's state of process upid; NULL if it was never begun. */
struct proc_state *wr_proc_find(struct profile *p, int64_t upid);

/* writer_stacks.c */

int wr_intern_stacks(struct dump_ctx *c, const struct proc_state *ps,
                     size_t from, size_t to);
int wr_write_callsites(struct profile *p);

/* writer_rows.c */

int wr_merge_stack(struct dump_ctx *c, const struct proc_state *ps,
                   int64_t callsite, const struct prof_stack *s);
int wr_emit_allocs(struct dump_ctx *c, int64_t upid);
int wr_write_stats(struct dump_ctx *c, int64_t upid);
int wr_write_dump_row(struct dump_ctx *c, const struct proc_state *ps);
int wr_write_blocks(struct dump_ctx *c, int64_t upid);

/* writer_trace.c */

int wr_write_trace_stacks(struct dump_ctx *c, const struct proc_state *ps);
int wr_fix_event_heaps(struct dump_ctx *c, struct proc_state *ps);
int wr_remember_trace(struct proc_state *ps, const struct dump_ctx *c);
int wr_flush_events(struct profile *p, struct proc_state *ps);
int wr_flush_all_events(struct profile *p);
void wr_free_trace(struct proc_state *ps);

#endif
