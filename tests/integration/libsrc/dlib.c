/*
 * dlib: a shared library for progs/dlopener.c, built by test_robust.sh with
 * -O2 -fomit-frame-pointer (no frame pointers: DWARF unwinding must cross
 * it).  dlib_entry -> dlib_middle -> dlib_alloc: 8 x malloc(4444), live.
 */
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noipa))

volatile unsigned long dlib_sink;
void *dlib_keep[8];

NOINLINE void dlib_alloc(void)
{
	for (int i = 0; i < 8; i++) {
		dlib_keep[i] = malloc(4444);
		memset(dlib_keep[i], 6, 4444);
		dlib_sink += ((unsigned char *)dlib_keep[i])[4443];
	}
}

NOINLINE int dlib_middle(int n)
{
	volatile long pad[4] = {n, n + 1, n + 2, n + 3};
	dlib_alloc();
	return (int)pad[n & 3] + 1;
}

NOINLINE int dlib_entry(int n)
{
	int r = dlib_middle(n) + 1;
	dlib_sink += (unsigned long)r;
	return r;
}
