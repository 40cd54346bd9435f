/*
 * model_lib.c: one of the two libraries of tests/integration/
 * test_model.sh, built twice (-DLIB_NAME=model_lib_a, model_lib_b, with
 * -DLIB_SIZE and -DLIB_KEEP): each has a static function named helper,
 * like the two of model_f1.c and model_f2.c, so the views must keep four
 * functions of one name apart by module (and, symbolized, by file).
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

/* LIB_COUNT blocks of LIB_SIZE bytes; the first LIB_KEEP are kept. */
NOINLINE void LIB_NAME(void)
{
	static void *keep[LIB_COUNT];
	for (int i = 0; i < LIB_COUNT; i++)
		keep[i] = helper(LIB_SIZE);
	for (int i = LIB_KEEP; i < LIB_COUNT; i++)
		free(keep[i]);
	sink += (unsigned long)keep[0];
}
