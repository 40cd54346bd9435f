/*
 * cap_smallthread [-v]: allocation on a thread with a 16 KiB stack, the
 * smallest glibc gives (PTHREAD_STACK_MIN), nearly full (test_capture.sh).
 *
 * glibc takes the guard page (4 KiB), the thread descriptor and the static
 * TLS of every loaded library (a preloaded profiler's too) out of the
 * 16 KiB: a thread function starts with about 7.8 KiB below it, bare, on
 * Debian 12 x86-64.  This one goes 4 levels down, st_a -> st_b -> st_c ->
 * st_d, each with a 1152-byte frame it touches, and st_leaf then
 * allocates: 40 rounds of malloc(1 MiB) (sampled at any interval),
 * malloc(100 + 10 r), calloc(1, 3000), realloc of the first to 2 MiB,
 * each touched, all freed.  Bare, 2887 bytes are left below st_leaf's
 * frame, of which glibc's malloc uses about 420: about 2.4 KiB of the
 * stack are never written (-v).  A profiler may take only so much of it
 * (its stack in the hook, its static TLS: libheapprof with libunwind adds
 * 1088 bytes of TLS); more runs into the guard page and the process dies
 * of SIGSEGV.  main calls the allocator once first, so that lazy binding
 * is done before the thread runs.  stdout:
 *   smallthread: stack 16384, rounds 40, created 0, joined 0
 *   count st_leaf 160 ... 0 0
 * -v also prints to stderr the stack left below st_leaf's frame and how
 * much of the stack was never written (painted before, scanned after).
 * Exits 0; 2 when the thread cannot be created.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>

#include "safe_common.h"

#define ROUNDS 40
#define FRAME  1152

static struct sc_count c_leaf = {"st_leaf"};
static int verbose;
static uintptr_t stack_floor; /* lowest usable address (above the guard) */
static uintptr_t leaf_sp;     /* st_leaf's frame */
static uintptr_t never_used;  /* -v: bytes above the guard never written */

NOINLINE void st_leaf(int r)
{
	unsigned char here;
	leaf_sp = (uintptr_t)&here;
	size_t big = 1 << 20, small = 100 + 10 * (size_t)r, two = 2u << 20;
	void *a = malloc(big);
	sc_touch(a, big);
	sc_alloc(&c_leaf, a, big);
	void *b = malloc(small);
	sc_touch(b, small);
	sc_alloc(&c_leaf, b, small);
	void *c = calloc(1, 3000);
	sc_touch(c, 3000);
	sc_alloc(&c_leaf, c, 3000);
	void *a2 = realloc(a, two);
	if (a2) {
		sc_free(&c_leaf, big);
		sc_alloc(&c_leaf, a2, two);
		sc_touch(a2, two);
		a = a2;
		big = two;
	}
	free(c);
	sc_free(&c_leaf, 3000);
	free(b);
	sc_free(&c_leaf, small);
	free(a);
	sc_free(&c_leaf, big);
}

#define LEVEL(name, next)                                                      \
	NOINLINE void name(int r)                                              \
	{                                                                      \
		volatile unsigned char pad[FRAME];                             \
		for (int k = 0; k < FRAME; k += 64)                            \
			pad[k] = (unsigned char)r;                             \
		next(r);                                                       \
		sc_sink += pad[FRAME - 64];                                    \
	}
LEVEL(st_d, st_leaf)
LEVEL(st_c, st_d)
LEVEL(st_b, st_c)
LEVEL(st_a, st_b)

static void *thread_main(void *arg)
{
	pthread_attr_t at;
	if (verbose && pthread_getattr_np(pthread_self(), &at) == 0) {
		void *addr;
		size_t size, guard;
		pthread_attr_getstack(&at, &addr, &size);
		pthread_attr_getguardsize(&at, &guard);
		stack_floor = (uintptr_t)addr + guard;
		pthread_attr_destroy(&at);
	}
	unsigned char here;
	if (stack_floor) /* -v: paint what is below us, to see what is used */
		memset((void *)stack_floor, 0xa5,
		       (uintptr_t)&here - 512 - stack_floor);
	for (int r = 0; r < ROUNDS; r++)
		st_a(r);
	if (stack_floor) {
		unsigned char *p = (unsigned char *)stack_floor;
		while (*p == 0xa5)
			p++;
		never_used = (uintptr_t)p - stack_floor;
	}
	return arg;
}

int main(int argc, char **argv)
{
	verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
	/* Bind the program's calls to the allocator first: the first call
	 * through a lazily bound PLT entry saves the whole register state on
	 * the stack (2.5+ KiB with AVX-512), which the thread cannot afford. */
	void *w = calloc(1, 16), *m = malloc(16);
	w = realloc(w, 32);
	sc_touch(w, 32);
	sc_touch(m, 16);
	free(w);
	free(m);
	pthread_attr_t a;
	pthread_attr_init(&a);
	int rs = pthread_attr_setstacksize(&a, 16384);
	pthread_t t;
	int rc = pthread_create(&t, &a, thread_main, NULL);
	int rj = rc == 0 ? pthread_join(t, NULL) : -1;
	if (verbose && stack_floor)
		fprintf(stderr,
		        "cap_smallthread: %ld bytes of stack below st_leaf's "
		        "frame, %ld never written\n",
		        (long)(leaf_sp - stack_floor), (long)never_used);
	printf("smallthread: stack 16384 (set: %d), rounds %d, created %d, "
	       "joined %d\n",
	       rs, ROUNDS, rc, rj);
	sc_print(&c_leaf);
	return rc == 0 ? 0 : 2;
}
