/*
 * The profile writer (see profile.h): turns the collector's per-process
 * dumps of cumulative per-stack counters into Perfetto's tables in SQLite.
 *
 * Mappings, frames and callsites are interned in memory (hash maps from
 * their identity to the row id we assigned), so each row is written once;
 * frames are symbolized when first seen.  Per process the writer remembers
 * the cumulative values it last stored for each (callsite, heap) and writes
 * only the differences.  Each dump is one transaction: if it fails, the
 * in-memory state is rolled back with it, and earlier dumps stay intact.
 *
 * A dump can hold a million stacks, so its big tables are written in bulk
 * (bulk.h: one INSERT ... SELECT for a batch's callsites, one for its
 * allocation rows) and, past PIPE_MIN_STACKS, in batches through a worker
 * thread (workq.h) while this thread interns the next batch.  The WAL is
 * folded into the file at the end of each dump, so that the file alone
 * holds every dump written (a copy without its -wal file, or the file of
 * a record that was killed, reads whole), and after big commits by a
 * thread of its own (ckpt.h); the heapprof_dump row says how long the
 * dump took (write_ms).
 */
#include <errno.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "profile/bulk.h"
#include "profile/ckpt.h"
#include "profile/pairmap.h"
#include "profile/profile.h"
#include "profile/schema.h"
#include "profile/workq.h"
#include "symbolize/symbolize.h"
#include "util/err.h"
#include "util/grow.h"
#include "util/hmap.h"
#include "util/human.h"

#ifndef HEAPPROF_VERSION
#define HEAPPROF_VERSION "0.1.0"
#endif

#define SUBSYS "heapprof: profile: "

/* Synthetic frames, in the "[heapprof]" mapping (rel_pc tells them apart). */
#define FRAME_STACK_FULL_NAME "[stack table full]"
#define FRAME_EMPTY_NAME      "[empty stack]"
#define MAPPING_HEAPPROF      "[heapprof]"
#define MAPPING_UNKNOWN       "[unknown]"

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
};

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
struct event_row {
	int64_t ts;
	const char *kind;
	int64_t tid, address, size, charged;
	const char *heap;
	int64_t stack_key, alloc_ts; /* alloc_ts 0: NULL */
};

enum bulk_id {
	BK_CALLSITE,
	BK_ALLOC,
	BK_BLOCK,
	BK_TRACE_STACK,
	BK_EVENT,
	BK_COUNT
};

/* clang-format off */
#define COL(type, field, kind) {#field, offsetof(type, field), kind}
/* clang-format on */
static const struct bulk_col callsite_cols[] = {
        COL(struct callsite_row, depth, BULK_I64),
        COL(struct callsite_row, parent, BULK_I64_NZ),
        COL(struct callsite_row, frame, BULK_I64),
};
static const struct bulk_col alloc_cols[] = {
        COL(struct alloc_row, callsite, BULK_I64),
        COL(struct alloc_row, count, BULK_I64),
        COL(struct alloc_row, size, BULK_I64),
        COL(struct alloc_row, heap, BULK_TEXT),
};
static const struct bulk_col block_cols[] = {
        COL(struct block_row, address, BULK_I64),
        COL(struct block_row, size, BULK_I64),
        COL(struct block_row, charged, BULK_I64),
        COL(struct block_row, objects_fp, BULK_I64),
        COL(struct block_row, heap, BULK_TEXT),
        COL(struct block_row, callsite, BULK_I64_NZ),
        COL(struct block_row, tid, BULK_I64_NZ),
        COL(struct block_row, ts, BULK_I64_NZ),
};
static const struct bulk_col trace_stack_cols[] = {
        COL(struct trace_stack_row, key, BULK_I64),
        COL(struct trace_stack_row, callsite, BULK_I64),
};
static const struct bulk_col event_cols[] = {
        COL(struct event_row, ts, BULK_I64),
        COL(struct event_row, kind, BULK_TEXT),
        COL(struct event_row, tid, BULK_I64),
        COL(struct event_row, address, BULK_I64),
        COL(struct event_row, size, BULK_I64),
        COL(struct event_row, charged, BULK_I64),
        COL(struct event_row, heap, BULK_TEXT),
        COL(struct event_row, stack_key, BULK_I64),
        COL(struct event_row, alloc_ts, BULK_I64_NZ),
};
#undef COL
#define NCOLS(a) (int)(sizeof(a) / sizeof((a)[0]))

static const struct bulk_src bulk_tmpl[BK_COUNT] = {
        [BK_CALLSITE] = {"heapprof_new_callsite", callsite_cols,
                         NCOLS(callsite_cols), sizeof(struct callsite_row)},
        [BK_ALLOC] = {"heapprof_new_allocation", alloc_cols, NCOLS(alloc_cols),
                      sizeof(struct alloc_row)},
        [BK_BLOCK] = {"heapprof_new_block", block_cols, NCOLS(block_cols),
                      sizeof(struct block_row)},
        [BK_TRACE_STACK] = {"heapprof_new_trace_stack", trace_stack_cols,
                            NCOLS(trace_stack_cols),
                            sizeof(struct trace_stack_row)},
        [BK_EVENT] = {"heapprof_new_event", event_cols, NCOLS(event_cols),
                      sizeof(struct event_row)},
};

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
	ST_EVENT,
	ST_TRACE_STACK,
	ST_TRACE,
	ST_EVENT_HEAP,
	ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
        [ST_MAPPING] = "INSERT INTO stack_profile_mapping(id, type, build_id,"
                       " exact_offset, start_offset, start, \"end\", load_bias,"
                       " name, resolved_name) VALUES(?,"
                       " 'stack_profile_mapping', ?, ?, 0, ?, ?, ?, ?, ?)",
        [ST_FRAME] =
                "INSERT INTO stack_profile_frame(id, type, name, mapping,"
                " rel_pc, symbol_set_id, deobfuscated_name, system_name)"
                " VALUES(?, 'stack_profile_frame', ?, ?, ?, NULL, NULL, ?)",
        /* The id is left to SQLite: the next rowid, which is ours
         * (checked in run_callsites); giving it costs a seek per row. */
        [ST_CALLSITE] = "INSERT INTO stack_profile_callsite(depth,"
                        " parent_id, frame_id) SELECT"
                        " depth, parent, frame"
                        " FROM heapprof_new_callsite",
        [ST_ALLOC] = "INSERT INTO heap_profile_allocation(ts, upid,"
                     " heap_name, callsite_id, count, size)"
                     " SELECT ?1, ?2, heap,"
                     " callsite, count, size FROM heapprof_new_allocation",
        [ST_DUMP] = "INSERT INTO heapprof_dump(ts, upid, reason, at_max,"
                    " max_ts, max_live_bytes, interval_used, name,"
                    " blocks_in_flight) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [ST_DUMP_TIME] = "UPDATE heapprof_dump SET write_ms = ?1"
                         " WHERE id = ?2",
        [ST_STAT] = "INSERT INTO heapprof_process_stats(upid, name, value)"
                    " VALUES(?, ?, ?)",
        [ST_DEL_STATS] = "DELETE FROM heapprof_process_stats WHERE upid = ?",
        [ST_PROC_STATE] = "UPDATE heapprof_process SET client_state = ?,"
                          " stop_reason = ?, interval_used = ?"
                          " WHERE upid = ?",
        [ST_HEAP] = "INSERT OR REPLACE INTO heapprof_heap(upid, heap_id, name,"
                    " sampling_interval) VALUES(?, ?, ?, ?)",
        [ST_MEMORY] = "INSERT INTO heapprof_dump_memory(upid, ts, name,"
                      " value, source) VALUES(?, ?, ?, ?, ?)",
        /* The highest peak of the process's at-max dumps (the client's
         * peak only grows; max() guards against a bad read). */
        [ST_PROC_MAX] = "UPDATE heapprof_process SET max_live_bytes = ?1,"
                        " max_ts = ?2 WHERE upid = ?3 AND"
                        " (max_live_bytes IS NULL OR max_live_bytes < ?1)",
        [ST_BLOCK] = "INSERT INTO heapprof_block(dump_id, upid, address, size,"
                     " charged, objects_fp, heap_name, callsite_id, tid, ts)"
                     " SELECT ?1, ?2, address, size, charged, objects_fp,"
                     " heap, callsite, tid, ts FROM heapprof_new_block",
        [ST_EVENT] = "INSERT INTO heapprof_event(upid, ts, kind, tid, address,"
                     " size, charged, heap_name, stack_key, alloc_ts)"
                     " SELECT ?1, ts, kind, tid, address, size, charged,"
                     " heap, stack_key, alloc_ts FROM heapprof_new_event",
        [ST_TRACE_STACK] = "INSERT OR IGNORE INTO heapprof_trace_stack(upid,"
                           " stack_key, callsite_id) SELECT ?1, key,"
                           " callsite FROM heapprof_new_trace_stack",
        [ST_TRACE] = "INSERT OR REPLACE INTO heapprof_trace(upid, mode,"
                     " buffer_bytes, events, dropped_allocs, dropped_frees,"
                     " dropped_alloc_bytes, dropped_free_bytes, overwritten,"
                     " incomplete, full_ts, waits, wait_ns)"
                     " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        /* Events written before a dump named their heap: see
         * fix_event_heaps. */
        [ST_EVENT_HEAP] = "UPDATE heapprof_event SET heap_name = ?1"
                          " WHERE upid = ?2 AND heap_name = ?3",
};

/* Names of the header counters (enum hp_counter) in heapprof_process_stats.
 * Samples and matched frees are not header counters (the client does not
 * keep them); they are the sums over the stacks, written by write_stats. */
