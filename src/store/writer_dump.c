/*
 * The profile writer (writer.c): one dump, in one transaction.  Its
 * stacks are interned and merged per (callsite, heap) in batches (through
 * a worker thread when the dump is big), its rows written
 * (writer_rows.c), and after COMMIT what it wrote is remembered as the
 * base of the next dump's deltas; a failed dump rolls the in-memory state
 * back with it.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layout/region.h"
#include "store/writer_int.h"
#include "util/grow.h"
#include "util/err.h"

static const struct prof_module *sort_mods;

static int cmp_module_start(const void *a, const void *b)
{
	uint64_t x = sort_mods[*(const size_t *)a].start;
	uint64_t y = sort_mods[*(const size_t *)b].start;
	return x < y ? -1 : x > y;
}

static int ctx_init(struct dump_ctx *c, struct profile *p,
                    const struct prof_dump *d)
{
	size_t n = d->nmodules;

	memset(c, 0, sizeof(*c));
	c->p = p;
	c->d = d;
	pairmap_init(&c->pc_frames);
	pairmap_init(&c->merged_idx);
	c->order = malloc((n ? n : 1) * sizeof(*c->order));
	c->map_ids = calloc(n ? n : 1, sizeof(*c->map_ids));
	c->leaf = calloc(d->nstacks ? d->nstacks : 1, sizeof(*c->leaf));
	if (!c->order || !c->map_ids || !c->leaf ||
	    pairmap_reserve(&c->merged_idx, d->nstacks) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		c->order[i] = i;
	sort_mods = d->modules; /* qsort has no context argument in C11 */
	qsort(c->order, n, sizeof(*c->order), cmp_module_start);
	return 0;
}

static void ctx_fini(struct dump_ctx *c)
{
	free(c->order);
	free(c->map_ids);
	free(c->leaf);
	free(c->new_leaf);
	free(c->new_keys);
	free(c->merged);
	for (size_t i = 0; i < c->nheap_bufs; i++)
		free(c->heap_bufs[i]);
	free(c->heap_bufs);
	free(c->heap_ids);
	free(c->touched);
	pairmap_free(&c->pc_frames);
	pairmap_free(&c->merged_idx);
}

/* After COMMIT: remember what was written as the base of the next deltas. */
static int remember_cum(struct proc_state *ps, const struct dump_ctx *c)
{
	if (pairmap_reserve(&ps->prev, ps->prev.len + c->nmerged) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < c->nmerged; i++) {
		const struct merged *m = &c->merged[i];
		int64_t idx = m->cum; /* looked up by wr_merge_stack */
		if (!idx) {
			struct cum *cm = hp_grow(ps->cum, &ps->capcum, ps->ncum,
			                         sizeof(*cm));
			if (!cm)
				return -ENOMEM;
			ps->cum = cm;
			bool added;
			struct pairmap_slot *sl = pairmap_slot(
			        &ps->prev, m->callsite, m->heap_id, &added);
			if (!sl)
				return -ENOMEM;
			ps->cum[ps->ncum++] = (struct cum){0};
			sl->v = idx = (int64_t)ps->ncum;
		}
		/* What the rows add up to now (never less than before). */
		ps->cum[idx - 1] = m->rowed;
	}
	return 0;
}

static int keep_below(int64_t val, void *limit)
{
	return val < *(int64_t *)limit;
}

static bool pm_keep_below(int64_t val, void *limit)
{
	return val < *(int64_t *)limit;
}

/* The dump's transaction failed: forget the rows it had interned. */
static void rollback(struct profile *p)
{
	sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
	p->next = p->saved;
	hmap_retain(&p->mappings, keep_below, &p->next.mapping);
	hmap_retain(&p->frames, keep_below, &p->next.frame);
	pairmap_retain(&p->callsites, pm_keep_below, &p->next.callsite);
}

/*
 * A dump of at least PIPE_MIN_STACKS stacks goes in batches of PIPE_BATCH
 * through a worker thread: while the worker writes one batch's callsites
 * and allocation rows into SQLite, this thread interns the next batch.
 * Interning is hash lookups that mostly miss the cache, writing is
 * SQLite's own work, and the two take about as long: on two cores a dump
 * of a million stacks takes about half the time it would in one thread.
 * Smaller dumps are one batch and take no thread.
 */
#define PIPE_MIN_STACKS 16384
#define PIPE_BATCH      32768

/* Stacks [from, to) of the dump: interned, their callsites written, and
 * with counts their allocation rows too. */
static int write_batch(struct dump_ctx *c, const struct proc_state *ps,
                       size_t from, size_t to, bool counts)
{
	const struct prof_dump *d = c->d;
	int err = wr_intern_stacks(c, ps, from, to);
	if (!err)
		err = wr_write_callsites(c->p);
	if (!counts)
		return err;
	for (size_t i = from; !err && i < to; i++) {
		/* Ahead: the slot a later stack will probe. */
		if (i + 8 < to)
			pairmap_prefetch(&c->merged_idx, c->leaf[i + 8],
			                 d->stacks[i + 8].heap_id);
		err = wr_merge_stack(c, ps, c->leaf[i], &d->stacks[i]);
	}
	return err ? err : wr_emit_allocs(c, ps->upid);
}

