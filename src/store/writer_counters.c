/*
 * Memory over time (issue 33): the values the session samples of each
 * process ten times a second (its heaps' live bytes, its RSS), stored as
 * Perfetto stores a process's counters: a process_counter_track per
 * (process, name), made at the name's first value, and a counter row per
 * value.  SELECT ts, value FROM counter JOIN process_counter_track t ON
 * t.id = track_id WHERE t.name = 'mem.rss' is the RSS curve.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/writer_int.h"
#include "util/err.h"
#include "util/grow.h"

#define SUBSYS "heapprof: profile: "

struct counter_track {
	int64_t upid, id;
	char name[96];
};

static int64_t track_find(const struct profile *p, int64_t upid,
                          const char *name)
{
	for (size_t i = 0; i < p->ntracks; i++)
		if (p->tracks[i].upid == upid &&
		    !strcmp(p->tracks[i].name, name))
			return p->tracks[i].id;
	return 0;
}

/* The track of (upid, v->name), made now if new: its id, or a negative
 * errno. */
static int64_t track_of(struct profile *p, int64_t upid,
                        const struct prof_counter *v)
{
	int64_t id = track_find(p, upid, v->name);
	if (id)
		return id;
	if (strlen(v->name) >= sizeof(p->tracks[0].name))
		return -EINVAL;
	struct counter_track *grown =
	        hp_grow(p->tracks, &p->captracks, p->ntracks, sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	p->tracks = grown;
	sqlite3_stmt *st = p->st[ST_COUNTER_TRACK];
	sqlite3_bind_text(st, 1, v->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, upid);
	sqlite3_bind_text(st, 3, v->unit, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, v->description, -1, SQLITE_STATIC);
	int err = step(p, ST_COUNTER_TRACK, "writing a counter track");
	if (err)
		return err;
	struct counter_track *t = &p->tracks[p->ntracks++];
	t->upid = upid;
	t->id = sqlite3_last_insert_rowid(p->db);
	strcpy(t->name, v->name);
	return t->id;
}

int profile_write_counters(struct profile *p, int64_t upid, uint64_t ts,
                           const struct prof_counter *v, size_t n)
{
	if (n == 0)
		return 0;
	size_t known = p->ntracks;
	int err = exec(p, "BEGIN", "writing counters");
	for (size_t i = 0; !err && i < n; i++) {
		int64_t id = track_of(p, upid, &v[i]);
		if (id < 0) {
			err = id == -EINVAL ? 0 : (int)id; /* a name too long */
			continue;
		}
		sqlite3_stmt *st = p->st[ST_COUNTER];
		sqlite3_bind_int64(st, 1, i64(ts));
		sqlite3_bind_int64(st, 2, id);
		sqlite3_bind_double(st, 3, v[i].value);
		err = step(p, ST_COUNTER, "writing counters");
	}
	if (!err)
		err = wr_commit(p, "writing counters");
	if (err) {
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
		p->ntracks = known; /* the tracks made went with it */
		if (err == -ENOMEM)
			hp_log(SUBSYS "out of memory\n");
	}
	return err;
}
