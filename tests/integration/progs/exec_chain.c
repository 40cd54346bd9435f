/*
 * exec_chain MODE: a program that replaces itself (test_procs.sh, issue
 * 31: record follows its command through exec by default).
 *
 *   exec_chain MODE       ec_first: 3 x malloc(100), kept; then execs
 *                         "exec_chain final" with MODE: execv, execvp,
 *                         execl, execlp, execle, execve, execvpe, fexecve
 *   exec_chain final      ec_final: 7 x malloc(200), 2 freed; prints
 *                         "final" and exits 0
 *   exec_chain fork       forks a child that execs "exec_chain final"
 *                         (a child: not followed unless --follow-fork),
 *                         waits for it, then ec_parent: 5 x malloc(50)
 *
 * The environment passed to execle, execve and execvpe is environ, as the
 * others use.  Exits 0, or 2 on a bad mode, 3 if an exec fails.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

extern char **environ;
static void *keep[16];

NOINLINE void ec_first(void)
{
	for (int i = 0; i < 3; i++)
		keep[i] = malloc(100);
}

NOINLINE void ec_final(void)
{
	for (int i = 0; i < 7; i++)
		keep[i] = malloc(200);
	free(keep[0]);
	free(keep[1]);
}

NOINLINE void ec_parent(void)
{
	for (int i = 0; i < 5; i++)
		keep[i] = malloc(50);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	const char *mode = argv[1];
	if (!strcmp(mode, "final")) {
		ec_final();
		printf("final\n");
		return 0;
	}
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 2;
	self[n] = '\0';
	/* execvp and execlp search PATH for the file name alone. */
	const char *base = strrchr(self, '/') + 1;
	char dir[4096];
	snprintf(dir, sizeof(dir), "%.*s", (int)(base - self - 1), self);
	setenv("PATH", dir, 1);
	char *args[] = {(char *)base, "final", NULL};
	if (!strcmp(mode, "fork")) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			execv(self, args);
			_exit(3);
		}
		int st = 0;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
			return 3;
		ec_parent();
		printf("parent\n");
		return 0;
	}
	ec_first();
	fflush(stdout);
	if (!strcmp(mode, "execv"))
		execv(self, args);
	else if (!strcmp(mode, "execvp"))
		execvp(base, args);
	else if (!strcmp(mode, "execl"))
		execl(self, base, "final", (char *)NULL);
	else if (!strcmp(mode, "execlp"))
		execlp(base, base, "final", (char *)NULL);
	else if (!strcmp(mode, "execle"))
		execle(self, base, "final", (char *)NULL, environ);
	else if (!strcmp(mode, "execve"))
		execve(self, args, environ);
	else if (!strcmp(mode, "execvpe"))
		execvpe(base, args, environ);
	else if (!strcmp(mode, "fexecve")) {
		int fd = open(self, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			fexecve(fd, args, environ);
	} else
		return 2;
	return 3;
}
