/*
 * sess_many N: keeps N small blocks live (many_alloc: N x malloc(24)),
 * frees every other one (many_free), prints "sess_many: done".  With -i 1
 * and a small --shmem-size the live table fills: a test of
 * --block-client, where the region grows instead of dropping samples.
 * Exact with -i 1 when nothing is dropped:
 *   many_alloc  N, 24 N; N/2 (rounded up) live
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE void many_alloc(void **p, long n)
{
	for (long i = 0; i < n; i++) {
		p[i] = malloc(24);
		memset(p[i], 1, 24);
	}
}

NOINLINE void many_free(void **p, long n)
{
	for (long i = 1; i < n; i += 2)
		free(p[i]);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 0;
	if (n <= 0 || n > 10000000) {
		fprintf(stderr, "usage: sess_many N\n");
		return 2;
	}
	/* mmap'd by glibc for large n: not one of the counted blocks' stack. */
	void **p = calloc((size_t)n, sizeof(*p));
	if (!p)
		return 1;
	many_alloc(p, n);
	many_free(p, n);
	printf("sess_many: done\n");
	return 0;
}
