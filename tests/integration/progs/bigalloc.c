/*
 * bigalloc: large allocation volumes at a few callsites, for the sampling
 * test at the default interval (tests/integration/test_sampling.sh).
 *
 *   alloc_small  160000 x malloc(100)           = 16,000,000 B, all live
 *   alloc_mixed  sizes 1..8000 (xorshift, fixed seed) until >= 16,000,000 B,
 *                all freed
 *   alloc_churn  80000 x (malloc(200), free)    = 16,000,000 B, none live
 *   alloc_large  100 x malloc(65536)            = 6,553,600 B, 50 freed
 *                (>= the interval: recorded exactly)
 *
 * Prints the truth per callsite for the interval given as argv[1] (default
 * 4096):
 *   truth NAME alloc_bytes=B alloc_count=N live_bytes=L live_count=M
 *         var_bytes=VB var_objects=VO
 * where VB and VO bound the variance of an unbiased Poisson-per-byte estimate
 * of the bytes and of the object count: each allocation of size s < I adds
 * s*I to VB and I/s to VO (the variance of either usual estimator, I*hits or
 * s/p with p = 1-exp(-s/I), is at most that); allocations >= I add nothing.
 * Exits 0, 1 if an allocation failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;
static int failures;
static double interval = 4096;

struct truth {
	const char *name;
	unsigned long long alloc_bytes, alloc_count, live_bytes, live_count;
	double var_bytes, var_objects;
};

static void charge(struct truth *t, size_t s)
{
	t->alloc_bytes += s;
	t->alloc_count++;
	t->live_bytes += s;
	t->live_count++;
	if ((double)s < interval) {
		t->var_bytes += (double)s * interval;
		t->var_objects += interval / (double)s;
	}
}

static void uncharge(struct truth *t, size_t s)
{
	t->live_bytes -= s;
	t->live_count--;
}

static void use(void *p, size_t s)
{
	if (!p) {
		failures++;
		return;
	}
	((unsigned char *)p)[0] = 1;
	((unsigned char *)p)[s - 1] = 2;
	sink += ((unsigned char *)p)[s - 1];
}

#define NSMALL 160000
static void *small[NSMALL];
static struct truth t_small = {"alloc_small"};
NOINLINE void alloc_small(void)
{
	for (int i = 0; i < NSMALL; i++) {
		small[i] = malloc(100);
		use(small[i], 100);
		charge(&t_small, 100);
	}
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define NMIXED_MAX 20000
static void *mixed[NMIXED_MAX];
static size_t mixed_size[NMIXED_MAX];
static int nmixed;
static struct truth t_mixed = {"alloc_mixed"};
NOINLINE void alloc_mixed(void)
{
	while (t_mixed.alloc_bytes < 16000000ull && nmixed < NMIXED_MAX) {
		size_t s = 1 + (size_t)(xorshift() % 8000);
		mixed[nmixed] = malloc(s);
		use(mixed[nmixed], s);
		mixed_size[nmixed] = s;
		charge(&t_mixed, s);
		nmixed++;
	}
}

NOINLINE void free_mixed(void)
{
	for (int i = 0; i < nmixed; i++) {
		free(mixed[i]);
		uncharge(&t_mixed, mixed_size[i]);
	}
}

static struct truth t_churn = {"alloc_churn"};
NOINLINE void alloc_churn(void)
{
	for (int i = 0; i < 80000; i++) {
		void *p = malloc(200);
		use(p, 200);
		charge(&t_churn, 200);
		free(p);
		uncharge(&t_churn, 200);
	}
}

static void *large[100];
static struct truth t_large = {"alloc_large"};
NOINLINE void alloc_large(void)
{
	for (int i = 0; i < 100; i++) {
		large[i] = malloc(65536);
		use(large[i], 65536);
		charge(&t_large, 65536);
	}
	for (int i = 0; i < 50; i++) {
		free(large[i]);
		uncharge(&t_large, 65536);
	}
}

static void print_truth(const struct truth *t)
{
	printf("truth %s alloc_bytes=%llu alloc_count=%llu live_bytes=%llu "
	       "live_count=%llu var_bytes=%.0f var_objects=%.0f\n",
	       t->name, t->alloc_bytes, t->alloc_count, t->live_bytes,
	       t->live_count, t->var_bytes, t->var_objects);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		interval = strtod(argv[1], NULL);
	if (!(interval >= 1))
		interval = 4096;
	alloc_small();
	alloc_mixed();
	free_mixed();
	alloc_churn();
	alloc_large();
	print_truth(&t_small);
	print_truth(&t_mixed);
	print_truth(&t_churn);
	print_truth(&t_large);
	printf("bigalloc: failures %d\n", failures);
	return failures ? 1 : 0;
}
