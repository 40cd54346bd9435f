/*
 * cap_cancel: malloc and free with a deferred cancellation pending
 * (test_capture.sh).
 *
 * malloc and free are not cancellation points: a thread whose deferred
 * cancellation is pending must get through them and be cancelled only at
 * the next cancellation point, here pthread_testcancel().  A profiler
 * whose hook makes a system call that is a cancellation point (read,
 * write, open, ...) gets the thread cancelled inside malloc instead.
 *
 * Two threads, one after the other, each with PTHREAD_CANCEL_DEFERRED:
 *   self  calls pthread_cancel(pthread_self())
 *   main  tells main it is ready; main calls pthread_cancel on it and
 *         then tells it to go on (an atomic flag, no cancellation point)
 * then, 6 rounds of cc_alloc: malloc(1 MiB) (sampled at any interval),
 * malloc(100 + round), both touched and freed; then sets the marker
 * "before testcancel" and calls pthread_testcancel().  The thread records
 * how far it got in a marker (no stdio in the thread: a write may be a
 * cancellation point); main prints, for each thread, whether it was
 * cancelled (pthread_join's PTHREAD_CANCELED) and its last marker:
 *   cancel self: cancelled yes, last marker "before testcancel"
 *   cancel main: cancelled yes, last marker "before testcancel"
 *   count cc_alloc 24 12584142 0 0   (2 x sum over r of 1 MiB + 100 + r)
 * Exits 0 when both were cancelled at pthread_testcancel, 1 otherwise.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "safe_common.h"

#define ROUNDS 6

static struct sc_count c_cc = {"cc_alloc"};
static const char *volatile marker;
static char round_marker[ROUNDS][32];
static int by_main;
static _Atomic int ready, go;

NOINLINE void cc_alloc(int r)
{
	size_t big = 1 << 20, small = 100 + (size_t)r;
	void *a = malloc(big);
	sc_touch(a, big);
	sc_alloc(&c_cc, a, big);
	void *b = malloc(small);
	sc_touch(b, small);
	sc_alloc(&c_cc, b, small);
	free(b);
	sc_free(&c_cc, small);
	free(a);
	sc_free(&c_cc, big);
}

static void *thread_main(void *arg)
{
	int old;
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old);
	marker = "started";
	if (by_main) {
		atomic_store(&ready, 1);
		while (!atomic_load(&go))
			sched_yield(); /* not a cancellation point */
	} else {
		pthread_cancel(pthread_self());
	}
	marker = "cancel pending";
	for (int r = 0; r < ROUNDS; r++) {
		cc_alloc(r);
		marker = round_marker[r];
	}
	marker = "before testcancel";
	pthread_testcancel();
	marker = "after testcancel";
	return arg;
}

static int run(int main_cancels)
{
	pthread_t t;
	void *ret = NULL;
	by_main = main_cancels;
	atomic_store(&ready, 0);
	atomic_store(&go, 0);
	marker = "not started";
	if (pthread_create(&t, NULL, thread_main, NULL) != 0) {
		printf("cancel: pthread_create failed\n");
		return 0;
	}
	if (main_cancels) {
		while (!atomic_load(&ready))
			sched_yield();
		pthread_cancel(t);
		atomic_store(&go, 1);
	}
	pthread_join(t, &ret);
	int cancelled = ret == PTHREAD_CANCELED;
	const char *m = marker;
	printf("cancel %s: cancelled %s, last marker \"%s\"\n",
	       main_cancels ? "main" : "self", cancelled ? "yes" : "no", m);
	return cancelled && strcmp(m, "before testcancel") == 0;
}

int main(void)
{
	for (int r = 0; r < ROUNDS; r++)
		snprintf(round_marker[r], sizeof(round_marker[r]),
		         "after cc_alloc round %d", r);
	int ok = run(0);
	ok &= run(1);
	sc_print(&c_cc);
	return ok ? 0 : 1;
}
