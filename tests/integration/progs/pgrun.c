/*
 * pgrun [-i SIG]... [-b SIG]... CMD [ARGS...]: runs CMD as the leader of a
 * new process group (setpgid, then exec), with the signals numbered SIG
 * ignored (-i) or blocked (-b) first.  test_record_signals.sh runs both
 * the bare program and `heapprof record` this way: a program that
 * signals its process group (kill(0, SIG)) then reaches neither the test
 * script nor timeout(1) around it, only what was started here; and the
 * program can be started with the signal state a caller may give it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	sigset_t block;
	sigemptyset(&block);
	int i = 1;
	for (; i + 1 < argc; i += 2) {
		int sig = atoi(argv[i + 1]);
		if (!strcmp(argv[i], "-i")) {
			if (signal(sig, SIG_IGN) == SIG_ERR) {
				perror("pgrun: signal");
				return 2;
			}
		} else if (!strcmp(argv[i], "-b")) {
			sigaddset(&block, sig);
		} else {
			break;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "usage: pgrun [-i SIG]... [-b SIG]... CMD "
		                "[ARGS...]\n");
		return 2;
	}
	if (setpgid(0, 0) != 0) {
		perror("pgrun: setpgid");
		return 2;
	}
	sigprocmask(SIG_BLOCK, &block, NULL);
	execvp(argv[i], argv + i);
	perror("pgrun: exec");
	return 127;
}
