/*
 * forkthreads: fork while other threads allocate.  4 threads allocate and
 * free in a loop (spin_alloc) while the main thread forks 40 times; each
 * child allocates and frees (fork_child_alloc) and exits 0 through exit().
 * A profiler lock held by another thread at fork time must not deadlock
 * the child: the parent waits for each child at most 20 s, then kills it
 * and fails.  Exits 14 on success, 1 if a child hung or failed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile int stop;
static volatile unsigned long sink;

NOINLINE void spin_alloc(int id)
{
	void *ring[32] = {0};
	unsigned long i = 0;
	while (!stop) {
		int slot = (int)(i % 32);
		free(ring[slot]);
		ring[slot] = malloc(24 + 8 * (size_t)((i + (unsigned)id) % 50));
		if (ring[slot])
			((char *)ring[slot])[0] = (char)i;
		i++;
	}
	for (int k = 0; k < 32; k++)
		free(ring[k]);
	sink += i;
}

static void *spinner(void *arg)
{
	spin_alloc((int)(long)arg);
	return NULL;
}

NOINLINE void fork_child_alloc(void)
{
	for (int i = 0; i < 100; i++) {
		char *p = malloc(100 + (size_t)i);
		if (!p)
			exit(2);
		memset(p, 1, 100 + (size_t)i);
		sink += (unsigned char)p[99];
		free(p);
	}
}

static int wait_bounded(pid_t pid, double secs)
{
	struct timespec t0, t, nap = {0, 1000000};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) +
		            (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 >
		    secs) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -2;
		}
		nanosleep(&nap, NULL);
	}
}

int main(void)
{
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, spinner, (void *)i) != 0) {
			perror("pthread_create");
			return 1;
		}
	int bad = 0;
	for (int k = 0; k < 40 && !bad; k++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			bad = 1;
			break;
		}
		if (pid == 0) {
			fork_child_alloc();
			exit(0);
		}
		int st = wait_bounded(pid, 20.0);
		if (st == -2) {
			printf("forkthreads: child %d hung (killed after 20 "
			       "s)\n",
			       k);
			bad = 1;
		} else if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("forkthreads: child %d failed, status 0x%x\n", k,
			       st);
			bad = 1;
		}
	}
	stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	if (bad)
		return 1;
	printf("forkthreads: 40 children ok\n");
	return 14;
}
