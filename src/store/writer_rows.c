/*
 * The profile writer (writer.c): a dump's rows.  Allocation rows as
 * deltas of the merged (callsite, heap) counters since the rows before,
 * the process's counters (heapprof_process_stats), its memory beside the
 * dump (heapprof_dump_memory), the heapprof_dump row with the process's
 * state and heaps, and a snapshot's live blocks (heapprof_block).
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

/* Names of the header counters (enum hp_counter) in heapprof_process_stats.
 * Samples and matched frees are not header counters (the client does not
 * keep them); they are the sums over the stacks, written by wr_write_stats. */
static const char *const counter_names[] = {
        [HP_CTR_STACK_FULL] = "stack_table_full",
        [HP_CTR_STACK_FULL_BYTES] = "stack_table_full_bytes",
        [HP_CTR_LIVE_FULL] = "live_table_full",
        [HP_CTR_LIVE_FULL_BYTES] = "live_table_full_bytes",
        [HP_CTR_MODULE_FULL] = "module_table_full",
        [HP_CTR_UNWIND_ERRORS] = "unwind_errors",
        [HP_CTR_TRUNCATED_STACKS] = "truncated_stacks",
        [HP_CTR_REENTRANT] = "reentrant_skipped",
        [HP_CTR_UNWIND_STOPPED] = "unwind_stopped",
        [HP_CTR_STACK_UNBOUNDED] = "stack_unbounded",
        [HP_CTR_STACK_LOW] = "stack_low",
        [HP_CTR_NESTED] = "nested_recorded",
        [HP_CTR_GUARD_STALE] = "stale_guards_cleared",
        [HP_CTR_CONTROL_LOST] = "control_lost",
        [HP_CTR_SANDBOXED_CHILDREN] = "sandboxed_children",
        [HP_CTR_STARTUP_RECORDED] = "startup_recorded",
        [HP_CTR_STARTUP_MISSED] = "startup_missed",
        [HP_CTR_ZERO_SIZE] = "zero_size_allocations",
        [HP_CTR_LIVE_UNPREPARED] = "live_levels_unprepared",
        [HP_CTR_LIVE_LIMIT] = "live_table_limit_bytes",
        [HP_CTR_LIVE_LOG_EVENTS] = "live_log_events",
        [HP_CTR_LIVE_LOG_BACK] = "live_log_taken_back",
};

/* Add stack s (at leaf callsite) to its (callsite, heap) entry, which
 * the current batch then has to write (c->touched). */
int wr_merge_stack(struct dump_ctx *c, const struct proc_state *ps,
                   int64_t callsite, const struct prof_stack *s)
{
	bool added;
	struct pairmap_slot *sl =
	        pairmap_slot(&c->merged_idx, callsite, s->heap_id, &added);
	struct merged *m;

	if (!sl)
		return -ENOMEM;
	if (!added) {
		m = &c->merged[sl->v - 1];
	} else {
		m = hp_grow(c->merged, &c->capmerged, c->nmerged, sizeof(*m));
		if (!m)
			return -ENOMEM; /* sl stays empty */
		c->merged = m;
		sl->v = (int64_t)c->nmerged + 1;
		m = &c->merged[c->nmerged++];
		memset(m, 0, sizeof(*m));
		m->callsite = callsite;
		m->heap_id = s->heap_id;
		/* Rows start from what earlier dumps wrote. */
		m->cum = pairmap_get(&ps->prev, callsite, s->heap_id);
		if (m->cum)
			m->rowed = ps->cum[m->cum - 1];
	}
	if (m->batch != c->batch + 1) {
		size_t *t = hp_grow(c->touched, &c->captouched, c->ntouched,
		                    sizeof(*t));
		if (!t)
			return -ENOMEM;
		c->touched = t;
		t[c->ntouched++] = (size_t)(m - c->merged);
		m->batch = c->batch + 1;
	}
	m->alloc_objs_fp += s->alloc_objects_fp;
	m->alloc_bytes += s->alloc_bytes;
	m->free_objs_fp += s->free_objects_fp;
	m->free_bytes += s->free_bytes;
	m->alloc_count += s->alloc_count;
	m->free_count += s->free_count;
	return 0;
}

/* Rounded cumulative values; deltas of these telescope exactly. */
static struct cum merged_cum(const struct merged *m)
{
	return (struct cum){
	        .alloc_objs = prof_objects(m->alloc_objs_fp),
	        .alloc_bytes = m->alloc_bytes,
	        .free_objs = prof_objects(m->free_objs_fp),
	        .free_bytes = m->free_bytes,
	};
}

