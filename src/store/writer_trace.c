/*
 * The profile writer (writer.c): the event trace (docs/TRACE.md).  The
 * events of a traced process in compressed chunks (heapprof_event_chunk,
 * evchunk.h; heapprof_event is the view of them as rows), its trace
 * summary (heapprof_trace), and per dump the stack keys its events name
 * (heapprof_trace_stack) and the heap names they carry ids of
 * (heapprof_event_heap).
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/writer_int.h"
#include "util/grow.h"
#include "util/err.h"

/* heapprof_trace_stack: the stack keys of a traced process, each mapped
 * once (a key's stack never changes within a process row). */
int wr_write_trace_stacks(struct dump_ctx *c, const struct proc_state *ps)
{
	struct profile *p = c->p;
	const struct prof_dump *d = c->d;
	struct trace_stack_row *rows = NULL;
	int err = 0;

	for (size_t i = 0; i < d->nstacks; i++) {
		uint64_t key = d->stacks[i].key;
		if (pairmap_get(&ps->tstacks, i64(key), 0))
			continue;
		if (!c->new_keys) {
			c->new_keys = malloc(d->nstacks * sizeof(*c->new_keys));
			rows = malloc(d->nstacks * sizeof(*rows));
			if (!c->new_keys || !rows) {
				free(rows);
				return -ENOMEM;
			}
		}
		/* One call per dump_ctx: new_keys is NULL on entry, so rows
		 * is allocated with it (the analyzer assumes otherwise). */
		// NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
		rows[c->nnew_keys] =
		        (struct trace_stack_row){i64(key), c->leaf[i]};
		c->new_keys[c->nnew_keys++] = key;
	}
	if (c->nnew_keys) {
		p->bulk[BK_TRACE_STACK].rows = rows;
		p->bulk[BK_TRACE_STACK].nrows = c->nnew_keys;
		sqlite3_bind_int64(p->st[ST_TRACE_STACK], 1, ps->upid);
		err = step(p, ST_TRACE_STACK, "writing trace stacks");
		p->bulk[BK_TRACE_STACK].nrows = 0;
	}
	free(rows);
	return err;
}

/*
 * Heap names for the events: the dump names its heaps; events written
 * before with a stand-in name for a heap it names now get the real one
 * (their name in heapprof_event_heap; in memory once committed,
 * wr_remember_trace).
 */
int wr_fix_event_heaps(struct dump_ctx *c, struct proc_state *ps)
{
	const struct prof_dump *d = c->d;
	int err = 0;

	if (!ps->heap_names) {
		ps->heap_names = calloc(HP_MAX_HEAPS, sizeof(*ps->heap_names));
		if (!ps->heap_names)
			return -ENOMEM;
	}
	for (size_t h = 0; !err && h < d->nheaps && h < HP_MAX_HEAPS; h++) {
		const char *name = d->heaps[h].name;
		if (!name || !name[0])
			continue;
		snprintf(ps->heap_names[h], HP_HEAP_NAME_MAX, "%s", name);
		if (!(ps->heap_guessed & (1ull << h)))
			continue;
		char guess[32];
		snprintf(guess, sizeof(guess), "heap%zu", h);
		sqlite3_stmt *st = c->p->st[ST_EVENT_HEAP];
		sqlite3_bind_text(st, 1, ps->heap_names[h], -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, ps->upid);
		sqlite3_bind_text(st, 3, guess, -1, SQLITE_STATIC);
		err = step(c->p, ST_EVENT_HEAP, "naming event heaps");
		c->heaps_fixed |= 1ull << h;
	}
	return err;
}

/* After COMMIT: the keys this dump mapped, the heap names it fixed. */
int wr_remember_trace(struct proc_state *ps, const struct dump_ctx *c)
{
	ps->heap_guessed &= ~c->heaps_fixed;
	for (size_t h = 0; c->heaps_fixed && h < HP_MAX_HEAPS; h++) {
		if (!(c->heaps_fixed & (1ull << h)))
			continue;
		char guess[32];
		snprintf(guess, sizeof(guess), "heap%zu", h);
		for (size_t i = 0; i < ps->nev_heaps; i++) {
			if (strcmp(ps->ev_heaps[i], guess))
				continue;
			char *real = strdup(ps->heap_names[h]);
			if (!real)
				return -ENOMEM;
			free(ps->ev_heaps[i]);
			ps->ev_heaps[i] = real;
		}
	}
	for (size_t i = 0; i < c->nnew_keys; i++) {
		bool added;
		struct pairmap_slot *sl = pairmap_slot(
		        &ps->tstacks, i64(c->new_keys[i]), 0, &added);
		if (!sl)
			return -ENOMEM;
		sl->v = 1;
	}
	return 0;
}

