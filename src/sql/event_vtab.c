/*
 * heapprof_event for SQL: a virtual table (module "heapprof_events") over
 * the compressed chunks of heapprof_event_chunk, declared in the profile
 * as `CREATE VIRTUAL TABLE heapprof_event USING heapprof_events`, with
 * the columns the table of rows had (docs/TRACE.md).  Rows come from the
 * event iterator (trace_events.c) in position order, rowid = chunk id <<
 * 20 | position in the chunk; constraints on upid and ts narrow the
 * chunks read.  Read-only; dropping it leaves the chunks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "store/trace_read.h"
#include "sql/vtab.h"

#define EV_MODULE "heapprof_events"

static const char ev_schema[] =
        "CREATE TABLE x(upid INT, ts INT, kind TEXT, tid INT, address INT,"
        " size INT, charged INT, heap_name TEXT, stack_key INT,"
        " alloc_ts INT)";

enum {
	COL_UPID,
	COL_TS,
	COL_KIND,
	COL_TID,
	COL_ADDRESS,
	COL_SIZE,
	COL_CHARGED,
	COL_HEAP,
	COL_STACK,
	COL_ALLOC_TS
};

struct ev_vtab {
	sqlite3_vtab base;
	sqlite3 *db;
};

struct ev_cursor {
	sqlite3_vtab_cursor base;
	struct tr_events *it;
	const struct tr_event *ev; /* NULL: at the end */
};

static int ev_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err)
{
	int rc = vtab_connect(db, ev_schema, sizeof(struct ev_vtab), out);
	if (rc == SQLITE_OK)
		((struct ev_vtab *)*out)->db = db;
	return rc;
}

static int ev_disconnect(sqlite3_vtab *vt)
{
	sqlite3_free(vt);
	return SQLITE_OK;
}

/*
 * Constraints used: upid =, and ts =, >, >=, <, <=; idxStr spells them in
 * argv order ('u', 'e', 'g', 'G', 'l', 'L').  None is omitted: SQLite
 * checks them again, so a value xFilter cannot use (not an integer) only
 * reads more chunks.
 */
static int ev_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
	char ops[32];
	int n = 0;
	double cost = 1e6;

	for (int i = 0; i < info->nConstraint && n < 30; i++) {
		const struct sqlite3_index_constraint *c =
		        &info->aConstraint[i];
		char op = 0;
		if (!c->usable)
			continue;
		if (c->iColumn == COL_UPID &&
		    c->op == SQLITE_INDEX_CONSTRAINT_EQ)
			op = 'u';
		else if (c->iColumn == COL_TS)
			op = c->op == SQLITE_INDEX_CONSTRAINT_EQ   ? 'e'
			     : c->op == SQLITE_INDEX_CONSTRAINT_GT ? 'g'
			     : c->op == SQLITE_INDEX_CONSTRAINT_GE ? 'G'
			     : c->op == SQLITE_INDEX_CONSTRAINT_LT ? 'l'
			     : c->op == SQLITE_INDEX_CONSTRAINT_LE ? 'L'
			                                           : 0;
		if (!op)
			continue;
		ops[n++] = op;
		info->aConstraintUsage[i].argvIndex = n;
		cost /= op == 'u' ? 4 : 2;
	}
	ops[n] = '\0';
	info->idxStr = sqlite3_mprintf("%s", ops);
	if (!info->idxStr)
		return SQLITE_NOMEM;
	info->needToFreeIdxStr = 1;
	info->estimatedCost = cost;
	info->estimatedRows = (sqlite3_int64)cost;
	if (info->nOrderBy == 1 && info->aOrderBy[0].iColumn == -1 &&
	    !info->aOrderBy[0].desc)
		info->orderByConsumed = 1;
	return SQLITE_OK;
}

static int ev_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
	return vtab_open(sizeof(struct ev_cursor), out);
}

static int ev_close(sqlite3_vtab_cursor *base)
{
	struct ev_cursor *cur = (struct ev_cursor *)base;
	tr_events_close(cur->it);
	sqlite3_free(cur);
	return SQLITE_OK;
}

static int fail(struct ev_cursor *cur, int err)
{
	sqlite3_vtab *vt = cur->base.pVtab;
	sqlite3_free(vt->zErrMsg);
	vt->zErrMsg = sqlite3_mprintf("heapprof_event: %s",
	                              cur->it ? tr_events_error(cur->it)
	                                      : "out of memory");
	return err == -ENOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
}

