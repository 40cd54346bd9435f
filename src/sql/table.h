/*
 * A result set of `heapprof sql` and its output formats (.mode, see
 * sql/table.c).  Out of memory is said on stderr as "sql: ...".
 */
#ifndef HEAPPROF_SQL_TABLE_H
#define HEAPPROF_SQL_TABLE_H

#include <sqlite3.h>
#include <stddef.h>

/* Output formats (.mode); table and column are the same. */
enum sql_mode { SQL_MODE_TABLE, SQL_MODE_CSV, SQL_MODE_LIST, SQL_MODE_LINE };

/* One result set, buffered so column widths are known before printing. */
struct sql_table {
	int ncols;
	char **cells; /* row-major, header row first; NULL cell = SQL NULL */
	size_t nrows; /* including the header */
	size_t cap;
	int *numeric; /* per column: every non-NULL value is a number */
};

/* The header row of st's columns; -1 out of memory (sql_table_free it). */
int sql_table_init(struct sql_table *t, sqlite3_stmt *st);

/* Append the current row of st; -1 out of memory. */
int sql_table_push(struct sql_table *t, sqlite3_stmt *st);

void sql_table_free(struct sql_table *t);

/* Print t to stdout in mode; headers: the header row (and, for a table,
 * its rule and the "(N rows)" line). */
void sql_table_print(const struct sql_table *t, enum sql_mode mode,
                     int headers);

#endif
