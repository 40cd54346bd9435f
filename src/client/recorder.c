/*
 * Accounting of sampled allocations into the shared region: capture the
 * stack, intern it, remember the block in the live table and add to the
 * stack's counters; on free, take back exactly what was charged.  Every
 * step is lock-free and wait-free with respect to the other hooks of the
 * thread, so a signal handler's allocation that interrupts a record is
 * recorded too (the re-entrancy guard, below, says where that is safe).
 *
 * Each call loads the current region (hp_client.cur) once and works in
 * that slot to the end, so a region switch by another thread (late attach,
 * GROW) never mixes two regions in one sample.  Session options cost one
 * predictable branch each when off: peak tracking (track_max), adaptive
 * sampling (adaptive) and --block-client (HP_CFG_BLOCK_CLIENT, only on a
 * full table), and the event trace (traced).
 *
 * Every recorded block's live entry carries the allocating thread (gettid,
 * cached per thread) and the time (CLOCK_BOOTTIME, a vDSO read): only
 * sampled allocations pay for them.
 *
 * The event trace.  When the attach's first region has one, each recorded
 * allocation writes an ALLOC event after its live entry went in, and each
 * free that found its entry a FREE event (with the entry's stack, size,
 * charge and time), so the trace and the counters tell the same story: an
 * allocation whose entry did not fit (counted as freed at once) writes
 * ALLOC then FREE, and a realloc that fails and puts its entry back writes
 * nothing.  Streaming with --block-client: a writer that finds no room
 * waits for the collector in short sleeps, at most trace_block_ms, then
 * drops the event; after such a timeout nobody waits for TRACE_STALL_NS,
 * so a stopped collector cannot stall every allocation.  Never waits in a
 * free or an allocation nested in a hook (a signal handler's), and never
 * holding a lock (the recorder holds none).
 *
 * The re-entrancy guard.  A signal handler may allocate while a hook of
 * its thread is stopped between two steps, and may leave that hook for
 * good with siglongjmp.  hp_tls.guard[] holds, for each hook running on
 * the thread, its frame and the return address that frame holds while it
 * runs: [0] the outermost, [1] one record nested in it.  A record that
 * finds a mark first asks whether the marked frame is provably gone
 * (unwind_frame_gone): its own frame lies above the mark, or at it, on
 * the same stack (the thread's, the alternate signal stack, a makecontext
 * stack: a live hook is only ever interrupted by code below it on its
 * stack, or on another stack), or the mark's return address slot holds
 * another word now (a deeper call wrote over the frame).  A gone mark was
 * left by a longjmp: it is cleared, the capture context its record held
 * is given back (contexts are claimed under a tag of thread and level,
 * unwind_ctx_drop), and it is counted (stale_guards_cleared).  A mark
 * not proven gone is taken as live: this allocation was made by a signal
 * handler that interrupted the hook.  What a nested record shares with
 * the hook under it is safe to share: its capture context is another one
 * (claimed by CAS), the stack and live tables, the counters, the module
 * scan (a trylock) and the trace are lock-free and never wait for
 * another writer, and the thread-local fields it writes are a hint
 * (ctx_hint) or the same value every time (tid, the thread's stack
 * bounds).  So one level of nesting is allowed and recorded
 * (nested_recorded), with two differences: it never waits for room in
 * the trace (the hook under it may be the writer the collector waits
 * for) and never asks for a GROW (it waits, and the hook under it may
 * hold the request).  Refused, and counted as reentrant_skipped: a second
 * level (a handler interrupting the nested record: the stack use would
 * add up), and anything under a closed mark (a named snapshot's wait,
 * the exit's memory figures: code of ours that calls the C library).
 * The sampler's countdown runs outside the guard, as before: a handler's
 * allocation between its steps can at worst move one sample point
 * (benign, and nothing at -i 1, where every allocation is exact).
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"

/* The unit tests define RECORDER_CAPTURE to put a fake stack in. */
#ifndef RECORDER_CAPTURE
#define RECORDER_CAPTURE unwind_capture
#endif

/* This thread's id, read once (a new thread's TLS starts at 0). */
static inline uint32_t thread_id(struct client_tls *t)
{
	if (HP_UNLIKELY(!t->tid))
		t->tid = unwind_thread_id();
	return t->tid;
}

uint64_t recorder_objects_fp(size_t size, bool exact, uint64_t interval)
{
	if (exact || interval == 0)
		return HP_OBJ_FP_ONE;
	/* A block of `size` bytes is sampled with probability
	 * p = 1 - exp(-size / interval); counting it 1/p times makes the
	 * object count unbiased. */
	double p = -expm1(-(double)size / (double)interval);
	if (!(p > 0.0))
		return HP_OBJ_FP_ONE;
	return (uint64_t)((double)HP_OBJ_FP_ONE / p + 0.5);
}

/*
 * One add to a stack's counter.  While the process has a single thread
 * (glibc's __libc_single_threaded: false from the first pthread_create on,
 * the same flag glibc's malloc skips its own locks by), nobody else writes
 * the counter: the collector only reads it, a forked child stops before it
 * could touch it, and a signal handler of this thread cannot cut into one
 * instruction.  So one plain add does, instead of a locked one (about 18
 * cycles each, six per recorded allocation and its free).
 */
