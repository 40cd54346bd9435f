/*
 * The Poisson sampler: the charged bytes must be an unbiased estimate of
 * the allocated bytes with the spread the maths predicts (docs/SAMPLING.md),
 * the object-count estimate must be unbiased, and allocations at or above
 * the interval must be charged exactly.
 */
#include <math.h>
#include <stdlib.h>

#include "unit.h"

/* The sampler is internal to the client library; test it in place. */
#include "../../src/client/sampler.c"
/* The stub unwinder below stands in for unwind.c. */
#define RECORDER_CAPTURE unwind_capture
#include "../../src/client/recorder.c"
/* The thread's record (its generator and intervals). */
#include "../../src/client/thread.c"

struct client_state hp_client;
__thread struct client_tls hp_tls;
_Atomic int hp_active;
/* client.c's fork guard: this is the process that attached. */
static const int fork_guard_one = 1;
const volatile int *hp_fork_guard = &fork_guard_one;
struct client_slot *client_forked_unseen(void)
{
	return NULL;
}
/* recorder.c needs these; the sampler tests never reach them. */
#include "unwind_stub.h"
uint32_t unwind_capture(struct capture_ctx *c, uint32_t max, uint32_t mode,
                        uintptr_t caller, uint32_t *flags)
{
	*flags = 0;
	return 0;
}
uint32_t unwind_thread_id(void)
{
	return 1;
}
void modules_check(struct hp_region *r, const uint64_t *pcs, uint32_t n)
{
}
void client_stop(struct client_slot *s, uint32_t reason)
{
}
struct client_slot *client_grow(struct client_slot *s, uint32_t table)
{
	return NULL;
}

/* A thread that has not allocated yet (its record kept). */
static void tls_reset(void)
{
	struct client_thread *th = hp_tls.th;
	hp_tls = (struct client_tls){.th = th};
	if (th && th != HP_THREAD_GONE)
		th->sm = (struct client_sampler){.seeded = 0};
}

/* The thread's sampler (its record). */
static struct client_sampler *sm(void)
{
	struct client_thread *th = client_thread();
	CHECK(th != NULL);
	return &th->sm;
}

/* Charge for one allocation, as client_on_alloc computes it. */
static uint64_t charge_of(size_t size, bool *sampled, bool *exact)
{
	*exact = size >= hp_client.exact_from;
	if (*exact) {
		*sampled = true;
		return size;
	}
	hp_tls.bytes_left -= (int64_t)size;
	if (hp_tls.bytes_left > 0) {
		*sampled = false;
		return 0;
	}
	uint64_t c = sampler_slow(&hp_tls, size);
	*sampled = c != 0;
	return c;
}

static void set_interval(uint64_t i)
{
	hp_client.interval = i;
	hp_client.exact_from = i == 1 ? 0 : i;
	tls_reset();
}

/* Runs `trials` independent streams of n allocations of `size` bytes and
 * checks the mean and spread of the byte and object estimates. */
static void check_stream(uint64_t interval, size_t size, unsigned n,
                         unsigned trials)
{
	set_interval(interval);
	double bytes = (double)size * n;
	double sum = 0, sumsq = 0, objsum = 0;
	for (unsigned t = 0; t < trials; t++) {
		tls_reset();
		double est = 0, obj = 0;
		for (unsigned i = 0; i < n; i++) {
			bool sampled, exact;
			uint64_t c = charge_of(size, &sampled, &exact);
			est += (double)c;
			if (sampled)
				obj += (double)recorder_objects_fp(
				               size, exact,
				               sampler_obj_interval()) /
				       HP_OBJ_FP_ONE;
		}
		sum += est;
		sumsq += est * est;
		objsum += obj;
	}
	double mean = sum / trials;
	double var = sumsq / trials - mean * mean;
	/* Sample points form a Poisson process of rate 1/interval over the
	 * byte stream: the charge is interval * Poisson(bytes / interval),
	 * variance interval * bytes. */
	double sd_theory = sqrt((double)interval * bytes);
	double se_mean = sd_theory / sqrt((double)trials);
	if (fabs(mean - bytes) > 4 * se_mean)
		fprintf(stderr, "mean %.0f vs %.0f (4 se = %.0f)\n", mean,
		        bytes, 4 * se_mean);
	CHECK(fabs(mean - bytes) <= 4 * se_mean);
	double sd = sqrt(var > 0 ? var : 0);
	if (fabs(sd - sd_theory) > 0.1 * sd_theory)
		fprintf(stderr, "sd %.0f vs theory %.0f\n", sd, sd_theory);
	CHECK(fabs(sd - sd_theory) <= 0.1 * sd_theory);
	/* Object estimate: mean count within 3% of n (it has its own spread,
	 * far smaller than 3% at these trial counts). */
	double objmean = objsum / trials;
	if (fabs(objmean - n) > 0.03 * n)
		fprintf(stderr, "objects %.1f vs %u\n", objmean, n);
	CHECK(fabs(objmean - n) <= 0.03 * n);
}

