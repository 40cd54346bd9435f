/*
 * The named snapshots stored in a profile (dumps with a name: `heapprof
 * snapshot -p`, heapprof_take_named_snapshot), for `heapprof snapshot
 * --list` and `--name`.
 *
 * Errors: functions print one line "heapprof: <subsys>: ..." to stderr and
 * return a negative errno.
 */
#ifndef HEAPPROF_STORE_SNAPSHOTS_H
#define HEAPPROF_STORE_SNAPSHOTS_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "store/blocks.h"
#include "store/reader.h"

/* One named snapshot, as --list shows it. */
struct snapshot_row {
	const struct rd_process *p;
	const struct rd_dump *d;
	size_t dump;            /* 1-based among p's dumps */
	int64_t nblocks, bytes; /* no blocks kept (or none live): the
	                         * counters' live objects and bytes */
	int64_t in_flight;      /* -1 if the file does not say */
};

/*
 * row(ctx, r) for every named snapshot of every process of db (pid > 0:
 * of process pid only), in reader order; *nsel gets the number of
 * processes looked at.  0 or a negative errno (message printed; the rows
 * before it were given).
 */
int snapshots_list(sqlite3 *db, const char *subsys, long pid,
                   void (*row)(void *ctx, const struct snapshot_row *r),
                   void *ctx, size_t *nsel);

/* The snapshot a name picks: the last dump of that name of a process, as
 * --dump NAME picks it. */
struct snapshot_pick {
	struct rd_process *procs; /* every process of the profile */
	size_t np;
	size_t nsel;    /* processes looked at (pid > 0: that one) */
	size_t nmatch;  /* of them, those that have a snapshot of that name */
	char pids[256]; /* their pids, ", " between them (cut when long) */
	/* The first that has it: its process, its dumps and the index of
	 * the snapshot among them (0-based). */
	const struct rd_process *p;
	struct rd_dump *dumps;
	size_t ndumps;
	long k;
};

/*
 * The snapshot named name in db (pid > 0: in process pid only) into
 * *out, whose nsel and nmatch say whether there was none, one or several.
 * 0 or a negative errno (message printed).  snapshots_pick_free *out in
 * every case.
 */
int snapshots_pick(sqlite3 *db, const char *subsys, const char *name, long pid,
                   struct snapshot_pick *out);
void snapshots_pick_free(struct snapshot_pick *pk);

#endif