static const char *const counter_names[] = {
        [HP_CTR_STACK_FULL] = "stack_table_full",
        [HP_CTR_STACK_FULL_BYTES] = "stack_table_full_bytes",
        [HP_CTR_LIVE_FULL] = "live_table_full",
        [HP_CTR_LIVE_FULL_BYTES] = "live_table_full_bytes",
        [HP_CTR_MODULE_FULL] = "module_table_full",
        [HP_CTR_UNWIND_ERRORS] = "unwind_errors",
        [HP_CTR_TRUNCATED_STACKS] = "truncated_stacks",
        [HP_CTR_REENTRANT] = "reentrant_skipped",
        [HP_CTR_UNWIND_STOPPED] = "unwind_stopped",
        [HP_CTR_STACK_UNBOUNDED] = "stack_unbounded",
        [HP_CTR_STACK_LOW] = "stack_low",
        [HP_CTR_NESTED] = "nested_recorded",
        [HP_CTR_GUARD_STALE] = "stale_guards_cleared",
        [HP_CTR_CONTROL_LOST] = "control_lost",
        [HP_CTR_SANDBOXED_CHILDREN] = "sandboxed_children",
        [HP_CTR_STARTUP_RECORDED] = "startup_recorded",
        [HP_CTR_STARTUP_MISSED] = "startup_missed",
        [HP_CTR_ZERO_SIZE] = "zero_size_allocations",
};

/* Row ids we assign; saved at BEGIN so a rollback can restore them. */
struct next_ids {
	int64_t mapping, frame, callsite;
};

struct profile {
	sqlite3 *db;
	char *path; /* for messages */
	sqlite3_stmt *st[ST_COUNT];
	struct bulk_src bulk[BK_COUNT];
	struct ckpt *ckpt; /* NULL: SQLite's own automatic checkpoint */
	struct symbolizer *sym;
	struct hmap mappings;     /* serialized mapping -> id */
	struct hmap frames;       /* (mapping id, rel_pc) -> id */
	struct pairmap callsites; /* (parent id or 0, frame id) -> id */
	struct next_ids next, saved;
	/* While a dump is written: what goes into SQLite, in order.  Rows
	 * of mappings, frames and callsites are written by jobs, so that a
	 * big dump can intern its next stacks while SQLite writes. */
	struct workq wq;
	/* Callsites interned and not yet handed to a job: the ids before
	 * next.callsite. */
	struct callsite_row *new_cs;
	size_t nnew_cs, capnew_cs;
	struct proc_state *procs;
	size_t nprocs;
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
	/* Merged entries a batch added to, in order (emit_allocs). */
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

static int errno_of(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
	case SQLITE_PERM:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	default:
		return -EIO;
	}
}

/* Write errors said so far by this process (see profile_errors_said). */
static int errors_said;

/*
 * Whether an SQLite error is the file size limit (`ulimit -f`; record
 * ignores SIGXFSZ, so a write past it fails with EFBIG instead of killing
 * record).  SQLite calls that "disk I/O error" and keeps the errno only
 * until its next system call: an I/O error while the profile or one of
 * its side files has reached the limit (less a few pages) is the limit.
 */
static bool hit_fsize(const struct profile *p, int rc)
{
	if (p && p->db && sqlite3_system_errno(p->db) == EFBIG)
		return true;
	struct rlimit rl;
	if ((rc & 0xff) != SQLITE_IOERR || !p || !p->path ||
	    getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return false;
	static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		char path[4096];
		struct stat sb;
		if (snprintf(path, sizeof(path), "%s%s", p->path, suffix[i]) <
		            (int)sizeof(path) &&
		    stat(path, &sb) == 0 &&
		    (uint64_t)sb.st_size + (256u << 10) >= rl.rlim_cur)
			return true;
	}
	return false;
}

/* Why an SQLite call failed, in words: the file size limit by name (SQLite
 * would say "disk I/O error"), else SQLite's message. */
static const char *err_text(const struct profile *p, int rc, char *buf,
                            size_t len)
{
	if (hit_fsize(p, rc)) {
		struct rlimit rl;
		char b[HP_FMT_BYTES_MAX];
		if (getrlimit(RLIMIT_FSIZE, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < INT64_MAX)
			snprintf(buf, len,
			         "the file size limit was hit (ulimit -f: %s)",
			         hp_fmt_bytes_short(b, sizeof(b),
			                            (int64_t)rl.rlim_cur));
		else
			snprintf(buf, len, "the file size limit was hit");
		return buf;
	}
	return p && p->db ? sqlite3_errmsg(p->db) : sqlite3_errstr(rc);
}

static int errno_of_p(const struct profile *p, int rc)
{
	return hit_fsize(p, rc) ? -EFBIG : errno_of(rc);
}

/*
 * Print the SQLite error for `what` and return it as a negative errno.
 * A full disk fails every dump after the first that does not fit, and the
 * indexes at the end: one line for the first error, which names the file
 * and says what is kept, instead of a line per attempt.  Every dump is its
 * own transaction, so what was committed before stays readable.
 */
static int sql_err(struct profile *p, int rc, const char *what)
{
	char why[96];
	if (errors_said++ == 0) {
		/* A limit of the process is what the user must change: name
		 * it (SQLite says "unable to open database file"). */
		char hint[96] = "";
		struct rlimit rl;
		if (p->db && sqlite3_system_errno(p->db) == EMFILE &&
		    getrlimit(RLIMIT_NOFILE, &rl) == 0)
			snprintf(hint, sizeof(hint),
			         ": too many open files, the limit (ulimit -n)"
			         " is %llu",
			         (unsigned long long)rl.rlim_cur);
		fprintf(stderr,
		        SUBSYS "%s: %s%s (%s); the dumps written before are "
		               "kept, later write errors are not repeated\n",
		        p->path ? p->path : "profile",
		        err_text(p, rc, why, sizeof(why)), hint, what);
	}
	return errno_of_p(p, rc);
}

int profile_errors_said(void)
{
	return errors_said;
}

static int exec(struct profile *p, const char *sql, const char *what)
{
	int rc = sqlite3_exec(p->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : sql_err(p, rc, what);
}

/* Step a fully bound insert/update statement once and reset it. */
static int step(struct profile *p, enum stmt_id id, const char *what)
{
	sqlite3_stmt *st = p->st[id];
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : sql_err(p, rc, what);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Copy what the WAL holds into the database file now, so that the file
 * alone is a complete profile of everything committed: a copy of it made
 * without its -wal file while record runs, or the file left by a record
 * that was killed, reads with every dump written so far.  Frames that a
 * reader of an older snapshot still needs stay in the WAL until a later
 * checkpoint (the file then holds the dumps before them, never part of
 * one: a checkpoint stops at a commit).
 * A checkpoint of another connection in progress (SQLITE_BUSY) copies
 * them too.  0, or the error said (a full disk).
 */
static int fold_wal(struct profile *p, const char *what)
{
	int rc = ckpt_now(p->ckpt, p->db);
	return rc == SQLITE_OK || rc == SQLITE_BUSY ? 0 : sql_err(p, rc, what);
}

static int64_t i64(uint64_t v)
{
	/* SQLite integers are signed; values above 2^63 wrap, as intended. */
	return (int64_t)v;
}

static int write_meta(struct profile *p, const char *record_cmdline)
{
	char created[32], version[16];
	time_t now = time(NULL);
	struct tm tm;
	sqlite3_stmt *st = NULL;
	int rc;

	gmtime_r(&now, &tm);
	strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(version, sizeof(version), "%d", PROFILE_FORMAT_VERSION);
	const char *kv[][2] = {
	        {"format_version", version},
	        {"heapprof_version", HEAPPROF_VERSION},
	        {"record_cmdline", record_cmdline ? record_cmdline : ""},
	        {"created_at", created},
	};
	rc = sqlite3_prepare_v2(p->db,
	                        "INSERT INTO heapprof_meta(key, value)"
	                        " VALUES(?, ?)",
	                        -1, &st, NULL);
	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(kv) / sizeof(kv[0]);
	     i++) {
		sqlite3_bind_text(st, 1, kv[i][0], -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, kv[i][1], -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK ? 0 : sql_err(p, rc, "writing metadata");
}

/*
 * Remove an old profile and its SQLite side files, so nothing is replayed,
 * then create the file.  Only regular files are replaced: run as root, an
 * unlink of whatever -o names would take /dev/full or a socket with it.
 * Creating the file here, not in SQLite, gives the system's reason
 * (ENOTDIR, EROFS, EACCES, ...) instead of "unable to open database file".
 */
static int remove_old(const char *path)
{
	static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
	char buf[4096];

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		if (snprintf(buf, sizeof(buf), "%s%s", path, suffix[i]) >=
		    (int)sizeof(buf)) {
			fprintf(stderr, SUBSYS "%s: file name too long\n",
			        path);
			return -ENAMETOOLONG;
		}
		struct stat sb;
		if (stat(buf, &sb) == 0 && !S_ISREG(sb.st_mode)) {
			fprintf(stderr,
			        SUBSYS "%s: is %s, not a profile file: "
			               "not replaced\n",
			        buf, hp_file_kind(sb.st_mode));
			return S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL;
		}
		if (unlink(buf) < 0 && errno != ENOENT) {
			int err = -errno;
			fprintf(stderr, SUBSYS "%s: cannot replace: %s\n", buf,
			        strerror(errno));
			return err;
		}
	}
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		int err = -errno;
		fprintf(stderr, SUBSYS "%s: cannot create: %s\n", path,
		        strerror(errno));
		return err;
	}
	close(fd);
	return 0;
}

static int open_db(struct profile *p, const char *path)
{
	/* One thread per connection: SQLite's own mutexes are not needed. */
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	            SQLITE_OPEN_NOMUTEX;
	int rc = sqlite3_open_v2(path, &p->db, flags, NULL);
	if (rc != SQLITE_OK) {
		char why[96];
		errors_said++;
		fprintf(stderr, SUBSYS "%s: %s\n", path,
		        err_text(p, rc, why, sizeof(why)));
		return errno_of_p(p, rc);
	}
	/*
	 * WAL: the main file changes only at checkpoints, so a crash
	 * mid-dump leaves earlier dumps intact in .db + .db-wal, and
	 * readers read while a dump is written.  Each dump is checkpointed
	 * at its end (fold_wal): the .db alone holds the earlier dumps too.
	 * No fsync (synchronous=OFF, set before WAL so that switching is
	 * not synced either): a committed dump is in the page cache, safe
	 * from the collector or the program being killed, which is what a
	 * profile must survive; only the machine going down may lose the
	 * last dumps.  The syncs at each checkpoint and at the close were
	 * 4 ms of every recording (record -- /bin/true: 19 -> 15 ms).
	 */
	/* Another connection may hold a lock on the file for a moment (our
	 * checkpointer's, a reader opening it while record runs, SQLite's
	 * recovery of a -shm): the writer waits for it, on the writer
	 * thread, rather than lose the write.  One such moment failed a
	 * streaming trace's first events ("database is locked"). */
	sqlite3_busy_timeout(p->db, 10000);
	int err = exec(p,
	               "PRAGMA synchronous=OFF; PRAGMA journal_mode=WAL;"
	               " PRAGMA cache_size=-32768;",
	               "setting journal mode");
	if (!err)
		err = exec(p, "BEGIN", "creating schema");
	if (!err)
		err = exec(p, profile_schema_sql, "creating schema");
	for (int i = 0; !err && i < BK_COUNT; i++) {
		p->bulk[i] = bulk_tmpl[i];
		int brc = bulk_register(p->db, &p->bulk[i]);
		if (brc != SQLITE_OK)
			err = sql_err(p, brc, "preparing statements");
	}
	for (int i = 0; !err && i < ST_COUNT; i++) {
		int prc = sqlite3_prepare_v3(p->db, stmt_sql[i], -1,
		                             SQLITE_PREPARE_PERSISTENT,
		                             &p->st[i], NULL);
		if (prc != SQLITE_OK)
			err = sql_err(p, prc, "preparing statements");
	}
	return err;
}

static int destroy(struct profile *p, int fold);

struct profile *profile_create(const char *path, const char *record_cmdline)
{
	struct profile *p = calloc(1, sizeof(*p));

	if (!p) {
		fprintf(stderr, SUBSYS "out of memory\n");
		return NULL;
	}
	hmap_init(&p->mappings);
	hmap_init(&p->frames);
	pairmap_init(&p->callsites);
	p->next = (struct next_ids){1, 1, 1};
	p->sym = symbolizer_new();
	p->path = strdup(path);
	int err = p->sym && p->path ? remove_old(path) : -ENOMEM;
	if (!err)
		err = open_db(p, path);
	if (!err)
		err = write_meta(p, record_cmdline);
	if (!err)
		err = exec(p, "COMMIT", "creating schema");
	/* An empty profile in the file itself, before the first dump. */
	if (!err)
		err = fold_wal(p, "creating schema");
	if (err) {
		if (err == -ENOMEM)
			fprintf(stderr, SUBSYS "out of memory\n");
		destroy(p, 0);
		return NULL;
	}
	/* 1000 pages: SQLite's own threshold (4 MiB). */
	p->ckpt = ckpt_start(p->db, path, 1000);
	return p;
}

static struct proc_state *proc_find(struct profile *p, int64_t upid)
{
	for (size_t i = 0; i < p->nprocs; i++)
		if (p->procs[i].upid == upid)
			return &p->procs[i];
	return NULL;
}

static int insert_process(struct profile *p, const struct prof_process *info,
                          int64_t *upid)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	        p->db,
	        "INSERT INTO process(pid, name, cmdline,"
	        " start_ts, end_ts, upid) VALUES(?, ?, ?, ?, NULL, ?)",
	        -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int(st, 1, info->pid);
		sqlite3_bind_text(st, 2, info->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, info->cmdline, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, i64(info->start_ts_ns));
		/* NULL: the next rowid. */
		if (info->upid > 0)
			sqlite3_bind_int64(st, 5, info->upid);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK)
		return sql_err(p, rc, "adding process");
	*upid = sqlite3_last_insert_rowid(p->db);

	rc = sqlite3_prepare_v2(
	        p->db,
	        "INSERT INTO heapprof_process(upid,"
	        " sampling_interval, unwind, max_frames,"
	        " shmem_size, from_startup, rejected_concurrent,"
	        " disconnected, how, ppid, session_id, note)"
	        " VALUES(?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
	        -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, *upid);
		sqlite3_bind_int64(st, 2, i64(info->sampling_interval));
		sqlite3_bind_text(st, 3, info->unwind, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, info->max_frames);
		sqlite3_bind_int64(st, 5, i64(info->shmem_size));
		sqlite3_bind_int(st, 6, info->from_startup ? 1 : 0);
		sqlite3_bind_int(st, 7, info->rejected_concurrent ? 1 : 0);
		sqlite3_bind_text(st, 8, info->how ? info->how : "command", -1,
		                  SQLITE_STATIC);
		/* Unknown (0) is stored as NULL. */
		if (info->ppid > 0)
			sqlite3_bind_int(st, 9, info->ppid);
		if (info->session_id)
			sqlite3_bind_int64(st, 10, i64(info->session_id));
		if (info->note)
			sqlite3_bind_text(st, 11, info->note, -1,
			                  SQLITE_STATIC);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK ? 0 : sql_err(p, rc, "adding process");
}

