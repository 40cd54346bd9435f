/* Reading heapprof_block rows back (see blocks.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout_v1.h"
#include "store/blocks.h"
#include "store/profile.h"
#include "store/reader.h"
#include "util/err.h"
#include "util/grow.h"

static int sql_fail(sqlite3 *db, const char *subsys, const char *what)
{
	hp_err(subsys, "reading %s: %s", what, sqlite3_errmsg(db));
	return -EIO;
}

int blocks_load(sqlite3 *db, const char *subsys, int64_t dump_id,
                const char *heap, struct rd_block **out, size_t *n)
{
	sqlite3_stmt *st = NULL;
	struct rd_block *a = NULL;
	size_t cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (!rd_has_table(db, "heapprof_block"))
		return 0;
	if (sqlite3_prepare_v2(db,
	                       "SELECT address, size, charged, objects_fp,"
	                       " callsite_id, tid, ts FROM heapprof_block"
	                       " WHERE dump_id = ?1 AND (?2 IS NULL OR"
	                       " heap_name = ?2)"
	                       " ORDER BY callsite_id, address",
	                       -1, &st, NULL) != SQLITE_OK)
		return sql_fail(db, subsys, "blocks");
	sqlite3_bind_int64(st, 1, dump_id);
	if (heap)
		sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct rd_block *g = hp_grow(a, &cap, *n, sizeof(*g));
		if (!g) {
			rc = SQLITE_NOMEM;
			break;
		}
		a = g;
		struct rd_block *b = &a[(*n)++];
		b->address = (uint64_t)sqlite3_column_int64(st, 0);
		b->size = sqlite3_column_int64(st, 1);
		b->charged = sqlite3_column_int64(st, 2);
		b->objects_fp = sqlite3_column_int64(st, 3);
		b->callsite = sqlite3_column_int64(st, 4);
		b->tid = sqlite3_column_int64(st, 5);
		b->ts = sqlite3_column_int64(st, 6);
	}
	int err = 0;
	if (rc == SQLITE_NOMEM) {
		hp_err(subsys, "out of memory");
		err = -ENOMEM;
	} else if (rc != SQLITE_DONE) {
		err = sql_fail(db, subsys, "blocks");
	}
	sqlite3_finalize(st);
	if (err) {
		free(a);
		*n = 0;
		return err;
	}
	*out = a;
	return 0;
}

int blocks_summary(sqlite3 *db, const char *subsys, int64_t dump_id,
                   struct rd_block_summary *out)
{
	sqlite3_stmt *st = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	out->in_flight = -1;
	if (rd_has_column(db, "heapprof_dump", "blocks_in_flight")) {
		if (sqlite3_prepare_v2(db,
		                       "SELECT blocks_in_flight FROM"
		                       " heapprof_dump WHERE id = ?1",
		                       -1, &st, NULL) != SQLITE_OK)
			return sql_fail(db, subsys, "dumps");
		sqlite3_bind_int64(st, 1, dump_id);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW &&
		    sqlite3_column_type(st, 0) != SQLITE_NULL)
			out->in_flight = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			return sql_fail(db, subsys, "dumps");
	}
	if (!rd_has_table(db, "heapprof_block"))
		return 0;
	if (sqlite3_prepare_v2(db,
	                       "SELECT count(*), coalesce(sum(size), 0),"
	                       " coalesce(sum(charged), 0) FROM heapprof_block"
	                       " WHERE dump_id = ?1",
	                       -1, &st, NULL) != SQLITE_OK)
		return sql_fail(db, subsys, "blocks");
	sqlite3_bind_int64(st, 1, dump_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		out->nblocks = sqlite3_column_int64(st, 0);
		out->bytes = sqlite3_column_int64(st, 1);
		out->charged = sqlite3_column_int64(st, 2);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : sql_fail(db, subsys, "blocks");
}

int64_t blocks_objects(int64_t objects_fp)
{
	if (objects_fp <= 0)
		return 0;
	return (int64_t)prof_objects((uint64_t)objects_fp);
}

int blocks_each(sqlite3 *db, const char *subsys, int64_t upid,
                int (*fn)(void *arg, int64_t dump_id, const char *heap,
                          int64_t size, int64_t charged, int64_t objects_fp),
                void *arg)
{
	sqlite3_stmt *st;
	int rc, err = 0;

	if (!rd_has_table(db, "heapprof_block"))
		return 0;
	st = rd_prepare(db, subsys,
	                "SELECT dump_id, heap_name, size, charged, objects_fp"
	                " FROM heapprof_block WHERE dump_id IN (SELECT id FROM"
	                " heapprof_dump WHERE upid = ?1) AND upid = ?1");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW)
		err = fn(arg, sqlite3_column_int64(st, 0),
		         (const char *)sqlite3_column_text(st, 1),
		         sqlite3_column_int64(st, 2),
		         sqlite3_column_int64(st, 3),
		         sqlite3_column_int64(st, 4));
	if (err) {
		sqlite3_finalize(st);
		if (err == -ENOMEM)
			hp_err(subsys, "out of memory");
		return err;
	}
	return rd_finish(db, subsys, st, rc);
}