/* Every stack of the dump through write_batch, in batches (through the
 * worker when big), and the rows queued for them written. */
static int write_batches(struct dump_ctx *c, const struct proc_state *ps,
                         bool counts)
{
	const struct prof_dump *d = c->d;
	struct profile *p = c->p;
	bool big = d->nstacks >= PIPE_MIN_STACKS;
	size_t batch = big ? PIPE_BATCH : d->nstacks;
	int err = 0;

	/* Small dumps take no thread at all: their jobs run inline. */
	jobq_init(&p->wq, JOBQ_STOP_ON_ERROR, 0);
	if (big)
		jobq_start(&p->wq);
	for (size_t from = 0; !err && from < d->nstacks; from += batch) {
		size_t before = p->callsites.len;
		size_t to =
		        d->nstacks - from > batch ? from + batch : d->nstacks;
		err = write_batch(c, ps, from, to, counts);
		/* After the first batch, room for as many new callsites per
		 * stack in the others: one rebuild of the big map instead of
		 * one per doubling. */
		if (!err && big && from == 0)
			err = pairmap_reserve(
			        &p->callsites,
			        p->callsites.len + (p->callsites.len - before) *
			                                   (d->nstacks - to) /
			                                   (to - from));
	}
	/* The synthetic frames of a dump without stacks, and anything
	 * interned after the last batch, still go through the queue. */
	if (!err)
		err = wr_write_callsites(p);
	int qerr = jobq_stop(&p->wq, NULL);
	return err ? err : qerr;
}

static int write_dump_body(struct dump_ctx *c, struct proc_state *ps)
{
	int err = write_batches(c, ps, true);
	if (!err)
		err = wr_write_stats(c, ps->upid);
	if (!err)
		err = wr_write_dump_row(c, ps);
	if (!err && c->d->nblocks)
		err = wr_write_blocks(c, ps->upid);
	if (!err && ps->traced)
		err = wr_write_trace_stacks(c, ps);
	if (!err)
		err = wr_fix_event_heaps(c, ps);
	return err;
}

/* After COMMIT: the leaf callsites of the stacks this dump interned. */
static int remember_leaves(struct proc_state *ps, const struct dump_ctx *c)
{
	for (size_t i = 0; i < c->nnew_leaf; i++) {
		size_t k = c->new_leaf[i];
		bool added;
		struct pairmap_slot *sl = pairmap_slot(
		        &ps->stack_leaf, i64(c->d->stacks[k].key), 0, &added);
		if (!sl)
			return -ENOMEM;
		sl->v = c->leaf[k];
	}
	return 0;
}

/* The highest allocation row id, or -1 (error kept). */
static int64_t alloc_max_id(struct profile *p)
{
	sqlite3_stmt *st = p->st[ST_ALLOC_MAX_ID];
	int rc = sqlite3_step(st);
	int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
	sqlite3_reset(st);
	if (id < 0)
		wr_sql_err(p, rc, "reading the last row id");
	return id;
}

/*
 * A higher peak of process ps: the peak dump before it folded into the
 * dump written after that one (ps's peak_* say which rows): its rows take
 * that dump's time, its dump row goes.  Every state the model computes at
 * the other dumps (the rows up to a dump's time) is the same after it;
 * the file keeps one peak dump per process, the highest.
 */
static int fold_peak(struct profile *p, struct proc_state *ps)
{
	sqlite3_stmt *st = p->st[ST_FOLD_ROWS];
	sqlite3_bind_int64(st, 1, i64(ps->peak_next_ts));
	sqlite3_bind_int64(st, 2, ps->peak_lo);
	sqlite3_bind_int64(st, 3, ps->peak_hi);
	sqlite3_bind_int64(st, 4, ps->upid);
	int err = step(p, ST_FOLD_ROWS, "folding a lower peak");
	if (!err) {
		st = p->st[ST_FOLD_DUMP];
		sqlite3_bind_int64(st, 1, ps->peak_dump_id);
		err = step(p, ST_FOLD_DUMP, "folding a lower peak");
	}
	if (!err) {
		st = p->st[ST_FOLD_MEMORY];
		sqlite3_bind_int64(st, 1, ps->upid);
		sqlite3_bind_int64(st, 2, i64(ps->peak_ts));
		err = step(p, ST_FOLD_MEMORY, "folding a lower peak");
	}
	return err;
}