int profile_begin_process(struct profile *p, const struct prof_process *info,
                          int64_t *upid_out)
{
	struct proc_state *procs =
	        realloc(p->procs, (p->nprocs + 1) * sizeof(*procs));
	int64_t upid = 0;

	if (!procs) {
		fprintf(stderr, SUBSYS "out of memory\n");
		return -ENOMEM;
	}
	p->procs = procs;
	int err = exec(p, "BEGIN", "adding process");
	if (!err)
		err = insert_process(p, info, &upid);
	if (!err)
		err = exec(p, "COMMIT", "adding process");
	if (err) {
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
		return err;
	}
	struct proc_state *ps = &p->procs[p->nprocs++];
	memset(ps, 0, sizeof(*ps));
	ps->upid = upid;
	ps->interval = info->sampling_interval;
	pairmap_init(&ps->prev);
	pairmap_init(&ps->tstacks);
	pairmap_init(&ps->stack_leaf);
	*upid_out = upid;
	return 0;
}

int profile_end_process(struct profile *p, int64_t upid,
                        const struct prof_process_end *e)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	        p->db, "UPDATE process SET end_ts = ?1 WHERE upid = ?2;", -1,
	        &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, i64(e->end_ts_ns));
		sqlite3_bind_int64(st, 2, upid);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(p->db,
		                        "UPDATE heapprof_process SET"
		                        " exit_status = ?1, disconnected = ?2,"
		                        " rejected_concurrent ="
		                        " max(coalesce(rejected_concurrent, 0),"
		                        " ?3) WHERE upid = ?4",
		                        -1, &st, NULL);
	if (rc == SQLITE_OK) {
		/* -1 (unknown) is stored as NULL. */
		if (e->exit_status >= 0)
			sqlite3_bind_int(st, 1, e->exit_status);
		sqlite3_bind_int(st, 2, e->disconnected ? 1 : 0);
		sqlite3_bind_int(st, 3, e->rejected_concurrent ? 1 : 0);
		sqlite3_bind_int64(st, 4, upid);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc == SQLITE_OK &&
	    (e->exec_not_followed || e->children_not_followed > 0)) {
		rc = sqlite3_prepare_v2(
		        p->db,
		        "UPDATE heapprof_process SET"
		        " exec_not_followed = ?1,"
		        " children_not_followed = ?2 WHERE upid = ?3",
		        -1, &st, NULL);
		if (rc == SQLITE_OK) {
			if (e->exec_not_followed)
				sqlite3_bind_text(st, 1, e->exec_not_followed,
				                  -1, SQLITE_STATIC);
			if (e->children_not_followed > 0)
				sqlite3_bind_int(st, 2,
				                 e->children_not_followed);
			sqlite3_bind_int64(st, 3, upid);
			rc = sqlite3_step(st);
			rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		}
		sqlite3_finalize(st);
	}
	return rc == SQLITE_OK ? 0 : sql_err(p, rc, "ending process");
}

/* ---- interning ---------------------------------------------------------- */

struct mapping_row {
	const char *name;
	const uint8_t *build_id;
	uint32_t build_id_len;
	uint64_t start, end, base, load_bias, exact_offset;
};

/* Identity of a mapping: every column, plus the base rel_pc depends on. */
static uint8_t *mapping_key(const struct mapping_row *m, size_t *len)
{
	uint64_t hdr[6] = {m->start,     m->end,          m->base,
	                   m->load_bias, m->exact_offset, m->build_id_len};
	size_t nlen = strlen(m->name);
	uint8_t *key = malloc(sizeof(hdr) + m->build_id_len + nlen);

	if (!key)
		return NULL;
	memcpy(key, hdr, sizeof(hdr));
	if (m->build_id_len)
		memcpy(key + sizeof(hdr), m->build_id, m->build_id_len);
	memcpy(key + sizeof(hdr) + m->build_id_len, m->name, nlen);
	*len = sizeof(hdr) + m->build_id_len + nlen;
	return key;
}

/* A row for the work queue: the strings are the job's own. */
struct mapping_job {
	struct profile *p;
	int64_t id, exact_offset, start, end, load_bias;
	char *name;
	char *resolved; /* realpath of name where it differs; else NULL */
	char build_id[2 * 256 + 1]; /* hex; "" if none */
};

static void drop_mapping(void *arg)
{
	struct mapping_job *j = arg;
	free(j->name);
	free(j->resolved);
	free(j);
}

