/*
 * One aggregation of a dump's stacks (see aggregate.h): by function, self
 * and inclusive, for `heapprof report`; by symbolic stack and leaf function
 * across two dumps for `heapprof diff`; and their top N.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/state.h"
#include "model/tree.h"
#include "analysis/aggregate.h"
#include "util/err.h"

const char *ag_basename(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	if (!path || !path[0])
		return "?";
	return s && s[1] ? s + 1 : path;
}

void ag_totals(const struct rd_sample *x, size_t n, int64_t tot[RD_NVIEWS])
{
	for (size_t i = 0; i < n; i++)
		for (int v = 0; v < RD_NVIEWS; v++)
			tot[v] += x[i].v[v];
}

void ag_window_bounds(const struct rd_process *p, const struct tr_info *t,
                      const struct ag_window *w, int64_t *begin, int64_t *end,
                      int64_t *from, int64_t *to)
{
	int64_t e = t->last_ts + 1;
	int64_t b = t->first_ts && t->first_ts < p->start_ts ? t->first_ts
	                                                     : p->start_ts;

	if (p->has_end && p->end_ts > e)
		e = p->end_ts;
	*begin = b;
	*end = e;
	*from = w->have_from ? p->start_ts + w->from_ns : b;
	*to = w->have_to ? p->start_ts + w->to_ns : e;
	if (w->have_to && *to > e)
		*to = e;
	if (*to < *from)
		*to = *from;
}

/* ---- top N -------------------------------------------------------------- */

struct rank {
	int64_t key; /* what is compared: the key, or minus it (AG_NEGATIVE) */
	size_t i;
};

static int cmp_rank(const void *a, const void *b)
{
	const struct rank *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return x->i < y->i ? -1 : 1;
}

size_t *ag_rank(const int64_t *key, size_t n, enum ag_rank which, size_t *count)
{
	struct rank *r = malloc((n ? n : 1) * sizeof(*r));
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	size_t m = 0;

	*count = 0;
	if (!r || !order) {
		free(r);
		free(order);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t k = key[i];
		if (which == AG_NONZERO    ? k != 0
		    : which == AG_POSITIVE ? k > 0
		                           : k < 0)
			r[m++] =
			        (struct rank){which == AG_NEGATIVE ? -k : k, i};
	}
	qsort(r, m, sizeof(*r), cmp_rank);
	for (size_t i = 0; i < m; i++)
		order[i] = r[i].i;
	free(r);
	*count = m;
	return order;
}

/* ---- a diff of two ------------------------------------------------------ */

struct buf {
	char *p;
	size_t n, cap;
};

static int buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return 0;
}

/*
 * Append the identity of one function of the heap model's tree across
 * files: its module's and source file's names (not paths: two builds of a
 * program may live in two places) and its name ("module+0xrelpc" when it
 * has none).
 */
static int key_func(struct buf *b, const struct tree *g, int32_t f)
{
	const char *mod = ag_basename(tree_func_module(g, f));
	const char *file = tree_func_file(g, f);
	const char *fn = g->funcs[f].name;

	/* Separators that cannot occur in names or paths we print. */
	if (buf_add(b, mod, strlen(mod)) < 0 || buf_add(b, "\x1f", 1) < 0 ||
	    (file &&
	     buf_add(b, ag_basename(file), strlen(ag_basename(file))) < 0) ||
	    buf_add(b, "\x1f", 1) < 0 || buf_add(b, fn, strlen(fn)) < 0 ||
	    buf_add(b, "\x1e", 1) < 0)
		return -ENOMEM;
	return 0;
}

