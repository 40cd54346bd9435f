/*
 * Poisson sampling per byte (the maths is in docs/SAMPLING.md).  Each thread
 * walks the stream of bytes it allocates; sample points are spaced by
 * exponentially distributed gaps of mean `interval`.  An allocation that
 * covers k sample points is charged k * interval bytes, so the expected
 * charge equals its size.  The fast path (client_on_alloc) only subtracts.
 *
 * Adaptive sampling (HP_CFG_ADAPTIVE) changes the interval while threads
 * run.  A thread picks the new interval up when it draws its next gap, and
 * each sample point is charged the interval of the gap it ends
 * (client_sampler.gap_interval): the rate is constant within a gap, so by
 * the memoryless property charging 1/rate per point stays unbiased however
 * the rate changes between points.  The object estimate of a sampled
 * allocation uses the interval of the gap pending when it began
 * (client_sampler.obj_interval), which is the one its sampling
 * probability depended on.
 *
 * The countdown is in static TLS (hp_tls.bytes_left: the fast path); the
 * generator and the intervals are in the thread's record (thread.c).  A
 * thread without one draws each gap from a generator seeded afresh, and
 * takes the interval in force for the gap pending.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "client/client.h"

static uint64_t rng_next(struct client_sampler *t)
{
	/* xorshift64*: fast, good enough to place sample points. */
	uint64_t x = t->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

/*
 * -ln(u) for u in [2^-53, 1], within 1e-13 of libm's: u = m * 2^e with m
 * in [sqrt(1/2), sqrt(2)), ln(m) = 2 atanh(t) for t = (m - 1) / (m + 1),
 * |t| < 0.172, whose series to t^15 leaves less than 1e-13 of ln(m) out.
 * Not libm's log: inside the hook of a sampled allocation that was three
 * more cache lines of code (and some 50 instructions) to fetch, each
 * time, at the default interval where the hook's code is cold.
 */
static double neg_log(double u)
{
	uint64_t bits;
	__builtin_memcpy(&bits, &u, sizeof(bits));
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	double m;
	__builtin_memcpy(&m, &bits, sizeof(m));
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	double t = (m - 1.0) / (m + 1.0), t2 = t * t;
	double p = t2 * (2.0 / 9 +
	                 t2 * (2.0 / 11 + t2 * (2.0 / 13 + t2 * (2.0 / 15))));
	p = t * (2.0 + t2 * (2.0 / 3 + t2 * (2.0 / 5 + t2 * (2.0 / 7 + p))));
	return -((double)e * 0.69314718055994530942 + p);
}

static int64_t exp_gap(struct client_sampler *t, uint64_t interval)
{
	/* u in (0, 1]: 53 random bits, never 0 so ln(u) is finite. */
	double u = (double)((rng_next(t) >> 11) + 1) * 0x1.0p-53;
	double gap = neg_log(u) * (double)interval;
	if (gap > 9.0e18)
		gap = 9.0e18;
	return (int64_t)(gap + 0.5);
}

/* The sampling interval in force now (adaptive sampling raises it). */
static uint64_t interval_now(void)
{
	uint64_t interval =
	        atomic_load_explicit(&hp_client.interval, memory_order_relaxed);
	return interval ? interval : 1;
}

/* Draws the next gap at the interval in force now and remembers it. */
static int64_t draw_gap(struct client_sampler *t)
{
	uint64_t interval = interval_now();
	t->gap_interval = interval;
	return exp_gap(t, interval);
}

/*
 * Seeds a thread's generator at its first allocation, inside the hook: no
 * system call (the thread id comes from glibc's descriptor), just values
 * that differ between threads and runs: the time stamp counter, a count
 * of seeded generators, the thread id and where the generator lies.  (A
 * generator of a thread without a record, seeded at each draw, takes the
 * thread pointer for the id: unwind_thread_id falls back to gettid.)
 */
static void seed(struct client_sampler *t)
{
	static _Atomic uint64_t seeded_threads;
	uint64_t n = atomic_fetch_add_explicit(&seeded_threads, 1,
	                                       memory_order_relaxed);
#if defined(__x86_64__) || defined(__i386__)
	uint64_t now = __builtin_ia32_rdtsc();
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO */
	uint64_t now = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32);
#endif
	struct client_thread *th = hp_tls.th;
	uint64_t id = (uintptr_t)th > (uintptr_t)HP_THREAD_GONE && t == &th->sm
	                      ? (uint64_t)unwind_thread_id()
	                      : (uint64_t)thread_pointer();
	uint64_t s =
	        now ^ (id << 17) ^ (uintptr_t)t ^ (n * 0x9e3779b97f4a7c15ull);
	s ^= s >> 33;
	s *= 0xff51afd7ed558ccdull;
	s ^= s >> 33;
	t->rng = s ? s : 0x9e3779b97f4a7c15ull;
	t->seeded = 1;
}

int64_t sampler_gap(struct client_sampler *t, uint64_t interval)
{
	if (HP_UNLIKELY(!t->seeded))
		seed(t);
	return exp_gap(t, interval ? interval : 1);
}

struct client_sampler *sampler_of(struct client_thread *th,
                                  struct client_sampler *local)
{
	if (HP_LIKELY(th != NULL))
		return &th->sm;
	*local = (struct client_sampler){.seeded = 0};
	return local;
}

uint64_t sampler_slow(struct client_tls *t, size_t size)
{
	struct client_sampler local, *sm = sampler_of(client_thread(), &local);
	if (HP_UNLIKELY(!(t->flags & HP_TLS_GAP_DRAWN))) {
		/* First allocation of this thread: bytes_left was 0 - size.
		 * Place the first sample point and re-test.  (The generator
		 * may be seeded already, by a custom heap's sampler.) */
		t->flags |= HP_TLS_GAP_DRAWN;
		if (!sm->seeded)
			seed(sm);
		t->bytes_left += draw_gap(sm);
		if (t->bytes_left > 0)
			return 0;
	} else if (HP_UNLIKELY(!sm->gap_interval)) {
		/* No record when the pending gap was drawn (or none now): it
		 * was drawn at the interval in force then, which is the one
		 * now unless adaptive sampling changed it meanwhile. */
		if (!sm->seeded)
			seed(sm);
		sm->gap_interval = interval_now();
	}
	sm->obj_interval = sm->gap_interval;
	uint64_t charged = 0;
	while (t->bytes_left <= 0) {
		charged += sm->gap_interval;
		t->bytes_left += draw_gap(sm);
	}
	return charged;
}

uint64_t sampler_obj_interval(void)
{
	struct client_thread *th = client_thread();
	return th ? th->sm.obj_interval : interval_now();
}

void client_alloc_recorded(void *p, size_t size, uintptr_t caller, int how)
{
	if (how == 2) {
		if (p)
			recorder_sample(p, size, size, true, caller);
		return;
	}
	struct client_tls *t = &hp_tls;
	if (!p) {
		/* A failed allocation moves no sample point. */
		t->bytes_left += (int64_t)size;
		return;
	}
	uint64_t charged = sampler_slow(t, size);
	if (charged)
		recorder_sample(p, size, charged, false, caller);
}
