/*
 * Unit tests of the profile writer: two dumps of known cumulative counters
 * (merged duplicate stacks, a PC outside every module, the overflow stack,
 * frees, a second heap), checked with SQL: per-dump delta rows, state by
 * summing up to a ts, the callsite tree, interning, symbolized names, and
 * that a failed dump leaves the file and the writer consistent.  Then a
 * session's per-process metadata (how, ppid, rejected_concurrent, at-max
 * dumps, the interval used) written, read back by the reader (also from a
 * profile that predates those columns) and shown by `heapprof report`.
 */
#include <errno.h>
#include <regex.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/trace_read.h"
#include "cli/commands.h"
#include "store/profile.h"
#include "store/reader.h"
#include "selfmod.h"
#include "unit.h"

#define FP HP_OBJ_FP_ONE

/* A function of this binary for the writer to symbolize. */
__attribute__((noinline)) int proftest_alloc_site(int x);
__attribute__((noinline)) int proftest_alloc_site(int x)
{
	return x * 7 + 3;
}

static char dir[] = "/tmp/heapprof-test-profile-XXXXXX";
static char dbpath[4200];

/* Module A is fake (no file): its frames stay unnamed. */
#define A_START 0x400000ull
#define A_END   0x500000ull
#define A_BASE  0x3ff000ull
static const uint8_t a_build_id[4] = {0xab, 0xcd, 0x01, 0x02};

static struct selfmod self;
static struct prof_module modules[2];
static const struct prof_heap heaps[2] = {{"libc.malloc", 4096}, {"custom", 1}};

static void init_modules(void)
{
	self = selfmod_find((const void *)proftest_alloc_site);
	modules[0] = (struct prof_module){
	        .path = "/nonexistent/liba.so",
	        .build_id = a_build_id,
	        .build_id_len = sizeof(a_build_id),
	        .start = A_START,
	        .end = A_END,
	        .base = A_BASE,
	        .load_bias = 0,
	        .exact_offset = 0x1000,
	};
	modules[1] = (struct prof_module){
	        .path = self.path,
	        .build_id = self.build_id,
	        .build_id_len = (uint32_t)self.build_id_len,
	        .start = self.start,
	        .end = self.end,
	        .base = self.base,
	};
}

/* Stacks, leaf first. */
static const uint64_t s1[] = {A_START + 0x10, A_START + 0x20, A_START + 0x30};
static const uint64_t s3[] = {A_START + 0x40, A_START + 0x20, A_START + 0x30};
static const uint64_t s4[] = {0xdead0000ull, A_START + 0x30};
static uint64_t s6[2];

static struct prof_stack stack(uint32_t heap, const uint64_t *pcs, uint32_t n,
                               uint64_t ac, uint64_t ab, uint64_t afp,
                               uint64_t fc, uint64_t fb, uint64_t ffp)
{
	return (struct prof_stack){
	        .heap_id = heap,
	        .nframes = n,
	        .pcs = pcs,
	        .alloc_count = ac,
	        .alloc_bytes = ab,
	        .alloc_objects_fp = afp,
	        .free_count = fc,
	        .free_bytes = fb,
	        .free_objects_fp = ffp,
	};
}

static struct prof_dump dump(uint64_t ts, const struct prof_stack *st, size_t n)
{
	struct prof_dump d = {
	        .ts_ns = ts,
	        .reason = "test",
	        .modules = modules,
	        .nmodules = 2,
	        .stacks = st,
	        .nstacks = n,
	        .heaps = heaps,
	        .nheaps = 2,
	        .client_state = HP_STATE_ACTIVE,
	};
	d.counters[HP_CTR_SAMPLES] = ts;
	d.counters[HP_CTR_STACK_FULL] = 5;
	return d;
}

/* Run a query returning one integer (NULL -> -999999). */
static int64_t q1(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -123456789;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "query failed: %s: %s\n", sql,
		        sqlite3_errmsg(db));
		return v;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_type(st, 0) == SQLITE_NULL
		            ? -999999
		            : sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static char *qs(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	char *v = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		v = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return v;
}

static int str_is(sqlite3 *db, const char *sql, const char *want)
{
	char *v = qs(db, sql);
	int ok = v && !strcmp(v, want);
	if (!ok)
		fprintf(stderr, "  %s -> '%s', want '%s'\n", sql,
		        v ? v : "(null)", want);
	free(v);
	return ok;
}

/* The leaf callsite id of the stack whose leaf frame has this rel_pc. */
#define LEAF(relpc)                                                            \
	"(SELECT c.id FROM stack_profile_callsite c JOIN stack_profile_frame " \
	"f ON c.frame_id = f.id WHERE f.rel_pc = " relpc ")"

static int64_t upid1, upid2;

static void write_profile(void)
{
	struct prof_process info = {
	        .pid = 4242,
	        .name = "server",
	        .cmdline = "./server --port 8080",
	        .sampling_interval = 4096,
	        .unwind = "dwarf",
	        .max_frames = 64,
	        .shmem_size = 1 << 20,
	        .from_startup = 1,
	        .start_ts_ns = 100,
	};
	struct profile *p = profile_create(dbpath, "heapprof record -- x");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(profile_begin_process(p, &info, &upid1) == 0);

	s6[0] = (uintptr_t)proftest_alloc_site + 1;
	s6[1] = A_START + 0x30;
	struct prof_stack ov = stack(0, NULL, 0, 5, 500, 5 * FP, 0, 0, 0);
	ov.flags = HP_STACK_OVERFLOW;
	struct prof_stack d1[] = {
	        stack(0, s1, 3, 2, 100, 2 * FP, 0, 0, 0),
	        stack(0, s1, 3, 1, 50, 1 * FP, 0, 0, 0), /* same frames */
	        stack(0, s3, 3, 1, 1000, FP * 3 / 2, 0, 0, 0),
	        stack(0, s4, 2, 1, 64, FP, 0, 0, 0),
	        ov,
	        stack(0, s6, 2, 1, 8, FP, 0, 0, 0),
	};
	struct prof_dump dd1 = dump(1000, d1, 6);
	CHECK(profile_write_dump(p, upid1, &dd1) == 0);

	struct prof_stack d2[] = {
	        stack(0, s1, 3, 2, 100, 2 * FP, 1, 40, 1 * FP),
	        stack(0, s1, 3, 1, 50, 1 * FP, 1, 50, 1 * FP),
	        stack(0, s3, 3, 1, 1000, FP * 3 / 2, 0, 0, 0), /* unchanged */
	        stack(0, s4, 2, 2, 128, 2 * FP, 0, 0, 0),
	        ov,
	        stack(0, s6, 2, 1, 8, FP, 0, 0, 0),
	        stack(1, s1, 3, 4, 16, 4 * FP, 0, 0, 0), /* other heap */
	};
	struct prof_dump dd2 = dump(2000, d2, 7);
	CHECK(profile_write_dump(p, upid1, &dd2) == 0);
	CHECK(profile_write_dump(p, 999, &dd2) == -EINVAL);

	/* A second process with the same libraries: its own deltas. */
	info.pid = 4343;
	CHECK(profile_begin_process(p, &info, &upid2) == 0);
	CHECK(upid2 != upid1);
	struct prof_dump dd3 = dump(1500, d1, 1);
	CHECK(profile_write_dump(p, upid2, &dd3) == 0);

	struct prof_process_end end = {
	        .end_ts_ns = 3000, .exit_status = 3, .disconnected = 0};
	CHECK(profile_end_process(p, upid1, &end) == 0);
	CHECK(profile_close(p) == 0);
}

static sqlite3 *open_ro(void)
{
	sqlite3 *db = NULL;
	CHECK(sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL) ==
	      SQLITE_OK);
	return db;
}

static void test_self_contained(void)
{
	char wal[4300];
	struct stat sb;

	snprintf(wal, sizeof(wal), "%s-wal", dbpath);
	CHECK(stat(dbpath, &sb) == 0);
	CHECK(stat(wal, &sb) < 0);
	sqlite3 *db = open_ro();
	CHECK(str_is(db, "PRAGMA journal_mode", "delete"));
	CHECK(str_is(db,
	             "SELECT value FROM heapprof_meta"
	             " WHERE key = 'format_version'",
	             "1"));
	CHECK(str_is(db,
	             "SELECT value FROM heapprof_meta"
	             " WHERE key = 'record_cmdline'",
	             "heapprof record -- x"));
	CHECK(q1(db, "SELECT count(*) FROM heapprof_meta WHERE key IN"
	             " ('heapprof_version', 'created_at')") == 2);
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_symbol") == 0);
	sqlite3_close(db);
}

