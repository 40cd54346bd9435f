/*
 * Profile reading helpers (see reader.h): the checks every command that
 * reads a profile needs before it can trust the schema, and an in-memory
 * copy of the stack tables so call chains can be walked without a query
 * per frame.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/pairmap.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/trace_read.h"
#include "util/err.h"
#include "util/grow.h"
#include "util/clock.h"

/* What look_at learnt of the file before SQLite opened it. */
struct file_facts {
	off_t size;
	off_t wal_size;  /* of path-wal beside it; 0 when there is none */
	bool wal_exists; /* there is a path-wal (of any size or kind) */
	bool wal_header; /* its header says WAL mode (file format 2) */
	unsigned char h[100];
	bool have_header; /* h holds the first 100 bytes of a SQLite file */
};

/*
 * A file in WAL mode with nothing in a -wal file beside it: if it is a
 * copy of a recording's file, made without that log, what the log held
 * is not in it (a copy, or a kill, that came while a dump was being
 * copied from the log into the file catches the file half-written).
 */
static const char *wal_hint(const struct file_facts *ff)
{
	return ff->wal_header && ff->wal_size == 0
	               ? "; it is in write-ahead-log mode: if it was copied "
	                 "from a recording, copy the -wal file beside the "
	                 "original with it"
	               : "";
}

/*
 * "not a heapprof profile (no T table)", and why when the data may be in
 * a write-ahead log: SQLite reads the -wal file beside a database as part
 * of it, so a log it did not apply (damaged, or another file's) is
 * named; a file in WAL mode with no log beside it may be a copy made
 * without the log that held its data (heapprof before issue 18 left the
 * dumps there until record ended).
 */
static void say_not_profile(const char *path, const char *subsys,
                            const char *table, const struct file_facts *ff)
{
	if (ff->wal_size > 0)
		hp_err(subsys,
		       "%s: not a heapprof profile (no %s table), though "
		       "%s-wal beside it holds %lld bytes of write-ahead log "
		       "that SQLite did not apply to it (damaged, or not its "
		       "log)",
		       path, table, hp_base_name(path),
		       (long long)ff->wal_size);
	else
		hp_err(subsys, "%s: not a heapprof profile (no %s table)%s",
		       path, table, wal_hint(ff));
}

/* Check that db holds every heapprof table; 0 or -EINVAL. */
static int check_tables(sqlite3 *db, const char *path, const char *subsys,
                        const struct file_facts *ff)
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
			say_not_profile(path, subsys,
			                profile_required_tables[i], ff);
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

/*
 * SQLite finds a damaged page only when a query happens to read it, so a
 * profile with a bad page in a table the command does not touch, or in an
 * index it bypasses, would give a partial answer and exit 0.  quick_check
 * reads every page once (a fraction of what a report costs) and catches
 * truncated and overwritten pages before anything is printed; values
 * inside intact pages cannot be checked (SQLite keeps no checksums).
 */
static int check_pages(sqlite3 *db, const char *path, const char *subsys,
                       const struct file_facts *ff)
{
	sqlite3_stmt *st = NULL;
	char why[160] = "";
	int rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);
		if (t && !strcmp((const char *)t, "ok")) {
			sqlite3_finalize(st);
			return 0;
		}
		const char *m = t ? (const char *)t : "";
		/* The schema name is noise: a profile has only "main". */
		if (!strncmp(m, "*** in database main ***", 24))
			m += 24;
		while (*m == '\n' || *m == ' ')
			m++;
		snprintf(why, sizeof(why), "%s", m);
	} else {
		snprintf(why, sizeof(why), "%s", sqlite3_errmsg(db));
	}
	sqlite3_finalize(st);
	/* Its report spans lines; the error must be one. */
	for (char *c = why; *c; c++)
		if (*c == '\n' || *c == '\r' || *c == '\t')
			*c = ' ';
	hp_err(subsys, "%s: damaged database, not read (%s)%s", path, why,
	       wal_hint(ff));
	return -EINVAL;
}