/* Counters only grow; a smaller value (a bad read) yields no delta. */
static uint64_t delta(uint64_t now, uint64_t before)
{
	return now > before ? now - before : 0;
}

const char *prof_heap_name(const struct prof_dump *d, uint32_t heap_id,
                           char *buf, size_t len)
{
	if (heap_id < d->nheaps && d->heaps[heap_id].name &&
	    d->heaps[heap_id].name[0])
		return d->heaps[heap_id].name;
	if (heap_id == 0)
		return "libc.malloc";
	snprintf(buf, len, "heap%" PRIu32, heap_id);
	return buf;
}

/* prof_heap_name() for rows written in bulk: the string lives as long as the
 * dump.  NULL when out of memory. */
static const char *dump_heap(struct dump_ctx *c, uint32_t heap_id)
{
	const struct prof_dump *d = c->d;
	if (heap_id < d->nheaps && d->heaps[heap_id].name &&
	    d->heaps[heap_id].name[0])
		return d->heaps[heap_id].name;
	if (heap_id == 0)
		return "libc.malloc";
	/* Unnamed ids: none after the collector's heap selection, so a
	 * short list will do. */
	for (size_t i = 0; i < c->nheap_bufs; i++)
		if (c->heap_ids[i] == heap_id)
			return c->heap_bufs[i];
	size_t n = c->nheap_bufs, cap = c->capheap_bufs;
	uint32_t *ids = hp_grow(c->heap_ids, &cap, n, sizeof(*ids));
	if (!ids)
		return NULL;
	c->heap_ids = ids;
	cap = c->capheap_bufs;
	char **bufs = hp_grow(c->heap_bufs, &cap, n, sizeof(*bufs));
	if (!bufs)
		return NULL;
	c->heap_bufs = bufs;
	c->capheap_bufs = cap;
	char buf[32];
	if (!(bufs[n] = strdup(prof_heap_name(d, heap_id, buf, sizeof(buf)))))
		return NULL;
	ids[n] = heap_id;
	c->nheap_bufs++;
	return bufs[n];
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

struct alloc_job {
	struct profile *p;
	struct alloc_row *rows;
	size_t n;
	int64_t ts, upid;
};

static void drop_allocs(void *arg)
{
	struct alloc_job *j = arg;
	free(j->rows);
	free(j);
}

static int run_allocs(void *arg)
{
	struct alloc_job *j = arg;
	struct profile *p = j->p;

	p->bulk[BK_ALLOC].rows = j->rows;
	p->bulk[BK_ALLOC].nrows = j->n;
	sqlite3_bind_int64(p->st[ST_ALLOC], 1, j->ts);
	sqlite3_bind_int64(p->st[ST_ALLOC], 2, j->upid);
	int err = step(p, ST_ALLOC, "writing allocations");
	p->bulk[BK_ALLOC].nrows = 0;
	drop_allocs(j);
	return err;
}

/*
 * The rows of the entries the batch added to: for each, what it gained
 * since the rows before (an earlier dump's, or an earlier batch's when
 * equal stacks of a big dump fall in two batches), as a positive row for
 * allocations and a negative one for frees.
 */
int wr_emit_allocs(struct dump_ctx *c, int64_t upid)
{
	struct alloc_row *rows = malloc((2 * c->ntouched + 1) * sizeof(*rows));
	size_t n = 0;

	if (!rows)
		return -ENOMEM;
	for (size_t i = 0; i < c->ntouched; i++) {
		struct merged *m = &c->merged[c->touched[i]];
		struct cum now = merged_cum(m);
		struct cum *was = &m->rowed;
		const char *heap = dump_heap(c, m->heap_id);
		if (!heap) {
			free(rows);
			return -ENOMEM;
		}
		uint64_t ac = delta(now.alloc_objs, was->alloc_objs);
		uint64_t ab = delta(now.alloc_bytes, was->alloc_bytes);
		uint64_t fc = delta(now.free_objs, was->free_objs);
		uint64_t fb = delta(now.free_bytes, was->free_bytes);
		if (ac || ab)
			rows[n++] = (struct alloc_row){m->callsite, i64(ac),
			                               i64(ab), heap};
		if (fc || fb)
			rows[n++] = (struct alloc_row){m->callsite, -i64(fc),
			                               -i64(fb), heap};
		/* Never move backwards: see delta(). */
		was->alloc_objs = max_u64(was->alloc_objs, now.alloc_objs);
		was->alloc_bytes = max_u64(was->alloc_bytes, now.alloc_bytes);
		was->free_objs = max_u64(was->free_objs, now.free_objs);
		was->free_bytes = max_u64(was->free_bytes, now.free_bytes);
	}
	c->ntouched = 0;
	c->batch++;
	if (!n) {
		free(rows);
		return 0;
	}
	struct alloc_job *j = malloc(sizeof(*j));
	if (!j) {
		free(rows);
		return -ENOMEM;
	}
	*j = (struct alloc_job){c->p, rows, n, i64(c->d->ts_ns), upid};
	return jobq_submit(&c->p->wq, run_allocs, NULL, drop_allocs, j, 0, 0);
}

static int write_stat(struct profile *p, int64_t upid, const char *name,
                      uint64_t value)
{
	sqlite3_stmt *st = p->st[ST_STAT];

	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, i64(value));
	return step(p, ST_STAT, "writing process stats");
}

