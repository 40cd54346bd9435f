/*
 * The collector's profile writes on a thread of their own (writeq.h).
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "collector/writeq.h"

struct wq_node {
	wq_run_fn run;
	wq_fin_fn fin;
	void *arg;
	size_t bytes;
	unsigned flags;
	int rc;
	struct wq_node *next;
};

void writeq_init(struct writeq *q)
{
	memset(q, 0, sizeof(*q));
	q->efd = -1;
}

static void *writer(void *arg)
{
	struct writeq *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->head && !q->closing)
			pthread_cond_wait(&q->cv, &q->mu);
		struct wq_node *n = q->head;
		if (!n)
			break; /* closing, and nothing left */
		q->head = n->next;
		if (!q->head)
			q->tail = NULL;
		if (n->flags & WQ_PERIODIC)
			q->periodic--;
		pthread_mutex_unlock(&q->mu);
		n->rc = n->run(n->arg);
		pthread_mutex_lock(&q->mu);
		if (n->rc)
			q->failed++;
		q->bytes -= n->bytes;
		n->next = NULL;
		if (q->dtail)
			q->dtail->next = n;
		else
			q->dhead = n;
		q->dtail = n;
		pthread_cond_broadcast(&q->room);
		uint64_t one = 1;
		ssize_t w = write(q->efd, &one, sizeof(one));
		(void)w; /* a counter: it cannot fill before 2^64 - 1 */
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

void writeq_start(struct writeq *q)
{
	if (q->threaded)
		return;
	q->failed = 0;
	q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->efd < 0)
		return;
	if (pthread_mutex_init(&q->mu, NULL) != 0)
		goto no_mutex;
	if (pthread_cond_init(&q->cv, NULL) != 0)
		goto no_cv;
	if (pthread_cond_init(&q->room, NULL) != 0)
		goto no_room;
	/* The writer blocks every signal: they are the loop's (signalfd). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	q->threaded = pthread_create(&q->thread, NULL, writer, q) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (q->threaded)
		return;
	pthread_cond_destroy(&q->room);
no_room:
	pthread_cond_destroy(&q->cv);
no_cv:
	pthread_mutex_destroy(&q->mu);
no_mutex:
	close(q->efd);
	q->efd = -1;
}

int writeq_submit(struct writeq *q, wq_run_fn run, wq_fin_fn fin, void *arg,
                  size_t bytes, unsigned flags)
{
	struct wq_node *n = q->threaded ? malloc(sizeof(*n)) : NULL;
	if (!n) {
		int rc = run(arg);
		fin(arg, rc);
		return rc;
	}
	*n = (struct wq_node){.run = run,
	                      .fin = fin,
	                      .arg = arg,
	                      .bytes = bytes,
	                      .flags = flags};
	pthread_mutex_lock(&q->mu);
	/* Room first: the writer frees what the jobs before held. */
	while (q->bytes && q->bytes + bytes > WRITEQ_MAX_BYTES)
		pthread_cond_wait(&q->room, &q->mu);
	q->bytes += bytes;
	if (flags & WQ_PERIODIC)
		q->periodic++;
	if (q->tail)
		q->tail->next = n;
	else
		q->head = n;
	q->tail = n;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return 0;
}

int writeq_fd(const struct writeq *q)
{
	return q->threaded ? q->efd : -1;
}

void writeq_poll(struct writeq *q)
{
	if (!q->threaded)
		return;
	uint64_t v;
	ssize_t r = read(q->efd, &v, sizeof(v));
	(void)r;
	pthread_mutex_lock(&q->mu);
	struct wq_node *n = q->dhead;
	q->dhead = q->dtail = NULL;
	pthread_mutex_unlock(&q->mu);
	while (n) {
		struct wq_node *next = n->next;
		n->fin(n->arg, n->rc);
		free(n);
		n = next;
	}
}

bool writeq_periodic_queued(struct writeq *q)
{
	if (!q->threaded)
		return false;
	pthread_mutex_lock(&q->mu);
	bool any = q->periodic != 0;
	pthread_mutex_unlock(&q->mu);
	return any;
}

size_t writeq_bytes(struct writeq *q)
{
	if (!q->threaded)
		return 0;
	pthread_mutex_lock(&q->mu);
	size_t b = q->bytes;
	pthread_mutex_unlock(&q->mu);
	return b;
}

unsigned writeq_stop(struct writeq *q)
{
	if (!q->threaded)
		return 0;
	pthread_mutex_lock(&q->mu);
	q->closing = true;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->thread, NULL);
	writeq_poll(q);
	unsigned failed = q->failed;
	pthread_cond_destroy(&q->room);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	close(q->efd);
	writeq_init(q);
	return failed;
}
