/*
 * The first answer about a process's heap (summary.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/funcs.h"
#include "model/state.h"
#include "model/summary.h"

/* The state of every heap at the dump at ts: totals in view v (bytes) and
 * vo (objects), and the function with the largest self share of v. */
static int part_at(sqlite3 *db, const char *subsys, const struct rd_stacks *s,
                   int64_t upid, int64_t ts, enum rd_view v, enum rd_view vo,
                   struct summary_part *out)
{
	struct rd_sample *x = NULL;
	size_t n = 0;
	memset(out, 0, sizeof(*out));
	int rc = state_at_dump(db, subsys, upid, NULL, ts, &x, &n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		out->bytes += x[i].v[v];
		out->objects += x[i].v[vo];
	}
	struct funcs a;
	rc = funcs_build(&a, s, x, n, v, -1);
	if (rc == 0 && out->bytes > 0) {
		size_t k = 0;
		size_t *order = funcs_order(&a, 1, &k);
		if (!order)
			rc = -ENOMEM;
		else if (k && a.fns[order[0]].self > 0) {
			snprintf(out->fn, sizeof(out->fn), "%s",
			         a.tree.funcs[a.fns[order[0]].func].name);
			out->pct = 100.0 * (double)a.fns[order[0]].self /
			           (double)out->bytes;
		}
		free(order);
	}
	funcs_free(&a);
	free(x);
	return rc;
}

int summary_of(sqlite3 *db, const char *subsys, const struct rd_stacks *s,
               int64_t upid, struct summary *out)
{
	struct rd_dump *d = NULL;
	size_t nd = 0;
	memset(out, 0, sizeof(*out));
	out->end_reason = "";
	int rc = rd_load_dumps(db, subsys, upid, &d, &nd);
	if (rc < 0 || nd == 0) {
		rd_free_dumps(d, nd);
		return rc < 0 ? rc : 0;
	}
	out->ndumps = nd;
	out->end_dump = nd;
	snprintf(out->end_reason_buf, sizeof(out->end_reason_buf), "%s",
	         d[nd - 1].reason);
	out->end_reason = out->end_reason_buf;
	out->end_at_peak = d[nd - 1].at_max != 0;
	for (size_t i = nd; i-- > 0;)
		if (d[i].at_max) {
			out->have_peak = true;
			out->peak_dump = i + 1;
			out->peak_ts = d[i].max_ts;
			break;
		}
	rc = part_at(db, subsys, s, upid, d[nd - 1].ts, RD_SPACE, RD_OBJECTS,
	             &out->end);
	if (!rc)
		rc = part_at(db, subsys, s, upid, d[nd - 1].ts, RD_ALLOC_SPACE,
		             RD_ALLOC_OBJECTS, &out->all);
	if (!rc && out->have_peak)
		rc = part_at(db, subsys, s, upid, d[out->peak_dump - 1].ts,
		             RD_SPACE, RD_OBJECTS, &out->peak);
	rd_free_dumps(d, nd);
	return rc;
}
