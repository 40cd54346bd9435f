/*
 * Bulk inserts: an array of C structs seen by SQLite as a table, so that
 * a dump writes a table's new rows with one `INSERT ... SELECT ... FROM
 * <source>` instead of one statement per row.  A statement per row pays
 * for starting the statement, binding every column and, with an explicit
 * INTEGER PRIMARY KEY, seeking the table for the id, about three times
 * the instructions of a row of an INSERT ... SELECT (measured with
 * callgrind on the callsite table).
 *
 * A source is an eponymous-only virtual table (it cannot be created in a
 * schema, so nothing of it is ever stored in a profile) registered on the
 * writer's connection; its rows are whatever the caller set in struct
 * bulk_src before stepping the statement that reads it.
 */
#ifndef HEAPPROF_STORE_BULK_H
#define HEAPPROF_STORE_BULK_H

#include <sqlite3.h>
#include <stddef.h>

enum bulk_type {
	BULK_I64,    /* int64_t */
	BULK_I64_NZ, /* int64_t; 0 reads as NULL */
	BULK_TEXT,   /* const char *, NUL-terminated; NULL reads as NULL */
};

struct bulk_col {
	const char *name;
	size_t offset; /* in a row */
	enum bulk_type type;
};

struct bulk_src {
	const char *name; /* the table's name in SQL */
	const struct bulk_col *cols;
	int ncols;
	size_t stride; /* bytes per row */
	/* Set by the caller before each statement; valid while it runs. */
	const void *rows;
	size_t nrows;
};

/* Register src on db (src must outlive the connection).  SQLite result. */
int bulk_register(sqlite3 *db, struct bulk_src *src);

#endif
