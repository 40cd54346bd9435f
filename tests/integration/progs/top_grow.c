/*
 * top_grow MODE READY [GO]: a process for `heapprof top` (test_top.sh)
 * and `heapprof serve` (test_serve.sh).  Writes "pid N" to READY (through
 * a temporary file and rename, so the test never reads half of it) once
 * its first allocations are made, then:
 *
 *   grow   grow_here() keeps a 32 KiB block every 10 ms (3.2 MiB/s, kept:
 *          its live bytes only rise) up to 2000 blocks (62.5 MiB), and
 *          small_here() keeps 100 bytes every 100 ms; then it idles.
 *   fixed  keep_here() keeps 10 blocks of 100000 bytes and temp_here()
 *          allocates and frees 5 blocks of 1000 bytes, before READY: at
 *          -i 1 space 1000000 B, objects 10, alloc_space 1005000 B,
 *          alloc_objects 15 (exactly, in the totals, with nothing else
 *          allocating after main starts); then it waits.
 *   after  the same as fixed, but after READY, once the file GO exists
 *          (the test creates it when a session attached from outside
 *          is ready to count them); then it waits.
 *
 * Either way it ends on SIGTERM or SIGINT (exit 0), or after 120 s.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile sig_atomic_t stop;
static volatile unsigned long sink;
static void *grown[2000], *small[2000], *kept[10];

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

NOINLINE void grow_here(int i)
{
	grown[i] = malloc(32768);
	memset(grown[i], 1, 32768);
	sink += ((unsigned char *)grown[i])[32767];
}

NOINLINE void small_here(int i)
{
	small[i] = malloc(100);
	memset(small[i], 2, 100);
	sink += ((unsigned char *)small[i])[99];
}

NOINLINE void keep_here(void)
{
	for (int i = 0; i < 10; i++) {
		kept[i] = malloc(100000);
		memset(kept[i], 3, 100000);
		sink += ((unsigned char *)kept[i])[99999];
	}
}

NOINLINE void temp_here(void)
{
	for (int i = 0; i < 5; i++) {
		char *p = malloc(1000);
		memset(p, 4, 1000);
		sink += (unsigned char)p[999];
		free(p);
	}
}

/* Without stdio, whose FILE and buffer would be allocations of their
 * own in the totals. */
static int ready(const char *path)
{
	char tmp[4096], line[32];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int n = snprintf(line, sizeof(line), "pid %d\n", (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	if (write(fd, line, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	if (close(fd) != 0)
		return -1;
	return rename(tmp, path);
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	int after = argc == 4 && !strcmp(argv[1], "after");
	if (!after && (argc != 3 ||
	               (strcmp(argv[1], "grow") && strcmp(argv[1], "fixed")))) {
		fprintf(stderr, "usage: top_grow grow|fixed READY\n"
		                "       top_grow after READY GO\n");
		return 2;
	}
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	int grow = !strcmp(argv[1], "grow");
	if (!grow && !after) {
		keep_here();
		temp_here();
	}
	if (ready(argv[2]) < 0) {
		perror("top_grow: READY");
		return 1;
	}
	for (int t = 0; t < 12000 && !stop; t++) {
		if (grow && t < 2000)
			grow_here(t);
		if (grow && t % 10 == 0)
			small_here(t / 10);
		if (after && access(argv[3], F_OK) == 0) {
			keep_here();
			temp_here();
			after = 0;
		}
		nap_ms(10);
	}
	return 0;
}
