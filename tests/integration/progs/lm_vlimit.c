/*
 * lm_vlimit N [wait]: asks for N blocks of 1 MiB (vl_alloc(), one malloc
 * each, the first byte of each written) and says how many it got:
 * "lm_vlimit: got K of N blocks of 1 MiB", status 0.  For test_livemem.sh
 * (issue 30): run under an address-space limit (ulimit -v) that leaves it
 * about 700 MiB above its size at start, bare it gets all N = 600; what a
 * profiler maps into it counts against the same limit.
 *
 * It prints "lm_vlimit: ready" first; with "wait" it then waits for one
 * byte on stdin (a FIFO: the test attaches `record -p` meanwhile) before
 * it asks.  The blocks are kept until it exits.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE char *vl_alloc(void)
{
	char *p = malloc(1u << 20);
	if (p)
		p[0] = 1;
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 2 || atoi(argv[1]) <= 0 || atoi(argv[1]) > 100000) {
		fprintf(stderr, "usage: lm_vlimit N [wait]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	char **blocks = calloc((size_t)n, sizeof(*blocks));
	if (!blocks) {
		fprintf(stderr, "lm_vlimit: no memory for the block list\n");
		return 1;
	}
	printf("lm_vlimit: ready\n");
	fflush(stdout);
	if (argc > 2 && !strcmp(argv[2], "wait")) {
		char c;
		ssize_t r;
		do
			r = read(0, &c, 1);
		while (r < 0 && errno == EINTR);
	}
	int got = 0;
	for (int i = 0; i < n; i++) {
		blocks[i] = vl_alloc();
		if (blocks[i])
			got++;
	}
	printf("lm_vlimit: got %d of %d blocks of 1 MiB\n", got, n);
	fflush(stdout);
	return 0;
}