static void test_dump1_rows(void)
{
	sqlite3 *db = open_ro();
	/* Duplicates merged: 3 objects, 150 bytes, one row. */
	CHECK(q1(db,
	         "SELECT count(*) FROM heap_profile_allocation"
	         " WHERE ts = 1000 AND callsite_id = " LEAF("0x1010")) == 1);
	CHECK(q1(db, "SELECT count FROM heap_profile_allocation WHERE ts ="
	             " 1000 AND callsite_id = " LEAF("0x1010")) == 3);
	CHECK(q1(db, "SELECT size FROM heap_profile_allocation WHERE ts ="
	             " 1000 AND callsite_id = " LEAF("0x1010")) == 150);
	/* 1.5 objects round to 2. */
	CHECK(q1(db, "SELECT count FROM heap_profile_allocation WHERE ts ="
	             " 1000 AND callsite_id = " LEAF("0x1040")) == 2);
	CHECK(q1(db, "SELECT count(*) FROM heap_profile_allocation"
	             " WHERE ts = 1000 AND upid = 1") == 5);
	CHECK(q1(db, "SELECT count(*) FROM heap_profile_allocation"
	             " WHERE ts = 1000 AND size < 0") == 0);
	CHECK(str_is(db,
	             "SELECT DISTINCT heap_name FROM"
	             " heap_profile_allocation WHERE ts = 1000",
	             "libc.malloc"));
	sqlite3_close(db);
}

static void test_dump2_deltas(void)
{
	sqlite3 *db = open_ro();
	/* S1: no new allocations, 2 objects / 90 bytes freed. */
	CHECK(q1(db,
	         "SELECT count(*) FROM heap_profile_allocation WHERE ts ="
	         " 2000 AND heap_name = 'libc.malloc' AND callsite_id = " LEAF(
	                 "0x1010")) == 1);
	CHECK(q1(db,
	         "SELECT count FROM heap_profile_allocation WHERE ts ="
	         " 2000 AND heap_name = 'libc.malloc' AND callsite_id = " LEAF(
	                 "0x1010")) == -2);
	CHECK(q1(db,
	         "SELECT size FROM heap_profile_allocation WHERE ts ="
	         " 2000 AND heap_name = 'libc.malloc' AND callsite_id = " LEAF(
	                 "0x1010")) == -90);
	/* S3 unchanged: nothing. */
	CHECK(q1(db, "SELECT count(*) FROM heap_profile_allocation WHERE ts ="
	             " 2000 AND callsite_id = " LEAF("0x1040")) == 0);
	/* S4: one more allocation. */
	CHECK(q1(db, "SELECT size FROM heap_profile_allocation WHERE ts ="
	             " 2000 AND callsite_id = " LEAF("3735879680")) == 64);
	/* Same frames in another heap: separate rows. */
	CHECK(q1(db, "SELECT size FROM heap_profile_allocation WHERE ts ="
	             " 2000 AND heap_name = 'custom' AND callsite_id = " LEAF(
	                     "0x1010")) == 16);
	CHECK(q1(db, "SELECT count(*) FROM heap_profile_allocation"
	             " WHERE ts = 2000 AND upid = 1") == 3);
	sqlite3_close(db);
}

static void test_state_by_sum(void)
{
	sqlite3 *db = open_ro();
	/* space at dump 2 = 150-90 + 1000 + 128 + 500 + 8 + 16 (custom). */
	CHECK(q1(db, "SELECT sum(size) FROM heap_profile_allocation"
	             " WHERE upid = 1 AND ts <= 2000") ==
	      60 + 1000 + 128 + 500 + 8 + 16);
	CHECK(q1(db, "SELECT sum(size) FROM heap_profile_allocation"
	             " WHERE upid = 1 AND ts <= 1000") ==
	      150 + 1000 + 64 + 500 + 8);
	/* alloc_space: positive rows only. */
	CHECK(q1(db, "SELECT sum(size) FROM heap_profile_allocation"
	             " WHERE upid = 1 AND size > 0") ==
	      150 + 1000 + 128 + 500 + 8 + 16);
	/* objects at dump 2: 3-2 + 2 + 2 + 5 + 1 + 4. */
	CHECK(q1(db, "SELECT sum(count) FROM heap_profile_allocation"
	             " WHERE upid = 1") == 1 + 2 + 2 + 5 + 1 + 4);
	/* The second process starts from zero. */
	CHECK(q1(db, "SELECT sum(size) FROM heap_profile_allocation"
	             " WHERE upid = 2") == 100);
	sqlite3_close(db);
}

static void test_callsite_tree(void)
{
	sqlite3 *db = open_ro();
	const char *chain =
	        "SELECT c2.depth * 100 + c1.depth * 10 + c0.depth"
	        " FROM stack_profile_callsite c2"
	        " JOIN stack_profile_callsite c1 ON c2.parent_id = c1.id"
	        " JOIN stack_profile_callsite c0 ON c1.parent_id = c0.id"
	        " WHERE c2.id = " LEAF("0x1010") " AND c0.parent_id IS NULL";

	CHECK(q1(db, chain) == 210);
	/* Root frame is the outermost pc (A+0x30). */
	CHECK(q1(db, "SELECT f.rel_pc FROM stack_profile_callsite c JOIN"
	             " stack_profile_frame f ON c.frame_id = f.id"
	             " WHERE c.depth = 0 AND f.mapping = (SELECT id FROM"
	             " stack_profile_mapping WHERE name ="
	             " '/nonexistent/liba.so')") == 0x1030);
	/* S1 and S3 share their two outer callsites. */
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_callsite c"
	             " JOIN stack_profile_frame f ON c.frame_id = f.id"
	             " WHERE f.rel_pc = 0x1020") == 1);
	CHECK(q1(db, "SELECT a.parent_id = b.parent_id FROM"
	             " stack_profile_callsite a, stack_profile_callsite b"
	             " WHERE a.id = " LEAF("0x1010") " AND b.id = " LEAF(
	                     "0x1040")) == 1);
	/* Referential integrity, also after the injected failure. */
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_callsite c WHERE"
	             " c.parent_id IS NOT NULL AND c.parent_id NOT IN"
	             " (SELECT id FROM stack_profile_callsite)") == 0);
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_callsite c WHERE"
	             " c.frame_id NOT IN (SELECT id FROM"
	             " stack_profile_frame)") == 0);
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_frame WHERE mapping"
	             " NOT IN (SELECT id FROM stack_profile_mapping)") == 0);
	CHECK(q1(db, "SELECT count(*) FROM heap_profile_allocation WHERE"
	             " callsite_id NOT IN (SELECT id FROM"
	             " stack_profile_callsite)") == 0);
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_callsite c JOIN"
	             " stack_profile_callsite p ON c.parent_id = p.id"
	             " WHERE c.depth != p.depth + 1") == 0);
	sqlite3_close(db);
}

static void test_interning(void)
{
	sqlite3 *db = open_ro();

	/* Two processes and two dumps, one mapping row per module. */
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_mapping"
	             " WHERE name = '/nonexistent/liba.so'") == 1);
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_frame"
	             " WHERE rel_pc = 0x1030") == 1);
	CHECK(q1(db, "SELECT count(*) FROM (SELECT mapping, rel_pc FROM"
	             " stack_profile_frame GROUP BY 1, 2 HAVING"
	             " count(*) > 1)") == 0);
	CHECK(q1(db, "SELECT count(*) FROM (SELECT parent_id, frame_id FROM"
	             " stack_profile_callsite GROUP BY 1, 2 HAVING"
	             " count(*) > 1)") == 0);
	CHECK(str_is(db,
	             "SELECT build_id FROM stack_profile_mapping"
	             " WHERE name = '/nonexistent/liba.so'",
	             "abcd0102"));
	CHECK(q1(db, "SELECT start FROM stack_profile_mapping"
	             " WHERE name = '/nonexistent/liba.so'") == A_START);
	CHECK(q1(db, "SELECT exact_offset FROM stack_profile_mapping"
	             " WHERE name = '/nonexistent/liba.so'") == 0x1000);
	/* Unknown file: frame names stay NULL. */
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_frame WHERE rel_pc"
	             " = 0x1010 AND name IS NULL") == 1);
	sqlite3_close(db);
}