static int write_dump(struct profile *p, int64_t upid,
                      const struct prof_dump *d)
{
	struct proc_state *ps = wr_proc_find(p, upid);
	struct dump_ctx c;

	if (!ps) {
		/* After a write error, the process row that failed (said at
		 * the end, with what the file kept). */
		if (!p->status.err)
			hp_log(SUBSYS "dump for unknown process %" PRId64 "\n",
			       upid);
		return -EINVAL;
	}
	/* write_ms: from the collector's first read of the region (or our
	 * start) to this dump's rows committed and remembered. */
	uint64_t t0 =
	        d->started_ns ? d->started_ns : hp_clock_ns(CLOCK_MONOTONIC);
	int err = ctx_init(&c, p, d);
	p->nnew_cs = 0;
	if (!err)
		err = exec(p, "BEGIN", "starting dump");
	if (err) {
		if (err == -ENOMEM)
			hp_log(SUBSYS "out of memory\n");
		ctx_fini(&c);
		return err;
	}
	p->saved = p->next;
	bool peak = d->reason && !strcmp(d->reason, "peak");
	int64_t lo = peak ? alloc_max_id(p) : 0, hi = 0;
	if (lo < 0)
		err = -EIO;
	if (!err)
		err = write_dump_body(&c, ps);
	if (!err && peak)
		hi = alloc_max_id(p);
	if (hi < 0)
		err = -EIO;
	bool folded = !err && peak && ps->peak_dump_id && ps->peak_next_ts;
	if (folded)
		err = fold_peak(p, ps);
	if (!err)
		err = wr_commit(p, "committing dump");
	if (err) {
		if (err == -ENOMEM)
			hp_log(SUBSYS "out of memory\n");
		rollback(p);
	} else {
		if (peak) {
			/* A folded dump is a dump no more: the count of
			 * those tried stays the file's. */
			if (folded)
				p->dumps_tried--;
			ps->peak_dump_id = c.dump_id;
			ps->peak_lo = lo + 1;
			ps->peak_hi = hi;
			ps->peak_ts = d->ts_ns;
			ps->peak_next_ts = 0;
		} else if (ps->peak_dump_id && !ps->peak_next_ts) {
			ps->peak_next_ts = d->ts_ns;
		}
		err = remember_cum(ps, &c);
		if (!err)
			err = wr_remember_trace(ps, &c);
		if (!err)
			err = remember_leaves(ps, &c);
		if (err)
			hp_log(SUBSYS "out of memory\n");
	}
	/* The dump in the file itself, then its write_ms, which counts that
	 * copy: the row reaches the file with the next dump's (or at
	 * close), not worth a checkpoint of its own (two fsyncs). */
	if (!err)
		err = wr_fold_wal(p, "copying the dump into the file");
	if (!err) {
		sqlite3_stmt *st = p->st[ST_DUMP_TIME];
		sqlite3_bind_double(
		        st, 1,
		        (double)(hp_clock_ns(CLOCK_MONOTONIC) - t0) / 1e6);
		sqlite3_bind_int64(st, 2, c.dump_id);
		err = step(p, ST_DUMP_TIME, "writing dump time");
	}
	ctx_fini(&c);
	return err;
}

/* A dump, counted: the end of the session says how many the file kept. */
int profile_write_dump(struct profile *p, int64_t upid,
                       const struct prof_dump *d)
{
	int64_t n = ++p->dumps_tried;
	/* The process's events so far go into the file first: a dump ends
	 * a chunk, so that the file holds the events before each dump. */
	struct proc_state *ps = wr_proc_find(p, upid);
	int ferr = ps ? wr_flush_events(p, ps) : 0;
	if (ferr)
		wr_err(p, ferr, "writing events");
	int err = write_dump(p, upid, d);
	if (err) {
		if (!p->first_failed)
			p->first_failed = n;
		wr_err(p, err, "writing a dump");
	}
	return err;
}

/*
 * The stacks of d that no dump of upid wrote yet, interned ahead of the
 * dump that needs them (frames named, callsites written), in a
 * transaction of their own and with no dump row: a collector does this
 * while the program runs, so the dump at its exit finds its stacks
 * known.  Only d's stacks and modules are read.
 */
int profile_intern_stacks(struct profile *p, int64_t upid,
                          const struct prof_dump *d)
{
	struct proc_state *ps = wr_proc_find(p, upid);
	struct dump_ctx c;

	if (!ps)
		return -EINVAL;
	int err = ctx_init(&c, p, d);
	p->nnew_cs = 0;
	if (!err)
		err = exec(p, "BEGIN", "interning stacks");
	if (err) {
		ctx_fini(&c);
		return err;
	}
	p->saved = p->next;
	err = write_batches(&c, ps, false);
	if (!err)
		err = wr_commit(p, "interning stacks");
	if (err)
		rollback(p);
	else
		err = remember_leaves(ps, &c);
	if (err == -ENOMEM)
		hp_log(SUBSYS "out of memory\n");
	ctx_fini(&c);
	return err;
}
