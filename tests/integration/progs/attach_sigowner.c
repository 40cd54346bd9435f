/*
 * attach_sigowner GO N: a program whose runtime takes every signal, as
 * Go's does (test_attach_hostile.sh, issue 31): it installs its own
 * handler (which only counts) for every signal it may catch, over any a
 * preloaded library installed, prints "ready", waits for the file GO (at
 * most 60 s, else exit 3), then makes N x (so_alloc: malloc(80), written,
 * freed).  A daemon's request to attach by signal never reaches the
 * profiler's handler here.
 *
 * stdout: "ready", "made so_alloc N 80".  Exits 0.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t caught;
static void *volatile sink;

static void on_signal(int sig)
{
	(void)sig;
	caught++;
}

__attribute__((noinline)) void so_alloc(void)
{
	char *p = malloc(80);
	if (!p)
		exit(4);
	p[0] = 1;
	sink = p;
	free(p);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	long n = atol(argv[2]);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (int sig = 1; sig < NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || sig == SIGINT ||
		    sig == SIGTERM || sig == SIGSEGV || sig == SIGBUS ||
		    sig == SIGFPE || sig == SIGILL || sig == SIGABRT ||
		    sig == SIGCHLD || sig == SIGPIPE)
			continue;
		sigaction(sig, &sa, NULL); /* glibc's own (32, 33) refuse */
	}
	printf("ready\n");
	fflush(stdout);
	for (int i = 0; i < 30000 && access(argv[1], F_OK) != 0; i++) {
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	if (access(argv[1], F_OK) != 0)
		return 3;
	for (long i = 0; i < n; i++)
		so_alloc();
	printf("made so_alloc %ld 80\n", n);
	return 0;
}
