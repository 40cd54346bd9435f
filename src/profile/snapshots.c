/*
 * The named snapshots stored in a profile (snapshots.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "profile/snapshots.h"

/* Live objects and bytes of every heap at ts, from the counters. */
static void counter_totals(sqlite3 *db, int64_t upid, int64_t ts, int64_t *objs,
                           int64_t *bytes)
{
	sqlite3_stmt *st = NULL;

	*objs = *bytes = 0;
	if (sqlite3_prepare_v2(db,
	                       "SELECT coalesce(sum(count), 0),"
	                       " coalesce(sum(size), 0) FROM"
	                       " heap_profile_allocation WHERE upid = ?1 AND"
	                       " ts <= ?2",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_int64(st, 2, ts);
		if (sqlite3_step(st) == SQLITE_ROW) {
			*objs = sqlite3_column_int64(st, 0);
			*bytes = sqlite3_column_int64(st, 1);
		}
	}
	sqlite3_finalize(st);
}

int snapshots_list(sqlite3 *db, const char *subsys, long pid,
                   void (*row)(void *ctx, const struct snapshot_row *r),
                   void *ctx, size_t *nsel)
{
	struct rd_process *procs = NULL;
	size_t np = 0;
	int err = reader_load_processes(db, subsys, &procs, &np);

	*nsel = 0;
	for (size_t i = 0; !err && i < np; i++) {
		const struct rd_process *p = &procs[i];
		struct rd_dump *d = NULL;
		size_t nd = 0;
		if (pid > 0 && p->pid != pid)
			continue;
		(*nsel)++;
		if ((err = reader_load_dumps(db, subsys, p->upid, &d, &nd)))
			break;
		for (size_t k = 0; !err && k < nd; k++) {
			if (!d[k].name)
				continue;
			struct rd_block_summary sum;
			err = blocks_summary(db, subsys, d[k].id, &sum);
			if (err)
				break;
			struct snapshot_row r = {
			        .p = p,
			        .d = &d[k],
			        .dump = k + 1,
			        .nblocks = sum.nblocks,
			        .bytes = sum.bytes,
			        .in_flight = sum.in_flight,
			};
			/* No blocks kept (or none live): the counters. */
			if (!r.nblocks)
				counter_totals(db, p->upid, d[k].ts, &r.nblocks,
				               &r.bytes);
			row(ctx, &r);
		}
		reader_free_dumps(d, nd);
	}
	reader_free_processes(procs, np);
	return err;
}

int snapshots_pick(sqlite3 *db, const char *subsys, const char *name, long pid,
                   struct snapshot_pick *out)
{
	struct rd_dump *d = NULL;
	size_t nd = 0, plen = 0;

	memset(out, 0, sizeof(*out));
	out->k = -1;
	int err = reader_load_processes(db, subsys, &out->procs, &out->np);
	for (size_t i = 0; !err && i < out->np; i++) {
		const struct rd_process *p = &out->procs[i];
		if (pid > 0 && p->pid != pid)
			continue;
		out->nsel++;
		if ((err = reader_load_dumps(db, subsys, p->upid, &d, &nd)))
			break;
		/* The last of that name, as --dump NAME picks it. */
		long k = -1;
		for (size_t x = nd; x-- > 0 && k < 0;)
			if (d[x].name && !strcmp(d[x].name, name))
				k = (long)x;
		if (k < 0) {
			reader_free_dumps(d, nd);
			continue;
		}
		if (plen < sizeof(out->pids))
			plen += (size_t)snprintf(
			        out->pids + plen, sizeof(out->pids) - plen,
			        "%s%" PRId64, out->nmatch ? ", " : "", p->pid);
		if (out->nmatch++ == 0) {
			out->p = p;
			out->k = k;
			out->dumps = d;
			out->ndumps = nd;
		} else {
			reader_free_dumps(d, nd);
		}
	}
	return err;
}

void snapshots_pick_free(struct snapshot_pick *pk)
{
	reader_free_dumps(pk->dumps, pk->ndumps);
	reader_free_processes(pk->procs, pk->np);
	pk->dumps = NULL;
	pk->procs = NULL;
	pk->ndumps = pk->np = 0;
}
