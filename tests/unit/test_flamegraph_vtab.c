/*
 * Unit tests of experimental_flamegraph: a profile written by hand (stack
 * tables, offline symbols with an inlined function, allocation deltas over
 * three dumps, two heaps, two processes, a dangling parent), checked node
 * by node: merging by (parent, name, mapping), symbol expansion, self and
 * cumulative values, the ts/upid/heap arguments, and the errors.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/tree.h"
#include "store/reader.h"
#include "store/trace_read.h"
#include "sql/flamegraph_vtab.h"
#include "store/schema.h"
#include "unit.h"

static sqlite3 *db;

static const char data_sql[] =
        "INSERT INTO stack_profile_mapping(id, name) VALUES"
        " (1, '/bin/app'), (2, '/lib/libc.so');"
        "INSERT INTO stack_profile_frame(id, name, mapping, rel_pc,"
        " symbol_set_id) VALUES"
        " (1, 'main', 1, 16, NULL),"
        " (2, 'work', 1, 256, NULL),"
        " (3, 'work', 1, 512, NULL),"  /* same function, other pc */
        " (4, 'leaf_a', 1, 4096, 10)," /* offline symbols: an inline */
        " (5, NULL, 2, 2748, NULL),"   /* unnamed: 0xabc */
        " (6, 'start', 2, 32, NULL),"  /* the root */
        " (7, 'work', 2, 64, NULL);"   /* same name, other mapping */
        "INSERT INTO stack_profile_symbol(id, symbol_set_id, name,"
        " source_file, line_number) VALUES"
        " (100, 10, 'inner_x', 'a.c', 5),"
        " (101, 10, 'leaf_a', 'a.c', 20);"
        "INSERT INTO stack_profile_callsite(id, depth, parent_id, frame_id)"
        " VALUES (1, 0, NULL, 6), (2, 1, 1, 1), (3, 2, 2, 2), (4, 2, 2, 3),"
        " (5, 3, 3, 4), (6, 3, 4, 4), (7, 2, 2, 5), (8, 2, 2, 7),"
        " (9, 5, 999, 1);" /* dangling parent */
        "INSERT INTO heap_profile_allocation(ts, upid, heap_name,"
        " callsite_id, count, size) VALUES"
        " (10, 1, 'libc.malloc', 5, 2, 200),"
        " (10, 1, 'libc.malloc', 6, 1, 50),"
        " (10, 1, 'libc.malloc', 3, 1, 10),"
        " (20, 1, 'libc.malloc', 5, -1, -100),"
        " (20, 1, 'libc.malloc', 7, 3, 30),"
        " (20, 1, 'custom', 8, 1, 8),"
        " (30, 1, 'libc.malloc', 9, 1, 1000),"
        " (10, 2, 'libc.malloc', 5, 5, 5000);";

static void setup(void)
{
	char *err = NULL;

	CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db, profile_schema_sql, NULL, NULL, &err) ==
	      SQLITE_OK);
	CHECK(sqlite3_exec(db, data_sql, NULL, NULL, &err) == SQLITE_OK);
	if (err)
		fprintf(stderr, "setup: %s\n", err);
	sqlite3_free(err);
	CHECK(flamegraph_vtab_register(db) == SQLITE_OK);
}

/*
 * Rows of sql as one string, "a|b|c" per row, rows joined by ';' (NULL
 * prints as N).  NULL and the error in *err (if err) on failure.
 */
static char *rows(const char *sql, char **err)
{
	sqlite3_stmt *st = NULL;
	size_t len = 0, cap = 4096;
	char *out = malloc(cap);
	int rc;

	if (err)
		*err = NULL;
	if (!out)
		return NULL;
	out[0] = '\0';
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		if (err)
			*err = strdup(sqlite3_errmsg(db));
		free(out);
		return NULL;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (int c = 0; c < sqlite3_column_count(st); c++) {
			const unsigned char *t = sqlite3_column_text(st, c);
			const char *s = t ? (const char *)t : "N";
			size_t need = len + strlen(s) + 3;
			if (need > cap) {
				cap = need * 2;
				out = realloc(out, cap);
				if (!out)
					return NULL;
			}
			len += (size_t)sprintf(out + len, "%s%s",
			                       c ? "|" : (len ? ";" : ""), s);
		}
	}
	if (rc != SQLITE_DONE) {
		if (err)
			*err = strdup(sqlite3_errmsg(db));
		free(out);
		out = NULL;
	}
	sqlite3_finalize(st);
	return out;
}

