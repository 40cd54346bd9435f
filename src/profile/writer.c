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
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profile/profile.h"
#include "profile/schema.h"
#include "symbolize/symbolize.h"
#include "util/hmap.h"

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
	uint64_t interval; /* configured; a dump's 0 interval_used means it */
	struct hmap prev;  /* (callsite id, heap id) -> index into cum */
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
	struct hmap tstacks;
};

/* One (callsite, heap) of the dump being written, stacks merged. */
struct merged {
	int64_t callsite;
	uint32_t heap_id;
	uint64_t alloc_objs_fp, alloc_bytes, free_objs_fp, free_bytes;
	uint64_t alloc_count, free_count;
};

enum stmt_id {
	ST_MAPPING,
	ST_FRAME,
	ST_CALLSITE,
	ST_ALLOC,
	ST_DUMP,
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
                       " name) VALUES(?, 'stack_profile_mapping', ?, ?, 0, ?,"
                       " ?, ?, ?)",
        [ST_FRAME] =
                "INSERT INTO stack_profile_frame(id, type, name, mapping,"
                " rel_pc, symbol_set_id, deobfuscated_name, system_name)"
                " VALUES(?, 'stack_profile_frame', ?, ?, ?, NULL, NULL, ?)",
        [ST_CALLSITE] =
                "INSERT INTO stack_profile_callsite(id, type, depth,"
                " parent_id, frame_id) VALUES(?, 'stack_profile_callsite',"
                " ?, ?, ?)",
        [ST_ALLOC] = "INSERT INTO heap_profile_allocation(type, ts, upid,"
                     " heap_name, callsite_id, count, size)"
                     " VALUES('heap_profile_allocation', ?, ?, ?, ?, ?, ?)",
        [ST_DUMP] = "INSERT INTO heapprof_dump(ts, upid, reason, at_max,"
                    " max_ts, max_live_bytes, interval_used, name,"
                    " blocks_in_flight) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                     " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [ST_EVENT] = "INSERT INTO heapprof_event(upid, ts, kind, tid, address,"
                     " size, charged, heap_name, stack_key, alloc_ts)"
                     " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [ST_TRACE_STACK] = "INSERT OR IGNORE INTO heapprof_trace_stack(upid,"
                           " stack_key, callsite_id) VALUES(?, ?, ?)",
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
};

/* Row ids we assign; saved at BEGIN so a rollback can restore them. */
struct next_ids {
	int64_t mapping, frame, callsite;
};

struct profile {
	sqlite3 *db;
	sqlite3_stmt *st[ST_COUNT];
	struct symbolizer *sym;
	struct hmap mappings;  /* serialized mapping -> id */
	struct hmap frames;    /* (mapping id, rel_pc) -> id */
	struct hmap callsites; /* (parent id or 0, frame id) -> id */
	struct next_ids next, saved;
	struct proc_state *procs;
	size_t nprocs;
};

/* The state of one profile_write_dump call. */
struct dump_ctx {
	struct profile *p;
	const struct prof_dump *d;
	size_t *order;          /* module indices sorted by start */
	int64_t *map_ids;       /* per module: mapping id, 0 until interned */
	struct hmap merged_idx; /* (callsite, heap id) -> index into merged */
	struct merged *merged;
	size_t nmerged, capmerged;
	int64_t *leaf;      /* per stack: its leaf callsite */
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

/* Print the SQLite error for `what` and return it as a negative errno. */
static int sql_err(struct profile *p, int rc, const char *what)
{
	fprintf(stderr, SUBSYS "%s: %s\n", what,
	        p->db ? sqlite3_errmsg(p->db) : sqlite3_errstr(rc));
	return errno_of(rc);
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

/* Remove an old profile and its SQLite side files, so nothing is replayed. */
static int remove_old(const char *path)
{
	static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
	char buf[4096];

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		if (snprintf(buf, sizeof(buf), "%s%s", path, suffix[i]) >=
		    (int)sizeof(buf))
			return -ENAMETOOLONG;
		if (unlink(buf) < 0 && errno != ENOENT) {
			int err = -errno;
			fprintf(stderr, SUBSYS "%s: cannot remove: %s\n", buf,
			        strerror(errno));
			return err;
		}
	}
	return 0;
}

static int open_db(struct profile *p, const char *path)
{
	/* One thread per connection: SQLite's own mutexes are not needed. */
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	            SQLITE_OPEN_NOMUTEX;
	int rc = sqlite3_open_v2(path, &p->db, flags, NULL);
	if (rc != SQLITE_OK) {
		fprintf(stderr, SUBSYS "%s: %s\n", path,
		        p->db ? sqlite3_errmsg(p->db) : sqlite3_errstr(rc));
		return errno_of(rc);
	}
	/*
	 * WAL: the main file changes only at checkpoints, so a crash
	 * mid-dump leaves earlier dumps intact in .db + .db-wal.
	 */
	int err = exec(p,
	               "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
	               " PRAGMA cache_size=-32768;",
	               "setting journal mode");
	if (!err)
		err = exec(p, "BEGIN", "creating schema");
	if (!err)
		err = exec(p, profile_schema_sql, "creating schema");
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
	hmap_init(&p->callsites);
	p->next = (struct next_ids){1, 1, 1};
	p->sym = symbolizer_new();
	int err = p->sym ? remove_old(path) : -ENOMEM;
	if (!err)
		err = open_db(p, path);
	if (!err)
		err = write_meta(p, record_cmdline);
	if (!err)
		err = exec(p, "COMMIT", "creating schema");
	if (err) {
		if (err == -ENOMEM)
			fprintf(stderr, SUBSYS "out of memory\n");
		destroy(p, 0);
		return NULL;
	}
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
	        " start_ts, end_ts) VALUES(?, ?, ?, ?, NULL)",
	        -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int(st, 1, info->pid);
		sqlite3_bind_text(st, 2, info->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, info->cmdline, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, i64(info->start_ts_ns));
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
	hmap_init(&ps->prev);
	hmap_init(&ps->tstacks);
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

static int insert_mapping(struct profile *p, int64_t id,
                          const struct mapping_row *m)
{
	sqlite3_stmt *st = p->st[ST_MAPPING];
	char hex[2 * 256 + 1];

	sqlite3_bind_int64(st, 1, id);
	if (m->build_id_len && m->build_id_len <= 256)
		sqlite3_bind_text(
		        st, 2, symbolize_hex(hex, m->build_id, m->build_id_len),
		        -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, i64(m->exact_offset));
	sqlite3_bind_int64(st, 4, i64(m->start));
	sqlite3_bind_int64(st, 5, i64(m->end));
	sqlite3_bind_int64(st, 6, i64(m->load_bias));
	sqlite3_bind_text(st, 7, m->name, -1, SQLITE_STATIC);
	return step(p, ST_MAPPING, "writing mapping");
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

static int insert_frame(struct profile *p, int64_t id, int64_t mapping,
                        uint64_t rel_pc, const struct sym_result *sym)
{
	sqlite3_stmt *st = p->st[ST_FRAME];

	sqlite3_bind_int64(st, 1, id);
	if (sym->name)
		sqlite3_bind_text(st, 2, sym->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, mapping);
	sqlite3_bind_int64(st, 4, i64(rel_pc));
	if (sym->system_name)
		sqlite3_bind_text(st, 5, sym->system_name, -1, SQLITE_STATIC);
	return step(p, ST_FRAME, "writing frame");
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
		sym.name = (char *)fixed;
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
	if (!fixed)
		sym_result_fini(&sym);
	return err;
}

static int intern_callsite(struct profile *p, int64_t parent, int64_t frame,
                           uint32_t depth, int64_t *id)
{
	int64_t key[2] = {parent, frame};
	int64_t *found = hmap_find(&p->callsites, key, sizeof(key));

	if (found) {
		*id = *found;
		return 0;
	}
	sqlite3_stmt *st = p->st[ST_CALLSITE];
	*id = p->next.callsite;
	sqlite3_bind_int64(st, 1, *id);
	sqlite3_bind_int64(st, 2, depth);
	if (parent) /* ids start at 1; 0 means root, stored as NULL */
		sqlite3_bind_int64(st, 3, parent);
	sqlite3_bind_int64(st, 4, frame);
	int err = step(p, ST_CALLSITE, "writing callsite");
	if (!err)
		err = hmap_put(&p->callsites, key, sizeof(key), *id);
	if (!err)
		p->next.callsite++;
	return err;
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
	hmap_init(&c->merged_idx);
	c->order = malloc((n ? n : 1) * sizeof(*c->order));
	c->map_ids = calloc(n ? n : 1, sizeof(*c->map_ids));
	c->leaf = calloc(d->nstacks ? d->nstacks : 1, sizeof(*c->leaf));
	if (!c->order || !c->map_ids || !c->leaf)
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
	free(c->new_keys);
	free(c->merged);
	hmap_free(&c->merged_idx);
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

static int pc_frame(struct dump_ctx *c, uint64_t pc, int64_t *frame)
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

/* Intern a stack's callsites, outermost first; *leaf gets the last one. */
static int stack_callsite(struct dump_ctx *c, const struct prof_stack *s,
                          int64_t *leaf)
{
	int64_t parent = 0, frame, mapping;
	int err;

	if ((s->flags & HP_STACK_OVERFLOW) || s->nframes == 0 || !s->pcs) {
		int full = (s->flags & HP_STACK_OVERFLOW) != 0;
		err = intern_special_mapping(c->p, MAPPING_HEAPPROF, &mapping);
		if (!err)
			err = intern_frame(c->p, mapping, full ? 0 : 1, NULL,
			                   full ? FRAME_STACK_FULL_NAME
			                        : FRAME_EMPTY_NAME,
			                   &frame);
		return err ? err : intern_callsite(c->p, 0, frame, 0, leaf);
	}
	for (uint32_t depth = 0; depth < s->nframes; depth++) {
		err = pc_frame(c, s->pcs[s->nframes - 1 - depth], &frame);
		if (!err)
			err = intern_callsite(c->p, parent, frame, depth,
			                      &parent);
		if (err)
			return err;
	}
	*leaf = parent;
	return 0;
}

static int merge_stack(struct dump_ctx *c, int64_t callsite,
                       const struct prof_stack *s)
{
	int64_t key[2] = {callsite, s->heap_id};
	int64_t *idx = hmap_find(&c->merged_idx, key, sizeof(key));
	struct merged *m;

	if (idx) {
		m = &c->merged[*idx];
	} else {
		if (c->nmerged == c->capmerged) {
			size_t cap = c->capmerged ? c->capmerged * 2 : 256;
			m = realloc(c->merged, cap * sizeof(*m));
			if (!m)
				return -ENOMEM;
			c->merged = m;
			c->capmerged = cap;
		}
		int err = hmap_put(&c->merged_idx, key, sizeof(key),
		                   (int64_t)c->nmerged);
		if (err)
			return err;
		m = &c->merged[c->nmerged++];
		memset(m, 0, sizeof(*m));
		m->callsite = callsite;
		m->heap_id = s->heap_id;
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

static const struct cum *prev_cum(const struct proc_state *ps,
                                  const struct merged *m)
{
	int64_t key[2] = {m->callsite, m->heap_id};
	int64_t *idx = hmap_find(&ps->prev, key, sizeof(key));
	return idx ? &ps->cum[*idx] : NULL;
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

static int insert_alloc(struct profile *p, int64_t ts, int64_t upid,
                        const char *heap, int64_t callsite, int64_t count,
                        int64_t size)
{
	sqlite3_stmt *st = p->st[ST_ALLOC];

	sqlite3_bind_int64(st, 1, ts);
	sqlite3_bind_int64(st, 2, upid);
	sqlite3_bind_text(st, 3, heap, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, callsite);
	sqlite3_bind_int64(st, 5, count);
	sqlite3_bind_int64(st, 6, size);
	return step(p, ST_ALLOC, "writing allocations");
}

static int write_allocs(struct dump_ctx *c, const struct proc_state *ps,
                        int64_t upid)
{
	static const struct cum zero;
	int64_t ts = i64(c->d->ts_ns);
	char buf[32];
	int err = 0;

	for (size_t i = 0; !err && i < c->nmerged; i++) {
		const struct merged *m = &c->merged[i];
		struct cum now = merged_cum(m);
		const struct cum *before = prev_cum(ps, m);
		if (!before)
			before = &zero;
		const char *heap =
		        heap_name(c->d, m->heap_id, buf, sizeof(buf));
		uint64_t ac = delta(now.alloc_objs, before->alloc_objs);
		uint64_t ab = delta(now.alloc_bytes, before->alloc_bytes);
		uint64_t fc = delta(now.free_objs, before->free_objs);
		uint64_t fb = delta(now.free_bytes, before->free_bytes);
		if (ac || ab)
			err = insert_alloc(c->p, ts, upid, heap, m->callsite,
			                   i64(ac), i64(ab));
		if (!err && (fc || fb))
			err = insert_alloc(c->p, ts, upid, heap, m->callsite,
			                   -i64(fc), -i64(fb));
	}
	return err;
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
	for (size_t i = 0; !err && i < HP_CTR_COUNT; i++)
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
	for (size_t i = 0; i < c->nmerged; i++) {
		const struct merged *m = &c->merged[i];
		int64_t key[2] = {m->callsite, m->heap_id};
		int64_t *idx = hmap_find(&ps->prev, key, sizeof(key));
		struct cum now = merged_cum(m);
		if (!idx) {
			if (ps->ncum == ps->capcum) {
				size_t cap = ps->capcum ? ps->capcum * 2 : 256;
				struct cum *cm =
				        realloc(ps->cum, cap * sizeof(*cm));
				if (!cm)
					return -ENOMEM;
				ps->cum = cm;
				ps->capcum = cap;
			}
			if (hmap_put(&ps->prev, key, sizeof(key),
			             (int64_t)ps->ncum) < 0)
				return -ENOMEM;
			ps->cum[ps->ncum++] = (struct cum){0};
			idx = hmap_find(&ps->prev, key, sizeof(key));
		}
		struct cum *cm = &ps->cum[*idx];
		/* Never move backwards: see delta(). */
		cm->alloc_objs = now.alloc_objs > cm->alloc_objs
		                         ? now.alloc_objs
		                         : cm->alloc_objs;
		cm->alloc_bytes = now.alloc_bytes > cm->alloc_bytes
		                          ? now.alloc_bytes
		                          : cm->alloc_bytes;
		cm->free_objs = now.free_objs > cm->free_objs ? now.free_objs
		                                              : cm->free_objs;
		cm->free_bytes = now.free_bytes > cm->free_bytes
		                         ? now.free_bytes
		                         : cm->free_bytes;
	}
	return 0;
}

static int keep_below(int64_t val, void *limit)
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
	hmap_retain(&p->callsites, keep_below, &p->next.callsite);
}

/* heapprof_block: every live block of a snapshot dump, at its leaf
 * callsite. */
static int write_blocks(struct dump_ctx *c, int64_t upid)
{
	struct profile *p = c->p;
	const struct prof_dump *d = c->d;
	sqlite3_stmt *st = p->st[ST_BLOCK];
	char buf[32];
	int err = 0;

	for (size_t i = 0; !err && i < d->nblocks; i++) {
		const struct prof_block *b = &d->blocks[i];
		sqlite3_bind_int64(st, 1, c->dump_id);
		sqlite3_bind_int64(st, 2, upid);
		sqlite3_bind_int64(st, 3, i64(b->address));
		sqlite3_bind_int64(st, 4, i64(b->size));
		sqlite3_bind_int64(st, 5, i64(b->charged));
		sqlite3_bind_int64(st, 6, i64(b->objects_fp));
		sqlite3_bind_text(st, 7,
		                  heap_name(d, b->heap_id, buf, sizeof(buf)),
		                  -1, SQLITE_TRANSIENT);
		/* A block names its stack by index; a bad one keeps NULL. */
		if (b->stack < d->nstacks)
			sqlite3_bind_int64(st, 8, c->leaf[b->stack]);
		if (b->tid)
			sqlite3_bind_int64(st, 9, b->tid);
		if (b->ts_ns)
			sqlite3_bind_int64(st, 10, i64(b->ts_ns));
		err = step(p, ST_BLOCK, "writing blocks");
	}
	return err;
}

/* heapprof_trace_stack: the stack keys of a traced process, each mapped
 * once (a key's stack never changes within a process row). */
static int write_trace_stacks(struct dump_ctx *c, const struct proc_state *ps)
{
	struct profile *p = c->p;
	const struct prof_dump *d = c->d;
	sqlite3_stmt *st = p->st[ST_TRACE_STACK];
	int err = 0;

	for (size_t i = 0; !err && i < d->nstacks; i++) {
		uint64_t key = d->stacks[i].key;
		if (hmap_find(&ps->tstacks, &key, sizeof(key)))
			continue;
		if (!c->new_keys) {
			c->new_keys = malloc(d->nstacks * sizeof(*c->new_keys));
			if (!c->new_keys)
				return -ENOMEM;
		}
		c->new_keys[c->nnew_keys++] = key;
		sqlite3_bind_int64(st, 1, ps->upid);
		sqlite3_bind_int64(st, 2, i64(key));
		sqlite3_bind_int64(st, 3, c->leaf[i]);
		err = step(p, ST_TRACE_STACK, "writing trace stacks");
	}
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

static int write_dump_body(struct dump_ctx *c, struct proc_state *ps)
{
	int err = 0;

	for (size_t i = 0; !err && i < c->d->nstacks; i++) {
		const struct prof_stack *s = &c->d->stacks[i];
		int64_t leaf = 0;
		err = stack_callsite(c, s, &leaf);
		c->leaf[i] = leaf;
		if (!err)
			err = merge_stack(c, leaf, s);
	}
	if (!err)
		err = write_allocs(c, ps, ps->upid);
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

/* After COMMIT: the keys this dump mapped, the heap names it fixed. */
static int remember_trace(struct proc_state *ps, const struct dump_ctx *c)
{
	ps->heap_guessed &= ~c->heaps_fixed;
	for (size_t i = 0; i < c->nnew_keys; i++)
		if (hmap_put(&ps->tstacks, &c->new_keys[i],
		             sizeof(c->new_keys[i]), 1) < 0)
			return -ENOMEM;
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
	int err = ctx_init(&c, p, d);
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
		if (err)
			fprintf(stderr, SUBSYS "out of memory\n");
	}
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
 * One transaction for the batch, one prepared statement for every row:
 * the trace can bring a million rows a second (-i 1), so nothing here
 * allocates or looks anything up per row but the heap name (an array).
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
	int err = exec(p, "BEGIN", "writing events");
	if (err)
		return err;
	sqlite3_stmt *st = p->st[ST_EVENT];
	char buf[32];
	for (size_t i = 0; !err && i < n; i++) {
		const struct prof_event *e = &ev[i];
		bool is_free = e->kind == HP_EV_FREE;
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_int64(st, 2, i64(e->ts_ns));
		sqlite3_bind_text(st, 3, is_free ? "free" : "alloc",
		                  is_free ? 4 : 5, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, e->tid);
		sqlite3_bind_int64(st, 5, i64(e->address));
		sqlite3_bind_int64(st, 6, i64(e->size));
		sqlite3_bind_int64(st, 7, i64(e->charged));
		sqlite3_bind_text(st, 8,
		                  event_heap(ps, e->heap_id, buf, sizeof(buf)),
		                  -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 9, i64(e->stack_key));
		/* An allocation's time is its own ts; a free whose block's
		 * time is unknown keeps NULL. */
		if (is_free && e->alloc_ts_ns)
			sqlite3_bind_int64(st, 10, i64(e->alloc_ts_ns));
		else
			sqlite3_bind_null(st, 10);
		int rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_DONE)
			err = sql_err(p, rc, "writing events");
	}
	if (!err)
		err = exec(p, "COMMIT", "writing events");
	if (err)
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
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
		hmap_free(&p->procs[i].prev);
		hmap_free(&p->procs[i].tstacks);
		free(p->procs[i].cum);
		free(p->procs[i].heap_names);
	}
	free(p->procs);
	hmap_free(&p->mappings);
	hmap_free(&p->frames);
	hmap_free(&p->callsites);
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
		if (fold && sqlite3_get_autocommit(p->db))
			err = exec(p, profile_index_sql, "creating indexes");
		if (fold && !err && sqlite3_get_autocommit(p->db))
			err = exec(p,
			           "PRAGMA wal_checkpoint(TRUNCATE);"
			           " PRAGMA journal_mode=DELETE;",
			           "closing");
		int rc = sqlite3_close(p->db);
		if (rc != SQLITE_OK && !err) {
			fprintf(stderr, SUBSYS "closing: %s\n",
			        sqlite3_errstr(rc));
			err = errno_of(rc);
		}
	}
	free_state(p);
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
