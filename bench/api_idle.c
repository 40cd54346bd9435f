/*
 * api_idle: what a call of the custom allocator API costs a program.
 *
 *     api_idle [REPS [MS]]          (make bench-api)
 *
 * Linked with -lheapprof, like a program that uses the API.  Run bare, no
 * session profiles it: AHeapProfile_reportAllocation and
 * AHeapProfile_reportFree should cost a few nanoseconds (docs/HEAPS.md).
 * Run under `heapprof record --all-heaps [-i N] -- build/bench/api_idle`,
 * the same loops measure a profiled heap (then reportAllocation is only
 * measured paired with reportFree: alone, every recorded block would stay
 * live and fill the live table).
 *
 * Each series makes N calls in a loop, N chosen so that one run takes at
 * least MS milliseconds (default 20); the series run round-robin, REPS
 * times (default 11), with the starting series rotated so that drift of a
 * noisy machine spreads over all of them; the median run is reported in
 * ns per call with the range.  The baseline is the same loop calling an
 * empty function of this binary with the same arguments, kept out of
 * line and out of the compiler's interprocedural analysis, so that
 * "over baseline" is what the library adds to a call the program makes
 * anyway (the API call also goes through the PLT; the baseline does not).
 */
#include <heapprof/heap_profile.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__) && !defined(__clang__)
#define OUT_OF_LINE __attribute__((noinline, noipa))
#else
#define OUT_OF_LINE __attribute__((noinline))
#endif

#define MAX_REPS 101

static uint32_t heap;
/* The interval the session's enable callback gave; 0: not profiled. */
static _Atomic uint64_t profiled_at;
/* Reports that returned true (recorded), to show that a profiled run
 * really recorded. */
static uint64_t recorded, reported;

static void on_enable(void *data, const AHeapProfileEnableCallbackInfo *info)
{
	(void)data;
	atomic_store(&profiled_at,
	             AHeapProfileEnableCallbackInfo_getSamplingInterval(info));
}

/* The baselines: the signatures of the API calls, doing nothing.  The
 * empty asm keeps the call (it could have side effects). */
OUT_OF_LINE bool empty_report(uint32_t heap_id, uint64_t alloc_id,
                              uint64_t size)
{
	__asm__ volatile("" : : "r"(heap_id), "r"(alloc_id), "r"(size));
	return false;
}

OUT_OF_LINE void empty_free(uint32_t heap_id, uint64_t alloc_id)
{
	__asm__ volatile("" : : "r"(heap_id), "r"(alloc_id));
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Block ids as a pool would hand them out: 48-byte objects, 64 apart. */
#define BASE 0x7f0000000000ull
#define SIZE 48

static OUT_OF_LINE void run_loop(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		__asm__ volatile("" : : "r"(i));
}

static OUT_OF_LINE void run_call(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		empty_report(heap, BASE + i * 64, SIZE);
}

static OUT_OF_LINE void run_alloc(uint64_t n)
{
	uint64_t r = 0;
	for (uint64_t i = 0; i < n; i++)
		r += AHeapProfile_reportAllocation(heap, BASE + i * 64, SIZE);
	recorded += r;
	reported += n;
}

static OUT_OF_LINE void run_free(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		AHeapProfile_reportFree(heap, BASE + i * 64);
}

static OUT_OF_LINE void run_call2(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		empty_report(heap, BASE + i * 64, SIZE);
		empty_free(heap, BASE + i * 64);
	}
}

static OUT_OF_LINE void run_pair(uint64_t n)
{
	uint64_t r = 0;
	for (uint64_t i = 0; i < n; i++) {
		r += AHeapProfile_reportAllocation(heap, BASE + i * 64, SIZE);
		AHeapProfile_reportFree(heap, BASE + i * 64);
	}
	recorded += r;
	reported += n;
}

struct series {
	const char *name;
	void (*run)(uint64_t n);
	int baseline;       /* index of the series it is compared with; -1 */
	bool when_profiled; /* measured when a session profiles the heap */
	uint64_t n;         /* calls per run */
	double ns[MAX_REPS];
};

