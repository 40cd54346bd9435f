/*
 * hostile_closefork: a child that closes every descriptor, as daemons do,
 * then allocates (issue 18, case 2).  The parent forks it and waits; the
 * child closes 3..1023, then makes 1000 x malloc(48), 400 of them freed,
 * in hc_after, and exits 0.  Under --follow-fork its profile must have
 * them all: a closed connection is no exit.
 * stdout: "child: exit 0".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "safe_common.h"

static struct sc_count c_after = {"hc_after"};
static void *keep[1000];

static NOINLINE void hc_after(int i)
{
	keep[i] = malloc(48);
	sc_alloc(&c_after, keep[i], 48);
	sc_touch(keep[i], 48);
}

int main(void)
{
	void *warm = malloc(100);
	sc_touch(warm, 100);
	free(warm);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		for (int i = 0; i < 1000; i++)
			hc_after(i);
		for (int i = 0; i < 400; i++) {
			sc_free(&c_after, 48);
			free(keep[i]);
		}
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return 2;
	printf("child: exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}
