/*
 * ud_dlopen MODE LIB_A LIB_B: a plugin loaded, called and unloaded over and
 * over while it allocates (test_unwind_diff.sh; the plugins are
 * libsrc/ud_dl.c).  30 cycles k of
 *   same  dlopen A, call uda_entry, dlclose A (A comes back, most likely
 *         at the same address)
 *   swap  the same with A, then with B (B most likely mapped where A was,
 *         with other code there)
 * Each call: ud?_alloc makes 4 x malloc(500 + 10 j + k), frees 2 and hands
 * us 2, which we free after the dlclose every other cycle; ud?_middle calls
 * back ud_cb_alloc here (malloc(33), freed).  Between cycles ud_between
 * allocates malloc(77), freed.
 * In swap mode, B's frames at A's addresses are named after A by the
 * profile (a known limitation, docs/safety/safety.md), so only this
 * program's functions get count lines, and ud_cb_alloc no caller line.
 * Exits 37.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "ud_common.h"

#define CYCLES 30

static struct sc_count c_a = {"uda_alloc"}, c_b = {"udb_alloc"},
                       c_cb = {"ud_cb_alloc"}, c_between = {"ud_between"};

NOINLINE void ud_cb_alloc(int k)
{
	void *p = malloc(33);
	sc_touch(p, 33);
	sc_alloc(&c_cb, p, 33);
	free(p);
	sc_free(&c_cb, 33);
	sc_sink += (unsigned long)k;
}

NOINLINE void ud_between(void)
{
	void *p = malloc(77);
	sc_touch(p, 77);
	sc_alloc(&c_between, p, 77);
	free(p);
	sc_free(&c_between, 77);
}

typedef int (*entry_fn)(void **, int, void (*)(int));

/* Load, call, unload; the 2 blocks handed over freed every other cycle. */
NOINLINE int ud_cycle(const char *lib, const char *entry_name,
                      struct sc_count *c, int k)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen failed\n");
		return -1;
	}
	entry_fn entry = (entry_fn)dlsym(h, entry_name);
	if (!entry) {
		printf("dlsym failed\n");
		return -1;
	}
	void *keep[2];
	int r = entry(keep, k, ud_cb_alloc);
	for (int j = 0; j < 4; j++)
		sc_alloc(c, (void *)1, 500 + 10 * (size_t)j + (size_t)k);
	for (int j = 2; j < 4; j++)
		sc_free(c, 500 + 10 * (size_t)j + (size_t)k);
	if (dlclose(h) != 0) {
		printf("dlclose failed\n");
		return -1;
	}
	if (k % 2)
		for (int j = 0; j < 2; j++) {
			free(keep[j]);
			sc_free(c, 500 + 10 * (size_t)j + (size_t)k);
		}
	return r;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "same") && strcmp(argv[1], "swap"))) {
		fprintf(stderr, "usage: ud_dlopen same|swap LIB_A LIB_B\n");
		return 2;
	}
	int swap = !strcmp(argv[1], "swap");
	int sum = 0;
	for (int k = 0; k < CYCLES; k++) {
		int r = ud_cycle(argv[2], "uda_entry", &c_a, k);
		if (r < 0)
			return 1;
		sum += r;
		ud_between();
		if (swap) {
			r = ud_cycle(argv[3], "udb_entry", &c_b, k);
			if (r < 0)
				return 1;
			sum += r;
			ud_between();
		}
	}
	printf("ud_dlopen %s: %d cycles, sum %d\n", argv[1], CYCLES, sum);
	if (swap) {
		/* The plugins' allocations are in the total all the same. */
		sc_print(&c_cb);
		sc_print(&c_between);
		printf("allocations %ld\n",
		       c_a.ao + c_b.ao + c_cb.ao + c_between.ao);
	} else {
		struct sc_count *const cs[] = {&c_a, &c_cb, &c_between};
		ud_print_counts(stdout, cs, UD_N(cs));
		ud_caller("uda_alloc", "uda_middle");
		ud_caller("ud_cb_alloc", "uda_middle");
	}
	ud_caller("ud_between", "main");
	return 37;
}
