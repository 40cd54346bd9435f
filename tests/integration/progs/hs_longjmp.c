/*
 * hs_longjmp: siglongjmp out of a SIGALRM handler that interrupted
 * malloc or free, over and over (test_hook_signals.sh; issue 18 round
 * two, case 5).  A profiler's hook may be left for good in the middle; a
 * re-entrancy flag it left set would drop every later allocation of the
 * thread.
 *
 * Two phases, on the thread's stack and on a 64 KiB alternate signal
 * stack (SA_ONSTACK).  In each, setitimer sends SIGALRM every 50 us while
 * hs_loop mallocs and frees (16..1008 bytes, at depth 1..4).  The handler
 * (SA_SIGINFO) looks where it interrupted the thread: inside the C
 * library or the dynamic loader (where glibc's allocator may hold its
 * lock, or be half way through a list: leaving it would break the
 * program bare as well) it returns; anywhere else (the program, or a
 * profiler's hook around the allocator) it allocates and frees one block
 * (hs_handler_alloc: malloc(96)) and siglongjmps back to the top of the
 * phase.  A phase ends after JUMPS such jumps (within 20 s: else exit 2).
 * Then hs_after allocates a known amount with the timer off: 1000 blocks
 * of 100..1090 bytes, the odd ones freed.
 *
 * hs_loop's own blocks are not counted: a jump may leave a block
 * allocated that the loop never saw.  Printed: "made hs_handler_alloc N
 * BYTES", what the handler allocated (the profile's alloc views of
 * hs_handler_alloc plus what it says it skipped must add up to it), and
 * "count hs_after ao as o s" (all of it recorded: exact).  Exits 41.
 */
#define _GNU_SOURCE
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

#include "safe_common.h"

#define JUMPS 1500

static struct sc_count c_handler = {"hs_handler_alloc"}, c_after = {"hs_after"};

/* Where the C library's and the loader's code lie. */
static struct {
	uintptr_t lo, hi;
} unsafe[8];
static int nunsafe;

static int find_unsafe(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	const char *name = info->dlpi_name;
	if (!name || (!strstr(name, "libc.so") && !strstr(name, "ld-linux")))
		return 0;
	for (int i = 0; i < info->dlpi_phnum && nunsafe < 8; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		unsafe[nunsafe].lo = info->dlpi_addr + ph->p_vaddr;
		unsafe[nunsafe].hi = unsafe[nunsafe].lo + ph->p_memsz;
		nunsafe++;
	}
	return 0;
}

static int in_unsafe(uintptr_t pc)
{
	for (int i = 0; i < nunsafe; i++)
		if (pc >= unsafe[i].lo && pc < unsafe[i].hi)
			return 1;
	return 0;
}

static sigjmp_buf top;
static volatile sig_atomic_t armed;
static volatile sig_atomic_t jumps;

NOINLINE void hs_handler_alloc(void)
{
	void *p = malloc(96);
	sc_touch(p, 96);
	sc_alloc(&c_handler, p, 96);
	free(p);
	sc_free(&c_handler, 96);
}

static void on_alarm(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = ucv;
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	if (!armed || in_unsafe(pc))
		return;
	hs_handler_alloc();
	armed = 0;
	jumps++;
	siglongjmp(top, 1);
}

static void *volatile slot[64];

NOINLINE void hs_loop_alloc(unsigned long i)
{
	unsigned k = (unsigned)(i % 64);
	void *old = slot[k];
	slot[k] = NULL;
	free(old);
	size_t n = 16 + 16 * (i % 63);
	void *p = malloc(n);
	sc_touch(p, n);
	slot[k] = p;
}

NOINLINE void hs_loop(int depth, unsigned long i)
{
	if (depth > 0)
		hs_loop(depth - 1, i);
	else
		hs_loop_alloc(i);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile unsigned long iter;

/* JUMPS jumps out of the handler; 0, or -1 after 20 s. */
NOINLINE int hs_phase(int onstack)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_alarm;
	sa.sa_flags = SA_SIGINFO | (onstack ? SA_ONSTACK : 0);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	double deadline = now() + 20.0;
	jumps = 0;
	struct itimerval it = {{0, 50}, {0, 50}};
	setitimer(ITIMER_REAL, &it, NULL);
	/* Each jump comes back here, with SIGALRM unblocked again. */
	sigsetjmp(top, 1);
	if (jumps < JUMPS) {
		armed = 1;
		for (;;) {
			unsigned long i = iter++;
			hs_loop((int)(i % 4), i);
			if (i % 1024 == 0 && now() > deadline)
				break;
		}
	}
	armed = 0;
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	return jumps >= JUMPS ? 0 : -1;
}

NOINLINE void hs_after(void)
{
	static void *keep[1000];
	for (int i = 0; i < 1000; i++) {
		size_t n = 100 + (size_t)i % 100 * 10;
		keep[i] = malloc(n);
		sc_touch(keep[i], n);
		sc_alloc(&c_after, keep[i], n);
	}
	for (int i = 1; i < 1000; i += 2) {
		free(keep[i]);
		sc_free(&c_after, 100 + (size_t)i % 100 * 10);
	}
}

int main(void)
{
	dl_iterate_phdr(find_unsafe, NULL);
	if (nunsafe == 0) {
		fprintf(stderr, "hs_longjmp: the C library's code not found\n");
		return 77;
	}
	int late = hs_phase(0);
	static char alt[64 * 1024];
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof(alt)};
	if (sigaltstack(&ss, NULL) != 0) {
		perror("sigaltstack");
		return 1;
	}
	late |= hs_phase(1);
	/* Nothing arrives any more. */
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGALRM);
	sigprocmask(SIG_BLOCK, &block, NULL);
	if (late) {
		printf("hs_longjmp: fewer than %d jumps in 20 s\n", JUMPS);
		return 2;
	}
	hs_after();
	printf("hs_longjmp: 2 phases, %d jumps out of the handler each\n",
	       JUMPS);
	printf("made %s %ld %ld\n", c_handler.name, c_handler.ao, c_handler.as);
	sc_print(&c_after);
	return 41;
}
