/*
 * The virtual tables' shared parts (vtab.h).
 */
#include <string.h>

#include "sql/vtab.h"

int vtab_connect(sqlite3 *db, const char *schema, size_t size,
                 sqlite3_vtab **out)
{
	int rc = sqlite3_declare_vtab(db, schema);

	if (rc != SQLITE_OK)
		return rc;
	sqlite3_vtab *vt = sqlite3_malloc((int)size);
	if (!vt)
		return SQLITE_NOMEM;
	memset(vt, 0, size);
	sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
	*out = vt;
	return SQLITE_OK;
}

int vtab_open(size_t size, sqlite3_vtab_cursor **out)
{
	sqlite3_vtab_cursor *cur = sqlite3_malloc((int)size);

	if (!cur)
		return SQLITE_NOMEM;
	memset(cur, 0, size);
	*out = cur;
	return SQLITE_OK;
}
