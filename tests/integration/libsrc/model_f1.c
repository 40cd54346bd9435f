/*
 * model_f1.c: the first file of test_model.sh's program; its static
 * helper has the same name as model_f2.c's and the libraries'.
 */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;

NOINLINE static void *helper(size_t n)
{
	char *p = malloc(n);
	if (p) {
		p[0] = 1;
		sink += (unsigned long)p[0];
	}
	return p;
}

/* 1000 x 100 B, 50 kept. */
NOINLINE void f1_run(void)
{
	static void *keep[1000];
	for (int i = 0; i < 1000; i++)
		keep[i] = helper(100);
	for (int i = 50; i < 1000; i++)
		free(keep[i]);
}

/* The forked child's work: 500 x 64 B, all kept. */
NOINLINE void f1_child(void)
{
	for (int i = 0; i < 500; i++)
		sink += (unsigned long)helper(64);
}