static void test_special_frames(void)
{
	sqlite3 *db = open_ro();

	CHECK(str_is(db,
	             "SELECT m.name FROM stack_profile_frame f JOIN"
	             " stack_profile_mapping m ON f.mapping = m.id"
	             " WHERE f.name = '[stack table full]'",
	             "[heapprof]"));
	CHECK(q1(db, "SELECT sum(a.size) FROM heap_profile_allocation a"
	             " JOIN stack_profile_callsite c ON a.callsite_id = c.id"
	             " JOIN stack_profile_frame f ON c.frame_id = f.id"
	             " WHERE f.name = '[stack table full]'") == 500);
	CHECK(str_is(db,
	             "SELECT m.name FROM stack_profile_frame f JOIN"
	             " stack_profile_mapping m ON f.mapping = m.id"
	             " WHERE f.rel_pc = 3735879680",
	             "[unknown]"));
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_mapping"
	             " WHERE name = '[unknown]'") == 1);
	sqlite3_close(db);
}

static void test_symbolized(void)
{
	sqlite3 *db = open_ro();
	char sql[512];

	snprintf(sql, sizeof(sql),
	         "SELECT name FROM stack_profile_frame WHERE rel_pc = %llu",
	         (unsigned long long)((uintptr_t)proftest_alloc_site + 1 -
	                              self.base));
	CHECK(str_is(db, sql, "proftest_alloc_site"));
	snprintf(sql, sizeof(sql),
	         "SELECT system_name FROM stack_profile_frame WHERE rel_pc ="
	         " %llu",
	         (unsigned long long)((uintptr_t)proftest_alloc_site + 1 -
	                              self.base));
	CHECK(str_is(db, sql, "proftest_alloc_site"));
	sqlite3_close(db);
}

static void test_process_tables(void)
{
	sqlite3 *db = open_ro();

	CHECK(str_is(db, "SELECT cmdline FROM process WHERE upid = 1",
	             "./server --port 8080"));
	CHECK(q1(db, "SELECT end_ts FROM process WHERE upid = 1") == 3000);
	CHECK(q1(db, "SELECT end_ts FROM process WHERE upid = 2") == -999999);
	CHECK(q1(db, "SELECT exit_status FROM heapprof_process"
	             " WHERE upid = 1") == 3);
	CHECK(q1(db, "SELECT sampling_interval FROM heapprof_process"
	             " WHERE upid = 1") == 4096);
	CHECK(str_is(db, "SELECT unwind FROM heapprof_process WHERE upid = 1",
	             "dwarf"));
	CHECK(q1(db, "SELECT client_state FROM heapprof_process"
	             " WHERE upid = 1") == HP_STATE_ACTIVE);
	/* Stats hold the last dump's counters. */
	CHECK(q1(db, "SELECT value FROM heapprof_process_stats WHERE upid ="
	             " 1 AND name = 'stack_table_full'") == 5);
	CHECK(q1(db, "SELECT count(*) FROM heapprof_process_stats WHERE"
	             " upid = 1 AND name = 'samples'") == 1);
	CHECK(q1(db, "SELECT value FROM heapprof_process_stats WHERE upid ="
	             " 1 AND name = 'samples'") == 2 + 1 + 1 + 2 + 5 + 1 + 4);
	CHECK(q1(db, "SELECT count(*) FROM heapprof_dump WHERE upid = 1") == 2);
	CHECK(str_is(db,
	             "SELECT name FROM heapprof_heap WHERE upid = 1 AND"
	             " heap_id = 1",
	             "custom"));
	sqlite3_close(db);
}

static void test_seed_query(void)
{
	sqlite3 *db = open_ro();
	sqlite3_stmt *st = NULL;
	int rows = 0;

	CHECK(sqlite3_prepare_v2(
	              db,
	              "select a.callsite_id, a.ts, a.upid, f.name, f.rel_pc,"
	              " m.build_id, m.name as mapping_name,\n"
	              "sum(a.size) as space_size, sum(a.count) as space_count\n"
	              "from heap_profile_allocation a join\n"
	              "stack_profile_callsite c ON (a.callsite_id = c.id) "
	              "join\n"
	              "stack_profile_frame f ON (c.frame_id = f.id) join\n"
	              "stack_profile_mapping m ON (f.mapping = m.id)\n"
	              "group by 1, 2, 3, 4, 5, 6, 7 order by space_size desc;",
	              -1, &st, NULL) == SQLITE_OK);
	while (st && sqlite3_step(st) == SQLITE_ROW)
		rows++;
	CHECK(rows > 5);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/*
 * A dump that fails half-way (a trigger rejects its allocation row after
 * new frames and callsites were inserted) must leave no trace, and the
 * writer must re-create those rows when the dump is retried.
 */
static void test_failed_dump_rolls_back(void)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s/rollback.db", dir);
	struct prof_process info = {.pid = 1,
	                            .name = "x",
	                            .cmdline = "x",
	                            .sampling_interval = 1,
	                            .unwind = "fp"};
	struct profile *p = profile_create(path, "");
	sqlite3 *db = NULL;
	int64_t upid = 0;
	static const uint64_t fresh[] = {A_START + 0x77, A_START + 0x78};

	CHECK(p && profile_begin_process(p, &info, &upid) == 0);
	if (!p)
		return;
	struct prof_stack st1[] = {stack(0, s1, 3, 1, 10, FP, 0, 0, 0)};
	struct prof_dump d1 = dump(10, st1, 1);
	CHECK(profile_write_dump(p, upid, &d1) == 0);

	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db,
	                   "CREATE TRIGGER inject BEFORE INSERT ON"
	                   " heap_profile_allocation WHEN NEW.size = 777"
	                   " BEGIN SELECT RAISE(ABORT, 'injected'); END;",
	                   NULL, NULL, NULL) == SQLITE_OK);
	struct prof_stack st2[] = {
	        stack(0, s1, 3, 1, 10, FP, 0, 0, 0),
	        stack(0, fresh, 2, 1, 777, FP, 0, 0, 0),
	};
	struct prof_dump d2 = dump(20, st2, 2);
	fprintf(stderr, "  (an 'injected' error message is expected)\n");
	CHECK(profile_write_dump(p, upid, &d2) < 0);
	CHECK(sqlite3_exec(db, "DROP TRIGGER inject", NULL, NULL, NULL) ==
	      SQLITE_OK);
	CHECK(q1(db, "SELECT count(*) FROM heapprof_dump") == 1);
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_frame WHERE rel_pc"
	             " = 0x1077") == 0);

	st2[1] = stack(0, fresh, 2, 1, 778, FP, 0, 0, 0);
	d2 = dump(30, st2, 2);
	CHECK(profile_write_dump(p, upid, &d2) == 0);
	sqlite3_close(db);
	CHECK(profile_close(p) == 0);

	db = NULL;
	CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
	      SQLITE_OK);
	CHECK(q1(db, "SELECT sum(size) FROM heap_profile_allocation") ==
	      10 + 778);
	CHECK(q1(db, "SELECT count(*) FROM heap_profile_allocation a JOIN"
	             " stack_profile_callsite c ON a.callsite_id = c.id JOIN"
	             " stack_profile_frame f ON c.frame_id = f.id"
	             " WHERE f.rel_pc = 0x1077") == 1);
	CHECK(q1(db, "SELECT count(*) FROM stack_profile_callsite c WHERE"
	             " c.frame_id NOT IN (SELECT id FROM"
	             " stack_profile_frame) OR (c.parent_id IS NOT NULL AND"
	             " c.parent_id NOT IN (SELECT id FROM"
	             " stack_profile_callsite))") == 0);
	sqlite3_close(db);
}

/* ---- session metadata -------------------------------------------------- */

static char sesspath[4300], oldpath[4300];
static int64_t sess_upid[3];

#define SEC 1000000000ull

/*
 * A session by name: process A attached while running (a dump, then an
 * at-max dump after adaptive sampling raised its interval), B rejected
 * (begin only), C rejected (begin and end: the end must not clear it).
 */
