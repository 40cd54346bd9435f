/*
 * hostile_dumpspawn STACKS CHILDREN TIMES [fork|exec]: a program with a
 * big profile that keeps starting processes (issue 18, case 12: a new
 * process must not wait for its collector to finish writing a dump).
 *
 * The parent makes STACKS distinct allocating call stacks (the recursion
 * of bench/manystacks.c: walk, then step0/step1 as the bits of the index
 * say, the last step allocates), and keeps one block of each live, so
 * every dump holds STACKS stacks.  Then, CHILDREN times: it walks all
 * stacks again (a malloc and a free on each, so every stack's counters
 * move and every dump has STACKS rows to write), then starts a child and
 * waits for it:
 *   fork  the child (no exec) allocates in child_work and _exits;
 *   exec  the child execs this program as "child", which allocates in
 *         child_work and exits.
 * Each child measures, at the start of child_work (its first allocation),
 * the CLOCK_MONOTONIC microseconds since its parent's fork, and passes
 * them back on a pipe; the parent writes one line per child into TIMES
 * ("us N"), then "max N" and "median N".
 *
 * Exact with -i 1:
 *   leaf           STACKS x (CHILDREN + 1) allocations (sizes 16..271
 *                  by stack), STACKS live
 *   child_work     per child 10 x malloc(333), 4 of them freed
 * stdout: "stacks S children C" and one "child I ok" per child; exits 0,
 * 1 if a child failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE     __attribute__((noinline, noclone, no_icf))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static unsigned depth;
static void **live;
static volatile uint64_t sink;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static inline __attribute__((always_inline)) void leaf(uint64_t i)
{
	size_t n = 16 + (size_t)(i * 2654435761u % 256);
	unsigned char *p = malloc(n);
	if (!p)
		exit(3);
	p[0] = (unsigned char)i;
	sink += p[0];
	if (!live[i])
		live[i] = p;
	else
		free(p);
}

static NOINLINE void step0(uint64_t i, unsigned l);
static NOINLINE void step1(uint64_t i, unsigned l);

static NOINLINE void step0(uint64_t i, unsigned l)
{
	if (l == depth)
		leaf(i);
	else if ((i >> l) & 1)
		step1(i, l + 1);
	else
		step0(i, l + 1);
	KEEP_FRAME();
}

static NOINLINE void step1(uint64_t i, unsigned l)
{
	if (l == depth)
		leaf(i);
	else if ((i >> l) & 1)
		step1(i, l + 1);
	else
		step0(i, l + 1);
	KEEP_FRAME();
}

static NOINLINE void walk(uint64_t i)
{
	if (i & 1)
		step1(i, 1);
	else
		step0(i, 1);
	KEEP_FRAME();
}

/* The child's allocations; its first one is the moment measured. */
static NOINLINE void child_work(uint64_t t0, int fd)
{
	uint64_t us = now_us() - t0;
	void *p[10];
	for (int i = 0; i < 10; i++) {
		p[i] = malloc(333);
		memset(p[i], 1, 333);
		sink += ((unsigned char *)p[i])[332];
	}
	for (int i = 0; i < 4; i++)
		free(p[i]);
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", us);
	if (write(fd, buf, (size_t)n) != n)
		_exit(4);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "child")) {
		child_work(strtoull(argv[2], NULL, 10), atoi(argv[3]));
		return 0;
	}
	if (argc != 5 || (strcmp(argv[4], "fork") && strcmp(argv[4], "exec"))) {
		fprintf(stderr, "usage: hostile_dumpspawn STACKS CHILDREN "
		                "TIMES fork|exec\n");
		return 2;
	}
	unsigned long n = strtoul(argv[1], NULL, 10);
	int children = atoi(argv[2]);
	int use_exec = !strcmp(argv[4], "exec");
	if (n < 2 || n > (1ul << 24) || children < 1 || children > 10000) {
		fprintf(stderr, "hostile_dumpspawn: bad STACKS or CHILDREN\n");
		return 2;
	}
	while ((1ul << depth) < n)
		depth++;
	live = calloc(n, sizeof(*live));
	uint64_t *times = calloc((size_t)children, sizeof(*times));
	if (!live || !times)
		return 3;
	for (uint64_t i = 0; i < n; i++)
		walk(i);
	printf("stacks %lu children %d\n", n, children);
	int bad = 0;
	for (int c = 0; c < children; c++) {
		for (uint64_t i = 0; i < n; i++)
			walk(i);
		int pfd[2];
		if (pipe(pfd) != 0)
			return 3;
		fflush(stdout);
		uint64_t t0 = now_us();
		pid_t pid = fork();
		if (pid < 0)
			return 3;
		if (pid == 0) {
			close(pfd[0]);
			if (!use_exec) {
				child_work(t0, pfd[1]);
				_exit(0);
			}
			char a0[32], a1[16];
			snprintf(a0, sizeof(a0), "%" PRIu64, t0);
			snprintf(a1, sizeof(a1), "%d", pfd[1]);
			execl("/proc/self/exe", argv[0], "child", a0, a1,
			      (char *)NULL);
			_exit(127);
		}
		close(pfd[1]);
		char buf[32] = "";
		ssize_t got = 0, r;
		while ((r = read(pfd[0], buf + got, sizeof(buf) - 1 - got)) >
		               0 ||
		       (r < 0 && errno == EINTR))
			if (r > 0)
				got += r;
		close(pfd[0]);
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			bad = 1;
			printf("child %d failed\n", c);
			continue;
		}
		times[c] = strtoull(buf, NULL, 10);
		printf("child %d ok\n", c);
	}
	FILE *f = fopen(argv[3], "w");
	if (!f)
		return 3;
	for (int c = 0; c < children; c++)
		fprintf(f, "us %" PRIu64 "\n", times[c]);
	qsort(times, (size_t)children, sizeof(*times), cmp_u64);
	fprintf(f, "max %" PRIu64 "\nmedian %" PRIu64 "\n", times[children - 1],
	        times[children / 2]);
	fclose(f);
	return bad;
}
