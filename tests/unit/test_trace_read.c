/*
 * Unit tests of reading an event trace back (src/store/trace_read.c) and
 * of what report, pprof and flamegraph make of it, on a profile made by
 * hand: the writer gives it a process and one final dump of three stacks
 * in this binary's functions (trt_leak, trt_temp, trt_keep, called from
 * trt_main) and the events, then SQL adds the rest of the trace (stack
 * mapping, the final dump's live blocks, the heapprof_trace row), as
 * `record --trace` would.  Every test runs on it as written (the events
 * in chunks) and on a copy with the older table of rows.
 *
 * The pattern, times from the process start S:
 *   trt_leak   3 blocks of 100 B at +1, +2, +3 ms, never freed
 *   trt_temp   5 blocks of 50 B, one at a time at one address from +10 ms
 *              every 10 us, each freed 5 us later (the last 1 ms later:
 *              a lifetime right at the default threshold)
 *   trt_keep   2 blocks of 1000 B at +20 ms, freed at +100 ms
 *   unknown    1 block of 7 B (a stack key no dump maps) at +30 ms, freed
 *              1 us later
 * and the final dump at +10 s.  Also the duration parser.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "store/profile.h"
#include "store/reader.h"
#include "model/state.h"
#include "store/trace_read.h"
#include "selfmod.h"
#include "unit.h"

#define FP HP_OBJ_FP_ONE
#define S  5000000000LL /* process start, boot time */
#define MS 1000000LL
#define US 1000LL

__attribute__((noinline)) int trt_leak(int x);
__attribute__((noinline)) int trt_temp(int x);
__attribute__((noinline)) int trt_keep(int x);
__attribute__((noinline)) int trt_main(int x);
__attribute__((noinline)) int trt_leak(int x)
{
	return x * 3 + 1;
}
__attribute__((noinline)) int trt_temp(int x)
{
	return x * 5 + 2;
}
__attribute__((noinline)) int trt_keep(int x)
{
	return x * 7 + 3;
}
__attribute__((noinline)) int trt_main(int x)
{
	return trt_leak(x) + trt_temp(x) + trt_keep(x);
}

static char dir[] = "/tmp/heapprof-test-trace-XXXXXX";
static char dbpath[4200], nodbpath[4200], ringpath[4200];
static struct selfmod self;
static struct prof_module mod;
static const struct prof_heap heaps[1] = {{"libc.malloc", 1}};
static uint64_t pc_leak[2], pc_temp[2], pc_keep[2];

static struct prof_stack stack(uint64_t key, const uint64_t *pcs, uint64_t ac,
                               uint64_t ab, uint64_t fc, uint64_t fb)
{
	return (struct prof_stack){
	        .key = key,
	        .nframes = 2,
	        .pcs = pcs,
	        .alloc_count = ac,
	        .alloc_bytes = ab,
	        .alloc_objects_fp = ac * FP,
	        .free_count = fc,
	        .free_bytes = fb,
	        .free_objects_fp = fc * FP,
	};
}

static int exec_sql(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fprintf(stderr, "sql failed: %s: %s\n", sql, msg ? msg : "?");
	sqlite3_free(msg);
	return rc;
}

/* The events of the pattern, handed to the writer in one call. */
static struct prof_event evs[32];
static size_t nevs;

static void ev(int64_t ts, const char *kind, int64_t addr, int64_t size,
               int64_t key, int64_t alloc_ts)
{
	evs[nevs++] = (struct prof_event){
	        .ts_ns = (uint64_t)ts,
	        .kind = !strcmp(kind, "free") ? HP_EV_FREE : HP_EV_ALLOC,
	        .tid = 77,
	        .address = (uint64_t)addr,
	        .size = (uint64_t)size,
	        .charged = (uint64_t)size,
	        .alloc_ts_ns = (uint64_t)alloc_ts,
	        .stack_key = (uint64_t)key,
	};
}

/* heapprof_event in every connection of the test (as rd_open and the
 * writer register it). */
static int register_events(sqlite3 *db, char **err,
                           const struct sqlite3_api_routines *api)
{
	(void)err;
	(void)api;
	return tr_events_register(db);
}

/*
 * A copy of the profile at path whose trace is a table of rows, as
 * profiles were written before the chunks: the same events, in order.
 */
