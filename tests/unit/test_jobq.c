/*
 * Unit tests of the job queue (src/util/jobq.c): order, the writer's
 * stop-on-error (jobs after the first failure dropped), the collector's
 * fins on the owner's thread, the byte bound, marked jobs, and inline
 * running without a thread.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "unit.h"
#include "util/jobq.h"

#define N 64

struct log {
	pthread_mutex_t mu;
	int ran[N], nran;
	int dropped[N], ndropped;
	int fins[N], rcs[N], nfin;
	pthread_t fin_thread[N];
};

struct item {
	struct log *l;
	int i;
	int rc;                /* what run returns */
	pthread_mutex_t *gate; /* run waits on it, when set */
};

static int run_item(void *arg)
{
	struct item *it = arg;
	if (it->gate) {
		pthread_mutex_lock(it->gate);
		pthread_mutex_unlock(it->gate);
	}
	pthread_mutex_lock(&it->l->mu);
	it->l->ran[it->l->nran++] = it->i;
	pthread_mutex_unlock(&it->l->mu);
	return it->rc;
}

static void drop_item(void *arg)
{
	struct item *it = arg;
	pthread_mutex_lock(&it->l->mu);
	it->l->dropped[it->l->ndropped++] = it->i;
	pthread_mutex_unlock(&it->l->mu);
}

static void fin_item(void *arg, int rc)
{
	struct item *it = arg;
	it->l->fin_thread[it->l->nfin] = pthread_self();
	it->l->rcs[it->l->nfin] = rc;
	it->l->fins[it->l->nfin++] = it->i;
}

static int submit(struct jobq *q, struct item *it, bool fin, size_t bytes,
                  unsigned flags)
{
	return jobq_submit(q, run_item, fin ? fin_item : NULL, drop_item, it,
	                   bytes, flags);
}

static void test_order_threaded(void)
{
	struct log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct item it[N];
	struct jobq q;
	jobq_init(&q, JOBQ_NOTIFY, 0);
	jobq_start(&q);
	CHECK(q.threaded);
	CHECK(jobq_fd(&q) >= 0);
	for (int i = 0; i < N; i++) {
		it[i] = (struct item){.l = &l, .i = i, .rc = i == 5 ? -EIO : 0};
		CHECK_EQ_U64(submit(&q, &it[i], true, 0, 0), 0);
	}
	unsigned failed = 9;
	CHECK_EQ_U64(jobq_stop(&q, &failed), (uint64_t)-EIO);
	CHECK_EQ_U64(failed, 1);
	/* Without JOBQ_STOP_ON_ERROR every job runs, in order, and every
	 * fin runs on the caller's thread with its job's result. */
	CHECK_EQ_U64(l.nran, N);
	CHECK_EQ_U64(l.nfin, N);
	CHECK_EQ_U64(l.ndropped, 0);
	for (int i = 0; i < N; i++) {
		CHECK_EQ_U64(l.ran[i], i);
		CHECK_EQ_U64(l.fins[i], i);
		CHECK_EQ_U64(l.rcs[i], i == 5 ? (uint64_t)-EIO : 0);
		CHECK(pthread_equal(l.fin_thread[i], pthread_self()));
	}
	CHECK(!q.threaded);
	CHECK_EQ_U64(jobq_fd(&q), (uint64_t)-1);
}

