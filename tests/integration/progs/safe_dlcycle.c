/*
 * safe_dlcycle MODE LIB_A LIB_B: dlopen and dlclose of plugins that
 * allocate while profiling (test_safety.sh), 20 cycles of
 *   together  load A and B, call sdla_entry and sdlb_entry, unload both
 *             (each cycle maps each file where it was before)
 *   swap      load A, call sdla_entry, unload A; load B, call sdlb_entry,
 *             unload B (B is mapped where A was: the same PCs are other
 *             functions now)
 * Each call
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

static int call(void *h, const char *entry_name, struct sc_count *c, int k,
                void *keep[3])
{
	int (*entry)(void **, int) =
	        (int (*)(void **, int))dlsym(h, entry_name);
	if (!entry) {
		printf("dlsym failed\n");
		return -1;
	}
	int r = entry(keep, k);
	for (int j = 0; j < 5; j++)
		sc_alloc(c, (void *)1, 1000 + 10 * (size_t)j + (size_t)k);
	for (int j = 3; j < 5; j++)
		sc_free(c, 1000 + 10 * (size_t)j + (size_t)k);
	return r;
}

/* After the library is gone: every other cycle frees what it handed us. */
static void release(void *keep[3], struct sc_count *c, int k)
{
	if (k % 2)
		for (int j = 0; j < 3; j++) {
			free(keep[j]);
			sc_free(c, 1000 + 10 * (size_t)j + (size_t)k);
		}
}

static void *load(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		printf("dlopen failed\n");
	return h;
}

static int unload(void *h)
{
	if (dlclose(h) != 0) {
		printf("dlclose failed\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4 ||
	    (strcmp(argv[1], "together") && strcmp(argv[1], "swap"))) {
		fprintf(stderr,
		        "usage: safe_dlcycle together|swap LIB_A LIB_B\n");
		return 2;
	}
	int swap = !strcmp(argv[1], "swap");
	int sum = 0;
	for (int k = 0; k < 20; k++) {
		void *ka[3], *kb[3], *ha, *hb;
		int a, b;
		if (swap) {
			if (!(ha = load(argv[2])))
				return 1;
			a = call(ha, "sdla_entry", &c_a, k, ka);
			if (unload(ha))
				return 1;
			if (!(hb = load(argv[3])))
				return 1;
			b = call(hb, "sdlb_entry", &c_b, k, kb);
			if (unload(hb))
				return 1;
		} else {
			if (!(ha = load(argv[2])) || !(hb = load(argv[3])))
				return 1;
			a = call(ha, "sdla_entry", &c_a, k, ka);
			b = call(hb, "sdlb_entry", &c_b, k, kb);
			if (unload(ha) || unload(hb))
				return 1;
		}
		if (a < 0 || b < 0)
			return 1;
		release(ka, &c_a, k);
		release(kb, &c_b, k);
		sum += a + b;
	}
	printf("dlcycle: 40 loads, sum %d\n", sum);
	sc_print(&c_a);
	sc_print(&c_b);
	return 28;
}
