/*
 * Reading a target's event trace (record --trace) into the profile.  The
 * table is in region 0 of the attach (layout_v2.h, HP_TAB_TRACE); the
 * client writes, we read with trace_get, which copies an event only when
 * it is whole.  What each mode keeps:
 *
 *   streaming  every position [tail, head) in order, while the program
 *              runs; trace_tail gives the client its room back once the
 *              events are copied out;
 *   oneshot    positions [0, min(head, capacity)), at dumps and at the end;
 *   ring       at the end, the newest positions [head - capacity, head).
 *
 * A position a writer reserved but has not finished reads NOT_YET: while
 * the program runs we stop there and come back; at the end (the program
 * gone, or about to be left) we wait a bounded time and then skip it as
 * "incomplete".  Counts the client keeps (dropped, waits, full_ts) are
 * copied at each read, so they outlive the mapping.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/collector.h"
#include "config/config.h"
#include "util/err.h"

/* At the end, how long in all we wait for writers to finish events they
 * reserved: a live process's are writing now; a process whose connection
 * closed is normally gone, but a client can close it while its threads
 * run on. */
#define FINAL_WAIT_NS (20 * 1000000ull)
#define GONE_WAIT_NS  (2 * 1000000ull)
/* Events queued for the writer past which a streaming trace is left in
 * the client's buffer for a turn. */
#define TRACE_QUEUE_MAX (64ull << 20)
/* Log events applied per turn of the loop, and the time a turn may take
 * (checked every 4096 events): the loop has other work (a forked child
 * waits for its session, a periodic dump is due), and a sanitizer-built
 * or preempted collector applies events ten times slower.  A turn that
 * stops with events left comes back at once (trace_turn). */
#define LOG_TURN_MAX (1ull << 20)
#define LOG_TURN_NS  (5 * 1000000ull)

/* The client's counts, copied while the region is mapped. */
static void refresh(struct target *t)
{
	if (t->retired || !t->nreg || !t->reg[0].region.ext)
		return;
	struct hp_header_ext_v2 *x = t->reg[0].region.ext;
	for (int i = 0; i < HP_TDROP_COUNT; i++)
		t->tr.dropped[i] = atomic_load_explicit(&x->trace_dropped[i],
		                                        memory_order_relaxed);
	t->tr.full_ts =
	        atomic_load_explicit(&x->trace_full_ts, memory_order_acquire);
	t->tr.waits =
	        atomic_load_explicit(&x->trace_waits, memory_order_relaxed);
	t->tr.wait_ns =
	        atomic_load_explicit(&x->trace_wait_ns, memory_order_relaxed);
}

static uint64_t head_of(const struct target *t)
{
	return atomic_load_explicit(&t->reg[0].region.ext->trace_head,
	                            memory_order_acquire);
}

static void give_back(struct target *t)
{
	if (t->tr.mode == HP_TRACE_STREAMING || t->tr.mode == HP_TRACE_LOG)
		atomic_store_explicit(&t->reg[0].region.ext->trace_tail,
		                      t->tr.pos, memory_order_release);
}

/* A batch of events for the writer (util/jobq.h). */
struct events_job {
	struct collector *c;
	struct profile *p;
	int64_t upid;
	pid_t pid;
	struct target_trace *tr; /* lost, failed: atomics */
	size_t n;
	struct events_job *next; /* in c->ev_spare */
	struct prof_event ev[];
};

/* Batches kept for reuse at most (7 MiB). */
#define SPARE_MAX 8

static int events_run(void *arg)
{
	struct events_job *j = arg;
	int rc = profile_write_events(j->p, j->upid, j->ev, j->n);
	/* Not said here: the writer keeps the error, and the end of the
	 * session says what the file kept (record's trace summary counts
	 * these as not written). */
	if (rc)
		atomic_fetch_add_explicit(&j->tr->lost, j->n,
		                          memory_order_relaxed);
	return rc;
}

/* On the loop's thread: the batch goes back to the spares. */
static void events_fin(void *arg, int rc)
{
	struct events_job *j = arg;
	struct collector *c = j->c;
	(void)rc;
	if (c->nspare < SPARE_MAX) {
		j->next = c->ev_spare;
		c->ev_spare = j;
		c->nspare++;
	} else {
		free(j);
	}
}

void collector_trace_free(struct collector *c)
{
	free(c->ev_fill);
	c->ev_fill = NULL;
	while (c->ev_spare) {
		struct events_job *j = c->ev_spare;
		c->ev_spare = j->next;
		free(j);
	}
	c->nspare = 0;
}