static struct series S[] = {
        {"empty loop (per iteration)", run_loop, -1, true, 0, {0}},
        {"empty function call: baseline", run_call, -1, true, 0, {0}},
        {"AHeapProfile_reportAllocation", run_alloc, 1, false, 0, {0}},
        {"AHeapProfile_reportFree", run_free, 1, true, 0, {0}},
        {"two empty calls: pair baseline", run_call2, -1, true, 0, {0}},
        {"reportAllocation + reportFree", run_pair, 4, true, 0, {0}},
};
#define NSERIES (sizeof(S) / sizeof(S[0]))

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 11;
	long ms = argc > 2 ? atol(argv[2]) : 20;
	if (argc > 3 || reps < 1 || reps > MAX_REPS || ms < 1 || ms > 10000) {
		fprintf(stderr,
		        "usage: api_idle [REPS (1-%d) [MS (1-10000)]]\n",
		        MAX_REPS);
		return 2;
	}
	/* Registered as a program would, plus an enable callback to learn
	 * whether a session profiles the heap (with `record -- CMD` it runs
	 * inside registerHeap).  The callback thread heapprof starts for it
	 * sleeps in poll() and is not on the reporting path. */
	AHeapInfo *info = AHeapInfo_create("bench.api");
	AHeapInfo_setEnabledCallback(info, on_enable, NULL);
	heap = AHeapProfile_registerHeap(info);
	if (!heap) {
		fprintf(stderr, "api_idle: AHeapProfile_registerHeap failed\n");
		return 1;
	}
	uint64_t iv = atomic_load(&profiled_at);
	/* A heap a session profiles when the loops start stays profiled for
	 * the run: `record -- CMD` ends with the program. */
	for (size_t k = 0; k < NSERIES; k++) {
		if (iv && !S[k].when_profiled)
			continue;
		uint64_t n = 1024;
		for (;;) {
			uint64_t t0 = now_ns();
			S[k].run(n);
			uint64_t dt = now_ns() - t0;
			if (dt >= (uint64_t)ms * 1000000u || n >= (1ull << 40))
				break;
			/* Aim a little past the target. */
			uint64_t want = dt ? n * ((uint64_t)ms * 1200000u) / dt
			                   : n * 16;
			n = want > n * 16 ? n * 16 : want > n ? want : n * 2;
		}
		S[k].n = n;
	}
	recorded = reported = 0;
	for (int r = 0; r < reps; r++) {
		for (size_t j = 0; j < NSERIES; j++) {
			struct series *s = &S[(j + (size_t)r) % NSERIES];
			if (!s->n)
				continue;
			uint64_t t0 = now_ns();
			s->run(s->n);
			uint64_t dt = now_ns() - t0;
			s->ns[r] = (double)dt / (double)s->n;
		}
	}

	printf("bench/api_idle: custom allocator API calls, ns per call "
	       "(median of %d runs of >= %ld ms; range)\n",
	       reps, ms);
	if (iv)
		printf("heap \"bench.api\": profiled at interval %llu; "
		       "%llu of %llu reportAllocation calls recorded\n",
		       (unsigned long long)iv, (unsigned long long)recorded,
		       (unsigned long long)reported);
	else
		printf("heap \"bench.api\": not profiled (no session, or one "
		       "that does not select it)\n");
	double med[NSERIES];
	for (size_t k = 0; k < NSERIES; k++) {
		struct series *s = &S[k];
		if (!s->n) {
			printf("  %-32s  (not measured while profiled)\n",
			       s->name);
			continue;
		}
		double lo = s->ns[0], hi = s->ns[0];
		for (int r = 1; r < reps; r++) {
			lo = s->ns[r] < lo ? s->ns[r] : lo;
			hi = s->ns[r] > hi ? s->ns[r] : hi;
		}
		med[k] = median(s->ns, reps);
		printf("  %-32s %8.2f  (%.2f-%.2f)", s->name, med[k], lo, hi);
		if (s->baseline >= 0 && S[s->baseline].n)
			printf("  %+.2f over baseline",
			       med[k] - med[s->baseline]);
		printf("\n");
	}
	return 0;
}
