/*
 * The heap model's state (state.h): a heap's state per call stack at a
 * dump, at every dump in one pass, and per heap.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/state.h"
#include "model/tree.h"
#include "util/pairmap.h"
#include "store/rows.h"
#include "util/err.h"
#include "util/grow.h"

int state_init(struct state *a, const struct rd_stacks *s)
{
	size_t nslots = s->ncallsites + 1;

	a->v = calloc(nslots * RD_NVIEWS, sizeof(*a->v));
	a->seen = calloc(nslots, 1);
	a->touched = malloc(nslots * sizeof(*a->touched));
	a->ntouched = 0;
	return a->v && a->seen && a->touched ? 0 : -ENOMEM;
}

void state_free(struct state *a)
{
	free(a->v);
	free(a->seen);
	free(a->touched);
}

static void acc_add(struct state *a, size_t slot, int64_t size, int64_t count)
{
	int64_t *v = &a->v[slot * RD_NVIEWS];

	if (!a->seen[slot]) {
		a->seen[slot] = 1;
		a->touched[a->ntouched++] = slot;
	}
	v[RD_SPACE] += size;
	v[RD_ALLOC_SPACE] += size > 0 ? size : 0;
	v[RD_OBJECTS] += count;
	v[RD_ALLOC_OBJECTS] += count > 0 ? count : 0;
}

void state_reset(struct state *a)
{
	for (size_t k = 0; k < a->ntouched; k++) {
		memset(&a->v[a->touched[k] * RD_NVIEWS], 0,
		       RD_NVIEWS * sizeof(*a->v));
		a->seen[a->touched[k]] = 0;
	}
	a->ntouched = 0;
}

void state_add_sample(struct state *a, const struct rd_stacks *s,
                      const struct rd_sample *x)
{
	size_t slot = tree_slot(s, x->callsite);
	int64_t *v = &a->v[slot * RD_NVIEWS];

	if (!a->seen[slot]) {
		a->seen[slot] = 1;
		a->touched[a->ntouched++] = slot;
	}
	for (int k = 0; k < RD_NVIEWS; k++)
		v[k] += x->v[k];
}

int state_walk_dumps(sqlite3 *db, const char *subsys, const struct rd_stacks *s,
                     struct state *a, int64_t upid, const char *heap,
                     const struct rd_dump *dumps, size_t ndumps,
                     int (*at_dump)(void *ctx, size_t d, const struct state *a),
                     void *ctx)
{
	struct rows r;
	struct rows_row row;
	struct rows_query q = {upid, heap, INT64_MAX, 1};
	size_t d = 0;
	int rc = 0, err = rows_open(&r, db, subsys, &q);

	state_reset(a);
	while (!err && (rc = rows_next(&r, &row)) > 0) {
		while (!err && d < ndumps && row.ts > dumps[d].ts) {
			err = at_dump(ctx, d, a);
			d++;
		}
		if (d == ndumps)
			break; /* later rows are in no dump */
		acc_add(a, tree_slot(s, row.callsite), row.size, row.count);
	}
	if (!err && rc < 0)
		err = rc;
	rows_close(&r);
	for (; !err && d < ndumps; d++)
		err = at_dump(ctx, d, a);
	return err;
}

static int cmp_sample(const void *a, const void *b)
{
	int64_t x = ((const struct rd_sample *)a)->callsite;
	int64_t y = ((const struct rd_sample *)b)->callsite;
	return x < y ? -1 : x > y;
}

/*
 * Summed in C by callsite, then sorted: a GROUP BY on a column without an
 * index makes SQLite sort every row first (1.7 s for the 2 million rows of
 * a million stacks, against 0.3 s to read them).  A callsite's entry is
 * found by its id in an array (ids are dense from 1), or, for an id out of
 * the table's range (a bad file), in a hash map.
 */
int state_at_dump(sqlite3 *db, const char *subsys, int64_t upid,
                  const char *heap, int64_t ts, struct rd_sample **out,
                  size_t *n)
{
	int64_t max = rows_max_callsite(db);
	struct rows_query q = {upid, heap, ts, 0};
	struct rows r;
	struct rows_row row;
	struct rd_sample *a = NULL;
	struct pairmap idx;
	/* Entry + 1 by callsite id; 0: none yet. */
	uint32_t *dense = NULL;
	size_t cap = 0, k = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (max < 0 || max >= (int64_t)1 << 30)
		max = 0;
	if (!(dense = calloc((size_t)max + 1, sizeof(*dense)))) {
		hp_err(subsys, "out of memory");
		return -ENOMEM;
	}
	if ((rc = rows_open(&r, db, subsys, &q)) < 0) {
		free(dense);
		return rc;
	}
	pairmap_init(&idx);
	while ((rc = rows_next(&r, &row)) > 0) {
		int64_t cs = row.callsite;
		int64_t at;
		struct pairmap_slot *sl = NULL;
		if (cs >= 0 && cs <= max) {
			at = dense[cs];
		} else {
			bool added;
			if (!(sl = pairmap_slot(&idx, cs, 0, &added))) {
				rc = -ENOMEM;
				break;
			}
			at = sl->v;
		}
		if (!at) {
			struct rd_sample *b = hp_grow(a, &cap, *n, sizeof(*b));
			if (!b || *n >= UINT32_MAX) {
				a = b ? b : a;
				rc = -ENOMEM;
				break;
			}
			a = b;
			a[*n] = (struct rd_sample){.callsite = cs};
			at = (int64_t)++ * n;
			if (sl)
				sl->v = at;
			else
				dense[cs] = (uint32_t)at;
		}
		rd_sample_add(&a[at - 1], row.size, row.count);
	}
	rows_close(&r);
	pairmap_free(&idx);
	free(dense);
	if (rc < 0) {
		if (rc == -ENOMEM)
			hp_err(subsys, "reading allocations: out of memory");
		free(a);
		*n = 0;
		return rc;
	}
	/* Only callsites with something to show, by id. */
	for (size_t i = 0; i < *n; i++) {
		int any = 0;
		for (int v = 0; v < RD_NVIEWS; v++)
			any |= a[i].v[v] != 0;
		if (any)
			a[k++] = a[i];
	}
	*n = k;
	if (k > 1) /* a is NULL when there is no row: not for qsort */
		qsort(a, k, sizeof(*a), cmp_sample);
	*out = a;
	return 0;
}

