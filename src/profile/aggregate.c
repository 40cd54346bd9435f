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

#include "profile/aggregate.h"
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

/* ---- by function, self and inclusive ------------------------------------ */

void ag_funcs_free(struct ag_funcs *g)
{
	hmap_free(&g->idx);
	free(g->fns);
	free(g->frame_fn);
	free(g->sym_fn);
}

/*
 * The function of frame f (or, when the frame was symbolized offline, of
 * its symbol sym: one of the functions inlined at that address), added to
 * g if new; NULL if out of memory.
 */
static struct ag_fn *fn_get(struct ag_funcs *g, const struct rd_stacks *s,
                            int64_t frame_id, const struct rd_symbol *sym)
{
	const struct rd_frame *f = rd_frame_get(s, frame_id);
	const struct rd_mapping *m = f ? rd_mapping_get(s, f->mapping) : NULL;
	const char *module = m ? m->name : "";
	const char *name = sym && sym->name ? sym->name : f ? f->name : NULL;
	char key[1024];
	int klen;

	/* Named frames group by (name, module); unnamed ones by frame. */
	if (name)
		klen = snprintf(key, sizeof(key), "N%s%c%s", name, 0, module);
	else
		klen = snprintf(key, sizeof(key), "F%" PRId64, frame_id);
	if (klen < 0 || (size_t)klen >= sizeof(key))
		klen = sizeof(key) - 1;
	int64_t *idx = hmap_find(&g->idx, key, (size_t)klen);
	if (idx)
		return &g->fns[*idx];
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 256;
		struct ag_fn *a = realloc(g->fns, cap * sizeof(*a));
		if (!a)
			return NULL;
		g->fns = a;
		g->cap = cap;
	}
	if (hmap_put(&g->idx, key, (size_t)klen, (int64_t)g->n) < 0)
		return NULL;
	struct ag_fn *fn = &g->fns[g->n++];
	memset(fn, 0, sizeof(*fn));
	fn->name = name;
	fn->module = module;
	fn->rel_pc = f ? f->rel_pc : 0;
	return fn;
}

/* fn_get through the memo of frame f (NULL: a dangling id) and sym. */
static struct ag_fn *fn_get_memo(struct ag_funcs *g, const struct rd_stacks *s,
                                 const struct rd_frame *f, int64_t frame_id,
                                 const struct rd_symbol *sym)
{
	size_t *slot = NULL;
	if (sym)
		slot = &g->sym_fn[sym - s->symbols];
	else if (f)
		slot = &g->frame_fn[f - s->frames];
	if (slot && *slot)
		return &g->fns[*slot - 1];
	struct ag_fn *fn = fn_get(g, s, frame_id, sym);
	if (fn && slot)
		*slot = (size_t)(fn - g->fns) + 1;
	return fn;
}

/* Charge one stack's value to its leaf (self) and every function on it. */
static int add_stack(struct ag_funcs *g, const struct rd_stacks *s,
                     const struct rd_sample *l, int64_t value, int64_t value2,
                     size_t stamp)
{
	const struct rd_callsite *c = rd_callsite_get(s, l->callsite);

	for (int depth = 0; c && depth < RD_MAX_DEPTH; depth++) {
		size_t nsym;
		const struct rd_frame *f = rd_frame_get(s, c->frame);
		const struct rd_symbol *syms = rd_frame_symbols(s, f, &nsym);
		/* Each function inlined at this address, innermost first. */
		for (size_t k = 0; k < (nsym ? nsym : 1); k++) {
			const struct rd_symbol *sym = nsym ? &syms[k] : NULL;
			struct ag_fn *fn = fn_get_memo(g, s, f, c->frame, sym);
			if (!fn)
				return -ENOMEM;
			if (depth == 0 && k == 0) {
				fn->self += value;
				fn->self2 += value2;
				fn->nstacks++;
				if (!fn->best_callsite ||
				    value > fn->best_value) {
					fn->best_callsite = l->callsite;
					fn->best_value = value;
				}
			}
			if (sym && sym->source_file &&
			    (!fn->file || value > fn->loc_value)) {
				fn->file = sym->source_file;
				fn->line = sym->line;
				fn->loc_value = value;
			}
			/* Recursion: count a function once per stack. */
			if (fn->stamp != stamp) {
				fn->stamp = stamp;
				fn->incl += value;
			}
		}
		c = c->parent ? rd_callsite_get(s, c->parent) : NULL;
	}
	return 0;
}