static void write_session(void)
{
	struct prof_process a = {
	        .pid = 100,
	        .name = "srv",
	        .cmdline = "srv -x",
	        .sampling_interval = 4096,
	        .unwind = "fp",
	        .max_frames = 32,
	        .shmem_size = 8 << 20,
	        .from_startup = 0,
	        .start_ts_ns = 10 * SEC,
	        .how = "name",
	        .ppid = 1,
	        .session_id = 7,
	};
	struct prof_process b = a, c = a;
	b.pid = 200;
	b.start_ts_ns = 11 * SEC;
	b.rejected_concurrent = 1;
	b.note = "profiled by session 3";
	b.how = "pid";
	c.pid = 300;
	c.start_ts_ns = 12 * SEC;
	c.rejected_concurrent = 1;
	c.how = NULL;
	c.ppid = 0;
	c.session_id = 0;

	snprintf(sesspath, sizeof(sesspath), "%s/session.db", dir);
	struct profile *p = profile_create(sesspath, "heapprof record -n srv");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(profile_set_meta(p, "config", "pid: 1\n") == 0);
	CHECK(profile_set_meta(p, "config", "process_cmdline: \"srv\"\n") == 0);
	CHECK(profile_begin_process(p, &a, &sess_upid[0]) == 0);
	CHECK(profile_begin_process(p, &b, &sess_upid[1]) == 0);
	CHECK(profile_begin_process(p, &c, &sess_upid[2]) == 0);

	struct prof_stack st1[] = {stack(0, s1, 3, 1, 4096, FP, 0, 0, 0)};
	struct prof_dump d1 = dump(11 * SEC, st1, 1);
	CHECK(profile_write_dump(p, sess_upid[0], &d1) == 0);
	struct prof_stack st2[] = {
	        stack(0, s1, 3, 3, 3 * 4096, 3 * FP, 0, 0, 0)};
	struct prof_dump d2 = dump(13 * SEC, st2, 1);
	d2.interval_used = 16384;
	d2.at_max = 1;
	d2.max_ts_ns = 12 * SEC + SEC / 2;
	d2.max_live_bytes = 3 * 4096;
	d2.reason = "end";
	CHECK(profile_write_dump(p, sess_upid[0], &d2) == 0);

	struct prof_process_end ea = {
	        .end_ts_ns = 13 * SEC, .exit_status = -1, .disconnected = 1};
	struct prof_process_end ec = {.end_ts_ns = 13 * SEC, .exit_status = -1};
	CHECK(profile_end_process(p, sess_upid[0], &ea) == 0);
	CHECK(profile_end_process(p, sess_upid[2], &ec) == 0);
	CHECK(profile_close(p) == 0);
}

static void test_session_rows(void)
{
	sqlite3 *db = NULL;

	write_session();
	CHECK(sqlite3_open_v2(sesspath, &db, SQLITE_OPEN_READONLY, NULL) ==
	      SQLITE_OK);
	CHECK(str_is(db, "SELECT value FROM heapprof_meta WHERE key = 'config'",
	             "process_cmdline: \"srv\"\n"));
	CHECK(q1(db, "SELECT count(*) FROM heapprof_meta"
	             " WHERE key = 'config'") == 1);
	CHECK(str_is(db, "SELECT how FROM heapprof_process WHERE upid = 1",
	             "name"));
	CHECK(str_is(db, "SELECT how FROM heapprof_process WHERE upid = 2",
	             "pid"));
	CHECK(str_is(db, "SELECT how FROM heapprof_process WHERE upid = 3",
	             "command"));
	CHECK(q1(db, "SELECT ppid FROM heapprof_process WHERE upid = 1") == 1);
	CHECK(q1(db, "SELECT ppid FROM heapprof_process WHERE upid = 3") ==
	      -999999);
	CHECK(q1(db, "SELECT session_id FROM heapprof_process"
	             " WHERE upid = 1") == 7);
	CHECK(q1(db, "SELECT rejected_concurrent FROM heapprof_process"
	             " WHERE upid = 1") == 0);
	CHECK(q1(db, "SELECT rejected_concurrent FROM heapprof_process"
	             " WHERE upid = 2") == 1);
	CHECK(q1(db, "SELECT rejected_concurrent FROM heapprof_process"
	             " WHERE upid = 3") == 1);
	CHECK(str_is(db, "SELECT note FROM heapprof_process WHERE upid = 2",
	             "profiled by session 3"));
	CHECK(q1(db, "SELECT note IS NULL FROM heapprof_process"
	             " WHERE upid = 1") == 1);
	CHECK(q1(db, "SELECT interval_used FROM heapprof_process"
	             " WHERE upid = 1") == 16384);
	CHECK(q1(db, "SELECT max_live_bytes FROM heapprof_process"
	             " WHERE upid = 1") == 3 * 4096);
	CHECK(q1(db, "SELECT max_ts FROM heapprof_process WHERE upid = 1") ==
	      (int64_t)(12 * SEC + SEC / 2));
	CHECK(q1(db, "SELECT disconnected FROM heapprof_process"
	             " WHERE upid = 1") == 1);
	/* Dumps: the first plain, the second at max with the raised interval.
	 */
	CHECK(q1(db, "SELECT count(*) FROM heapprof_dump WHERE upid != 1") ==
	      0);
	CHECK(q1(db,
	         "SELECT at_max FROM heapprof_dump WHERE ts = 11000000000") ==
	      0);
	CHECK(q1(db, "SELECT max_ts FROM heapprof_dump"
	             " WHERE ts = 11000000000") == -999999);
	CHECK(q1(db, "SELECT interval_used FROM heapprof_dump"
	             " WHERE ts = 11000000000") == 4096);
	CHECK(q1(db, "SELECT at_max FROM heapprof_dump"
	             " WHERE ts = 13000000000") == 1);
	CHECK(q1(db, "SELECT max_live_bytes FROM heapprof_dump"
	             " WHERE ts = 13000000000") == 3 * 4096);
	CHECK(q1(db, "SELECT interval_used FROM heapprof_dump"
	             " WHERE ts = 13000000000") == 16384);
	sqlite3_close(db);
}

static void test_session_reader(void)
{
	sqlite3 *db = rd_open(sesspath, "test");
	struct rd_process *p = NULL;
	struct rd_dump *d = NULL;
	size_t n = 0, nd = 0;

	CHECK(db != NULL);
	if (!db)
		return;
	CHECK(rd_load_processes(db, "test", &p, &n) == 0);
	CHECK_EQ_U64(n, 3);
	if (n == 3) {
		CHECK(!strcmp(p[0].how, "name") && p[0].ppid == 1 &&
		      p[0].session_id == 7 && !p[0].rejected_concurrent &&
		      !p[0].note && !p[0].from_startup && p[0].disconnected &&
		      !p[0].has_exit && p[0].has_end);
		CHECK(p[0].interval == 4096 && p[0].interval_used == 16384);
		CHECK(p[0].max_live_bytes == 3 * 4096 &&
		      p[0].max_ts == (int64_t)(12 * SEC + SEC / 2));
		CHECK(!strcmp(p[0].unwind, "fp") && p[0].max_frames == 32 &&
		      p[0].shmem_size == 8 << 20);
		CHECK(p[0].start_ts == (int64_t)(10 * SEC) &&
		      p[0].end_ts == (int64_t)(13 * SEC));
		CHECK(p[1].rejected_concurrent && p[1].note &&
		      !strcmp(p[1].note, "profiled by session 3") &&
		      !strcmp(p[1].how, "pid") && !p[1].has_end &&
		      p[1].end_ts == 0 && p[1].interval_used == 0);
		CHECK(p[2].rejected_concurrent &&
		      !strcmp(p[2].how, "command") && p[2].ppid == 0 &&
		      p[2].has_end);
	}
	rd_free_processes(p, n);
	CHECK(rd_load_dumps(db, "test", sess_upid[0], &d, &nd) == 0);
	CHECK_EQ_U64(nd, 2);
	if (nd == 2) {
		CHECK(!d[0].at_max && d[0].interval_used == 4096 &&
		      d[0].max_ts == 0);
		CHECK(d[1].at_max && d[1].interval_used == 16384 &&
		      d[1].max_live_bytes == 3 * 4096 &&
		      d[1].max_ts == (int64_t)(12 * SEC + SEC / 2) &&
		      !strcmp(d[1].reason, "end"));
	}
	rd_free_dumps(d, nd);
	sqlite3_close(db);
}

