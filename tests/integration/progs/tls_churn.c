/*
 * tls_churn [THREADS]: short-lived threads by the thousand, each with its
 * own alternate signal stack and an allocating signal handler on it
 * (test_tls.sh).
 *
 * libheapprof keeps a thread's state beyond its 56 bytes of static TLS in
 * a record of a pool of 4096 (src/client/thread.c), given back when the
 * thread exits.  A record that was not given back would run the pool out
 * after 4096 threads; a thread without one still records exactly, but
 * does not know its alternate signal stack: its handler's allocations
 * would be recorded with their caller only and counted (stack_unbounded).
 * So at -i 1 every count here must be exact and stack_unbounded 0.
 *
 * THREADS (default 20000) threads, BATCH at a time: churn_main allocates
 * a 64 KiB alternate stack and a block it leaves live, installs the
 * stack, sends itself SIGUSR1, whose handler (SA_ONSTACK) churn_handler
 * allocates and frees two blocks, then takes the stack down and frees
 * it.  stdout:
 *   churn: threads 20000, created 20000, joined 20000, handled 20000
 *   count churn_main ...
 *   count churn_handler ...
 * Exits 0; 2 when a thread could not be created or did not handle its
 * signal on its alternate stack.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#include "safe_common.h"

#define BATCH    16
#define ALT_SIZE 65536

static struct sc_count c_main = {"churn_main"}, c_handler = {"churn_handler"};
static _Atomic long handled;
static void *volatile *kept;
static __thread uintptr_t alt_lo, alt_hi;

NOINLINE void churn_handler(int sig)
{
	(void)sig;
	unsigned char here;
	if ((uintptr_t)&here < alt_lo || (uintptr_t)&here >= alt_hi)
		return; /* not on its alternate stack: not counted */
	void *a = malloc(40);
	sc_touch(a, 40);
	sc_alloc(&c_handler, a, 40);
	void *b = calloc(2, 100);
	sc_touch(b, 200);
	sc_alloc(&c_handler, b, 200);
	free(a);
	sc_free(&c_handler, 40);
	free(b);
	sc_free(&c_handler, 200);
	handled++;
}

NOINLINE void *churn_main(void *arg)
{
	long i = (long)(intptr_t)arg;
	void *alt = malloc(ALT_SIZE);
	if (!alt)
		return NULL;
	sc_alloc(&c_main, alt, ALT_SIZE);
	void *k = malloc(16 + (size_t)(i % 64));
	sc_touch(k, 16 + (size_t)(i % 64));
	sc_alloc(&c_main, k, 16 + (size_t)(i % 64));
	kept[i] = k;
	stack_t ss = {.ss_sp = alt, .ss_size = ALT_SIZE, .ss_flags = 0};
	if (sigaltstack(&ss, NULL) == 0) {
		alt_lo = (uintptr_t)alt;
		alt_hi = alt_lo + ALT_SIZE;
		pthread_kill(pthread_self(), SIGUSR1);
		stack_t off = {.ss_flags = SS_DISABLE};
		sigaltstack(&off, NULL);
	}
	free(alt);
	sc_free(&c_main, ALT_SIZE);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
	if (n < 1)
		n = 1;
	kept = calloc((size_t)n, sizeof(void *));
	if (!kept)
		return 2;
	struct sigaction sa = {.sa_handler = churn_handler,
	                       .sa_flags = SA_ONSTACK};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	long created = 0, joined = 0;
	for (long i = 0; i < n; i += BATCH) {
		pthread_t t[BATCH];
		int k, m = 0;
		for (k = 0; k < BATCH && i + k < n; k++)
			if (pthread_create(&t[m], NULL, churn_main,
			                   (void *)(intptr_t)(i + k)) == 0)
				m++;
		created += m;
		for (k = 0; k < m; k++)
			if (pthread_join(t[k], NULL) == 0)
				joined++;
	}
	long h = handled;
	printf("churn: threads %ld, created %ld, joined %ld, handled %ld\n", n,
	       created, joined, h);
	sc_print(&c_main);
	sc_print(&c_handler);
	return created == n && h == n ? 0 : 2;
}
