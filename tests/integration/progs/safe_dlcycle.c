/*
 * safe_dlcycle LIB_A LIB_B: dlopen and dlclose of plugins that allocate
 * while profiling (test_safety.sh), 20 cycles of: load A, call
 * sdla_entry, unload A; load B, call sdlb_entry, unload B.  Each call
 * allocates 5 blocks in sdl?_alloc and hands 3 to us (they outlive the
 * library); every other cycle we free them after the library is gone.
 * The libraries are unmapped when the profile is written: their frames
 * must still be named (and B loaded where A was must not be taken for A).
 * Counts per cycle k (0..19): sdl?_alloc 5 x (1000 + 10 j + k), j = 0..4.
 * Exits 28.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "safe_common.h"

static struct sc_count c_a = {"sdla_alloc"}, c_b = {"sdlb_alloc"};

static int cycle(const char *lib, const char *entry_name, struct sc_count *c,
                 int k)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen failed\n");
		return -1;
	}
	int (*entry)(void **, int) = (int (*)(void **, int))dlsym(h, entry_name);
	if (!entry) {
		printf("dlsym failed\n");
		return -1;
	}
	void *keep[3];
	int r = entry(keep, k);
	for (int j = 0; j < 5; j++)
		sc_alloc(c, (void *)1, 1000 + 10 * (size_t)j + (size_t)k);
	for (int j = 3; j < 5; j++)
		sc_free(c, 1000 + 10 * (size_t)j + (size_t)k);
	if (dlclose(h) != 0) {
		printf("dlclose failed\n");
		return -1;
	}
	/* After the library is gone. */
	if (k % 2)
		for (int j = 0; j < 3; j++) {
			free(keep[j]);
			sc_free(c, 1000 + 10 * (size_t)j + (size_t)k);
		}
	return r;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: safe_dlcycle LIB_A LIB_B\n");
		return 2;
	}
	int sum = 0;
	for (int k = 0; k < 20; k++) {
		int a = cycle(argv[1], "sdla_entry", &c_a, k);
		int b = cycle(argv[2], "sdlb_entry", &c_b, k);
		if (a < 0 || b < 0)
			return 1;
		sum += a + b;
	}
	printf("dlcycle: 40 loads, sum %d\n", sum);
	sc_print(&c_a);
	sc_print(&c_b);
	return 28;
}
