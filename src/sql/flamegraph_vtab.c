/*
 * experimental_flamegraph (see flamegraph_vtab.h and docs/SQL.md).
 *
 * xFilter builds the whole tree at once from the heap model: the state of
 * each leaf callsite of the process at ts (model/state.h), each leaf
 * charged to its node of the model's call tree (model/tree.h: a node is
 * (parent node, function), a function (module, source file, name), each
 * frame expanded into its offline symbols).  Nodes are created callers
 * first, so node ids are the creation order, every parent_id is smaller
 * than its children's ids, and the cumulative values come from one pass
 * over the nodes in reverse.  The page of `heapprof flamegraph` draws the
 * same nodes.
 *
 * The stack tables are loaded once per connection and loaded again only
 * when the file changed (SQLITE_FCNTL_DATA_VERSION), so a query calling the
 * function once per dump does not reread them each time.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/state.h"
#include "model/tree.h"
#include "sql/flamegraph_vtab.h"
#include "store/reader.h"
#include "sql/vtab.h"
#include "util/str.h"

#define FG_NAME "experimental_flamegraph"

enum fg_col {
	FG_ID,
	FG_TS,
	FG_DEPTH,
	FG_FUNC,
	FG_MAP_NAME,
	FG_COUNT,
	FG_CUM_COUNT,
	FG_SIZE,
	FG_CUM_SIZE,
	FG_ALLOC_COUNT,
	FG_CUM_ALLOC_COUNT,
	FG_ALLOC_SIZE,
	FG_CUM_ALLOC_SIZE,
	FG_PARENT_ID,
	FG_SOURCE_FILE,
	FG_LINE_NUMBER,
	/* Hidden: the arguments, in call order. */
	FG_ARG_TS,
	FG_ARG_UPID,
	FG_ARG_PROFILE_TYPE,
	FG_ARG_HEAP,
};
#define FG_NARGS     4
#define FG_REQUIRED  0x7 /* ts, upid, profile_type */
#define FG_DEFAULT_T "native"

#define ROOT_PARENT (-1) /* the parent of a root node */

const char flamegraph_vtab_schema[] =
        "CREATE TABLE " FG_NAME "(id INTEGER, ts INTEGER, depth INTEGER,"
        " name TEXT, map_name TEXT, count INTEGER, cumulative_count INTEGER,"
        " size INTEGER, cumulative_size INTEGER, alloc_count INTEGER,"
        " cumulative_alloc_count INTEGER, alloc_size INTEGER,"
        " cumulative_alloc_size INTEGER, parent_id INTEGER, source_file TEXT,"
        " line_number INTEGER, ts_in INTEGER HIDDEN, upid INTEGER HIDDEN,"
        " profile_type TEXT HIDDEN, heap_name TEXT HIDDEN)";

/* Per-node values, self and cumulative. */
enum { V_COUNT, V_SIZE, V_ALLOC_COUNT, V_ALLOC_SIZE, V_N };

struct fg_node {
	int64_t parent; /* node index, ROOT_PARENT at a root */
	int64_t depth;
	char *name;
	char *map_name;
	char *source_file; /* NULL if unknown */
	int64_t line;      /* 0 if unknown */
	int64_t self[V_N];
	int64_t cum[V_N];
};

struct fg_vtab {
	sqlite3_vtab base;
	sqlite3 *db;
	struct rd_stacks stacks;
	int loaded;  /* stacks holds the tables */
	int have_dv; /* data_version is the file's version when loaded */
	unsigned int data_version;
};

struct fg_cursor {
	sqlite3_vtab_cursor base;
	struct fg_node *nodes;
	size_t n;
	size_t pos;
	int64_t ts, upid;
	char *heap; /* NULL: every heap */
};

static int vt_error(sqlite3_vtab *vt, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static int vt_error(sqlite3_vtab *vt, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	char *msg = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	sqlite3_free(vt->zErrMsg);
	vt->zErrMsg = sqlite3_mprintf(FG_NAME ": %s", msg ? msg : "error");
	sqlite3_free(msg);
	return SQLITE_ERROR;
}

static void nodes_free(struct fg_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(nodes[i].name);
		free(nodes[i].map_name);
		free(nodes[i].source_file);
	}
	free(nodes);
}

