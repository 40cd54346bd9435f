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
 * allocation rows) and, past PIPE_MIN_STACKS (writer_dump.c), in batches
 * through a worker thread (workq.h) while this thread interns the next
 * batch.  The WAL is folded into the file at the end of each dump, so
 * that the file alone holds every dump written (a copy without its -wal
 * file, or the file of a record that was killed, reads whole), and after
 * big commits by a thread of its own (ckpt.h); the heapprof_dump row says
 * how long the dump took (write_ms).
 *
 * A full disk costs the profile, never the session: write errors are not
 * printed here but kept (the first one), the dumps that fail are counted,
 * and at the end (profile_finish) the file is left whole without its
 * -wal and -shm files: every commit copied into it when there is room,
 * else what the last checkpoint copied (ckpt.h: a checkpoint is made with
 * its room reserved or not at all), counted and checked; a file that kept
 * no dump is removed.  The caller says what became of it, in one line.
 *
 * This file holds the file itself: creating it with its schema and
 * statements, keeping write errors, metadata, closing it.  Process rows
 * are writer_process.c; mappings, frames and callsites writer_stacks.c;
 * a dump's transaction writer_dump.c and its rows writer_rows.c; the
 * event trace writer_trace.c; their shared state writer_int.h.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "store/ckpt.h"
#include "store/schema.h"
#include "store/trace_read.h"
#include "store/writer_int.h"
#include "symbolize/symbolize.h"
#include "util/err.h"
#include "util/human.h"

#ifndef HEAPPROF_VERSION
#define HEAPPROF_VERSION "0.1.0"
#endif

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
        [ST_EVENT_CHUNK] = "INSERT INTO heapprof_event_chunk(upid, events,"
                           " allocs, min_ts, max_ts, data)"
                           " VALUES(?, ?, ?, ?, ?, ?)",
        [ST_EVENT_HEAP_NEW] = "INSERT OR REPLACE INTO heapprof_event_heap(upid,"
                              " id, name) VALUES(?, ?, ?)",
        [ST_TRACE_STACK] = "INSERT OR IGNORE INTO heapprof_trace_stack(upid,"
                           " stack_key, callsite_id) SELECT ?1, key,"
                           " callsite FROM heapprof_new_trace_stack",
        [ST_TRACE] = "INSERT OR REPLACE INTO heapprof_trace(upid, mode,"
                     " buffer_bytes, events, dropped_allocs, dropped_frees,"
                     " dropped_alloc_bytes, dropped_free_bytes, overwritten,"
                     " incomplete, full_ts, waits, wait_ns)"
                     " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        /* Events written before a dump named their heap: see
         * wr_fix_event_heaps. */
        [ST_EVENT_HEAP] = "UPDATE heapprof_event_heap SET name = ?1"
                          " WHERE upid = ?2 AND name = ?3",
        [ST_COUNTER_TRACK] = "INSERT INTO process_counter_track(name, upid,"
                             " unit, description) VALUES(?, ?, ?, ?)",
        [ST_COUNTER] = "INSERT INTO counter(ts, track_id, value)"
                       " VALUES(?, ?, ?)",
        [ST_ALLOC_MAX_ID] = "SELECT coalesce(max(id), 0)"
                            " FROM heap_profile_allocation",
        [ST_FOLD_ROWS] = "UPDATE heap_profile_allocation SET ts = ?1"
                         " WHERE id BETWEEN ?2 AND ?3 AND upid = ?4",
        [ST_FOLD_DUMP] = "DELETE FROM heapprof_dump WHERE id = ?1",
        [ST_FOLD_MEMORY] = "DELETE FROM heapprof_dump_memory"
                           " WHERE upid = ?1 AND ts = ?2",
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

/* The file size limit, by name and value. */
static const char *fsize_text(char *buf, size_t len)
{
	struct rlimit rl;
	char b[HP_FMT_BYTES_MAX];
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < INT64_MAX)
		snprintf(
		        buf, len, "the file size limit was hit (ulimit -f: %s)",
		        hp_fmt_bytes_short(b, sizeof(b), (int64_t)rl.rlim_cur));
	else
		snprintf(buf, len, "the file size limit was hit");
	return buf;
}

/* Why an SQLite call failed, in words: the file size limit by name (SQLite
 * would say "disk I/O error"), else SQLite's message. */
static const char *err_text(const struct profile *p, int rc, char *buf,
                            size_t len)
{
	if (hit_fsize(p, rc))
		return fsize_text(buf, len);
	return p && p->db ? sqlite3_errmsg(p->db) : sqlite3_errstr(rc);
}

