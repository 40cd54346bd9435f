/*
 * inject_target MODE [ARG]: a process for the injector's test
 * (tests/unit/test_inject.c) to inject into, started without heapprof.
 * It writes "ready" on stderr when it is about to block, then blocks in
 * one call chosen by MODE, then writes what the call returned on stdout
 * (the line a bare run and an injected run must share) and
 * "t_start=NS t_end=NS" (CLOCK_MONOTONIC around the call) on stderr.
 *
 *   sigsuspend  sigsuspend(empty mask) until SIGUSR1 (a handler)
 *   sigsuspend2 the same with SIGUSR2 blocked during the call (a handler
 *               for it too, run when the call has returned)
 *   read        read(0, 1 byte)
 *   nanosleep   nanosleep(300 ms)
 *   poll        poll(stdin, 300 ms) with nothing written: 0
 *   epoll       epoll_wait(stdin, -1)
 *   storm       4 threads allocating and freeing (a fixed sequence per
 *               round, each block's head checked before it is freed) until a
 *               byte arrives on stdin; prints the round checksum, which
 *               every round of every thread must share
 *   seccomp     an allow-all seccomp filter, then read
 *   nodump      ARG: a uid to become, then not dumpable, then read
 *   mntns       ARG: a directory to hide under a tmpfs in a mount
 *               namespace of its own, then read
 *   inhandler   raises SIGUSR1, whose handler writes "ready" and blocks
 *               in read(0) (a thread inside a signal handler: never a safe
 *               point), then returns; prints the byte
 *   errno       errno = EDOM, then spins (running, in its own code)
 *               checking that it stays EDOM until SIGUSR1; prints how
 *               many times it found it changed (0 bare)
 *
 * Exits 0 (storm: 1 if a block or a checksum was wrong).  Built twice:
 * as build/progs/inject_target and linked -static as inject_static.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static volatile sig_atomic_t usr2_seen;

static volatile sig_atomic_t usr1_seen;
static volatile char handler_byte = '-';

/* inhandler: blocks inside the handler until a byte comes. */
static void in_handler(int sig)
{
	(void)sig;
	char c;
	write(2, "ready\n", 6);
	if (read(0, &c, 1) == 1)
		handler_byte = c;
}

static void on_usr1(int sig)
{
	if (sig == SIGUSR2)
		usr2_seen++;
	else
		usr1_seen = 1;
}

#define STORM_THREADS 4
#define STORM_OPS     20000
static atomic_int storm_ready, storm_stop, storm_bad;
static long storm_sum[STORM_THREADS];
static long storm_rounds[STORM_THREADS];

static long storm_round(void)
{
	void *p[64] = {0};
	size_t sz[64] = {0};
	unsigned s = 12345;
	long sum = 0;
	for (int i = 0; i < STORM_OPS; i++) {
		s = s * 1103515245u + 12345u;
		int k = (s >> 8) & 63;
		/* The first 16 bytes are checked: the time goes to malloc
		 * and free, where an unsafe injection would do harm. */
		if (p[k]) {
			unsigned char *b = p[k];
			for (size_t j = 0; j < 16; j++)
				if (b[j] != (unsigned char)(k + sz[k]))
					atomic_store(&storm_bad, 1);
			free(p[k]);
		}
		sz[k] = 16 + ((s >> 16) & 1023);
		p[k] = malloc(sz[k]);
		if (!p[k]) {
			atomic_store(&storm_bad, 1);
			break;
		}
		memset(p[k], (unsigned char)(k + sz[k]), 16);
		sum += k + (long)sz[k];
	}
	for (int k = 0; k < 64; k++)
		free(p[k]);
	return sum;
}

static void *storm_thread(void *arg)
{
	long id = (long)arg;
	long first = storm_round();
	storm_sum[id] = first;
	storm_rounds[id] = 1;
	atomic_fetch_add(&storm_ready, 1);
	while (!atomic_load(&storm_stop)) {
		if (storm_round() != first)
			atomic_store(&storm_bad, 1);
		storm_rounds[id]++;
		if (id == 0) {
			struct pollfd f = {0, POLLIN, 0};
			if (poll(&f, 1, 0) == 1)
				atomic_store(&storm_stop, 1);
		}
	}
	return NULL;
}