static int table_add(struct ag_table *t, const char *key, size_t klen, int side,
                     const struct rd_sample *x)
{
	int64_t *idx = hmap_find(&t->idx, key, klen);
	struct ag_entry *e;

	if (idx) {
		e = &t->e[*idx];
	} else {
		if (t->n == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 256;
			struct ag_entry *a = realloc(t->e, cap * sizeof(*a));
			if (!a)
				return -ENOMEM;
			t->e = a;
			t->cap = cap;
		}
		if (hmap_put(&t->idx, key, klen, (int64_t)t->n) < 0)
			return -ENOMEM;
		e = &t->e[t->n++];
		memset(e, 0, sizeof(*e));
		e->rep_side = side;
		e->rep_callsite = x->callsite;
	}
	/* Print B's stack when there is one. */
	if (side == 1 && e->rep_side == 0) {
		e->rep_side = 1;
		e->rep_callsite = x->callsite;
	}
	for (int v = 0; v < RD_NVIEWS; v++)
		e->v[side][v] += x->v[v];
	return 0;
}

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int ag_side_open(struct ag_side *sd, const struct ag_side *other,
                 const char *subsys)
{
	if (other && same_file(other->file, sd->file)) {
		sd->db = other->db;
		sd->s = other->s;
		sd->tree = other->tree;
	} else {
		sd->db = rd_open(sd->file, subsys);
		if (!sd->db)
			return -1;
		sd->owns = 1;
		sd->s = calloc(1, sizeof(*sd->s));
		if (!sd->s) {
			hp_err(subsys, "out of memory");
			return -1;
		}
		if (rd_load_stacks(sd->db, subsys, sd->s) < 0)
			return -1;
		sd->tree = malloc(sizeof(*sd->tree));
		if (!sd->tree) {
			hp_err(subsys, "out of memory");
			return -1;
		}
		if (tree_init(sd->tree, sd->s) < 0) {
			hp_err(subsys, "out of memory");
			return -1;
		}
	}
	if (rd_load_processes(sd->db, subsys, &sd->procs, &sd->nprocs) < 0)
		return -1;
	return 0;
}

int ag_side_has_heap(const struct ag_side *sd, const char *heap,
                     const char *subsys)
{
	char **h = NULL;
	size_t n = 0;
	int found = 0;

	if (rd_load_heaps(sd->db, subsys, sd->proc->upid, &h, &n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		found |= !strcmp(h[i], heap);
	rd_free_heaps(h, n);
	return found;
}

int ag_side_load(struct ag_side *sd, const char *heap, const char *subsys)
{
	if (state_at_dump(sd->db, subsys, sd->proc->upid, heap,
	                  sd->dumps[sd->dump_index - 1].ts, &sd->samples,
	                  &sd->nsamples) < 0)
		return -1;
	ag_totals(sd->samples, sd->nsamples, sd->total);
	return 0;
}

void ag_side_free(struct ag_side *sd)
{
	if (sd->owns) {
		if (sd->tree)
			tree_free(sd->tree);
		free(sd->tree);
		if (sd->s)
			rd_free_stacks(sd->s);
		free(sd->s);
		sqlite3_close(sd->db);
	}
	rd_free_processes(sd->procs, sd->nprocs);
	rd_free_dumps(sd->dumps, sd->ndumps);
	free(sd->samples);
}

void ag_diff_init(struct ag_diff *d)
{
	memset(d, 0, sizeof(*d));
	hmap_init(&d->stacks.idx);
	hmap_init(&d->fns.idx);
}

void ag_diff_free(struct ag_diff *d)
{
	hmap_free(&d->stacks.idx);
	free(d->stacks.e);
	hmap_free(&d->fns.idx);
	free(d->fns.e);
}

/* Stacks (the whole path of nodes) and functions (the leaf node's) of one
 * side. */
int ag_diff_add(struct ag_diff *d, int k, struct tree *g,
                const struct rd_sample *x, size_t n)
{
	struct buf b = {0};
	int err = 0;

	for (size_t i = 0; !err && i < n; i++) {
		int32_t node = tree_leaf_node(g, x[i].callsite);
		size_t leaf_len = 0;
		b.n = 0;
		err = node < 0 ? -ENOMEM : buf_add(&b, "", 0);
		for (; !err && node >= 0; node = g->top.parent.v[node]) {
			err = key_func(&b, g, g->top.func.v[node]);
			if (!leaf_len)
				leaf_len = b.n;
		}
		if (!err)
			err = table_add(&d->stacks, b.p, b.n, k, &x[i]);
		if (!err)
			err = table_add(&d->fns, b.p, leaf_len, k, &x[i]);
	}
	free(b.p);
	return err;
}

size_t *ag_diff_order(const struct ag_table *t, enum rd_view v, int grow,
                      size_t *n)
{
	int64_t *key = malloc((t->n ? t->n : 1) * sizeof(*key));

	*n = 0;
	if (!key)
		return NULL;
	for (size_t i = 0; i < t->n; i++)
		key[i] = ag_delta(&t->e[i], v);
	/* Largest absolute change first; ties by first seen. */
	size_t *order = ag_rank(key, t->n, grow ? AG_POSITIVE : AG_NEGATIVE, n);
	free(key);
	return order;
}
