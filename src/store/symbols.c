/*
 * The symbols of a profile as `heapprof symbolize` rewrites them
 * (symbols.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/symbols.h"
#include "util/err.h"

#define SUBSYS "symbolize"

enum { ST_SYMBOL, ST_SET, ST_NAME, ST_N };

static const char *const stmt_sql[ST_N] = {
        [ST_SYMBOL] = "INSERT INTO stack_profile_symbol(type, symbol_set_id,"
                      " name, source_file, line_number)"
                      " VALUES('stack_profile_symbol', ?, ?, ?, ?)",
        [ST_SET] = "UPDATE stack_profile_frame SET symbol_set_id = ?"
                   " WHERE id = ?",
        [ST_NAME] = "UPDATE stack_profile_frame SET name = ?,"
                    " system_name = coalesce(system_name, ?)"
                    " WHERE id = ? AND name IS NULL",
};

static int sql_fail(const struct symstore *s, const char *what)
{
	hp_err(SUBSYS, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
	return -EIO;
}

static int exec_sql(const struct symstore *s, const char *sql, const char *what)
{
	return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK
	               ? 0
	               : sql_fail(s, what);
}

bool symstore_readonly(sqlite3 *db)
{
	return sqlite3_db_readonly(db, "main") == 1;
}

int symstore_begin(struct symstore *s, sqlite3 *db, const char *path)
{
	*s = (struct symstore){.db = db, .path = path, .next_set = 1};
	return exec_sql(s, "BEGIN IMMEDIATE", "locking the profile");
}

int symstore_end(struct symstore *s, bool ok)
{
	for (int i = 0; i < ST_N; i++) {
		sqlite3_finalize(s->st[i]);
		s->st[i] = NULL;
	}
	if (ok && exec_sql(s, "COMMIT", "committing") == 0)
		return 0;
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return ok ? -EIO : 0;
}

static char *col_dup(sqlite3_stmt *st, int col, int *oom)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	if (!t)
		return NULL;
	char *d = strdup((const char *)t);
	if (!d)
		*oom = 1;
	return d;
}

int symstore_mappings(struct symstore *s,
                      int (*fn)(void *arg, int64_t id, char *path,
                                char *build_id),
                      void *arg)
{
	sqlite3_stmt *st = NULL;
	int err = 0, oom = 0, rc;

	if (sqlite3_prepare_v2(s->db,
	                       "SELECT id, name, build_id FROM"
	                       " stack_profile_mapping WHERE id IN (SELECT"
	                       " mapping FROM stack_profile_frame) ORDER BY id",
	                       -1, &st, NULL) != SQLITE_OK)
		return sql_fail(s, "reading mappings");
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		char *path = col_dup(st, 1, &oom);
		char *hex = col_dup(st, 2, &oom);
		err = fn(arg, sqlite3_column_int64(st, 0), path, hex);
		if (!err && oom)
			err = -ENOMEM;
	}
	if (!err && rc != SQLITE_DONE)
		err = sql_fail(s, "reading mappings");
	sqlite3_finalize(st);
	return err;
}

int symstore_frames(struct symstore *s,
                    int (*fn)(void *arg, int64_t id, int64_t mapping,
                              int64_t rel_pc, bool unnamed),
                    void *arg)
{
	sqlite3_stmt *st = NULL;
	int err = 0, rc;

	if (sqlite3_prepare_v2(s->db,
	                       "SELECT id, mapping, rel_pc, name IS NULL"
	                       " FROM stack_profile_frame ORDER BY id",
	                       -1, &st, NULL) != SQLITE_OK)
		return sql_fail(s, "reading frames");
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW)
		err = fn(arg, sqlite3_column_int64(st, 0),
		         sqlite3_column_int64(st, 1),
		         sqlite3_column_int64(st, 2),
		         sqlite3_column_int(st, 3) != 0);
	if (!err && rc != SQLITE_DONE)
		err = sql_fail(s, "reading frames");
	sqlite3_finalize(st);
	return err;
}

int symstore_clear(struct symstore *s, const int64_t *frames, size_t n)
{
	sqlite3_stmt *st = NULL;
	int err = exec_sql(s,
	                   "CREATE TEMP TABLE heapprof_symbolize_frames("
	                   "frame_id INTEGER PRIMARY KEY)",
	                   "preparing");
	if (err)
		return err;
	if (sqlite3_prepare_v2(s->db,
	                       "INSERT INTO temp.heapprof_symbolize_frames"
	                       " VALUES(?)",
	                       -1, &st, NULL) != SQLITE_OK)
		return sql_fail(s, "preparing");
	for (size_t i = 0; !err && i < n; i++) {
		sqlite3_bind_int64(st, 1, frames[i]);
		if (sqlite3_step(st) != SQLITE_DONE)
			err = sql_fail(s, "preparing");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	if (!err)
		err = exec_sql(
		        s,
		        "DELETE FROM stack_profile_symbol WHERE symbol_set_id"
		        " IN (SELECT f.symbol_set_id FROM stack_profile_frame f"
		        " JOIN temp.heapprof_symbolize_frames t"
		        " ON t.frame_id = f.id WHERE f.symbol_set_id IS NOT "
		        "NULL"
		        " AND f.symbol_set_id != 0);"
		        "UPDATE stack_profile_frame SET symbol_set_id = NULL"
		        " WHERE id IN (SELECT frame_id FROM"
		        " temp.heapprof_symbolize_frames);"
		        "DROP TABLE temp.heapprof_symbolize_frames;",
		        "removing earlier symbols");
	if (err)
		return err;
	/* Past every set id in use, by a symbol or by a frame. */
	if (sqlite3_prepare_v2(
	            s->db,
	            "SELECT max(coalesce((SELECT max(symbol_set_id) FROM"
	            " stack_profile_symbol), 0), coalesce((SELECT"
	            " max(symbol_set_id) FROM stack_profile_frame), 0))",
	            -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		err = sql_fail(s, "reading symbol sets");
	else
		s->next_set = sqlite3_column_int64(st, 0) + 1;
	sqlite3_finalize(st);
	for (int i = 0; !err && i < ST_N; i++)
		if (sqlite3_prepare_v2(s->db, stmt_sql[i], -1, &s->st[i],
		                       NULL) != SQLITE_OK)
			err = sql_fail(s, "preparing");
	return err;
}

int64_t symstore_new_set(struct symstore *s)
{
	return s->next_set++;
}

static int step_reset(const struct symstore *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : sql_fail(s, "writing symbols");
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *t)
{
	if (t)
		sqlite3_bind_text(st, i, t, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

int symstore_add_symbol(struct symstore *s, int64_t set, const char *name,
                        const char *file, int64_t line)
{
	sqlite3_stmt *st = s->st[ST_SYMBOL];
	sqlite3_bind_int64(st, 1, set);
	bind_text_or_null(st, 2, name);
	bind_text_or_null(st, 3, file);
	if (line > 0)
		sqlite3_bind_int64(st, 4, line);
	return step_reset(s, st);
}

int symstore_set_frame(struct symstore *s, int64_t frame, int64_t set)
{
	sqlite3_stmt *st = s->st[ST_SET];
	sqlite3_bind_int64(st, 1, set);
	sqlite3_bind_int64(st, 2, frame);
	return step_reset(s, st);
}

int symstore_name_frame(struct symstore *s, int64_t frame, const char *name,
                        const char *system_name)
{
	sqlite3_stmt *st = s->st[ST_NAME];
	bind_text_or_null(st, 1, name);
	bind_text_or_null(st, 2, system_name);
	sqlite3_bind_int64(st, 3, frame);
	return step_reset(s, st);
}
