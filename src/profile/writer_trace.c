/*
 * The profile writer (writer.c): the event trace (docs/TRACE.md).  The
 * events of a traced process (heapprof_event), its trace summary
 * (heapprof_trace), and per dump the stack keys its events name
 * (heapprof_trace_stack) and the heap names they carry ids of.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "profile/writer_int.h"

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
 * before with a stand-in name for a heap it names now get the real one.
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

/*
 * One transaction and one bulk insert for the batch: the trace can bring
 * a million rows a second (-i 1).  The heap names of the events' ids are
 * found once per id (an array), kept for the statement.
 */
int profile_write_events(struct profile *p, int64_t upid,
                         const struct prof_event *ev, size_t n)
{
	struct proc_state *ps = wr_proc_find(p, upid);
	p->events_tried += (int64_t)n;
	if (!ps) {
		if (!p->status.err)
			fprintf(stderr,
			        SUBSYS "events for unknown process %" PRId64
			               "\n",
			        upid);
		return wr_err(p, -EINVAL, "writing events");
	}
	if (!n)
		return 0;
	struct event_row *rows = malloc(n * sizeof(*rows));
	/* Stand-in names: by id below HP_MAX_HEAPS, else (a client that
	 * wrote a bad id) by row. */
	char names[HP_MAX_HEAPS][32];
	const char *name_of[HP_MAX_HEAPS] = {NULL};
	char(*odd)[32] = NULL;
	int err = rows ? 0 : -ENOMEM;
	for (size_t i = 0; !err && i < n; i++) {
		const struct prof_event *e = &ev[i];
		bool is_free = e->kind == HP_EV_FREE;
		const char *heap;
		uint32_t h = e->heap_id;
		if (h < HP_MAX_HEAPS) {
			if (!name_of[h])
				name_of[h] = event_heap(ps, h, names[h],
				                        sizeof(names[h]));
			heap = name_of[h];
		} else {
			if (!odd && !(odd = malloc(n * sizeof(*odd)))) {
				err = -ENOMEM;
				break;
			}
			heap = event_heap(ps, h, odd[i], sizeof(odd[i]));
		}
		rows[i] = (struct event_row){
		        .ts = i64(e->ts_ns),
		        .kind = is_free ? "free" : "alloc",
		        .tid = e->tid,
		        .address = i64(e->address),
		        .size = i64(e->size),
		        .charged = i64(e->charged),
		        .heap = heap,
		        .stack_key = i64(e->stack_key),
		        /* An allocation's time is its own ts; a free whose
		         * block's time is unknown keeps NULL (0). */
		        .alloc_ts = is_free ? i64(e->alloc_ts_ns) : 0,
		};
	}
	if (!err)
		err = exec(p, "BEGIN", "writing events");
	if (!err) {
		p->bulk[BK_EVENT].rows = rows;
		p->bulk[BK_EVENT].nrows = n;
		sqlite3_bind_int64(p->st[ST_EVENT], 1, upid);
		err = step(p, ST_EVENT, "writing events");
		p->bulk[BK_EVENT].nrows = 0;
		if (!err)
			err = wr_commit(p, "writing events");
		if (err)
			sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
	}
	if (err == -ENOMEM)
		fprintf(stderr, SUBSYS "out of memory\n");
	free(odd);
	free(rows);
	return err ? wr_err(p, err, "writing events") : 0;
}

int profile_set_trace(struct profile *p, int64_t upid,
                      const struct prof_trace *t)
{
	struct proc_state *ps = wr_proc_find(p, upid);
	if (!ps) {
		if (!p->status.err)
			fprintf(stderr,
			        SUBSYS "trace of unknown process %" PRId64 "\n",
			        upid);
		return wr_err(p, -EINVAL, "writing the trace");
	}
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