int wr_write_stats(struct dump_ctx *c, int64_t upid)
{
	struct profile *p = c->p;
	uint64_t nalloc = 0, nfree = 0;

	sqlite3_bind_int64(p->st[ST_DEL_STATS], 1, upid);
	int err = step(p, ST_DEL_STATS, "writing process stats");
	for (size_t i = 0; !err && i < HP_CTR_ALL; i++)
		if (i < sizeof(counter_names) / sizeof(counter_names[0]) &&
		    counter_names[i])
			err = write_stat(p, upid, counter_names[i],
			                 c->d->counters[i]);
	for (size_t i = 0; i < c->nmerged; i++) {
		nalloc += c->merged[i].alloc_count;
		nfree += c->merged[i].free_count;
	}
	if (!err)
		err = write_stat(p, upid, "samples", nalloc);
	if (!err)
		err = write_stat(p, upid, "frees_matched", nfree);
	return err;
}

static int write_memory_row(struct profile *p, int64_t upid, uint64_t ts,
                            const char *name, uint64_t value,
                            const char *source)
{
	sqlite3_stmt *st = p->st[ST_MEMORY];

	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_int64(st, 2, i64(ts));
	sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, i64(value));
	sqlite3_bind_text(st, 5, source, -1, SQLITE_STATIC);
	return step(p, ST_MEMORY, "writing process memory");
}

/* heapprof_dump_memory rows: what the collector learned beside the dump. */
static int write_memory(struct profile *p, int64_t upid,
                        const struct prof_dump *d)
{
	const struct prof_memory *m = &d->memory;
	const char *src = m->rss_source ? m->rss_source : "proc";
	int err = 0;

	if (m->have_rss) {
		err = write_memory_row(p, upid, d->ts_ns, "rss", m->rss, src);
		if (!err)
			err = write_memory_row(p, upid, d->ts_ns, "rss_anon",
			                       m->rss_anon, src);
		if (!err && !strcmp(src, "proc"))
			err = write_memory_row(p, upid, d->ts_ns, "rss_file",
			                       m->rss_file, src);
		if (!err && !strcmp(src, "proc"))
			err = write_memory_row(p, upid, d->ts_ns, "rss_shmem",
			                       m->rss_shmem, src);
	}
	if (!err && m->have_peak)
		err = write_memory_row(p, upid, d->ts_ns, "rss_peak",
		                       m->rss_peak, "proc");
	if (!err && m->malloc_foreign)
		err = write_memory_row(p, upid, d->ts_ns, "malloc_foreign", 1,
		                       "exit");
	if (!err && m->have_malloc)
		err = write_memory_row(p, upid, d->ts_ns, "malloc_system",
		                       m->malloc_system, "exit");
	if (!err && m->have_malloc)
		err = write_memory_row(p, upid, d->ts_ns, "malloc_in_use",
		                       m->malloc_in_use, "exit");
	if (!err && m->have_malloc)
		err = write_memory_row(p, upid, d->ts_ns, "malloc_free",
		                       m->malloc_free, "exit");
	const char *cg = m->cg_version == 2 ? "cgroup v2" : "cgroup v1";
	if (!err && m->cg_version && m->cg_limit)
		err = write_memory_row(p, upid, d->ts_ns, "memory_limit",
		                       m->cg_limit, cg);
	if (!err && m->cg_version)
		err = write_memory_row(p, upid, d->ts_ns, "cgroup_usage",
		                       m->cg_usage, cg);
	if (!err && m->cg_version && m->cg_peak)
		err = write_memory_row(p, upid, d->ts_ns, "cgroup_peak",
		                       m->cg_peak, cg);
	if (!err && m->have_tables)
		err = write_memory_row(p, upid, d->ts_ns, "heapprof_tables",
		                       m->tables, "collector");
	if (!err && m->have_tables)
		err = write_memory_row(p, upid, d->ts_ns,
		                       "heapprof_tables_ours", m->tables_ours,
		                       "collector");
	return err;
}

