/*
 * What heapprof's SQLite virtual tables (experimental_flamegraph,
 * heapprof_event) share: a table and a cursor allocated zeroed, the table
 * declared innocuous (it reads the profile only).
 */
#ifndef HEAPPROF_SQL_VTAB_H
#define HEAPPROF_SQL_VTAB_H

#include <sqlite3.h>
#include <stddef.h>

/* A table of size bytes (an sqlite3_vtab first) with schema, in *out; an
 * SQLite result code. */
int vtab_connect(sqlite3 *db, const char *schema, size_t size,
                 sqlite3_vtab **out);
/* A cursor of size bytes (an sqlite3_vtab_cursor first), zeroed, in *out;
 * an SQLite result code. */
int vtab_open(size_t size, sqlite3_vtab_cursor **out);

#endif