static int rows_are(const char *sql, const char *want)
{
	char *err = NULL;
	char *got = rows(sql, &err);
	int ok = got && !strcmp(got, want);

	if (!ok)
		fprintf(stderr, "  %s\n    -> '%s'%s%s\n    want '%s'\n", sql,
		        got ? got : "(error)", err ? ": " : "", err ? err : "",
		        want);
	free(got);
	free(err);
	return ok;
}

/* The query fails with an error message containing want. */
static int fails_with(const char *sql, const char *want)
{
	char *err = NULL;
	char *got = rows(sql, &err);
	int ok = !got && err && strstr(err, want);

	if (!ok)
		fprintf(stderr,
		        "  %s\n    -> '%s' / error '%s', want error '%s'\n",
		        sql, got ? got : "(none)", err ? err : "(none)", want);
	free(got);
	free(err);
	return ok;
}

#define NODE_COLS                                                              \
	"select id, depth, name, map_name, count, cumulative_count, size,"     \
	" cumulative_size, alloc_count, cumulative_alloc_count, alloc_size,"   \
	" cumulative_alloc_size, parent_id, source_file, line_number"

static void test_columns(void)
{
	sqlite3_stmt *st = NULL;
	static const char *const want[] = {"id",
	                                   "ts",
	                                   "depth",
	                                   "name",
	                                   "map_name",
	                                   "count",
	                                   "cumulative_count",
	                                   "size",
	                                   "cumulative_size",
	                                   "alloc_count",
	                                   "cumulative_alloc_count",
	                                   "alloc_size",
	                                   "cumulative_alloc_size",
	                                   "parent_id",
	                                   "source_file",
	                                   "line_number"};

	CHECK(sqlite3_prepare_v2(db,
	                         "select * from experimental_flamegraph(20, 1,"
	                         " 'native')",
	                         -1, &st, NULL) == SQLITE_OK);
	CHECK(sqlite3_column_count(st) == 16);
	for (int i = 0; i < 16 && i < sqlite3_column_count(st); i++)
		CHECK(!strcmp(sqlite3_column_name(st, i), want[i]));
	sqlite3_finalize(st);
}

static void test_tree_at_ts20(void)
{
	/*
	 * start -> main -> work(app) -> leaf_a -> inner_x (the inline);
	 * main -> libc.so+0xabc; main -> work(libc).  Callsites 3 and 4 (work
	 * at two pcs) merge, and so do 5 and 6 under them.
	 */
	CHECK(rows_are(
	        NODE_COLS " from experimental_flamegraph(20, 1,"
	                  " 'native') order by id",
	        "0|0|start|/lib/libc.so|0|7|0|198|0|8|0|298|N|N|N;"
	        "1|1|main|/bin/app|0|7|0|198|0|8|0|298|0|N|N;"
	        "2|2|work|/bin/app|1|3|10|160|1|4|10|260|1|N|N;"
	        "3|3|leaf_a|/bin/app|0|2|0|150|0|3|0|250|2|a.c|20;"
	        "4|4|inner_x|/bin/app|2|2|150|150|3|3|250|250|3|a.c|5;"
	        "5|2|libc.so+0xabc|/lib/libc.so|3|3|30|30|3|3|30|30|1|N|N;"
	        "6|2|work|/lib/libc.so|1|1|8|8|1|1|8|8|1|N|N"));
	/* ts: the argument, in the visible and the hidden column. */
	CHECK(rows_are("select distinct ts, ts_in, upid, profile_type,"
	               " heap_name from experimental_flamegraph(20, 1,"
	               " 'native')",
	               "20|20|1|native|N"));
}

