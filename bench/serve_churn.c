/*
 * serve_churn: a steady heap workload for bench/serve.sh (`heapprof
 * serve` over time, docs/FLEET.md "What it costs").
 *
 *     serve_churn SECONDS [RATE]
 *
 * Keeps a ring of 2048 blocks and, RATE times a second (default 20000),
 * frees the oldest and allocates a new one in its place, from one of four
 * call sites with sizes of their own (small strings, nodes, buffers, a
 * few large arrays): the live heap stays near 2.5 MB (the ring's blocks
 * average about 1.2 KiB), the allocated bytes grow steadily.  The work is
 * paced in slices of 10 ms (nanosleep between them), so it uses a small
 * part of a core (under 2% bare at the default rate), not all of it.
 * After SECONDS (0: until killed) it frees everything and exits 0.  It
 * prints nothing; bench/serve.sh starts it under two names (copies of
 * the binary): one restarted every few seconds, one that lives for the
 * whole run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING 2048

static void *ring[RING];

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* The call sites: separate functions, so that the profile has a few
 * stacks of its own to show. */
__attribute__((noinline)) static void *churn_string(void)
{
	size_t n = 16 + rng() % 112;
	char *p = malloc(n);
	if (p)
		memset(p, 's', n);
	return p;
}

__attribute__((noinline)) static void *churn_node(void)
{
	return calloc(1, 64 + rng() % 448);
}

__attribute__((noinline)) static void *churn_buffer(void)
{
	size_t n = 1024 + rng() % 7168;
	char *p = malloc(n);
	if (p)
		p[0] = p[n - 1] = 'b';
	return p;
}

__attribute__((noinline)) static void *churn_array(void)
{
	size_t n = 32768 + rng() % 32768;
	char *p = malloc(n);
	if (p)
		memset(p, 0, 4096);
	return p;
}

__attribute__((noinline)) static void *churn_one(void)
{
	unsigned k = (unsigned)(rng() % 100);
	if (k < 50)
		return churn_string();
	if (k < 85)
		return churn_node();
	if (k < 99)
		return churn_buffer();
	return churn_array();
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: serve_churn SECONDS [RATE]\n");
		return 2;
	}
	double seconds = strtod(argv[1], NULL);
	long rate = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
	if (seconds < 0 || rate <= 0) {
		fprintf(stderr, "serve_churn: SECONDS >= 0, RATE > 0\n");
		return 2;
	}
	rng_state ^= (uint64_t)now() * 1000003u;
	long per_slice = rate / 100 > 0 ? rate / 100 : 1;
	double t0 = now(), next = t0;
	size_t at = 0;
	for (;;) {
		for (long i = 0; i < per_slice; i++) {
			free(ring[at]);
			ring[at] = churn_one();
			at = (at + 1) % RING;
		}
		next += 0.01;
		double t = now();
		if (seconds > 0 && t - t0 >= seconds)
			break;
		if (next > t) {
			double d = next - t;
			struct timespec ts = {
			        (time_t)d,
			        (long)((d - (double)(time_t)d) * 1e9)};
			nanosleep(&ts, NULL);
		} else if (t - next > 1.0) {
			next = t; /* far behind (stopped): no burst to catch up
			           */
		}
	}
	for (size_t i = 0; i < RING; i++)
		free(ring[i]);
	return 0;
}
