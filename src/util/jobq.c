/*
 * The job queue (jobq.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/jobq.h"

struct jobq_node {
	struct jobq_job j;
	int rc;
	struct jobq_node *next;
};

void jobq_init(struct jobq *q, unsigned qflags, size_t max_bytes)
{
	memset(q, 0, sizeof(*q));
	q->qflags = qflags;
	q->max_bytes = max_bytes;
	q->efd = -1;
}

static bool stopped(const struct jobq *q, int err)
{
	return err && (q->qflags & JOBQ_STOP_ON_ERROR);
}

/* A job's run, or its drop once the queue stopped on an error (err: the
 * queue's error when the job was taken).  Inline, or on the worker with
 * the lock released. */
static int run_job(const struct jobq *q, const struct jobq_job *j, int err)
{
	if (stopped(q, err)) {
		if (j->drop)
			j->drop(j->arg);
		return err;
	}
	return j->run(j->arg);
}

/* A run's result counted (under the lock when threaded). */
static void count(struct jobq *q, int rc, int err)
{
	if (!rc || stopped(q, err))
		return; /* ran fine, or dropped */
	q->failed++;
	if (!q->err)
		q->err = rc;
}

static void *worker(void *arg)
{
	struct jobq *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->head && !q->closing)
			pthread_cond_wait(&q->cv, &q->mu);
		struct jobq_node *n = q->head;
		if (!n)
			break; /* closing, and nothing left */
		q->head = n->next;
		if (!q->head)
			q->tail = NULL;
		if (n->j.flags & JOBQ_MARK)
			q->marked--;
		int err = q->err;
		q->busy = true;
		pthread_mutex_unlock(&q->mu);
		n->rc = run_job(q, &n->j, err);
		pthread_mutex_lock(&q->mu);
		q->busy = false;
		count(q, n->rc, err);
		q->bytes -= n->j.bytes;
		pthread_cond_broadcast(&q->room);
		if (!n->j.fin) {
			free(n);
			continue;
		}
		n->next = NULL;
		if (q->dtail)
			q->dtail->next = n;
		else
			q->dhead = n;
		q->dtail = n;
		if (q->efd >= 0) {
			uint64_t one = 1;
			ssize_t w = write(q->efd, &one, sizeof(one));
			(void)w; /* a counter: it cannot fill before 2^64 - 1 */
		}
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

void jobq_start(struct jobq *q)
{
	if (q->threaded)
		return;
	q->failed = 0;
	q->err = 0;
	if (q->qflags & JOBQ_NOTIFY) {
		q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->efd < 0)
			return;
	}
	if (pthread_mutex_init(&q->mu, NULL) != 0)
		goto no_mutex;
	if (pthread_cond_init(&q->cv, NULL) != 0)
		goto no_cv;
	if (pthread_cond_init(&q->room, NULL) != 0)
		goto no_room;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	q->threaded = pthread_create(&q->thread, NULL, worker, q) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (q->threaded)
		return;
	pthread_cond_destroy(&q->room);
no_room:
	pthread_cond_destroy(&q->cv);
no_cv:
	pthread_mutex_destroy(&q->mu);
no_mutex:
	if (q->efd >= 0)
		close(q->efd);
	q->efd = -1;
}

/* A job run on the caller's thread (no worker, or no node for it), its
 * result counted as the worker counts it, then its fin. */
static int run_here(struct jobq *q, const struct jobq_job *j, int err)
{
	int rc = run_job(q, j, err);
	if (q->threaded)
		pthread_mutex_lock(&q->mu);
	count(q, rc, err);
	if (q->threaded)
		pthread_mutex_unlock(&q->mu);
	if (j->fin)
		j->fin(j->arg, rc);
	return rc;
}

int jobq_submit(struct jobq *q, int (*run)(void *arg),
                void (*fin)(void *arg, int rc), void (*drop)(void *arg),
                void *arg, size_t bytes, unsigned flags)
{
	const struct jobq_job job = {.run = run,
	                             .fin = fin,
	                             .drop = drop,
	                             .arg = arg,
	                             .bytes = bytes,
	                             .flags = flags};
	const struct jobq_job *j = &job;
	if (!q->threaded)
		return run_here(q, j, q->err);
	struct jobq_node *n = malloc(sizeof(*n));
	pthread_mutex_lock(&q->mu);
	if (stopped(q, q->err)) {
		int err = q->err;
		pthread_mutex_unlock(&q->mu);
		free(n);
		if (j->drop)
			j->drop(j->arg);
		return err;
	}
	if (!n) {
		/* Inline, after the jobs before it: the worker idle. */
		while (q->head || q->busy)
			pthread_cond_wait(&q->room, &q->mu);
		int err = q->err;
		pthread_mutex_unlock(&q->mu);
		jobq_poll(q); /* the fins before it first */
		return run_here(q, j, err);
	}
	*n = (struct jobq_node){.j = *j};
	/* Room first: the worker frees what the jobs before held. */
	while (q->max_bytes && q->bytes && q->bytes + j->bytes > q->max_bytes)
		pthread_cond_wait(&q->room, &q->mu);
	q->bytes += j->bytes;
	if (j->flags & JOBQ_MARK)
		q->marked++;
	if (q->tail)
		q->tail->next = n;
	else
		q->head = n;
	q->tail = n;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return 0;
}

int jobq_fd(const struct jobq *q)
{
	return q->threaded ? q->efd : -1;
}

void jobq_poll(struct jobq *q)
{
	if (!q->threaded)
		return;
	if (q->efd >= 0) {
		uint64_t v;
		ssize_t r = read(q->efd, &v, sizeof(v));
		(void)r;
	}
	pthread_mutex_lock(&q->mu);
	struct jobq_node *n = q->dhead;
	q->dhead = q->dtail = NULL;
	pthread_mutex_unlock(&q->mu);
	while (n) {
		struct jobq_node *next = n->next;
		n->j.fin(n->j.arg, n->rc);
		free(n);
		n = next;
	}
}

bool jobq_marked(struct jobq *q)
{
	if (!q->threaded)
		return false;
	pthread_mutex_lock(&q->mu);
	bool any = q->marked != 0;
	pthread_mutex_unlock(&q->mu);
	return any;
}

size_t jobq_bytes(struct jobq *q)
{
	if (!q->threaded)
		return 0;
	pthread_mutex_lock(&q->mu);
	size_t b = q->bytes;
	pthread_mutex_unlock(&q->mu);
	return b;
}

int jobq_stop(struct jobq *q, unsigned *failed)
{
	if (q->threaded) {
		pthread_mutex_lock(&q->mu);
		q->closing = true;
		pthread_cond_signal(&q->cv);
		pthread_mutex_unlock(&q->mu);
		pthread_join(q->thread, NULL);
		jobq_poll(q);
		pthread_cond_destroy(&q->room);
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		if (q->efd >= 0)
			close(q->efd);
	}
	int err = q->err;
	if (failed)
		*failed = q->failed;
	jobq_init(q, q->qflags, q->max_bytes);
	return err;
}