/* The batch to fill: the one begun, a spare, or a new one; 0 or
 * -ENOMEM. */
static int ensure_buf(struct collector *c)
{
	if (c->ev_fill)
		return 0;
	if (c->ev_spare) {
		c->ev_fill = c->ev_spare;
		c->ev_spare = c->ev_fill->next;
		c->nspare--;
		return 0;
	}
	c->ev_fill = malloc(sizeof(*c->ev_fill) +
	                    TRACE_BATCH * sizeof(c->ev_fill->ev[0]));
	return c->ev_fill ? 0 : -ENOMEM;
}

/* An event that found no batch (out of memory): counted as not written,
 * as the writer's failures are. */
static void lose(struct target *t, uint64_t n)
{
	atomic_fetch_add_explicit(&t->tr.lost, n, memory_order_relaxed);
	t->tr.events += n;
	if (!atomic_exchange_explicit(&t->tr.failed, 1, memory_order_relaxed))
		hp_log("heapprof: collector: pid %d: out of memory: "
		       "the trace is incomplete\n",
		       (int)t->pid);
}

/* Hands the n events of the batch being filled to the writer; the
 * client gets their room back from the caller. */
static int flush(struct collector *c, struct target *t, size_t n)
{
	if (!n)
		return 0;
	struct events_job *j = c->ev_fill;
	c->ev_fill = NULL;
	j->c = c;
	j->p = c->profile;
	j->upid = t->upid;
	j->pid = t->pid;
	j->tr = &t->tr;
	j->n = n;
	t->tr.events += n;
	return jobq_submit(&c->wq, events_run, events_fin, NULL, j,
	                   n * sizeof(j->ev[0]), 0);
}

/* The log's free counters owed: arrays for the stack ids met so far
 * (livelog_acc.want), grown between batches (nothing is owed then), from
 * 4096 ids, doubling, up to the stack table's size.  Out of memory: the
 * ids past cap are discharged one at a time, as livelog_apply does. */
#define ACC_MIN_IDS 4096
static void acc_ready(struct target *t)
{
	struct livelog_acc *a = &t->tr.acc;
	uint64_t stacks = t->reg[0].region.stacks_cap;
	uint64_t want = a->want > ACC_MIN_IDS ? a->want : ACC_MIN_IDS;
	if (want > stacks)
		want = stacks;
	if (a->d && want <= a->cap)
		return;
	uint64_t cap = a->cap ? a->cap : ACC_MIN_IDS;
	while (cap < want)
		cap *= 2;
	if (cap > stacks)
		cap = stacks;
	uint64_t *d = realloc(a->d, cap * 3 * sizeof(uint64_t));
	if (!d)
		return;
	a->d = d;
	memset(d + 3 * a->cap, 0, (cap - a->cap) * 3 * sizeof(uint64_t));
	uint32_t *touched = realloc(a->touched, cap * sizeof(uint32_t));
	if (!touched)
		return; /* d is larger, cap is not: still consistent */
	a->touched = touched;
	a->cap = cap;
}

/*
 * The peak of live bytes while the log is applied (HP_CFG_TRACK_MAX): the
 * collector is the one writer of the table, so it follows the peak as the
 * client does in its own hands (region.h's STACK_MAX protocol), in the
 * log's order and with each allocation's own time, from its count of
 * each stack (peak_sh).  Once the client takes the table over it goes on
 * from the same header and copies.
 */
static struct hp_stack_counts *peak_counts(struct target *t, uint32_t id,
                                           uint64_t stacks)
{
	struct target_trace *tr = &t->tr;
	if (id >= tr->peak_cap) {
		uint64_t cap = tr->peak_cap ? tr->peak_cap : ACC_MIN_IDS;
		while (cap <= id)
			cap *= 2;
		if (cap > stacks)
			cap = stacks;
		struct hp_stack_counts *n =
		        realloc(tr->peak_sh, cap * sizeof(*n));
		if (!n) {
			hp_log("heapprof: collector: pid %d: out of memory: "
			       "its peak is no longer followed\n",
			       (int)t->pid);
			tr->peak_off = true;
			return NULL;
		}
		memset(n + tr->peak_cap, 0, (cap - tr->peak_cap) * sizeof(*n));
		tr->peak_sh = n;
		tr->peak_cap = cap;
	}
	return &tr->peak_sh[id];
}