/* Load (or reuse) the stack tables of vt's database.  SQLite result code. */
static int load_stacks(struct fg_vtab *vt)
{
	unsigned int dv = 0;
	int have_dv =
	        sqlite3_file_control(vt->db, "main", SQLITE_FCNTL_DATA_VERSION,
	                             &dv) == SQLITE_OK;

	if (vt->loaded && vt->have_dv && have_dv && dv == vt->data_version)
		return SQLITE_OK;
	if (vt->loaded)
		rd_free_stacks(&vt->stacks);
	vt->loaded = 0;
	if (rd_load_stacks(vt->db, "sql", &vt->stacks) < 0)
		return vt_error(&vt->base, "cannot read the stack tables");
	vt->loaded = 1;
	vt->have_dv = have_dv; /* without it, read them every time */
	vt->data_version = dv;
	return SQLITE_OK;
}

/*
 * The tree of the process at ts: the heap model's state there (every heap,
 * or cur->heap), each leaf charged to its node of the model's call tree
 * (model/tree.h), in the order the tree created them.
 */
static int build(struct fg_vtab *vt, struct fg_cursor *cur)
{
	struct tree g;
	struct rd_sample *x = NULL;
	size_t nx = 0;
	int oom = 0;

	if (tree_init(&g, &vt->stacks) < 0) {
		tree_free(&g);
		return SQLITE_NOMEM;
	}
	if (state_at_dump(vt->db, "sql", cur->upid, cur->heap, cur->ts, &x,
	                  &nx) < 0) {
		tree_free(&g);
		return vt_error(&vt->base, "cannot read the allocations");
	}
	int32_t *leaf = malloc((nx ? nx : 1) * sizeof(*leaf));
	for (size_t i = 0; leaf && i < nx && !oom; i++)
		oom = (leaf[i] = tree_leaf_node(&g, x[i].callsite)) < 0;
	size_t n = g.top.parent.n;
	struct fg_node *nodes = calloc(n ? n : 1, sizeof(*nodes));
	if (!leaf || !nodes || oom) {
		free(leaf);
		free(nodes);
		free(x);
		tree_free(&g);
		return SQLITE_NOMEM;
	}
	/* The views of a state, in the table's order of values. */
	static const enum rd_view of[V_N] = {RD_OBJECTS, RD_SPACE,
	                                     RD_ALLOC_OBJECTS, RD_ALLOC_SPACE};
	for (size_t i = 0; i < nx; i++)
		for (int v = 0; v < V_N; v++)
			nodes[leaf[i]].self[v] += x[i].v[of[v]];
	for (size_t i = 0; i < n; i++) {
		struct fg_node *nd = &nodes[i];
		int32_t f = g.top.func.v[i];
		const char *map = tree_func_module(&g, f);
		nd->parent =
		        g.top.parent.v[i] < 0 ? ROOT_PARENT : g.top.parent.v[i];
		nd->depth = nd->parent == ROOT_PARENT
		                    ? 0
		                    : nodes[nd->parent].depth + 1;
		nd->name = hp_strdup_opt(g.funcs[f].name, &oom);
		nd->map_name = hp_strdup_opt(map ? map : "", &oom);
		nd->source_file = hp_strdup_opt(tree_func_file(&g, f), &oom);
		nd->line = g.top.line.v[i] > 0 ? g.top.line.v[i] : 0;
		memcpy(nd->cum, nd->self, sizeof(nd->cum));
	}
	for (size_t i = n; i-- > 0;) {
		int64_t p = nodes[i].parent;
		if (p != ROOT_PARENT)
			for (int v = 0; v < V_N; v++)
				nodes[p].cum[v] += nodes[i].cum[v];
	}
	free(leaf);
	free(x);
	tree_free(&g);
	if (oom) {
		nodes_free(nodes, n);
		return SQLITE_NOMEM;
	}
	cur->nodes = nodes;
	cur->n = n;
	return SQLITE_OK;
}

/* ---- the module --------------------------------------------------------- */

static int fg_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err)
{
	int rc = vtab_connect(db, flamegraph_vtab_schema,
	                      sizeof(struct fg_vtab), out);
	if (rc == SQLITE_OK)
		((struct fg_vtab *)*out)->db = db;
	return rc;
}