static int run_mapping(void *arg)
{
	struct mapping_job *j = arg;
	sqlite3_stmt *st = j->p->st[ST_MAPPING];

	sqlite3_bind_int64(st, 1, j->id);
	if (j->build_id[0])
		sqlite3_bind_text(st, 2, j->build_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, j->exact_offset);
	sqlite3_bind_int64(st, 4, j->start);
	sqlite3_bind_int64(st, 5, j->end);
	sqlite3_bind_int64(st, 6, j->load_bias);
	sqlite3_bind_text(st, 7, j->name, -1, SQLITE_STATIC);
	if (j->resolved)
		sqlite3_bind_text(st, 8, j->resolved, -1, SQLITE_STATIC);
	int err = step(j->p, ST_MAPPING, "writing mapping");
	drop_mapping(j);
	return err;
}

static int insert_mapping(struct profile *p, int64_t id,
                          const struct mapping_row *m)
{
	struct mapping_job *j = calloc(1, sizeof(*j));
	if (!j || !(j->name = strdup(m->name))) {
		free(j);
		return -ENOMEM;
	}
	j->p = p;
	j->id = id;
	/* The file a module's name leads to, when the name goes through a
	 * symbolic link (the main program started through one keeps the
	 * name it was started by).  Read where the profile is written: the
	 * process's machine. */
	if (m->name[0] == '/') {
		j->resolved = realpath(m->name, NULL);
		if (j->resolved && !strcmp(j->resolved, m->name)) {
			free(j->resolved);
			j->resolved = NULL;
		}
	}
	if (m->build_id_len && m->build_id_len <= 256)
		symbolize_hex(j->build_id, m->build_id, m->build_id_len);
	j->exact_offset = i64(m->exact_offset);
	j->start = i64(m->start);
	j->end = i64(m->end);
	j->load_bias = i64(m->load_bias);
	return wq_submit(&p->wq, run_mapping, drop_mapping, j);
}

static int intern_mapping(struct profile *p, const struct mapping_row *m,
                          int64_t *id)
{
	size_t klen = 0;
	uint8_t *key = mapping_key(m, &klen);
	int err = 0;

	if (!key)
		return -ENOMEM;
	int64_t *found = hmap_find(&p->mappings, key, klen);
	if (found) {
		*id = *found;
	} else {
		*id = p->next.mapping;
		err = insert_mapping(p, *id, m);
		if (!err)
			err = hmap_put(&p->mappings, key, klen, *id);
		if (!err)
			p->next.mapping++;
	}
	free(key);
	return err;
}

static int intern_special_mapping(struct profile *p, const char *name,
                                  int64_t *id)
{
	struct mapping_row m = {.name = name};
	return intern_mapping(p, &m, id);
}

struct frame_job {
	struct profile *p;
	int64_t id, mapping, rel_pc;
	struct sym_result sym; /* the job's own */
};

static void drop_frame(void *arg)
{
	struct frame_job *j = arg;
	sym_result_fini(&j->sym);
	free(j);
}

static int run_frame(void *arg)
{
	struct frame_job *j = arg;
	sqlite3_stmt *st = j->p->st[ST_FRAME];

	sqlite3_bind_int64(st, 1, j->id);
	if (j->sym.name)
		sqlite3_bind_text(st, 2, j->sym.name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, j->mapping);
	sqlite3_bind_int64(st, 4, j->rel_pc);
	if (j->sym.system_name)
		sqlite3_bind_text(st, 5, j->sym.system_name, -1, SQLITE_STATIC);
	int err = step(j->p, ST_FRAME, "writing frame");
	drop_frame(j);
	return err;
}

/* Queue the frame's row; its names are taken from *sym (left empty). */
static int insert_frame(struct profile *p, int64_t id, int64_t mapping,
                        uint64_t rel_pc, struct sym_result *sym)
{
	struct frame_job *j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct frame_job){p, id, mapping, i64(rel_pc), *sym};
	*sym = (struct sym_result){NULL, NULL};
	return wq_submit(&p->wq, run_frame, drop_frame, j);
}

/*
 * Intern frame (mapping, rel_pc).  On first sight, name it: `fixed` for
 * synthetic frames, else from module `mod` (NULL: unknown).
 */
static int intern_frame(struct profile *p, int64_t mapping, uint64_t rel_pc,
                        const struct prof_module *mod, const char *fixed,
                        int64_t *id)
{
	int64_t key[2] = {mapping, i64(rel_pc)};
	int64_t *found = hmap_find(&p->frames, key, sizeof(key));
	struct sym_result sym = {NULL, NULL};
	int err = 0;

	if (found) {
		*id = *found;
		return 0;
	}
	if (fixed) {
		sym.name = strdup(fixed);
		if (!sym.name)
			return -ENOMEM;
	} else if (mod) {
		err = symbolizer_lookup(p->sym, mod->path, mod->build_id,
		                        mod->build_id_len, rel_pc, &sym);
		if (err)
			return err;
	}
	*id = p->next.frame;
	err = insert_frame(p, *id, mapping, rel_pc, &sym);
	if (!err)
		err = hmap_put(&p->frames, key, sizeof(key), *id);
	if (!err)
		p->next.frame++;
	sym_result_fini(&sym); /* empty unless insert_frame failed */
	return err;
}

/*
 * The callsite (parent, frame): found, or given the next id and queued in
 * new_cs for write_callsites.  Ids start at 1; parent 0 means a root.
 */
static int intern_callsite(struct profile *p, int64_t parent, int64_t frame,
                           uint32_t depth, int64_t *id)
{
	int64_t found = pairmap_get(&p->callsites, parent, frame);
	if (found) {
		*id = found;
		return 0;
	}
	struct callsite_row *rows =
	        hp_grow(p->new_cs, &p->capnew_cs, p->nnew_cs, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	p->new_cs = rows;
	bool added;
	struct pairmap_slot *sl =
	        pairmap_slot(&p->callsites, parent, frame, &added);
	if (!sl)
		return -ENOMEM;
	sl->v = *id = p->next.callsite++;
	rows[p->nnew_cs++] = (struct callsite_row){depth, parent, frame};
	return 0;
}

struct callsite_job {
	struct profile *p;
	struct callsite_row *rows;
	size_t n;
	int64_t last; /* the id of the last row */
};

static void drop_callsites(void *arg)
{
	struct callsite_job *j = arg;
	free(j->rows);
	free(j);
}

/* One statement for the rows; their ids follow the table's last (SQLite's
 * next rowid), as intern_callsite numbered them. */
static int run_callsites(void *arg)
{
	struct callsite_job *j = arg;
	struct profile *p = j->p;

	p->bulk[BK_CALLSITE].rows = j->rows;
	p->bulk[BK_CALLSITE].nrows = j->n;
	int err = step(p, ST_CALLSITE, "writing callsites");
	p->bulk[BK_CALLSITE].nrows = 0;
	if (!err && sqlite3_last_insert_rowid(p->db) != j->last) {
		fprintf(stderr,
		        SUBSYS "writing callsites: ids out of step (%lld,"
		               " expected %lld)\n",
		        (long long)sqlite3_last_insert_rowid(p->db),
		        (long long)j->last);
		err = -EIO;
	}
	drop_callsites(j);
	return err;
}

/* Hand the callsites interned so far to a job. */
static int write_callsites(struct profile *p)
{
	if (!p->nnew_cs)
		return 0;
	struct callsite_job *j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct callsite_job){p, p->new_cs, p->nnew_cs,
	                           p->next.callsite - 1};
	p->new_cs = NULL;
	p->nnew_cs = p->capnew_cs = 0;
	return wq_submit(&p->wq, run_callsites, drop_callsites, j);
}

/* ---- one dump ----------------------------------------------------------- */

static const struct prof_module *sort_mods;

static int cmp_module_start(const void *a, const void *b)
{
	uint64_t x = sort_mods[*(const size_t *)a].start;
	uint64_t y = sort_mods[*(const size_t *)b].start;
	return x < y ? -1 : x > y;
}