static void peak_apply(struct target *t, struct hp_region *r,
                       const struct livelog_acc *a, uint64_t ts)
{
	if (a->last == LIVELOG_NONE || t->tr.peak_off ||
	    a->last_id >= r->stacks_cap)
		return;
	struct hp_stack_counts *c = peak_counts(t, a->last_id, r->stacks_cap);
	if (!c)
		return;
	stackmax_save(r, a->last_id, c);
	if (a->last != LIVELOG_OUT) {
		c->alloc_count++;
		c->alloc_bytes += a->last_bytes;
		c->alloc_objects_fp += a->last_objs;
	}
	if (a->last != LIVELOG_IN) {
		c->free_count++;
		c->free_bytes += a->last_bytes;
		c->free_objects_fp += a->last_objs;
	}
	if (a->last == LIVELOG_IN || a->last == LIVELOG_IN_GONE)
		stackmax_alloc_at(r, a->last_bytes, ts);
	else if (a->last == LIVELOG_OUT)
		stackmax_free(r, a->last_bytes);
}

/* The log's events [pos, end), at most limit, applied to the live table
 * in order (HP_TRACE_LOG: nothing goes to the profile).  Not final: stops
 * at a position no writer has made whole, and at deadline (boottime_ns;
 * 0: none).  Final (the process gone or
 * leaving): waits for one until deadline, then skips it as incomplete.
 * Once the client has taken the table over (log_state, or a position it
 * took), nothing more is applied. */
static int apply_range(struct target *t, uint64_t end, uint64_t limit,
                       bool final, uint64_t deadline)
{
	struct hp_region *r = &t->reg[0].region;
	acc_ready(t);
	uint64_t done = 0;
	/* Once per turn: log_state is on the line the program's writers
	 * update at every event.  Each position is taken by CAS, by us or by
	 * a client taking the table over, so a takeover that begins during
	 * the turn only makes a take fail. */
	if (atomic_load_explicit(&r->ext->log_state, memory_order_seq_cst) !=
	    HP_LOG_LOGGING)
		end = t->tr.pos;
	while (t->tr.pos < end && done < limit) {
		struct hp_event_v2 ev;
		int rc = livelog_take(r, t->tr.pos, &ev);
		if (rc == HP_LOGGRAB_NOT_YET) {
			if (final && boottime_ns() < deadline) {
				livelog_flush(r, &t->tr.acc);
				give_back(t);
				struct timespec ts = {0, 100000};
				nanosleep(&ts, NULL);
				continue;
			}
			if (!final)
				break;
			t->tr.incomplete++;
		} else if (rc == HP_LOGGRAB_TAKEN) {
			/* Applied even if the client begins to take over
			 * now: it leaves a taken position to us. */
			if (livelog_apply(r, &ev, &t->tr.acc) < 0)
				break;
			if (r->stack_max)
				peak_apply(t, r, &t->tr.acc, ev.ts_ns);
			atomic_store_explicit(&r->ext->log_done, t->tr.pos + 1,
			                      memory_order_release);
			t->tr.events++;
		} else {
			break; /* the client's now */
		}
		t->tr.pos++;
		done++;
		if ((done & 4095) == 0) {
			livelog_flush(r, &t->tr.acc);
			give_back(t);
			if (!final && deadline && boottime_ns() >= deadline)
				break;
		}
	}
	livelog_flush(r, &t->tr.acc);
	give_back(t);
	if (done)
		region_count(r, HP_CTR_LIVE_LOG_EVENTS, done);
	return 0;
}

static void (*progress_fn)(void *arg, int64_t done, int64_t total);
static void *progress_arg;

void collector_set_trace_progress(void (*fn)(void *arg, int64_t done,
                                             int64_t total),
                                  void *arg)
{
	progress_fn = fn;
	progress_arg = arg;
}

static void pause_briefly(void)
{
	struct timespec ts = {0, 100000};
	nanosleep(&ts, NULL);
}

/*
 * Reads positions [t->tr.pos, end) in order, at most `limit`, into the
 * profile in batches of TRACE_BATCH (the client's room given back after
 * each).  Not final: stops at a position a writer has not finished.
 * Final: waits for it until *deadline, then skips it as incomplete; in a
 * ring a position whose slot no writer holds was dropped (counted by the
 * client) and is skipped at once.  Returns 0 or the first write error.
 */
