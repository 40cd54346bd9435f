/*
 * contention: cross-thread frees and address reuse under contention.  All
 * threads share one malloc arena (M_ARENA_MAX = 1), so a block freed by one
 * thread is soon handed out again to another: a profiler that takes the
 * freed address out of its live table after the real free() (or puts a new
 * one in before the real malloc() returns) loses or mixes records.
 *
 *   4 producers: producer_alloc, 20000 x malloc(64) each, handed to the
 *                consumers through a queue
 *   4 consumers: free what they receive, and for each one received
 *                consumer_alloc does malloc(64) + free
 * Exact with -i 1: producer_alloc 80000 objects / 5,120,000 B, none live;
 * consumer_alloc 80000 / 5,120,000 B, none live.  Exits 17 on success.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

#define NPROD        4
#define NCONS        4
#define PER_PRODUCER 20000
#define QCAP         1024

static void *queue[QCAP];
static int qhead, qlen, producers_left = NPROD;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static volatile unsigned long sink;
static int failures;

static void push(void *p)
{
	pthread_mutex_lock(&mu);
	while (qlen == QCAP)
		pthread_cond_wait(&not_full, &mu);
	queue[(qhead + qlen) % QCAP] = p;
	qlen++;
	pthread_cond_signal(&not_empty);
	pthread_mutex_unlock(&mu);
}

/* NULL when the producers are done and the queue is empty. */
static void *pop(void)
{
	pthread_mutex_lock(&mu);
	while (qlen == 0 && producers_left > 0)
		pthread_cond_wait(&not_empty, &mu);
	void *p = NULL;
	if (qlen > 0) {
		p = queue[qhead];
		qhead = (qhead + 1) % QCAP;
		qlen--;
		pthread_cond_signal(&not_full);
	}
	pthread_mutex_unlock(&mu);
	return p;
}

NOINLINE void *producer_alloc(int id)
{
	void *p = malloc(64);
	if (!p) {
		__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	memset(p, id, 64);
	return p;
}

NOINLINE void consumer_alloc(void)
{
	char *q = malloc(64);
	if (!q) {
		__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
		return;
	}
	memset(q, 1, 64);
	sink += (unsigned char)q[63];
	free(q);
}

static void *producer(void *arg)
{
	int id = (int)(long)arg;
	for (int i = 0; i < PER_PRODUCER; i++) {
		void *p = producer_alloc(id);
		if (p)
			push(p);
	}
	pthread_mutex_lock(&mu);
	producers_left--;
	pthread_cond_broadcast(&not_empty);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	void *p;
	while ((p = pop()) != NULL) {
		sink += ((unsigned char *)p)[63];
		free(p);
		consumer_alloc();
	}
	return NULL;
}

int main(void)
{
	mallopt(M_ARENA_MAX, 1);
	pthread_t prod[NPROD], cons[NCONS];
	for (long i = 0; i < NCONS; i++)
		if (pthread_create(&cons[i], NULL, consumer, NULL) != 0)
			return 1;
	for (long i = 0; i < NPROD; i++)
		if (pthread_create(&prod[i], NULL, producer, (void *)(i + 1)) !=
		    0)
			return 1;
	for (int i = 0; i < NPROD; i++)
		pthread_join(prod[i], NULL);
	for (int i = 0; i < NCONS; i++)
		pthread_join(cons[i], NULL);
	if (failures) {
		printf("contention: %d failures\n", failures);
		return 1;
	}
	printf("contention: done\n");
	return 17;
}