/* A profile as heapprof wrote them before sessions: no new columns. */
static void test_old_profile(void)
{
	static const char old_schema[] =
	        "CREATE TABLE heapprof_meta(key TEXT PRIMARY KEY, value TEXT);"
	        "CREATE TABLE stack_profile_mapping(id INTEGER PRIMARY KEY, "
	        "type"
	        " TEXT, build_id TEXT, exact_offset INT, start_offset INT,"
	        " start INT, \"end\" INT, load_bias INT, name TEXT);"
	        "CREATE TABLE stack_profile_frame(id INTEGER PRIMARY KEY, type"
	        " TEXT, name TEXT, mapping INT, rel_pc INT, symbol_set_id INT,"
	        " deobfuscated_name TEXT, system_name TEXT);"
	        "CREATE TABLE stack_profile_callsite(id INTEGER PRIMARY KEY, "
	        "type"
	        " TEXT, depth INT, parent_id INT, frame_id INT);"
	        "CREATE TABLE stack_profile_symbol(id INTEGER PRIMARY KEY, type"
	        " TEXT, symbol_set_id INT, name TEXT, source_file TEXT,"
	        " line_number INT);"
	        "CREATE TABLE heap_profile_allocation(id INTEGER PRIMARY KEY,"
	        " type TEXT, ts INT, upid INT, heap_name TEXT, callsite_id INT,"
	        " count INT, size INT);"
	        "CREATE TABLE process(upid INTEGER PRIMARY KEY, pid INT, name"
	        " TEXT, cmdline TEXT, start_ts INT, end_ts INT);"
	        "CREATE TABLE heapprof_process(upid INTEGER PRIMARY KEY,"
	        " sampling_interval INT, unwind TEXT, max_frames INT, "
	        "shmem_size"
	        " INT, from_startup INT, rejected_concurrent INT, disconnected"
	        " INT, exit_status INT, client_state INT, stop_reason INT);"
	        "CREATE TABLE heapprof_process_stats(upid INT, name TEXT, value"
	        " INT);"
	        "CREATE TABLE heapprof_dump(id INTEGER PRIMARY KEY, ts INT, "
	        "upid"
	        " INT, reason TEXT);"
	        "INSERT INTO heapprof_meta VALUES('format_version', '1');"
	        "INSERT INTO process VALUES(1, 55, 'old', 'old -v', 100, 300);"
	        "INSERT INTO heapprof_process VALUES(1, 1, 'dwarf', 64, "
	        "1048576,"
	        " 1, 0, 0, 0, 2, 4);"
	        "INSERT INTO heapprof_dump VALUES(1, 200, 1, 'end');";
	sqlite3 *db = NULL;

	snprintf(oldpath, sizeof(oldpath), "%s/old.db", dir);
	CHECK(sqlite3_open(oldpath, &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db, old_schema, NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);

	db = rd_open(oldpath, "test");
	CHECK(db != NULL);
	if (!db)
		return;
	struct rd_process *p = NULL;
	struct rd_dump *d = NULL;
	size_t n = 0, nd = 0;
	CHECK(rd_load_processes(db, "test", &p, &n) == 0);
	CHECK(n == 1 && p[0].pid == 55 && !strcmp(p[0].how, "command") &&
	      p[0].interval == 1 && p[0].interval_used == 0 &&
	      !p[0].rejected_concurrent && p[0].has_exit &&
	      p[0].exit_status == 0 && p[0].from_startup && !p[0].note &&
	      p[0].end_ts == 300);
	rd_free_processes(p, n);
	CHECK(rd_load_dumps(db, "test", 1, &d, &nd) == 0);
	CHECK(nd == 1 && d[0].ts == 200 && !d[0].at_max &&
	      d[0].interval_used == 0 && !strcmp(d[0].reason, "end"));
	rd_free_dumps(d, nd);
	sqlite3_close(db);
}

/* Run `heapprof report ARGS` with stdout captured; the text, malloc'd. */
static char *run_report(int argc, char **argv, int *status)
{
	FILE *cap = tmpfile();
	int saved = dup(1);
	char *out = NULL;

	fflush(stdout);
	dup2(fileno(cap), 1);
	*status = cmd_report(argc, argv);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	long len = ftell(cap);
	if (len < 0)
		len = 0;
	rewind(cap);
	out = calloc(1, (size_t)len + 1);
	if (out && fread(out, 1, (size_t)len, cap) != (size_t)len)
		out[0] = '\0';
	fclose(cap);
	return out;
}

static int has_line(const char *text, const char *line)
{
	const char *p = text;
	size_t n = strlen(line);

	while (p && (p = strstr(p, line))) {
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || !p[n]))
			return 1;
		p += n;
	}
	fprintf(stderr, "  no line '%s' in the report\n", line);
	return 0;
}

/* A line of text that matches the extended regex re (anchored by re). */
static int has_line_re(const char *text, const char *re)
{
	regex_t rx;
	int found = 0;
	if (regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB) != 0)
		return 0;
	found = regexec(&rx, text, 0, NULL, 0) == 0;
	regfree(&rx);
	if (!found)
		fprintf(stderr, "  no line /%s/ in the report\n", re);
	return found;
}

static void test_session_report(void)
{
	char *argv[] = {"report", sesspath, NULL};
	int status = -1;
	char *out = run_report(2, argv, &status);

	CHECK(status == 0);
	CHECK(out != NULL);
	if (!out)
		return;
	CHECK(has_line(out, "Profile of 3 processes: 1 profiled, 2 not "
	                    "profiled (already profiled by another session)"));
	CHECK(has_line(out, "Process 100 (srv)"));
	CHECK(has_line(out, "  profiled as    by name (record -n), parent pid "
	                    "1, session 7"));
	CHECK(has_line(out, "  sampling       one sample per 4096 bytes on "
	                    "average, unwind fp, max 32 frames"));
	CHECK(has_line(out, "  interval used  16384 bytes at the last dump: "
	                    "raised by adaptive sampling from 4096"));
	/* The wall-clock span: the file's created_at (now) plus the
	 * boot-time offsets. */
	CHECK(has_line_re(out, "^  recorded       attached while running at "
	                       "\\+0\\.000 s until \\+3\\.000 s, 3\\.000 s, "
	                       "[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} UTC to "
	                       "[0-9:]{8} \\(boot time 10\\.000 s to "
	                       "13\\.000 s\\)$"));
	CHECK(has_line(out, "  dumps          2; showing dump 2 at +3.000 s "
	                    "(end)"));
	CHECK(has_line(out, "  dump at max    state at the peak of live "
	                    "bytes: 12.00 KiB (12288 B) at +2.500 s"));
	CHECK(has_line(out, "  dropped        stack table full 5 (0 B), live "
	                    "table full 0 (0 B), module table full 0"));
	CHECK(has_line(out, "  client errors  0 unwind errors, 0 truncated "
	                    "stacks, 0 reentrant calls skipped"));
	CHECK(has_line(out, "  warning: the process disconnected before the "
	                    "session ended"));
	CHECK(has_line(out, "Process 200 (srv)"));
	CHECK(has_line(out, "  profiled as    by pid (record -p), parent pid "
	                    "1, session 7"));
	CHECK(has_line(out, "  not profiled: already profiled by another "
	                    "session (profiled by session 3)"));
	CHECK(has_line(out, "  profiled as    the command run by heapprof "
	                    "record"));
	CHECK(has_line(out, "  not profiled: already profiled by another "
	                    "session"));
	/* Rejected processes: no sampling, dumps or allocation sections. */
	const char *b = strstr(out, "Process 200");
	CHECK(b && !strstr(b, "  sampling ") && !strstr(b, "  dumps ") &&
	      !strstr(b, "Heap libc.malloc"));
	/* The at-max dump is not a leak report. */
	CHECK(!strstr(out, "= leaks"));
	free(out);

	/* --pid: one process, no session line. */
	char *argv2[] = {"report", sesspath, "--pid", "200", NULL};
	out = run_report(4, argv2, &status);
	CHECK(status == 0 && out && !strstr(out, "Profile of") &&
	      strstr(out, "Process 200") && !strstr(out, "Process 100"));
	free(out);
}

static void test_old_profile_report(void)
{
	char *argv[] = {"report", oldpath, NULL};
	int status = -1;
	char *out = run_report(2, argv, &status);

	CHECK(status == 0 && out);
	if (!out)
		return;
	CHECK(has_line(out, "Process 55 (old)"));
	CHECK(has_line(out, "  profiled as    the command run by heapprof "
	                    "record"));
	CHECK(has_line(out, "  recorded       from startup, 0.000 s (boot "
	                    "time 0.000 s to 0.000 s)"));
	CHECK(!strstr(out, "interval used") && !strstr(out, "Profile of") &&
	      !strstr(out, "dump at max"));
	free(out);
}