static int ctx_init(struct dump_ctx *c, struct profile *p,
                    const struct prof_dump *d)
{
	size_t n = d->nmodules;

	memset(c, 0, sizeof(*c));
	c->p = p;
	c->d = d;
	pairmap_init(&c->pc_frames);
	pairmap_init(&c->merged_idx);
	c->order = malloc((n ? n : 1) * sizeof(*c->order));
	c->map_ids = calloc(n ? n : 1, sizeof(*c->map_ids));
	c->leaf = calloc(d->nstacks ? d->nstacks : 1, sizeof(*c->leaf));
	if (!c->order || !c->map_ids || !c->leaf ||
	    pairmap_reserve(&c->merged_idx, d->nstacks) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		c->order[i] = i;
	sort_mods = d->modules; /* qsort has no context argument in C11 */
	qsort(c->order, n, sizeof(*c->order), cmp_module_start);
	return 0;
}

static void ctx_fini(struct dump_ctx *c)
{
	free(c->order);
	free(c->map_ids);
	free(c->leaf);
	free(c->new_leaf);
	free(c->new_keys);
	free(c->merged);
	for (size_t i = 0; i < c->nheap_bufs; i++)
		free(c->heap_bufs[i]);
	free(c->heap_bufs);
	free(c->heap_ids);
	free(c->touched);
	pairmap_free(&c->pc_frames);
	pairmap_free(&c->merged_idx);
}

/* Index of the module holding address a, or -1. */
static ssize_t module_of(const struct dump_ctx *c, uint64_t a)
{
	const struct prof_module *mods = c->d->modules;
	size_t lo = 0, hi = c->d->nmodules;

	/* Last module whose start <= a. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mods[c->order[mid]].start <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	size_t i = c->order[lo - 1];
	return a < mods[i].end ? (ssize_t)i : -1;
}

static int module_mapping(struct dump_ctx *c, size_t i, int64_t *id)
{
	const struct prof_module *m = &c->d->modules[i];

	if (c->map_ids[i]) {
		*id = c->map_ids[i];
		return 0;
	}
	struct mapping_row row = {
	        .name = m->path ? m->path : "",
	        .build_id = m->build_id,
	        .build_id_len = m->build_id ? m->build_id_len : 0,
	        .start = m->start,
	        .end = m->end,
	        .base = m->base,
	        .load_bias = m->load_bias,
	        .exact_offset = m->exact_offset,
	};
	int err = intern_mapping(c->p, &row, id);
	if (!err)
		c->map_ids[i] = *id;
	return err;
}

static int pc_frame_slow(struct dump_ctx *c, uint64_t pc, int64_t *frame)
{
	int64_t mapping;
	/* A return address: the call is in the byte before it. */
	ssize_t i = pc ? module_of(c, pc - 1) : -1;
	int err;

	if (i < 0) {
		err = intern_special_mapping(c->p, MAPPING_UNKNOWN, &mapping);
		return err ? err
		           : intern_frame(c->p, mapping, pc, NULL, NULL, frame);
	}
	const struct prof_module *m = &c->d->modules[i];
	err = module_mapping(c, (size_t)i, &mapping);
	return err ? err
	           : intern_frame(c->p, mapping, pc - m->base, m, NULL, frame);
}

/* The frame of return address pc in this dump's modules. */
static int pc_frame(struct dump_ctx *c, uint64_t pc, int64_t *frame)
{
	/* First a small direct-mapped cache: a dump's stacks share most of
	 * their pcs, so this answers nearly every call with one compare. */
	struct pc_hit *hit = &c->pc_cache[(pc ^ pc >> 9) % PC_CACHE];
	if (hit->frame && hit->pc == pc) {
		*frame = hit->frame;
		return 0;
	}
	int64_t id = pairmap_get(&c->pc_frames, i64(pc), 0);
	if (!id) {
		int err = pc_frame_slow(c, pc, &id);
		if (err)
			return err;
		bool added;
		struct pairmap_slot *sl =
		        pairmap_slot(&c->pc_frames, i64(pc), 0, &added);
		if (!sl)
			return -ENOMEM;
		sl->v = id;
	}
	*hit = (struct pc_hit){pc, id};
	*frame = id;
	return 0;
}

static bool special_stack(const struct prof_stack *s)
{
	return (s->flags & HP_STACK_OVERFLOW) || s->nframes == 0 || !s->pcs;
}

/* The callsite of a stack that stands for samples without frames. */
static int special_callsite(struct dump_ctx *c, const struct prof_stack *s,
                            int64_t *leaf)
{
	int64_t frame, mapping;
	int full = (s->flags & HP_STACK_OVERFLOW) != 0;
	int err = intern_special_mapping(c->p, MAPPING_HEAPPROF, &mapping);
	if (!err)
		err = intern_frame(c->p, mapping, full ? 0 : 1, NULL,
		                   full ? FRAME_STACK_FULL_NAME
		                        : FRAME_EMPTY_NAME,
		                   &frame);
	return err ? err : intern_callsite(c->p, 0, frame, 0, leaf);
}

/*
 * Intern every stack's callsites, outermost first; c->leaf[i] gets stack
 * i's last one.  A stack's lookups depend on each other (a callsite's key
 * holds its parent), and in a big dump most of them miss the cache, so
 * stacks go in groups of INTERN_GROUP, one depth at a time: the slots of
 * the whole group are prefetched before the first is probed.
 */
#define INTERN_GROUP 16
static int intern_stacks(struct dump_ctx *c, const struct proc_state *ps,
                         size_t from, size_t to)
{
	const struct prof_dump *d = c->d;
	struct profile *p = c->p;
	size_t idx[INTERN_GROUP];
	int64_t parent[INTERN_GROUP], frame[INTERN_GROUP];
	uint64_t pcs[INTERN_GROUP];
	bool same[INTERN_GROUP];
	int err = 0;

	for (size_t next = from; next < to;) {
		size_t n = 0;
		uint32_t deepest = 0;
		while (n < INTERN_GROUP && next < to) {
			const struct prof_stack *s = &d->stacks[next];
			if (special_stack(s)) {
				err = special_callsite(c, s, &c->leaf[next++]);
				if (err)
					return err;
				continue;
			}
			/* Key 0: not a region's stack (tests, old callers):
			 * interned every time, never remembered. */
			int64_t known = s->key ? pairmap_get(&ps->stack_leaf,
			                                     i64(s->key), 0)
			                       : 0;
			if (known) {
				c->leaf[next++] = known;
				continue;
			}
			if (s->key && !c->new_leaf) {
				c->new_leaf = malloc(d->nstacks *
				                     sizeof(*c->new_leaf));
				if (!c->new_leaf)
					return -ENOMEM;
			}
			if (s->key)
				c->new_leaf[c->nnew_leaf++] = next;
			idx[n] = next++;
			parent[n] = 0;
			if (s->nframes > deepest)
				deepest = s->nframes;
			n++;
		}
		for (uint32_t depth = 0; depth < deepest; depth++) {
			for (size_t g = 0; g < n; g++) {
				const struct prof_stack *s = &d->stacks[idx[g]];
				same[g] = false;
				if (depth >= s->nframes)
					continue;
				uint64_t pc = s->pcs[s->nframes - 1 - depth];
				pcs[g] = pc;
				/* The previous stack's callsite when both
				 * got here by the same path to the same pc:
				 * stacks next to each other often share
				 * their outer frames. */
				if (g &&
				    depth < d->stacks[idx[g - 1]].nframes &&
				    parent[g] == parent[g - 1] &&
				    pc == pcs[g - 1]) {
					same[g] = true;
					continue;
				}
				err = pc_frame(c, pc, &frame[g]);
				if (err)
					return err;
				pairmap_prefetch(&p->callsites, parent[g],
				                 frame[g]);
			}
			for (size_t g = 0; g < n; g++) {
				if (depth >= d->stacks[idx[g]].nframes)
					continue;
				if (same[g]) {
					parent[g] = parent[g - 1];
					continue;
				}
				err = intern_callsite(p, parent[g], frame[g],
				                      depth, &parent[g]);
				if (err)
					return err;
			}
		}
		for (size_t g = 0; g < n; g++)
			c->leaf[idx[g]] = parent[g];
	}
	return 0;
}

/* Add stack s (at leaf callsite) to its (callsite, heap) entry, which
 * the current batch then has to write (c->touched). */
static int merge_stack(struct dump_ctx *c, const struct proc_state *ps,
                       int64_t callsite, const struct prof_stack *s)
{
	bool added;
	struct pairmap_slot *sl =
	        pairmap_slot(&c->merged_idx, callsite, s->heap_id, &added);
	struct merged *m;

	if (!sl)
		return -ENOMEM;
	if (!added) {
		m = &c->merged[sl->v - 1];
	} else {
		m = hp_grow(c->merged, &c->capmerged, c->nmerged, sizeof(*m));
		if (!m)
			return -ENOMEM; /* sl stays empty */
		c->merged = m;
		sl->v = (int64_t)c->nmerged + 1;
		m = &c->merged[c->nmerged++];
		memset(m, 0, sizeof(*m));
		m->callsite = callsite;
		m->heap_id = s->heap_id;
		/* Rows start from what earlier dumps wrote. */
		m->cum = pairmap_get(&ps->prev, callsite, s->heap_id);
		if (m->cum)
			m->rowed = ps->cum[m->cum - 1];
	}
	if (m->batch != c->batch + 1) {
		size_t *t = hp_grow(c->touched, &c->captouched, c->ntouched,
		                    sizeof(*t));
		if (!t)
			return -ENOMEM;
		c->touched = t;
		t[c->ntouched++] = (size_t)(m - c->merged);
		m->batch = c->batch + 1;
	}
	m->alloc_objs_fp += s->alloc_objects_fp;
	m->alloc_bytes += s->alloc_bytes;
	m->free_objs_fp += s->free_objects_fp;
	m->free_bytes += s->free_bytes;
	m->alloc_count += s->alloc_count;
	m->free_count += s->free_count;
	return 0;
}

/* Rounded cumulative values; deltas of these telescope exactly. */
static struct cum merged_cum(const struct merged *m)
{
	uint64_t half = HP_OBJ_FP_ONE / 2;
	return (struct cum){
	        .alloc_objs = (m->alloc_objs_fp + half) / HP_OBJ_FP_ONE,
	        .alloc_bytes = m->alloc_bytes,
	        .free_objs = (m->free_objs_fp + half) / HP_OBJ_FP_ONE,
	        .free_bytes = m->free_bytes,
	};
}

/* Counters only grow; a smaller value (a bad read) yields no delta. */
static uint64_t delta(uint64_t now, uint64_t before)
{
	return now > before ? now - before : 0;
}

static const char *heap_name(const struct prof_dump *d, uint32_t heap_id,
                             char *buf, size_t len)
{
	if (heap_id < d->nheaps && d->heaps[heap_id].name &&
	    d->heaps[heap_id].name[0])
		return d->heaps[heap_id].name;
	if (heap_id == 0)
		return "libc.malloc";
	snprintf(buf, len, "heap%" PRIu32, heap_id);
	return buf;
}

/* heap_name() for rows written in bulk: the string lives as long as the
 * dump.  NULL when out of memory. */
static const char *dump_heap(struct dump_ctx *c, uint32_t heap_id)
{
	const struct prof_dump *d = c->d;
	if (heap_id < d->nheaps && d->heaps[heap_id].name &&
	    d->heaps[heap_id].name[0])
		return d->heaps[heap_id].name;
	if (heap_id == 0)
		return "libc.malloc";
	/* Unnamed ids: none after the collector's heap selection, so a
	 * short list will do. */
	for (size_t i = 0; i < c->nheap_bufs; i++)
		if (c->heap_ids[i] == heap_id)
			return c->heap_bufs[i];
	size_t n = c->nheap_bufs, cap = c->capheap_bufs;
	uint32_t *ids = hp_grow(c->heap_ids, &cap, n, sizeof(*ids));
	if (!ids)
		return NULL;
	c->heap_ids = ids;
	cap = c->capheap_bufs;
	char **bufs = hp_grow(c->heap_bufs, &cap, n, sizeof(*bufs));
	if (!bufs)
		return NULL;
	c->heap_bufs = bufs;
	c->capheap_bufs = cap;
	char buf[32];
	if (!(bufs[n] = strdup(heap_name(d, heap_id, buf, sizeof(buf)))))
		return NULL;
	ids[n] = heap_id;
	c->nheap_bufs++;
	return bufs[n];
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

struct alloc_job {
	struct profile *p;
	struct alloc_row *rows;
	size_t n;
	int64_t ts, upid;
};

static void drop_allocs(void *arg)
{
	struct alloc_job *j = arg;
	free(j->rows);
	free(j);
}

static int run_allocs(void *arg)
{
	struct alloc_job *j = arg;
	struct profile *p = j->p;

	p->bulk[BK_ALLOC].rows = j->rows;
	p->bulk[BK_ALLOC].nrows = j->n;
	sqlite3_bind_int64(p->st[ST_ALLOC], 1, j->ts);
	sqlite3_bind_int64(p->st[ST_ALLOC], 2, j->upid);
	int err = step(p, ST_ALLOC, "writing allocations");
	p->bulk[BK_ALLOC].nrows = 0;
	drop_allocs(j);
	return err;
}

/*
 * The rows of the entries the batch added to: for each, what it gained
 * since the rows before (an earlier dump's, or an earlier batch's when
 * equal stacks of a big dump fall in two batches), as a positive row for
 * allocations and a negative one for frees.
 */
static int emit_allocs(struct dump_ctx *c, int64_t upid)
{
	struct alloc_row *rows = malloc((2 * c->ntouched + 1) * sizeof(*rows));
	size_t n = 0;

	if (!rows)
		return -ENOMEM;
	for (size_t i = 0; i < c->ntouched; i++) {
		struct merged *m = &c->merged[c->touched[i]];
		struct cum now = merged_cum(m);
		struct cum *was = &m->rowed;
		const char *heap = dump_heap(c, m->heap_id);
		if (!heap) {
			free(rows);
			return -ENOMEM;
		}
		uint64_t ac = delta(now.alloc_objs, was->alloc_objs);
		uint64_t ab = delta(now.alloc_bytes, was->alloc_bytes);
		uint64_t fc = delta(now.free_objs, was->free_objs);
		uint64_t fb = delta(now.free_bytes, was->free_bytes);
		if (ac || ab)
			rows[n++] = (struct alloc_row){m->callsite, i64(ac),
			                               i64(ab), heap};
		if (fc || fb)
			rows[n++] = (struct alloc_row){m->callsite, -i64(fc),
			                               -i64(fb), heap};
		/* Never move backwards: see delta(). */
		was->alloc_objs = max_u64(was->alloc_objs, now.alloc_objs);
		was->alloc_bytes = max_u64(was->alloc_bytes, now.alloc_bytes);
		was->free_objs = max_u64(was->free_objs, now.free_objs);
		was->free_bytes = max_u64(was->free_bytes, now.free_bytes);
	}
	c->ntouched = 0;
	c->batch++;
	if (!n) {
		free(rows);
		return 0;
	}
	struct alloc_job *j = malloc(sizeof(*j));
	if (!j) {
		free(rows);
		return -ENOMEM;
	}
	*j = (struct alloc_job){c->p, rows, n, i64(c->d->ts_ns), upid};
	return wq_submit(&c->p->wq, run_allocs, drop_allocs, j);
}

static int write_stat(struct profile *p, int64_t upid, const char *name,
                      uint64_t value)
{
	sqlite3_stmt *st = p->st[ST_STAT];

	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, i64(value));
	return step(p, ST_STAT, "writing process stats");
}

static int write_stats(struct dump_ctx *c, int64_t upid)
{
	struct profile *p = c->p;
	uint64_t nalloc = 0, nfree = 0;

	sqlite3_bind_int64(p->st[ST_DEL_STATS], 1, upid);
	int err = step(p, ST_DEL_STATS, "writing process stats");
	for (size_t i = 0; !err && i < HP_CTR_ALL; i++)
		if (i < sizeof(counter_names) / sizeof(counter_names[0]) &&
		    counter_names[i])
			err = write_stat(p, upid, counter_names[i],
			                 c->d->counters[i]);
	for (size_t i = 0; i < c->nmerged; i++) {
		nalloc += c->merged[i].alloc_count;
		nfree += c->merged[i].free_count;
	}
	if (!err)
		err = write_stat(p, upid, "samples", nalloc);
	if (!err)
		err = write_stat(p, upid, "frees_matched", nfree);
	return err;
}

static int write_memory_row(struct profile *p, int64_t upid, uint64_t ts,
                            const char *name, uint64_t value,
                            const char *source)
{
	sqlite3_stmt *st = p->st[ST_MEMORY];

	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_int64(st, 2, i64(ts));
	sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, i64(value));
	sqlite3_bind_text(st, 5, source, -1, SQLITE_STATIC);
	return step(p, ST_MEMORY, "writing process memory");
}

