/*
 * hostile_exec32 PROG32: a 64-bit program that runs a 32-bit one (issue
 * 18, case 10).  Its environment, LD_PRELOAD included, passes on to the
 * child, whose loader must not complain on the child's stderr.  Prints
 * the child's exit status.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: hostile_exec32 PROG32\n");
		return 2;
	}
	char *p = malloc(1000);
	memset(p, 1, 1000);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		execl(argv[1], argv[1], (char *)NULL);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return 2;
	printf("32-bit child: exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	free(p);
	return 0;
}