static void test_ts_and_upid(void)
{
	/* Before the first dump: nothing. */
	CHECK(rows_are("select count(*) from experimental_flamegraph(5, 1,"
	               " 'native')",
	               "0"));
	/* First dump: only the work chain. */
	CHECK(rows_are("select name, cumulative_size, cumulative_alloc_size"
	               " from experimental_flamegraph(10, 1, 'native')"
	               " order by id",
	               "start|260|260;main|260|260;work|260|260;"
	               "leaf_a|250|250;inner_x|250|250"));
	/* The dangling parent: callsite 9 hangs from a root of its own. */
	CHECK(rows_are("select name, depth, parent_id, size from"
	               " experimental_flamegraph(30, 1, 'native') where"
	               " parent_id is null order by id",
	               "start|0|N|0;main|0|N|1000"));
	/* The other process. */
	CHECK(rows_are("select name, count, size from experimental_flamegraph("
	               "10, 2, 'native') where count != 0",
	               "inner_x|5|5000"));
	CHECK(rows_are("select count(*) from experimental_flamegraph(30, 7,"
	               " 'native')",
	               "0"));
	/* Arguments as constraints on the hidden columns; text numbers. */
	CHECK(rows_are("select cumulative_size from experimental_flamegraph"
	               " where ts_in = '20' and upid = 1 and"
	               " profile_type = 'native' and depth = 0",
	               "198"));
	/* Once per dump in one query (a join supplying the arguments). */
	CHECK(rows_are("select d.ts, f.cumulative_size from (select 10 as ts"
	               " union all select 20 union all select 30) d,"
	               " experimental_flamegraph(d.ts, 1, 'native') f"
	               " where f.name = 'start' order by d.ts",
	               "10|260;20|198;30|198"));
}

static void test_heap_arg(void)
{
	CHECK(rows_are("select name, cumulative_size from"
	               " experimental_flamegraph(20, 1, 'native', 'custom')"
	               " order by id",
	               "start|8;main|8;work|8"));
	CHECK(rows_are("select map_name from experimental_flamegraph(20, 1,"
	               " 'native', 'custom') where name = 'work'",
	               "/lib/libc.so"));
	CHECK(rows_are("select sum(size) from experimental_flamegraph(20, 1,"
	               " 'native', 'libc.malloc')",
	               "190"));
	CHECK(rows_are("select count(*) from experimental_flamegraph(20, 1,"
	               " 'native', NULL)",
	               "7"));
	CHECK(rows_are("select count(*) from experimental_flamegraph(20, 1,"
	               " 'native', 'nosuch')",
	               "0"));
}

static void test_errors(void)
{
	CHECK(fails_with("select * from experimental_flamegraph(20, 1, 'java')",
	                 "experimental_flamegraph: unsupported profile type"
	                 " 'java'"));
	CHECK(fails_with("select * from experimental_flamegraph(20, 1, NULL)",
	                 "unsupported profile type"));
	CHECK(fails_with("select * from experimental_flamegraph(20, 1)",
	                 "needs the arguments"));
	CHECK(fails_with("select * from experimental_flamegraph",
	                 "needs the arguments"));
	CHECK(fails_with("select * from experimental_flamegraph('x', 1,"
	                 " 'native')",
	                 "ts must be an integer"));
	CHECK(fails_with("select * from experimental_flamegraph(20, 1.5,"
	                 " 'native')",
	                 "upid must be an integer"));
	CHECK(fails_with("select * from experimental_flamegraph(1, 2, 3, 4, 5)",
	                 "too many arguments"));
	CHECK(fails_with("create virtual table t using"
	                 " experimental_flamegraph",
	                 "experimental_flamegraph"));
}

