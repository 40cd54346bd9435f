/*
 * attach_timedwait MODE MS N: a thread that waits N times in a system
 * call that returns EINTR to any stop (ptrace(2), BUGS) with a relative
 * timeout of MS milliseconds, nothing ever arriving (test_attach_hostile.sh,
 * issue 31).  An injector that stops the thread must issue the call again
 * with what is left of the timeout: issued again whole, each stop restarts
 * the wait (five attaches to an epoll_wait(2500) made one wait 12.9 s).
 *
 * MODE: epoll (epoll_wait), pwait2 (epoll_pwait2, a timespec), semtimedop
 * (a System V semaphore nobody posts), sigtimedwait (SIGUSR2 blocked,
 * never sent), io_getevents (an AIO context with nothing submitted).
 *
 * Prints "ready" once set up, then per wait "wait I MS_TAKEN RESULT" (the
 * call's return value, or -errno) with the wait's length on
 * CLOCK_MONOTONIC in whole ms, and "done" at the end.  The results are as
 * bare's (timeouts: 0, -EAGAIN); the lengths are checked by the test.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/aio_abi.h>

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: attach_timedwait MODE MS N\n");
		return 2;
	}
	const char *mode = argv[1];
	int ms = atoi(argv[2]), n = atoi(argv[3]);
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	int ep = -1, sem = -1;
	aio_context_t aio = 0;
	sigset_t set;
	sigemptyset(&set);
	if (!strcmp(mode, "epoll") || !strcmp(mode, "pwait2")) {
		ep = epoll_create1(0);
		if (ep < 0)
			return 3;
	} else if (!strcmp(mode, "semtimedop")) {
		sem = semget(IPC_PRIVATE, 1, 0600);
		if (sem < 0)
			return 3;
	} else if (!strcmp(mode, "sigtimedwait")) {
		sigaddset(&set, SIGUSR2);
		sigprocmask(SIG_BLOCK, &set, NULL);
	} else if (!strcmp(mode, "io_getevents")) {
		if (syscall(SYS_io_setup, 1, &aio) != 0)
			return 3;
	} else {
		fprintf(stderr, "attach_timedwait: unknown mode %s\n", mode);
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		struct epoll_event ev;
		struct sembuf op = {0, -1, 0};
		struct io_event aev;
		long long t0 = now_ms();
		long r;
		if (!strcmp(mode, "epoll"))
			r = epoll_wait(ep, &ev, 1, ms);
		else if (!strcmp(mode, "pwait2"))
			r = epoll_pwait2(ep, &ev, 1, &ts, NULL);
		else if (!strcmp(mode, "semtimedop"))
			r = semtimedop(sem, &op, 1, &ts);
		else if (!strcmp(mode, "sigtimedwait"))
			r = sigtimedwait(&set, NULL, &ts);
		else
			r = syscall(SYS_io_getevents, aio, 1, 1, &aev, &ts);
		long long took = now_ms() - t0;
		printf("wait %d %lld %ld\n", i, took, r < 0 ? -(long)errno : r);
		fflush(stdout);
	}
	if (sem >= 0)
		semctl(sem, 0, IPC_RMID);
	if (aio)
		syscall(SYS_io_destroy, aio);
	printf("done\n");
	return 0;
}
