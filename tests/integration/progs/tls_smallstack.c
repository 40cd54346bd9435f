/*
 * tls_smallstack [EXTRA]: threads with a 16 KiB stack that use 11 KiB of
 * it and allocate (test_tls.sh).
 *
 * glibc carves a thread's static TLS (and its descriptor) out of the
 * stack the program sized: every byte of static TLS a preloaded library
 * has is a byte less for each such thread.  With a 16 KiB stack
 * (PTHREAD_STACK_MIN; glibc adds the guard page) a thread may use about
 * 11.6 KiB of it bare on Debian 12 x86-64 (glibc 2.36), 11.56 KiB with
 * today's libheapprof (56 bytes of TLS), and 10.5 KiB with the 1168
 * bytes the library had before issue 31, when this program died of
 * SIGSEGV.
 *
 * THREADS threads run at once, ROUNDS rounds each: tls_top allocates
 * (malloc, calloc, realloc), tls_deep takes an 8 KiB frame it touches and
 * allocates there (with 3.5 KiB left below it: more than the 1 KiB a
 * hook may use, so recorded exactly at -i 1), tls_deeper under it takes
 * 3 KiB more and touches it, then every block is freed but one per
 * round.  EXTRA (bytes, default 0) makes tls_deeper's frame larger: 1104
 * is what the old library's TLS took beyond 64 bytes, so `tls_smallstack
 * 1104` run bare dies as the old library made it die (the test's check
 * that the program runs close enough to the edge).  main allocates first
 * (lazy binding done before the threads run).  stdout:
 *   smallstack: threads 8 x 16384 B, rounds 50, created 8, joined 8
 *   count tls_top ...
 *   count tls_deep ...
 * Exits 0; 2 when a thread cannot be created.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "safe_common.h"

#define THREADS 8
#define ROUNDS  50
#define DEEP    8192
#define DEEPER  3072

static struct sc_count c_top = {"tls_top"}, c_deep = {"tls_deep"};
static size_t extra;
static void *volatile kept[THREADS][ROUNDS];

NOINLINE void tls_deeper(int r)
{
	/* A variable-length frame: EXTRA moves its bottom down. */
	volatile unsigned char pad[DEEPER + extra];
	for (size_t k = 0; k < sizeof(pad); k += 64)
		pad[k] = (unsigned char)r;
	sc_sink += pad[0];
}

NOINLINE void *tls_deep(int r)
{
	volatile unsigned char pad[DEEP];
	for (size_t k = 0; k < DEEP; k += 64)
		pad[k] = (unsigned char)r;
	size_t n = 48 + (size_t)r;
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_deep, p, n);
	tls_deeper(r);
	sc_sink += pad[DEEP - 64];
	return p;
}

NOINLINE void tls_top(int t, int r)
{
	size_t a = 100 + (size_t)r, b = 24;
	void *p = malloc(a);
	sc_touch(p, a);
	sc_alloc(&c_top, p, a);
	void *q = calloc(3, b);
	sc_touch(q, 3 * b);
	sc_alloc(&c_top, q, 3 * b);
	void *q2 = realloc(q, 5 * b);
	if (q2) {
		sc_free(&c_top, 3 * b);
		sc_alloc(&c_top, q2, 5 * b);
		sc_touch(q2, 5 * b);
	}
	void *d = tls_deep(r);
	free(d);
	sc_free(&c_deep, 48 + (size_t)r);
	free(q2);
	sc_free(&c_top, 5 * b);
	kept[t][r] = p; /* one block a round stays live */
}

static void *thread_main(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int r = 0; r < ROUNDS; r++)
		tls_top(t, r);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		extra = (size_t)strtoul(argv[1], NULL, 10);
	void *w = calloc(1, 16), *m = malloc(16);
	w = realloc(w, 32);
	sc_touch(w, 32);
	sc_touch(m, 16);
	free(w);
	free(m);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 16384);
	pthread_t th[THREADS];
	int created = 0, joined = 0;
	for (int t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], &a, thread_main,
		                   (void *)(intptr_t)t) == 0)
			created++;
	for (int t = 0; t < created; t++)
		if (pthread_join(th[t], NULL) == 0)
			joined++;
	printf("smallstack: threads %d x 16384 B, rounds %d, created %d, "
	       "joined %d\n",
	       THREADS, ROUNDS, created, joined);
	sc_print(&c_top);
	sc_print(&c_deep);
	return created == THREADS ? 0 : 2;
}
