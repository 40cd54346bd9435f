/*
 * The collector's writes to the profile, in order, on a thread of their
 * own, so that the session's loop goes on answering hellos, client
 * messages and signals while a big dump is written (issue 18, case 12: a
 * dump of a big profile takes hundreds of milliseconds of SQLite; a new
 * process must not wait for it).
 *
 * The loop takes what it must (a dump's time, the regions it reads, the
 * trace events it copies out so that the client gets its room back) and
 * submits the rest as a job: the profile writes (process rows, dumps,
 * trace events) run one after the other on the writer thread in the
 * order they were submitted, so the profile gets the writes it got when
 * the loop made them itself, in the same order; each job's `fin` then
 * runs on the loop's thread (writeq_poll, when the eventfd is readable),
 * with the job's result, and frees what the job held.
 *
 * Whoever submits leaves the profile alone while the thread runs:
 * writeq_stop waits for every job, runs the last fins, ends the thread
 * and returns to running jobs inline.  Without a thread (before
 * writeq_start, after writeq_stop, or when none could be made) a job runs
 * inside writeq_submit, run then fin, as the loop's own code did.
 *
 * Memory: a job says how many bytes it holds (trace events; a dump holds
 * none until the writer reads it); a submit that would take the queue
 * past WRITEQ_MAX_BYTES waits for the writer to catch up (the loop stalls
 * only when it makes data faster than SQLite takes it for a long time).
 * Periodic dumps that find the last ones not yet started are skipped by
 * the caller (writeq_periodic_queued), as a timer that fires during a
 * long dump is.
 */
#ifndef HEAPPROF_COLLECTOR_WRITEQ_H
#define HEAPPROF_COLLECTOR_WRITEQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* Bytes of jobs queued (trace events) past which a submit waits. */
#define WRITEQ_MAX_BYTES (512ull << 20)

/* Job flags. */
#define WQ_PERIODIC 1u /* a periodic dump (writeq_periodic_queued) */

struct wq_node;

struct writeq {
	bool threaded;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;             /* the writer: a job, or closing */
	pthread_cond_t room;           /* submitters: bytes went down */
	int efd;                       /* readable: fins to run (writeq_poll) */
	struct wq_node *head, *tail;   /* to run, in order */
	struct wq_node *dhead, *dtail; /* run, fin not yet called */
	size_t bytes;                  /* held by the jobs not yet run */
	unsigned periodic;             /* WQ_PERIODIC jobs not yet taken */
	unsigned failed;               /* jobs whose run failed, since start */
	bool closing;
};

/*
 * run: the writes (writer thread, or inline); 0 or a negative errno.
 * fin: on the loop's thread after run, with its result; frees arg.
 */
typedef int (*wq_run_fn)(void *arg);
typedef void (*wq_fin_fn)(void *arg, int rc);

/* Jobs run inline until writeq_start. */
void writeq_init(struct writeq *q);
/* The writer thread; jobs run inline if it cannot be made. */
void writeq_start(struct writeq *q);
/*
 * Runs or queues a job of `bytes` bytes; never fails (a job that cannot
 * be queued runs inline).  Returns 0, or run's result when it ran inline.
 */
int writeq_submit(struct writeq *q, wq_run_fn run, wq_fin_fn fin, void *arg,
                  size_t bytes, unsigned flags);
/* The eventfd to poll for POLLIN (-1 without a thread). */
int writeq_fd(const struct writeq *q);
/* Runs the fins of the jobs done so far, in order. */
void writeq_poll(struct writeq *q);
/* Whether periodic dumps are queued and not yet started. */
bool writeq_periodic_queued(struct writeq *q);
/* Bytes the jobs not yet run hold. */
size_t writeq_bytes(struct writeq *q);
/* Waits for every job, runs their fins, ends the thread; jobs run inline
 * from then on.  Returns how many jobs failed since writeq_start. */
unsigned writeq_stop(struct writeq *q);

#endif