static int read_range(struct collector *c, struct target *t, uint64_t end,
                      uint64_t limit, bool final, uint64_t deadline)
{
	const struct hp_region *r = &t->reg[0].region;
	size_t n = 0;
	uint64_t done = 0;
	int err = 0;
	int64_t total = end > t->tr.pos ? (int64_t)(end - t->tr.pos) : 0;
	bool say = final && progress_fn;
	while (t->tr.pos < end && done < limit) {
		if (say && done && (done & 65535) == 0)
			progress_fn(progress_arg, (int64_t)done, total);
		struct hp_event_v2 ev;
		enum hp_ev_read rc = trace_get(r, t->tr.pos, &ev);
		if (rc == HP_EV_READ_NOT_YET) {
			if (!final)
				break;
			const struct hp_event_v2 *e =
			        &r->trace[t->tr.pos & (r->trace_cap - 1)];
			uint64_t seq = atomic_load_explicit(
			        &e->seq, memory_order_acquire);
			if (t->tr.mode == HP_TRACE_RING &&
			    seq != HP_EVENT_BUSY) {
				t->tr.pos++;
				continue;
			}
			if (boottime_ns() < deadline) {
				int rc2 = flush(c, t, n);
				err = err ? err : rc2;
				n = 0;
				give_back(t);
				pause_briefly();
				continue;
			}
			t->tr.incomplete++;
			t->tr.pos++;
			continue;
		}
		if (rc == HP_EV_READ_OK && ensure_buf(c) < 0) {
			lose(t, 1);
		} else if (rc == HP_EV_READ_OK) {
			struct prof_event *o = &c->ev_fill->ev[n++];
			o->ts_ns = ev.ts_ns;
			o->kind = ev.kind;
			o->tid = ev.tid;
			o->address = ev.addr;
			o->size = ev.size;
			o->charged = ev.charged;
			o->alloc_ts_ns = ev.alloc_ts_ns;
			o->stack_key = (uint64_t)ev.region << 32 | ev.stack_id;
			o->heap_id = ev.heap_id;
		}
		/* GONE: replaced by a newer event (a ring, or a client
		 * that broke the protocol): not ours to keep. */
		t->tr.pos++;
		done++;
		if (n == TRACE_BATCH) {
			int rc2 = flush(c, t, n);
			err = err ? err : rc2;
			n = 0;
			give_back(t);
		}
	}
	int rc2 = flush(c, t, n);
	give_back(t);
	if (say && done >= 65536)
		progress_fn(progress_arg, -1, total);
	return err ? err : rc2;
}

/* The positions that can be read now: [pos, end). */
static uint64_t readable_end(const struct target *t)
{
	uint64_t head = head_of(t);
	/* Both are the client's words: a streaming writer never runs more
	 * than the capacity ahead of the tail, and oneshot keeps the first
	 * capacity events only. */
	if (t->tr.mode == HP_TRACE_STREAMING || t->tr.mode == HP_TRACE_LOG) {
		if (head < t->tr.pos)
			return t->tr.pos;
		if (head - t->tr.pos > t->tr.cap)
			return t->tr.pos + t->tr.cap;
		return head;
	}
	return head < t->tr.cap ? head : t->tr.cap;
}

static bool readable(const struct target *t)
{
	return t->tr.mode && !t->tr.done && !t->retired && t->nreg &&
	       t->reg[0].region.trace_cap;
}

int collector_trace_poll(struct collector *c, struct target *t)
{
	if (!readable(t) || t->tr.mode == HP_TRACE_RING)
		return 0;
	refresh(t);
	if (t->tr.mode == HP_TRACE_LOG) {
		collector_prepare_log(&t->reg[0], head_of(t));
		uint64_t from = t->tr.pos;
		int rc = apply_range(t, readable_end(t), LOG_TURN_MAX, false,
		                     boottime_ns() + LOG_TURN_NS);
		t->tr.last_read = t->tr.pos - from;
		uint64_t end = readable_end(t);
		t->tr.backlog = end > t->tr.pos ? end - t->tr.pos : 0;
		if (rc)
			return rc;
		return t->tr.backlog > INT32_MAX ? INT32_MAX
		                                 : (int)t->tr.backlog;
	}
	if (ensure_buf(c))
		return -ENOMEM;
	/* The writer is far behind: the events wait in the client's buffer
	 * (it has no room back meanwhile, as when we wrote them ourselves),
	 * and the loop comes back at its usual pace. */
	if (jobq_bytes(&c->wq) > TRACE_QUEUE_MAX) {
		t->tr.last_read = 0;
		return 0;
	}
	/* Streaming each turn; oneshot only at dumps, a larger share (the
	 * rest waits for the next dump or the end: a dump must not hold
	 * the loop for minutes with a 16 GiB buffer). */
	bool stream = t->tr.mode == HP_TRACE_STREAMING;
	uint64_t from = t->tr.pos;
	int rc = read_range(c, t, readable_end(t),
	                    stream ? TRACE_TURN_MAX : TRACE_DUMP_MAX, false, 0);
	t->tr.last_read = t->tr.pos - from;
	uint64_t end = readable_end(t);
	t->tr.backlog = end > t->tr.pos ? end - t->tr.pos : 0;
	if (rc)
		return rc;
	return t->tr.backlog > INT32_MAX ? INT32_MAX : (int)t->tr.backlog;
}

