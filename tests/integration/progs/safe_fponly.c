/*
 * safe_fponly: frame pointers only (test_safety.sh).  Built by the
 * Makefile with -fno-omit-frame-pointer -fno-asynchronous-unwind-tables
 * -fno-unwind-tables: the program's own code has no .eh_frame, so a DWARF
 * unwinder finds no rule for its frames, and only --unwind fp can walk
 * them.  Neither may crash or change what the program does.
 *   fo_leaf   main -> fo_a -> fo_b -> fo_c -> fo_leaf: 500 x
 *             malloc(10 + i % 90), every other one freed
 *   fo_thread the same chain in 4 threads, 200 each, all freed
 * Exits 27.
 */
#include <pthread.h>

#include "safe_common.h"

static struct sc_count c_leaf = {"fo_leaf"}, c_thr = {"fo_thread"};
static void *keep[500];

NOINLINE void fo_leaf(int i)
{
	size_t n = 10 + (size_t)(i % 90);
	keep[i] = malloc(n);
	sc_touch(keep[i], n);
	sc_alloc(&c_leaf, keep[i], n);
	if (i % 2) {
		free(keep[i]);
		sc_free(&c_leaf, n);
		keep[i] = NULL;
	}
}

NOINLINE void fo_c(int i)
{
	fo_leaf(i);
}
NOINLINE void fo_b(int i)
{
	fo_c(i);
}
NOINLINE void fo_a(int i)
{
	fo_b(i);
}

NOINLINE void fo_thread(int i)
{
	size_t n = 64 + (size_t)i;
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_thr, p, n);
	free(p);
	sc_free(&c_thr, n);
}

static void *worker(void *arg)
{
	for (int i = 0; i < 200; i++)
		fo_thread(i);
	return arg;
}

int main(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < 500; i++)
		fo_a(i);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	sc_print(&c_leaf);
	sc_print(&c_thr);
	return 27;
}
