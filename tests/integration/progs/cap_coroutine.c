/*
 * cap_coroutine malloc|mmap [-v]: a makecontext/swapcontext coroutine on
 * an 8 KiB stack that allocates (test_capture.sh).
 *
 *   malloc  the stack is the top 8192 bytes of one malloc'ed block whose
 *           first 1024 bytes, right below the stack, are a canary checked
 *           after every switch back: an overflow of the stack is reported
 *           ("canary ... damaged", exit 1) instead of corrupting the heap
 *   mmap    the stack is two mmap'ed pages with a PROT_NONE guard page
 *           below: an overflow dies of SIGSEGV
 *
 * The coroutine, ROUNDS (2000) times: co_a -> co_b -> co_c (256-byte
 * frames) -> co_leaf: malloc(32 + i % 200), malloc(1000), calloc(4, 100)
 * and every 10th round malloc(256 KiB) (sampled at any interval), touched,
 * all freed but the first, which goes into a ring of 8 slots (the slot's
 * previous block freed); then swapcontext back to main.  Main, between
 * switches: main_alloc, malloc(48 + i % 64) into its own ring.  The
 * coroutine's stack holds nothing but the coroutine (its frames, glibc's
 * malloc and a profiler's hook when it samples): bare it uses about
 * 1.3 KiB (-v).
 * stdout:
 *   coroutine: STACK stack 8192, switches 4001, rounds 2000
 *   count co_leaf ...
 *   count main_alloc ...
 * -v also prints to stderr how much of the coroutine stack was written.
 * Exits 0; 1 on a damaged canary; 2 on a usage or setup error.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "safe_common.h"

#define ROUNDS  2000
#define STACK   8192
#define CANARY  1024
#define PAINT   0xc3u
#define CO_RING 8

static struct sc_count c_leaf = {"co_leaf"}, c_main = {"main_alloc"};
static ucontext_t main_ctx, co_ctx;
static unsigned char *stack_lo;
static int switches;

static void *co_ring[CO_RING];
static size_t co_ring_n[CO_RING];

NOINLINE void co_leaf(int i)
{
	size_t n1 = 32 + (size_t)(i % 200), n3 = 400;
	size_t nb = 256 * 1024;
	void *p1 = malloc(n1);
	sc_touch(p1, n1);
	sc_alloc(&c_leaf, p1, n1);
	void *p2 = malloc(1000);
	sc_touch(p2, 1000);
	sc_alloc(&c_leaf, p2, 1000);
	void *p3 = calloc(4, 100);
	sc_touch(p3, n3);
	sc_alloc(&c_leaf, p3, n3);
	if (i % 10 == 0) {
		void *pb = malloc(nb);
		sc_touch(pb, nb);
		sc_alloc(&c_leaf, pb, nb);
		free(pb);
		sc_free(&c_leaf, nb);
	}
	free(p3);
	sc_free(&c_leaf, n3);
	free(p2);
	sc_free(&c_leaf, 1000);
	int slot = i % CO_RING;
	if (co_ring[slot]) {
		free(co_ring[slot]);
		sc_free(&c_leaf, co_ring_n[slot]);
	}
	co_ring[slot] = p1;
	co_ring_n[slot] = p1 ? n1 : 0;
}

#define LEVEL(name, next)                                                      \
	NOINLINE void name(int i)                                              \
	{                                                                      \
		volatile unsigned char pad[256];                               \
		pad[0] = (unsigned char)i;                                     \
		pad[255] = pad[0];                                             \
		next(i);                                                       \
		sc_sink += pad[255];                                           \
	}
LEVEL(co_c, co_leaf)
LEVEL(co_b, co_c)
LEVEL(co_a, co_b)

static void co_main(void)
{
	for (int i = 0; i < ROUNDS; i++) {
		co_a(i);
		swapcontext(&co_ctx, &main_ctx);
	}
	for (int k = 0; k < CO_RING; k++) {
		if (co_ring[k]) {
			free(co_ring[k]);
			sc_free(&c_leaf, co_ring_n[k]);
			co_ring[k] = NULL;
		}
	}
	/* returning resumes main_ctx (uc_link) */
}