static int fg_disconnect(sqlite3_vtab *base)
{
	struct fg_vtab *vt = (struct fg_vtab *)base;

	if (vt->loaded)
		rd_free_stacks(&vt->stacks);
	sqlite3_free(vt);
	return SQLITE_OK;
}

/*
 * The arguments are equality constraints on the hidden columns; idxNum is
 * the mask of those given (bit k: argument k), passed in that order.
 * Without ts, upid and profile_type the plan is accepted at a prohibitive
 * cost so that xFilter can say what is missing.
 */
static int fg_best_index(sqlite3_vtab *base, sqlite3_index_info *info)
{
	int argi[FG_NARGS];
	int unusable = 0, mask = 0, n = 0;

	for (int k = 0; k < FG_NARGS; k++)
		argi[k] = -1;
	for (int i = 0; i < info->nConstraint; i++) {
		const struct sqlite3_index_constraint *c =
		        &info->aConstraint[i];
		if (c->iColumn < FG_ARG_TS ||
		    c->op != SQLITE_INDEX_CONSTRAINT_EQ)
			continue;
		int k = c->iColumn - FG_ARG_TS;
		if (!c->usable)
			unusable |= 1 << k;
		else if (argi[k] < 0)
			argi[k] = i;
	}
	for (int k = 0; k < FG_NARGS; k++) {
		if (argi[k] < 0)
			continue;
		mask |= 1 << k;
		info->aConstraintUsage[argi[k]].argvIndex = ++n;
		info->aConstraintUsage[argi[k]].omit = 1;
	}
	info->idxNum = mask;
	if ((mask & FG_REQUIRED) == FG_REQUIRED) {
		info->estimatedCost = 1000;
		info->estimatedRows = 1000;
	} else if (unusable & FG_REQUIRED & ~mask) {
		return SQLITE_CONSTRAINT; /* another plan supplies them */
	} else {
		info->estimatedCost = 1e300;
		info->estimatedRows = 1000;
	}
	return SQLITE_OK;
}

static int fg_open(sqlite3_vtab *base, sqlite3_vtab_cursor **out)
{
	return vtab_open(sizeof(struct fg_cursor), out);
}

static void cursor_reset(struct fg_cursor *cur)
{
	nodes_free(cur->nodes, cur->n);
	free(cur->heap);
	cur->nodes = NULL;
	cur->heap = NULL;
	cur->n = cur->pos = 0;
}

static int fg_close(sqlite3_vtab_cursor *base)
{
	struct fg_cursor *cur = (struct fg_cursor *)base;

	cursor_reset(cur);
	sqlite3_free(cur);
	return SQLITE_OK;
}

/* An integer argument (or text holding one); 0 or -1. */
static int arg_int(sqlite3_value *v, int64_t *out)
{
	if (sqlite3_value_numeric_type(v) != SQLITE_INTEGER)
		return -1;
	*out = sqlite3_value_int64(v);
	return 0;
}

static int fg_filter(sqlite3_vtab_cursor *base, int idx_num,
                     const char *idx_str, int argc, sqlite3_value **argv)
{
	struct fg_cursor *cur = (struct fg_cursor *)base;
	struct fg_vtab *vt = (struct fg_vtab *)base->pVtab;
	sqlite3_value *arg[FG_NARGS] = {NULL};

	cursor_reset(cur);
	for (int k = 0, j = 0; k < FG_NARGS && j < argc; k++)
		if (idx_num & (1 << k))
			arg[k] = argv[j++];
	if (!arg[0] || !arg[1] || !arg[2])
		return vt_error(base->pVtab,
		                "needs the arguments (ts, upid, profile_type),"
		                " e.g. " FG_NAME "(ts, 1, 'native')");
	const unsigned char *type = sqlite3_value_text(arg[2]);
	if (!type || strcmp((const char *)type, FG_DEFAULT_T))
		return vt_error(base->pVtab,
		                "unsupported profile type '%s' (heapprof"
		                " profiles hold only '" FG_DEFAULT_T "')",
		                type ? (const char *)type : "NULL");
	if (arg_int(arg[0], &cur->ts) < 0)
		return vt_error(base->pVtab, "ts must be an integer");
	if (arg_int(arg[1], &cur->upid) < 0)
		return vt_error(base->pVtab, "upid must be an integer");
	if (arg[3] && sqlite3_value_type(arg[3]) != SQLITE_NULL) {
		const unsigned char *h = sqlite3_value_text(arg[3]);
		cur->heap = h ? strdup((const char *)h) : NULL;
		if (!cur->heap)
			return SQLITE_NOMEM;
	}
	int rc = load_stacks(vt);
	if (rc == SQLITE_OK)
		rc = build(vt, cur);
	return rc;
}