static void test_create_errors(void)
{
	fprintf(stderr, "  (a 'cannot open' error message is expected)\n");
	CHECK(profile_create("/nonexistent-dir/x.db", "") == NULL);
	CHECK(profile_close(NULL) == 0);
}

/* ---- snapshots and the event trace ------------------------------------- */

static char tracepath[4300];

static struct prof_event event(uint64_t ts, uint32_t kind, uint64_t addr,
                               uint64_t size, uint64_t key, uint32_t heap)
{
	return (struct prof_event){.ts_ns = ts,
	                           .kind = kind,
	                           .tid = 77,
	                           .address = addr,
	                           .size = size,
	                           .charged = size,
	                           .alloc_ts_ns =
	                                   kind == HP_EV_FREE ? ts - 5 : 0,
	                           .stack_key = key,
	                           .heap_id = heap};
}

/*
 * A traced process: events before its first dump (a heap not named yet, a
 * heap never named), a named snapshot dump with blocks, more events, a
 * second dump with one new stack; heapprof_trace replaced each time.
 */
static void test_trace_rows(void)
{
	snprintf(tracepath, sizeof(tracepath), "%s/trace.db", dir);
	struct profile *p = profile_create(tracepath, "t");
	CHECK(p != NULL);
	if (!p)
		return;
	struct prof_process info = {.pid = 7,
	                            .name = "t",
	                            .cmdline = "t",
	                            .sampling_interval = 1,
	                            .unwind = "dwarf",
	                            .max_frames = 64};
	int64_t upid;
	CHECK(profile_begin_process(p, &info, &upid) == 0);
	const uint64_t k1 = 5, k3 = (1ull << 32) | 2, k4 = 9;
	struct prof_event e1[] = {
	        event(100, HP_EV_ALLOC, 0x1000, 10, k1, 0),
	        event(101, HP_EV_ALLOC, 0x2000, 20, k3, 1),
	        event(102, HP_EV_FREE, 0x1000, 10, k1, 0),
	        event(103, HP_EV_ALLOC, 0x3000, 30, k1, 7),
	};
	CHECK(profile_write_events(p, upid, e1, 4) == 0);
	CHECK(profile_write_events(p, 999, e1, 4) == -EINVAL);
	CHECK(profile_write_events(p, upid, e1, 0) == 0);
	struct prof_trace tr = {.mode = "streaming",
	                        .buffer_bytes = 65536,
	                        .events = 4,
	                        .dropped_allocs = 1};
	CHECK(profile_set_trace(p, upid, &tr) == 0);

	struct prof_stack st[] = {
	        stack(0, s1, 3, 2, 30, 2 * FP, 1, 10, FP),
	        stack(1, s3, 3, 1, 20, FP, 0, 0, 0),
	};
	st[0].key = k1;
	st[1].key = k3;
	struct prof_block blocks[] = {
	        {.address = 0x2000,
	         .size = 20,
	         .charged = 20,
	         .objects_fp = FP,
	         .stack = 1,
	         .heap_id = 1,
	         .tid = 77,
	         .ts_ns = 101},
	        {.address = 0x3000,
	         .size = 30,
	         .charged = 30,
	         .objects_fp = FP,
	         .stack = 0,
	         .heap_id = 0,
	         .tid = 0,
	         .ts_ns = 0},
	};
	struct prof_dump d = dump(200, st, 2);
	d.reason = "snapshot";
	d.name = "after-load";
	d.blocks = blocks;
	d.nblocks = 2;
	d.blocks_in_flight = 3;
	CHECK(profile_write_dump(p, upid, &d) == 0);

	struct prof_event e2[] = {
	        event(300, HP_EV_ALLOC, 0x4000, 40, k4, 1),
	        event(301, HP_EV_FREE, 0x2000, 20, k3, 1),
	};
	CHECK(profile_write_events(p, upid, e2, 2) == 0);
	struct prof_stack st2[] = {st[0], st[1],
	                           stack(1, s4, 2, 1, 40, FP, 0, 0, 0)};
	st2[2].key = k4;
	struct prof_dump d2 = dump(400, st2, 3);
	CHECK(profile_write_dump(p, upid, &d2) == 0);
	tr.events = 6;
	tr.overwritten = 2;
	tr.full_ts_ns = 250;
	CHECK(profile_set_trace(p, upid, &tr) == 0);
	CHECK(profile_close(p) == 0);

	sqlite3 *db = NULL;
	CHECK(sqlite3_open_v2(tracepath, &db, SQLITE_OPEN_READONLY, NULL) ==
	      SQLITE_OK);
	/* The named snapshot and its blocks. */
	CHECK(str_is(db, "SELECT name FROM heapprof_dump WHERE ts = 200",
	             "after-load"));
	CHECK_EQ_U64(q1(db, "SELECT blocks_in_flight FROM heapprof_dump"
	                    " WHERE ts = 200"),
	             3);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_dump WHERE ts ="
	                    " 400 AND name IS NULL AND blocks_in_flight IS"
	                    " NULL"),
	             1);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_block"), 2);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_block b JOIN"
	                    " heapprof_dump d ON d.id = b.dump_id"
	                    " WHERE d.ts = 200"),
	             2);
	CHECK_EQ_U64(
	        q1(db,
	           "SELECT callsite_id = " LEAF(
	                   "0x1040") " AND heap_name = 'custom' AND tid = 77 "
	                             "AND ts ="
	                             " 101 AND size = 20 AND charged = 20 AND"
	                             " objects_fp = 65536 FROM heapprof_block"
	                             " WHERE address = 8192"),
	        1);
	CHECK_EQ_U64(q1(db,
	                "SELECT callsite_id = " LEAF(
	                        "0x1010") " AND heap_name = 'libc.malloc' AND "
	                                  "tid IS NULL"
	                                  " AND ts IS NULL FROM heapprof_block"
	                                  " WHERE address = 12288"),
	             1);
	/* Events: every row, the stand-in name replaced by the dump's. */
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event"), 6);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event WHERE"
	                    " kind = 'free'"),
	             2);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event WHERE"
	                    " heap_name = 'custom'"),
	             3);
	CHECK(str_is(db, "SELECT heap_name FROM heapprof_event WHERE ts = 103",
	             "heap7"));
	CHECK(str_is(db, "SELECT heap_name FROM heapprof_event WHERE ts = 100",
	             "libc.malloc"));
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event WHERE"
	                    " kind = 'alloc' AND alloc_ts IS NULL"),
	             4);
	CHECK_EQ_U64(q1(db, "SELECT sum(alloc_ts) FROM heapprof_event WHERE"
	                    " kind = 'free'"),
	             97 + 296);
	CHECK_EQ_U64(q1(db, "SELECT sum(size) || tid FROM heapprof_event"
	                    " WHERE upid = 1 AND stack_key = 4294967298"),
	             4077);
	/* Stack keys: each mapped once; every event resolves. */
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_trace_stack"), 3);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event_callsite"
	                    " WHERE callsite_id IS NULL"),
	             0);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event_callsite"
	                    " WHERE callsite_id = " LEAF("0x1010")),
	             3);
	/* The trace's row, replaced. */
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_trace"), 1);
	CHECK(str_is(db,
	             "SELECT mode || buffer_bytes || ',' || events || ','"
	             " || dropped_allocs || ',' || dropped_frees || ',' ||"
	             " overwritten || ',' || incomplete || ',' || full_ts"
	             " || ',' || waits FROM heapprof_trace",
	             "streaming65536,6,1,0,2,0,250,0"));
	sqlite3_close(db);
}

/* The writer's rate for events (reported, not asserted: the machine is
 * shared). */
