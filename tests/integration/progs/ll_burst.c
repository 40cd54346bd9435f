/*
 * ll_burst: the live table's log (tests/integration/test_livelog.sh).
 *
 *   ll_burst READY GO N [threads]
 *
 * Allocates 1000 blocks of 48 bytes in ll_warm (all freed), creates READY
 * and waits for GO to exist (at most 60 s; "-" for either: no wait), then
 * makes N allocations of 48 bytes in ll_burst_alloc, keeping every 10th
 * and freeing the others at once.  Then a realloc that cannot succeed (the
 * block stays) and one that moves a kept block to 4096 bytes (ll_grow),
 * both in ll_realloc.  With "threads": two threads free the kept blocks
 * (half each; a process with threads keeps its live table itself, so
 * these are frees of blocks the collector put in from the log) and each
 * makes 1000 allocations of 64 bytes in ll_thread_alloc, freed at once.
 * Prints "kept K" (blocks still live in ll_burst_alloc) and, to stderr,
 * how long the burst took ("burst_ms M").  Exits 0 (3 if GO never came).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;
static void **kept;
static long nkept;

NOINLINE void *ll_warm(void)
{
	return malloc(48);
}

NOINLINE void *ll_burst_alloc(void)
{
	return malloc(48);
}

NOINLINE void *ll_realloc(void *p, size_t n)
{
	return realloc(p, n);
}

NOINLINE void *ll_thread_alloc(void)
{
	return malloc(64);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *worker(void *arg)
{
	long half = (long)(intptr_t)arg;
	long from = half ? nkept / 2 : 2, to = half ? nkept : nkept / 2;
	for (long i = from; i < to; i++) {
		free(kept[i]);
		kept[i] = NULL;
	}
	for (int i = 0; i < 1000; i++) {
		char *p = ll_thread_alloc();
		if (!p)
			return (void *)1;
		p[0] = (char)i;
		sink += (unsigned char)p[0];
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5)
		return 2;
	long n = atol(argv[3]);
	bool threads = argc == 5 && !strcmp(argv[4], "threads");
	for (int i = 0; i < 1000; i++) {
		char *p = ll_warm();
		if (!p)
			return 1;
		p[0] = (char)i;
		sink += (unsigned char)p[0];
		free(p);
	}
	if (strcmp(argv[1], "-")) {
		FILE *f = fopen(argv[1], "w");
		if (!f)
			return 2;
		fclose(f);
	}
	double deadline = now_ms() + 60000;
	while (strcmp(argv[2], "-") && access(argv[2], F_OK) != 0) {
		if (now_ms() > deadline)
			return 3;
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	kept = calloc((size_t)n / 10 + 1, sizeof(void *));
	if (!kept)
		return 1;
	double t0 = now_ms();
	for (long i = 0; i < n; i++) {
		char *p = ll_burst_alloc();
		if (!p)
			return 1;
		p[0] = (char)i;
		sink += (unsigned char)p[0];
		if (i % 10 == 0)
			kept[nkept++] = p;
		else
			free(p);
	}
	double t1 = now_ms();
	long live = nkept;
	if (nkept >= 2) {
		/* Fails: kept[0] stays where it is, live. */
		if (ll_realloc(kept[0], SIZE_MAX / 2) != NULL)
			return 1;
		/* Moves: kept[1] becomes a 4096-byte block of ll_realloc. */
		void *g = ll_realloc(kept[1], 4096);
		if (!g)
			return 1;
		kept[1] = g;
		live--;
	}
	if (threads) {
		pthread_t t[2];
		for (long i = 0; i < 2; i++)
			if (pthread_create(&t[i], NULL, worker, (void *)i))
				return 1;
		for (int i = 0; i < 2; i++) {
			void *rc;
			pthread_join(t[i], &rc);
			if (rc)
				return 1;
		}
		/* kept[0] and the grown kept[1] were left (the workers
		 * start at 2). */
		live = 1;
	}
	printf("kept %ld\n", live);
	fprintf(stderr, "burst_ms %.0f\n", t1 - t0);
	return 0;
}