static void test_small_allocations(void)
{
	check_stream(4096, 100, 10000, 2000);
}

static void test_mid_allocations(void)
{
	check_stream(4096, 1500, 2000, 2000);
}

static void test_other_interval(void)
{
	check_stream(65536, 512, 20000, 1000);
}

/* A thread without a record (the pool empty, or its record given back at
 * its exit) draws every gap from a generator seeded afresh: the same
 * estimates, unbiased and with the same spread. */
static void test_without_record(void)
{
	struct client_thread *keep = hp_tls.th;
	hp_tls.th = HP_THREAD_GONE;
	check_stream(4096, 100, 10000, 1000);
	check_stream(4096, 1500, 2000, 1000);
	CHECK(hp_tls.th == HP_THREAD_GONE); /* it took none */
	hp_tls.th = keep;
}

static void test_large_is_exact(void)
{
	set_interval(4096);
	bool sampled, exact;
	CHECK_EQ_U64(charge_of(4096, &sampled, &exact), 4096);
	CHECK(sampled && exact);
	CHECK_EQ_U64(charge_of(1 << 20, &sampled, &exact), 1 << 20);
	CHECK_EQ_U64(recorder_objects_fp(1 << 20, true, 4096), HP_OBJ_FP_ONE);
}

static void test_interval_one_records_everything(void)
{
	set_interval(1);
	for (size_t s = 0; s < 100; s++) {
		bool sampled, exact;
		CHECK_EQ_U64(charge_of(s, &sampled, &exact), s);
		CHECK(sampled && exact);
	}
}

static void test_charge_is_multiple_of_interval(void)
{
	set_interval(4096);
	for (int i = 0; i < 100000; i++) {
		bool sampled, exact;
		uint64_t c = charge_of(300, &sampled, &exact);
		CHECK(c % 4096 == 0);
		if (c % 4096)
			break;
	}
}

/*
 * Adaptive sampling changes the interval while a thread is between sample
 * points.  The point that ends a gap is charged the interval that gap was
 * drawn with; later gaps use the new interval.  Deterministic: the first
 * sample after the change is charged the old interval, then the new.
 */
static void test_interval_change_charges_gap_interval(void)
{
	set_interval(4096);
	bool sampled, exact;
	charge_of(1, &sampled, &exact); /* seeds: gap drawn at 4096 */
	CHECK_EQ_U64(sm()->gap_interval, 4096);
	hp_client.interval = 16384; /* as recorder_adapt does */
	uint64_t first = 0, later = 0;
	int samples = 0;
	for (int i = 0; i < 1000000 && samples < 50; i++) {
		uint64_t c = charge_of(64, &sampled, &exact);
		if (!c)
			continue;
		if (samples == 0) {
			first = c;
			/* Its object estimate uses the old interval too. */
			CHECK_EQ_U64(sampler_obj_interval(), 4096);
		} else {
			later += c % 16384;
			CHECK_EQ_U64(sampler_obj_interval(), 16384);
		}
		samples++;
	}
	/* The gap that ran out was drawn at 4096; when the gap drawn after
	 * it (at 16384) is shorter than the allocation's overshoot (64 B at
	 * most: 0.4% of the runs), that one is charged too, at 16384. */
	CHECK(first >= 4096 && (first - 4096) % 16384 == 0);
	CHECK_EQ_U64(later, 0); /* every later charge a multiple of 16384 */
	CHECK_EQ_U64(samples, 50);
}

