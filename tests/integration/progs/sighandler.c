/*
 * sighandler: allocations and frees inside signal handlers while the main
 * loop allocates.
 *
 *   - SIGALRM from setitimer (every 200 us), handled on an alternate signal
 *     stack by on_alarm -> handler_alloc: malloc(128) into a ring of 16
 *     slots, freeing the slot's previous block.
 *   - SIGUSR2 raised synchronously every 1000 iterations, handled by on_usr2
 *     -> usr2_alloc: malloc(256) then free.
 *   - main_loop -> main_alloc: malloc(16 + 16 * (i % 64)) into a ring of 64
 *     slots, freeing the slot's previous block.
 *
 * glibc's malloc is not async-signal-safe, so a handler allocates only when
 * the code it interrupted is not inside a malloc/free call (the in_alloc
 * flag); the timer still interrupts the main loop's allocator calls (and the
 * profiler's hooks in them) all the time.  Every allocation therefore
 * happens outside any other allocator call and must be recorded exactly
 * with -i 1.  The counts depend on timing and go to stderr:
 *   sighandler: main_alloc N alarm_alloc N usr2_alloc N
 * so that stdout is identical with and without the profiler.
 * Exits 10 on success, 2 if too few alarms arrived within 30 s.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile sig_atomic_t in_alloc;
static volatile sig_atomic_t alarm_allocs;
static volatile sig_atomic_t alarm_skipped;
static volatile sig_atomic_t usr2_allocs;
static volatile unsigned long sink;

static void *alarm_ring[16];

NOINLINE void handler_alloc(void)
{
	int slot = alarm_allocs % 16;
	free(alarm_ring[slot]);
	alarm_ring[slot] = malloc(128);
	if (alarm_ring[slot]) {
		memset(alarm_ring[slot], 9, 128);
		sink += ((unsigned char *)alarm_ring[slot])[127];
	}
	alarm_allocs++;
}

NOINLINE void on_alarm(int sig)
{
	(void)sig;
	if (in_alloc) {
		alarm_skipped++;
		return;
	}
	in_alloc = 1;
	handler_alloc();
	in_alloc = 0;
}

NOINLINE void usr2_alloc(void)
{
	char *p = malloc(256);
	if (p) {
		memset(p, 1, 256);
		sink += (unsigned char)p[255];
	}
	free(p);
	usr2_allocs++;
}

NOINLINE void on_usr2(int sig)
{
	(void)sig;
	sig_atomic_t old = in_alloc;
	in_alloc = 1;
	usr2_alloc();
	in_alloc = old;
}

static void *main_ring[64];

NOINLINE void main_alloc(unsigned long i)
{
	int slot = (int)(i % 64);
	size_t sz = 16 + 16 * (size_t)slot;
	in_alloc = 1;
	free(main_ring[slot]);
	void *p = malloc(sz);
	in_alloc = 0;
	if (p) {
		memset(p, 3, sz);
		sink += ((unsigned char *)p)[sz - 1];
	}
	main_ring[slot] = p;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

NOINLINE unsigned long main_loop(void)
{
	unsigned long i = 0;
	double deadline = now() + 30.0;
	for (;;) {
		main_alloc(i);
		i++;
		if (i % 1000 == 0) {
			raise(SIGUSR2);
			if (i >= 100000 && alarm_allocs >= 200)
				break;
			if (now() > deadline)
				break;
		}
	}
	return i;
}

int main(void)
{
	static char altstack[64 * 1024];
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};
	if (sigaltstack(&ss, NULL) != 0) {
		perror("sigaltstack");
		return 1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_usr2;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);

	struct itimerval it = {{0, 200}, {0, 200}};
	setitimer(ITIMER_REAL, &it, NULL);
	unsigned long iters = main_loop();
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGALRM);
	sigaddset(&block, SIGUSR2);
	sigprocmask(SIG_BLOCK, &block, NULL);

	fprintf(stderr,
	        "sighandler: main_alloc %lu alarm_alloc %d usr2_alloc %d "
	        "alarm_skipped %d\n",
	        iters, (int)alarm_allocs, (int)usr2_allocs, (int)alarm_skipped);
	if (alarm_allocs < 200) {
		printf("sighandler: only %d alarms in 30 s\n",
		       (int)alarm_allocs);
		return 2;
	}
	printf("sighandler: done\n");
	return 10;
}
