/*
 * hs_raise SIG [raise|kill]: a program that sends itself a real-time
 * signal it never handles (test_hook_signals.sh; issue 18 round two,
 * case 7).  Bare, the default action kills it; a preloaded profiler must
 * not change that, nor what /proc/self/status says of the signal, unless
 * a session can need the signal.
 *
 * Prints the signal's disposition (sigaction) and its bits in SigCgt and
 * SigIgn of /proc/self/status; then a fork child (the same process image,
 * dispositions and library state) prints them too and sends itself the
 * signal with raise(SIG) (or kill(getpid(), SIG)); if it survives it
 * prints "survived" and exits 0.  The parent prints how the child ended
 * and exits 128 + SIG when the signal killed it (by exit(): a shell that
 * ran us prints nothing of its own), else with the child's status.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Bit sig - 1 of a /proc/self/status mask line ("SigCgt:"). */
static int status_bit(const char *field, int sig)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	size_t fl = strlen(field);
	int r = -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':')
			r = (int)((strtoull(line + fl + 1, NULL, 16) >>
			           (sig - 1)) &
			          1);
	fclose(f);
	return r;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: hs_raise SIG [raise|kill]\n");
		return 64;
	}
	int sig = atoi(argv[1]);
	int use_kill = argc > 2 && !strcmp(argv[2], "kill");
	struct sigaction old;
	if (sig < 1 || sig > 64 || sigaction(sig, NULL, &old) != 0) {
		fprintf(stderr, "hs_raise: bad signal %s\n", argv[1]);
		return 64;
	}
	const char *disp = (old.sa_flags & SA_SIGINFO) ? "a handler"
	                   : old.sa_handler == SIG_DFL ? "default"
	                   : old.sa_handler == SIG_IGN ? "ignored"
	                                               : "a handler";
	printf("signal %d: %s, SigCgt %d, SigIgn %d\n", sig, disp,
	       status_bit("SigCgt", sig), status_bit("SigIgn", sig));
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		printf("child: SigCgt %d\n", status_bit("SigCgt", sig));
		fflush(stdout);
		if (use_kill)
			kill(getpid(), sig);
		else
			raise(sig);
		printf("survived\n");
		fflush(stdout);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid) {
		perror("waitpid");
		return 1;
	}
	if (WIFSIGNALED(st)) {
		printf("child: killed by signal %d\n", WTERMSIG(st));
		return 128 + WTERMSIG(st);
	}
	printf("child: exited %d\n", WEXITSTATUS(st));
	return WEXITSTATUS(st);
}