/* heapprof_dump_memory rows: what the collector learned beside the dump. */
static int write_memory(struct profile *p, int64_t upid,
                        const struct prof_dump *d)
{
	const struct prof_memory *m = &d->memory;
	const char *src = m->rss_source ? m->rss_source : "proc";
	int err = 0;

	if (m->have_rss) {
		err = write_memory_row(p, upid, d->ts_ns, "rss", m->rss, src);
		if (!err)
			err = write_memory_row(p, upid, d->ts_ns, "rss_anon",
			                       m->rss_anon, src);
		if (!err && !strcmp(src, "proc"))
			err = write_memory_row(p, upid, d->ts_ns, "rss_file",
			                       m->rss_file, src);
		if (!err && !strcmp(src, "proc"))
			err = write_memory_row(p, upid, d->ts_ns, "rss_shmem",
			                       m->rss_shmem, src);
	}
	if (!err && m->have_peak)
		err = write_memory_row(p, upid, d->ts_ns, "rss_peak",
		                       m->rss_peak, "proc");
	if (!err && m->malloc_foreign)
		err = write_memory_row(p, upid, d->ts_ns, "malloc_foreign", 1,
		                       "exit");
	if (!err && m->have_malloc)
		err = write_memory_row(p, upid, d->ts_ns, "malloc_system",
		                       m->malloc_system, "exit");
	if (!err && m->have_malloc)
		err = write_memory_row(p, upid, d->ts_ns, "malloc_in_use",
		                       m->malloc_in_use, "exit");
	if (!err && m->have_malloc)
		err = write_memory_row(p, upid, d->ts_ns, "malloc_free",
		                       m->malloc_free, "exit");
	return err;
}

static int write_dump_row(struct dump_ctx *c, const struct proc_state *ps)
{
	struct profile *p = c->p;
	const struct prof_dump *d = c->d;
	int64_t upid = ps->upid;
	sqlite3_stmt *st = p->st[ST_DUMP];
	/* Stored as the interval in effect, so SQL needs no fallback. */
	uint64_t used = d->interval_used ? d->interval_used : ps->interval;
	int err;

	sqlite3_bind_int64(st, 1, i64(d->ts_ns));
	sqlite3_bind_int64(st, 2, upid);
	sqlite3_bind_text(st, 3, d->reason ? d->reason : "", -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, d->at_max ? 1 : 0);
	if (d->at_max) {
		sqlite3_bind_int64(st, 5, i64(d->max_ts_ns));
		sqlite3_bind_int64(st, 6, i64(d->max_live_bytes));
	}
	sqlite3_bind_int64(st, 7, i64(used));
	if (d->name)
		sqlite3_bind_text(st, 8, d->name, -1, SQLITE_STATIC);
	if (d->blocks || d->blocks_in_flight)
		sqlite3_bind_int64(st, 9, i64(d->blocks_in_flight));
	err = step(p, ST_DUMP, "writing dump");
	c->dump_id = sqlite3_last_insert_rowid(p->db);
	if (!err)
		err = write_memory(p, upid, d);
	if (err)
		return err;
	st = p->st[ST_PROC_STATE];
	sqlite3_bind_int64(st, 1, d->client_state);
	sqlite3_bind_int64(st, 2, d->stop_reason);
	sqlite3_bind_int64(st, 3, i64(used));
	sqlite3_bind_int64(st, 4, upid);
	err = step(p, ST_PROC_STATE, "writing process state");
	if (!err && d->at_max) {
		st = p->st[ST_PROC_MAX];
		sqlite3_bind_int64(st, 1, i64(d->max_live_bytes));
		sqlite3_bind_int64(st, 2, i64(d->max_ts_ns));
		sqlite3_bind_int64(st, 3, upid);
		err = step(p, ST_PROC_MAX, "writing process peak");
	}
	for (size_t h = 0; !err && h < d->nheaps; h++) {
		char buf[32];
		if (!d->heaps[h].name && h != 0)
			continue; /* unused heap id */
		st = p->st[ST_HEAP];
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_int64(st, 2, (int64_t)h);
		sqlite3_bind_text(st, 3,
		                  heap_name(d, (uint32_t)h, buf, sizeof(buf)),
		                  -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 4, i64(d->heaps[h].interval));
		err = step(p, ST_HEAP, "writing heaps");
	}
	return err;
}

/* After COMMIT: remember what was written as the base of the next deltas. */
static int remember_cum(struct proc_state *ps, const struct dump_ctx *c)
{
	if (pairmap_reserve(&ps->prev, ps->prev.len + c->nmerged) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < c->nmerged; i++) {
		const struct merged *m = &c->merged[i];
		int64_t idx = m->cum; /* looked up by merge_stack */
		if (!idx) {
			struct cum *cm = hp_grow(ps->cum, &ps->capcum, ps->ncum,
			                         sizeof(*cm));
			if (!cm)
				return -ENOMEM;
			ps->cum = cm;
			bool added;
			struct pairmap_slot *sl = pairmap_slot(
			        &ps->prev, m->callsite, m->heap_id, &added);
			if (!sl)
				return -ENOMEM;
			ps->cum[ps->ncum++] = (struct cum){0};
			sl->v = idx = (int64_t)ps->ncum;
		}
		/* What the rows add up to now (never less than before). */
		ps->cum[idx - 1] = m->rowed;
	}
	return 0;
}