static void test_stop_on_error(void)
{
	for (int threaded = 0; threaded < 2; threaded++) {
		struct log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
		struct item it[10];
		struct jobq q;
		jobq_init(&q, JOBQ_STOP_ON_ERROR, 0);
		if (threaded)
			jobq_start(&q);
		for (int i = 0; i < 10; i++) {
			it[i] = (struct item){
			        .l = &l, .i = i, .rc = i == 3 ? -ENOSPC : 0};
			int rc = submit(&q, &it[i], false, 0, 0);
			/* Inline: run's result, then the queue's error. */
			if (!threaded)
				CHECK_EQ_U64(rc,
				             i >= 3 ? (uint64_t)-ENOSPC : 0);
		}
		CHECK_EQ_U64(jobq_stop(&q, NULL), (uint64_t)-ENOSPC);
		CHECK_EQ_U64(l.nran, 4);
		CHECK_EQ_U64(l.ndropped, 6);
		/* Each of 4..9 dropped once.  Inline, in order; threaded, a
		 * submit that finds the queue stopped drops its job on the
		 * caller's thread while the worker may still be dropping the
		 * queued ones, so the order is not fixed (CI saw 4, 9, 5..8).
		 */
		unsigned seen = 0;
		for (int i = 0; i < l.ndropped; i++) {
			int d = l.dropped[i];
			CHECK(d >= 4 && d <= 9 && !(seen & 1u << d));
			if (d >= 4 && d <= 9)
				seen |= 1u << d;
			if (!threaded)
				CHECK_EQ_U64(d, 4 + i);
		}
		CHECK_EQ_U64(seen, 0x3f0u);
		/* Stopped: the error is gone with the thread. */
		struct item again = {.l = &l, .i = 99};
		CHECK_EQ_U64(submit(&q, &again, false, 0, 0), 0);
		CHECK_EQ_U64(l.ran[l.nran - 1], 99);
	}
}

static void test_fins_wait_for_poll(void)
{
	struct log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
	pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
	struct item it[3];
	struct jobq q;
	jobq_init(&q, JOBQ_NOTIFY, 0);
	jobq_start(&q);
	pthread_mutex_lock(&gate);
	for (int i = 0; i < 3; i++) {
		it[i] = (struct item){
		        .l = &l, .i = i, .gate = i == 0 ? &gate : NULL};
		submit(&q, &it[i], true, 0, JOBQ_MARK);
	}
	/* The first job holds the worker: the other two are marked and
	 * not yet started. */
	CHECK(jobq_marked(&q));
	pthread_mutex_unlock(&gate);
	/* The eventfd says when fins wait; no fin runs before jobq_poll. */
	struct pollfd p = {.fd = jobq_fd(&q), .events = POLLIN};
	CHECK_EQ_U64(poll(&p, 1, 10000), 1);
	CHECK_EQ_U64(l.nfin, 0);
	for (int tries = 0; l.nfin < 3 && tries < 10000; tries++) {
		poll(&p, 1, 1000);
		jobq_poll(&q);
	}
	CHECK_EQ_U64(l.nfin, 3);
	CHECK(!jobq_marked(&q));
	jobq_stop(&q, NULL);
}

struct submitter {
	struct jobq *q;
	struct item *it;
	_Atomic int returned;
};

static void *submit_60(void *arg)
{
	struct submitter *sb = arg;
	submit(sb->q, sb->it, false, 60, 0);
	atomic_store(&sb->returned, 1);
	return NULL;
}

static void test_bytes_bound(void)
{
	struct log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
	pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
	struct item it[2] = {{.l = &l, .i = 0, .gate = &gate},
	                     {.l = &l, .i = 1}};
	struct jobq q;
	jobq_init(&q, 0, 100);
	jobq_start(&q);
	/* Job 0 holds 60 bytes until it has run, and the gate holds it. */
	pthread_mutex_lock(&gate);
	submit(&q, &it[0], false, 60, 0);
	CHECK_EQ_U64(jobq_bytes(&q), 60);
	/* 60 more would pass 100: the submit waits for job 0. */
	struct submitter sb = {.q = &q, .it = &it[1]};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, submit_60, &sb) == 0);
	for (int k = 0; k < 200; k++) { /* 200 ms: it must not return */
		CHECK(!atomic_load(&sb.returned));
		CHECK(jobq_bytes(&q) <= 100);
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	pthread_mutex_unlock(&gate);
	pthread_join(t, NULL);
	CHECK(atomic_load(&sb.returned));
	jobq_stop(&q, NULL);
	CHECK_EQ_U64(l.nran, 2);
	CHECK_EQ_U64(jobq_bytes(&q), 0);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"order_threaded", test_order_threaded},
	        {"stop_on_error", test_stop_on_error},
	        {"fins_wait_for_poll", test_fins_wait_for_poll},
	        {"bytes_bound", test_bytes_bound},
	        {NULL, NULL},
	};
	return unit_main("jobq", tests);
}
