/*
 * cap_stackuse: how much of the program's stack one malloc + free uses
 * (test_capture.sh).
 *
 * A thread runs on a 256 KiB stack of our own (pthread_attr_setstack on
 * an mmap'ed buffer).  At a fixed depth (thread_main -> su_depth1 ->
 * su_depth2 -> su_measure -> su_call), for each size, su_measure paints
 * everything below its own frame (each 8-byte word gets a value derived
 * from its address), then su_call reads its stack pointer, calls
 * malloc(SIZE), writes the block's first byte and frees it; su_measure
 * then finds the lowest word that changed.  The bytes from su_call's stack
 * pointer down to it are what malloc and free (and a profiler's hook in
 * them) used of the program's stack, return address included.  Each size
 * is measured 3 times and the largest is printed.  A warm-up round at
 * the same depth comes first, so one-time work (lazy binding, glibc's
 * arena for the thread, a profiler's per-thread setup) is not measured.
 * stdout:
 *   stackuse: thread stack 262144 (own buffer), sizes 1048576 65536 100
 *   stack used by malloc(1048576)+free: N bytes
 *   stack used by malloc(65536)+free: N bytes
 *   stack used by malloc(100)+free: N bytes
 *   count su_call 12 4456848 0 0     4 x (1 MiB + 64 KiB + 100)
 * The "stack used" numbers differ with and without a profiler; the rest
 * does not.  test_capture.sh requires, under `heapprof record -i 1`, each
 * number to be at most 1024 above the bare run's.
 * Exits 0; 2 on a setup error.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "safe_common.h"

#define STACK  (256 * 1024)
#define REPEAT 3

static struct sc_count c_call = {"su_call"};
static const size_t sizes[] = {1 << 20, 64 << 10, 100};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static unsigned char *stack_lo;
static uintptr_t call_sp;
static long used[NSIZES];

static inline uint64_t pattern(uintptr_t a)
{
	return (uint64_t)a * 0x9e3779b97f4a7c15ull ^ 0x5a5aa5a5c3c33c3cull;
}

static inline uintptr_t stack_pointer(void)
{
	uintptr_t sp;
#if defined(__x86_64__)
	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
	__asm__ volatile("mov %0, sp" : "=r"(sp));
#else
	sp = (uintptr_t)__builtin_frame_address(0);
#endif
	return sp;
}

NOINLINE void su_call(size_t n)
{
	call_sp = stack_pointer();
	void *p = malloc(n);
	if (p)
		*(volatile unsigned char *)p = 1;
	sc_alloc(&c_call, p, n);
	free(p);
	if (p)
		sc_free(&c_call, n);
}

/* Paints [stack_lo, below our frame), calls su_call(n), returns the
 * bytes below su_call's stack pointer that changed. */
NOINLINE long su_measure(size_t n, int measure)
{
	if (!measure) {
		su_call(n);
		return 0;
	}
	/* Painting calls nothing, so nothing below our stack pointer is in
	 * use; su_call's frame will be above its own stack pointer, which is
	 * what the result is measured from. */
	uintptr_t top = (stack_pointer() - 16) & ~(uintptr_t)7;
	for (uintptr_t a = (uintptr_t)stack_lo; a < top; a += 8)
		*(volatile uint64_t *)a = pattern(a);
	su_call(n);
	uintptr_t a = (uintptr_t)stack_lo;
	while (a < top && *(volatile uint64_t *)a == pattern(a))
		a += 8;
	if (a >= top || a >= call_sp)
		return 0;
	return (long)(call_sp - a);
}

NOINLINE void su_depth2(int measure)
{
	for (size_t k = 0; k < NSIZES; k++) {
		long u = su_measure(sizes[k], measure);
		if (u > used[k])
			used[k] = u;
	}
}

NOINLINE void su_depth1(int measure)
{
	su_depth2(measure);
}

static void *thread_main(void *arg)
{
	su_depth1(0); /* warm-up, not measured */
	for (int r = 0; r < REPEAT; r++)
		su_depth1(1);
	return arg;
}

int main(void)
{
	/* Bind the program's calls to malloc and free first (lazy binding
	 * would be measured as the allocator's stack otherwise). */
	void *w = malloc(16);
	sc_touch(w, 16);
	free(w);

	stack_lo = mmap(NULL, STACK, PROT_READ | PROT_WRITE,
	                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (stack_lo == MAP_FAILED) {
		perror("cap_stackuse: mmap");
		return 2;
	}
	pthread_attr_t a;
	pthread_t t;
	pthread_attr_init(&a);
	if (pthread_attr_setstack(&a, stack_lo, STACK) != 0 ||
	    pthread_create(&t, &a, thread_main, NULL) != 0) {
		fprintf(stderr, "cap_stackuse: cannot start the thread\n");
		return 2;
	}
	pthread_join(t, NULL);
	printf("stackuse: thread stack %d (own buffer), sizes", STACK);
	for (size_t k = 0; k < NSIZES; k++)
		printf(" %zu", sizes[k]);
	printf("\n");
	for (size_t k = 0; k < NSIZES; k++)
		printf("stack used by malloc(%zu)+free: %ld bytes\n", sizes[k],
		       used[k]);
	sc_print(&c_call);
	return 0;
}