int ag_funcs_build(struct ag_funcs *g, const struct rd_stacks *s,
                   const struct rd_sample *leaves, size_t n, enum rd_view v,
                   int v2)
{
	memset(g, 0, sizeof(*g));
	hmap_init(&g->idx);
	g->frame_fn = calloc(s->nframes + 1, sizeof(*g->frame_fn));
	g->sym_fn = calloc(s->nsymbols + 1, sizeof(*g->sym_fn));
	if (!g->frame_fn || !g->sym_fn)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (leaves[i].v[v] == 0)
			continue;
		if (add_stack(g, s, &leaves[i], leaves[i].v[v],
		              v2 >= 0 ? leaves[i].v[v2] : 0, i + 1) < 0)
			return -ENOMEM;
	}
	return 0;
}

size_t *ag_funcs_order(const struct ag_funcs *g, int self, size_t *n)
{
	int64_t *key = malloc((g->n ? g->n : 1) * sizeof(*key));

	*n = 0;
	if (!key)
		return NULL;
	for (size_t i = 0; i < g->n; i++)
		key[i] = self ? g->fns[i].self : g->fns[i].incl;
	size_t *order = ag_rank(key, g->n, AG_NONZERO, n);
	free(key);
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

/* Append the identity of one frame: module, function (or address). */
static int key_frame(struct buf *b, const struct rd_stacks *s, int64_t frame)
{
	const struct rd_frame *f = rd_frame_get(s, frame);
	const struct rd_mapping *m = f ? rd_mapping_get(s, f->mapping) : NULL;
	const char *mod = ag_basename(m ? m->name : NULL);
	char pc[32];

	if (!f || !f->name)
		snprintf(pc, sizeof(pc), "0x%" PRIx64,
		         f ? (uint64_t)f->rel_pc : 0);
	const char *fn = f && f->name ? f->name : pc;
	/* Separators that cannot occur in names or paths we print. */
	if (buf_add(b, mod, strlen(mod)) < 0 || buf_add(b, "\x1f", 1) < 0 ||
	    buf_add(b, fn, strlen(fn)) < 0 || buf_add(b, "\x1e", 1) < 0)
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
	} else {
		sd->db = reader_open(sd->file, subsys);
		if (!sd->db)
			return -1;
		sd->owns = 1;
		sd->s = calloc(1, sizeof(*sd->s));
		if (!sd->s) {
			hp_err(subsys, "out of memory");
			return -1;
		}
		if (reader_load_stacks(sd->db, subsys, sd->s) < 0)
			return -1;
	}
	if (reader_load_processes(sd->db, subsys, &sd->procs, &sd->nprocs) < 0)
		return -1;
	return 0;
}

int ag_side_has_heap(const struct ag_side *sd, const char *heap,
                     const char *subsys)
{
	char **h = NULL;
	size_t n = 0;
	int found = 0;

	if (reader_load_heaps(sd->db, subsys, sd->proc->upid, &h, &n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		found |= !strcmp(h[i], heap);
	reader_free_heaps(h, n);
	return found;
}

int ag_side_load(struct ag_side *sd, const char *heap, const char *subsys)
{
	if (reader_load_samples(sd->db, subsys, sd->proc->upid, heap,
	                        sd->dumps[sd->dump_index - 1].ts, &sd->samples,
	                        &sd->nsamples) < 0)
		return -1;
	ag_totals(sd->samples, sd->nsamples, sd->total);
	return 0;
}

void ag_side_free(struct ag_side *sd)
{
	if (sd->owns) {
		if (sd->s)
			reader_free_stacks(sd->s);
		free(sd->s);
		sqlite3_close(sd->db);
	}
	reader_free_processes(sd->procs, sd->nprocs);
	reader_free_dumps(sd->dumps, sd->ndumps);
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

/* Stacks (full chain) and functions (leaf frame) of one side. */
int ag_diff_add(struct ag_diff *d, int k, const struct rd_stacks *s,
                const struct rd_sample *x, size_t n)
{
	struct buf b = {0};
	int err = 0;

	for (size_t i = 0; !err && i < n; i++) {
		const struct rd_callsite *c = rd_callsite_get(s, x[i].callsite);
		size_t leaf_len = 0;
		b.n = 0;
		err = buf_add(&b, "", 0);
		for (int depth = 0; !err && c && depth < RD_MAX_DEPTH;
		     depth++) {
			err = key_frame(&b, s, c->frame);
			if (depth == 0)
				leaf_len = b.n;
			c = c->parent ? rd_callsite_get(s, c->parent) : NULL;
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