static void test_event_rate(void)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s/rate.db", dir);
	struct profile *p = profile_create(path, "t");
	CHECK(p != NULL);
	if (!p)
		return;
	struct prof_process info = {.pid = 8,
	                            .name = "r",
	                            .cmdline = "r",
	                            .sampling_interval = 1,
	                            .unwind = "dwarf",
	                            .max_frames = 64};
	int64_t upid;
	CHECK(profile_begin_process(p, &info, &upid) == 0);
	enum { BATCH = 16384, BATCHES = 16 };
	static struct prof_event ev[BATCH];
	for (size_t i = 0; i < BATCH; i++)
		ev[i] = event(1000 + i, i % 2 ? HP_EV_FREE : HP_EV_ALLOC,
		              0x10000 + 64 * i, 16 + i % 200, i % 300, 0);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int k = 0; k < BATCHES; k++)
		CHECK(profile_write_events(p, upid, ev, BATCH) == 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double secs = (double)(b.tv_sec - a.tv_sec) +
	              (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	printf("     profile_write_events: %d events in %.3f s: %.0f "
	       "events/s\n",
	       BATCH * BATCHES, secs, BATCH * BATCHES / secs);
	CHECK(profile_close(p) == 0);
	sqlite3 *db = NULL;
	CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
	      SQLITE_OK);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event"),
	             BATCH * BATCHES);
	sqlite3_close(db);
}

/*
 * A dump big enough for the writer's worker thread and two batches: 40000
 * distinct stacks (binary paths 16 deep under one root, pcs in the fake
 * module A) and, in the second batch, a copy of stack 0.  Its callsites
 * are the 105535 nodes of that tree, whatever the batches; the copy's
 * amounts land on stack 0's callsite (in a row per batch); a second dump
 * writes exact deltas.
 */
enum { BIG_N = 40000, BIG_DEPTH = 16 };

static void big_stacks(struct prof_stack *st, uint64_t (*pcs)[BIG_DEPTH + 1],
                       int second)
{
	for (size_t i = 0; i <= BIG_N; i++) {
		size_t k = i < BIG_N ? i : 0; /* the copy */
		pcs[i][BIG_DEPTH] = A_START + 0x30;
		for (int l = 0; l < BIG_DEPTH; l++)
			pcs[i][BIG_DEPTH - 1 - l] =
			        A_START + 0x100 +
			        0x10 * (2 * l + ((k >> l) & 1));
		uint64_t n = 1 + (second && (i == 5 || i == BIG_N));
		st[i] = stack(0, pcs[i], BIG_DEPTH + 1, n, n * (10 + k % 7),
		              n * FP, 0, 0, 0);
	}
}

static void test_big_dump_batches(void)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s/big.db", dir);
	static uint64_t pcs[BIG_N + 1][BIG_DEPTH + 1];
	static struct prof_stack st[BIG_N + 1];
	struct profile *p = profile_create(path, "t");
	CHECK(p != NULL);
	if (!p)
		return;
	struct prof_process info = {.pid = 9,
	                            .name = "big",
	                            .cmdline = "big",
	                            .sampling_interval = 1,
	                            .unwind = "dwarf",
	                            .max_frames = 64};
	int64_t upid;
	CHECK(profile_begin_process(p, &info, &upid) == 0);
	big_stacks(st, pcs, 0);
	struct prof_dump d1 = dump(1000, st, BIG_N + 1);
	CHECK(profile_write_dump(p, upid, &d1) == 0);
	big_stacks(st, pcs, 1);
	struct prof_dump d2 = dump(2000, st, BIG_N + 1);
	CHECK(profile_write_dump(p, upid, &d2) == 0);
	CHECK(profile_close(p) == 0);

	uint64_t bytes = 0;
	for (size_t i = 0; i < BIG_N; i++)
		bytes += 10 + i % 7;
	sqlite3 *db = NULL;
	CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
	      SQLITE_OK);
	/* 1 + (2 + 4 + ... + 2^15) + 40000 nodes, ids 1 to that. */
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM stack_profile_callsite"),
	             105535);
	CHECK_EQ_U64(q1(db, "SELECT max(id) FROM stack_profile_callsite"),
	             105535);
	CHECK_EQ_U64(q1(db, "SELECT count(DISTINCT callsite_id) FROM"
	                    " heap_profile_allocation"),
	             BIG_N);
	/* Dump 1: every stack once, stack 0 twice (10 bytes each). */
	CHECK_EQ_U64(q1(db, "SELECT sum(count) FROM heap_profile_allocation"
	                    " WHERE ts = 1000"),
	             BIG_N + 1);
	CHECK_EQ_U64(q1(db, "SELECT sum(size) FROM heap_profile_allocation"
	                    " WHERE ts = 1000"),
	             bytes + 10);
	/* Stack 0's callsite: 2 rows (the copy came in the second batch),
	 * 2 objects, 20 bytes. */
	CHECK_EQ_U64(q1(db, "SELECT count(*) || sum(count) || sum(size) FROM"
	                    " heap_profile_allocation WHERE ts = 1000 AND"
	                    " callsite_id = (SELECT callsite_id FROM"
	                    " heap_profile_allocation ORDER BY id LIMIT 1)"),
	             2220);
	/* Dump 2: exactly what stack 5 (1, 15 bytes) and the copy (1, 10)
	 * gained, in a row each. */
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heap_profile_allocation"
	                    " WHERE ts = 2000"),
	             2);
	CHECK_EQ_U64(q1(db, "SELECT sum(count) || sum(size) FROM"
	                    " heap_profile_allocation WHERE ts = 2000"),
	             225);
	CHECK_EQ_U64(q1(db, "SELECT typeof(write_ms) = 'real' AND write_ms >= 0"
	                    " FROM heapprof_dump WHERE ts = 2000"),
	             1);
	sqlite3_close(db);
}

/* Copy the file at from to to, byte for byte (what cp does): 0 or -1. */
static int copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	char buf[65536];
	size_t n;
	int ok = in && out;

	while (ok && (n = fread(buf, 1, sizeof(buf), in)) > 0)
		ok = fwrite(buf, 1, n, out) == n;
	ok = ok && !ferror(in);
	if (in)
		fclose(in);
	if (out && fclose(out) != 0)
		ok = 0;
	return ok ? 0 : -1;
}

/* The dumps and the live bytes of a copy of path made now, without its
 * -wal file, as "dumps/space" ("-" if it does not read as a profile). */
static void copy_alone(const char *path, const char *copy, char *out,
                       size_t len)
{
	char side[4400];
	static const char *const sfx[] = {"-wal", "-shm"};

	for (size_t i = 0; i < 2; i++) {
		snprintf(side, sizeof(side), "%s%s", copy, sfx[i]);
		unlink(side);
	}
	unlink(copy);
	snprintf(out, len, "-");
	if (copy_file(path, copy) < 0)
		return;
	sqlite3 *db = rd_open(copy, "test");
	if (!db)
		return;
	snprintf(out, len, "%lld/%lld",
	         (long long)q1(db, "SELECT count(*) FROM heapprof_dump"),
	         (long long)q1(db, "SELECT coalesce(sum(size), 0) FROM"
	                           " heap_profile_allocation"));
	sqlite3_close(db);
}

/*
 * Issue 18: the file alone holds every dump written, while the writer is
 * still open (its -wal file is not copied): an empty profile right after
 * profile_create, then each dump, small ones and a big one (whose commit
 * kicks the checkpoint thread, which the writer's own checkpoint waits
 * for).  A reader in a read transaction on an older snapshot holds the
 * newer frames in the WAL: the file lags until the reader is done and the
 * next dump is written.
 */