static int cmp_heaps(const void *a, const void *b)
{
	const struct state_heap *x = a, *y = b;
	return rd_heap_cmp(x->name, y->name);
}

void state_free_heaps(struct state_heap *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(h[i].name);
	free(h);
}

/* Rows come in runs of one heap: the last heap is tried first. */
ssize_t state_heaps_at(sqlite3 *db, const char *subsys, int64_t upid,
                       int64_t ts, struct state_heap **out)
{
	struct rows_query q = {upid, NULL, ts, 0};
	struct rows r;
	struct rows_row row;
	struct state_heap *h = NULL;
	size_t n = 0, last = 0;
	int rc = rows_open(&r, db, subsys, &q);

	while (rc >= 0 && (rc = rows_next(&r, &row)) > 0) {
		size_t i = last;
		if (i >= n || strcmp(h[i].name, row.heap))
			for (i = 0; i < n && strcmp(h[i].name, row.heap); i++)
				;
		if (i == n) {
			struct state_heap *a = realloc(h, (n + 1) * sizeof(*a));
			if (!a || !(a[n].name = strdup(row.heap))) {
				h = a ? a : h;
				hp_err(subsys, "reading allocations: out of"
				               " memory");
				rc = -ENOMEM;
				break;
			}
			h = a;
			memset(h[n].t, 0, sizeof(h[n].t));
			n++;
		}
		last = i;
		struct rd_sample x;
		memcpy(x.v, h[i].t, sizeof(x.v));
		rd_sample_add(&x, row.size, row.count);
		memcpy(h[i].t, x.v, sizeof(x.v));
	}
	rows_close(&r);
	if (rc < 0) {
		state_free_heaps(h, n);
		return -1;
	}
	if (n > 1)
		qsort(h, n, sizeof(*h), cmp_heaps);
	*out = h;
	return (ssize_t)n;
}

int state_totals_at(sqlite3 *db, const char *subsys, int64_t upid, int64_t ts,
                    int64_t tot[RD_NVIEWS])
{
	struct rows_query q = {upid, NULL, ts, 0};
	struct rows r;
	struct rows_row row;
	struct rd_sample x = {0};
	int rc = rows_open(&r, db, subsys, &q);

	while (rc >= 0 && (rc = rows_next(&r, &row)) > 0)
		rd_sample_add(&x, row.size, row.count);
	rows_close(&r);
	memcpy(tot, x.v, sizeof(x.v));
	return rc < 0 ? rc : 0;
}

int state_leaks(sqlite3 *db, const char *subsys, int64_t upid,
                struct tr_set *out, struct tr_leak_src *src)
{
	struct state_heap *heaps = NULL;
	int err = tr_leak_blocks(db, subsys, upid, out, src);

	if (err || !src->have_dump || src->from_blocks)
		return err;
	ssize_t nh = state_heaps_at(db, subsys, upid, src->dump_ts, &heaps);
	if (nh < 0)
		return -EIO;
	for (ssize_t i = 0; !err && i < nh; i++) {
		struct rd_sample *x = NULL;
		size_t n = 0;
		err = state_at_dump(db, subsys, upid, heaps[i].name,
		                    src->dump_ts, &x, &n);
		for (size_t k = 0; !err && k < n; k++) {
			int64_t v[RD_NVIEWS] = {
			        [RD_SPACE] = x[k].v[RD_SPACE],
			        [RD_ALLOC_SPACE] = x[k].v[RD_SPACE],
			        [RD_OBJECTS] = x[k].v[RD_OBJECTS],
			        [RD_ALLOC_OBJECTS] = x[k].v[RD_OBJECTS]};
			if (!v[RD_SPACE] && !v[RD_OBJECTS])
				continue;
			if (tr_set_add(out, heaps[i].name, x[k].callsite, v,
			               v[RD_OBJECTS]) < 0) {
				hp_err(subsys, "out of memory");
				err = -ENOMEM;
			}
		}
		free(x);
	}
	state_free_heaps(heaps, (size_t)nh);
	if (err)
		tr_set_free(out);
	else
		tr_set_sort(out);
	return err;
}
