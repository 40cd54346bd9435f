/*
 * The recorded allocation rows of a profile (heap_profile_allocation), as
 * the store hands them to the heap model (src/model/state.h): the only
 * SQL that reads them.  Each row is a per-dump delta of one leaf callsite
 * of one heap: a dump writes, per stack that changed, what it allocated
 * (size, count > 0) and freed (size, count < 0) since the last dump.
 *
 * Errors: "heapprof: <subsys>: reading allocations: ..." printed, and a
 * negative errno returned.
 */
#ifndef HEAPPROF_STORE_ROWS_H
#define HEAPPROF_STORE_ROWS_H

#include <sqlite3.h>
#include <stdint.h>

struct rows_row {
	int64_t ts;
	int64_t callsite; /* 0 if NULL */
	int64_t size, count;
	const char *heap; /* valid until the next rows_next; "" if NULL */
};

/* Which rows: of process upid, of heap `heap` (NULL: every heap), with
 * ts <= ts_max, in ts order if by_ts (else in the file's order). */
struct rows_query {
	int64_t upid;
	const char *heap;
	int64_t ts_max;
	int by_ts;
};

struct rows {
	sqlite3 *db;
	sqlite3_stmt *st;
	const char *subsys;
};

/* 0 or -EIO (message printed); rows_close either way. */
int rows_open(struct rows *r, sqlite3 *db, const char *subsys,
              const struct rows_query *q);
/* The next row: 1, 0 at the end, or -EIO (message printed). */
int rows_next(struct rows *r, struct rows_row *row);
void rows_close(struct rows *r);

/* The largest callsite id of the profile (its last rowid: no scan); 0 if
 * none or unreadable. */
int64_t rows_max_callsite(sqlite3 *db);

#endif