static uint32_t be32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | b[3];
}

/*
 * A file cut short loses its last pages; SQLite reads the missing bytes
 * as zeros without an error and quick_check may pass when only the end of
 * a page went.  The header says how long the file must be: a size that is
 * not a whole number of pages, or fewer pages than the header counts
 * (when that count is valid and no WAL file holds newer pages), is a
 * truncated file.  0, or -EINVAL with the message printed.
 */
static int check_length(const char *path, const char *subsys,
                        const struct file_facts *ff)
{
	const unsigned char *h = ff->h;

	if (!ff->have_header)
		return 0; /* not SQLite at all: its own message */
	uint32_t page = (uint32_t)h[16] << 8 | h[17];
	if (page == 1)
		page = 65536;
	if (page < 512 || (page & (page - 1)))
		return 0; /* SQLite refuses it itself */
	uint64_t want = 0;
	if (be32(h + 24) == be32(h + 92))
		want = (uint64_t)be32(h + 28) * page;
	if (ff->wal_size > 0)
		want = 0; /* pages may live in the WAL until a checkpoint */
	if ((uint64_t)ff->size % page == 0 && (uint64_t)ff->size >= want)
		return 0;
	if (want > (uint64_t)ff->size)
		hp_err(subsys,
		       "%s: truncated database (%lld bytes; its header "
		       "says %llu)%s",
		       path, (long long)ff->size, (unsigned long long)want,
		       wal_hint(ff));
	else
		hp_err(subsys,
		       "%s: truncated database (%lld bytes, not a whole "
		       "number of %u-byte pages)%s",
		       path, (long long)ff->size, page, wal_hint(ff));
	return -EINVAL;
}

static int not_regular(const char *path, const char *subsys, mode_t mode)
{
	hp_err(subsys, "%s: not a regular file (%s)", path, hp_file_kind(mode));
	return -EINVAL;
}

/*
 * Look at path before SQLite does: only a regular file (or a link to one)
 * is a profile.  SQLite's open(2) of a FIFO blocks until a writer comes,
 * for ever; a device or a directory would read as an empty or foreign
 * database.  stat(2) names the kind without opening anything (a device's
 * open may act); the file is then opened with O_NONBLOCK, which never
 * blocks on a FIFO put there in between, and its descriptor checked again.
 * Fills ff: the size, the header, the -wal file beside it.  0, or
 * -errno with the message printed.
 */
static int look_at(const char *path, const char *subsys, struct file_facts *ff)
{
	struct stat sb;

	memset(ff, 0, sizeof(*ff));
	/* SQLite's own message for a missing file is vague. */
	if (stat(path, &sb) < 0) {
		int err = -errno;
		hp_err(subsys, "%s: %s", path, strerror(errno));
		return err;
	}
	if (!S_ISREG(sb.st_mode))
		return not_regular(path, subsys, sb.st_mode);
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		int err = -errno;
		hp_err(subsys, "%s: %s", path, strerror(errno));
		return err;
	}
	if (fstat(fd, &sb) < 0) {
		int err = -errno;
		hp_err(subsys, "%s: %s", path, strerror(errno));
		close(fd);
		return err;
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return not_regular(path, subsys, sb.st_mode);
	}
	ff->size = sb.st_size;
	ssize_t n = pread(fd, ff->h, sizeof(ff->h), 0);
	close(fd);
	ff->have_header = n == (ssize_t)sizeof(ff->h) &&
	                  !memcmp(ff->h, "SQLite format 3", 16);
	ff->wal_header = ff->have_header && ff->h[18] == 2 && ff->h[19] == 2;
	char wal[4096];
	struct stat ws;
	if (snprintf(wal, sizeof(wal), "%s-wal", path) >= (int)sizeof(wal) ||
	    lstat(wal, &ws) == 0)
		ff->wal_exists = true; /* (or cannot tell) */
	if (ff->wal_exists && stat(wal, &ws) == 0 && S_ISREG(ws.st_mode))
		ff->wal_size = ws.st_size;
	/* SQLite deletes the -wal file of an empty database when it opens
	 * it, read-only or not: the dumps a recording left there would go
	 * with it. */
	if (ff->size == 0 && ff->wal_size > 0) {
		hp_err(subsys,
		       "%s: not a heapprof profile (an empty file), though "
		       "%s-wal beside it holds %lld bytes of write-ahead log: "
		       "not opened, so that SQLite does not delete that log",
		       path, hp_base_name(path), (long long)ff->wal_size);
		return -EINVAL;
	}
	return check_length(path, subsys, ff);
}

