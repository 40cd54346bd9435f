/*
 * The allocation rows of a profile (rows.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "store/rows.h"
#include "util/err.h"

int rows_open(struct rows *r, sqlite3 *db, const char *subsys,
              const struct rows_query *q)
{
	/* Without an ORDER BY SQLite reads in rowid order, which is the
	 * order dumps were written in; a GROUP BY or ORDER BY on a column
	 * without an index would sort every row first. */
	static const char *const sql[2] = {
	        "SELECT ts, callsite_id, size, count, heap_name FROM"
	        " heap_profile_allocation WHERE upid = ?1 AND ts <= ?2"
	        " AND (?3 IS NULL OR heap_name = ?3)",
	        "SELECT ts, callsite_id, size, count, heap_name FROM"
	        " heap_profile_allocation WHERE upid = ?1 AND ts <= ?2"
	        " AND (?3 IS NULL OR heap_name = ?3) ORDER BY ts",
	};

	r->db = db;
	r->subsys = subsys;
	r->st = NULL;
	if (sqlite3_prepare_v2(db, sql[!!q->by_ts], -1, &r->st, NULL) !=
	    SQLITE_OK) {
		hp_err(subsys, "reading allocations: %s", sqlite3_errmsg(db));
		return -EIO;
	}
	sqlite3_bind_int64(r->st, 1, q->upid);
	sqlite3_bind_int64(r->st, 2, q->ts_max);
	if (q->heap)
		sqlite3_bind_text(r->st, 3, q->heap, -1, SQLITE_STATIC);
	return 0;
}

int rows_next(struct rows *r, struct rows_row *row)
{
	int rc = sqlite3_step(r->st);

	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW) {
		hp_err(r->subsys, "reading allocations: %s",
		       sqlite3_errmsg(r->db));
		return -EIO;
	}
	const unsigned char *h = sqlite3_column_text(r->st, 4);
	row->ts = sqlite3_column_int64(r->st, 0);
	row->callsite = sqlite3_column_int64(r->st, 1);
	row->size = sqlite3_column_int64(r->st, 2);
	row->count = sqlite3_column_int64(r->st, 3);
	row->heap = h ? (const char *)h : "";
	return 1;
}

void rows_close(struct rows *r)
{
	sqlite3_finalize(r->st);
	r->st = NULL;
}

int64_t rows_max_callsite(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int64_t max = 0;

	if (sqlite3_prepare_v2(db, "SELECT max(id) FROM stack_profile_callsite",
	                       -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		max = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return max;
}
