/*
 * safe_threads: threads created and exiting at a high rate while
 * profiling (test_safety.sh).  1600 joinable threads, 8 at a time, each:
 *   th_alloc       20 x malloc(16 * (j + 1)), 18 freed (j = 0..19)
 *   th_key_value   malloc(40), the value of a pthread key, freed by the
 *                  key's destructor at thread exit
 *   th_dtor_alloc  in that destructor: malloc(24), freed
 * and 400 detached threads that free everything they allocate
 * (th_detached: 5 x malloc(100), all freed) before they signal main.
 * Prints the count lines; exits 22.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>

#include "safe_common.h"

static struct sc_count c_th = {"th_alloc"}, c_key = {"th_key_value"},
                       c_dtor = {"th_dtor_alloc"}, c_det = {"th_detached"};
static pthread_key_t key;
static int detached_done;

NOINLINE void th_dtor_alloc(void)
{
	void *p = malloc(24);
	sc_touch(p, 24);
	sc_alloc(&c_dtor, p, 24);
	free(p);
	sc_free(&c_dtor, 24);
}

static void key_dtor(void *v)
{
	th_dtor_alloc();
	free(v);
	sc_free(&c_key, 40);
}

NOINLINE void th_key_value(void)
{
	void *p = malloc(40);
	sc_touch(p, 40);
	sc_alloc(&c_key, p, 40);
	pthread_setspecific(key, p);
}

NOINLINE void th_alloc(void)
{
	void *p[20];
	for (int j = 0; j < 20; j++) {
		p[j] = malloc(16 * (j + 1));
		sc_touch(p[j], 16 * (j + 1));
		sc_alloc(&c_th, p[j], 16 * (j + 1));
	}
	/* Two stay live (leaked on purpose): j = 0 and 1. */
	for (int j = 2; j < 20; j++) {
		free(p[j]);
		sc_free(&c_th, 16 * (j + 1));
	}
}

static void *worker(void *arg)
{
	th_alloc();
	th_key_value();
	return arg;
}

NOINLINE void th_detached(void)
{
	void *p[5];
	for (int j = 0; j < 5; j++) {
		p[j] = malloc(100);
		sc_touch(p[j], 100);
		sc_alloc(&c_det, p[j], 100);
	}
	for (int j = 0; j < 5; j++) {
		free(p[j]);
		sc_free(&c_det, 100);
	}
}

static void *detached(void *arg)
{
	th_detached();
	__atomic_fetch_add(&detached_done, 1, __ATOMIC_RELEASE);
	return arg;
}

int main(void)
{
	pthread_key_create(&key, key_dtor);
	pthread_attr_t da;
	pthread_attr_init(&da);
	pthread_attr_setdetachstate(&da, PTHREAD_CREATE_DETACHED);
	int made_detached = 0;
	for (int round = 0; round < 200; round++) {
		pthread_t t[8];
		for (int i = 0; i < 8; i++)
			if (pthread_create(&t[i], NULL, worker, NULL) != 0) {
				printf("pthread_create failed\n");
				return 1;
			}
		for (int i = 0; i < 2; i++) {
			pthread_t d;
			if (pthread_create(&d, &da, detached, NULL) == 0)
				made_detached++;
		}
		for (int i = 0; i < 8; i++)
			pthread_join(t[i], NULL);
	}
	/* Bounded by the threads' progress, not by time. */
	while (__atomic_load_n(&detached_done, __ATOMIC_ACQUIRE) !=
	       made_detached)
		sched_yield();
	printf("threads: 1600 joined, %d detached\n", made_detached);
	sc_print(&c_th);
	sc_print(&c_key);
	sc_print(&c_dtor);
	sc_print(&c_det);
	return 22;
}
