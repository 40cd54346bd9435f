/*
 * nofp: a stack through code without frame pointers.  test_exact.sh builds
 * this file again with -O2 -fomit-frame-pointer (the Makefile's -O0 build
 * is used too); DWARF unwinding must still give the whole stack:
 *   main -> nofp_outer -> nofp_recurse x 10 -> nofp_leaf
 *   nofp_leaf  7 x malloc(333), live
 * Exits 13 on success.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noipa))

static volatile unsigned long sink;
static void *keep[7];

NOINLINE void nofp_leaf(void)
{
	for (int i = 0; i < 7; i++) {
		keep[i] = malloc(333);
		memset(keep[i], 5, 333);
		sink += ((unsigned char *)keep[i])[332];
	}
}

NOINLINE int nofp_recurse(int n)
{
	/* Enough live values to need the stack, no frame pointer. */
	volatile long pad[8];
	for (int i = 0; i < 8; i++)
		pad[i] = n * i;
	int r;
	if (n <= 1) {
		nofp_leaf();
		r = 1;
	} else {
		r = nofp_recurse(n - 1) + 1;
	}
	sink += (unsigned long)pad[n % 8];
	return r;
}

NOINLINE void nofp_outer(void)
{
	sink += (unsigned long)nofp_recurse(10);
}

int main(void)
{
	nofp_outer();
	printf("nofp: done\n");
	return 13;
}