static void test_file_alone(void)
{
	char path[4300], copy[4300], got[64];
	static uint64_t pcs[BIG_N + 1][BIG_DEPTH + 1];
	static struct prof_stack big[BIG_N + 1];
	snprintf(path, sizeof(path), "%s/alone.db", dir);
	snprintf(copy, sizeof(copy), "%s/alone-copy.db", dir);
	struct profile *p = profile_create(path, "t");
	CHECK(p != NULL);
	if (!p)
		return;
	copy_alone(path, copy, got, sizeof(got));
	CHECK(!strcmp(got, "0/0"));
	struct prof_process info = {.pid = 11,
	                            .name = "alone",
	                            .cmdline = "alone",
	                            .sampling_interval = 1,
	                            .unwind = "dwarf",
	                            .max_frames = 64};
	int64_t upid;
	CHECK(profile_begin_process(p, &info, &upid) == 0);
	struct prof_stack d1[] = {stack(0, s1, 3, 2, 100, 2 * FP, 0, 0, 0)};
	struct prof_dump dd1 = dump(1000, d1, 1);
	CHECK(profile_write_dump(p, upid, &dd1) == 0);
	copy_alone(path, copy, got, sizeof(got));
	CHECK(!strcmp(got, "1/100"));

	/* A reader on the file as it is now, in a read transaction. */
	sqlite3 *rd = NULL;
	CHECK(sqlite3_open_v2(path, &rd, SQLITE_OPEN_READONLY, NULL) ==
	      SQLITE_OK);
	CHECK(sqlite3_exec(rd, "BEGIN", NULL, NULL, NULL) == SQLITE_OK);
	CHECK(q1(rd, "SELECT count(*) FROM heapprof_dump") == 1);
	struct prof_stack d2[] = {stack(0, s1, 3, 3, 150, 3 * FP, 0, 0, 0)};
	struct prof_dump dd2 = dump(2000, d2, 1);
	CHECK(profile_write_dump(p, upid, &dd2) == 0);
	copy_alone(path, copy, got, sizeof(got));
	CHECK(!strcmp(got, "1/100"));
	CHECK(q1(rd, "SELECT count(*) FROM heapprof_dump") == 1);
	sqlite3_exec(rd, "COMMIT", NULL, NULL, NULL);
	sqlite3_close(rd);

	/* The big dump: 40001 stacks, (10 + k % 7) bytes each. */
	big_stacks(big, pcs, 0);
	struct prof_dump dd3 = dump(3000, big, BIG_N + 1);
	CHECK(profile_write_dump(p, upid, &dd3) == 0);
	uint64_t bytes = 10; /* the copy of stack 0 */
	for (size_t i = 0; i < BIG_N; i++)
		bytes += 10 + i % 7;
	char want[64];
	/* Dump 3 is a new set of stacks: stack s1's 150 bytes stay. */
	snprintf(want, sizeof(want), "3/%llu",
	         (unsigned long long)(bytes + 150));
	copy_alone(path, copy, got, sizeof(got));
	CHECK(!strcmp(got, want));
	if (strcmp(got, want))
		fprintf(stderr, "  file alone: %s, want %s\n", got, want);
	CHECK(profile_close(p) == 0);
}

/* Writes two dumps of keyed stacks to path, the stacks of each interned
 * ahead (profile_intern_stacks) when ahead is set. */
static void write_keyed(const char *path, int ahead)
{
	struct prof_process info = {.pid = 77,
	                            .name = "k",
	                            .cmdline = "k",
	                            .sampling_interval = 1,
	                            .unwind = "dwarf",
	                            .max_frames = 64,
	                            .start_ts_ns = 1};
	struct profile *p = profile_create(path, "heapprof record -- k");
	CHECK(p != NULL);
	if (!p)
		return;
	int64_t upid = 0;
	CHECK(profile_begin_process(p, &info, &upid) == 0);
	struct prof_stack a[] = {
	        stack(0, s1, 3, 2, 100, 2 * FP, 0, 0, 0),
	        stack(0, s3, 3, 1, 1000, FP, 0, 0, 0),
	};
	a[0].key = 1;
	a[1].key = 2;
	struct prof_dump d1 = dump(1000, a, 2);
	if (ahead)
		CHECK(profile_intern_stacks(p, upid, &d1) == 0);
	if (ahead == 2) {
		/* Interned alone: the callsites are in the file already. */
		CHECK(profile_close(p) == 0);
		return;
	}
	CHECK(profile_write_dump(p, upid, &d1) == 0);
	struct prof_stack b[] = {
	        stack(0, s1, 3, 3, 150, 3 * FP, 1, 50, FP),
	        stack(0, s3, 3, 1, 1000, FP, 1, 1000, FP),
	        stack(0, s4, 2, 4, 256, 4 * FP, 0, 0, 0),
	};
	b[0].key = 1;
	b[1].key = 2;
	b[2].key = (1ull << 32) | 7; /* a later region's stack */
	struct prof_dump d2 = dump(2000, b, 3);
	if (ahead)
		CHECK(profile_intern_stacks(p, upid, &d2) == 0);
	CHECK(profile_write_dump(p, upid, &d2) == 0);
	CHECK(profile_intern_stacks(p, upid + 1, &d2) == -EINVAL);
	CHECK(profile_close(p) == 0);
}

/* What a reader sees: the same rows whether the stacks were interned ahead
 * of their dumps or by them, and every callsite once. */
static void test_interned_ahead(void)
{
	char a[4300], b[4300];
	snprintf(a, sizeof(a), "%s.ahead", dbpath);
	snprintf(b, sizeof(b), "%s.plain", dbpath);
	unlink(a);
	unlink(b);
	write_keyed(a, 1);
	write_keyed(b, 0);
	static const char *const sql[] = {
	        "SELECT count(*) FROM stack_profile_callsite",
	        "SELECT count(*) FROM stack_profile_frame",
	        "SELECT count(*) FROM (SELECT parent_id, frame_id FROM"
	        " stack_profile_callsite GROUP BY 1, 2 HAVING count(*) > 1)",
	        "SELECT sum(a.size * (f.rel_pc + 1) * a.ts) FROM"
	        " heap_profile_allocation a JOIN stack_profile_callsite c ON"
	        " a.callsite_id = c.id JOIN stack_profile_frame f ON"
	        " c.frame_id = f.id",
	        "SELECT sum(a.count * (f.rel_pc + 1) * a.ts) FROM"
	        " heap_profile_allocation a JOIN stack_profile_callsite c ON"
	        " a.callsite_id = c.id JOIN stack_profile_frame f ON"
	        " c.frame_id = f.id",
	        "SELECT count(*) FROM heapprof_dump",
	};
	sqlite3 *da = NULL, *db = NULL;
	CHECK(sqlite3_open_v2(a, &da, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	CHECK(sqlite3_open_v2(b, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++)
		CHECK_EQ_U64((uint64_t)q1(da, sql[i]),
		             (uint64_t)q1(db, sql[i]));
	CHECK(q1(da, sql[2]) == 0);
	CHECK(q1(da, sql[5]) == 2);
	CHECK(q1(da, "SELECT sum(size) FROM heap_profile_allocation") ==
	      150 - 50 + 1000 - 1000 + 256);
	sqlite3_close(da);
	sqlite3_close(db);
	unlink(a);
	unlink(b);
	/* Interning alone writes the stacks' callsites (s1 and s3: four,
	 * sharing their outer two frames) and no dump. */
	write_keyed(a, 2);
	CHECK(sqlite3_open_v2(a, &da, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	CHECK(q1(da, "SELECT count(*) FROM stack_profile_callsite") == 4);
	CHECK(q1(da, "SELECT count(*) FROM heapprof_dump") == 0);
	CHECK(q1(da, "SELECT count(*) FROM heap_profile_allocation") == 0);
	sqlite3_close(da);
	unlink(a);
}

/* heapprof_event (a virtual table over the trace's chunks) in every
 * connection of the test, as rd_open and the writer register it. */
static int register_events(sqlite3 *db, char **err,
                           const struct sqlite3_api_routines *api)
{
	(void)err;
	(void)api;
	return tr_events_register(db);
}

int main(void)
{
	sqlite3_auto_extension((void (*)(void))register_events);
	static const struct unit_test tests[] = {
	        {"self_contained", test_self_contained},
	        {"dump1_rows", test_dump1_rows},
	        {"dump2_deltas", test_dump2_deltas},
	        {"state_by_sum", test_state_by_sum},
	        {"callsite_tree", test_callsite_tree},
	        {"interning", test_interning},
	        {"special_frames", test_special_frames},
	        {"symbolized", test_symbolized},
	        {"process_tables", test_process_tables},
	        {"seed_query", test_seed_query},
	        {"failed_dump_rolls_back", test_failed_dump_rolls_back},
	        {"create_errors", test_create_errors},
	        {"session_rows", test_session_rows},
	        {"session_reader", test_session_reader},
	        {"old_profile", test_old_profile},
	        {"session_report", test_session_report},
	        {"old_profile_report", test_old_profile_report},
	        {"trace_rows", test_trace_rows},
	        {"event_rate", test_event_rate},
	        {"big_dump_batches", test_big_dump_batches},
	        {"file_alone", test_file_alone},
	        {"interned_ahead", test_interned_ahead},
	        {NULL, NULL},
	};
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(dbpath, sizeof(dbpath), "%s/profile.db", dir);
	init_modules();
	write_profile();
	int rc = unit_main("profile", tests);
	if (!rc) {
		char cmd[4400];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return rc;
}