static void test_reload_after_change(void)
{
	/* New stacks written after a query are seen by the next one. */
	CHECK(rows_are("select count(*) from experimental_flamegraph(40, 1,"
	               " 'native')",
	               "8"));
	CHECK(sqlite3_exec(db,
	                   "INSERT INTO stack_profile_frame(id, name, mapping,"
	                   " rel_pc) VALUES (8, 'late', 1, 8);"
	                   "INSERT INTO stack_profile_callsite(id, depth,"
	                   " parent_id, frame_id) VALUES (10, 2, 2, 8);"
	                   "INSERT INTO heap_profile_allocation(ts, upid,"
	                   " heap_name, callsite_id, count, size) VALUES"
	                   " (40, 1, 'libc.malloc', 10, 1, 4);",
	                   NULL, NULL, NULL) == SQLITE_OK);
	CHECK(rows_are("select name, parent_id, size from"
	               " experimental_flamegraph(40, 1, 'native') where"
	               " name = 'late'",
	               "late|1|4"));
}

/* heapprof_event (a virtual table over the trace's chunks) in every
 * connection of the test, as rd_open and the writer register it. */
static int register_events(sqlite3 *conn, char **err,
                           const struct sqlite3_api_routines *api)
{
	(void)err;
	(void)api;
	return tr_events_register(conn);
}

/*
 * The heap model's bottom-up paths (model/tree.h) over the same stacks:
 * the allocating function at a root, its callers below, callsites of the
 * same functions on one path, other paths apart.
 */
static void test_bottom_up(void)
{
	struct rd_stacks s;
	struct tree g;
	struct tree_nodes inv;
	int32_t a[16], b[16], c[16];

	CHECK(rd_load_stacks(db, "test", &s) == 0);
	CHECK(tree_init(&g, &s) == 0);
	tree_nodes_init(&inv);
	/* cs 5 and 6: start > main > work (two pcs) > leaf_a > inner_x */
	int na = tree_bottom_up(&g, &inv, tree_leaf_node(&g, 5), a, 16);
	int nb = tree_bottom_up(&g, &inv, tree_leaf_node(&g, 6), b, 16);
	/* cs 7: start > main > libc.so+0xabc */
	int nc = tree_bottom_up(&g, &inv, tree_leaf_node(&g, 7), c, 16);
	CHECK(na == 5 && nb == 5 && nc == 3);
	CHECK(na == 5 && !memcmp(a, b, sizeof(a[0]) * 5));
	static const char *const want_a[] = {"inner_x", "leaf_a", "work",
	                                     "main", "start"};
	for (int k = 0; k < na && k < 5; k++) {
		CHECK(!strcmp(g.funcs[inv.func.v[a[k]]].name, want_a[k]));
		CHECK(inv.parent.v[a[k]] == (k ? a[k - 1] : -1));
	}
	static const char *const want_c[] = {"libc.so+0xabc", "main", "start"};
	for (int k = 0; k < nc && k < 3; k++)
		CHECK(!strcmp(g.funcs[inv.func.v[c[k]]].name, want_c[k]));
	/* main under inner_x's path and main under 0xabc's are two nodes */
	CHECK(na == 5 && nc == 3 && a[3] != c[1]);
	CHECK_EQ_U64(inv.parent.n, 8);
	/* a path longer than max is cut there */
	CHECK(tree_bottom_up(&g, &inv, tree_leaf_node(&g, 5), a, 2) == 2);
	tree_nodes_free(&inv);
	tree_free(&g);
	rd_free_stacks(&s);
}

int main(void)
{
	sqlite3_auto_extension((void (*)(void))register_events);
	static const struct unit_test tests[] = {
	        {"columns", test_columns},
	        {"tree_at_ts20", test_tree_at_ts20},
	        {"ts_and_upid", test_ts_and_upid},
	        {"heap_arg", test_heap_arg},
	        {"errors", test_errors},
	        {"reload_after_change", test_reload_after_change},
	        {"bottom_up", test_bottom_up},
	        {NULL, NULL},
	};

	setup();
	int rc = unit_main("flamegraph_vtab", tests);
	sqlite3_close(db);
	return rc;
}