static int keep_below(int64_t val, void *limit)
{
	return val < *(int64_t *)limit;
}

static bool pm_keep_below(int64_t val, void *limit)
{
	return val < *(int64_t *)limit;
}

/* The dump's transaction failed: forget the rows it had interned. */
static void rollback(struct profile *p)
{
	sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
	p->next = p->saved;
	hmap_retain(&p->mappings, keep_below, &p->next.mapping);
	hmap_retain(&p->frames, keep_below, &p->next.frame);
	pairmap_retain(&p->callsites, pm_keep_below, &p->next.callsite);
}

/* heapprof_block: every live block of a snapshot dump, at its leaf
 * callsite. */
static int write_blocks(struct dump_ctx *c, int64_t upid)
{
	struct profile *p = c->p;
	const struct prof_dump *d = c->d;
	struct block_row *rows = malloc(d->nblocks * sizeof(*rows));
	int err = rows ? 0 : -ENOMEM;

	for (size_t i = 0; !err && i < d->nblocks; i++) {
		const struct prof_block *b = &d->blocks[i];
		const char *heap = dump_heap(c, b->heap_id);
		if (!heap) {
			err = -ENOMEM;
			break;
		}
		rows[i] = (struct block_row){
		        .address = i64(b->address),
		        .size = i64(b->size),
		        .charged = i64(b->charged),
		        .objects_fp = i64(b->objects_fp),
		        .heap = heap,
		        /* A block names its stack by index; a bad one keeps
		         * NULL (0). */
		        .callsite =
		                b->stack < d->nstacks ? c->leaf[b->stack] : 0,
		        .tid = b->tid,
		        .ts = i64(b->ts_ns),
		};
	}
	if (!err) {
		p->bulk[BK_BLOCK].rows = rows;
		p->bulk[BK_BLOCK].nrows = d->nblocks;
		sqlite3_bind_int64(p->st[ST_BLOCK], 1, c->dump_id);
		sqlite3_bind_int64(p->st[ST_BLOCK], 2, upid);
		err = step(p, ST_BLOCK, "writing blocks");
		p->bulk[BK_BLOCK].nrows = 0;
	}
	free(rows);
	return err;
}

/* heapprof_trace_stack: the stack keys of a traced process, each mapped
 * once (a key's stack never changes within a process row). */
static int write_trace_stacks(struct dump_ctx *c, const struct proc_state *ps)
{
	struct profile *p = c->p;
	const struct prof_dump *d = c->d;
	struct trace_stack_row *rows = NULL;
	int err = 0;

	for (size_t i = 0; i < d->nstacks; i++) {
		uint64_t key = d->stacks[i].key;
		if (pairmap_get(&ps->tstacks, i64(key), 0))
			continue;
		if (!c->new_keys) {
			c->new_keys = malloc(d->nstacks * sizeof(*c->new_keys));
			rows = malloc(d->nstacks * sizeof(*rows));
			if (!c->new_keys || !rows) {
				free(rows);
				return -ENOMEM;
			}
		}
		/* One call per dump_ctx: new_keys is NULL on entry, so rows
		 * is allocated with it (the analyzer assumes otherwise). */
		// NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
		rows[c->nnew_keys] =
		        (struct trace_stack_row){i64(key), c->leaf[i]};
		c->new_keys[c->nnew_keys++] = key;
	}
	if (c->nnew_keys) {
		p->bulk[BK_TRACE_STACK].rows = rows;
		p->bulk[BK_TRACE_STACK].nrows = c->nnew_keys;
		sqlite3_bind_int64(p->st[ST_TRACE_STACK], 1, ps->upid);
		err = step(p, ST_TRACE_STACK, "writing trace stacks");
		p->bulk[BK_TRACE_STACK].nrows = 0;
	}
	free(rows);
	return err;
}

/*
 * Heap names for the events: the dump names its heaps; events written
 * before with a stand-in name for a heap it names now get the real one.
 */
static int fix_event_heaps(struct dump_ctx *c, struct proc_state *ps)
{
	const struct prof_dump *d = c->d;
	int err = 0;

	if (!ps->heap_names) {
		ps->heap_names = calloc(HP_MAX_HEAPS, sizeof(*ps->heap_names));
		if (!ps->heap_names)
			return -ENOMEM;
	}
	for (size_t h = 0; !err && h < d->nheaps && h < HP_MAX_HEAPS; h++) {
		const char *name = d->heaps[h].name;
		if (!name || !name[0])
			continue;
		snprintf(ps->heap_names[h], HP_HEAP_NAME_MAX, "%s", name);
		if (!(ps->heap_guessed & (1ull << h)))
			continue;
		char guess[32];
		snprintf(guess, sizeof(guess), "heap%zu", h);
		sqlite3_stmt *st = c->p->st[ST_EVENT_HEAP];
		sqlite3_bind_text(st, 1, ps->heap_names[h], -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, ps->upid);
		sqlite3_bind_text(st, 3, guess, -1, SQLITE_STATIC);
		err = step(c->p, ST_EVENT_HEAP, "naming event heaps");
		c->heaps_fixed |= 1ull << h;
	}
	return err;
}

/*
 * A dump of at least PIPE_MIN_STACKS stacks goes in batches of PIPE_BATCH
 * through a worker thread: while the worker writes one batch's callsites
 * and allocation rows into SQLite, this thread interns the next batch.
 * Interning is hash lookups that mostly miss the cache, writing is
 * SQLite's own work, and the two take about as long: on two cores a dump
 * of a million stacks takes about half the time it would in one thread.
 * Smaller dumps are one batch and take no thread.
 */
#define PIPE_MIN_STACKS 16384
#define PIPE_BATCH      32768

/* Stacks [from, to) of the dump: interned, their callsites written, and
 * with counts their allocation rows too. */
static int write_batch(struct dump_ctx *c, const struct proc_state *ps,
                       size_t from, size_t to, bool counts)
{
	const struct prof_dump *d = c->d;
	int err = intern_stacks(c, ps, from, to);
	if (!err)
		err = write_callsites(c->p);
	if (!counts)
		return err;
	for (size_t i = from; !err && i < to; i++) {
		/* Ahead: the slot a later stack will probe. */
		if (i + 8 < to)
			pairmap_prefetch(&c->merged_idx, c->leaf[i + 8],
			                 d->stacks[i + 8].heap_id);
		err = merge_stack(c, ps, c->leaf[i], &d->stacks[i]);
	}
	return err ? err : emit_allocs(c, ps->upid);
}

/* Every stack of the dump through write_batch, in batches (through the
 * worker when big), and the rows queued for them written. */
static int write_batches(struct dump_ctx *c, const struct proc_state *ps,
                         bool counts)
{
	const struct prof_dump *d = c->d;
	struct profile *p = c->p;
	bool big = d->nstacks >= PIPE_MIN_STACKS;
	size_t batch = big ? PIPE_BATCH : d->nstacks;
	int err = 0;

	wq_start(&p->wq, big);
	for (size_t from = 0; !err && from < d->nstacks; from += batch) {
		size_t before = p->callsites.len;
		size_t to =
		        d->nstacks - from > batch ? from + batch : d->nstacks;
		err = write_batch(c, ps, from, to, counts);
		/* After the first batch, room for as many new callsites per
		 * stack in the others: one rebuild of the big map instead of
		 * one per doubling. */
		if (!err && big && from == 0)
			err = pairmap_reserve(
			        &p->callsites,
			        p->callsites.len + (p->callsites.len - before) *
			                                   (d->nstacks - to) /
			                                   (to - from));
	}
	/* The synthetic frames of a dump without stacks, and anything
	 * interned after the last batch, still go through the queue. */
	if (!err)
		err = write_callsites(p);
	int qerr = wq_finish(&p->wq);
	return err ? err : qerr;
}

static int write_dump_body(struct dump_ctx *c, struct proc_state *ps)
{
	int err = write_batches(c, ps, true);
	if (!err)
		err = write_stats(c, ps->upid);
	if (!err)
		err = write_dump_row(c, ps);
	if (!err && c->d->nblocks)
		err = write_blocks(c, ps->upid);
	if (!err && ps->traced)
		err = write_trace_stacks(c, ps);
	if (!err)
		err = fix_event_heaps(c, ps);
	return err;
}

/* After COMMIT: the leaf callsites of the stacks this dump interned. */
static int remember_leaves(struct proc_state *ps, const struct dump_ctx *c)
{
	for (size_t i = 0; i < c->nnew_leaf; i++) {
		size_t k = c->new_leaf[i];
		bool added;
		struct pairmap_slot *sl = pairmap_slot(
		        &ps->stack_leaf, i64(c->d->stacks[k].key), 0, &added);
		if (!sl)
			return -ENOMEM;
		sl->v = c->leaf[k];
	}
	return 0;
}

/* After COMMIT: the keys this dump mapped, the heap names it fixed. */
static int remember_trace(struct proc_state *ps, const struct dump_ctx *c)
{
	ps->heap_guessed &= ~c->heaps_fixed;
	for (size_t i = 0; i < c->nnew_keys; i++) {
		bool added;
		struct pairmap_slot *sl = pairmap_slot(
		        &ps->tstacks, i64(c->new_keys[i]), 0, &added);
		if (!sl)
			return -ENOMEM;
		sl->v = 1;
	}
	return 0;
}

