/*
 * The one job queue of heapprof: jobs run in the order they were
 * submitted, on a worker thread of the queue's own (jobq_start), or
 * inline in jobq_submit when the queue has no thread (before jobq_start,
 * after jobq_stop, or when none could be made).  Its two users:
 *
 * - the profile writer (store/writer_dump.c): while the writer interns
 *   the next part of a big dump, the worker writes the rows of the parts
 *   before into SQLite.  JOBQ_STOP_ON_ERROR: the first job that fails
 *   stops the queue, the jobs after it are dropped (`drop` frees their
 *   argument) and jobq_stop returns its error.
 * - the collector (collector/collector.c): the profile writes (process
 *   rows, dumps, trace events) run beside the session's loop, which goes
 *   on answering hellos and signals while a big dump is written (issue
 *   18, case 12).  JOBQ_NOTIFY: each job's `fin` runs on the loop's thread
 *   (jobq_poll, when jobq_fd is readable) with the job's result, and
 *   frees what the job held.
 *
 * Whoever submits leaves what the jobs use (the SQLite connection, the
 * job's argument) alone until jobq_stop, which waits for every job, runs
 * the last fins and ends the thread.  A job that cannot be queued (no
 * memory for its node) runs inline once the jobs before it have run, so
 * the order and the worker's sole use of what jobs share hold.
 *
 * Memory: a job says how many bytes it holds; a submit that would take
 * the queue past max_bytes waits for the worker to catch up.  The worker
 * blocks every signal (they are the caller's).
 */
#ifndef HEAPPROF_UTIL_JOBQ_H
#define HEAPPROF_UTIL_JOBQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* Queue flags (jobq_init). */
#define JOBQ_STOP_ON_ERROR 1u /* the first failure drops the jobs after */
#define JOBQ_NOTIFY        2u /* fins run in jobq_poll, on an eventfd */

/* Job flags: jobs marked JOBQ_MARK and not yet started are counted
 * (jobq_marked; the collector marks its periodic dumps). */
#define JOBQ_MARK 1u

struct jobq_job {
	int (*run)(void *arg);          /* 0 or a negative errno */
	void (*fin)(void *arg, int rc); /* after run, or NULL */
	void (*drop)(void *arg);        /* instead of run once stopped */
	void *arg;
	size_t bytes;   /* what the job holds until it has run */
	unsigned flags; /* JOBQ_MARK */
};

struct jobq_node;

struct jobq {
	unsigned qflags;
	size_t max_bytes; /* 0: no bound */
	bool threaded;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* the worker: a job, or closing */
	pthread_cond_t room; /* submitters: bytes went down, or idle */
	int efd;             /* JOBQ_NOTIFY: readable when fins wait */
	struct jobq_node *head, *tail;   /* to run, in order */
	struct jobq_node *dhead, *dtail; /* run, fin not yet called */
	bool busy;                       /* the worker is running a job */
	size_t bytes;                    /* held by jobs not yet run */
	unsigned marked;                 /* JOBQ_MARK jobs not yet taken */
	unsigned failed;                 /* jobs whose run failed */
	int err;                         /* the first failure's result */
	bool closing;
};

/* An empty queue that runs jobs inline until jobq_start. */
void jobq_init(struct jobq *q, unsigned qflags, size_t max_bytes);
/* The worker thread; jobs go on inline if it cannot be made. */
void jobq_start(struct jobq *q);
/*
 * Runs or queues a job (struct jobq_job's fields; fin, drop NULL when
 * none).  0 when queued; run's result when it ran inline; with
 * JOBQ_STOP_ON_ERROR, the queue's error once it has one (the job
 * dropped).
 */
int jobq_submit(struct jobq *q, int (*run)(void *arg),
                void (*fin)(void *arg, int rc), void (*drop)(void *arg),
                void *arg, size_t bytes, unsigned flags);
/* JOBQ_NOTIFY: the eventfd to poll for POLLIN (-1 without a thread). */
int jobq_fd(const struct jobq *q);
/* Runs the fins of the jobs done so far, in order. */
void jobq_poll(struct jobq *q);
/* Whether JOBQ_MARK jobs are queued and not yet started. */
bool jobq_marked(struct jobq *q);
/* Bytes the jobs not yet run hold. */
size_t jobq_bytes(struct jobq *q);
/*
 * Waits for every job, runs their fins, ends the thread; jobs run inline
 * from then on (the error and counts start again).  Returns the first
 * failure's result (0: none); *failed (if not NULL) gets how many jobs
 * failed.
 */
int jobq_stop(struct jobq *q, unsigned *failed);

#endif
