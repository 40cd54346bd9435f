/*
 * lm_hold CGROUP_DIR|-: a program driven by one-byte commands on stdin, for
 * test_livemem.sh (what the shared live table costs the profiled program,
 * issue 30).
 *
 * With a CGROUP_DIR it first puts itself in that memory cgroup (writes its
 * pid to CGROUP_DIR/cgroup.procs), so everything it touches from then on
 * is charged there; "-": no cgroup.  Then it prints "lm_hold: ready" and
 * reads commands, one byte each, printing one line after each (stdout,
 * flushed):
 *
 *   h   hold_here(): 1,000,000 x malloc(32), every block kept (the
 *       pointers in a static array, not on the heap) until the program
 *       exits; "lm_hold: holding 1000000 blocks of 32 B".  Under
 *       `record -i 1` from before the command, hold_here's four views are
 *       exactly 1000000 32000000 1000000 32000000 (every block is live at
 *       the session's end dump: they are never freed).  Only once.
 *   c   churn_here(): 1000 x (malloc(64), free): the hooks run, the heap
 *       stays as it was (tcache reuses one chunk); "lm_hold: churned N"
 *       (N: how many churns so far).
 *   x   (or end of input) "lm_hold: exit", status 0; the held blocks are
 *       not freed (the kernel takes them back).
 *
 * Status 3 if the cgroup cannot be joined, 1 if a malloc fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE  __attribute__((noinline, noclone))
#define NHOLD     1000000
#define HOLD_SIZE 32

static void *held[NHOLD];

NOINLINE int hold_here(void)
{
	for (int i = 0; i < NHOLD; i++) {
		held[i] = malloc(HOLD_SIZE);
		if (!held[i])
			return -1;
	}
	return 0;
}

NOINLINE int churn_here(void)
{
	for (int i = 0; i < 1000; i++) {
		void *p = malloc(64);
		if (!p)
			return -1;
		free(p);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: lm_hold CGROUP_DIR|-\n");
		return 2;
	}
	if (strcmp(argv[1], "-") != 0) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/cgroup.procs", argv[1]);
		FILE *f = fopen(path, "w");
		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 ||
		    fclose(f) != 0) {
			perror("lm_hold: cgroup.procs");
			return 3;
		}
	}
	printf("lm_hold: ready\n");
	fflush(stdout);
	int held_once = 0, churns = 0;
	for (;;) {
		char c;
		ssize_t r = read(0, &c, 1);
		if (r < 0 && errno == EINTR)
			continue; /* (an attach may interrupt the read) */
		if (r <= 0 || c == 'x')
			break;
		if (c == 'h' && !held_once) {
			if (hold_here() != 0) {
				printf("lm_hold: malloc failed\n");
				return 1;
			}
			held_once = 1;
			printf("lm_hold: holding %d blocks of %d B\n", NHOLD,
			       HOLD_SIZE);
		} else if (c == 'c') {
			if (churn_here() != 0) {
				printf("lm_hold: malloc failed\n");
				return 1;
			}
			printf("lm_hold: churned %d\n", ++churns);
		}
		fflush(stdout);
	}
	printf("lm_hold: exit\n");
	fflush(stdout);
	return 0;
}
