/*
 * hostile_exitlock: a thread that allocates in a loop is stopped in a
 * signal handler and parked there for good (the stop-the-world of a
 * garbage collector or a sanitizer parks its mutators so), maybe inside
 * malloc with its arena's lock held; then main exits.  Bare, exit takes no
 * arena lock and the program ends at once.  Nothing a profiler does at
 * exit may wait on a lock the program may hold (issue 18, case 11).
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_int parked;
static atomic_long rounds;

static void park(int sig)
{
	(void)sig;
	atomic_store(&parked, 1);
	for (;;)
		pause();
}

static void *churn(void *arg)
{
	(void)arg;
	void *keep[64] = {0};
	for (unsigned long i = 0;; i++) {
		unsigned k = (unsigned)(i % 64);
		free(keep[k]);
		keep[k] = malloc(16 + (i * 37) % 2000);
		atomic_fetch_add(&rounds, 1);
	}
	return NULL;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = park;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t t;
	if (pthread_create(&t, NULL, churn, NULL) != 0)
		return 2;
	while (atomic_load(&rounds) < 200000)
		sched_yield();
	pthread_kill(t, SIGUSR1);
	while (!atomic_load(&parked))
		sched_yield();
	printf("the allocating thread is parked; exiting\n");
	fflush(stdout);
	exit(0);
}