static int storm(void)
{
	pthread_t t[STORM_THREADS];
	for (long i = 1; i < STORM_THREADS; i++)
		if (pthread_create(&t[i], NULL, storm_thread, (void *)i))
			return 2;
	/* The main thread storms too (thread 0): it reads the release. */
	long first = storm_round();
	storm_sum[0] = first;
	storm_rounds[0] = 1;
	atomic_fetch_add(&storm_ready, 1);
	while (atomic_load(&storm_ready) < STORM_THREADS) {
		if (storm_round() != first)
			atomic_store(&storm_bad, 1);
		storm_rounds[0]++;
	}
	fprintf(stderr, "ready\n");
	storm_thread((void *)0);
	long rounds = storm_rounds[0];
	for (long i = 1; i < STORM_THREADS; i++) {
		pthread_join(t[i], NULL);
		if (storm_sum[i] != first)
			atomic_store(&storm_bad, 1);
		rounds += storm_rounds[i];
	}
	fprintf(stderr, "rounds=%ld\n", rounds);
	if (atomic_load(&storm_bad)) {
		printf("storm: CORRUPT\n");
		return 1;
	}
	printf("storm: checksum=%ld threads=%d\n", first, STORM_THREADS);
	return 0;
}

static int block_read(const char *mode)
{
	char c = 0;
	fprintf(stderr, "ready\n");
	long long t0 = now_ns();
	ssize_t r = read(0, &c, 1);
	int e = errno;
	long long t1 = now_ns();
	printf("%s: ret=%zd errno=%s byte=%c\n", mode, r,
	       r < 0 ? strerror(e) : "-", r > 0 ? c : '-');
	fprintf(stderr, "t_start=%lld t_end=%lld\n", t0, t1);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	setvbuf(stdout, NULL, _IONBF, 0);
	setvbuf(stderr, NULL, _IONBF, 0);
	long r = 0;
	int e = 0;
	long long t0 = 0, t1 = 0;
	if (!strcmp(mode, "storm"))
		return storm();
	if (!strcmp(mode, "read"))
		return block_read(mode);
	if (!strcmp(mode, "seccomp")) {
		struct sock_filter allow =
		        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		struct sock_fprog prog = {1, &allow};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			return 3;
		return block_read(mode);
	}
	if (!strcmp(mode, "nodump") && argc > 2) {
		int id = atoi(argv[2]);
		if (setresgid(id, id, id) || setresuid(id, id, id) ||
		    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
			return 3;
		return block_read(mode);
	}
	if (!strcmp(mode, "mntns") && argc > 2) {
		if (unshare(CLONE_NEWNS) ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("tmpfs", argv[2], "tmpfs", 0, NULL))
			return 3;
		return block_read(mode);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	if (!strcmp(mode, "inhandler")) {
		struct sigaction h;
		memset(&h, 0, sizeof(h));
		h.sa_handler = in_handler;
		sigaction(SIGUSR1, &h, NULL);
		raise(SIGUSR1);
		printf("inhandler: byte=%c\n", handler_byte);
		return 0;
	}
	if (!strcmp(mode, "errno")) {
		/* The handler is the program's: it keeps errno itself. */
		int changed = 0;
		fprintf(stderr, "ready\n");
		errno = EDOM;
		while (!usr1_seen) {
			if (errno != EDOM) {
				changed++;
				errno = EDOM;
			}
		}
		printf("errno: changed=%d\n", changed);
		return 0;
	}
	if (!strcmp(mode, "sigsuspend") || !strcmp(mode, "sigsuspend2")) {
		sigset_t s;
		sigemptyset(&s);
		if (mode[10])
			sigaddset(&s, SIGUSR2);
		fprintf(stderr, "ready\n");
		t0 = now_ns();
		r = sigsuspend(&s);
		e = errno;
	} else if (!strcmp(mode, "nanosleep")) {
		struct timespec ts = {0, 300 * 1000 * 1000};
		fprintf(stderr, "ready\n");
		t0 = now_ns();
		r = nanosleep(&ts, NULL);
		e = errno;
	} else if (!strcmp(mode, "poll")) {
		struct pollfd f = {0, POLLIN, 0};
		fprintf(stderr, "ready\n");
		t0 = now_ns();
		r = poll(&f, 1, 300);
		e = errno;
	} else if (!strcmp(mode, "epoll")) {
		int ep = epoll_create1(0);
		struct epoll_event ev = {.events = EPOLLIN};
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev))
			return 3;
		fprintf(stderr, "ready\n");
		t0 = now_ns();
		r = epoll_wait(ep, &ev, 1, -1);
		e = errno;
	} else {
		fprintf(stderr, "inject_target: unknown mode '%s'\n", mode);
		return 2;
	}
	t1 = now_ns();
	if (!strcmp(mode, "sigsuspend2"))
		printf("%s: ret=%ld errno=%s usr2=%d\n", mode, r,
		       r < 0 ? strerror(e) : "-", (int)usr2_seen);
	else
		printf("%s: ret=%ld errno=%s\n", mode, r,
		       r < 0 ? strerror(e) : "-");
	fprintf(stderr, "t_start=%lld t_end=%lld\n", t0, t1);
	return 0;
}
