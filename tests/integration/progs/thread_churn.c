/*
 * thread_churn: 200 short-lived threads, in waves of 8, half joinable and
 * half detached, each allocating; thread-specific data whose destructor
 * frees and allocates at thread exit.
 *
 * Per thread (exact with -i 1, 200 threads):
 *   churn_alloc      100 x malloc(64), 90 freed: 10 live per thread
 *   tls_value_alloc  1 x malloc(32), set as the thread's key value; freed
 *                    by the key destructor at thread exit
 *   tls_dtor_alloc   in the key destructor: 1 x malloc(48), freed
 * Totals: churn_alloc 20000 objects / 1,280,000 B allocated, 2000 / 128,000 B
 * live; tls_value_alloc 200 / 6400 B, 0 live; tls_dtor_alloc 200 / 9600 B,
 * 0 live.
 * The main thread waits for every destructor to finish (a condition
 * variable) before it exits.  Exits 11 on success.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

#define NTHREADS 200
#define WAVE     8

static volatile unsigned long sink;
static pthread_key_t key;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int dtors_done;
static int failures;
static void *leaks[NTHREADS][10];

NOINLINE void tls_dtor_alloc(void)
{
	char *p = malloc(48);
	if (p) {
		memset(p, 4, 48);
		sink += (unsigned char)p[47];
	}
	free(p);
}

static void key_dtor(void *v)
{
	free(v);
	tls_dtor_alloc();
	pthread_mutex_lock(&mu);
	dtors_done++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

NOINLINE void tls_value_alloc(void)
{
	void *v = malloc(32);
	if (!v || pthread_setspecific(key, v) != 0) {
		__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
		free(v);
		/* The destructor will not run: count it as done here. */
		pthread_mutex_lock(&mu);
		dtors_done++;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
}

NOINLINE void churn_alloc(int id)
{
	void *p[100];
	for (int i = 0; i < 100; i++) {
		p[i] = malloc(64);
		if (!p[i]) {
			__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
			continue;
		}
		memset(p[i], id & 0xff, 64);
		sink += ((unsigned char *)p[i])[63];
	}
	for (int i = 0; i < 90; i++)
		free(p[i]);
	memcpy(leaks[id], &p[90], sizeof(leaks[id]));
}

NOINLINE void *worker(void *arg)
{
	int id = (int)(long)arg;
	tls_value_alloc();
	churn_alloc(id);
	return NULL;
}

int main(void)
{
	if (pthread_key_create(&key, key_dtor) != 0) {
		perror("pthread_key_create");
		return 1;
	}
	pthread_attr_t detached;
	pthread_attr_init(&detached);
	pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
	for (int w = 0; w < NTHREADS; w += WAVE) {
		pthread_t t[WAVE];
		int joinable[WAVE];
		for (int k = 0; k < WAVE; k++) {
			int id = w + k;
			joinable[k] = (id % 2 == 0);
			int rc = pthread_create(&t[k],
			                        joinable[k] ? NULL : &detached,
			                        worker, (void *)(long)id);
			if (rc != 0) {
				fprintf(stderr, "pthread_create: %s\n",
				        strerror(rc));
				return 1;
			}
		}
		for (int k = 0; k < WAVE; k++)
			if (joinable[k])
				pthread_join(t[k], NULL);
	}
	pthread_mutex_lock(&mu);
	while (dtors_done < NTHREADS)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	if (failures) {
		printf("thread_churn: %d failures\n", failures);
		return 1;
	}
	printf("thread_churn: %d threads done\n", NTHREADS);
	return 11;
}
