/*
 * Unit tests of the profile writer: two dumps of known cumulative counters
 * (merged duplicate stacks, a PC outside every module, the overflow stack,
 * frees, a second heap), checked with SQL: per-dump delta rows, state by
 * summing up to a ts, the callsite tree, interning, symbolized names, and
 * that a failed dump leaves the file and the writer consistent.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/profile.h"
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

static void test_create_errors(void)
{
	fprintf(stderr, "  (a 'cannot open' error message is expected)\n");
	CHECK(profile_create("/nonexistent-dir/x.db", "") == NULL);
	CHECK(profile_close(NULL) == 0);
}

int main(void)
{
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