static void to_rows(const char *path, const char *rows)
{
	sqlite3 *db = NULL;
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	char *sql = sqlite3_mprintf("VACUUM INTO %Q", rows);
	CHECK(exec_sql(db, sql) == SQLITE_OK);
	sqlite3_free(sql);
	sqlite3_close(db);
	CHECK(sqlite3_open(rows, &db) == SQLITE_OK);
	CHECK(exec_sql(db, "CREATE TABLE ev_rows AS SELECT upid, ts, kind, tid,"
	                   " address, size, charged, heap_name, stack_key,"
	                   " alloc_ts FROM heapprof_event ORDER BY rowid;"
	                   " DROP VIEW heapprof_event_callsite;"
	                   " DROP TABLE heapprof_event;"
	                   " DROP TABLE heapprof_event_chunk;"
	                   " DROP TABLE heapprof_event_heap;"
	                   " CREATE TABLE heapprof_event(upid INT, ts INT,"
	                   " kind TEXT, tid INT, address INT, size INT,"
	                   " charged INT, heap_name TEXT, stack_key INT,"
	                   " alloc_ts INT);"
	                   " INSERT INTO heapprof_event SELECT * FROM ev_rows;"
	                   " DROP TABLE ev_rows;"
	                   " CREATE VIEW heapprof_event_callsite AS SELECT e.*,"
	                   " s.callsite_id FROM heapprof_event e LEFT JOIN"
	                   " heapprof_trace_stack s ON s.upid = e.upid AND"
	                   " s.stack_key = e.stack_key;"
	                   " CREATE INDEX heapprof_event_upid_ts ON"
	                   " heapprof_event(upid, ts)") == SQLITE_OK);
	CHECK_EQ_U64(tr_events_form(db), TR_FORM_ROWS);
	sqlite3_close(db);
}

/* The profile: process, the events, final dump, then the rest of the
 * trace by SQL. */
static void write_profile(const char *path, int with_blocks, const char *mode)
{
	struct prof_process info = {
	        .pid = 777,
	        .name = "pattern",
	        .cmdline = "./pattern",
	        .sampling_interval = 1,
	        .unwind = "fp",
	        .max_frames = 64,
	        .shmem_size = 1 << 20,
	        .from_startup = 1,
	        .start_ts_ns = S,
	};
	int64_t upid = 0;
	struct profile *p = profile_create(path, "heapprof record --trace");
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(profile_begin_process(p, &info, &upid) == 0);
	CHECK(upid == 1);
	nevs = 0;
	for (int i = 0; i < 3; i++)
		ev(S + (1 + i) * MS, "alloc", 0x1000 + 0x100 * i, 100, 1, 0);
	for (int i = 0; i < 5; i++) {
		int64_t t = S + 10 * MS + i * 10 * US;
		ev(t, "alloc", 0x2000, 50, 2, 0);
		ev(t + (i == 4 ? MS : 5 * US), "free", 0x2000, 50, 2, t);
	}
	for (int i = 0; i < 2; i++) {
		ev(S + 20 * MS, "alloc", 0x3000 + 0x400 * i, 1000, 3, 0);
		ev(S + 100 * MS, "free", 0x3000 + 0x400 * i, 1000, 3,
		   S + 20 * MS);
	}
	ev(S + 30 * MS, "alloc", 0x5000, 7, 99, 0);
	ev(S + 30 * MS + US, "free", 0x5000, 7, 99, S + 30 * MS);
	CHECK(profile_write_events(p, upid, evs, nevs) == 0);
	struct prof_stack st[] = {
	        stack(1, pc_leak, 3, 300, 0, 0),
	        stack(2, pc_temp, 5, 250, 5, 250),
	        stack(3, pc_keep, 2, 2000, 2, 2000),
	};
	/* The unknown block of 7 B: counted in no stack of the dump. */
	struct prof_dump d = {
	        .ts_ns = S + 10000 * MS,
	        .reason = "end",
	        .modules = &mod,
	        .nmodules = 1,
	        .stacks = st,
	        .nstacks = 3,
	        .heaps = heaps,
	        .nheaps = 1,
	        .client_state = HP_STATE_ACTIVE,
	};
	CHECK(profile_write_dump(p, upid, &d) == 0);
	struct prof_process_end end = {.end_ts_ns = S + 10001 * MS,
	                               .exit_status = 0};
	CHECK(profile_end_process(p, upid, &end) == 0);
	CHECK(profile_close(p) == 0);

	sqlite3 *db = NULL;
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK(exec_sql(db, "BEGIN") == SQLITE_OK);
	/* Stack keys to the leaf callsites of the functions. */
	CHECK(exec_sql(db, "INSERT OR REPLACE INTO heapprof_trace_stack(upid,"
	                   " stack_key, callsite_id) SELECT 1, CASE f.name"
	                   " WHEN 'trt_leak' THEN 1 WHEN 'trt_temp' THEN 2"
	                   " ELSE 3 END, c.id FROM stack_profile_callsite c"
	                   " JOIN stack_profile_frame f ON f.id = c.frame_id"
	                   " WHERE f.name IN ('trt_leak', 'trt_temp', "
	                   "'trt_keep')") == SQLITE_OK);
	if (with_blocks) {
		CHECK(exec_sql(db, "UPDATE heapprof_dump SET blocks_in_flight "
		                   "= 0") == SQLITE_OK);
		char *sql = sqlite3_mprintf(
		        "INSERT INTO heapprof_block(dump_id, upid, address,"
		        " size, charged, objects_fp, heap_name, callsite_id,"
		        " tid, ts) SELECT d.id, 1, 0x1000 + 0x100 * k.i, 100,"
		        " 100, %lld, 'libc.malloc', s.callsite_id, 77,"
		        " %lld + k.i * %lld FROM heapprof_dump d,"
		        " (SELECT 0 AS i UNION SELECT 1 UNION SELECT 2) k,"
		        " heapprof_trace_stack s WHERE s.stack_key = 1",
		        (long long)FP, (long long)(S + MS), (long long)MS);
		CHECK(exec_sql(db, sql) == SQLITE_OK);
		sqlite3_free(sql);
	}
	char *sql = sqlite3_mprintf(
	        "INSERT INTO heapprof_trace(upid, mode, buffer_bytes, events,"
	        " dropped_allocs, dropped_frees, dropped_alloc_bytes,"
	        " dropped_free_bytes, overwritten, incomplete, full_ts, waits,"
	        " wait_ns) VALUES(1, %Q, 65536, 19, %d, %d, %d, %d, %d, 0, 0,"
	        " 0, 0)",
	        mode, !strcmp(mode, "streaming") ? 0 : 4,
	        !strcmp(mode, "streaming") ? 0 : 2,
	        !strcmp(mode, "streaming") ? 0 : 400,
	        !strcmp(mode, "streaming") ? 0 : 200,
	        !strcmp(mode, "ring") ? 1234 : 0);
	CHECK(exec_sql(db, sql) == SQLITE_OK);
	sqlite3_free(sql);
	CHECK(exec_sql(db, "COMMIT") == SQLITE_OK);
	sqlite3_close(db);
}

