/*
 * ud_dl: a plugin for progs/ud_dlopen.c (test_unwind_diff.sh), built by the
 * test twice with -O2 -fomit-frame-pointer (its frames unwind by CFI only):
 * -DUD_A as libud_dla.so and -DUD_B as libud_dlb.so.  B is laid out
 * differently (a padding function first, larger frames), so B mapped where
 * A was unloaded has other code, with other unwind rules, at A's PCs: a
 * cache of unwind rules keyed by PC must not survive the dlclose.
 *   ud?_entry(keep, k, cb) -> ud?_middle -> ud?_alloc: 4 x
 *   malloc(500 + 10 * j + k), j = 0..3; the first 2 handed to the caller,
 *   the other 2 freed; then ud?_middle calls cb(k) (the program
 *   allocates there, with the plugin's frames under it).
 */
#include <stdlib.h>
#include <string.h>

#if defined(UD_A)
#define FN(x) uda_##x
#define PAD   1
#elif defined(UD_B)
#define FN(x) udb_##x
#define PAD   7
#else
#error "build with -DUD_A or -DUD_B"
#endif

#define NOINLINE __attribute__((noinline, noipa))

volatile unsigned long FN(sink);

#if defined(UD_B)
/* Shifts every function of B against A's. */
NOINLINE unsigned long udb_padding(unsigned long x)
{
	for (int i = 0; i < 37; i++)
		x = x * 31 + (unsigned long)i;
	return x;
}
#endif

NOINLINE void FN(alloc)(void **keep, int k)
{
	volatile char frame[16 * PAD];
	void *p[4];
	frame[0] = (char)k;
	for (int j = 0; j < 4; j++) {
		size_t n = 500 + 10 * (size_t)j + (size_t)k;
		p[j] = malloc(n);
		if (p[j]) {
			memset(p[j], 3, n);
			FN(sink) += ((unsigned char *)p[j])[n - 1];
		}
	}
	keep[0] = p[0];
	keep[1] = p[1];
	free(p[2]);
	free(p[3]);
	FN(sink) += (unsigned char)frame[0];
}

NOINLINE int FN(middle)(void **keep, int k, void (*cb)(int))
{
	volatile long frame[2 * PAD] = {k};
	FN(alloc)(keep, k);
	cb(k);
	return (int)frame[0] + 1;
}

int FN(entry)(void **keep, int k, void (*cb)(int))
{
	int r = FN(middle)(keep, k, cb);
	FN(sink) += (unsigned long)r;
	return r + 1;
}