/*
 * A file in WAL mode (every copy of a recording's file) is read by SQLite
 * through a -shm file beside it, which it creates; where the reader cannot
 * create one (a read-only mount, someone else's directory) SQLite refuses
 * it ("attempt to write a readonly database").  With no -wal beside it,
 * nothing is writing it (a recording keeps one until it ends): such a
 * file, read-only, is opened immutable, without -shm or locks.  The URI
 * of path in uri, or "" to open path as it is.
 */
static void immutable_uri(const char *path, int flags,
                          const struct file_facts *ff, char *uri, size_t len)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');

	uri[0] = '\0';
	if (!(flags & SQLITE_OPEN_READONLY) || !ff->wal_header ||
	    ff->wal_exists || strlen(path) >= sizeof(dir))
		return;
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (access(dir, W_OK) == 0)
		return;
	/* "file://" + the absolute path (an empty authority), or "file:" +
	 * a relative one; every byte but [A-Za-z0-9/._~-] as %XX. */
	size_t n = (size_t)snprintf(uri, len, "file:%s",
	                            path[0] == '/' ? "//" : "");
	const unsigned char *c = (const unsigned char *)path;
	for (; *c && n + 4 < len; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || strchr("/._~-", *c))
			uri[n++] = (char)*c;
		else
			n += (size_t)snprintf(uri + n, len - n, "%%%02X", *c);
	}
	const char *q = "?immutable=1";
	if (!*c && n + strlen(q) < len)
		memcpy(uri + n, q, strlen(q) + 1);
	else
		uri[0] = '\0'; /* too long: as it is */
}