/* The name of heap id for an event of ps: the one its dumps gave, else a
 * stand-in (remembered, so the dump that names it replaces it). */
static const char *event_heap(struct proc_state *ps, uint32_t id, char *buf,
                              size_t len)
{
	if (id < HP_MAX_HEAPS && ps->heap_names && ps->heap_names[id][0])
		return ps->heap_names[id];
	if (id == 0)
		return "libc.malloc";
	snprintf(buf, len, "heap%" PRIu32, id);
	if (id < HP_MAX_HEAPS)
		ps->heap_guessed |= 1ull << id;
	return buf;
}

/* The id of heap name `name` in ps's heapprof_event_heap (added if new);
 * -ENOMEM. */
static int64_t event_heap_id(struct proc_state *ps, const char *name)
{
	for (size_t i = 0; i < ps->nev_heaps; i++)
		if (!strcmp(ps->ev_heaps[i], name))
			return (int64_t)i;
	char **a = hp_grow(ps->ev_heaps, &ps->capev_heaps, ps->nev_heaps,
	                   sizeof(*a));
	if (!a)
		return -ENOMEM;
	ps->ev_heaps = a;
	if (!(a[ps->nev_heaps] = strdup(name)))
		return -ENOMEM;
	return (int64_t)ps->nev_heaps++;
}

void wr_free_trace(struct proc_state *ps)
{
	free(ps->pend);
	for (size_t i = 0; i < ps->nev_heaps; i++)
		free(ps->ev_heaps[i]);
	free(ps->ev_heaps);
	ps->pend = NULL;
	ps->ev_heaps = NULL;
	ps->npend = ps->nev_heaps = ps->capev_heaps = 0;
	ps->ev_heaps_written = 0;
}

/* zstd's level for the chunks: 1 packs the columns almost as small as 3
 * (they are small numbers already) at twice the speed. */
#define CHUNK_LEVEL 1

/*
 * The events of ps waiting for a chunk, written as one chunk (with the
 * heap names they bring) in a transaction of its own; called outside a
 * transaction.  They are dropped from memory either way: 0, or the error
 * (not kept; the caller keeps it).
 */
int wr_flush_events(struct profile *p, struct proc_state *ps)
{
	size_t n = ps->npend;
	const void *blob;
	size_t len;
	int err = 0;

	if (!n)
		return 0;
	ps->npend = 0;
	if (!p->enc && !(p->enc = evc_enc_new()))
		return -ENOMEM;
	int64_t allocs = 0, lo = ps->pend[0].ts;
	int64_t hi = lo;
	for (size_t i = 0; i < n; i++) {
		const struct evc_event *e = &ps->pend[i];
		allocs += !e->free;
		if (e->ts < lo)
			lo = e->ts;
		if (e->ts > hi)
			hi = e->ts;
	}
	err = evc_encode(p->enc, ps->pend, n, CHUNK_LEVEL, &blob, &len);
	if (!err)
		err = exec(p, "BEGIN", "writing events");
	if (err)
		return err;
	for (size_t i = ps->ev_heaps_written; !err && i < ps->nev_heaps; i++) {
		sqlite3_stmt *st = p->st[ST_EVENT_HEAP_NEW];
		sqlite3_bind_int64(st, 1, ps->upid);
		sqlite3_bind_int64(st, 2, (int64_t)i);
		sqlite3_bind_text(st, 3, ps->ev_heaps[i], -1, SQLITE_STATIC);
		err = step(p, ST_EVENT_HEAP_NEW, "writing events");
	}
	if (!err) {
		sqlite3_stmt *st = p->st[ST_EVENT_CHUNK];
		sqlite3_bind_int64(st, 1, ps->upid);
		sqlite3_bind_int64(st, 2, (int64_t)n);
		sqlite3_bind_int64(st, 3, allocs);
		sqlite3_bind_int64(st, 4, lo);
		sqlite3_bind_int64(st, 5, hi);
		sqlite3_bind_blob(st, 6, blob, (int)len, SQLITE_STATIC);
		err = step(p, ST_EVENT_CHUNK, "writing events");
	}
	if (!err)
		err = wr_commit(p, "writing events");
	if (err)
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
	else
		ps->ev_heaps_written = ps->nev_heaps;
	return err;
}

