/*
 * attach_wait GO_FILE [EXIT_FILE]: a program to profile while it runs
 * (heapprof record -p / -n, late attach by signal).
 *
 * Prints "attach_wait: pid N" on stdout (flushed), allocates before_wait,
 * then waits until GO_FILE exists (checked every 10 ms, at most 60 s: exit
 * 2 on timeout).  Then, exact with -i 1:
 *   after_wait      20 x malloc(500), all live; 5 x malloc(3000), freed
 *   peak_then_free  10 x malloc(100000), all freed again: a peak of
 *                   1,000,000 bytes that only --dump-at-max shows
 *   before_wait     10 x malloc(1000) before the wait; 4 of them freed now
 * prints "attach_wait: done", and if EXIT_FILE is given waits (the same
 * way) until it exists before exiting 0, so a session can dump the
 * running program.
 *
 * The attach signal interrupts the waits: every call that can fail with
 * EINTR is retried, so the output is the same with and without the
 * profiler.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;
static void *before[10], *after[20];

NOINLINE void before_wait(void)
{
	for (int i = 0; i < 10; i++) {
		before[i] = malloc(1000);
		memset(before[i], 1, 1000);
		sink += ((unsigned char *)before[i])[999];
	}
}

NOINLINE void after_wait(void)
{
	for (int i = 0; i < 20; i++) {
		after[i] = malloc(500);
		memset(after[i], 2, 500);
		sink += ((unsigned char *)after[i])[499];
	}
	for (int i = 0; i < 5; i++) {
		void *p = malloc(3000);
		memset(p, 3, 3000);
		sink += ((unsigned char *)p)[2999];
		free(p);
	}
}

NOINLINE void peak_then_free(void)
{
	void *p[10];
	for (int i = 0; i < 10; i++) {
		p[i] = malloc(100000);
		memset(p[i], 4, 100000);
		sink += ((unsigned char *)p[i])[99999];
	}
	for (int i = 0; i < 10; i++)
		free(p[i]);
}

/* Sleeps 10 ms, whatever signals arrive meanwhile. */
static void nap(void)
{
	struct timespec ts = {0, 10 * 1000 * 1000}, rem;
	while (nanosleep(&ts, &rem) != 0 && errno == EINTR)
		ts = rem;
}

static int wait_for(const char *path)
{
	for (int i = 0; i < 6000; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		nap();
	}
	fprintf(stderr, "attach_wait: %s did not appear in 60 s\n", path);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: attach_wait GO_FILE [EXIT_FILE]\n");
		return 1;
	}
	printf("attach_wait: pid %d\n", (int)getpid());
	fflush(stdout);
	before_wait();
	if (wait_for(argv[1]) != 0)
		return 2;
	after_wait();
	peak_then_free();
	for (int i = 0; i < 4; i++)
		free(before[i]);
	printf("attach_wait: done\n");
	fflush(stdout);
	if (argc == 3 && wait_for(argv[2]) != 0)
		return 2;
	return 0;
}
