/*
 * known: allocations of known count and size in known functions, for exact
 * checks with `heapprof record -i 1` (tests/integration/test_exact.sh holds
 * the expected numbers and their arithmetic; keep both in sync).
 *
 * Every function that allocates is noinline and is the direct caller of the
 * allocator, so it is the leaf frame of the recorded stacks.  Results are
 * written to and summed into a checksum that is printed, so nothing can be
 * optimized away.  Exits 7 on success (to check exit-status propagation),
 * 1 if an allocation failed.
 *
 * Usage: known [deep-only]
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;
static int failures;

static void touch(void *p, size_t n)
{
	if (!p) {
		failures++;
		return;
	}
	memset(p, 0x5a, n);
	sink += ((unsigned char *)p)[n - 1];
}

/* 100 x malloc(1000); frees 40 (and free(NULL) twice, which is nothing). */
static void *malloc_keep[100];
NOINLINE void do_malloc(void)
{
	for (int i = 0; i < 100; i++) {
		malloc_keep[i] = malloc(1000);
		touch(malloc_keep[i], 1000);
	}
	for (int i = 0; i < 40; i++) {
		free(malloc_keep[i]);
		malloc_keep[i] = NULL;
	}
	free(NULL);
	free(NULL);
}

/* 50 x calloc(10, 300) = 3000 bytes each; frees all. */
NOINLINE void do_calloc(void)
{
	void *p[50];
	for (int i = 0; i < 50; i++) {
		p[i] = calloc(10, 300);
		if (!p[i])
			failures++;
		else
			sink += ((unsigned char *)p[i])[2999]; /* 0 */
	}
	for (int i = 0; i < 50; i++)
		free(p[i]);
}

/*
 * One block grown in 10 steps: malloc(1000), then realloc to 2000, 3000, ...
 * 10000.  Each realloc is a free of the previous block and an allocation of
 * the new size at this function; the final 10000-byte block stays live.
 */
static void *realloc_keep;
NOINLINE void do_realloc(void)
{
	char *p = malloc(1000);
	touch(p, 1000);
	for (int k = 2; k <= 10; k++) {
		char *q = realloc(p, 1000 * (size_t)k);
		if (!q) {
			failures++;
			break;
		}
		p = q;
		touch(p, 1000 * (size_t)k);
	}
	realloc_keep = p;
}

/*
 * reallocarray(NULL, 10, 100) (an allocation of 1000), then
 * reallocarray(p, 20, 100) (a free of 1000 and an allocation of 2000), then
 * free.
 */
NOINLINE void do_reallocarray(void)
{
	char *p = reallocarray(NULL, 10, 100);
	touch(p, 1000);
	char *q = reallocarray(p, 20, 100);
	if (!q) {
		failures++;
		free(p);
		return;
	}
	touch(q, 2000);
	free(q);
}

/*
 * realloc edge cases, all freed in the end:
 *   realloc(NULL, 500)        an allocation of 500
 *   realloc(p, 3000)          free 500, allocation of 3000
 *   realloc(p, 1000)          (shrink) free 3000, allocation of 1000
 *   realloc(p, huge) fails    nothing happens: p stays live, untouched
 *   realloc(p, 0)             glibc frees p and returns NULL: free 1000
 * Allocations 500 + 3000 + 1000: 3 objects, 4500 B; none live.
 */
static volatile size_t huge_size = (size_t)-1 / 2 - 4096;
NOINLINE void do_realloc_edge(void)
{
	char *p = realloc(NULL, 500);
	touch(p, 500);
	char *q = realloc(p, 3000);
	if (!q) {
		failures++;
		return;
	}
	touch(q, 3000);
	p = realloc(q, 1000);
	if (!p) {
		failures++;
		return;
	}
	touch(p, 1000);
	q = realloc(p, huge_size);
	if (q) {
		failures++; /* cannot happen */
		free(q);
		return;
	}
	touch(p, 1000); /* still ours */
	q = realloc(p, 0);
	if (q) /* a libc that returns a minimal block instead */
		free(q);
}

/*
 * Allocations that fail are not allocations: no rows for this function.
 *   malloc(huge), calloc(huge, 4), posix_memalign with alignment 3 (EINVAL)
 *   and with a huge size, aligned_alloc(64, huge), memalign(64, huge),
 *   valloc(huge), reallocarray(NULL, huge, 16) (overflow).
 */
NOINLINE void do_failed_alloc(void)
{
	void *p;
	if ((p = malloc(huge_size)) != NULL) {
		failures++;
		free(p);
	}
	if ((p = calloc(huge_size, 4)) != NULL) {
		failures++;
		free(p);
	}
	if (posix_memalign(&p, 3, 100) == 0) {
		failures++;
		free(p);
	}
	if (posix_memalign(&p, 64, huge_size) == 0) {
		failures++;
		free(p);
	}
	if ((p = aligned_alloc(64, huge_size)) != NULL) {
		failures++;
		free(p);
	}
	if ((p = memalign(64, huge_size)) != NULL) {
		failures++;
		free(p);
	}
	if ((p = valloc(huge_size)) != NULL) {
		failures++;
		free(p);
	}
	if ((p = reallocarray(NULL, huge_size, 16)) != NULL) {
		failures++;
		free(p);
	}
}