static void setup(void)
{
	CHECK(mkdtemp(dir) != NULL);
	snprintf(dbpath, sizeof(dbpath), "%s/trace.db", dir);
	snprintf(nodbpath, sizeof(nodbpath), "%s/noblocks.db", dir);
	snprintf(ringpath, sizeof(ringpath), "%s/ring.db", dir);
	self = selfmod_find((const void *)trt_main);
	CHECK(self.ok);
	mod = (struct prof_module){
	        .path = self.path,
	        .build_id = self.build_id,
	        .build_id_len = (uint32_t)self.build_id_len,
	        .start = self.start,
	        .end = self.end,
	        .base = self.base,
	};
	pc_leak[0] = (uintptr_t)trt_leak + 1;
	pc_temp[0] = (uintptr_t)trt_temp + 1;
	pc_keep[0] = (uintptr_t)trt_keep + 1;
	pc_leak[1] = pc_temp[1] = pc_keep[1] = (uintptr_t)trt_main + 1;
	write_profile(dbpath, 1, "streaming");
	write_profile(nodbpath, 0, "oneshot");
	write_profile(ringpath, 1, "ring");
}

static sqlite3 *open_ro(const char *path)
{
	sqlite3 *db = rd_open(path, "test");
	CHECK(db != NULL);
	return db;
}

