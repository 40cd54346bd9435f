/*
 * The named snapshots stored in a profile (snapshots.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "model/state.h"
#include "store/snapshots.h"

int snapshots_list(sqlite3 *db, const char *subsys, long pid,
                   void (*row)(void *ctx, const struct snapshot_row *r),
                   void *ctx, size_t *nsel)
{
	struct rd_process *procs = NULL;
	size_t np = 0;
	int err = rd_load_processes(db, subsys, &procs, &np);

	*nsel = 0;
	for (size_t i = 0; !err && i < np; i++) {
		const struct rd_process *p = &procs[i];
		struct rd_dump *d = NULL;
		size_t nd = 0;
		if (pid > 0 && p->pid != pid)
			continue;
		(*nsel)++;
		if ((err = rd_load_dumps(db, subsys, p->upid, &d, &nd)))
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
			int64_t tot[RD_NVIEWS];
			if (!r.nblocks) {
				err = state_totals_at(db, subsys, p->upid,
				                      d[k].ts, tot);
				if (err)
					break;
				r.nblocks = tot[RD_OBJECTS];
				r.bytes = tot[RD_SPACE];
			}
			row(ctx, &r);
		}
		rd_free_dumps(d, nd);
	}
	rd_free_processes(procs, np);
	return err;
}

int snapshots_pick(sqlite3 *db, const char *subsys, const char *name, long pid,
                   struct snapshot_pick *out)
{
	struct rd_dump *d = NULL;
	size_t nd = 0, plen = 0;

	memset(out, 0, sizeof(*out));
	out->k = -1;
	int err = rd_load_processes(db, subsys, &out->procs, &out->np);
	for (size_t i = 0; !err && i < out->np; i++) {
		const struct rd_process *p = &out->procs[i];
		if (pid > 0 && p->pid != pid)
			continue;
		out->nsel++;
		if ((err = rd_load_dumps(db, subsys, p->upid, &d, &nd)))
			break;
		/* The last of that name, as --dump NAME picks it. */
		long k = -1;
		for (size_t x = nd; x-- > 0 && k < 0;)
			if (d[x].name && !strcmp(d[x].name, name))
				k = (long)x;
		if (k < 0) {
			rd_free_dumps(d, nd);
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
			rd_free_dumps(d, nd);
		}
	}
	return err;
}

void snapshots_pick_free(struct snapshot_pick *pk)
{
	rd_free_dumps(pk->dumps, pk->ndumps);
	rd_free_processes(pk->procs, pk->np);
	pk->dumps = NULL;
	pk->procs = NULL;
	pk->ndumps = pk->np = 0;
}
