/*
 * check_gate: a deterministic program for `heapprof check`
 * (tests/integration/test_check.sh holds the rules and their arithmetic;
 * keep both in sync).  Every allocating function is the direct caller of
 * malloc, called from main:
 *
 *   grow_fn   65536 x malloc(1024), each freed at once: alloc_space
 *             67108864, alloc_objects 65536, space 0.  With
 *             CHECK_GATE_REGRESS=1 in the environment it makes 10% more:
 *             72090 blocks (65536 * 1.1 rounded up), 73820160 bytes.
 *   keep_fn   4096 x malloc(2000), kept to the end: space 8192000,
 *             objects 4096 (live at exit, so leaks too).
 *   leak_fn   10 x malloc(100), never freed: leaks 10, 1000 bytes.
 *
 * Exits 0, 1 if an allocation failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;
static int failures;
static void *kept[4096 + 10];

static void touch(void *p, size_t n)
{
	if (!p) {
		failures++;
		return;
	}
	memset(p, 0x5a, n);
	sink += ((unsigned char *)p)[n - 1];
}

NOINLINE void grow_fn(int n)
{
	for (int i = 0; i < n; i++) {
		void *p = malloc(1024);
		touch(p, 1024);
		free(p);
	}
}

NOINLINE void keep_fn(void)
{
	for (int i = 0; i < 4096; i++) {
		kept[i] = malloc(2000);
		touch(kept[i], 2000);
	}
}

NOINLINE void leak_fn(void)
{
	for (int i = 0; i < 10; i++) {
		kept[4096 + i] = malloc(100);
		touch(kept[4096 + i], 100);
	}
}

int main(void)
{
	const char *r = getenv("CHECK_GATE_REGRESS");
	grow_fn(r && *r == '1' ? 72090 : 65536);
	keep_fn();
	leak_fn();
	printf("check_gate %lu\n", sink);
	return failures ? 1 : 0;
}
