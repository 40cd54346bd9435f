/*
 * safe_dl: a plugin for progs/safe_dlcycle.c, built by test_safety.sh
 * twice, with -DSDL_A and -DSDL_B: the same code under other names (so
 * both copies have their functions at the same offsets, and a copy loaded
 * where the other was unloaded has the same PCs for other functions).
 *   entry(keep, k): sdl?_alloc: 5 x malloc(1000 + 10 * j + k), the first 3
 *   handed to the caller in keep[] (they outlive the library), 2 freed.
 */
#include <stdlib.h>
#include <string.h>

#if defined(SDL_A)
#define FN(x) sdla_##x
#elif defined(SDL_B)
#define FN(x) sdlb_##x
#else
#error "build with -DSDL_A or -DSDL_B"
#endif

#define NOINLINE __attribute__((noinline, noclone))

volatile unsigned long FN(sink);

NOINLINE void FN(alloc)(void **keep, int k)
{
	void *p[5];
	for (int j = 0; j < 5; j++) {
		size_t n = 1000 + 10 * (size_t)j + (size_t)k;
		p[j] = malloc(n);
		if (p[j]) {
			memset(p[j], 3, n);
			FN(sink) += ((unsigned char *)p[j])[n - 1];
		}
	}
	for (int j = 0; j < 3; j++)
		keep[j] = p[j];
	free(p[3]);
	free(p[4]);
}

NOINLINE int FN(middle)(void **keep, int k)
{
	FN(alloc)(keep, k);
	return k + 1;
}

int FN(entry)(void **keep, int k)
{
	return FN(middle)(keep, k) + 1;
}
