/*
 * experimental_flamegraph(ts, upid, profile_type [, heap_name]): Perfetto's
 * experimental flame graph table as an SQLite eponymous table-valued
 * virtual table over a heapprof profile (docs/SQL.md).
 *
 * One row per node of the call tree of process upid at ts: one node per
 * distinct path of function names from the root, with its self values
 * (count, size, alloc_count, alloc_size) and cumulative values (the node and
 * all its descendants).  Only profile_type 'native' is supported; heap_name
 * (optional, NULL = all heaps) restricts the tree to one heap.
 */
#ifndef HEAPPROF_SQL_FLAMEGRAPH_VTAB_H
#define HEAPPROF_SQL_FLAMEGRAPH_VTAB_H

#include <sqlite3.h>

/* The table's declaration (visible columns in Perfetto's order, then the
 * hidden argument columns), for `.schema`. */
extern const char flamegraph_vtab_schema[];

/* Register experimental_flamegraph on db.  An SQLite result code. */
int flamegraph_vtab_register(sqlite3 *db);

#endif