int wr_write_dump_row(struct dump_ctx *c, const struct proc_state *ps)
{
	struct profile *p = c->p;
	const struct prof_dump *d = c->d;
	int64_t upid = ps->upid;
	sqlite3_stmt *st = p->st[ST_DUMP];
	/* Stored as the interval in effect, so SQL needs no fallback. */
	uint64_t used = d->interval_used ? d->interval_used : ps->interval;
	int err;

	sqlite3_bind_int64(st, 1, i64(d->ts_ns));
	sqlite3_bind_int64(st, 2, upid);
	sqlite3_bind_text(st, 3, d->reason ? d->reason : "", -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, d->at_max ? 1 : 0);
	if (d->at_max) {
		sqlite3_bind_int64(st, 5, i64(d->max_ts_ns));
		sqlite3_bind_int64(st, 6, i64(d->max_live_bytes));
	}
	sqlite3_bind_int64(st, 7, i64(used));
	if (d->name)
		sqlite3_bind_text(st, 8, d->name, -1, SQLITE_STATIC);
	if (d->blocks || d->blocks_in_flight)
		sqlite3_bind_int64(st, 9, i64(d->blocks_in_flight));
	err = step(p, ST_DUMP, "writing dump");
	c->dump_id = sqlite3_last_insert_rowid(p->db);
	if (!err)
		err = write_memory(p, upid, d);
	if (err)
		return err;
	st = p->st[ST_PROC_STATE];
	sqlite3_bind_int64(st, 1, d->client_state);
	sqlite3_bind_int64(st, 2, d->stop_reason);
	sqlite3_bind_int64(st, 3, i64(used));
	sqlite3_bind_int64(st, 4, upid);
	err = step(p, ST_PROC_STATE, "writing process state");
	if (!err && d->at_max) {
		st = p->st[ST_PROC_MAX];
		sqlite3_bind_int64(st, 1, i64(d->max_live_bytes));
		sqlite3_bind_int64(st, 2, i64(d->max_ts_ns));
		sqlite3_bind_int64(st, 3, upid);
		err = step(p, ST_PROC_MAX, "writing process peak");
	}
	for (size_t h = 0; !err && h < d->nheaps; h++) {
		char buf[32];
		if (!d->heaps[h].name && h != 0)
			continue; /* unused heap id */
		st = p->st[ST_HEAP];
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_int64(st, 2, (int64_t)h);
		sqlite3_bind_text(
		        st, 3, prof_heap_name(d, (uint32_t)h, buf, sizeof(buf)),
		        -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 4, i64(d->heaps[h].interval));
		err = step(p, ST_HEAP, "writing heaps");
	}
	return err;
}

/* heapprof_block: every live block of a snapshot dump, at its leaf
 * callsite. */
int wr_write_blocks(struct dump_ctx *c, int64_t upid)
{
	struct profile *p = c->p;
	const struct prof_dump *d = c->d;
	struct block_row *rows = malloc(d->nblocks * sizeof(*rows));
	int err = rows ? 0 : -ENOMEM;

	for (size_t i = 0; !err && i < d->nblocks; i++) {
		const struct prof_block *b = &d->blocks[i];
		const char *heap = dump_heap(c, b->heap_id);
		if (!heap) {
			err = -ENOMEM;
			break;
		}
		rows[i] = (struct block_row){
		        .address = i64(b->address),
		        .size = i64(b->size),
		        .charged = i64(b->charged),
		        .objects_fp = i64(b->objects_fp),
		        .heap = heap,
		        /* A block names its stack by index; a bad one keeps
		         * NULL (0). */
		        .callsite =
		                b->stack < d->nstacks ? c->leaf[b->stack] : 0,
		        .tid = b->tid,
		        .ts = i64(b->ts_ns),
		};
	}
	if (!err) {
		p->bulk[BK_BLOCK].rows = rows;
		p->bulk[BK_BLOCK].nrows = d->nblocks;
		sqlite3_bind_int64(p->st[ST_BLOCK], 1, c->dump_id);
		sqlite3_bind_int64(p->st[ST_BLOCK], 2, upid);
		err = step(p, ST_BLOCK, "writing blocks");
		p->bulk[BK_BLOCK].nrows = 0;
	}
	free(rows);
	return err;
}
