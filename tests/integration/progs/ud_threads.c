/*
 * ud_threads: 8 threads allocating at once, each through a call chain of
 * its own depth (test_unwind_diff.sh).  Thread t (0..7) makes 1500 rounds
 * i of ut_chain(t, i, depth = 1 + (t + i) % 8) down to ut_leaf, which
 * allocates malloc(24 + 8 * t + i % 8) into a ring of 16 per thread (the
 * slot's previous block freed), and every 10th round calloc(4, 10 + t) in
 * ut_calloc (freed) straight from the thread's function.  Meanwhile main
 * allocates 3000 times in ut_main_alloc (malloc(100), freed).  Exits 36.
 */
#include <pthread.h>

#include "ud_common.h"

#define NT     8
#define ROUNDS 1500

static struct sc_count c_leaf = {"ut_leaf"}, c_calloc = {"ut_calloc"},
                       c_main = {"ut_main_alloc"};

struct ring {
	void *p[16];
	size_t n[16];
};
static struct ring rings[NT];

NOINLINE void ut_leaf(int t, int i)
{
	struct ring *r = &rings[t];
	int slot = i % 16;
	if (r->p[slot]) {
		free(r->p[slot]);
		sc_free(&c_leaf, r->n[slot]);
	}
	size_t n = 24 + 8 * (size_t)t + (size_t)(i % 8);
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_leaf, p, n);
	r->p[slot] = p;
	r->n[slot] = n;
}

NOINLINE void ut_chain(int t, int i, int depth)
{
	volatile int pad[4] = {t, i, depth, 0};
	if (depth <= 1)
		ut_leaf(t, i);
	else
		ut_chain(t, i, depth - 1);
	sc_sink += (unsigned long)pad[3];
}

NOINLINE void ut_calloc(int t)
{
	size_t n = 4 * (10 + (size_t)t);
	void *p = calloc(4, 10 + (size_t)t);
	sc_touch(p, n);
	sc_alloc(&c_calloc, p, n);
	free(p);
	sc_free(&c_calloc, n);
}

NOINLINE void *ut_thread(void *arg)
{
	int t = (int)(long)arg;
	for (int i = 0; i < ROUNDS; i++) {
		ut_chain(t, i, 1 + (t + i) % 8);
		if (i % 10 == 0)
			ut_calloc(t);
	}
	return NULL;
}

NOINLINE void ut_main_alloc(void)
{
	void *p = malloc(100);
	sc_touch(p, 100);
	sc_alloc(&c_main, p, 100);
	free(p);
	sc_free(&c_main, 100);
}

int main(void)
{
	pthread_t th[NT];
	for (long t = 0; t < NT; t++)
		if (pthread_create(&th[t], NULL, ut_thread, (void *)t) != 0) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < 3000; i++)
		ut_main_alloc();
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	printf("ud_threads: %d threads done\n", NT);
	struct sc_count *const cs[] = {&c_leaf, &c_calloc, &c_main};
	ud_print_counts(stdout, cs, UD_N(cs));
	ud_caller("ut_leaf", "ut_chain");
	ud_caller("ut_calloc", "ut_thread");
	ud_caller("ut_main_alloc", "main");
	return 36;
}