static inline void counter_add(_Atomic uint64_t *c, uint64_t n, bool single)
{
#if defined(__x86_64__)
	if (single) {
		__asm__ volatile("addq %1, %0"
		                 : "+m"(*(volatile uint64_t *)c)
		                 : "er"(n));
		return;
	}
#else
	(void)single;
#endif
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static void charge(struct hp_stack_v1 *s, uint64_t bytes, uint64_t objs)
{
	bool single = __libc_single_threaded;
	counter_add(&s->alloc_count, 1, single);
	counter_add(&s->alloc_bytes, bytes, single);
	counter_add(&s->alloc_objects_fp, objs, single);
}

/* shared: the collector may add to the same free counters (a table the
 * client took back from the live table's log): atomic adds. */
static void discharge(struct hp_stack_v1 *s, uint64_t bytes, uint64_t objs,
                      bool shared)
{
	bool single = __libc_single_threaded && !shared;
	counter_add(&s->free_count, 1, single);
	counter_add(&s->free_bytes, bytes, single);
	counter_add(&s->free_objects_fp, objs, single);
}

static void log_nest_reset(void);

void recorder_slot_setup(struct client_slot *s, uint32_t gen)
{
	/* Cached once: the collector wrote these before handing the region
	 * over, and the recorder must not re-read (or trust) them per call. */
	struct hp_header_v1 *h = s->region.hdr;
	s->gen = gen;
	s->unwind_mode = h->unwind_mode;
	s->max_frames = h->max_frames;
	s->flags = h->config_flags;
	s->track_max =
	        (h->config_flags & HP_CFG_TRACK_MAX) && s->region.stack_max;
	s->base_interval = h->sampling_interval;
	s->adaptive = h->config_flags & HP_CFG_ADAPTIVE;
	s->threshold_pct = h->adaptive_threshold_pct;
	if (s->threshold_pct == 0 || s->threshold_pct > 100)
		s->threshold_pct = 90;
	/* ceil(threshold * 8 / 100) slots of a bucket, at least 1 */
	s->live_trigger = (s->threshold_pct * HP_LIVE_BUCKET + 99) / 100;
	if (s->live_trigger == 0)
		s->live_trigger = 1;
	s->max_interval = h->adaptive_max_interval;
	if (s->max_interval < s->base_interval)
		s->max_interval = s->base_interval;
	s->block_timeout_ms = h->block_timeout_ms;
	if (s->block_timeout_ms > 60000)
		s->block_timeout_ms = 60000;
	s->prev = NULL;
	s->root = s;
	atomic_store_explicit(&s->grow_after_ns, 0, memory_order_relaxed);

	struct hp_region *r = &s->region;
	s->region_index = r->ext ? (uint8_t)r->ext->region_index : 0;
	s->live_log = r->trace_cap != 0 && r->trace_mode == HP_TRACE_LOG;
	s->lq_alloc = false;
	s->take_start_ns = 0;
	if (s->live_log)
		log_nest_reset();
	s->traced = r->trace_cap != 0 && !s->live_log;
	uint32_t bms = r->ext ? r->ext->trace_block_ms : 0;
	if (bms == 0)
		bms = h->block_timeout_ms;
	s->trace_block_ms = bms > 60000 ? 60000 : bms;
	s->trace_block = s->traced && r->trace_mode == HP_TRACE_STREAMING &&
	                 (s->flags & HP_CFG_BLOCK_CLIENT) &&
	                 s->trace_block_ms != 0;
	atomic_store_explicit(&s->trace_stall_ns, 0, memory_order_relaxed);
	s->boot_offset =
	        hp_clock_ns(CLOCK_BOOTTIME) - hp_clock_ns(CLOCK_MONOTONIC);
}

/* When a block was allocated.  The kernel's tick clock (CLOCK_MONOTONIC_
 * COARSE: a read of the vDSO's data page, 5 ns on the benchmark machine
 * against 23 ns for the exact clock, which was a tenth of a sample's cost
 * at -i 1), as CLOCK_BOOTTIME by the offset taken at setup: a block's time
 * is about one tick (1-4 ms) early at most (a little more when the timer
 * interrupt is late), and early by the time the machine was suspended
 * since.  A traced session's events are ordered by their
 * times: they keep the exact clock. */
static inline uint64_t alloc_ts(const struct client_slot *s)
{
	if (HP_UNLIKELY(s->traced))
		return hp_clock_ns(CLOCK_BOOTTIME);
	return hp_clock_ns(CLOCK_MONOTONIC_COARSE) + s->boot_offset;
}

/* ---- peak tracking (--dump-at-max) ---------------------------------- */

/* Copies the root's peak (max_live_bytes, max_ts_ns, then max_epoch) into
 * the headers of the later regions of the chain from s. */
static void peak_mirror(struct client_slot *s)
{
	struct hp_header_v1 *rh = s->root->region.hdr;
	uint64_t e = atomic_load_explicit(&rh->max_epoch, memory_order_acquire);
	uint64_t m =
	        atomic_load_explicit(&rh->max_live_bytes, memory_order_relaxed);
	uint64_t ts =
	        atomic_load_explicit(&rh->max_ts_ns, memory_order_relaxed);
	for (int hops = 0; s && s != s->root && hops < HP_CLIENT_SLOTS;
	     s = s->prev, hops++) {
		struct hp_header_v1 *h = s->region.hdr;
		atomic_store_explicit(&h->max_live_bytes, m,
		                      memory_order_relaxed);
		atomic_store_explicit(&h->max_ts_ns, ts, memory_order_relaxed);
		atomic_store_explicit(&h->max_epoch, e, memory_order_release);
	}
}

void recorder_slot_chain(struct client_slot *ns, struct client_slot *s)
{
	ns->prev = s;
	ns->root = s->root;
	/* Events of every region of the attach go to the root's trace. */
	ns->traced = ns->root->traced;
	ns->live_log = ns->root->live_log;
	ns->track_max = ns->track_max && ns->root->track_max;
	if (ns->track_max)
		peak_mirror(ns);
}

static void peak_alloc(struct client_slot *s, uint64_t bytes)
{
	if (stackmax_alloc(&s->root->region, bytes) && s != s->root)
		peak_mirror(s);
}

/* ---- adaptive sampling ---------------------------------------------- */

static uint64_t interval_of(const struct client_slot *s, uint64_t raw)
{
	return raw ? raw : s->base_interval;
}

bool recorder_adapt(struct client_slot *s, uint64_t seen)
{
	struct hp_header_v1 *h = s->region.hdr;
	uint64_t raw = atomic_load_explicit(&h->current_interval,
	                                    memory_order_relaxed);
	uint64_t cur = interval_of(s, raw);
	if (cur != seen || cur >= s->max_interval)
		return false; /* another thread did it, or at the max */
	uint64_t next = cur * 2 > s->max_interval ? s->max_interval : cur * 2;
	if (!atomic_compare_exchange_strong_explicit(&h->current_interval, &raw,
	                                             next, memory_order_relaxed,
	                                             memory_order_relaxed))
		return false;
	/* The heap table says which interval malloc uses now.  (Adaptive
	 * sampling moves libc.malloc's interval only; custom heaps keep
	 * theirs.) */
	if (s->region.heaps[0].flags & HP_HEAP_ENABLED)
		__atomic_store_n(&s->region.heaps[0].interval, next,
		                 __ATOMIC_RELAXED);
	if (client_cur() == s) {
		atomic_store_explicit(&hp_client.interval, next,
		                      memory_order_relaxed);
		atomic_store_explicit(&hp_client.exact_from, next,
		                      memory_order_relaxed);
	}
	return true;
}

/*
 * The fill at which the k-th doubling happens: the threshold of the
 * table, then halfway between it and full, and so on.  Our tables are
 * cumulative (stacks are never removed), so a fixed threshold would, once
 * crossed, double at every new stack; halving the remaining room per
 * doubling matches the halved rate at which new stacks arrive.
 */
static uint64_t adapt_trigger(uint64_t cap, uint32_t pct, unsigned level)
{
	uint64_t room = cap - cap / 100 * pct - cap % 100 * pct / 100;
	return cap - (level < 64 ? room >> level : 0);
}

static unsigned level_of(const struct client_slot *s, uint64_t cur)
{
	unsigned k = 0;
	while (k < 63 && (s->base_interval << (k + 1)) <= cur)
		k++;
	return k;
}

static void adapt_stacks(struct client_slot *s)
{
	struct hp_region *r = &s->region;
	uint64_t cur =
	        interval_of(s, atomic_load_explicit(&r->hdr->current_interval,
	                                            memory_order_relaxed));
	unsigned k = level_of(s, cur);
	uint64_t su = atomic_load_explicit(&r->hdr->stacks_used,
	                                   memory_order_relaxed);
	uint64_t fu = atomic_load_explicit(&r->hdr->frames_used,
	                                   memory_order_relaxed);
	if (su >= adapt_trigger(r->stacks_cap, s->threshold_pct, k) ||
	    fu >= adapt_trigger(r->frames_cap, s->threshold_pct, k))
		recorder_adapt(s, cur);
}

/*
 * The live table's signal: an insert whose bucket (the emptier of its
 * two) now holds threshold% of its slots, or that failed.  One bucket is
 * a noisy sample of the table, so it only prompts a look at the fill of
 * 64 neighbouring buckets (one cache line); the interval doubles when
 * they are past the threshold.  Without bucket fill (interval 1) only a
 * failed insert counts.
 */
static void adapt_live(struct client_slot *s, uint64_t addr, uint64_t seen)
{
	struct hp_region *r = &s->region;
	if (r->use_fill ? livetab_load_pct(r, addr) >= s->threshold_pct : true)
		recorder_adapt(s, seen);
}

/* Which table made stacktab_intern return the overflow stack. */
static uint32_t full_stack_table(const struct hp_region *r, uint32_t n)
{
	uint64_t su = atomic_load_explicit(&r->hdr->stacks_used,
	                                   memory_order_relaxed);
	uint64_t fu = atomic_load_explicit(&r->hdr->frames_used,
	                                   memory_order_relaxed);
	if (su >= r->stacks_cap)
		return HP_TAB_STACKS;
	if (fu + n > r->frames_cap)
		return HP_TAB_FRAMES;
	return HP_TAB_STACK_INDEX;
}

/* ---- the re-entrancy guard (see the top of the file) ---------------- */

/* The mark of level l: frame `me`, whose return address is ra.  (Level 0
 * is the common case: spelt out, its fields are at fixed offsets.) */
static inline void guard_take(struct client_tls *t, uint32_t l, uintptr_t me,
                              uintptr_t ra)
{
	struct client_guard *g =
	        HP_LIKELY(l == 0) ? &t->guard[0] : &t->guard[1];
	g->ra = ra;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	g->frame = me;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Level l's hook ends: its capture context goes (if it has one), then its
 * mark.  A longjmp in between leaves a mark whose context is free, and
 * unwind_ctx_drop only gives back what level l's holder still holds. */
static inline void guard_leave(struct client_tls *t, uint32_t l,
                               struct capture_ctx *cx)
{
	unwind_ctx_release(cx);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (HP_LIKELY(l == 0))
		t->guard[0].frame = 0;
	else
		t->guard[1].frame = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Level l's hook is gone (a longjmp left it): the capture contexts it held
 * are free again.  1 if there was a mark. */
static uint32_t guard_drop(struct client_tls *t, uint32_t l)
{
	if (!t->guard[l].frame)
		return 0;
	unwind_ctx_drop(l);
	guard_leave(t, l, NULL);
	return 1;
}

static inline bool guard_gone(const struct client_guard *g, uintptr_t me)
{
	return unwind_frame_gone(g->frame & ~(uintptr_t)HP_GUARD_CLOSED, g->ra,
	                         me);
}

/*
 * The level a hook at frame me takes when a mark is set: 0 when no hook
 * of this thread runs under it (the marks left are gone: cleared and
 * counted in r, if any), 1 when one record does and nesting under it is
 * safe, 2 when it is not (a closed mark, or two levels in use).
 */
static __attribute__((noinline)) uint32_t
guard_level(struct client_tls *t, struct hp_region *r, uintptr_t me)
{
	uint32_t level, stale = 0;
	uintptr_t g0 = t->guard[0].frame;
	if (g0 == 0 || guard_gone(&t->guard[0], me)) {
		/* A nested mark lives only as long as the one under it. */
		stale += guard_drop(t, 0);
		stale += guard_drop(t, 1);
		level = 0;
	} else if (g0 & HP_GUARD_CLOSED) {
		level = 2;
	} else {
		uintptr_t g1 = t->guard[1].frame;
		if (g1 != 0 && !guard_gone(&t->guard[1], me)) {
			level = 2;
		} else {
			stale += guard_drop(t, 1);
			level = 1;
		}
	}
	if (stale && r)
		region_count(r, HP_CTR_GUARD_STALE, stale);
	return level;
}

int recorder_hold(uintptr_t frame, uintptr_t ra, bool closed)
{
	struct client_tls *t = &hp_tls;
	uint32_t level = 0;
	if (t->guard[0].frame | t->guard[1].frame) {
		struct client_slot *s = client_cur();
		level = guard_level(t, s ? &s->region : NULL, frame);
		if (level > 1)
			return -1;
	}
	guard_take(t, level, frame | (closed ? HP_GUARD_CLOSED : 0u), ra);
	return (int)level;
}

void recorder_unhold(int level)
{
	if (level >= 0)
		guard_leave(&hp_tls, (uint32_t)level, NULL);
}

/* ---- event trace ---------------------------------------------------- */

/* After a wait for room that timed out, nobody waits for this long. */
#define TRACE_STALL_NS 1000000000ull
/* Sleeps while waiting for room: from the first to the last, doubling. */
#define TRACE_STEP_MIN_NS 20000ull
#define TRACE_STEP_MAX_NS 1000000ull

/* Streaming, --block-client, no room: wait for the collector to consume,
 * at most trace_block_ms, then drop ev. */
static __attribute__((noinline)) void trace_wait(struct client_slot *root,
                                                 const struct hp_event_v2 *ev)
{
	struct hp_region *r = &root->region;
	uint64_t start = hp_clock_ns(CLOCK_MONOTONIC);
	if (start <
	    atomic_load_explicit(&root->trace_stall_ns, memory_order_relaxed)) {
		trace_drop(r, ev);
		return;
	}
	int saved = errno; /* nanosleep: EINTR */
	uint64_t deadline = start + (uint64_t)root->trace_block_ms * 1000000ull;
	uint64_t step = TRACE_STEP_MIN_NS, now = start;
	int rc;
	do {
		uint64_t nap = deadline - now < step ? deadline - now : step;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)nap};
		nanosleep(&ts, NULL);
		rc = trace_put(r, ev);
		now = hp_clock_ns(CLOCK_MONOTONIC);
		if (step < TRACE_STEP_MAX_NS)
			step *= 2;
	} while (rc == -EAGAIN && now < deadline);
	struct hp_header_ext_v2 *x = r->ext;
	atomic_fetch_add_explicit(&x->trace_waits, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&x->trace_wait_ns, now - start,
	                          memory_order_relaxed);
	if (rc == -EAGAIN) {
		trace_drop(r, ev);
		atomic_store_explicit(&root->trace_stall_ns,
		                      now + TRACE_STALL_NS,
		                      memory_order_relaxed);
	}
	errno = saved;
}

/* Writes ev into the trace of s's attach.  Full: oneshot and ring count
 * it themselves (trace_put); streaming waits (--block-client, may_wait)
 * or drops and counts it. */
static void trace_emit(struct client_slot *s, const struct hp_event_v2 *ev,
                       bool may_wait)
{
	struct client_slot *root = s->root;
	if (HP_LIKELY(trace_put(&root->region, ev) != -EAGAIN))
		return;
	if (root->trace_block && may_wait)
		trace_wait(root, ev);
	else
		trace_drop(&root->region, ev);
}

/* The ALLOC event of a recorded allocation (key's entry v, in slot s);
 * untracked (its entry did not go in: counted as freed at once), a FREE
 * right after it. */
static __attribute__((noinline)) void trace_alloc(struct client_slot *s,
                                                  uint64_t key,
                                                  const struct hp_live_v2 *v,
                                                  bool untracked, bool nested)
{
	struct hp_event_v2 ev = {.ts_ns = v->ts_ns,
	                         .addr = key,
	                         .size = v->size,
	                         .charged = v->charged,
	                         .stack_id = v->stack_id,
	                         .tid = v->tid,
	                         .kind = HP_EV_ALLOC,
	                         .region = s->region_index,
	                         .heap_id = (uint16_t)v->heap_id};
	trace_emit(s, &ev, !nested);
	if (untracked) {
		ev.kind = HP_EV_FREE;
		ev.alloc_ts_ns = v->ts_ns;
		trace_emit(s, &ev, !nested);
	}
}

/* The FREE event of key's entry v, found in slot s. */
static __attribute__((noinline)) void
trace_free(struct client_slot *s, uint64_t key, const struct hp_live_v2 *v)
{
	struct client_tls *t = &hp_tls;
	struct hp_event_v2 ev = {.ts_ns = hp_clock_ns(CLOCK_BOOTTIME),
	                         .addr = key,
	                         .size = v->size,
	                         .charged = v->charged,
	                         .alloc_ts_ns = v->ts_ns,
	                         .stack_id = v->stack_id,
	                         .tid = thread_id(t),
	                         .kind = HP_EV_FREE,
	                         .region = s->region_index,
	                         .heap_id = (uint16_t)v->heap_id};
	/* Inside a hook (a free by a signal handler that interrupted one) a
	 * wait could stall the hook it nests in.  The guard is held while
	 * this free may wait: a signal handler that interrupts the wait is
	 * such a nested hook. */
	uintptr_t me = (uintptr_t)__builtin_frame_address(0);
	if (guard_level(t, &s->region, me) == 0) {
		guard_take(t, 0, me, (uintptr_t)__builtin_return_address(0));
		trace_emit(s, &ev, true);
		guard_leave(t, 0, NULL);
	} else {
		trace_emit(s, &ev, false);
	}
}

/* ---- the live table's log (HP_TRACE_LOG) ---------------------------- */

/* How far ahead of its position a writer of the log prefetches. */
#define LOG_AHEAD 8
/* Taking the table over: how long to wait for the collector to finish
 * the event it holds, and for a writer to make its position whole, before
 * treating them as stopped or gone. */
#define LOG_WAIT_NS (20 * 1000000ull)

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

static void relax_a_while(void)
{
	for (int i = 0; i < 64; i++)
		cpu_relax();
}

static inline uint64_t tick_ns(void)
{
	return hp_clock_ns(CLOCK_MONOTONIC_COARSE);
}

/* What log_take gives. */
enum log_take {
	LOG_SLOT,   /* a position of the log, held: publish there */
	LOG_DIRECT, /* the table is the client's (HP_LOG_DIRECT): use it */
	LOG_SKIP    /* neither: not recorded, counted (HP_CTR_REENTRANT:
	             * a hook nested in this thread's takeover that found
	             * no room; HP_CTR_STOPPED: a takeover that never ends) */
};

/*
 * Hooks nested in this thread's takeover (a signal handler that allocates
 * while it runs, which may be tens of milliseconds): their events wait
 * here, in order, and the takeover applies them after the log's, then
 * closes the buffer (LOG_NEST_CLOSED: a hook nested from then on finds the
 * table up to date and uses it).  One takeover per session at most, so one
 * buffer for the process; the library's own memory, not thread-local.  An
 * entry's seq: 0 reserved, 1 whole (log_put publishes it as the log's
 * position 0: livelog_publish's CAS from 0 to 1), 2 applied (a takeover
 * resumed after a longjmp applies none twice).  A hook that never made its
 * entry whole (a longjmp out of the handler) is counted as skipped.
 */
#define LOG_NEST_CAP    1024u
#define LOG_NEST_CLOSED (1ull << 63)
static struct {
	_Atomic uint64_t n; /* entries reserved | LOG_NEST_CLOSED */
	uint64_t done;      /* entries the takeover went past */
	struct hp_event_v2 e[LOG_NEST_CAP];
} log_nest;

/* A new session's log: its takeover has the buffer to itself. */
static void log_nest_reset(void)
{
	log_nest.done = 0;
	atomic_store_explicit(&log_nest.n, 0, memory_order_seq_cst);
}

static inline uint32_t log_state(const struct client_slot *s)
{
	return atomic_load_explicit(&s->root->region.ext->log_state,
	                            memory_order_seq_cst);
}

/*
 * A free in a table the client took back from the log: as livetab_remove
 * (which leaves alone the slot the collector named for the event it was
 * stopped in), and when the block is the one the collector was putting in
 * then, that insert cancelled (HP_LOGQ_CANCELLED: the collector takes it
 * out when it resumes).  True: *out is the block's entry.
 */
static bool log_direct_remove(struct client_slot *root, uint64_t key,
                              struct hp_live_v2 *out)
{
	struct hp_region *r = &root->region;
	_Atomic uint64_t *q = &r->ext->log_q;
	for (;;) {
		if (livetab_remove(r, key, out))
			return true;
		uint64_t v = atomic_load_explicit(q, memory_order_seq_cst);
		if ((v & 7) != HP_LOGQ_ALLOC || !root->lq_alloc ||
		    key != root->lq_key)
			return false;
		if (atomic_compare_exchange_strong_explicit(
		            q, &v, (v & ~(uint64_t)7) | HP_LOGQ_CANCELLED,
		            memory_order_seq_cst, memory_order_seq_cst)) {
			*out = root->lq_v;
			return true;
		}
		/* The collector finished it meanwhile: look again. */
	}
}

/* An event of the log, applied by the client (taking the table over, or
 * a writer whose position the takeover gave up on).  The peak goes on
 * from where the collector left it (its allocation was charged when it
 * was logged). */
static void log_apply_direct(struct client_slot *root,
                             const struct hp_event_v2 *ev)
{
	struct hp_region *r = &root->region;
	if (ev->kind == HP_EV_ALLOC) {
		if (ev->stack_id >= r->stacks_cap)
			return;
		struct hp_live_v2 v = livelog_entry(ev);
		if (ev->addr > HP_LIVE_BUSY &&
		    livetab_insert(r, ev->addr, &v) == 0) {
			if (HP_UNLIKELY(root->track_max))
				stackmax_alloc_at(r, ev->charged, ev->ts_ns);
			return;
		}
		if (HP_UNLIKELY(root->track_max))
			stackmax_touch(r, ev->stack_id);
		discharge(&r->stacks[ev->stack_id], ev->charged,
		          ev->alloc_ts_ns, true);
		region_count(r, HP_CTR_LIVE_FULL, 1);
		region_count(r, HP_CTR_LIVE_FULL_BYTES, ev->charged);
	} else if (ev->kind == HP_EV_FREE) {
		struct hp_live_v2 v;
		if (log_direct_remove(root, ev->addr, &v) &&
		    v.stack_id < r->stacks_cap) {
			if (HP_UNLIKELY(root->track_max))
				stackmax_touch(r, v.stack_id);
			discharge(&r->stacks[v.stack_id], v.charged,
			          v.objects_fp, true);
			if (HP_UNLIKELY(root->track_max))
				stackmax_free(r, v.charged);
		}
	}
}

/*
 * The event the collector took at pos and, after LOG_WAIT_NS, has not
 * finished: it is stopped in the middle of it.  log_q says how far it got:
 * no slot named yet, and the client takes the event (HP_LOGQ_TAKEN: the
 * collector, when it resumes, applies nothing) and applies it; a slot it
 * is inserting into, and the block is the collector's to put there (a
 * free of it meanwhile cancels it: log_direct_remove); a slot it is
 * emptying, and the entry there is as good as gone (livetab_remove skips
 * the slot).  False: the collector moved on after all.
 */
static bool log_inflight(struct client_slot *root, uint64_t pos)
{
	struct hp_region *r = &root->region;
	struct hp_header_ext_v2 *x = r->ext;
	struct hp_event_v2 ev;
	livelog_peek(r, pos, &ev);
	uint64_t v = 0;
	if (atomic_compare_exchange_strong_explicit(
	            &x->log_q, &v, HP_LOGQ_TAKEN, memory_order_seq_cst,
	            memory_order_seq_cst)) {
		log_apply_direct(root, &ev);
		return true;
	}
	if (atomic_load_explicit(&x->log_done, memory_order_acquire) > pos)
		return false;
	if ((v & 7) == HP_LOGQ_ALLOC && ev.kind == HP_EV_ALLOC) {
		root->lq_key = ev.addr;
		root->lq_v = livelog_entry(&ev);
		root->lq_alloc = true;
	}
	return true;
}

/* The events of hooks nested in the takeover, applied in order; then
 * the buffer closed, once no hook reserved an entry since (a handler
 * that runs between the last look and the close finds it open, and its
 * entry is applied by the next round). */
static void log_nest_drain(struct client_slot *root)
{
	for (;;) {
		uint64_t n =
		        atomic_load_explicit(&log_nest.n, memory_order_seq_cst);
		if (n & LOG_NEST_CLOSED)
			return;
		uint64_t i = log_nest.done;
		if (i >= n || i >= LOG_NEST_CAP) {
			if (atomic_compare_exchange_strong_explicit(
			            &log_nest.n, &n, n | LOG_NEST_CLOSED,
			            memory_order_seq_cst, memory_order_seq_cst))
				return;
			continue;
		}
		struct hp_event_v2 *e = &log_nest.e[i];
		uint64_t whole = 1;
		if (atomic_compare_exchange_strong_explicit(
		            &e->seq, &whole, 2, memory_order_acquire,
		            memory_order_relaxed)) {
			struct hp_event_v2 ev = *e;
			log_apply_direct(root, &ev);
		} else if (whole == 0) {
			region_count(&root->region, HP_CTR_REENTRANT, 1);
		}
		log_nest.done = i + 1;
	}
}

/* A hook nested in this thread's takeover, or in the instants before it
 * (log_slow marks the thread before it switches): the log while it is
 * still the collector's and has room; an entry of log_nest while the
 * takeover runs; the table once it is the client's. */
static int log_nested(struct client_slot *root, struct hp_event_v2 **e,
                      uint64_t *pos, uint64_t *was)
{
	struct hp_region *r = &root->region;
	struct hp_header_ext_v2 *x = r->ext;
	uint32_t st = atomic_load_explicit(&x->log_state, memory_order_seq_cst);
	if (st == HP_LOG_DIRECT)
		return LOG_DIRECT;
	if (st == HP_LOG_LOGGING) {
		bool gone = false;
		*e = livelog_reserve(r, pos, was, &gone);
		if (*e) {
			if (atomic_load_explicit(&x->log_state,
			                         memory_order_seq_cst) ==
			    HP_LOG_LOGGING)
				return LOG_SLOT;
			struct hp_event_v2 none = {.kind = 0};
			livelog_publish(*e, &none, *pos, *was);
		}
	} else {
		uint64_t n =
		        atomic_load_explicit(&log_nest.n, memory_order_seq_cst);
		for (;;) {
			if (n & LOG_NEST_CLOSED)
				return LOG_DIRECT;
			if (n >= LOG_NEST_CAP)
				break;
			if (atomic_compare_exchange_weak_explicit(
			            &log_nest.n, &n, n + 1,
			            memory_order_seq_cst,
			            memory_order_seq_cst)) {
				*e = &log_nest.e[n];
				atomic_store_explicit(&(*e)->seq, 0,
				                      memory_order_relaxed);
				/* Published as a log position 0 is: seq
				 * 0 -> 1, which is "whole" here. */
				*pos = 0;
				*was = 0;
				return LOG_SLOT;
			}
		}
	}
	region_count(r, HP_CTR_REENTRANT, 1);
	return LOG_SKIP;
}

/*
 * Takes the table back from the collector (this writer set
 * HP_LOG_SWITCHING): every event logged so far is applied, in order, by
 * the collector (what it took) or here (the rest); a position no writer
 * makes whole within LOG_WAIT_NS is given up on (its writer, if it ever
 * goes on, applies its event directly); then HP_LOG_DIRECT.  Waits only
 * on bounded things: never on a collector that does not run.
 */
static __attribute__((noinline)) void log_takeover(struct client_slot *root,
                                                   uint32_t why)
{
	struct hp_region *r = &root->region;
	struct hp_header_ext_v2 *x = r->ext;
	uint64_t head =
	        atomic_load_explicit(&x->trace_head, memory_order_seq_cst);
	uint64_t pos =
	        atomic_load_explicit(&x->trace_tail, memory_order_acquire);
	uint64_t done =
	        atomic_load_explicit(&x->log_done, memory_order_acquire);
	if (done > pos)
		pos = done;
	/* The wait counts from the takeover's start, across a longjmp out
	 * of it and its resumption (a program whose signals interrupt it
	 * every few microseconds still gets past a position nobody will
	 * make whole). */
	if (!root->take_start_ns)
		root->take_start_ns = tick_ns();
	while (pos < head) {
		struct hp_event_v2 ev;
		bool late = tick_ns() - root->take_start_ns >= LOG_WAIT_NS;
		int g = livelog_steal(r, pos, &ev, late);
		if (g == HP_LOGGRAB_TAKEN) {
			log_apply_direct(root, &ev);
		} else if (g == HP_LOGGRAB_COLLECTOR) {
			if (atomic_load_explicit(&x->log_done,
			                         memory_order_acquire) <= pos) {
				if (!late) {
					relax_a_while();
					continue;
				}
				if (!log_inflight(root, pos))
					continue;
			}
		} else if (g == HP_LOGGRAB_NOT_YET) {
			relax_a_while();
			continue;
		}
		/* CLIENT, ABANDONED: nothing to apply. */
		pos++;
	}
	log_nest_drain(root);
	uint64_t ts = hp_clock_ns(CLOCK_BOOTTIME);
	atomic_store_explicit(&x->log_direct_ts, ts ? ts : 1,
	                      memory_order_relaxed);
	atomic_store_explicit(&x->log_direct_why, why, memory_order_relaxed);
	atomic_store_explicit(region_counter(r, HP_CTR_LIVE_LOG_BACK), why,
	                      memory_order_relaxed);
	atomic_store_explicit(&x->log_state, HP_LOG_DIRECT,
	                      memory_order_seq_cst);
}

/*
 * No room in the log, a thread, or the table changing hands.  Spins (no
 * system call: the tick clock is a read of the vDSO's page).  With room
 * within HP_LOG_ROOM_MS (and the writers' waits in all under
 * HP_LOG_WAITS_MS and HP_LOG_WAITS_MAX of them: the tick clock cannot see
 * short ones), a position.  Without, or once the process has a second
 * thread, this writer takes the table back for the client
 * (log_takeover); the other writers wait for it (bounded: it waits on
 * nothing that does not run).  Waits are counted as the trace's
 * (trace_waits, trace_wait_ns).  The takeover's mark is in the thread's
 * record: a thread without one (thread.c) never takes the table over; it
 * logs while there is room, and after HP_LOG_ROOM_MS without, its event
 * is skipped (counted as reentrant_skipped).
 */
static __attribute__((noinline)) int log_slow(struct client_slot *root,
                                              struct hp_event_v2 **e,
                                              uint64_t *pos, uint64_t *was)
{
	struct hp_region *r = &root->region;
	struct hp_header_ext_v2 *x = r->ext;
	uint64_t start = tick_ns(), now = start;
	const uint64_t room = (uint64_t)HP_LOG_ROOM_MS * 1000000ull;
	const uint64_t waits = (uint64_t)HP_LOG_WAITS_MS * 1000000ull;
	const uint64_t stall = 1000 * 1000000ull;
	/* Threads: measured on 2 cores, 8 threads allocating make events
	 * faster than the collector applies them, and contend for the
	 * log's head; the table is faster in their own hands. */
	bool threads = !__libc_single_threaded;
	struct client_thread *t = client_thread();
	uintptr_t me = (uintptr_t)__builtin_frame_address(0);
	bool resume = false;
	if (HP_UNLIKELY(t && t->log_take_frame != 0)) {
		if (!unwind_frame_gone(t->log_take_frame, t->log_take_ra, me))
			return log_nested(root, e, pos, was);
		/* A longjmp left it half done: this thread finishes it. */
		t->log_take_frame = 0;
		resume = true;
	}
	int got = -1;
	for (;;) {
		uint32_t st = atomic_load_explicit(&x->log_state,
		                                   memory_order_seq_cst);
		if (st == HP_LOG_DIRECT) {
			got = LOG_DIRECT;
			break;
		}
		if (st == HP_LOG_SWITCHING && resume) {
			t->log_take_ra = (uintptr_t)__builtin_return_address(0);
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			t->log_take_frame = me;
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			log_takeover(root, HP_LOG_DIRECT_BEHIND);
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			t->log_take_frame = 0;
			got = LOG_DIRECT;
			break;
		}
		if (st == HP_LOG_SWITCHING && now - start >= stall) {
			/* Another thread's takeover that does not end (a
			 * longjmp left it, and that thread allocates no
			 * more): stop profiling rather than wait. */
			client_stop(root, HP_STOP_INTERNAL);
			return LOG_SKIP;
		}
		if (st == HP_LOG_LOGGING) {
			bool gone = false;
			*e = threads && t ? NULL
			                  : livelog_reserve(r, pos, was, &gone);
			if (*e) {
				if (atomic_load_explicit(
				            &x->log_state,
				            memory_order_seq_cst) ==
				    HP_LOG_LOGGING) {
					got = LOG_SLOT;
					break;
				}
				/* Switching began after we reserved: the
				 * position carries nothing. */
				struct hp_event_v2 none = {.kind = 0};
				livelog_publish(*e, &none, *pos, *was);
				continue;
			}
			uint64_t waited =
			        atomic_load_explicit(&x->trace_wait_ns,
			                             memory_order_relaxed) +
			        (now - start);
			uint64_t nwaits = atomic_load_explicit(
			        &x->trace_waits, memory_order_relaxed);
			uint32_t want = HP_LOG_LOGGING;
			if (HP_UNLIKELY(!t)) {
				if (!gone && now - start >= room) {
					region_count(r, HP_CTR_REENTRANT, 1);
					got = LOG_SKIP;
					break;
				}
			} else if (threads || gone || now - start >= room ||
			           waited >= waits ||
			           nwaits >= HP_LOG_WAITS_MAX) {
				/* Marked before the switch: a handler that
				 * runs between the two is nested in it
				 * (log_nested), not a writer waiting for a
				 * takeover its own thread cannot finish. */
				t->log_take_ra =
				        (uintptr_t)__builtin_return_address(0);
				__atomic_signal_fence(__ATOMIC_SEQ_CST);
				t->log_take_frame = me;
				__atomic_signal_fence(__ATOMIC_SEQ_CST);
				if (atomic_compare_exchange_strong_explicit(
				            &x->log_state, &want,
				            HP_LOG_SWITCHING,
				            memory_order_seq_cst,
				            memory_order_seq_cst)) {
					log_takeover(
					        root,
					        threads ? HP_LOG_DIRECT_THREADS
					                : HP_LOG_DIRECT_BEHIND);
					got = LOG_DIRECT;
				}
				__atomic_signal_fence(__ATOMIC_SEQ_CST);
				t->log_take_frame = 0;
				if (got == LOG_DIRECT)
					break;
			}
		}
		/* No room, or another writer taking the table over. */
		relax_a_while();
		now = tick_ns();
	}
	if (now != start) {
		atomic_fetch_add_explicit(&x->trace_waits, 1,
		                          memory_order_relaxed);
		atomic_fetch_add_explicit(&x->trace_wait_ns, now - start,
		                          memory_order_relaxed);
	}
	return got;
}

/* A position in the log of s's attach (LOG_SLOT: *e is its slot, held),
 * or LOG_DIRECT: the table is the client's. */
static inline int log_take(struct client_slot *s, struct hp_event_v2 **e,
                           uint64_t *pos, uint64_t *was)
{
	struct hp_region *r = &s->root->region;
	uint32_t st = log_state(s);
	if (HP_LIKELY(st == HP_LOG_LOGGING) &&
	    HP_LIKELY(__libc_single_threaded)) {
		bool gone;
		*e = livelog_reserve(r, pos, was, &gone);
		/* seq_cst, after the reserve's: a switch that began before
		 * it is seen here (log_slow). */
		if (HP_LIKELY(*e != NULL) &&
		    HP_LIKELY(log_state(s) == HP_LOG_LOGGING)) {
			/* The slot a few events on, for writing: the log's
			 * lines are cold (the collector read them a lap
			 * ago), and the next reserve's locked instruction
			 * would wait for a store that missed. */
			__builtin_prefetch(&r->trace[(*pos + LOG_AHEAD) &
			                             (r->trace_cap - 1)],
			                   1, 3);
			return LOG_SLOT;
		}
		if (*e) {
			struct hp_event_v2 none = {.kind = 0};
			livelog_publish(*e, &none, *pos, *was);
		}
	} else if (st == HP_LOG_DIRECT) {
		return LOG_DIRECT;
	}
	return log_slow(s->root, e, pos, was);
}

/* Publishes ev at the position held; if a takeover gave up on it
 * meanwhile, applies it directly: the takeover gave up on it only once
 * it had applied every position before it, and no later position
 * concerns the same address (the address is not back in the program's
 * hands before this returns). */
static void log_put(struct client_slot *s, struct hp_event_v2 *e,
                    const struct hp_event_v2 *ev, uint64_t pos, uint64_t was)
{
	if (HP_LIKELY(livelog_publish(e, ev, pos, was)))
		return;
	log_apply_direct(s->root, ev);
}

/* A free for the log: the block's entry, if it has one, is the
 * collector's to take out.  False: the table is the client's now. */
static bool log_free(struct client_slot *s, uint64_t key)
{
	uint64_t pos, was;
	struct hp_event_v2 *e;
	int how = log_take(s, &e, &pos, &was);
	if (how == LOG_DIRECT)
		return false;
	if (how == LOG_SKIP)
		return true;
	struct hp_event_v2 ev = {
	        .addr = key, .kind = HP_EV_FREE, .region = s->region_index};
	log_put(s, e, &ev, pos, was);
	return true;
}

bool recorder_log_hold(void *old, struct recorder_hold *h)
{
	struct client_slot *s = client_cur();
	if (!s || !s->live_log)
		return false;
	int how = log_take(s, &h->e, &h->pos, &h->was);
	if (how == LOG_DIRECT)
		return false;
	if (how == LOG_SKIP)
		h->e = NULL;
	h->s = s;
	h->key = (uintptr_t)old;
	return true;
}

void recorder_log_release(const struct recorder_hold *h, bool freed)
{
	if (!h->e)
		return;
	struct hp_event_v2 ev = {.addr = h->key,
	                         .kind = freed ? HP_EV_FREE : 0,
	                         .region = h->s->region_index};
	log_put(h->s, h->e, &ev, h->pos, h->was);
}

/* ---- allocation ----------------------------------------------------- */

static inline __attribute__((always_inline)) bool
record(uint32_t heap_id, uint64_t key, size_t size, uint64_t charged,
       uint64_t objs, uintptr_t caller);

/* The program sees errno as its allocator left it: a module scan or a
 * GROW may change it. */
static inline __attribute__((always_inline)) bool
record_keep_errno(uint32_t heap_id, uint64_t key, size_t size, uint64_t charged,
                  uint64_t objs, uintptr_t caller)
{
	int saved = errno;
	bool done = record(heap_id, key, size, charged, objs, caller);
	errno = saved;
	return done;
}

void recorder_sample(void *ptr, size_t size, uint64_t charged, bool exact,
                     uintptr_t caller)
{
	record_keep_errno(
	        0, (uintptr_t)ptr, size, charged,
	        recorder_objects_fp(size, exact,
	                            exact ? 0 : sampler_obj_interval()),
	        caller);
}

bool recorder_record(uint32_t heap_id, uint64_t key, size_t size,
                     uint64_t charged, uint64_t objs, uintptr_t caller)
{
	return record_keep_errno(heap_id, key, size, charged, objs, caller);
}

/* What the unwind gave (capture_part) to the rest (finish_part). */
struct captured {
	struct capture_ctx *cx; /* released by finish_part; NULL: none */
	uint64_t *pcs;
	uint32_t n;
	uint16_t cap;   /* HP_CAP_* */
	uint16_t level; /* the guard's level this record holds */
	bool fold_ok;   /* fold is the frames' fold (capture_ctx.fold) */
	uint64_t fold;
	uint64_t one; /* the frame when there is no context */
};

/*
 * The unwind, in a frame of its own called from a small one, so that the
 * deepest the hook goes on the program's stack (a rule worked out from
 * the CFI, under the unwind) has no recorder frame under it.  false: not
 * recorded (too little stack left).
 */
static __attribute__((noinline)) bool
capture_part(struct client_slot *s, uintptr_t caller, struct captured *k)
{
	struct hp_region *r = &s->region;
	/* The frames go to a capture context, not our stack.  The capture
	 * also measures the room left on the program's stack (a small
	 * alternate signal stack, a small thread or coroutine stack): with
	 * too little, nothing is recorded.  Without a context (all busy),
	 * the caller alone, if the room allows.  The context is claimed for
	 * this record's guard level: if a longjmp leaves us, the next record
	 * finds it by that (guard_drop). */
	struct capture_ctx *cx = unwind_ctx_claim(k->level);
	k->cx = cx;
	uint64_t *pcs = cx ? cx->frames : &k->one;
	uint32_t cap = k->level ? HP_CAP_NESTED : 0;
	uint32_t n = 0;
	if (HP_LIKELY(cx != NULL)) {
		n = RECORDER_CAPTURE(cx, s->max_frames, s->unwind_mode, caller,
		                     &cap);
	} else {
		uintptr_t room;
		cap = unwind_stack_room(&room) && room < HP_HOOK_STACK
		              ? HP_CAP_LOW
		              : HP_CAP_UNBOUNDED;
	}
	if (HP_UNLIKELY(cap & HP_CAP_LOW)) {
		region_count(r, HP_CTR_STACK_LOW, 1);
		return false;
	}
#ifdef HP_UNWIND_ORACLE
	/* libheapprof-oracle.so: the capture against libgcc's unwinder. */
	unwind_oracle_check(pcs, n, cap & HP_CAP_TRUNCATED,
	                    (cap & HP_CAP_UNBOUNDED) != 0);
#endif
	if (n == 0) {
		/* Keep at least the caller of the hook. */
		region_count(r, HP_CTR_UNWIND_ERRORS, 1);
		pcs[0] = caller;
		n = 1;
	}
	bool truncated = cap & HP_CAP_TRUNCATED;
	if (HP_UNLIKELY(cap & ~HP_CAP_TRUNCATED)) {
		if (cap & HP_CAP_STOPPED)
			region_count(r, HP_CTR_UNWIND_STOPPED, 1);
		if (cap & HP_CAP_UNBOUNDED)
			region_count(r, HP_CTR_STACK_UNBOUNDED, 1);
	}
	if (truncated)
		region_count(r, HP_CTR_TRUNCATED_STACKS, 1);
	k->pcs = pcs;
	/* (a capture that found no frame has no fold: n is its own) */
	k->fold_ok = cx && cx->fold_ok;
	k->fold = cx ? cx->fold : 0;
	k->n = n;
	k->cap = (uint16_t)cap;
	return true;
}

struct captured;
static __attribute__((noinline)) bool
finish_part(struct client_slot *s, uint32_t heap_id, uint64_t key, size_t size,
            uint64_t charged, uint64_t objs, uint64_t ts,
            const struct captured *k);

static inline __attribute__((always_inline)) bool
record(uint32_t heap_id, uint64_t key, size_t size, uint64_t charged,
       uint64_t objs, uintptr_t caller)
{
	struct client_tls *t = &hp_tls;
	struct client_slot *s = client_cur();
	if (HP_UNLIKELY(!s)) {
		/* Before the constructor attached: kept for it (early.c). */
		if (heap_id == 0)
			early_record(key, size);
		return false;
	}
	struct hp_region *r = &s->region;
	/* The guard: this record's frame; a mark already there is a hook
	 * this one interrupted (a signal handler's allocation) or one a
	 * longjmp left. */
	uintptr_t me = (uintptr_t)__builtin_frame_address(0);
	struct captured k = {.cx = NULL, .level = 0};
	if (HP_UNLIKELY(t->guard[0].frame | t->guard[1].frame)) {
		uint32_t level = guard_level(t, r, me);
		if (level > 1) {
			region_count(r, HP_CTR_REENTRANT, 1);
			return false;
		}
		k.level = (uint16_t)level;
	}
	guard_take(t, k.level, me, (uintptr_t)__builtin_return_address(0));

	if (HP_UNLIKELY(atomic_load_explicit(&r->hdr->control,
	                                     memory_order_relaxed) ==
	                HP_CONTROL_STOP)) {
		client_stop(s, HP_STOP_REQUESTED);
		guard_leave(t, k.level, NULL);
		return false;
	}
	/* The live table's lines for this key are most likely cold (a random
	 * bucket): fetch them while we unwind. */
	if (key > HP_LIVE_BUSY &&
	    (!s->live_log || log_state(s) == HP_LOG_DIRECT))
		livetab_prefetch(r, key);
	/* When it was allocated, as near the allocator's return as we get. */
	uint64_t ts = alloc_ts(s);

	if (!capture_part(s, caller, &k)) {
		guard_leave(t, k.level, k.cx);
		return false;
	}
	return finish_part(s, heap_id, key, size, charged, objs, ts, &k);
}

bool recorder_replay(struct client_slot *s, uint64_t key, size_t size,
                     const uint64_t *pcs, uint32_t n, bool truncated,
                     bool freed)
{
	struct client_tls *t = &hp_tls;
	if (!s || n == 0)
		return false;
	/* The constructor's, on its own: no hook runs under it. */
	uintptr_t me = (uintptr_t)__builtin_frame_address(0);
	struct captured k = {.cx = NULL, .level = 0};
	guard_take(t, 0, me, (uintptr_t)__builtin_return_address(0));
	if (n > s->max_frames) {
		n = s->max_frames;
		truncated = true;
	}
	if (truncated)
		region_count(&s->region, HP_CTR_TRUNCATED_STACKS, 1);
	/* finish_part only reads the frames */
	k.pcs = (uint64_t *)(uintptr_t)pcs;
	k.n = n;
	k.cap = truncated ? HP_CAP_TRUNCATED : 0;
	k.fold_ok = false;
	if (!finish_part(s, 0, key, size, size, HP_OBJ_FP_ONE, alloc_ts(s), &k))
		return false;
	/* Freed before the attach: out again at once (the alloc_* views
	 * keep it). */
	struct hp_live_v2 v;
	if (freed && s->live_log && log_free(s, key))
		return true;
	if (freed && (s->live_log ? log_direct_remove(s->root, key, &v)
	                          : livetab_remove(&s->region, key, &v)))
		recorder_apply_free(s, key, &v);
	return true;
}

/* The rest of a recorded allocation, in a frame of its own that exists
 * only after the unwind returned. */
static __attribute__((noinline)) bool
finish_part(struct client_slot *s, uint32_t heap_id, uint64_t key, size_t size,
            uint64_t charged, uint64_t objs, uint64_t ts,
            const struct captured *k)
{
	struct client_tls *t = &hp_tls;
	struct hp_region *r = &s->region;
	uint64_t *pcs = k->pcs;
	uint32_t n = k->n;
	bool truncated = k->cap & HP_CAP_TRUNCATED;
	/* Nested in a hook a signal interrupted: no GROW (it waits). */
	bool grown = k->level != 0;
	uint32_t id;
	uint32_t pressure;
	int rc;
again:;
	bool is_new;
	id = stacktab_intern_folded(
	        r, heap_id, pcs, n,
	        k->fold_ok ? k->fold : hp_stack_fold_all(pcs, n),
	        truncated ? HP_STACK_TRUNCATED : 0, &is_new);
	if (id == 0) {
		if (HP_UNLIKELY(s->flags & HP_CFG_BLOCK_CLIENT) && !grown) {
			struct client_slot *ns =
			        client_grow(s, full_stack_table(r, n));
			grown = true;
			if (ns) {
				s = ns;
				r = &s->region;
				goto again;
			}
		}
		region_count(r, HP_CTR_STACK_FULL, 1);
		region_count(r, HP_CTR_STACK_FULL_BYTES, charged);
	} else if (is_new) {
		modules_check(r, pcs, n);
		if (HP_UNLIKELY(s->adaptive))
			adapt_stacks(s);
	}

	/* The entry goes in before the counters change: nobody can free a
	 * block malloc has not returned yet, and a failed insert may still
	 * move the sample to a larger region (--block-client). */
	struct hp_live_v2 v = {.stack_id = id,
	                       .heap_id = heap_id,
	                       .tid = thread_id(t),
	                       .size = size,
	                       .charged = charged,
	                       .objects_fp = objs,
	                       .ts_ns = ts};
	uint64_t seen = 0;
	if (HP_UNLIKELY(s->adaptive))
		seen = interval_of(
		        s, atomic_load_explicit(&r->hdr->current_interval,
		                                memory_order_relaxed));
	uint64_t lpos, lwas;
	struct hp_event_v2 *le;
	int lhow = s->live_log ? log_take(s, &le, &lpos, &lwas) : LOG_DIRECT;
	if (HP_UNLIKELY(lhow == LOG_SKIP)) {
		guard_leave(t, k->level, k->cx);
		return false;
	}
	if (lhow == LOG_SLOT) {
		/* The collector puts the entry in; the stack is charged
		 * before the event is out, so that the collector's discharge
		 * of a block that did not fit comes after it. */
		charge(&r->stacks[id], charged, objs);
		struct hp_event_v2 ev = {.ts_ns = ts,
		                         .addr = key,
		                         .size = size,
		                         .charged = charged,
		                         .alloc_ts_ns = objs,
		                         .stack_id = id,
		                         .tid = v.tid,
		                         .kind = HP_EV_ALLOC,
		                         .region = s->region_index,
		                         .heap_id = (uint16_t)heap_id};
		log_put(s, le, &ev, lpos, lwas);
		if (HP_UNLIKELY(size == 0) && heap_id == 0)
			region_count(r, HP_CTR_ZERO_SIZE, 1);
		if (HP_UNLIKELY(k->level != 0))
			region_count(r, HP_CTR_NESTED, 1);
		guard_leave(t, k->level, k->cx);
		return true;
	}
	/* Keys 0 and 1 mark empty and busy slots: such a block (only a
	 * custom heap's key can be one) is recorded but not tracked. */
	bool keyable = key > HP_LIVE_BUSY;
	rc = keyable ? livetab_insert_p(r, key, &v, &pressure) : -EINVAL;
	if (rc != 0 && keyable && HP_UNLIKELY(s->flags & HP_CFG_BLOCK_CLIENT) &&
	    !grown) {
		struct client_slot *ns = client_grow(s, HP_TAB_LIVE_KEYS);
		grown = true;
		if (ns) {
			s = ns;
			r = &s->region;
			goto again;
		}
	}
	struct hp_stack_v1 *st = &r->stacks[id];
	if (HP_UNLIKELY(s->track_max))
		stackmax_touch(r, id);
	charge(st, charged, objs);
	/* What was asked is what is recorded; that it was nothing is said. */
	if (HP_UNLIKELY(size == 0) && heap_id == 0)
		region_count(r, HP_CTR_ZERO_SIZE, 1);
	if (rc != 0) {
		/* Its free could never be matched: count it as freed now so
		 * the space view is not inflated, and say so. */
		discharge(st, charged, objs, s->live_log);
		region_count(r, HP_CTR_LIVE_FULL, 1);
		region_count(r, HP_CTR_LIVE_FULL_BYTES, charged);
	} else if (HP_UNLIKELY(s->track_max)) {
		peak_alloc(s, charged);
	}
	if (HP_UNLIKELY(s->adaptive) && rc == 0 && pressure >= s->live_trigger)
		adapt_live(s, key, seen);
	if (HP_UNLIKELY(s->traced))
		trace_alloc(s, key, &v, rc != 0, k->level != 0);
	if (HP_UNLIKELY(k->level != 0))
		region_count(r, HP_CTR_NESTED, 1);
	guard_leave(t, k->level, k->cx);
	return true;
}

/* ---- free ----------------------------------------------------------- */

void recorder_apply_free(struct client_slot *s, uint64_t key,
                         const struct hp_live_v2 *v)
{
	struct hp_region *r = &s->region;
	if (v->stack_id >= r->stacks_cap)
		return;
	if (HP_UNLIKELY(s->track_max))
		stackmax_touch(r, v->stack_id);
	discharge(&r->stacks[v->stack_id], v->charged, v->objects_fp,
	          s->live_log);
	if (HP_UNLIKELY(s->track_max))
		stackmax_free(&s->root->region, v->charged);
	if (HP_UNLIKELY(s->traced))
		trace_free(s, key, v);
}

/* A free that missed the current region: the block may have been sampled
 * into an earlier region of this attach (GROW).  Bucket fill makes each
 * miss two byte loads when sampling. */
static __attribute__((noinline)) struct client_slot *
take_retired(struct client_slot *s, void *ptr, struct hp_live_v2 *out)
{
	for (int hops = 0; s && hops < HP_CLIENT_SLOTS; s = s->prev, hops++)
		if (livetab_remove(&s->region, (uintptr_t)ptr, out))
			return s;
	return NULL;
}

struct client_slot *recorder_take(void *ptr, struct hp_live_v2 *out)
{
	struct client_slot *s = client_cur();
	if (HP_UNLIKELY(!s)) {
		early_free((uintptr_t)ptr);
		return NULL;
	}
	if (s->live_log) {
		if (log_free(s, (uintptr_t)ptr) ||
		    !log_direct_remove(s->root, (uintptr_t)ptr, out))
			return NULL;
		return s;
	}
	if (livetab_remove(&s->region, (uintptr_t)ptr, out))
		return s;
	if (HP_UNLIKELY(s->prev != NULL))
		return take_retired(s->prev, ptr, out);
	return NULL;
}

void recorder_put_back(struct client_slot *s, void *ptr,
                       const struct hp_live_v2 *v)
{
	struct hp_region *r = &s->region;
	if (livetab_insert(r, (uintptr_t)ptr, v) != 0) {
		/* Counted (and traced) as freed: it can never be matched. */
		recorder_apply_free(s, (uintptr_t)ptr, v);
		region_count(r, HP_CTR_LIVE_FULL, 1);
		region_count(r, HP_CTR_LIVE_FULL_BYTES, v->charged);
	}
}

void recorder_forget(uint64_t key)
{
	/* No re-entrancy guard: removal never allocates, and a block freed
	 * inside a hook must still leave the table or its key could be
	 * matched to a stale record later. */
	struct hp_live_v2 v;
	struct client_slot *s = recorder_take((void *)(uintptr_t)key, &v);
	if (s)
		recorder_apply_free(s, key, &v);
}

void recorder_free(void *ptr)
{
	recorder_forget((uintptr_t)ptr);
}