/* Every process's events waiting for a chunk; the first error kept. */
int wr_flush_all_events(struct profile *p)
{
	int first = 0;
	for (size_t i = 0; i < p->nprocs; i++) {
		int err = wr_flush_events(p, &p->procs[i]);
		if (err) {
			wr_err(p, err, "writing events");
			first = first ? first : err;
		}
	}
	return first;
}

/*
 * Events wait in memory until a chunk is full (WR_CHUNK_EVENTS), the
 * process's next dump or its end, or the end of the file: a chunk of
 * tens of thousands packs them ten times smaller than a few hundred.
 * The heap name of each event's id is found once per id and call.
 */
int profile_write_events(struct profile *p, int64_t upid,
                         const struct prof_event *ev, size_t n)
{
	struct proc_state *ps = wr_proc_find(p, upid);
	p->events_tried += (int64_t)n;
	if (!ps) {
		if (!p->status.err)
			hp_log(SUBSYS "events for unknown process %" PRId64
			              "\n",
			       upid);
		return wr_err(p, -EINVAL, "writing events");
	}
	if (!n)
		return 0;
	if (!ps->pend &&
	    !(ps->pend = malloc(WR_CHUNK_EVENTS * sizeof(*ps->pend)))) {
		hp_log(SUBSYS "out of memory\n");
		return wr_err(p, -ENOMEM, "writing events");
	}
	/* Heap name ids by heap id below HP_MAX_HEAPS; -1: not yet. */
	int64_t id_of[HP_MAX_HEAPS];
	for (size_t h = 0; h < HP_MAX_HEAPS; h++)
		id_of[h] = -1;
	int err = 0;
	for (size_t i = 0; !err && i < n; i++) {
		const struct prof_event *e = &ev[i];
		bool is_free = e->kind == HP_EV_FREE;
		uint32_t h = e->heap_id;
		char buf[32];
		int64_t id;
		if (h < HP_MAX_HEAPS && id_of[h] >= 0) {
			id = id_of[h];
		} else {
			id = event_heap_id(ps,
			                   event_heap(ps, h, buf, sizeof(buf)));
			if (id < 0) {
				err = -ENOMEM;
				break;
			}
			if (h < HP_MAX_HEAPS)
				id_of[h] = id;
		}
		ps->pend[ps->npend++] = (struct evc_event){
		        .ts = i64(e->ts_ns),
		        .address = i64(e->address),
		        .size = i64(e->size),
		        .charged = i64(e->charged),
		        .stack_key = i64(e->stack_key),
		        /* An allocation's time is its own ts; a free whose
		         * block's time is unknown keeps NULL (0). */
		        .alloc_ts = is_free ? i64(e->alloc_ts_ns) : 0,
		        .tid = e->tid,
		        .heap = (uint32_t)id,
		        .free = is_free,
		};
		if (ps->npend == WR_CHUNK_EVENTS)
			err = wr_flush_events(p, ps);
	}
	if (err == -ENOMEM)
		hp_log(SUBSYS "out of memory\n");
	return err ? wr_err(p, err, "writing events") : 0;
}

int profile_set_trace(struct profile *p, int64_t upid,
                      const struct prof_trace *t)
{
	struct proc_state *ps = wr_proc_find(p, upid);
	if (!ps) {
		if (!p->status.err)
			hp_log(SUBSYS "trace of unknown process %" PRId64 "\n",
			       upid);
		return wr_err(p, -EINVAL, "writing the trace");
	}
	/* What it counts as written is in the file. */
	int ferr = wr_flush_events(p, ps);
	if (ferr)
		wr_err(p, ferr, "writing events");
	sqlite3_stmt *st = p->st[ST_TRACE];
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, t->mode ? t->mode : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, i64(t->buffer_bytes));
	sqlite3_bind_int64(st, 4, i64(t->events));
	sqlite3_bind_int64(st, 5, i64(t->dropped_allocs));
	sqlite3_bind_int64(st, 6, i64(t->dropped_frees));
	sqlite3_bind_int64(st, 7, i64(t->dropped_alloc_bytes));
	sqlite3_bind_int64(st, 8, i64(t->dropped_free_bytes));
	sqlite3_bind_int64(st, 9, i64(t->overwritten));
	sqlite3_bind_int64(st, 10, i64(t->incomplete));
	if (t->full_ts_ns)
		sqlite3_bind_int64(st, 11, i64(t->full_ts_ns));
	sqlite3_bind_int64(st, 12, i64(t->waits));
	sqlite3_bind_int64(st, 13, i64(t->wait_ns));
	int err = step(p, ST_TRACE, "writing the trace summary");
	/* From now on its dumps map stack keys for its events. */
	if (!err)
		ps->traced = true;
	return err;
}
