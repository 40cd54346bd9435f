/*
 * The pool of capture contexts (src/client/unwind_ctx.c, compiled into
 * this test with the threads' records, thread.c): a claim holds exactly
 * the context it returns, whatever it passed on the way (a spare it took
 * before finding its own was once kept busy for good: contexts leaked
 * with thread churn until a thread's probes found all busy, and its
 * allocations were recorded with their caller only); all busy gives
 * NULL and holds nothing; unwind_ctx_drop gives back what a hook a
 * longjmp left still held, and so does a thread's exit; and threads that come
 * and go, claiming at two levels at once, leave every context free.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

#include "../../src/client/thread.c"
#include "../../src/client/unwind_ctx.c"

__thread struct client_tls hp_tls;

/* Contexts held now. */
static unsigned busy_count(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < CTX_COUNT; i++)
		n += atomic_load(&ctx_pool[i].busy) != 0;
	return n;
}

static void pool_clear(void)
{
	for (unsigned i = 0; i < CTX_COUNT; i++) {
		atomic_store(&ctx_pool[i].busy, 0);
		atomic_store(&ctx_pool[i].owner, 0);
	}
}

static void test_own_after_spare(void)
{
	unwind_ctx_init();
	CHECK(ctx_pool != NULL);
	if (!ctx_pool)
		return;
	pool_clear();
	uintptr_t tp = thread_pointer();
	uint32_t h = ctx_hash(tp) % CTX_COUNT, h1 = (h + 1) % CTX_COUNT;
	struct client_thread *t = client_thread();
	CHECK(t != NULL);
	/* The first probe is held by another thread: this one gets the
	 * second and owns it. */
	atomic_store(&ctx_pool[h].busy, 0x1001);
	atomic_store(&ctx_pool[h].owner, 0x1000);
	struct capture_ctx *c = unwind_ctx_claim(0);
	CHECK(c == &ctx_pool[h1]);
	unwind_ctx_release(c);
	/* The first is free again, still the other thread's, and the hint
	 * points elsewhere: the claim passes the first (a spare) and finds
	 * its own. */
	atomic_store(&ctx_pool[h].busy, 0);
	if (t)
		t->ctx_hint = (uint16_t)((h + CTX_PROBE + 3) % CTX_COUNT);
	c = unwind_ctx_claim(0);
	CHECK(c == &ctx_pool[h1]);
	CHECK_EQ_U64(busy_count(), 1);
	CHECK_EQ_U64(atomic_load(&ctx_pool[h].busy), 0);
	unwind_ctx_release(c);
	CHECK_EQ_U64(busy_count(), 0);
}

static void test_all_busy(void)
{
	pool_clear();
	uintptr_t tp = thread_pointer();
	uint32_t h = ctx_hash(tp);
	struct client_thread *t = client_thread();
	if (t)
		t->ctx_hint = (uint16_t)(h % CTX_COUNT);
	for (uint32_t k = 0; k < CTX_PROBE; k++)
		atomic_store(&ctx_pool[(h + k) % CTX_COUNT].busy, 0x2001);
	CHECK(unwind_ctx_claim(0) == NULL);
	CHECK_EQ_U64(busy_count(), CTX_PROBE);
	/* One frees up: taken, and nothing else. */
	uint32_t last = (h + CTX_PROBE - 1) % CTX_COUNT;
	atomic_store(&ctx_pool[last].busy, 0);
	struct capture_ctx *c = unwind_ctx_claim(0);
	CHECK(c == &ctx_pool[last]);
	CHECK_EQ_U64(busy_count(), CTX_PROBE);
	unwind_ctx_release(c);
	pool_clear();
}

static void test_drop(void)
{
	pool_clear();
	/* A hook holds level 0; a signal handler's hook under it, level 1,
	 * is left by a longjmp: its context goes back, level 0's stays. */
	struct capture_ctx *c0 = unwind_ctx_claim(0);
	struct capture_ctx *c1 = unwind_ctx_claim(1);
	CHECK(c0 && c1 && c0 != c1);
	CHECK_EQ_U64(busy_count(), 2);
	unwind_ctx_drop(1);
	CHECK_EQ_U64(busy_count(), 1);
	CHECK(c0 && atomic_load(&c0->busy) != 0);
	unwind_ctx_release(c0);
	CHECK_EQ_U64(busy_count(), 0);
}

/* A thread whose hooks a longjmp left (their contexts still held) ends:
 * its record's destructor gives them back. */
static void *left_main(void *arg)
{
	(void)arg;
	CHECK(client_thread() != NULL);
	CHECK(unwind_ctx_claim(0) != NULL);
	CHECK(unwind_ctx_claim(1) != NULL);
	return NULL;
}

static void test_exit_gives_back(void)
{
	pool_clear();
	pthread_t th;
	CHECK(pthread_create(&th, NULL, left_main, NULL) == 0);
	pthread_join(th, NULL);
	CHECK_EQ_U64(busy_count(), 0);
}

#define CHURN_THREADS 8
#define CHURN_ROUNDS  400
#define CHURN_CLAIMS  200

static _Atomic unsigned churn_null, churn_same;

static void *churn(void *arg)
{
	(void)arg;
	for (int i = 0; i < CHURN_CLAIMS; i++) {
		struct capture_ctx *a = unwind_ctx_claim(0);
		struct capture_ctx *b =
		        (i & 3) == 0 ? unwind_ctx_claim(1) : NULL;
		if (!a)
			atomic_fetch_add(&churn_null, 1);
		if (a && a == b)
			atomic_fetch_add(&churn_same, 1);
		unwind_ctx_release(b);
		unwind_ctx_release(a);
	}
	return NULL;
}

static void test_churn(void)
{
	pool_clear();
	/* Threads by the thousand, a few at a time: glibc reuses their
	 * stacks, so thread pointers (and their probes) come back, owned
	 * by threads that are gone. */
	for (int r = 0; r < CHURN_ROUNDS; r++) {
		pthread_t th[CHURN_THREADS];
		int n = 0;
		for (int k = 0; k < CHURN_THREADS; k++)
			if (pthread_create(&th[n], NULL, churn, NULL) == 0)
				n++;
		for (int k = 0; k < n; k++)
			pthread_join(th[k], NULL);
	}
	CHECK_EQ_U64(atomic_load(&churn_same), 0);
	/* (A claim may find all its probes busy: legitimate, and rare.) */
	printf("  note: %u of %u claims found no context\n",
	       atomic_load(&churn_null),
	       CHURN_ROUNDS * CHURN_THREADS * CHURN_CLAIMS);
	CHECK_EQ_U64(busy_count(), 0);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"own_after_spare", test_own_after_spare},
	        {"all_busy", test_all_busy},
	        {"drop", test_drop},
	        {"exit_gives_back", test_exit_gives_back},
	        {"churn", test_churn},
	        {NULL, NULL},
	};
	return unit_main("unwind_ctx", tests);
}