/* 20 x posix_memalign(64, 4096); frees 10. */
static void *pm_keep[20];
NOINLINE void do_posix_memalign(void)
{
	for (int i = 0; i < 20; i++) {
		if (posix_memalign(&pm_keep[i], 64, 4096) != 0 ||
		    ((unsigned long)pm_keep[i] & 63)) {
			failures++;
			pm_keep[i] = NULL;
			continue;
		}
		touch(pm_keep[i], 4096);
	}
	for (int i = 0; i < 10; i++) {
		free(pm_keep[i]);
		pm_keep[i] = NULL;
	}
}

/* 4 x aligned_alloc(256, 512); frees all 4. */
NOINLINE void do_aligned_alloc(void)
{
	void *p[4];
	for (int i = 0; i < 4; i++) {
		p[i] = aligned_alloc(256, 512);
		if (p[i] && ((unsigned long)p[i] & 255))
			failures++;
		touch(p[i], 512);
	}
	for (int i = 0; i < 4; i++)
		free(p[i]);
}

/* 3 x memalign(128, 1000); all stay live. */
static void *memalign_keep[3];
NOINLINE void do_memalign(void)
{
	for (int i = 0; i < 3; i++) {
		memalign_keep[i] = memalign(128, 1000);
		if (memalign_keep[i] && ((unsigned long)memalign_keep[i] & 127))
			failures++;
		touch(memalign_keep[i], 1000);
	}
}

/* 2 x valloc(5000); frees 1. */
static void *valloc_keep;
NOINLINE void do_valloc(void)
{
	void *a = valloc(5000);
	void *b = valloc(5000);
	long pg = sysconf(_SC_PAGESIZE);
	if (a && ((unsigned long)a % (unsigned long)pg))
		failures++;
	touch(a, 5000);
	touch(b, 5000);
	free(a);
	valloc_keep = b;
}

/* 2 x pvalloc(100); frees both.  (Size: 100 requested, a page usable.) */
NOINLINE void do_pvalloc(void)
{
	void *a = pvalloc(100);
	void *b = pvalloc(100);
	touch(a, 100);
	touch(b, 100);
	free(a);
	free(b);
}

/*
 * Threads: thread i (0..3) allocates 10*(i+1) blocks of 100*(i+1) bytes in
 * thread_alloc and frees the first half of them; after the joins, the main
 * thread frees one more block of each thread (a free from another thread).
 */
#define NTHREADS 4
static void *thread_blocks[NTHREADS][40];

NOINLINE void thread_alloc(int i)
{
	int n = 10 * (i + 1);
	size_t sz = 100 * (size_t)(i + 1);
	for (int k = 0; k < n; k++) {
		thread_blocks[i][k] = malloc(sz);
		touch(thread_blocks[i][k], sz);
	}
	for (int k = 0; k < n / 2; k++) {
		free(thread_blocks[i][k]);
		thread_blocks[i][k] = NULL;
	}
}

NOINLINE void *thread_main(void *arg)
{
	thread_alloc((int)(long)arg);
	return NULL;
}

NOINLINE void do_threads(void)
{
	pthread_t t[NTHREADS];
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&t[i], NULL, thread_main, (void *)i) != 0) {
			failures++;
			return;
		}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < NTHREADS; i++) {
		int last = 10 * (i + 1) - 1;
		free(thread_blocks[i][last]);
		thread_blocks[i][last] = NULL;
	}
}

/*
 * A deep stack: do_deep -> recurse(20) -> recurse(19) -> ... -> recurse(1)
 * -> deep_alloc, which does 3 x malloc(777) that stay live.  The stack of
 * deep_alloc holds exactly 20 recurse frames.
 */
static void *deep_keep[3];
NOINLINE void deep_alloc(void)
{
	for (int i = 0; i < 3; i++) {
		deep_keep[i] = malloc(777);
		touch(deep_keep[i], 777);
	}
}

NOINLINE int recurse(int n)
{
	if (n <= 1) {
		deep_alloc();
		return 1;
	}
	int r = recurse(n - 1);
	sink += (unsigned long)r;
	return r + 1;
}

NOINLINE void do_deep(void)
{
	sink += (unsigned long)recurse(20);
}

static unsigned long checksum(void)
{
	unsigned long s = 0;
	for (int i = 40; i < 100; i++)
		s += ((unsigned char *)malloc_keep[i])[999];
	s += ((unsigned char *)realloc_keep)[9999];
	return s;
}

int main(int argc, char **argv)
{
	fprintf(stderr, "known: pid %d\n", (int)getpid());
	if (argc > 1 && !strcmp(argv[1], "deep-only")) {
		do_deep();
		printf("known: deep done\n");
		return failures ? 1 : 7;
	}
	do_malloc();
	do_calloc();
	do_realloc();
	do_reallocarray();
	do_realloc_edge();
	do_failed_alloc();
	do_posix_memalign();
	do_aligned_alloc();
	do_memalign();
	do_valloc();
	do_pvalloc();
	do_threads();
	do_deep();
	printf("known: checksum %lu failures %d\n", checksum(), failures);
	return failures ? 1 : 7;
}
