/*
 * fault_reaper FILE CMD [ARGS...]: runs CMD as a child subreaper
 * (PR_SET_CHILD_SUBREAPER), so that when CMD (heapprof record) is killed,
 * its child (the profiled program) is reparented here instead of to init
 * and its exit status can still be checked.  Each reaped process adds a
 * line "PID exit N" or "PID signal N" to FILE; exits with CMD's status
 * (128 + signal when it was killed) once every descendant is gone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fault_reaper FILE CMD [ARGS...]\n");
		return 2;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
		perror("fault_reaper: prctl");
		return 2;
	}
	FILE *log = fopen(argv[1], "w");
	if (!log) {
		perror("fault_reaper: log");
		return 2;
	}
	setvbuf(log, NULL, _IOLBF, 0);
	pid_t child = fork();
	if (child < 0) {
		perror("fault_reaper: fork");
		return 2;
	}
	if (child == 0) {
		execvp(argv[2], argv + 2);
		perror("fault_reaper: exec");
		_exit(127);
	}
	int rc = 0;
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, 0);
		if (p < 0) {
			if (errno == EINTR)
				continue;
			break; /* ECHILD: all gone */
		}
		if (WIFEXITED(st))
			fprintf(log, "%d exit %d\n", (int)p, WEXITSTATUS(st));
		else
			fprintf(log, "%d signal %d\n", (int)p, WTERMSIG(st));
		if (p == child)
			rc = WIFEXITED(st) ? WEXITSTATUS(st)
			                   : 128 + WTERMSIG(st);
	}
	fclose(log);
	return rc;
}
