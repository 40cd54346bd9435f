/*
 * The writer's work queue (see workq.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/workq.h"
#include "util/grow.h"

static void *worker(void *arg)
{
	struct workq *q = arg;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (q->next == q->njobs && !q->closing)
			pthread_cond_wait(&q->cv, &q->mu);
		if (q->next == q->njobs)
			break; /* closing, and nothing left */
		struct wq_job job = q->jobs[q->next++];
		int failed = q->err != 0;
		pthread_mutex_unlock(&q->mu);
		int rc = 0;
		if (failed)
			job.drop(job.arg);
		else
			rc = job.run(job.arg);
		pthread_mutex_lock(&q->mu);
		if (rc && !q->err)
			q->err = rc;
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

void wq_start(struct workq *q, bool threaded)
{
	memset(q, 0, sizeof(*q));
	if (!threaded)
		return;
	if (pthread_mutex_init(&q->mu, NULL) != 0)
		return;
	if (pthread_cond_init(&q->cv, NULL) != 0) {
		pthread_mutex_destroy(&q->mu);
		return;
	}
	q->threaded = pthread_create(&q->thread, NULL, worker, q) == 0;
	if (!q->threaded) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
	}
}

int wq_submit(struct workq *q, int (*run)(void *), void (*drop)(void *),
              void *arg)
{
	if (!q->threaded) {
		if (q->err) {
			drop(arg);
			return q->err;
		}
		return q->err = run(arg);
	}
	pthread_mutex_lock(&q->mu);
	int err = q->err;
	struct wq_job *jobs =
	        err ? NULL : hp_grow(q->jobs, &q->cap, q->njobs, sizeof(*jobs));
	if (!err && !jobs)
		err = q->err = -ENOMEM;
	if (!err) {
		q->jobs = jobs;
		q->jobs[q->njobs++] = (struct wq_job){run, drop, arg};
		pthread_cond_signal(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
	if (err)
		drop(arg);
	return err;
}

int wq_finish(struct workq *q)
{
	if (q->threaded) {
		pthread_mutex_lock(&q->mu);
		q->closing = true;
		pthread_cond_signal(&q->cv);
		pthread_mutex_unlock(&q->mu);
		pthread_join(q->thread, NULL);
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		q->threaded = false;
	}
	free(q->jobs);
	q->jobs = NULL;
	q->njobs = q->cap = q->next = 0;
	return q->err;
}