/* The callsite id of the leaf frame named fn. */
static int64_t leaf_of(sqlite3 *db, const char *fn)
{
	sqlite3_stmt *st = NULL;
	int64_t id = -1;
	if (sqlite3_prepare_v2(db,
	                       "SELECT callsite_id FROM heapprof_trace_stack s"
	                       " JOIN stack_profile_callsite c ON"
	                       " c.id = s.callsite_id JOIN stack_profile_frame"
	                       " f ON f.id = c.frame_id WHERE f.name = ?",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, fn, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			id = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return id;
}

static const struct rd_sample *sample_of(const struct tr_heap *h, int64_t cs)
{
	for (size_t i = 0; h && i < h->n; i++)
		if (h->s[i].callsite == cs)
			return &h->s[i];
	return NULL;
}

static void test_info(void)
{
	sqlite3 *db = open_ro(dbpath);
	struct tr_info t;

	CHECK(tr_load_info(db, "test", 1, &t) == 0);
	CHECK(t.present && t.has_row);
	CHECK(!strcmp(t.mode, "streaming"));
	CHECK_EQ_U64(t.buffer_bytes, 65536);
	CHECK_EQ_U64(t.allocs, 11);
	CHECK_EQ_U64(t.frees, 8);
	CHECK_EQ_U64(t.first_ts, S + MS);
	CHECK_EQ_U64(t.last_ts, S + 100 * MS);
	CHECK_EQ_U64(tr_left_out(&t), 0);
	CHECK(tr_load_info(db, "test", 2, &t) == 0);
	CHECK(!t.present);
	sqlite3_close(db);

	db = open_ro(ringpath);
	CHECK(tr_load_info(db, "test", 1, &t) == 0);
	CHECK(!strcmp(t.mode, "ring"));
	CHECK_EQ_U64(t.overwritten, 1234);
	CHECK_EQ_U64(tr_left_out(&t), 1234 + 4 + 2);
	sqlite3_close(db);
}

/* A profile without the trace tables reads as no trace. */
static void test_old_profile(void)
{
	char old[4300];
	snprintf(old, sizeof(old), "%s/old.db", dir);
	unlink(old); /* (made by the run before, on the other form) */
	sqlite3 *db = NULL;
	CHECK(sqlite3_open(old, &db) == SQLITE_OK);
	CHECK(exec_sql(db, "ATTACH ':memory:' AS x") == SQLITE_OK);
	sqlite3_close(db);
	struct tr_info t;
	struct tr_set s;
	struct tr_heap h;
	CHECK(sqlite3_open(old, &db) == SQLITE_OK);
	CHECK(exec_sql(db, "CREATE TABLE heapprof_dump(id INTEGER PRIMARY KEY,"
	                   " ts INT, upid INT, reason TEXT);"
	                   "CREATE TABLE heap_profile_allocation(id INTEGER"
	                   " PRIMARY KEY, type TEXT, ts INT, upid INT,"
	                   " heap_name TEXT, callsite_id INT, count INT,"
	                   " size INT)") == SQLITE_OK);
	CHECK(tr_load_info(db, "test", 1, &t) == 0 && !t.present);
	CHECK(tr_temporaries(db, "test", 1, MS, &s) == 0 && s.n == 0);
	CHECK(tr_window(db, "test", 1, "libc.malloc", 0, S, &h) == 0 &&
	      h.n == 0);
	tr_heap_free(&h);
	struct tr_leak_src src;
	CHECK(state_leaks(db, "test", 1, &s, &src) == 0 && !src.have_dump &&
	      s.n == 0);
	sqlite3_close(db);
}

static void test_leaks(void)
{
	const char *paths[] = {dbpath, nodbpath};
	for (int k = 0; k < 2; k++) {
		sqlite3 *db = open_ro(paths[k]);
		struct tr_set s;
		struct tr_leak_src src;
		CHECK(state_leaks(db, "test", 1, &s, &src) == 0);
		CHECK(src.have_dump);
		CHECK(src.from_blocks == (k == 0));
		CHECK_EQ_U64(src.dump_ts, S + 10000 * MS);
		CHECK_EQ_U64(s.n, 1);
		const struct tr_heap *h = tr_set_find(&s, "libc.malloc");
		CHECK(h != NULL);
		if (h) {
			CHECK_EQ_U64(h->tot[RD_SPACE], 300);
			CHECK_EQ_U64(h->tot[RD_OBJECTS], 3);
			CHECK_EQ_U64(h->tot[RD_ALLOC_SPACE], 300);
			CHECK_EQ_U64(h->records, 3);
			CHECK_EQ_U64(h->n, 1);
			const struct rd_sample *x =
			        sample_of(h, leaf_of(db, "trt_leak"));
			CHECK(x && x->v[RD_SPACE] == 300 &&
			      x->v[RD_OBJECTS] == 3);
		}
		tr_set_free(&s);
		sqlite3_close(db);
	}
}

static void test_temporaries(void)
{
	sqlite3 *db = open_ro(dbpath);
	struct tr_set s;

	/* 1 ms: the five of trt_temp (the last exactly 1 ms) and the
	 * unknown one; not trt_keep's (80 ms). */
	CHECK(tr_temporaries(db, "test", 1, MS, &s) == 0);
	const struct tr_heap *h = tr_set_find(&s, "libc.malloc");
	CHECK(s.n == 1 && h != NULL);
	if (h) {
		CHECK_EQ_U64(h->tot[RD_OBJECTS], 6);
		CHECK_EQ_U64(h->tot[RD_SPACE], 257);
		CHECK_EQ_U64(h->all_count, 11);
		CHECK_EQ_U64(h->all_bytes, 300 + 250 + 2000 + 7);
		const struct rd_sample *x =
		        sample_of(h, leaf_of(db, "trt_temp"));
		CHECK(x && x->v[RD_OBJECTS] == 5 && x->v[RD_SPACE] == 250);
		x = sample_of(h, 0);
		CHECK(x && x->v[RD_OBJECTS] == 1 && x->v[RD_SPACE] == 7);
		CHECK(!sample_of(h, leaf_of(db, "trt_keep")));
	}
	tr_set_free(&s);
	/* Just below 1 ms: the last of trt_temp is not temporary. */
	CHECK(tr_temporaries(db, "test", 1, MS - 1, &s) == 0);
	h = tr_set_find(&s, "libc.malloc");
	CHECK(h && h->tot[RD_OBJECTS] == 5);
	tr_set_free(&s);
	/* 100 ms: trt_keep's too. */
	CHECK(tr_temporaries(db, "test", 1, 100 * MS, &s) == 0);
	h = tr_set_find(&s, "libc.malloc");
	CHECK(h && h->tot[RD_OBJECTS] == 8 && h->tot[RD_SPACE] == 2257);
	tr_set_free(&s);
	sqlite3_close(db);
}

static void test_window(void)
{
	sqlite3 *db = open_ro(dbpath);
	struct tr_heap h;
	int64_t leak = leaf_of(db, "trt_leak"), temp = leaf_of(db, "trt_temp"),
	        keep = leaf_of(db, "trt_keep");

	/* [S, S + 15 ms): trt_leak's 3 (live), trt_temp's 5 (freed). */
	CHECK(tr_window(db, "test", 1, "libc.malloc", S, S + 15 * MS, &h) == 0);
	CHECK_EQ_U64(h.tot[RD_ALLOC_OBJECTS], 8);
	CHECK_EQ_U64(h.tot[RD_ALLOC_SPACE], 550);
	CHECK_EQ_U64(h.tot[RD_OBJECTS], 3);
	CHECK_EQ_U64(h.tot[RD_SPACE], 300);
	const struct rd_sample *x = sample_of(&h, temp);
	CHECK(x && x->v[RD_ALLOC_OBJECTS] == 5 && x->v[RD_OBJECTS] == 0 &&
	      x->v[RD_SPACE] == 0);
	CHECK(sample_of(&h, leak) && !sample_of(&h, keep));
	tr_heap_free(&h);
	/* The window ends between trt_temp's last alloc and its free: that
	 * block is live at `to`. */
	int64_t last = S + 10 * MS + 40 * US;
	CHECK(tr_window(db, "test", 1, "libc.malloc", S + 10 * MS, last + 1,
	                &h) == 0);
	CHECK_EQ_U64(h.tot[RD_ALLOC_OBJECTS], 5);
	CHECK_EQ_U64(h.tot[RD_OBJECTS], 1);
	CHECK_EQ_U64(h.tot[RD_SPACE], 50);
	tr_heap_free(&h);
	/* Only trt_keep's phase: live at +25 ms, gone at +200 ms. */
	CHECK(tr_window(db, "test", 1, "libc.malloc", S + 20 * MS, S + 25 * MS,
	                &h) == 0);
	CHECK_EQ_U64(h.tot[RD_ALLOC_OBJECTS], 2);
	CHECK_EQ_U64(h.tot[RD_OBJECTS], 2);
	CHECK_EQ_U64(h.tot[RD_SPACE], 2000);
	CHECK(h.n == 1 && h.s[0].callsite == keep);
	tr_heap_free(&h);
	/* With the unknown block (callsite 0), allocated and freed. */
	CHECK(tr_window(db, "test", 1, "libc.malloc", S + 20 * MS, S + 50 * MS,
	                &h) == 0);
	CHECK_EQ_U64(h.tot[RD_ALLOC_OBJECTS], 3);
	CHECK_EQ_U64(h.tot[RD_OBJECTS], 2);
	CHECK(h.n == 2 && h.s[0].callsite == 0 && h.s[0].v[RD_SPACE] == 0 &&
	      h.s[0].v[RD_ALLOC_SPACE] == 7);
	tr_heap_free(&h);
	CHECK(tr_window(db, "test", 1, "libc.malloc", S + 20 * MS, S + 200 * MS,
	                &h) == 0);
	CHECK_EQ_U64(h.tot[RD_ALLOC_OBJECTS], 3); /* and the unknown one */
	CHECK_EQ_U64(h.tot[RD_OBJECTS], 0);
	CHECK_EQ_U64(h.tot[RD_SPACE], 0);
	tr_heap_free(&h);
	/* A free of a block allocated before the window changes nothing. */
	CHECK(tr_window(db, "test", 1, "libc.malloc", S + 21 * MS, S + 200 * MS,
	                &h) == 0);
	CHECK_EQ_U64(h.tot[RD_ALLOC_OBJECTS], 1);
	CHECK_EQ_U64(h.tot[RD_SPACE], 0);
	tr_heap_free(&h);
	sqlite3_close(db);
}

static void test_timeline(void)
{
	sqlite3 *db = open_ro(dbpath);
	int64_t live[200], peak[200], net = -1;

	/* 1 ms buckets over [S, S + 200 ms). */
	CHECK(tr_timeline(db, "test", 1, "libc.malloc", S, S + 200 * MS, 200, 0,
	                  live, peak) == 0);
	CHECK_EQ_U64(live[0], 0);
	CHECK_EQ_U64(live[1], 100);
	CHECK_EQ_U64(live[3], 300);
	CHECK_EQ_U64(live[9], 300);
	/* trt_temp's: one 50 B block at a time, the last freed at +11 ms */
	CHECK_EQ_U64(peak[10], 350);
	CHECK_EQ_U64(live[10], 350);
	CHECK_EQ_U64(live[11], 300);
	CHECK_EQ_U64(live[20], 2300);
	CHECK_EQ_U64(peak[30], 2307);
	CHECK_EQ_U64(live[30], 2300);
	CHECK_EQ_U64(live[99], 2300);
	CHECK_EQ_U64(live[100], 300);
	CHECK_EQ_U64(peak[100], 2300);
	CHECK_EQ_U64(live[199], 300);
	CHECK(tr_net_bytes(db, "test", 1, "libc.malloc", &net) == 0);
	CHECK_EQ_U64(net, 300);
	/* A base (the ring's anchor) shifts everything. */
	CHECK(tr_timeline(db, "test", 1, "libc.malloc", S, S + 200 * MS, 200,
	                  1000, live, peak) == 0);
	CHECK_EQ_U64(live[0], 1000);
	CHECK_EQ_U64(live[199], 1300);
	sqlite3_close(db);
}

static void test_objects_fp(void)
{
	CHECK_EQ_U64(tr_objects_fp(10, 10, 1), FP);
	CHECK_EQ_U64(tr_objects_fp(8192, 8192, 4096), FP);
	/* 1 B sampled at 4096: p = 1 - exp(-1/4096), about 4096.5 each */
	uint64_t fp = tr_objects_fp(1, 4096, 4096);
	CHECK(fp > 4096 * FP && fp < 4097 * FP);
}

static void test_duration(void)
{
	int64_t ns = -1;
	CHECK(opt_parse_duration("t", "--x", "1.5s", &ns) == 0 &&
	      ns == 1500000000);
	CHECK(opt_parse_duration("t", "--x", "500ms", &ns) == 0 &&
	      ns == 500000000);
	CHECK(opt_parse_duration("t", "--x", "250us", &ns) == 0 &&
	      ns == 250000);
	CHECK(opt_parse_duration("t", "--x", "42ns", &ns) == 0 && ns == 42);
	CHECK(opt_parse_duration("t", "--x", "0", &ns) == 0 && ns == 0);
	CHECK(opt_parse_duration("t", "--x", ".25s", &ns) == 0 &&
	      ns == 250000000);
	CHECK(opt_parse_duration("t", "--x", "1.000000001s", &ns) == 0 &&
	      ns == 1000000001);
	CHECK(opt_parse_duration("t", "--x", "9223372036s", &ns) == 0);
	fputs("(six 'invalid --x' messages expected:)\n", stderr);
	CHECK(opt_parse_duration("t", "--x", "1", &ns) == -1);
	CHECK(opt_parse_duration("t", "--x", "-1s", &ns) == -1);
	CHECK(opt_parse_duration("t", "--x", "1.5", &ns) == -1);
	CHECK(opt_parse_duration("t", "--x", "1 s", &ns) == -1);
	CHECK(opt_parse_duration("t", "--x", "s", &ns) == -1);
	CHECK(opt_parse_duration("t", "--x", "9223372037s", &ns) == -1);
	char b[32];
	CHECK(!strcmp(opt_duration_str(1000000, b, sizeof(b)), "1 ms"));
	CHECK(!strcmp(opt_duration_str(1500000000, b, sizeof(b)), "1.5 s"));
	CHECK(!strcmp(opt_duration_str(0, b, sizeof(b)), "0 s"));
	CHECK(!strcmp(opt_duration_str(250, b, sizeof(b)), "250 ns"));
	CHECK(!strcmp(opt_duration_str(1234567, b, sizeof(b)), "1.235 ms"));
}

/* Run a command with stdout captured; the text, malloc'd. */
static char *run_cmd(int (*cmd)(int, char **), int argc, char **argv,
                     int *status)
{
	FILE *cap = tmpfile();
	int saved = dup(1);
	char *out = NULL;

	fflush(stdout);
	dup2(fileno(cap), 1);
	*status = cmd(argc, argv);
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

static int has(const char *text, const char *want)
{
	if (text && strstr(text, want))
		return 1;
	fprintf(stderr, "  missing '%s' in:\n%s\n", want, text ? text : "");
	return 0;
}

static void test_report(void)
{
	char *argv[] = {"report", dbpath, NULL};
	int status = -1;
	char *out = run_cmd(cmd_report, 2, argv, &status);

	CHECK(status == 0);
	CHECK(has(out, "  trace          streaming, 64.00 KiB buffer: 19 events"
	               " kept (11 allocations, 8 frees); complete: nothing"
	               " left out\n"));
	CHECK(has(out, "  Leaks: allocations still live at exit, from the final"
	               " dump's live blocks (exact)\n"
	               "    heap libc.malloc    3 blocks, 300 B\n"));
	CHECK(has(out, "  Top 10 leaks in heap libc.malloc by bytes"));
	CHECK(has(out, "      1  300 B  100.0%       3  trt_leak"));
	CHECK(has(out, "  Temporary allocations: freed at most 1 ms after they"
	               " were made (--temporary-threshold), from the trace\n"
	               "    heap libc.malloc    6 of 11 allocations (54.5%),"
	               " 257 B\n"
	               "    (1 of them without a known stack: their stack is"
	               " in no dump)\n"));
	CHECK(has(out, "      1      5   83.3%  250 B  trt_temp"));
	CHECK(!strstr(out ? out : "", "warning: the trace is incomplete"));
	free(out);

	char *argv2[] = {"report", dbpath, "--temporary-threshold", "100ms",
	                 NULL};
	out = run_cmd(cmd_report, 4, argv2, &status);
	CHECK(status == 0);
	CHECK(has(out, "freed at most 100 ms after"));
	CHECK(has(out, "    heap libc.malloc    8 of 11 allocations (72.7%)"));
	free(out);

	char *argv3[] = {"report", nodbpath, NULL};
	out = run_cmd(cmd_report, 2, argv3, &status);
	CHECK(status == 0);
	CHECK(has(out, "  trace          oneshot, 64.00 KiB buffer: 19 events"
	               " kept (11 allocations, 8 frees); 4 allocations (400 B)"
	               " and 2 frees (200 B) left out (made after it"
	               " filled)\n"));
	CHECK(has(out, "  warning: the trace is incomplete (6 events left"
	               " out)"));
	CHECK(has(out, "from the final dump's per-stack counters (it kept no"
	               " blocks)\n    heap libc.malloc    3 blocks, 300 B\n"));
	CHECK(has(out, "from the trace (incomplete: lower bounds)"));
	free(out);

	char *argv4[] = {"report", ringpath, NULL};
	out = run_cmd(cmd_report, 2, argv4, &status);
	CHECK(status == 0);
	CHECK(has(out, "ring, 64.00 KiB buffer: the newest 19 events kept (11"
	               " allocations, 8 frees, from +0.001 s); 1234 older"
	               " events overwritten; 4 allocations (400 B) and 2 frees"
	               " (200 B) left out (their slot was being written)\n"));
	free(out);

	char *argv5[] = {"report", dbpath, "--temporary-threshold", "1", NULL};
	fputs("(an 'invalid --temporary-threshold' message expected:)\n",
	      stderr);
	out = run_cmd(cmd_report, 4, argv5, &status);
	CHECK(status == 2);
	free(out);
}

static void test_pprof_args(void)
{
	char out1[4300];
	snprintf(out1, sizeof(out1), "%s/w.pb.gz", dir);
	char *ok[] = {"pprof", dbpath, "--from", "0", "--to",
	              "15ms",  "-o",   out1,     NULL};
	int status = -1;
	char *out = run_cmd(cmd_pprof, 8, ok, &status);
	struct stat sb;
	CHECK(status == 0);
	CHECK(has(out, "window +0.000000 s to +0.015000 s"));
	CHECK(has(out, ", 2 samples\n"));
	CHECK(stat(out1, &sb) == 0 && sb.st_size > 0);
	free(out);

	fputs("(a '--from ... is not before --to' message expected:)\n",
	      stderr);
	char *bad[] = {"pprof", dbpath, "--from", "2s", "--to", "1s", NULL};
	out = run_cmd(cmd_pprof, 6, bad, &status);
	CHECK(status == 2);
	free(out);

	/* A profile without a trace: refused. */
	char notrace[4300];
	snprintf(notrace, sizeof(notrace), "%s/notrace.db", dir);
	unlink(notrace);
	sqlite3 *db = NULL;
	CHECK(sqlite3_open(dbpath, &db) == SQLITE_OK);
	char *sql = sqlite3_mprintf("VACUUM INTO %Q", notrace);
	CHECK(exec_sql(db, sql) == SQLITE_OK);
	sqlite3_free(sql);
	sqlite3_close(db);
	CHECK(sqlite3_open(notrace, &db) == SQLITE_OK);
	CHECK(exec_sql(db, tr_events_form(db) == TR_FORM_ROWS
	                           ? "DELETE FROM heapprof_event;"
	                             " DELETE FROM heapprof_trace"
	                           : "DELETE FROM heapprof_event_chunk;"
	                             " DELETE FROM heapprof_trace") ==
	      SQLITE_OK);
	sqlite3_close(db);
	fputs("(a '--from/--to need an event trace' message expected:)\n",
	      stderr);
	char *nt[] = {"pprof", notrace, "--to", "1s", "-o", out1, NULL};
	out = run_cmd(cmd_pprof, 6, nt, &status);
	CHECK(status == 1);
	free(out);
}

static void test_flamegraph(void)
{
	char page[4300];
	snprintf(page, sizeof(page), "%s/fg.html", dir);
	char *argv[] = {"flamegraph", dbpath, "-o", page,
	                "--from",     "20ms", NULL};
	int status = -1;
	char *out = run_cmd(cmd_flamegraph, 6, argv, &status);
	CHECK(status == 0);
	free(out);
	FILE *f = fopen(page, "r");
	CHECK(f != NULL);
	if (!f)
		return;
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	CHECK(has(buf, "\"trace\":{\"mode\":\"streaming\",\"complete\":1"));
	CHECK(has(buf, "\"window\":{\"from\":20000000,\"to\":"));
	CHECK(has(buf, "\"timeline\":{\"t0\":0,\"t1\":"));
	CHECK(has(buf, "\"reason\":\"window\""));
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"info", test_info},
	        {"old_profile", test_old_profile},
	        {"leaks", test_leaks},
	        {"temporaries", test_temporaries},
	        {"window", test_window},
	        {"timeline", test_timeline},
	        {"objects_fp", test_objects_fp},
	        {"duration", test_duration},
	        {"report", test_report},
	        {"pprof_args", test_pprof_args},
	        {"flamegraph", test_flamegraph},
	        {NULL, NULL},
	};
	sqlite3_auto_extension((void (*)(void))register_events);
	setup();
	/* Every test on the profiles as written (chunks), then on copies
	 * whose trace is a table of rows (an older profile). */
	int rc = unit_main("trace_read", tests);
	char rows[3][4200];
	snprintf(rows[0], sizeof(rows[0]), "%s/trace-rows.db", dir);
	snprintf(rows[1], sizeof(rows[1]), "%s/noblocks-rows.db", dir);
	snprintf(rows[2], sizeof(rows[2]), "%s/ring-rows.db", dir);
	to_rows(dbpath, rows[0]);
	to_rows(nodbpath, rows[1]);
	to_rows(ringpath, rows[2]);
	snprintf(dbpath, sizeof(dbpath), "%s", rows[0]);
	snprintf(nodbpath, sizeof(nodbpath), "%s", rows[1]);
	snprintf(ringpath, sizeof(ringpath), "%s", rows[2]);
	rc |= unit_main("trace_read_rows", tests);
	if (rc == 0) {
		const char *files[] = {"trace.db",         "noblocks.db",
		                       "ring.db",          "trace-rows.db",
		                       "noblocks-rows.db", "ring-rows.db",
		                       "old.db",           "w.pb.gz",
		                       "notrace.db",       "fg.html"};
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
			char p[4400];
			snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
			unlink(p);
		}
		rmdir(dir);
	}
	return rc;
}
