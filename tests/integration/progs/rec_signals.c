/*
 * rec_signals: programs for test_record_signals.sh (docs/safety/safety.md,
 * "Never hurt the program, round two"), each with known allocations; the
 * "count FUNC ao as o s" lines are safe_common.h's (exact at -i 1).
 *
 *   rec_signals group-handler SIG  a handler for SIG, then kill(0, SIG):
 *                    the signal reaches the program itself before kill
 *                    returns (bare as profiled); then 30 x malloc(1000)
 *                    in after_kill_alloc, 10 freed; exits 0
 *   rec_signals group-default SIG  20 x malloc(500) in before_kill_alloc,
 *                    all live, its count line printed, then kill(0, SIG)
 *                    with SIG's default action: dies of it (exits 3 if it
 *                    survived)
 *   rec_signals state  prints the signals ignored and blocked at main, one
 *                    line each ("ignored: 1 13", "blocked: ..."); exits 0
 *   rec_signals churn N CODE  N x malloc(64 + i % 64) and free in
 *                    churn_alloc (every event of a --trace), then exits
 *                    CODE
 *   rec_signals scatter N CODE  N allocations of pseudo-random sizes in
 *                    scatter_alloc, each freeing a pseudo-random one of
 *                    64 before (events that compress little), then exits
 *                    CODE
 *   rec_signals tty  prints whether its process group is the foreground
 *                    of the terminal on stdin ("foreground: yes"), then
 *                    "ready", and waits for SIGINT (at most 30 s: SIGALRM
 *                    ends it): then allocates in after_kill_alloc, prints
 *                    "got SIGINT" and its count line and exits 0
 *
 * SIG is a name without SIG (HUP INT QUIT TERM USR1 USR2 ALRM KILL PIPE
 * CHLD WINCH TSTP XFSZ ...) or a number.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safe_common.h"

static const struct {
	const char *name;
	int sig;
} names[] = {
        {"HUP", SIGHUP},       {"INT", SIGINT},     {"QUIT", SIGQUIT},
        {"ABRT", SIGABRT},     {"USR1", SIGUSR1},   {"USR2", SIGUSR2},
        {"PIPE", SIGPIPE},     {"ALRM", SIGALRM},   {"TERM", SIGTERM},
        {"CHLD", SIGCHLD},     {"CONT", SIGCONT},   {"TSTP", SIGTSTP},
        {"TTIN", SIGTTIN},     {"TTOU", SIGTTOU},   {"URG", SIGURG},
        {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ},   {"VTALRM", SIGVTALRM},
        {"PROF", SIGPROF},     {"WINCH", SIGWINCH}, {"IO", SIGIO},
        {"PWR", SIGPWR},       {"SYS", SIGSYS},     {"KILL", SIGKILL},
        {"STKFLT", SIGSTKFLT},
};

static int sig_of(const char *s)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i].name))
			return names[i].sig;
	char *end;
	long v = strtol(s, &end, 10);
	return *end || v <= 0 || v >= NSIG ? -1 : (int)v;
}

static volatile sig_atomic_t caught;

static void on_sig(int sig)
{
	caught = sig;
}

static struct sc_count after_c = {"after_kill_alloc", 0, 0, 0, 0};
static struct sc_count before_c = {"before_kill_alloc", 0, 0, 0, 0};
static struct sc_count churn_c = {"churn_alloc", 0, 0, 0, 0};
static void *keep[64];

NOINLINE void after_kill_alloc(void)
{
	for (int i = 0; i < 30; i++) {
		keep[i] = malloc(1000);
		sc_touch(keep[i], 1000);
		sc_alloc(&after_c, keep[i], 1000);
	}
	for (int i = 0; i < 10; i++) {
		free(keep[i]);
		sc_free(&after_c, 1000);
	}
}

NOINLINE void before_kill_alloc(void)
{
	for (int i = 0; i < 20; i++) {
		keep[i] = malloc(500);
		sc_touch(keep[i], 500);
		sc_alloc(&before_c, keep[i], 500);
	}
}

/* n allocations of pseudo-random sizes (1 to 4096 bytes) into 64 slots,
 * each replacing the block of a pseudo-random slot: sizes, addresses and
 * the order of frees vary, so the trace's events compress little, and at
 * most 64 blocks are live. */