int profile_write_dump(struct profile *p, int64_t upid,
                       const struct prof_dump *d)
{
	struct proc_state *ps = proc_find(p, upid);
	struct dump_ctx c;

	if (!ps) {
		fprintf(stderr, SUBSYS "dump for unknown process %" PRId64 "\n",
		        upid);
		return -EINVAL;
	}
	/* write_ms: from the collector's first read of the region (or our
	 * start) to this dump's rows committed and remembered. */
	uint64_t t0 = d->started_ns ? d->started_ns : mono_ns();
	int err = ctx_init(&c, p, d);
	p->nnew_cs = 0;
	if (!err)
		err = exec(p, "BEGIN", "starting dump");
	if (err) {
		if (err == -ENOMEM)
			fprintf(stderr, SUBSYS "out of memory\n");
		ctx_fini(&c);
		return err;
	}
	p->saved = p->next;
	err = write_dump_body(&c, ps);
	if (!err)
		err = exec(p, "COMMIT", "committing dump");
	if (err) {
		if (err == -ENOMEM)
			fprintf(stderr, SUBSYS "out of memory\n");
		rollback(p);
	} else {
		err = remember_cum(ps, &c);
		if (!err)
			err = remember_trace(ps, &c);
		if (!err)
			err = remember_leaves(ps, &c);
		if (err)
			fprintf(stderr, SUBSYS "out of memory\n");
	}
	/* The dump in the file itself, then its write_ms, which counts that
	 * copy: the row reaches the file with the next dump's (or at
	 * close), not worth a checkpoint of its own (two fsyncs). */
	if (!err)
		err = fold_wal(p, "copying the dump into the file");
	if (!err) {
		sqlite3_stmt *st = p->st[ST_DUMP_TIME];
		sqlite3_bind_double(st, 1, (double)(mono_ns() - t0) / 1e6);
		sqlite3_bind_int64(st, 2, c.dump_id);
		err = step(p, ST_DUMP_TIME, "writing dump time");
	}
	ctx_fini(&c);
	return err;
}

/*
 * The stacks of d that no dump of upid wrote yet, interned ahead of the
 * dump that needs them (frames named, callsites written), in a
 * transaction of their own and with no dump row: a collector does this
 * while the program runs, so the dump at its exit finds its stacks
 * known.  Only d's stacks and modules are read.
 */
int profile_intern_stacks(struct profile *p, int64_t upid,
                          const struct prof_dump *d)
{
	struct proc_state *ps = proc_find(p, upid);
	struct dump_ctx c;

	if (!ps)
		return -EINVAL;
	int err = ctx_init(&c, p, d);
	p->nnew_cs = 0;
	if (!err)
		err = exec(p, "BEGIN", "interning stacks");
	if (err) {
		ctx_fini(&c);
		return err;
	}
	p->saved = p->next;
	err = write_batches(&c, ps, false);
	if (!err)
		err = exec(p, "COMMIT", "interning stacks");
	if (err)
		rollback(p);
	else
		err = remember_leaves(ps, &c);
	if (err == -ENOMEM)
		fprintf(stderr, SUBSYS "out of memory\n");
	ctx_fini(&c);
	return err;
}

/* ---- the event trace ---------------------------------------------------- */

/* The name of heap id for an event of ps: the one its dumps gave, else a
 * stand-in (remembered, so the dump that names it replaces it). */
static const char *event_heap(struct proc_state *ps, uint32_t id, char *buf,
                              size_t len)
{
	if (id < HP_MAX_HEAPS && ps->heap_names && ps->heap_names[id][0])
		return ps->heap_names[id];
	if (id == 0)
		return "libc.malloc";
	snprintf(buf, len, "heap%" PRIu32, id);
	if (id < HP_MAX_HEAPS)
		ps->heap_guessed |= 1ull << id;
	return buf;
}

/*
 * One transaction and one bulk insert for the batch: the trace can bring
 * a million rows a second (-i 1).  The heap names of the events' ids are
 * found once per id (an array), kept for the statement.
 */
int profile_write_events(struct profile *p, int64_t upid,
                         const struct prof_event *ev, size_t n)
{
	struct proc_state *ps = proc_find(p, upid);
	if (!ps) {
		fprintf(stderr,
		        SUBSYS "events for unknown process %" PRId64 "\n",
		        upid);
		return -EINVAL;
	}
	if (!n)
		return 0;
	struct event_row *rows = malloc(n * sizeof(*rows));
	/* Stand-in names: by id below HP_MAX_HEAPS, else (a client that
	 * wrote a bad id) by row. */
	char names[HP_MAX_HEAPS][32];
	const char *name_of[HP_MAX_HEAPS] = {NULL};
	char(*odd)[32] = NULL;
	int err = rows ? 0 : -ENOMEM;
	for (size_t i = 0; !err && i < n; i++) {
		const struct prof_event *e = &ev[i];
		bool is_free = e->kind == HP_EV_FREE;
		const char *heap;
		uint32_t h = e->heap_id;
		if (h < HP_MAX_HEAPS) {
			if (!name_of[h])
				name_of[h] = event_heap(ps, h, names[h],
				                        sizeof(names[h]));
			heap = name_of[h];
		} else {
			if (!odd && !(odd = malloc(n * sizeof(*odd)))) {
				err = -ENOMEM;
				break;
			}
			heap = event_heap(ps, h, odd[i], sizeof(odd[i]));
		}
		rows[i] = (struct event_row){
		        .ts = i64(e->ts_ns),
		        .kind = is_free ? "free" : "alloc",
		        .tid = e->tid,
		        .address = i64(e->address),
		        .size = i64(e->size),
		        .charged = i64(e->charged),
		        .heap = heap,
		        .stack_key = i64(e->stack_key),
		        /* An allocation's time is its own ts; a free whose
		         * block's time is unknown keeps NULL (0). */
		        .alloc_ts = is_free ? i64(e->alloc_ts_ns) : 0,
		};
	}
	if (!err)
		err = exec(p, "BEGIN", "writing events");
	if (!err) {
		p->bulk[BK_EVENT].rows = rows;
		p->bulk[BK_EVENT].nrows = n;
		sqlite3_bind_int64(p->st[ST_EVENT], 1, upid);
		err = step(p, ST_EVENT, "writing events");
		p->bulk[BK_EVENT].nrows = 0;
		if (!err)
			err = exec(p, "COMMIT", "writing events");
		if (err)
			sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
	}
	if (err == -ENOMEM)
		fprintf(stderr, SUBSYS "out of memory\n");
	free(odd);
	free(rows);
	return err;
}

int profile_set_trace(struct profile *p, int64_t upid,
                      const struct prof_trace *t)
{
	struct proc_state *ps = proc_find(p, upid);
	if (!ps) {
		fprintf(stderr, SUBSYS "trace of unknown process %" PRId64 "\n",
		        upid);
		return -EINVAL;
	}
	sqlite3_stmt *st = p->st[ST_TRACE];
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, t->mode ? t->mode : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, i64(t->buffer_bytes));
	sqlite3_bind_int64(st, 4, i64(t->events));
	sqlite3_bind_int64(st, 5, i64(t->dropped_allocs));
	sqlite3_bind_int64(st, 6, i64(t->dropped_frees));
	sqlite3_bind_int64(st, 7, i64(t->dropped_alloc_bytes));
	sqlite3_bind_int64(st, 8, i64(t->dropped_free_bytes));
	sqlite3_bind_int64(st, 9, i64(t->overwritten));
	sqlite3_bind_int64(st, 10, i64(t->incomplete));
	if (t->full_ts_ns)
		sqlite3_bind_int64(st, 11, i64(t->full_ts_ns));
	sqlite3_bind_int64(st, 12, i64(t->waits));
	sqlite3_bind_int64(st, 13, i64(t->wait_ns));
	int err = step(p, ST_TRACE, "writing the trace summary");
	/* From now on its dumps map stack keys for its events. */
	if (!err)
		ps->traced = true;
	return err;
}

/* ---- close -------------------------------------------------------------- */

static void free_state(struct profile *p)
{
	for (size_t i = 0; i < p->nprocs; i++) {
		pairmap_free(&p->procs[i].prev);
		pairmap_free(&p->procs[i].tstacks);
		pairmap_free(&p->procs[i].stack_leaf);
		free(p->procs[i].cum);
		free(p->procs[i].heap_names);
	}
	free(p->procs);
	hmap_free(&p->mappings);
	hmap_free(&p->frames);
	pairmap_free(&p->callsites);
	free(p->new_cs);
	symbolizer_free(p->sym);
}

/* Close the database (folding the WAL back in if fold) and free p. */
static int destroy(struct profile *p, int fold)
{
	int err = 0;

	for (int i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(p->st[i]);
	if (p->db) {
		/* Fold the WAL back in: one self-contained file. */
		/* While the checkpointer copies the last dump into the file. */
		if (fold && sqlite3_get_autocommit(p->db))
			err = exec(p, profile_index_sql, "creating indexes");
		ckpt_stop(p->ckpt);
		p->ckpt = NULL;
		if (fold && !err && sqlite3_get_autocommit(p->db))
			err = exec(p,
			           "PRAGMA wal_checkpoint(TRUNCATE);"
			           " PRAGMA journal_mode=DELETE;",
			           "closing");
		int rc = sqlite3_close(p->db);
		if (rc != SQLITE_OK && !err) {
			errors_said++;
			fprintf(stderr, SUBSYS "closing: %s\n",
			        sqlite3_errstr(rc));
			err = errno_of(rc);
		}
	}
	free_state(p);
	free(p->path);
	free(p);
	return err;
}

int profile_set_meta(struct profile *p, const char *key, const char *value)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(p->db,
	                            "INSERT OR REPLACE INTO heapprof_meta(key,"
	                            " value) VALUES(?, ?)",
	                            -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, value ? value : "", -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK ? 0 : sql_err(p, rc, "writing metadata");
}

int profile_close(struct profile *p)
{
	return p ? destroy(p, 1) : 0;
}
