/*
 * alloc_tiny: N (argv[1], default 1000000) x malloc(8) in tiny_alloc, all
 * kept to the end, the pointer array from one malloc in main
 * (test_allocators.sh).  Under jemalloc the blocks are packed 16 to 128
 * bytes of address space.  Prints N; exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void tiny_alloc(void **v, long n)
{
	for (long i = 0; i < n; i++)
		v[i] = malloc(8);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	void **v = malloc(sizeof(*v) * (size_t)n);
	if (!v)
		return 1;
	tiny_alloc(v, n);
	long got = 0;
	for (long i = 0; i < n; i++)
		got += v[i] != NULL;
	printf("%ld\n", got);
	return 0;
}
