/*
 * A work queue with one worker thread, for the profile writer: while the
 * writer interns the next part of a big dump, the worker writes the rows
 * of the parts before into SQLite.  Jobs run in the order they were
 * submitted.  The first job that fails stops the queue: the jobs after it
 * are dropped (their `drop` frees their argument) and wq_finish returns
 * its error.
 *
 * Without a thread (wq_start(q, false), or when one cannot be created) a
 * job runs inside wq_submit, so small dumps take no thread at all.
 *
 * Whoever submits must leave alone what the jobs use (the SQLite
 * connection, the job's argument) until wq_finish.
 */
#ifndef HEAPPROF_PROFILE_WORKQ_H
#define HEAPPROF_PROFILE_WORKQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct wq_job {
	int (*run)(void *arg);   /* 0 or a negative errno; frees arg */
	void (*drop)(void *arg); /* frees arg without running */
	void *arg;
};

struct workq {
	bool threaded;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct wq_job *jobs;
	size_t njobs, cap, next; /* next: the first job not yet taken */
	bool closing;
	int err; /* the first job's error */
};

/* Threaded if asked and a thread can be created. */
void wq_start(struct workq *q, bool threaded);
/* Run or queue a job.  0, or the queue's error so far (the job is then
 * dropped), or -ENOMEM (dropped). */
int wq_submit(struct workq *q, int (*run)(void *), void (*drop)(void *),
              void *arg);
/* Wait for every job, end the thread; the first error or 0. */
int wq_finish(struct workq *q);

#endif
