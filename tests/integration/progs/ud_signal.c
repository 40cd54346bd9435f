/*
 * ud_signal: signal handlers that allocate, interrupting code that
 * allocates (test_unwind_diff.sh).  SIGALRM from setitimer every 100 us
 * while the main loop allocates and computes; two phases:
 *   1  the handler runs on the thread's stack
 *   2  it runs on a 64 KiB alternate signal stack (sigaltstack, SA_ONSTACK;
 *      the stack from malloc in us_altstack, freed at the end)
 * The main loop (us_loop) calls us_main_alloc (malloc(16 + 16 * (i % 32))
 * into a ring of 32, the slot's previous block freed) and us_spin, which
 * recurses 1 .. 5 levels computing, so alarms land in every kind of code:
 * prologues, epilogues, libc's memset, the loop.
 * The handler us_on_alarm allocates only when the interrupted code is not
 * inside a malloc or free (glibc's malloc is not async-signal-safe: the
 * in_alloc flag; so every allocation is recorded exactly at -i 1):
 *   us_handler_alloc       malloc(128) into a ring of 16 (the slot's
 *                          previous block freed)
 *   us_handler_deep_alloc  every 4th time, 3 frames deeper on the signal
 *                          stack: malloc(64), freed
 * Each phase ends after exactly 200 handler allocations (within 20 s, else
 * exit 2), so their counts are fixed and go to stdout; the main loop's
 * depend on timing and go to stderr, with the "allocations" total.
 * Exits 35.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include "ud_common.h"

#define PER_PHASE 200

static struct sc_count c_main = {"us_main_alloc"},
                       c_handler = {"us_handler_alloc"},
                       c_deep = {"us_handler_deep_alloc"},
                       c_alt = {"us_altstack"};

static volatile sig_atomic_t in_alloc;
static volatile sig_atomic_t handler_allocs; /* this phase */
static volatile sig_atomic_t skipped;
static long handler_total;

static void *hring[16];

NOINLINE void us_handler_deep_alloc(void)
{
	void *p = malloc(64);
	sc_touch(p, 64);
	sc_alloc(&c_deep, p, 64);
	free(p);
	sc_free(&c_deep, 64);
}

NOINLINE void us_handler_deep(int d)
{
	volatile char pad[24];
	pad[d] = 1;
	if (d == 0)
		us_handler_deep_alloc();
	else
		us_handler_deep(d - 1);
	sc_sink += (unsigned char)pad[d];
}

NOINLINE void us_handler_alloc(void)
{
	int slot = (int)(handler_total % 16);
	if (hring[slot]) {
		free(hring[slot]);
		sc_free(&c_handler, 128);
	}
	hring[slot] = malloc(128);
	sc_touch(hring[slot], 128);
	sc_alloc(&c_handler, hring[slot], 128);
}

NOINLINE void us_on_alarm(int sig)
{
	(void)sig;
	if (in_alloc || handler_allocs >= PER_PHASE) {
		skipped++;
		return;
	}
	int saved = errno;
	us_handler_alloc();
	if (handler_total % 4 == 0)
		us_handler_deep(2);
	handler_total++;
	handler_allocs++;
	errno = saved;
}

static void *mring[32];
static size_t mring_n[32];

NOINLINE void us_main_alloc(unsigned long i)
{
	int slot = (int)(i % 32);
	size_t n = 16 + 16 * (size_t)slot;
	in_alloc = 1;
	if (mring[slot])
		free(mring[slot]);
	void *p = malloc(n);
	in_alloc = 0;
	if (mring[slot])
		sc_free(&c_main, mring_n[slot]);
	sc_touch(p, n);
	sc_alloc(&c_main, p, n);
	mring[slot] = p;
	mring_n[slot] = n;
}

NOINLINE unsigned long us_spin(int d, unsigned long x)
{
	for (int k = 0; k < 200; k++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	if (d > 0)
		x ^= us_spin(d - 1, x);
	return x;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Until the handler allocated PER_PHASE times; 0 on time, -1 late. */
NOINLINE int us_loop(void)
{
	double deadline = now() + 20.0;
	handler_allocs = 0;
	struct itimerval it = {{0, 100}, {0, 100}};
	setitimer(ITIMER_REAL, &it, NULL);
	for (unsigned long i = 0; handler_allocs < PER_PHASE; i++) {
		us_main_alloc(i);
		sc_sink += us_spin((int)(i % 5), i);
		if (i % 256 == 0 && now() > deadline)
			break;
	}
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	return handler_allocs >= PER_PHASE ? 0 : -1;
}

NOINLINE void *us_altstack(void)
{
	void *p = malloc(64 * 1024);
	sc_touch(p, 64 * 1024);
	sc_alloc(&c_alt, p, 64 * 1024);
	return p;
}

static int install(int onstack)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = us_on_alarm;
	sa.sa_flags = SA_RESTART | (onstack ? SA_ONSTACK : 0);
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGALRM, &sa, NULL);
}

int main(void)
{
	if (install(0) != 0) {
		perror("sigaction");
		return 1;
	}
	int late = us_loop();
	void *alt = us_altstack();
	stack_t ss = {.ss_sp = alt, .ss_size = 64 * 1024};
	if (sigaltstack(&ss, NULL) != 0 || install(1) != 0) {
		perror("sigaltstack");
		return 1;
	}
	late |= us_loop();
	/* Nothing arrives any more: the timer is off, SIGALRM blocked. */
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGALRM);
	sigprocmask(SIG_BLOCK, &block, NULL);
	stack_t off = {.ss_flags = SS_DISABLE};
	sigaltstack(&off, NULL);
	free(alt);
	sc_free(&c_alt, 64 * 1024);
	if (late) {
		printf("ud_signal: fewer than %d handler allocations in 20 s\n",
		       PER_PHASE);
		return 2;
	}
	printf("ud_signal: 2 phases, %d handler allocations each\n", PER_PHASE);
	struct sc_count *const fixed[] = {&c_handler, &c_deep, &c_alt};
	for (int k = 0; k < UD_N(fixed); k++)
		sc_print(fixed[k]);
	struct sc_count *const all[] = {&c_main, &c_handler, &c_deep, &c_alt};
	/* The main loop's count and the total depend on timing. */
	fprintf(stderr, "count %s %ld %ld %ld %ld\n", c_main.name, c_main.ao,
	        c_main.as, c_main.o, c_main.s);
	long total = 0;
	for (int k = 0; k < UD_N(all); k++)
		total += all[k]->ao;
	fprintf(stderr, "allocations %ld\n", total);
	fprintf(stderr, "ud_signal: %d alarms skipped\n", (int)skipped);
	ud_caller("us_handler_alloc", "us_on_alarm");
	ud_caller("us_handler_deep_alloc", "us_handler_deep");
	ud_caller("us_main_alloc", "us_loop");
	ud_caller("us_altstack", "main");
	return 35;
}
