/*
 * cap_altstack SIZE [-v]: a signal handler that allocates on a small
 * alternate signal stack (test_capture.sh).
 *
 * The alternate stack is exactly SIZE bytes (4096 and 8192 in the test),
 * the top of an mmap'ed area with a PROT_NONE guard page right below it:
 * a handler that needs more stack than SIZE minus the kernel's signal
 * frame (AT_MINSIGSTKSZ: 3376 bytes on an AVX-512 machine) faults on the
 * guard page and the process dies of SIGSEGV, instead of overwriting
 * memory silently.
 *
 * SIGUSR1 and SIGALRM share one handler (SA_ONSTACK), which checks it runs
 * on the alternate stack and calls alt_alloc: malloc(24), malloc(200),
 * malloc(1000), touched, freed in reverse order.  The main loop, 2000
 * times: main_alloc (malloc(16 + 64 * (i % 64)) into a ring of 16 slots,
 * freeing the slot's previous block), then raise(SIGUSR1) or
 * raise(SIGALRM), alternately.  alt_alloc runs once from main before the
 * loop (see there).  raise() delivers the signal before it returns,
 * outside any allocator call, so the handler's malloc is safe and is
 * never nested in a profiler's hook: at -i 1 each of its allocations
 * must be recorded.  Bare, the handler uses 3192 bytes of the alternate
 * stack on an AVX-512 machine (-v), most of it the kernel's signal frame.
 * stdout:
 *   altstack: size SIZE, signals 2000 (SIGUSR1 1000, SIGALRM 1000), ...
 *   count alt_alloc 6003 2449224 0 0       2001 x (24 + 200 + 1000)
 *   count main_alloc 2000 4039424 0 0
 * -v also prints to stderr the bytes of the alternate stack ever written
 * (painted before, scanned at the end), for a person sizing SIZE.
 * Exits 0; 2 on a usage or setup error; 77 when the kernel refuses an
 * alternate stack of SIZE bytes (smaller than its signal frame).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "safe_common.h"

#define ROUNDS 2000
#define PAINT  0x5au

static struct sc_count c_alt = {"alt_alloc"}, c_main = {"main_alloc"};
static unsigned char *alt_lo, *alt_hi;
static volatile sig_atomic_t n_usr1, n_alrm, n_onstack;

NOINLINE void alt_alloc(void)
{
	static const size_t sz[3] = {24, 200, 1000};
	void *p[3];
	for (int k = 0; k < 3; k++) {
		p[k] = malloc(sz[k]);
		sc_touch(p[k], sz[k]);
		sc_alloc(&c_alt, p[k], sz[k]);
	}
	for (int k = 2; k >= 0; k--) {
		if (p[k]) {
			free(p[k]);
			sc_free(&c_alt, sz[k]);
		}
	}
}

static void on_signal(int sig)
{
	unsigned char here;
	if (&here >= alt_lo && &here < alt_hi)
		n_onstack++;
	if (sig == SIGUSR1)
		n_usr1++;
	else
		n_alrm++;
	alt_alloc();
}

static void *ring[16];
static size_t ring_n[16];

NOINLINE void main_alloc(int i)
{
	int slot = i % 16;
	if (ring[slot]) {
		free(ring[slot]);
		sc_free(&c_main, ring_n[slot]);
	}
	size_t n = 16 + 64 * (size_t)(i % 64);
	ring[slot] = malloc(n);
	sc_touch(ring[slot], n);
	sc_alloc(&c_main, ring[slot], n);
	ring_n[slot] = ring[slot] ? n : 0;
}

int main(int argc, char **argv)
{
	char *end = NULL;
	long size = argc >= 2 ? strtol(argv[1], &end, 10) : 0;
	if (argc < 2 || argc > 3 || *end || size < 2048 || size > (1 << 20) ||
	    (argc == 3 && strcmp(argv[2], "-v") != 0)) {
		fprintf(stderr, "usage: cap_altstack SIZE [-v]   (SIZE "
		                "2048..1048576)\n");
		return 2;
	}
	long page = sysconf(_SC_PAGESIZE);
	size_t span =
	        ((size_t)size + (size_t)page - 1) / (size_t)page * (size_t)page;
	unsigned char *base =
	        mmap(NULL, span + (size_t)page, PROT_READ | PROT_WRITE,
	             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED ||
	    mprotect(base, (size_t)page, PROT_NONE) != 0) {
		perror("cap_altstack: mmap");
		return 2;
	}
	alt_hi = base + (size_t)page + span;
	alt_lo = alt_hi - size;
	memset(alt_lo, PAINT, (size_t)size);
	stack_t ss = {.ss_sp = alt_lo, .ss_size = (size_t)size, .ss_flags = 0};
	if (sigaltstack(&ss, NULL) != 0) {
		/* ENOMEM: smaller than this machine's signal frame */
		perror("cap_altstack: sigaltstack");
		return errno == ENOMEM ? 77 : 2;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0 ||
	    sigaction(SIGALRM, &sa, NULL) != 0) {
		perror("cap_altstack: sigaction");
		return 2;
	}

	/* Once outside a handler first: the program's calls to malloc, memset
	 * and free are bound (lazy PLT binding saves the whole register state
	 * on the stack, 2.5+ KiB with AVX-512, too much for a 4 KiB stack). */
	alt_alloc();
	for (int i = 0; i < ROUNDS; i++) {
		main_alloc(i);
		raise(i % 2 ? SIGALRM : SIGUSR1);
	}
	for (int k = 0; k < 16; k++) {
		if (ring[k]) {
			free(ring[k]);
			sc_free(&c_main, ring_n[k]);
			ring[k] = NULL;
		}
	}

	printf("altstack: size %ld, signals %d (SIGUSR1 %d, SIGALRM %d), on "
	       "the alternate stack %d\n",
	       size, n_usr1 + n_alrm, (int)n_usr1, (int)n_alrm, (int)n_onstack);
	sc_print(&c_alt);
	sc_print(&c_main);
	if (argc == 3) {
		unsigned char *p = alt_lo;
		while (p < alt_hi && *p == PAINT)
			p++;
		fprintf(stderr,
		        "cap_altstack: %ld of %ld bytes of the alternate stack "
		        "written\n",
		        (long)(alt_hi - p), size);
	}
	return 0;
}
