/*
 * safe_common.h: shared by the progs/safe_* programs of test_safety.sh.
 *
 * Each program knows what it allocates: every counted allocation is made
 * by a malloc-family call written directly in a named function (the leaf
 * frame of its stack), and is counted under that function's name.  At the
 * end the program prints one line per function on stdout,
 *     count FUNC ALLOC_OBJECTS ALLOC_SPACE OBJECTS SPACE
 * (alloc_* = every allocation, objects/space = what is still live), which
 * test_safety.sh compares with the profile at -i 1.  Output has no
 * addresses, pids or times, so a bare run and a profiled run print the
 * same bytes.
 */
#ifndef SAFE_COMMON_H
#define SAFE_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

struct sc_count {
	const char *name;
	long ao, as, o, s;
};

static volatile unsigned long sc_sink;

/* Touch a block so the allocation cannot be optimised away. */
static inline void sc_touch(void *p, size_t n)
{
	if (p && n) {
		memset(p, 5, n);
		sc_sink += ((unsigned char *)p)[n - 1];
	}
}

/* Count an allocation of N bytes (P non-NULL) / a free of N bytes. */
static inline void sc_alloc(struct sc_count *c, void *p, size_t n)
{
	if (!p)
		return;
	__atomic_fetch_add(&c->ao, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->as, (long)n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->o, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->s, (long)n, __ATOMIC_RELAXED);
}

static inline void sc_free(struct sc_count *c, size_t n)
{
	__atomic_fetch_sub(&c->o, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&c->s, (long)n, __ATOMIC_RELAXED);
}

static inline void sc_print(const struct sc_count *c)
{
	printf("count %s %ld %ld %ld %ld\n", c->name, c->ao, c->as, c->o, c->s);
}

#endif
