/*
 * model_f2.c: the second file of test_model.sh's program; its static
 * helper has the same name as model_f1.c's and the libraries'.
 */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;

NOINLINE static void *helper(size_t n)
{
	char *p = malloc(n);
	if (p) {
		p[0] = 2;
		sink += (unsigned long)p[0];
	}
	return p;
}

/* 2000 x 200 B, 10 kept. */
NOINLINE void f2_run(void)
{
	static void *keep[2000];
	for (int i = 0; i < 2000; i++)
		keep[i] = helper(200);
	for (int i = 10; i < 2000; i++)
		free(keep[i]);
}