static int ev_next(sqlite3_vtab_cursor *base)
{
	struct ev_cursor *cur = (struct ev_cursor *)base;
	int rc = tr_events_next(cur->it, &cur->ev);
	if (rc <= 0)
		cur->ev = NULL;
	return rc < 0 ? fail(cur, rc) : SQLITE_OK;
}

static int ev_filter(sqlite3_vtab_cursor *base, int idx, const char *ops,
                     int argc, sqlite3_value **argv)
{
	struct ev_cursor *cur = (struct ev_cursor *)base;
	int64_t upid = -1, from = TR_TS_MIN, to = TR_TS_MAX;
	bool empty = false;

	tr_events_close(cur->it);
	cur->it = NULL;
	cur->ev = NULL;
	for (int i = 0; ops && ops[i] && i < argc; i++) {
		if (sqlite3_value_type(argv[i]) != SQLITE_INTEGER)
			continue;
		int64_t v = sqlite3_value_int64(argv[i]);
		switch (ops[i]) {
		case 'u':
			if (v < 0)
				empty = true;
			upid = v;
			break;
		case 'e': /* [v, v + 1) */
			if (v > from)
				from = v;
			if (v == INT64_MAX)
				empty = true;
			else if (v + 1 < to)
				to = v + 1;
			break;
		case 'g':
			if (v == INT64_MAX)
				empty = true;
			else if (v + 1 > from)
				from = v + 1;
			break;
		case 'G':
			if (v > from)
				from = v;
			break;
		case 'l':
			if (v < to)
				to = v;
			break;
		case 'L':
			if (v != INT64_MAX && v + 1 < to)
				to = v + 1;
			break;
		}
	}
	if (empty || (to != TR_TS_MAX && to <= from))
		return SQLITE_OK;
	struct ev_vtab *vt = (struct ev_vtab *)base->pVtab;
	int err = tr_events_open(vt->db, NULL, upid, from, to, 0, &cur->it);
	if (err)
		return fail(cur, err);
	return ev_next(base);
}

static int ev_eof(sqlite3_vtab_cursor *base)
{
	return ((struct ev_cursor *)base)->ev == NULL;
}

static int ev_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col)
{
	const struct tr_event *e = ((struct ev_cursor *)base)->ev;

	switch (col) {
	case COL_UPID:
		sqlite3_result_int64(ctx, e->upid);
		break;
	case COL_TS:
		sqlite3_result_int64(ctx, e->ts);
		break;
	case COL_KIND:
		sqlite3_result_text(ctx, e->free ? "free" : "alloc", -1,
		                    SQLITE_STATIC);
		break;
	case COL_TID:
		sqlite3_result_int64(ctx, e->tid);
		break;
	case COL_ADDRESS:
		sqlite3_result_int64(ctx, e->address);
		break;
	case COL_SIZE:
		sqlite3_result_int64(ctx, e->size);
		break;
	case COL_CHARGED:
		sqlite3_result_int64(ctx, e->charged);
		break;
	case COL_HEAP:
		/* Valid while the cursor's iterator is open. */
		sqlite3_result_text(ctx, e->heap, -1, SQLITE_TRANSIENT);
		break;
	case COL_STACK:
		sqlite3_result_int64(ctx, e->stack_key);
		break;
	case COL_ALLOC_TS:
		if (e->alloc_ts)
			sqlite3_result_int64(ctx, e->alloc_ts);
		else
			sqlite3_result_null(ctx);
		break;
	}
	return SQLITE_OK;
}

static int ev_rowid(sqlite3_vtab_cursor *base, sqlite3_int64 *rowid)
{
	*rowid = ((struct ev_cursor *)base)->ev->rowid;
	return SQLITE_OK;
}

static const sqlite3_module ev_module = {
        .iVersion = 0,
        .xCreate = ev_connect,
        .xConnect = ev_connect,
        .xBestIndex = ev_best_index,
        .xDisconnect = ev_disconnect,
        .xDestroy = ev_disconnect,
        .xOpen = ev_open,
        .xClose = ev_close,
        .xFilter = ev_filter,
        .xNext = ev_next,
        .xEof = ev_eof,
        .xColumn = ev_column,
        .xRowid = ev_rowid,
};

int tr_events_register(sqlite3 *db)
{
	return sqlite3_create_module_v2(db, EV_MODULE, &ev_module, NULL, NULL);
}
