/*
 * hs_nested: a SIGALRM handler that allocates, every 100 us, while the
 * thread does nothing but allocate (test_hook_signals.sh; issue 18 round
 * two, case 6).  Most alarms land inside malloc or free, so inside a
 * profiler's hook: its allocation must be recorded when that is safe,
 * and the profiler must say exactly how many it could not record.
 *
 * hs_main_alloc mallocs and frees blocks of 1100..1596 bytes (beyond
 * glibc's per-thread cache: every call takes the arena's lock) in a ring
 * of 64.  The handler (hs_on_alarm) calls hs_handler_alloc: malloc(200),
 * touched, freed.  Bare this is safe although the alarm interrupts
 * malloc: three 200-byte blocks freed before the timer starts keep that
 * size's per-thread cache bin filled, so the handler's malloc and free
 * take no lock and touch nothing the main loop's calls use.  The run ends
 * after HANDLER handler allocations (within 30 s, else exit 2).
 *
 * Prints "made hs_handler_alloc N BYTES" (what the handler allocated:
 * the profile's alloc views of hs_handler_alloc plus what it says it
 * skipped must add up to it) and "count hs_main_alloc ao as o s" (timing
 * dependent).  Exits 43.
 *
 * hs_nested READY GO THREAD_AFTER: creates READY and waits for GO (at
 * most 60 s, else exit 3) before the timer starts (test_livelog.sh stops
 * record there), and starts a thread (which returns at once) after
 * THREAD_AFTER iterations of the main loop: a profiler that changes how it
 * records when a process gets threads does it then, alarms landing in the
 * middle of it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/time.h>
#include <time.h>

#include "safe_common.h"

#define HANDLER 6000

static struct sc_count c_main = {"hs_main_alloc"},
                       c_handler = {"hs_handler_alloc"};
static volatile sig_atomic_t handler_allocs;

NOINLINE void hs_handler_alloc(void)
{
	void *p = malloc(200);
	sc_touch(p, 200);
	sc_alloc(&c_handler, p, 200);
	free(p);
	sc_free(&c_handler, 200);
}

NOINLINE void hs_on_alarm(int sig)
{
	(void)sig;
	if (handler_allocs >= HANDLER)
		return;
	hs_handler_alloc();
	handler_allocs++;
}

static void *ring[64];
static size_t ring_n[64];

NOINLINE void hs_main_alloc(unsigned long i)
{
	unsigned k = (unsigned)(i % 64);
	if (ring[k]) {
		free(ring[k]);
		sc_free(&c_main, ring_n[k]);
	}
	size_t n = 1100 + 8 * (i % 63);
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_main, p, n);
	ring[k] = p;
	ring_n[k] = n;
}

static void *hs_thread(void *arg)
{
	return arg;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	/* Three blocks in the 200-byte cache bin (see above). */
	void *warm[3];
	for (int i = 0; i < 3; i++)
		warm[i] = malloc(200);
	for (int i = 0; i < 3; i++)
		free(warm[i]);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = hs_on_alarm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	unsigned long thread_after = 0;
	pthread_t th;
	if (argc == 4) {
		thread_after = strtoul(argv[3], NULL, 10);
		FILE *f = fopen(argv[1], "w");
		if (!f)
			return 2;
		fclose(f);
		double wait_end = now() + 60.0;
		while (access(argv[2], F_OK) != 0) {
			if (now() > wait_end)
				return 3;
			struct timespec ts = {0, 2000000};
			nanosleep(&ts, NULL);
		}
	}
	double deadline = now() + 30.0;
	struct itimerval it = {{0, 100}, {0, 100}};
	setitimer(ITIMER_REAL, &it, NULL);
	for (unsigned long i = 0; handler_allocs < HANDLER; i++) {
		hs_main_alloc(i);
		if (thread_after && i == thread_after &&
		    pthread_create(&th, NULL, hs_thread, NULL) == 0)
			pthread_join(th, NULL);
		if (i % 1024 == 0 && now() > deadline)
			break;
	}
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGALRM);
	sigprocmask(SIG_BLOCK, &block, NULL);
	if (handler_allocs < HANDLER) {
		printf("hs_nested: fewer than %d handler allocations in 30 s\n",
		       HANDLER);
		return 2;
	}
	printf("hs_nested: %d handler allocations\n", HANDLER);
	printf("made %s %ld %ld\n", c_handler.name, c_handler.ao, c_handler.as);
	sc_print(&c_main);
	return 43;
}