NOINLINE void scatter_alloc(long n)
{
	void *slot[64] = {NULL};
	size_t size[64] = {0};
	unsigned long x = 12345;
	for (long i = 0; i < n; i++) {
		x = x * 6364136223846793005ul + 1442695040888963407ul;
		unsigned k = (unsigned)(x >> 58);
		size_t sz = 1 + (size_t)((x >> 20) % 4096);
		if (slot[k]) {
			free(slot[k]);
			sc_free(&churn_c, size[k]);
		}
		slot[k] = malloc(sz);
		size[k] = sz;
		sc_touch(slot[k], sz);
		sc_alloc(&churn_c, slot[k], sz);
	}
	for (unsigned k = 0; k < 64; k++)
		if (slot[k]) {
			free(slot[k]);
			sc_free(&churn_c, size[k]);
		}
}

NOINLINE void churn_alloc(long n)
{
	for (long i = 0; i < n; i++) {
		size_t sz = 64 + (size_t)(i % 64);
		void *p = malloc(sz);
		sc_touch(p, sz);
		sc_alloc(&churn_c, p, sz);
		free(p);
		sc_free(&churn_c, sz);
	}
}

static int group_handler(int sig)
{
	struct sigaction sa = {.sa_handler = on_sig};
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0) {
		perror("sigaction");
		return 1;
	}
	if (kill(0, sig) != 0) {
		perror("kill");
		return 1;
	}
	/* A signal the caller sends itself, unblocked, is delivered before
	 * kill returns. */
	printf("handler ran: %s\n", caught == sig ? "yes" : "no");
	after_kill_alloc();
	sc_print(&after_c);
	return 0;
}

static int group_default(int sig)
{
	signal(sig, SIG_DFL);
	before_kill_alloc();
	sc_print(&before_c);
	fflush(stdout);
	if (kill(0, sig) != 0) {
		perror("kill");
		return 1;
	}
	printf("survived signal %d\n", sig);
	return 3;
}

static int state(void)
{
	sigset_t blocked;
	sigprocmask(SIG_BLOCK, NULL, &blocked);
	printf("ignored:");
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			printf(" %d", sig);
	}
	printf("\nblocked:");
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&blocked, sig) == 1)
			printf(" %d", sig);
	printf("\n");
	return 0;
}

static int tty(void)
{
	struct sigaction sa = {.sa_handler = on_sig};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigset_t none, intr;
	sigemptyset(&intr);
	sigaddset(&intr, SIGINT);
	sigprocmask(SIG_BLOCK, &intr, &none);
	sigdelset(&none, SIGINT);
	printf("foreground: %s\n", tcgetpgrp(0) == getpgrp() ? "yes" : "no");
	printf("ready\n");
	fflush(stdout);
	alarm(30);
	while (caught != SIGINT)
		sigsuspend(&none);
	alarm(0);
	after_kill_alloc();
	printf("got SIGINT\n");
	sc_print(&after_c);
	return 0;
}

int main(int argc, char **argv)
{
	int sig = argc > 2 ? sig_of(argv[2]) : -1;
	if (argc == 3 && !strcmp(argv[1], "group-handler") && sig > 0)
		return group_handler(sig);
	if (argc == 3 && !strcmp(argv[1], "group-default") && sig > 0)
		return group_default(sig);
	if (argc == 2 && !strcmp(argv[1], "state"))
		return state();
	if (argc == 2 && !strcmp(argv[1], "tty"))
		return tty();
	if (argc == 4 && !strcmp(argv[1], "churn")) {
		churn_alloc(atol(argv[2]));
		sc_print(&churn_c);
		return atoi(argv[3]);
	}
	if (argc == 4 && !strcmp(argv[1], "scatter")) {
		scatter_alloc(atol(argv[2]));
		sc_print(&churn_c);
		return atoi(argv[3]);
	}
	fprintf(stderr, "usage: rec_signals group-handler|group-default SIG | "
	                "state | churn N CODE | scatter N CODE | tty\n");
	return 2;
}
