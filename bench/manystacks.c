/*
 * manystacks: make exactly N distinct allocating call stacks, for the
 * costs that grow with the number of stacks (bench/scale.sh).
 *
 *     manystacks N [ROUNDS]
 *
 * Stack i (0 <= i < N) is a recursion of DEPTH calls, DEPTH the number of
 * bits of N - 1: walk() calls step0 or step1 as bit 0 of i says, and the
 * step function at level l calls step0 or step1 as bit l says; the last
 * one allocates.  Each function has its own call site for each choice, so
 * two paths have different return addresses from their first different
 * bit down: N distinct stacks of DEPTH + 5 frames (with main, walk and
 * libc's start), about 3N callsites in a profile (a binary tree, and a
 * leaf per stack).
 *
 * Every fourth block stays live: the program exits without freeing them,
 * so the final dump has a live heap of N/4 blocks; the others are freed
 * at once.  ROUNDS (default 1) repeats the walk over all N stacks: N *
 * ROUNDS allocations from the same N stacks (many stacks and one round
 * for the dump; few stacks and many rounds for a cost per sample).
 *
 * Prints "stacks=N allocations=A live=L checksum=C end_ns=T", T the
 * CLOCK_REALTIME nanoseconds at the end of main, so a script can tell how
 * long a profiler took after the program was done.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* no_icf: step0 and step1 are the same code, and identical code folding
 * would merge them (and the paths). */
#define NOINLINE __attribute__((noinline, noclone, no_icf))
/* Work after a call keeps the compiler from turning it into a tail call,
 * which would drop the caller's frame and merge two paths. */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static unsigned depth;
static void **live;
static size_t nlive;
static uint64_t checksum;

/* Inlined into both step functions: the block is allocated by the last
 * step of the path, so a stack is DEPTH + 5 frames and two paths differ
 * in every frame from their first different bit down. */
static inline __attribute__((always_inline)) void leaf(uint64_t i)
{
	/* 16..271 bytes, fixed per stack. */
	size_t n = 16 + (size_t)(i * 2654435761u % 256);
	unsigned char *p = malloc(n);
	if (!p) {
		fprintf(stderr, "manystacks: out of memory\n");
		exit(1);
	}
	p[0] = (unsigned char)i;
	p[n - 1] = (unsigned char)(i >> 8);
	checksum += p[0] + p[n - 1];
	if (i % 4 == 0 && live[i / 4] == NULL)
		live[i / 4] = p, nlive++;
	else
		free(p);
}

static NOINLINE void step0(uint64_t i, unsigned l);
static NOINLINE void step1(uint64_t i, unsigned l);

static NOINLINE void step0(uint64_t i, unsigned l)
{
	if (l == depth)
		leaf(i);
	else if ((i >> l) & 1)
		step1(i, l + 1);
	else
		step0(i, l + 1);
	KEEP_FRAME();
}

static NOINLINE void step1(uint64_t i, unsigned l)
{
	if (l == depth)
		leaf(i);
	else if ((i >> l) & 1)
		step1(i, l + 1);
	else
		step0(i, l + 1);
	KEEP_FRAME();
}

/* Level 0 is chosen here, so walk's two call sites split the paths too. */
static NOINLINE void walk(uint64_t i)
{
	if (i & 1)
		step1(i, 1);
	else
		step0(i, 1);
	KEEP_FRAME();
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: manystacks N [ROUNDS]\n");
		return 2;
	}
	char *end;
	unsigned long long n = strtoull(argv[1], &end, 10);
	if (*end || n < 2 || n > (1ull << 30)) {
		fprintf(stderr, "manystacks: N must be 2 .. 2^30\n");
		return 2;
	}
	unsigned long rounds = 1;
	if (argc == 3) {
		rounds = strtoul(argv[2], &end, 10);
		if (*end || rounds < 1) {
			fprintf(stderr, "manystacks: ROUNDS must be >= 1\n");
			return 2;
		}
	}
	/* Bits needed for indices 0 .. n-1; level 0 is walk's choice. */
	unsigned bits = 0;
	while ((1ull << bits) < n)
		bits++;
	depth = bits;
	live = calloc(n / 4 + 1, sizeof(*live));
	if (!live) {
		fprintf(stderr, "manystacks: out of memory\n");
		return 1;
	}
	for (unsigned long r = 0; r < rounds; r++)
		for (uint64_t i = 0; i < n; i++)
			walk(i);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	printf("stacks=%llu allocations=%llu live=%zu checksum=%" PRIu64
	       " end_ns=%lld\n",
	       n, n * (unsigned long long)rounds, nlive, checksum,
	       (long long)ts.tv_sec * 1000000000 + ts.tv_nsec);
	return 0;
}
