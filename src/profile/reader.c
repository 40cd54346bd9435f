/*
 * Profile reading helpers (see reader.h): the checks every command that
 * reads a profile needs before it can trust the schema, and an in-memory
 * copy of the stack tables so call chains can be walked without a query
 * per frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "profile/reader.h"
#include "profile/schema.h"
#include "util/err.h"

/* Check that db holds every heapprof table; 0 or -EINVAL. */
static int check_tables(sqlite3 *db, const char *path, const char *subsys)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db,
	                            "SELECT count(*) FROM sqlite_master"
	                            " WHERE type = 'table' AND name = ?",
	                            -1, &st, NULL);
	if (rc != SQLITE_OK) {
		if ((rc & 0xff) == SQLITE_NOTADB)
			hp_err(subsys, "%s: not a SQLite database", path);
		else
			hp_err(subsys, "%s: %s", path, sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return -EINVAL;
	}
	for (size_t i = 0; profile_required_tables[i]; i++) {
		sqlite3_bind_text(st, 1, profile_required_tables[i], -1,
		                  SQLITE_STATIC);
		rc = sqlite3_step(st);
		int found = rc == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
		sqlite3_reset(st);
		if (!found) {
			hp_err(subsys,
			       "%s: not a heapprof profile (no %s table)", path,
			       profile_required_tables[i]);
			sqlite3_finalize(st);
			return -EINVAL;
		}
	}
	sqlite3_finalize(st);
	return 0;
}

