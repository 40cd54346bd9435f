/*
 * inc_grow CGROUP_DIR [wait]: a program that grows until the OOM killer
 * kills it, for test_incidents.sh.  It puts itself in the memory cgroup
 * CGROUP_DIR (writes its pid to cgroup.procs), prints "inc_grow: ready"
 * (with "wait": then waits for SIGUSR1), and then, every 10 ms, mallocs 1
 * MiB in grow_here() and writes every byte of it (so it is resident and
 * charged), keeping all of it.  In a 64 MiB cgroup it is killed after
 * about 60 steps; "inc_grow: not killed" and status 1 if 1000 steps went
 * by (4000 MiB: no limit).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

NOINLINE void *grow_here(size_t n)
{
	char *p = malloc(n);
	if (p)
		memset(p, 7, n);
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: inc_grow CGROUP_DIR [wait]\n");
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/cgroup.procs", argv[1]);
	FILE *f = fopen(path, "w");
	if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
		perror("inc_grow: cgroup.procs");
		return 3;
	}
	sigset_t block, during;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &during);
	sigdelset(&during, SIGUSR1);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	printf("inc_grow: ready\n");
	fflush(stdout);
	if (argc > 2 && !strcmp(argv[2], "wait"))
		while (!go)
			sigsuspend(&during);
	struct timespec ts = {0, 10 * 1000 * 1000};
	for (int i = 0; i < 1000; i++) {
		if (!grow_here(1 << 20))
			break;
		nanosleep(&ts, NULL);
	}
	printf("inc_grow: not killed\n");
	return 1;
}
