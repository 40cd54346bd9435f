/*
 * peak_holder: a program whose heap peaks early and is small at exit
 * (test_peak.sh, issue 33's must-show).
 *   1. load_cache -> peak_holder(15) and load_index -> peak_holder(5):
 *      20 blocks of 1 MiB, all live at once (the peak: 20 MiB plus the
 *      few bytes stdio holds), held for HOLD_MS, then freed.
 *   2. churn: CHURN_MS of 64-byte blocks allocated and freed at once.
 *   3. keep_at_exit: 4 blocks of 64 KiB (256 KiB), still live at exit.
 * With the argument "thread", first a thread that allocates and frees a
 * block, joined (the process is no longer single-threaded: at -i 1 it
 * takes its live table back from record's log).
 * With "slow", peak_holder waits 30 ms after each block (the heap grows
 * over 0.6 s: several dumps see it rise).
 * Prints "peak_holder: done" and exits 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noipa))
#define MIB      (1024 * 1024)
#define HOLD_MS  400
#define CHURN_MS 600

static void *held[20];
static int nheld;
static int slow;
static void *kept[4];
volatile unsigned long sink;

static unsigned long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

NOINLINE void peak_holder(int n)
{
	for (int i = 0; i < n; i++) {
		void *p = malloc(MIB);
		if (!p)
			exit(3);
		memset(p, i, MIB);
		held[nheld++] = p;
		if (slow) {
			struct timespec ts = {0, 30000000};
			nanosleep(&ts, NULL);
		}
	}
}

NOINLINE void load_cache(void)
{
	peak_holder(15);
}

NOINLINE void load_index(void)
{
	peak_holder(5);
}

NOINLINE void churn(void)
{
	unsigned long long end = now_ms() + CHURN_MS;
	while (now_ms() < end) {
		for (int i = 0; i < 100; i++) {
			void *p = malloc(64);
			if (!p)
				exit(3);
			((volatile char *)p)[0] = (char)i;
			sink += ((unsigned char *)p)[0];
			free(p);
		}
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
}

NOINLINE void keep_at_exit(void)
{
	for (int i = 0; i < 4; i++) {
		kept[i] = malloc(64 * 1024);
		if (!kept[i])
			exit(3);
		memset(kept[i], 1, 64 * 1024);
	}
}

static void *thread_main(void *arg)
{
	void *p = malloc(32);
	sink += (unsigned long)(p != NULL);
	free(p);
	return arg;
}

int main(int argc, char **argv)
{
	slow = argc > 1 && !strcmp(argv[1], "slow");
	if (argc > 1 && !strcmp(argv[1], "thread")) {
		pthread_t th;
		if (pthread_create(&th, NULL, thread_main, NULL) != 0 ||
		    pthread_join(th, NULL) != 0)
			return 4;
	}
	load_cache();
	load_index();
	struct timespec hold = {HOLD_MS / 1000, (HOLD_MS % 1000) * 1000000L};
	nanosleep(&hold, NULL);
	for (int i = 0; i < nheld; i++)
		free(held[i]);
	churn();
	keep_at_exit();
	printf("peak_holder: done\n");
	return 0;
}