static int check_version(sqlite3 *db, const char *path, const char *subsys)
{
	sqlite3_stmt *st = NULL;
	int version = PROFILE_FORMAT_VERSION;

	if (sqlite3_prepare_v2(db,
	                       "SELECT value FROM heapprof_meta"
	                       " WHERE key = 'format_version'",
	                       -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (version > PROFILE_FORMAT_VERSION) {
		hp_err(subsys,
		       "%s: profile format %d is newer than this heapprof "
		       "reads (%d)",
		       path, version, PROFILE_FORMAT_VERSION);
		return -EINVAL;
	}
	return 0;
}

sqlite3 *reader_open(const char *path, const char *subsys)
{
	struct stat sb;
	sqlite3 *db = NULL;

	/* SQLite's own message for a missing file is vague. */
	if (stat(path, &sb) < 0) {
		hp_err(subsys, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (S_ISDIR(sb.st_mode)) {
		hp_err(subsys, "%s: is a directory", path);
		return NULL;
	}
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		hp_err(subsys, "%s: %s", path,
		       db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return NULL;
	}
	/* A recording may be committing a dump right now. */
	sqlite3_busy_timeout(db, 2000);
	if (check_tables(db, path, subsys) < 0 ||
	    check_version(db, path, subsys) < 0) {
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

static char *dup_col(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return t ? strdup((const char *)t) : NULL;
}

/* Grow *arr (of *n elements of size sz) by one; NULL if out of memory. */
static void *grow(void *arr, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return arr;
	size_t ncap = *cap ? *cap * 2 : 256;
	void *a = realloc(arr, ncap * sz);
	if (a)
		*cap = ncap;
	return a;
}

static int load_mappings(struct rd_stacks *s, sqlite3_stmt *st)
{
	size_t cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct rd_mapping *a =
		        grow(s->mappings, &cap, s->nmappings, sizeof(*a));
		if (!a)
			return -ENOMEM;
		s->mappings = a;
		struct rd_mapping *m = &a[s->nmappings++];
		m->id = sqlite3_column_int64(st, 0);
		m->name = dup_col(st, 1);
		m->build_id = dup_col(st, 2);
		if (!m->name)
			m->name = strdup("");
		if (!m->name)
			return -ENOMEM;
	}
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static int load_frames(struct rd_stacks *s, sqlite3_stmt *st)
{
	size_t cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct rd_frame *a =
		        grow(s->frames, &cap, s->nframes, sizeof(*a));
		if (!a)
			return -ENOMEM;
		s->frames = a;
		struct rd_frame *f = &a[s->nframes++];
		f->id = sqlite3_column_int64(st, 0);
		f->mapping = sqlite3_column_int64(st, 1);
		f->rel_pc = sqlite3_column_int64(st, 2);
		f->name = dup_col(st, 3);
	}
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static int load_callsites(struct rd_stacks *s, sqlite3_stmt *st)
{
	size_t cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct rd_callsite *a =
		        grow(s->callsites, &cap, s->ncallsites, sizeof(*a));
		if (!a)
			return -ENOMEM;
		s->callsites = a;
		struct rd_callsite *c = &a[s->ncallsites++];
		c->id = sqlite3_column_int64(st, 0);
		c->parent = sqlite3_column_int64(st, 1); /* NULL reads as 0 */
		c->frame = sqlite3_column_int64(st, 2);
		c->depth = sqlite3_column_int64(st, 3);
	}
	return rc == SQLITE_DONE ? 0 : -EIO;
}

typedef int (*loader_fn)(struct rd_stacks *, sqlite3_stmt *);

static int run_loader(sqlite3 *db, const char *subsys, const char *sql,
                      loader_fn fn, struct rd_stacks *s)
{
	sqlite3_stmt *st = NULL;
	int err = -EIO;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK)
		err = fn(s, st);
	if (err == -ENOMEM)
		hp_err(subsys, "out of memory");
	else if (err)
		hp_err(subsys, "reading stacks: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return err;
}

int reader_load_stacks(sqlite3 *db, const char *subsys, struct rd_stacks *s)
{
	memset(s, 0, sizeof(*s));
	int err = run_loader(db, subsys,
	                     "SELECT id, name, build_id FROM"
	                     " stack_profile_mapping ORDER BY id",
	                     load_mappings, s);
	if (!err)
		err = run_loader(db, subsys,
		                 "SELECT id, mapping, rel_pc, name FROM"
		                 " stack_profile_frame ORDER BY id",
		                 load_frames, s);
	if (!err)
		err = run_loader(db, subsys,
		                 "SELECT id, parent_id, frame_id, depth FROM"
		                 " stack_profile_callsite ORDER BY id",
		                 load_callsites, s);
	if (err)
		reader_free_stacks(s);
	return err;
}

void reader_free_stacks(struct rd_stacks *s)
{
	for (size_t i = 0; i < s->nmappings; i++) {
		free(s->mappings[i].name);
		free(s->mappings[i].build_id);
	}
	for (size_t i = 0; i < s->nframes; i++)
		free(s->frames[i].name);
	free(s->mappings);
	free(s->frames);
	free(s->callsites);
	memset(s, 0, sizeof(*s));
}

/* Binary search in an array sorted by its leading int64 id. */
#define FIND_BY_ID(arr, n, want)                                               \
	do {                                                                   \
		size_t lo_ = 0, hi_ = (n);                                     \
		while (lo_ < hi_) {                                            \
			size_t mid_ = lo_ + (hi_ - lo_) / 2;                   \
			if ((arr)[mid_].id == (want))                          \
				return &(arr)[mid_];                           \
			if ((arr)[mid_].id < (want))                           \
				lo_ = mid_ + 1;                                \
			else                                                   \
				hi_ = mid_;                                    \
		}                                                              \
		return NULL;                                                   \
	} while (0)

const struct rd_mapping *rd_mapping_get(const struct rd_stacks *s, int64_t id)
{
	FIND_BY_ID(s->mappings, s->nmappings, id);
}

const struct rd_frame *rd_frame_get(const struct rd_stacks *s, int64_t id)
{
	FIND_BY_ID(s->frames, s->nframes, id);
}

const struct rd_callsite *rd_callsite_get(const struct rd_stacks *s, int64_t id)
{
	FIND_BY_ID(s->callsites, s->ncallsites, id);
}
