/*
 * Bulk-insert sources (see bulk.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "store/bulk.h"

struct bulk_vtab {
	sqlite3_vtab base;
	const struct bulk_src *src;
};

struct bulk_cursor {
	sqlite3_vtab_cursor base;
	size_t i;
};

static int b_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                     sqlite3_vtab **out, char **err)
{
	const struct bulk_src *src = aux;
	char sql[1024];
	size_t len = (size_t)snprintf(sql, sizeof(sql), "CREATE TABLE x(");
	for (int i = 0; i < src->ncols && len < sizeof(sql); i++)
		len += (size_t)snprintf(sql + len, sizeof(sql) - len, "%s%s",
		                        i ? ", " : "", src->cols[i].name);
	if (len + 2 > sizeof(sql))
		return SQLITE_ERROR;
	memcpy(sql + len, ")", 2);
	int rc = sqlite3_declare_vtab(db, sql);
	if (rc != SQLITE_OK)
		return rc;
	struct bulk_vtab *vt = sqlite3_malloc(sizeof(*vt));
	if (!vt)
		return SQLITE_NOMEM;
	memset(vt, 0, sizeof(*vt));
	vt->src = src;
	*out = &vt->base;
	return SQLITE_OK;
}

static int b_disconnect(sqlite3_vtab *vt)
{
	sqlite3_free(vt);
	return SQLITE_OK;
}

static int b_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
	const struct bulk_vtab *b = (const struct bulk_vtab *)vt;
	/* Always a full scan, in array order. */
	info->estimatedRows = (sqlite3_int64)b->src->nrows;
	info->estimatedCost = (double)b->src->nrows + 1;
	return SQLITE_OK;
}

static int b_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
	struct bulk_cursor *c = sqlite3_malloc(sizeof(*c));
	if (!c)
		return SQLITE_NOMEM;
	memset(c, 0, sizeof(*c));
	*out = &c->base;
	return SQLITE_OK;
}

static int b_close(sqlite3_vtab_cursor *c)
{
	sqlite3_free(c);
	return SQLITE_OK;
}

static int b_filter(sqlite3_vtab_cursor *c, int idx, const char *idxstr,
                    int argc, sqlite3_value **argv)
{
	((struct bulk_cursor *)c)->i = 0;
	return SQLITE_OK;
}

static int b_next(sqlite3_vtab_cursor *c)
{
	((struct bulk_cursor *)c)->i++;
	return SQLITE_OK;
}

static const struct bulk_src *src_of(sqlite3_vtab_cursor *c)
{
	return ((const struct bulk_vtab *)c->pVtab)->src;
}

static int b_eof(sqlite3_vtab_cursor *c)
{
	return ((struct bulk_cursor *)c)->i >= src_of(c)->nrows;
}

static int b_column(sqlite3_vtab_cursor *c, sqlite3_context *ctx, int col)
{
	const struct bulk_src *src = src_of(c);
	size_t i = ((struct bulk_cursor *)c)->i;
	if (col < 0 || col >= src->ncols || i >= src->nrows)
		return SQLITE_ERROR;
	const struct bulk_col *bc = &src->cols[col];
	const char *at = (const char *)src->rows + i * src->stride + bc->offset;
	int64_t v;
	const char *t;
	switch (bc->type) {
	case BULK_I64:
	case BULK_I64_NZ:
		memcpy(&v, at, sizeof(v));
		if (v || bc->type == BULK_I64)
			sqlite3_result_int64(ctx, v);
		else
			sqlite3_result_null(ctx);
		break;
	case BULK_TEXT:
		memcpy(&t, at, sizeof(t));
		/* The caller keeps the string until the statement ends. */
		if (t)
			sqlite3_result_text(ctx, t, -1, SQLITE_STATIC);
		else
			sqlite3_result_null(ctx);
		break;
	}
	return SQLITE_OK;
}

static int b_rowid(sqlite3_vtab_cursor *c, sqlite3_int64 *rowid)
{
	*rowid = (sqlite3_int64)((struct bulk_cursor *)c)->i;
	return SQLITE_OK;
}

static const sqlite3_module bulk_module = {
        .iVersion = 0,
        /* xCreate NULL: eponymous-only, never part of a schema. */
        .xCreate = NULL,
        .xConnect = b_connect,
        .xBestIndex = b_best_index,
        .xDisconnect = b_disconnect,
        .xDestroy = b_disconnect,
        .xOpen = b_open,
        .xClose = b_close,
        .xFilter = b_filter,
        .xNext = b_next,
        .xEof = b_eof,
        .xColumn = b_column,
        .xRowid = b_rowid,
};

int bulk_register(sqlite3 *db, struct bulk_src *src)
{
	return sqlite3_create_module(db, src->name, &bulk_module, src);
}