static int fg_next(sqlite3_vtab_cursor *base)
{
	((struct fg_cursor *)base)->pos++;
	return SQLITE_OK;
}

static int fg_eof(sqlite3_vtab_cursor *base)
{
	struct fg_cursor *cur = (struct fg_cursor *)base;
	return cur->pos >= cur->n;
}

static void result_text(sqlite3_context *ctx, const char *s)
{
	if (s)
		sqlite3_result_text(ctx, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_result_null(ctx);
}

static int fg_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col)
{
	struct fg_cursor *cur = (struct fg_cursor *)base;
	const struct fg_node *nd = &cur->nodes[cur->pos];

	switch (col) {
	case FG_ID:
		sqlite3_result_int64(ctx, (int64_t)cur->pos);
		break;
	case FG_TS:
	case FG_ARG_TS:
		sqlite3_result_int64(ctx, cur->ts);
		break;
	case FG_DEPTH:
		sqlite3_result_int64(ctx, nd->depth);
		break;
	case FG_FUNC:
		result_text(ctx, nd->name);
		break;
	case FG_MAP_NAME:
		result_text(ctx, nd->map_name);
		break;
	case FG_COUNT:
	case FG_SIZE:
	case FG_ALLOC_COUNT:
	case FG_ALLOC_SIZE:
		sqlite3_result_int64(ctx, nd->self[(col - FG_COUNT) / 2]);
		break;
	case FG_CUM_COUNT:
	case FG_CUM_SIZE:
	case FG_CUM_ALLOC_COUNT:
	case FG_CUM_ALLOC_SIZE:
		sqlite3_result_int64(ctx, nd->cum[(col - FG_CUM_COUNT) / 2]);
		break;
	case FG_PARENT_ID:
		if (nd->parent == ROOT_PARENT)
			sqlite3_result_null(ctx);
		else
			sqlite3_result_int64(ctx, nd->parent);
		break;
	case FG_SOURCE_FILE:
		result_text(ctx, nd->source_file);
		break;
	case FG_LINE_NUMBER:
		if (nd->line > 0)
			sqlite3_result_int64(ctx, nd->line);
		else
			sqlite3_result_null(ctx);
		break;
	case FG_ARG_UPID:
		sqlite3_result_int64(ctx, cur->upid);
		break;
	case FG_ARG_PROFILE_TYPE:
		sqlite3_result_text(ctx, FG_DEFAULT_T, -1, SQLITE_STATIC);
		break;
	case FG_ARG_HEAP:
		result_text(ctx, cur->heap);
		break;
	default:
		sqlite3_result_null(ctx);
		break;
	}
	return SQLITE_OK;
}

static int fg_rowid(sqlite3_vtab_cursor *base, sqlite3_int64 *rowid)
{
	*rowid = (sqlite3_int64)((struct fg_cursor *)base)->pos;
	return SQLITE_OK;
}

static const sqlite3_module fg_module = {
        .iVersion = 0,
        .xCreate = NULL, /* eponymous only: no CREATE VIRTUAL TABLE */
        .xConnect = fg_connect,
        .xBestIndex = fg_best_index,
        .xDisconnect = fg_disconnect,
        .xDestroy = fg_disconnect,
        .xOpen = fg_open,
        .xClose = fg_close,
        .xFilter = fg_filter,
        .xNext = fg_next,
        .xEof = fg_eof,
        .xColumn = fg_column,
        .xRowid = fg_rowid,
};

int flamegraph_vtab_register(sqlite3 *db)
{
	return sqlite3_create_module_v2(db, FG_NAME, &fg_module, NULL, NULL);
}