/*
 * The estimate stays unbiased across interval changes: streams whose
 * interval doubles twice part-way (4096 -> 8192 -> 16384), bytes and
 * objects both.
 */
static void test_adaptive_stream_unbiased(void)
{
	const size_t size = 200;
	const unsigned n = 30000, trials = 1500;
	double bytes = (double)size * n;
	double sum = 0, sumsq = 0, objsum = 0;
	for (unsigned t = 0; t < trials; t++) {
		set_interval(4096);
		double est = 0, obj = 0;
		for (unsigned i = 0; i < n; i++) {
			if (i == n / 3 || i == 2 * n / 3)
				hp_client.interval = hp_client.interval * 2;
			bool sampled, exact;
			uint64_t c = charge_of(size, &sampled, &exact);
			est += (double)c;
			if (sampled)
				obj += (double)recorder_objects_fp(
				               size, exact,
				               sampler_obj_interval()) /
				       HP_OBJ_FP_ONE;
		}
		sum += est;
		sumsq += est * est;
		objsum += obj;
	}
	double mean = sum / trials;
	double var = sumsq / trials - mean * mean;
	/* Variance of the piecewise process: sum over thirds of I * bytes. */
	double sd_theory = sqrt((4096.0 + 8192.0 + 16384.0) * bytes / 3);
	double se = sd_theory / sqrt((double)trials);
	if (fabs(mean - bytes) > 4 * se)
		fprintf(stderr, "adaptive mean %.0f vs %.0f (4 se = %.0f)\n",
		        mean, bytes, 4 * se);
	CHECK(fabs(mean - bytes) <= 4 * se);
	double sd = sqrt(var > 0 ? var : 0);
	CHECK(fabs(sd - sd_theory) <= 0.12 * sd_theory);
	double objmean = objsum / trials;
	if (fabs(objmean - n) > 0.03 * n)
		fprintf(stderr, "adaptive objects %.1f vs %u\n", objmean, n);
	CHECK(fabs(objmean - n) <= 0.03 * n);
}

/* neg_log against libm's log over the whole range of u, its ends, and
 * around the points where the reduction changes (powers of two, sqrt 2). */
static void test_neg_log_is_log(void)
{
	double worst = 0;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 2000000; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		uint64_t k = (x * 0x2545f4914f6cdd1dull) >> 11;
		/* every scale: k's top bits shifted away at random */
		double u = (double)((k >> (i % 53)) + 1) * 0x1.0p-53;
		double want = -log(u), got = neg_log(u);
		double err = fabs(got - want);
		if (err > worst)
			worst = err;
	}
	static const double edges[] = {0x1.0p-53,
	                               0x1.0p-52,
	                               0.5,
	                               0.25,
	                               0.7071067811865475,
	                               0.7071067811865476,
	                               0.9999999999999999,
	                               1.0};
	for (unsigned i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		double err = fabs(neg_log(edges[i]) + log(edges[i]));
		if (err > worst)
			worst = err;
	}
	CHECK(worst < 1e-12);
	CHECK(neg_log(1.0) == 0.0);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"small_allocations", test_small_allocations},
	        {"mid_allocations", test_mid_allocations},
	        {"other_interval", test_other_interval},
	        {"without_record", test_without_record},
	        {"large_is_exact", test_large_is_exact},
	        {"interval_one_records_everything",
	         test_interval_one_records_everything},
	        {"charge_is_multiple_of_interval",
	         test_charge_is_multiple_of_interval},
	        {"interval_change_charges_gap_interval",
	         test_interval_change_charges_gap_interval},
	        {"adaptive_stream_unbiased", test_adaptive_stream_unbiased},
	        {"neg_log_is_log", test_neg_log_is_log},
	        {NULL, NULL},
	};
	return unit_main("sampler", tests);
}
