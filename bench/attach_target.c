/*
 * attach_target: a process to attach a profiler to (bench/attach.sh).
 *
 *     attach_target idle     one thread, blocked in read() on a pipe
 *     attach_target busy     4 threads (the main one among them) in a
 *                            malloc/free storm: no thread ever sleeps
 *
 * Started bare (no LD_PRELOAD).  It prints "READY" on stdout once it is
 * in its steady state (busy: every thread has done some work), then runs
 * until SIGTERM, then prints
 *
 *     RESULT MODE ops=N errors=E eintr=K
 *
 * and exits 0.  errors counts blocks whose contents changed between malloc
 * and free (each block carries its own tag at both ends) and idle reads
 * that returned anything but the byte the SIGTERM handler writes; eintr
 * counts reads that failed with EINTR (SIGTERM is installed with
 * SA_RESTART and no other handler exists, so an injection that leaves the
 * read interrupted shows here).  A profiler must leave errors and eintr
 * at 0.
 *
 * busy also measures, in every thread, the longest time between two
 * consecutive checks of the clock (one every 64 malloc/free operations,
 * a few microseconds apart when the thread runs): a thread that was
 * stopped sees a gap as long as the stop, plus the scheduler's usual
 * delays.  SIGUSR1 makes the main thread print
 *
 *     GAP max_ms=M thread_max_ms=T0,T1,T2,T3
 *
 * (the largest gap of any thread and each thread's, since the last
 * report) and start a new window.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4
#define SLOTS   512

static int pipefd[2];
static atomic_int stop_flag;
static atomic_int report_flag;

struct worker {
	pthread_t tid;
	int index;
	uint64_t ops;
	uint64_t errors;
	_Atomic uint64_t gap_ns; /* the longest gap in this window */
	atomic_int warm;
	char pad[64];
};

static struct worker workers[THREADS];

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_term(int sig)
{
	(void)sig;
	int e = errno;
	atomic_store(&stop_flag, 1);
	char c = 'T';
	if (write(pipefd[1], &c, 1) < 0) {
		/* nothing to do: the flag is set */
	}
	errno = e;
}

static void on_usr1(int sig)
{
	(void)sig;
	atomic_store(&report_flag, 1);
}

static void report_gaps(void)
{
	char line[256];
	uint64_t max = 0;
	int n = snprintf(line, sizeof(line), "GAP max_ms=");
	uint64_t g[THREADS];
	for (int i = 0; i < THREADS; i++) {
		g[i] = atomic_exchange(&workers[i].gap_ns, 0);
		if (g[i] > max)
			max = g[i];
	}
	n += snprintf(line + n, sizeof(line) - (size_t)n,
	              "%.2f thread_max_ms=", (double)max / 1e6);
	for (int i = 0; i < THREADS; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%s%.2f",
		              i ? "," : "", (double)g[i] / 1e6);
	n += snprintf(line + n, sizeof(line) - (size_t)n, "\n");
	if (write(1, line, (size_t)n) < 0) {
		/* stdout gone: nothing to report to */
	}
}

static void *storm(void *arg)
{
	struct worker *w = arg;
	void *slot[SLOTS] = {0};
	size_t size[SLOTS] = {0};
	uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(w->index + 1);
	uint64_t last = now_ns();
	int ready = 0;
	while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
		for (int k = 0; k < 64; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			unsigned i = (unsigned)(x % SLOTS);
			if (slot[i]) {
				unsigned char *p = slot[i];
				uint64_t tag;
				memcpy(&tag, p, sizeof(tag));
				if (tag != (uint64_t)(uintptr_t)p ||
				    p[size[i] - 1] !=
				            (unsigned char)(uintptr_t)p)
					w->errors++;
				free(p);
				slot[i] = NULL;
			} else {
				size_t n = 16 + (size_t)((x >> 20) % 4080);
				unsigned char *p = malloc(n);
				if (!p) {
					w->errors++;
					continue;
				}
				uint64_t tag = (uint64_t)(uintptr_t)p;
				memcpy(p, &tag, sizeof(tag));
				p[n - 1] = (unsigned char)(uintptr_t)p;
				slot[i] = p;
				size[i] = n;
			}
			w->ops++;
		}
		uint64_t t = now_ns();
		uint64_t gap = t - last;
		last = t;
		if (gap >
		    atomic_load_explicit(&w->gap_ns, memory_order_relaxed))
			atomic_store_explicit(&w->gap_ns, gap,
			                      memory_order_relaxed);
		if (w->ops > 200000 &&
		    !atomic_load_explicit(&w->warm, memory_order_relaxed))
			atomic_store(&w->warm, 1);
		if (w->index == 0 && !ready) {
			int all = 1;
			for (int i = 0; i < THREADS; i++)
				all &= atomic_load(&workers[i].warm);
			if (all) {
				ready = 1;
				if (write(1, "READY\n", 6) < 0)
					return NULL;
			}
		}
		if (w->index == 0 &&
		    atomic_load_explicit(&report_flag, memory_order_relaxed)) {
			atomic_store(&report_flag, 0);
			report_gaps();
		}
	}
	for (int i = 0; i < SLOTS; i++)
		free(slot[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2 ||
	    (strcmp(argv[1], "idle") != 0 && strcmp(argv[1], "busy") != 0)) {
		fprintf(stderr, "usage: attach_target idle|busy\n");
		return 2;
	}
	int busy = strcmp(argv[1], "busy") == 0;
	setvbuf(stdout, NULL, _IONBF, 0);
	if (pipe(pipefd) != 0) {
		perror("pipe");
		return 2;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);

	uint64_t ops = 0, errors = 0, eintr = 0;
	if (!busy) {
		printf("READY\n");
		for (;;) {
			char c;
			ssize_t n = read(pipefd[0], &c, 1);
			if (n < 0 && errno == EINTR) {
				eintr++;
				continue;
			}
			if (n != 1 || c != 'T')
				errors++;
			break;
		}
	} else {
		for (int i = 0; i < THREADS; i++)
			workers[i].index = i;
		for (int i = 1; i < THREADS; i++)
			if (pthread_create(&workers[i].tid, NULL, storm,
			                   &workers[i]) != 0) {
				perror("pthread_create");
				return 2;
			}
		/* The main thread storms too (and prints READY). */
		storm(&workers[0]);
		for (int i = 1; i < THREADS; i++)
			pthread_join(workers[i].tid, NULL);
		for (int i = 0; i < THREADS; i++) {
			ops += workers[i].ops;
			errors += workers[i].errors;
		}
	}
	printf("RESULT %s ops=%llu errors=%llu eintr=%llu\n", argv[1],
	       (unsigned long long)ops, (unsigned long long)errors,
	       (unsigned long long)eintr);
	return errors || eintr ? 1 : 0;
}