static void *main_ring[16];
static size_t main_ring_n[16];

NOINLINE void main_alloc(int i)
{
	int slot = i % 16;
	if (main_ring[slot]) {
		free(main_ring[slot]);
		sc_free(&c_main, main_ring_n[slot]);
	}
	size_t n = 48 + (size_t)(i % 64);
	main_ring[slot] = malloc(n);
	sc_touch(main_ring[slot], n);
	sc_alloc(&c_main, main_ring[slot], n);
	main_ring_n[slot] = main_ring[slot] ? n : 0;
}

static int canary_ok(const unsigned char *c)
{
	for (int k = 0; k < CANARY; k++)
		if (c[k] != PAINT)
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	int use_mmap = argc >= 2 && strcmp(argv[1], "mmap") == 0;
	int verbose = argc >= 3 && strcmp(argv[2], "-v") == 0;
	if (argc < 2 || argc > 3 ||
	    (!use_mmap && strcmp(argv[1], "malloc") != 0) ||
	    (argc == 3 && !verbose)) {
		fprintf(stderr, "usage: cap_coroutine malloc|mmap [-v]\n");
		return 2;
	}
	/* Bind the program's allocator calls before the coroutine runs: a
	 * lazily bound first call saves the whole register state on the
	 * stack (2.5+ KiB with AVX-512). */
	void *w = calloc(1, 16), *m = malloc(16);
	sc_touch(w, 16);
	sc_touch(m, 16);
	free(w);
	free(m);

	unsigned char *block = NULL, *canary = NULL;
	if (use_mmap) {
		long page = sysconf(_SC_PAGESIZE);
		block = mmap(NULL, (size_t)page + STACK, PROT_READ | PROT_WRITE,
		             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (block == MAP_FAILED ||
		    mprotect(block, (size_t)page, PROT_NONE) != 0) {
			perror("cap_coroutine: mmap");
			return 2;
		}
		stack_lo = block + page;
	} else {
		block = malloc(CANARY + STACK);
		if (!block) {
			perror("cap_coroutine: malloc");
			return 2;
		}
		canary = block;
		memset(canary, PAINT, CANARY);
		stack_lo = block + CANARY;
	}
	memset(stack_lo, PAINT, STACK);

	if (getcontext(&co_ctx) != 0) {
		perror("cap_coroutine: getcontext");
		return 2;
	}
	co_ctx.uc_stack.ss_sp = stack_lo;
	co_ctx.uc_stack.ss_size = STACK;
	co_ctx.uc_link = &main_ctx;
	makecontext(&co_ctx, co_main, 0);

	int damaged = -1;
	for (int i = 0; i <= ROUNDS; i++) {
		switches++;
		swapcontext(&main_ctx, &co_ctx);
		if (canary && damaged < 0 && !canary_ok(canary))
			damaged = i;
		if (damaged >= 0)
			break;
		if (i < ROUNDS)
			main_alloc(i);
		switches += i < ROUNDS; /* the coroutine's switch back */
	}
	for (int k = 0; k < 16; k++) {
		if (main_ring[k]) {
			free(main_ring[k]);
			sc_free(&c_main, main_ring_n[k]);
		}
	}
	if (verbose) {
		unsigned char *p = stack_lo;
		while (p < stack_lo + STACK && *p == PAINT)
			p++;
		fprintf(stderr,
		        "cap_coroutine: %ld of %d bytes of the coroutine stack "
		        "written\n",
		        (long)(stack_lo + STACK - p), STACK);
	}
	if (damaged >= 0) {
		printf("coroutine: canary below the %s stack damaged after "
		       "switch %d\n",
		       argv[1], switches);
		return 1;
	}
	printf("coroutine: %s stack %d, switches %d, rounds %d\n", argv[1],
	       STACK, switches, ROUNDS);
	sc_print(&c_leaf);
	sc_print(&c_main);
	if (!use_mmap)
		free(block);
	return 0;
}