/* rc as a negative errno: a full disk or quota by the system's errno
 * (SQLite says "disk I/O error" for EDQUOT and for ENOSPC outside a
 * write), the file size limit as EFBIG. */
static int errno_of_p(const struct profile *p, int rc)
{
	if (hit_fsize(p, rc))
		return -EFBIG;
	int sys = p && p->db ? sqlite3_system_errno(p->db) : 0;
	if (((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN) &&
	    (sys == ENOSPC || sys == EDQUOT))
		return -sys;
	return errno_of(rc);
}

static bool is_no_room(int err)
{
	return err == -ENOSPC || err == -EDQUOT || err == -EFBIG;
}

/* The first error, in words (see struct profile_status). */
static void keep_err(struct profile *p, int err, const char *why)
{
	if (p->status.err)
		return;
	p->status.err = err;
	p->status.no_room = is_no_room(err);
	snprintf(p->status.why, sizeof(p->status.why), "%s", why);
}

int wr_err(struct profile *p, int err, const char *what)
{
	char why[160];
	if (err == -EFBIG)
		fsize_text(why, sizeof(why));
	else if (is_no_room(err) || !what)
		snprintf(why, sizeof(why), "%s", strerror(-err));
	else
		snprintf(why, sizeof(why), "%s (%s)", strerror(-err), what);
	keep_err(p, err, why);
	return err;
}

/*
 * Keep the SQLite error for `what` and return it as a negative errno.  A
 * full disk fails every dump after the first that does not fit: the first
 * error is what the caller says at the end, with what the file kept
 * (profile_finish).  Every dump is its own transaction, so what was
 * committed before stays readable.
 */
int wr_sql_err(struct profile *p, int rc, const char *what)
{
	int err = errno_of_p(p, rc);
	if (p->status.err)
		return err;
	if (is_no_room(err))
		return wr_err(p, err, what);
	/* A limit of the process is what the user must change: name it
	 * (SQLite says "unable to open database file"). */
	char hint[96] = "", why[96];
	struct rlimit rl;
	if (p->db && sqlite3_system_errno(p->db) == EMFILE &&
	    getrlimit(RLIMIT_NOFILE, &rl) == 0)
		snprintf(hint, sizeof(hint),
		         ": too many open files, the limit (ulimit -n) is %llu",
		         (unsigned long long)rl.rlim_cur);
	char text[sizeof(p->status.why)];
	snprintf(text, sizeof(text), "%s%s (%s)",
	         err_text(p, rc, why, sizeof(why)), hint, what);
	keep_err(p, err, text);
	return err;
}

/*
 * A transaction is committed only once the database file has room for
 * it: a checkpoint that a reader holds back, or one made at the close,
 * then cannot fail for room (the blocks are the file's; a complete
 * checkpoint gives back what it did not use).
 */
int wr_commit(struct profile *p, const char *what)
{
	/* Inside the transaction, ckpt_room sees its size. */
	int room = ckpt_room(p->fd, p->db);
	return room ? wr_err(p, room, what) : exec(p, "COMMIT", what);
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
 * them too.  0, or the error kept (no room: nothing copied, ckpt.h).
 */
int wr_fold_wal(struct profile *p, const char *what)
{
	int room = 0;
	int rc = ckpt_now(p->ckpt, p->db, p->fd, &room);
	if (room)
		return wr_err(p, room, what);
	return rc == SQLITE_OK || rc == SQLITE_BUSY ? 0
	                                            : wr_sql_err(p, rc, what);
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
	return rc == SQLITE_OK ? 0 : wr_sql_err(p, rc, "writing metadata");
}

/* The profile file and the side files SQLite may make beside it. */
static const char *const side_suffix[] = {"", "-wal", "-shm", "-journal"};
#define NSIDE (sizeof(side_suffix) / sizeof(side_suffix[0]))

/* Remove path's side files from `from` on (1: all but the file itself). */
static void remove_files(const char *path, size_t from)
{
	char buf[4096];
	for (size_t i = from; i < NSIDE; i++)
		if (snprintf(buf, sizeof(buf), "%s%s", path, side_suffix[i]) <
		    (int)sizeof(buf))
			unlink(buf);
}

/*
 * Remove an old profile and its SQLite side files, so nothing is replayed,
 * then create the file, kept open as p->fd.  Only regular files are
 * replaced: run as root, an unlink of whatever -o names would take
 * /dev/full or a socket with it.  Creating the file here, not in SQLite,
 * gives the system's reason (ENOTDIR, EROFS, EACCES, ...) instead of
 * "unable to open database file".
 */
static int create_file(struct profile *p, const char *path)
{
	char buf[4096], why[160];

	for (size_t i = 0; i < NSIDE; i++) {
		if (snprintf(buf, sizeof(buf), "%s%s", path, side_suffix[i]) >=
		    (int)sizeof(buf)) {
			keep_err(p, -ENAMETOOLONG, "file name too long");
			return -ENAMETOOLONG;
		}
		/* The file itself, or its side file by name. */
		char side[24] = "";
		if (i)
			snprintf(side, sizeof(side), "its %s file ",
			         side_suffix[i]);
		struct stat sb;
		if (stat(buf, &sb) == 0 && !S_ISREG(sb.st_mode)) {
			int err = S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL;
			snprintf(why, sizeof(why),
			         "%sis %s, not a profile file: not replaced",
			         side, hp_file_kind(sb.st_mode));
			keep_err(p, err, why);
			return err;
		}
		if (unlink(buf) < 0 && errno != ENOENT) {
			int err = -errno;
			snprintf(why, sizeof(why), "%scannot replace: %s", side,
			         strerror(errno));
			keep_err(p, err, why);
			return err;
		}
	}
	p->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (p->fd < 0) {
		int err = -errno;
		/* No room for a new file is a full disk too. */
		if (is_no_room(err))
			return wr_err(p, err, NULL);
		snprintf(why, sizeof(why), "cannot create: %s",
		         strerror(errno));
		keep_err(p, err, why);
		return err;
	}
	return 0;
}

static int open_db(struct profile *p, const char *path)
{
	/* One thread per connection: SQLite's own mutexes are not needed. */
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	            SQLITE_OPEN_NOMUTEX;
	int rc = sqlite3_open_v2(path, &p->db, flags, NULL);
	if (rc != SQLITE_OK)
		return wr_sql_err(p, rc, "opening");
	/*
	 * WAL: the main file changes only at checkpoints, so a crash
	 * mid-dump leaves earlier dumps intact in .db + .db-wal, and
	 * readers read while a dump is written.  Each dump is checkpointed
	 * at its end (wr_fold_wal): the .db alone holds the earlier dumps too.
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
	/* heapprof_event, the events of the chunks as rows. */
	if (!err && tr_events_register(p->db) != SQLITE_OK)
		err = wr_sql_err(p, sqlite3_errcode(p->db), "creating schema");
	if (!err)
		err = exec(p, "BEGIN", "creating schema");
	if (!err)
		err = exec(p, profile_schema_sql, "creating schema");
	for (int i = 0; !err && i < BK_COUNT; i++) {
		p->bulk[i] = bulk_tmpl[i];
		int brc = bulk_register(p->db, &p->bulk[i]);
		if (brc != SQLITE_OK)
			err = wr_sql_err(p, brc, "preparing statements");
	}
	for (int i = 0; !err && i < ST_COUNT; i++) {
		int prc = sqlite3_prepare_v3(p->db, stmt_sql[i], -1,
		                             SQLITE_PREPARE_PERSISTENT,
		                             &p->st[i], NULL);
		if (prc != SQLITE_OK)
			err = wr_sql_err(p, prc, "preparing statements");
	}
	return err;
}

static void discard(struct profile *p);

struct profile *profile_open(const char *path, const char *record_cmdline,
                             struct profile_status *st)
{
	struct profile *p = calloc(1, sizeof(*p));
	if (p)
		jobq_init(&p->wq, JOBQ_STOP_ON_ERROR, 0);

	if (!p) {
		*st = (struct profile_status){.err = -ENOMEM};
		snprintf(st->why, sizeof(st->why), "out of memory");
		return NULL;
	}
	p->fd = -1;
	hmap_init(&p->mappings);
	hmap_init(&p->frames);
	pairmap_init(&p->callsites);
	p->next = (struct next_ids){1, 1, 1};
	p->sym = symbolizer_new();
	p->path = strdup(path);
	int err = p->sym && p->path ? create_file(p, path) : -ENOMEM;
	if (!err)
		err = open_db(p, path);
	if (!err)
		err = write_meta(p, record_cmdline);
	if (!err)
		err = wr_commit(p, "creating schema");
	/* An empty profile in the file itself, before the first dump. */
	if (!err)
		err = wr_fold_wal(p, "creating schema");
	if (err) {
		wr_err(p, err, "creating it");
		*st = p->status;
		discard(p);
		return NULL;
	}
	/* 1000 pages: SQLite's own threshold (4 MiB). */
	p->ckpt = ckpt_start(p->db, path, 1000, p->fd);
	*st = p->status;
	return p;
}

struct profile *profile_create(const char *path, const char *record_cmdline)
{
	struct profile_status st;
	struct profile *p = profile_open(path, record_cmdline, &st);
	if (!p)
		hp_log(SUBSYS "%s: %s\n", path, st.why);
	return p;
}

static void free_state(struct profile *p)
{
	for (size_t i = 0; i < p->nprocs; i++) {
		pairmap_free(&p->procs[i].prev);
		pairmap_free(&p->procs[i].tstacks);
		pairmap_free(&p->procs[i].stack_leaf);
		free(p->procs[i].cum);
		free(p->procs[i].heap_names);
		wr_free_trace(&p->procs[i]);
	}
	free(p->procs);
	free(p->tracks);
	hmap_free(&p->mappings);
	hmap_free(&p->frames);
	pairmap_free(&p->callsites);
	free(p->new_cs);
	symbolizer_free(p->sym);
	evc_enc_free(p->enc);
}

static void finalize_all(struct profile *p)
{
	for (int i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(p->st[i]);
		p->st[i] = NULL;
	}
}

/* A profile that could not be made: closed as it is (SQLite's checkpoint
 * at the close would want room too) and removed with its side files. */
static void discard(struct profile *p)
{
	finalize_all(p);
	if (p->db) {
		sqlite3_db_config(p->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
		                  NULL);
		sqlite3_close_v2(p->db);
		p->db = NULL;
	}
	if (p->fd >= 0) {
		remove_files(p->path, 0);
		close(p->fd);
	}
	profile_free(p);
}

/*
 * The file alone, its WAL dropped (no room to copy it in), is in the state
 * the last checkpoint left, which was whole (ckpt.h); its header still
 * says WAL, so SQLite would look for the -wal and -shm files again (and
 * make a -shm to read it).  The header's file format bytes say rollback
 * journal instead, as `PRAGMA journal_mode=DELETE` would write them if it
 * could run (it wants the WAL, a -shm and a journal, so room).  Written in
 * place: no room needed.
 */
static int header_to_rollback(int fd)
{
	unsigned char h[20];
	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, "SQLite format 3", 16) != 0)
		return -EINVAL;
	if (h[18] == 1 && h[19] == 1)
		return 0;
	if (h[18] != 2 || h[19] != 2)
		return -EINVAL;
	static const unsigned char legacy[2] = {1, 1};
	return pwrite(fd, legacy, 2, 18) == 2 ? 0 : -EIO;
}

