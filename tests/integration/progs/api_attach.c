/*
 * api_attach: a program linked with libheapprof (the custom allocator
 * API) and started without any collector, for test_attach.sh to attach
 * to with record -p (no daemon: the injector finds the library loaded
 * and only calls its attach functions).
 *
 * Registers the heap "attach.pool", prints "api_attach: ready" and waits
 * for SIGUSR1; then, exact with -i 1 --all-heaps:
 *   pool_take    10 x AHeapProfile_reportAllocation of 64 B, 3 freed
 *                (reportFree): attach.pool 10 640 7 448
 *   api_malloc   malloc(100), kept: libc.malloc 1 100 1 100
 * prints "api_attach: phase done", waits for the second SIGUSR1, exits 0.
 */
#include <heapprof/heap_profile.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile sig_atomic_t usr1;
static void *kept;

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

NOINLINE void pool_take(uint32_t heap)
{
	for (uint64_t i = 0; i < 10; i++)
		AHeapProfile_reportAllocation(heap, 0x10000 + i * 64, 64);
	for (uint64_t i = 0; i < 3; i++)
		AHeapProfile_reportFree(heap, 0x10000 + i * 64);
}

NOINLINE void api_malloc(void)
{
	kept = malloc(100);
	memset(kept, 1, 100);
}

int main(void)
{
	uint32_t heap =
	        AHeapProfile_registerHeap(AHeapInfo_create("attach.pool"));
	sigset_t block, during;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &during);
	sigdelset(&during, SIGUSR1);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	printf("api_attach: ready\n");
	fflush(stdout);
	while (usr1 < 1)
		sigsuspend(&during);
	pool_take(heap);
	api_malloc();
	printf("api_attach: phase done\n");
	fflush(stdout);
	while (usr1 < 2)
		sigsuspend(&during);
	free(kept);
	return 0;
}