int collector_trace_final(struct collector *c, struct target *t)
{
	if (!readable(t))
		return 0;
	if (ensure_buf(c))
		return -ENOMEM;
	uint64_t deadline = boottime_ns() +
	                    (t->disconnected ? GONE_WAIT_NS : FINAL_WAIT_NS);
	int rc;
	if (t->tr.mode == HP_TRACE_RING) {
		uint64_t head = head_of(t);
		uint64_t start = head > t->tr.cap ? head - t->tr.cap : 0;
		if (t->tr.pos < start)
			t->tr.pos = start;
		rc = read_range(c, t, head, UINT64_MAX, true, deadline);
		refresh(t);
		/*
		 * Every position was written (kept or overwritten since),
		 * dropped (a slot another writer held, counted by the
		 * client) or never finished; what is not kept, dropped or
		 * incomplete was overwritten.
		 */
		uint64_t gone = t->tr.events + t->tr.incomplete +
		                t->tr.dropped[HP_TDROP_ALLOCS] +
		                t->tr.dropped[HP_TDROP_FREES];
		t->tr.overwritten = head > gone ? head - gone : 0;
	} else if (t->tr.mode == HP_TRACE_LOG) {
		rc = apply_range(t, readable_end(t), UINT64_MAX, true,
		                 deadline);
		refresh(t);
	} else {
		/* Streaming: what a writer reserved is within the capacity
		 * of the tail; oneshot keeps the first capacity events. */
		rc = read_range(c, t, readable_end(t), UINT64_MAX, true,
		                deadline);
		refresh(t);
	}
	t->tr.backlog = 0;
	t->tr.done = true;
	return rc;
}

bool collector_trace_full(struct target *t, uint64_t *full_ts)
{
	if (t->tr.mode != HP_TRACE_ONESHOT || t->tr.said_full || t->retired ||
	    !t->nreg || !t->reg[0].region.ext)
		return false;
	uint64_t ts = atomic_load_explicit(&t->reg[0].region.ext->trace_full_ts,
	                                   memory_order_acquire);
	if (!ts)
		return false;
	t->tr.said_full = true;
	t->tr.full_ts = ts;
	if (full_ts)
		*full_ts = ts;
	return true;
}

bool collector_trace_active(const struct target *t)
{
	if (!readable(t))
		return false;
	return t->tr.mode == HP_TRACE_STREAMING || t->tr.mode == HP_TRACE_LOG ||
	       (t->tr.mode == HP_TRACE_ONESHOT && !t->tr.said_full);
}

void collector_trace_stats(struct target *t, struct prof_trace *out)
{
	refresh(t);
	memset(out, 0, sizeof(*out));
	out->mode = config_trace_mode_name(t->tr.mode);
	out->buffer_bytes = t->tr.bytes;
	uint64_t lost = atomic_load_explicit(&t->tr.lost, memory_order_relaxed);
	out->events = t->tr.events > lost ? t->tr.events - lost : 0;
	out->dropped_allocs = t->tr.dropped[HP_TDROP_ALLOCS];
	out->dropped_frees = t->tr.dropped[HP_TDROP_FREES];
	out->dropped_alloc_bytes = t->tr.dropped[HP_TDROP_ALLOC_BYTES];
	out->dropped_free_bytes = t->tr.dropped[HP_TDROP_FREE_BYTES];
	out->overwritten = t->tr.overwritten;
	out->incomplete = t->tr.incomplete;
	out->full_ts_ns = t->tr.full_ts;
	out->waits = t->tr.waits;
	out->wait_ns = t->tr.wait_ns;
}
