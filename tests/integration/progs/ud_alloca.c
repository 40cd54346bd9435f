/*
 * ud_alloca: allocation from frames whose size changes at run time
 * (alloca, variable-length arrays), so one PC is seen with many distances
 * between the stack pointer and the frame (test_unwind_diff.sh).  2000
 * rounds i of ua_run:
 *   ua_mid(i)   alloca(16 + 8 * (i % 97)), touched, then malloc(40 + i % 13)
 *               (freed unless i % 10 == 0), then calls ua_leaf
 *   ua_leaf(i)  a VLA of 8 + 24 * (i % 61) bytes and alloca(32 * (i % 7)),
 *               then malloc(16 + i % 29), freed unless i % 5 == 0
 *   ua_nest(d)  alloca(64 * d) at each of 6 levels (d = 6 .. 1), and at the
 *               bottom ua_nest_alloc mallocs 100 + i % 3, freed
 * Exits 33.
 */
#include <alloca.h>

#include "ud_common.h"

static struct sc_count c_mid = {"ua_mid"}, c_leaf = {"ua_leaf"},
                       c_nest = {"ua_nest_alloc"};

NOINLINE void ua_leaf(int i)
{
	char vla[8 + 24 * (i % 61)];
	memset(vla, 1, sizeof(vla));
	size_t an = 32 * (size_t)(i % 7);
	char *a = alloca(an + 1);
	memset(a, 2, an + 1);
	size_t n = 16 + (size_t)(i % 29);
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_leaf, p, n);
	sc_sink += (unsigned char)vla[sizeof(vla) - 1] + (unsigned char)a[an];
	if (i % 5 != 0) {
		free(p);
		sc_free(&c_leaf, n);
	}
}

NOINLINE void ua_mid(int i)
{
	size_t an = 16 + 8 * (size_t)(i % 97);
	char *a = alloca(an);
	memset(a, 3, an);
	size_t n = 40 + (size_t)(i % 13);
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_mid, p, n);
	ua_leaf(i);
	sc_sink += (unsigned char)a[an - 1];
	if (i % 10 != 0) {
		free(p);
		sc_free(&c_mid, n);
	}
}

NOINLINE void ua_nest_alloc(int i)
{
	size_t n = 100 + (size_t)(i % 3);
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_nest, p, n);
	free(p);
	sc_free(&c_nest, n);
}

NOINLINE void ua_nest(int i, int d)
{
	char *a = alloca(64 * (size_t)d);
	memset(a, 4, 64 * (size_t)d);
	if (d == 1)
		ua_nest_alloc(i);
	else
		ua_nest(i, d - 1);
	sc_sink += (unsigned char)a[0];
}

NOINLINE void ua_run(void)
{
	for (int i = 0; i < 2000; i++) {
		ua_mid(i);
		ua_nest(i, 6);
	}
}

int main(void)
{
	ua_run();
	printf("ud_alloca: done\n");
	struct sc_count *const cs[] = {&c_mid, &c_leaf, &c_nest};
	ud_print_counts(stdout, cs, UD_N(cs));
	ud_caller("ua_mid", "ua_run");
	ud_caller("ua_leaf", "ua_mid");
	ud_caller("ua_nest_alloc", "ua_nest");
	return 33;
}