/* Whether the file is as long as its header says (the reader's check: a
 * page missing at the end reads as zeros). */
static bool whole_length(int fd)
{
	unsigned char h[32];
	struct stat sb;
	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    fstat(fd, &sb) != 0)
		return false;
	uint32_t page = (uint32_t)h[16] << 8 | h[17];
	if (page == 1)
		page = 65536;
	uint64_t pages = (uint64_t)h[28] << 24 | (uint64_t)h[29] << 16 |
	                 (uint64_t)h[30] << 8 | h[31];
	return page >= 512 && sb.st_size % page == 0 &&
	       (uint64_t)sb.st_size >= pages * page;
}

/*
 * After a write error: what the file left holds, read back (a checked
 * database, its dumps and events counted), so that what the caller says
 * is what is there.  A file that is damaged or kept no dump is removed.
 */
static void count_file(struct profile *p)
{
	struct profile_status *st = &p->status;
	st->dumps = p->dumps_tried;
	st->events = p->events_tried;
	st->dumps_kept = st->events_kept = -1;
	sqlite3 *db = NULL;
	/* (A header still saying WAL would have SQLite make a -shm.) */
	bool ok = !st->damaged && p->fd >= 0 && whole_length(p->fd) &&
	          sqlite3_open_v2(p->path, &db, SQLITE_OPEN_READONLY, NULL) ==
	                  SQLITE_OK;
	sqlite3_stmt *q = NULL;
	if (ok &&
	    sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &q, NULL) ==
	            SQLITE_OK &&
	    sqlite3_step(q) == SQLITE_ROW) {
		const unsigned char *r = sqlite3_column_text(q, 0);
		ok = r && !strcmp((const char *)r, "ok");
	} else {
		ok = false;
	}
	sqlite3_finalize(q);
	if (ok)
		st->dumps_kept = ckpt_query_int(db, "SELECT count(*) FROM"
		                                    " heapprof_dump");
	if (ok && st->dumps_kept >= 0 &&
	    sqlite3_prepare_v2(db,
	                       "SELECT upid, sum(events) FROM"
	                       " heapprof_event_chunk GROUP BY upid",
	                       -1, &q, NULL) == SQLITE_OK) {
		st->events_kept = 0;
		while (sqlite3_step(q) == SQLITE_ROW) {
			struct proc_state *ps =
			        wr_proc_find(p, sqlite3_column_int64(q, 0));
			int64_t n = sqlite3_column_int64(q, 1);
			if (ps)
				ps->events_kept = n;
			st->events_kept += n;
		}
		sqlite3_finalize(q);
	}
	sqlite3_close(db);
	if (st->dumps_kept < 0 || st->events_kept < 0) {
		st->damaged = true;
		st->dumps_kept = st->events_kept = 0;
	}
	/* Once a dump failed, a later one kept means the lost ones are not
	 * just the last ones (the kept ones are the first dumps_kept of the
	 * dumps before the first failure, and those after it kept). */
	st->lost_last =
	        p->first_failed > 0 && st->dumps_kept == p->first_failed - 1;
	/* A profile is its dumps (the events' stacks come with them): a
	 * file without one is no profile. */
	if (st->damaged || st->dumps_kept == 0) {
		remove_files(p->path, 0);
		st->removed = true;
		st->dumps_kept = st->events_kept = 0;
	}
	for (size_t i = 0; i < p->nprocs; i++)
		if (p->procs[i].events_kept < 0 || st->removed)
			p->procs[i].events_kept = 0;
}