static sqlite3 *open_mode(const char *path, const char *subsys, int flags)
{
	struct file_facts ff;
	sqlite3 *db = NULL;
	char uri[3 * 4096 + 32];

	if (look_at(path, subsys, &ff) < 0)
		return NULL;
	immutable_uri(path, flags, &ff, uri, sizeof(uri));
	int rc = uri[0] ? sqlite3_open_v2(uri, &db, flags | SQLITE_OPEN_URI,
	                                  NULL)
	                : sqlite3_open_v2(path, &db, flags, NULL);
	if (rc != SQLITE_OK) {
		hp_err(subsys, "%s: %s", path,
		       db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return NULL;
	}
	/* A recording may be committing a dump right now. */
	sqlite3_busy_timeout(db, 2000);
	/* heapprof_event over the trace's chunks. */
	rc = tr_events_register(db);
	if (rc != SQLITE_OK) {
		hp_err(subsys, "%s: %s", path, sqlite3_errstr(rc));
		sqlite3_close(db);
		return NULL;
	}
	if (check_tables(db, path, subsys, &ff) < 0 ||
	    check_version(db, path, subsys) < 0 ||
	    check_pages(db, path, subsys, &ff) < 0) {
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

/* A connection is used by one thread at a time: without SQLite's own
 * mutexes, each sqlite3_step and sqlite3_column_* call is cheaper (a
 * report of a million stacks makes tens of millions of them). */
sqlite3 *rd_open(const char *path, const char *subsys)
{
	return open_mode(path, subsys,
	                 SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
}

sqlite3 *rd_open_rw(const char *path, const char *subsys)
{
	return open_mode(path, subsys,
	                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
}

static char *dup_col(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	return t ? strdup((const char *)t) : NULL;
}

/* Grow *arr (of *n elements of size sz) by one; NULL if out of memory. */
static int load_mappings(struct rd_stacks *s, sqlite3_stmt *st)
{
	size_t cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct rd_mapping *a =
		        hp_grow(s->mappings, &cap, s->nmappings, sizeof(*a));
		if (!a)
			return -ENOMEM;
		s->mappings = a;
		struct rd_mapping *m = &a[s->nmappings++];
		m->id = sqlite3_column_int64(st, 0);
		m->name = dup_col(st, 1);
		m->build_id = dup_col(st, 2);
		m->start = sqlite3_column_int64(st, 3);
		m->end = sqlite3_column_int64(st, 4);
		m->exact_offset = sqlite3_column_int64(st, 5);
		m->start_offset = sqlite3_column_int64(st, 6);
		m->load_bias = sqlite3_column_int64(st, 7);
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
		        hp_grow(s->frames, &cap, s->nframes, sizeof(*a));
		if (!a)
			return -ENOMEM;
		s->frames = a;
		struct rd_frame *f = &a[s->nframes++];
		f->id = sqlite3_column_int64(st, 0);
		f->mapping = sqlite3_column_int64(st, 1);
		f->rel_pc = sqlite3_column_int64(st, 2);
		f->name = dup_col(st, 3);
		f->system_name = dup_col(st, 4);
		f->symbol_set_id = sqlite3_column_int64(st, 5);
	}
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static int load_callsites(struct rd_stacks *s, sqlite3_stmt *st)
{
	size_t cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct rd_callsite *a =
		        hp_grow(s->callsites, &cap, s->ncallsites, sizeof(*a));
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

static int load_symbols(struct rd_stacks *s, sqlite3_stmt *st)
{
	size_t cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct rd_symbol *a =
		        hp_grow(s->symbols, &cap, s->nsymbols, sizeof(*a));
		if (!a)
			return -ENOMEM;
		s->symbols = a;
		struct rd_symbol *y = &a[s->nsymbols++];
		y->id = sqlite3_column_int64(st, 0);
		y->symbol_set_id = sqlite3_column_int64(st, 1);
		y->name = dup_col(st, 2);
		y->source_file = dup_col(st, 3);
		y->line = sqlite3_column_int64(st, 4);
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

int rd_load_stacks(sqlite3 *db, const char *subsys, struct rd_stacks *s)
{
	memset(s, 0, sizeof(*s));
	int err = run_loader(db, subsys,
	                     "SELECT id, name, build_id, start, \"end\","
	                     " exact_offset, start_offset, load_bias FROM"
	                     " stack_profile_mapping ORDER BY id",
	                     load_mappings, s);
	if (!err)
		err = run_loader(
		        db, subsys,
		        "SELECT id, mapping, rel_pc, name, system_name,"
		        " symbol_set_id FROM stack_profile_frame"
		        " ORDER BY id",
		        load_frames, s);
	if (!err)
		err = run_loader(db, subsys,
		                 "SELECT id, parent_id, frame_id, depth FROM"
		                 " stack_profile_callsite ORDER BY id",
		                 load_callsites, s);
	if (!err)
		err = run_loader(db, subsys,
		                 "SELECT id, symbol_set_id, name, source_file,"
		                 " line_number FROM stack_profile_symbol"
		                 " WHERE symbol_set_id IS NOT NULL"
		                 " ORDER BY symbol_set_id, id",
		                 load_symbols, s);
	if (err)
		rd_free_stacks(s);
	return err;
}

void rd_free_stacks(struct rd_stacks *s)
{
	for (size_t i = 0; i < s->nmappings; i++) {
		free(s->mappings[i].name);
		free(s->mappings[i].build_id);
	}
	for (size_t i = 0; i < s->nframes; i++) {
		free(s->frames[i].name);
		free(s->frames[i].system_name);
	}
	for (size_t i = 0; i < s->nsymbols; i++) {
		free(s->symbols[i].name);
		free(s->symbols[i].source_file);
	}
	free(s->symbols);
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

/* Ids as heapprof writes them are dense from 1 (id = index + 1): look
 * there first, and search only a file whose ids are not. */
#define GET_BY_ID(arr, n, want)                                                \
	do {                                                                   \
		if ((want) >= 1 && (uint64_t)(want) <= (n) &&                  \
		    (arr)[(want)-1].id == (want))                              \
			return &(arr)[(want)-1];                               \
		FIND_BY_ID(arr, n, want);                                      \
	} while (0)

const struct rd_mapping *rd_mapping_get(const struct rd_stacks *s, int64_t id)
{
	GET_BY_ID(s->mappings, s->nmappings, id);
}

const struct rd_frame *rd_frame_get(const struct rd_stacks *s, int64_t id)
{
	GET_BY_ID(s->frames, s->nframes, id);
}

const struct rd_callsite *rd_callsite_get(const struct rd_stacks *s, int64_t id)
{
	GET_BY_ID(s->callsites, s->ncallsites, id);
}

const struct rd_symbol *rd_frame_symbols(const struct rd_stacks *s,
                                         const struct rd_frame *f, size_t *n)
{
	size_t lo = 0, hi = s->nsymbols;

	*n = 0;
	if (!f || !f->symbol_set_id)
		return NULL;
	/* First symbol of the set. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->symbols[mid].symbol_set_id < f->symbol_set_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t end = lo;
	while (end < s->nsymbols &&
	       s->symbols[end].symbol_set_id == f->symbol_set_id)
		end++;
	*n = end - lo;
	return *n ? &s->symbols[lo] : NULL;
}

/* ---- processes, dumps, heaps, samples ----------------------------------- */

const char *const rd_view_names[RD_NVIEWS] = {"space", "alloc_space", "objects",
                                              "alloc_objects"};

sqlite3_stmt *rd_prepare(sqlite3 *db, const char *subsys, const char *sql)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		hp_err(subsys, "reading profile: %s", sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

int rd_finish(sqlite3 *db, const char *subsys, sqlite3_stmt *st, int rc)
{
	int err = 0;

	if (rc == SQLITE_NOMEM || rc == -ENOMEM) {
		hp_err(subsys, "out of memory");
		err = -ENOMEM;
	} else if (rc != SQLITE_DONE) {
		hp_err(subsys, "reading profile: %s", sqlite3_errmsg(db));
		err = -EIO;
	}
	sqlite3_finalize(st);
	return err;
}

static char *dup_text_or_empty(sqlite3_stmt *st, int col)
{
	char *t = dup_col(st, col);
	return t ? t : strdup("");
}

void rd_free_processes(struct rd_process *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].name);
		free(p[i].cmdline);
		free(p[i].unwind);
		free(p[i].how);
		free(p[i].note);
		free(p[i].exec_not_followed);
	}
	free(p);
}

/*
 * "alias.col" if table has the column, else "NULL": columns are added to
 * the format over time, and an older profile must still read.
 */
int rd_has_table(sqlite3 *db, const char *name)
{
	sqlite3_stmt *st = NULL;
	int found = 0;

	if (sqlite3_prepare_v2(db,
	                       "SELECT 1 FROM sqlite_master WHERE type IN"
	                       " ('table', 'view') AND name = ?",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		found = sqlite3_step(st) == SQLITE_ROW;
	}
	sqlite3_finalize(st);
	return found;
}

int rd_has_column(sqlite3 *db, const char *table, const char *col)
{
	sqlite3_stmt *st = NULL;
	int found = 0;

	if (sqlite3_prepare_v2(db,
	                       "SELECT 1 FROM pragma_table_info(?1)"
	                       " WHERE name = ?2",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, col, -1, SQLITE_STATIC);
		found = sqlite3_step(st) == SQLITE_ROW;
	}
	sqlite3_finalize(st);
	return found;
}

static const char *col_or_null(sqlite3 *db, const char *table,
                               const char *alias, const char *col, char *buf,
                               size_t len)
{
	if (!rd_has_column(db, table, col))
		return "NULL";
	snprintf(buf, len, "%s.%s", alias, col);
	return buf;
}

/* The SELECT list of cols from table (aliased), each NULL if missing. */
static char *select_cols(sqlite3 *db, const char *table, const char *alias,
                         const char *const *cols, size_t ncols)
{
	size_t len = 1;
	char one[64];

	for (size_t i = 0; i < ncols; i++)
		len += strlen(alias) + strlen(cols[i]) + 8;
	char *out = malloc(len);
	if (!out)
		return NULL;
	out[0] = '\0';
	for (size_t i = 0; i < ncols; i++) {
		if (i)
			strcat(out, ", ");
		strcat(out, col_or_null(db, table, alias, cols[i], one,
		                        sizeof(one)));
	}
	return out;
}

/* heapprof_process columns read after the process table's, in order. */
static const char *const hp_cols[] = {
        "sampling_interval",
        "unwind",
        "max_frames",
        "shmem_size",
        "from_startup",
        "rejected_concurrent",
        "disconnected",
        "exit_status",
        "client_state",
        "stop_reason",
        "how",
        "ppid",
        "session_id",
        "note",
        "interval_used",
        "max_live_bytes",
        "max_ts",
        "exec_not_followed",
        "children_not_followed",
};

static int fill_process(struct rd_process *p, sqlite3_stmt *st)
{
	memset(p, 0, sizeof(*p));
	p->upid = sqlite3_column_int64(st, 0);
	p->pid = sqlite3_column_int64(st, 1);
	p->name = dup_text_or_empty(st, 2);
	p->cmdline = dup_text_or_empty(st, 3);
	p->start_ts = sqlite3_column_int64(st, 4);
	p->has_end = sqlite3_column_type(st, 5) != SQLITE_NULL;
	p->end_ts = sqlite3_column_int64(st, 5);
	p->interval = sqlite3_column_int64(st, 6);
	p->unwind = dup_text_or_empty(st, 7);
	p->max_frames = sqlite3_column_int64(st, 8);
	p->shmem_size = sqlite3_column_int64(st, 9);
	p->from_startup = sqlite3_column_int64(st, 10) != 0;
	p->rejected_concurrent = (int)sqlite3_column_int64(st, 11);
	p->disconnected = sqlite3_column_int64(st, 12) != 0;
	p->has_exit = sqlite3_column_type(st, 13) != SQLITE_NULL;
	p->exit_status = sqlite3_column_int64(st, 13);
	p->client_state = sqlite3_column_int64(st, 14);
	p->stop_reason = sqlite3_column_int64(st, 15);
	p->how = dup_col(st, 16);
	if (!p->how || !p->how[0]) {
		free(p->how);
		p->how = strdup("command");
	}
	p->ppid = sqlite3_column_int64(st, 17);
	p->session_id = sqlite3_column_int64(st, 18);
	if (sqlite3_column_type(st, 19) != SQLITE_NULL &&
	    !(p->note = dup_col(st, 19)))
		return -1;
	p->interval_used = sqlite3_column_int64(st, 20);
	p->max_live_bytes = sqlite3_column_int64(st, 21);
	p->max_ts = sqlite3_column_int64(st, 22);
	if (sqlite3_column_type(st, 23) != SQLITE_NULL &&
	    !(p->exec_not_followed = dup_col(st, 23)))
		return -1;
	p->children_not_followed = sqlite3_column_int64(st, 24);
	return p->name && p->cmdline && p->unwind && p->how ? 0 : -1;
}

int rd_load_processes(sqlite3 *db, const char *subsys, struct rd_process **out,
                      size_t *n)
{
	char *cols = select_cols(db, "heapprof_process", "hp", hp_cols,
	                         sizeof(hp_cols) / sizeof(hp_cols[0]));
	char *sql = NULL;
	if (!cols || asprintf(&sql,
	                      "SELECT p.upid, p.pid, p.name, p.cmdline,"
	                      " p.start_ts, p.end_ts, %s FROM process p"
	                      " LEFT JOIN heapprof_process hp USING (upid)"
	                      " ORDER BY p.upid",
	                      cols) < 0)
		sql = NULL;
	free(cols);
	*out = NULL;
	*n = 0;
	if (!sql) {
		hp_err(subsys, "out of memory");
		return -ENOMEM;
	}
	sqlite3_stmt *st = rd_prepare(db, subsys, sql);
	struct rd_process *a = NULL;
	size_t cap = 0;
	int rc = SQLITE_DONE;

	free(sql);
	if (!st)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct rd_process *b = hp_grow(a, &cap, *n, sizeof(*b));
		if (!b) {
			rc = SQLITE_NOMEM;
			break;
		}
		a = b;
		int bad = fill_process(&a[*n], st);
		++*n;
		if (bad) {
			rc = SQLITE_NOMEM;
			break;
		}
	}
	int err = rd_finish(db, subsys, st, rc);
	if (err) {
		rd_free_processes(a, *n);
		*n = 0;
		return err;
	}
	*out = a;
	return 0;
}

void rd_free_dumps(struct rd_dump *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(d[i].reason);
		free(d[i].name);
	}
	free(d);
}

int rd_load_dumps(sqlite3 *db, const char *subsys, int64_t upid,
                  struct rd_dump **out, size_t *n)
{
	static const char *const cols[] = {"at_max", "max_ts", "max_live_bytes",
	                                   "interval_used", "name"};
	char *sel = select_cols(db, "heapprof_dump", "d", cols,
	                        sizeof(cols) / sizeof(cols[0]));
	char *sql = NULL;
	if (!sel ||
	    asprintf(&sql,
	             "SELECT d.ts, d.reason, %s, d.id FROM heapprof_dump d"
	             " WHERE d.upid = ? ORDER BY d.ts, d.id",
	             sel) < 0)
		sql = NULL;
	free(sel);
	*out = NULL;
	*n = 0;
	if (!sql) {
		hp_err(subsys, "out of memory");
		return -ENOMEM;
	}
	sqlite3_stmt *st = rd_prepare(db, subsys, sql);
	struct rd_dump *a = NULL;
	size_t cap = 0;
	int rc = SQLITE_DONE;

	free(sql);
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct rd_dump *b = hp_grow(a, &cap, *n, sizeof(*b));
		if (!b) {
			rc = SQLITE_NOMEM;
			break;
		}
		a = b;
		memset(&a[*n], 0, sizeof(a[*n]));
		a[*n].ts = sqlite3_column_int64(st, 0);
		a[*n].at_max = sqlite3_column_int64(st, 2) != 0;
		a[*n].max_ts = sqlite3_column_int64(st, 3);
		a[*n].max_live_bytes = sqlite3_column_int64(st, 4);
		a[*n].interval_used = sqlite3_column_int64(st, 5);
		a[*n].id = sqlite3_column_int64(st, 7);
		a[*n].reason = dup_text_or_empty(st, 1);
		if (sqlite3_column_type(st, 6) != SQLITE_NULL) {
			a[*n].name = dup_text_or_empty(st, 6);
			if (!a[*n].name) {
				free(a[*n].reason);
				rc = SQLITE_NOMEM;
				break;
			}
		}
		if (!a[(*n)++].reason) {
			rc = SQLITE_NOMEM;
			break;
		}
	}
	int err = rd_finish(db, subsys, st, rc);
	if (err) {
		rd_free_dumps(a, *n);
		*n = 0;
		return err;
	}
	*out = a;
	return 0;
}

void rd_free_heaps(char **h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(h[i]);
	free(h);
}

int rd_heap_cmp(const char *a, const char *b)
{
	int am = !strcmp(a, "libc.malloc"), bm = !strcmp(b, "libc.malloc");
	return am != bm ? bm - am : strcmp(a, b);
}

static int cmp_heap_names(const void *a, const void *b)
{
	return rd_heap_cmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Distinct names by a scan in C: rows come in runs of one heap, so the
 * last name seen nearly always matches, where SQL's DISTINCT looks every
 * row up in a temporary index.
 */
int rd_load_heaps(sqlite3 *db, const char *subsys, int64_t upid, char ***out,
                  size_t *n)
{
	sqlite3_stmt *st =
	        rd_prepare(db, subsys,
	                   "SELECT heap_name FROM heap_profile_allocation"
	                   " WHERE upid = ? AND heap_name IS NOT NULL");
	char **a = NULL;
	size_t cap = 0, last = 0;
	int rc = SQLITE_DONE;

	*out = NULL;
	*n = 0;
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		if (!name) {
			rc = SQLITE_NOMEM;
			break;
		}
		if (*n && !strcmp(a[last], name))
			continue;
		size_t i = 0;
		while (i < *n && strcmp(a[i], name))
			i++;
		last = i;
		if (i < *n)
			continue;
		char **b = hp_grow(a, &cap, *n, sizeof(*b));
		if (!b) {
			rc = SQLITE_NOMEM;
			break;
		}
		a = b;
		if (!(a[(*n)++] = strdup(name))) {
			rc = SQLITE_NOMEM;
			break;
		}
	}
	if (rc == SQLITE_DONE && *n > 1)
		qsort(a, *n, sizeof(*a), cmp_heap_names);
	int err = rd_finish(db, subsys, st, rc);
	if (err) {
		rd_free_heaps(a, *n);
		*n = 0;
		return err;
	}
	*out = a;
	return 0;
}

void rd_sample_add(struct rd_sample *x, int64_t size, int64_t count)
{
	/* Unsigned: a bad file's sums wrap instead of being undefined.
	 * The analyzer takes a new pairmap slot's value for non-zero (it is
	 * 0) and reaches here with no array: a false positive. */
	// NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
	x->v[RD_SPACE] = (int64_t)((uint64_t)x->v[RD_SPACE] + (uint64_t)size);
	x->v[RD_OBJECTS] =
	        (int64_t)((uint64_t)x->v[RD_OBJECTS] + (uint64_t)count);
	if (size > 0)
		x->v[RD_ALLOC_SPACE] =
		        (int64_t)((uint64_t)x->v[RD_ALLOC_SPACE] +
		                  (uint64_t)size);
	if (count > 0)
		x->v[RD_ALLOC_OBJECTS] =
		        (int64_t)((uint64_t)x->v[RD_ALLOC_OBJECTS] +
		                  (uint64_t)count);
}

int rd_load_counter(sqlite3 *db, const char *subsys, int64_t upid,
                    const char *name, struct rd_counter *out)
{
	memset(out, 0, sizeof(*out));
	if (!rd_has_table(db, "process_counter_track") ||
	    !rd_has_table(db, "counter"))
		return 0; /* a profile from before memory over time */
	sqlite3_stmt *st =
	        rd_prepare(db, subsys,
	                   "SELECT c.ts, c.value FROM counter c"
	                   " JOIN process_counter_track t ON t.id = c.track_id"
	                   " WHERE t.upid = ?1 AND t.name = ?2"
	                   " ORDER BY c.ts, c.id");
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	size_t cap = 0, capv = 0;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t *t = hp_grow(out->ts, &cap, out->n, sizeof(*t));
		if (t)
			out->ts = t;
		double *v = hp_grow(out->v, &capv, out->n, sizeof(*v));
		if (v)
			out->v = v;
		if (!t || !v) {
			rc = SQLITE_NOMEM;
			break;
		}
		out->ts[out->n] = sqlite3_column_int64(st, 0);
		out->v[out->n++] = sqlite3_column_double(st, 1);
	}
	int err = rd_finish(db, subsys, st, rc);
	if (err)
		rd_free_counter(out);
	return err;
}

void rd_free_counter(struct rd_counter *c)
{
	free(c->ts);
	free(c->v);
	memset(c, 0, sizeof(*c));
}