int profile_finish(struct profile *p, struct profile_status *st)
{
	int err = 0;

	if (!p) {
		*st = (struct profile_status){0};
		return 0;
	}
	/* The events still waiting for a chunk (an error is kept). */
	if (p->db && sqlite3_get_autocommit(p->db))
		wr_flush_all_events(p);
	finalize_all(p);
	if (p->db) {
		bool idle = sqlite3_get_autocommit(p->db);
		/* What is committed into the file first, the indexes on top:
		 * on a full disk they must not cost a dump.  They only speed
		 * up reading (a killed record's file has none): a failure to
		 * make them, or to copy them in, is not an error. */
		bool folded = idle && wr_fold_wal(p, "copying the last dumps"
		                                     " into the file") == 0;
		if (folded)
			sqlite3_exec(p->db, profile_index_sql, NULL, NULL,
			             NULL);
		ckpt_stop(p->ckpt);
		p->ckpt = NULL;
		/* Fold the WAL back in: one self-contained file.  Without
		 * room for it, the file keeps what the last checkpoint copied
		 * into it and the rest is dropped with the WAL (after the
		 * fold above: the indexes only). */
		int room = ckpt_room(p->fd, p->db);
		if (room && !folded)
			wr_err(p, room, "closing");
		else if (!room && idle)
			err = exec(p,
			           "PRAGMA wal_checkpoint(TRUNCATE);"
			           " PRAGMA journal_mode=DELETE;",
			           "closing");
		if (room)
			sqlite3_db_config(p->db,
			                  SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
			                  NULL);
		int rc = sqlite3_close(p->db);
		p->db = NULL;
		if (rc != SQLITE_OK && !err)
			err = wr_sql_err(p, rc, "closing");
		if (room) {
			remove_files(p->path, 1);
			if (header_to_rollback(p->fd) != 0) {
				wr_err(p, -EIO, "closing");
				p->status.damaged = true;
			}
		}
	}
	if (p->status.err)
		count_file(p);
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	*st = p->status;
	return err;
}

int64_t profile_events_kept(const struct profile *p, int64_t upid)
{
	for (size_t i = 0; p && i < p->nprocs; i++)
		if (p->procs[i].upid == upid)
			return p->procs[i].events_kept;
	return -1;
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	if (p->db)
		profile_finish(p, &(struct profile_status){0});
	free_state(p);
	free(p->path);
	free(p);
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
	return rc == SQLITE_OK ? 0 : wr_sql_err(p, rc, "writing metadata");
}

int profile_close(struct profile *p)
{
	struct profile_status st;
	int err = profile_finish(p, &st);
	profile_free(p);
	return err;
}
