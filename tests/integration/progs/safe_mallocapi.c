/*
 * safe_mallocapi: the corners of the malloc API (test_safety.sh), each
 * result printed as the program sees it (never an address), so a bare and
 * a profiled run must print the same lines.
 *   sm_usable    malloc_usable_size of 10 blocks >= their size, and of NULL
 *   sm_realloc   realloc(NULL, n) allocates; realloc(p, 0) frees (glibc
 *                returns NULL); realloc to grow and shrink
 *   sm_calloc    calloc overflow (n * m > SIZE_MAX): NULL and ENOMEM;
 *                calloc(0, n) and calloc(n, 0); the block is zeroed
 *   sm_aligned   aligned_alloc, posix_memalign, memalign, valloc, pvalloc
 *                with good alignments (the pointer is aligned) and bad ones
 *                (3, not a power of two: posix_memalign gives EINVAL)
 *   sm_zero      malloc(0): a unique pointer, freed; free(NULL)
 * Exits 26.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <unistd.h>

#include "safe_common.h"

/* The huge sizes are the point here. */
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

static struct sc_count c_usable = {"sm_usable"}, c_realloc = {"sm_realloc"},
                       c_calloc = {"sm_calloc"};

NOINLINE void sm_usable(void)
{
	int ok = 0;
	void *p[10];
	for (int i = 0; i < 10; i++) {
		size_t n = 1 + 333 * (size_t)i;
		p[i] = malloc(n);
		sc_alloc(&c_usable, p[i], n);
		size_t u = malloc_usable_size(p[i]);
		ok += u >= n;
		/* The whole usable size is the program's to write. */
		if (p[i])
			memset(p[i], 1, u);
	}
	printf("usable >= size: %d of 10; usable(NULL) = %zu\n", ok,
	       malloc_usable_size(NULL));
	for (int i = 0; i < 10; i += 3) {
		free(p[i]);
		sc_free(&c_usable, 1 + 333 * (size_t)i);
	}
}

NOINLINE void sm_realloc(void)
{
	char *p = realloc(NULL, 100);
	sc_alloc(&c_realloc, p, 100);
	sc_touch(p, 100);
	char *q = realloc(p, 5000);
	printf("realloc grow: %s, kept bytes %d\n", q ? "ok" : "NULL",
	       q && q[99] == 5);
	if (q) {
		sc_free(&c_realloc, 100);
		sc_alloc(&c_realloc, q, 5000);
		p = q;
	}
	q = realloc(p, 10);
	if (q) {
		sc_free(&c_realloc, 5000);
		sc_alloc(&c_realloc, q, 10);
		p = q;
	}
	errno = 0;
	q = realloc(p, 0);
	printf("realloc(p, 0): %s, errno %d\n", q ? "non-NULL" : "NULL", errno);
	sc_free(&c_realloc, 10);
	if (q) {
		sc_alloc(&c_realloc, q, 0);
		free(q);
		sc_free(&c_realloc, 0);
	}
	/* A failing realloc leaves the block alone. */
	p = realloc(NULL, 64);
	sc_alloc(&c_realloc, p, 64);
	errno = 0;
	q = realloc(p, SIZE_MAX - 4096);
	printf("realloc huge: %s, errno ENOMEM %d\n", q ? "non-NULL" : "NULL",
	       errno == ENOMEM);
	if (!q) {
		free(p);
		sc_free(&c_realloc, 64);
	}
}

NOINLINE void sm_calloc(void)
{
	errno = 0;
	void *p = calloc(SIZE_MAX / 2 + 2, 2);
	printf("calloc overflow: %s, errno ENOMEM %d\n",
	       p ? "non-NULL" : "NULL", errno == ENOMEM);
	errno = 0;
	p = calloc((size_t)1 << 33, (size_t)1 << 33);
	printf("calloc overflow 2: %s, errno ENOMEM %d\n",
	       p ? "non-NULL" : "NULL", errno == ENOMEM);
	p = calloc(0, 16);
	printf("calloc(0, 16): %s\n", p ? "non-NULL" : "NULL");
	sc_alloc(&c_calloc, p, 0);
	free(p);
	if (p)
		sc_free(&c_calloc, 0);
	p = calloc(16, 0);
	sc_alloc(&c_calloc, p, 0);
	free(p);
	if (p)
		sc_free(&c_calloc, 0);
	unsigned char *z = calloc(100, 50);
	sc_alloc(&c_calloc, z, 5000);
	int zero = 1;
	for (int i = 0; z && i < 5000; i++)
		zero &= z[i] == 0;
	printf("calloc zeroed: %d\n", zero);
}

static struct sc_count c_al = {"sm_aligned"};

NOINLINE void sm_aligned(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *p = aligned_alloc(256, 1024);
	sc_alloc(&c_al, p, 1024);
	printf("aligned_alloc(256): aligned %d\n", ((uintptr_t)p & 255) == 0);
	void *q = NULL;
	int rc = posix_memalign(&q, 4096, 100);
	if (rc == 0)
		sc_alloc(&c_al, q, 100);
	printf("posix_memalign(4096): rc %d aligned %d\n", rc,
	       ((uintptr_t)q & 4095) == 0);
	void *bad = (void *)1;
	rc = posix_memalign(&bad, 3, 100);
	printf("posix_memalign(3): rc EINVAL %d, unchanged %d\n", rc == EINVAL,
	       bad == (void *)1);
	rc = posix_memalign(&bad, 2, 100); /* < sizeof(void *) */
	printf("posix_memalign(2): rc EINVAL %d\n", rc == EINVAL);
	void *m = memalign(64, 300);
	sc_alloc(&c_al, m, 300);
	printf("memalign(64): aligned %d\n", ((uintptr_t)m & 63) == 0);
	void *v = valloc(1000);
	sc_alloc(&c_al, v, 1000);
	printf("valloc: page aligned %d\n", ((uintptr_t)v % pg) == 0);
	void *pv = pvalloc(1000);
	printf("pvalloc: page aligned %d, usable >= page %d\n",
	       ((uintptr_t)pv % pg) == 0, malloc_usable_size(pv) >= (size_t)pg);
	/* Counted at its requested size, as the profile records it. */
	sc_alloc(&c_al, pv, 1000);
	free(pv);
	if (pv)
		sc_free(&c_al, 1000);
	errno = 0;
	void *huge = aligned_alloc(64, SIZE_MAX - 100);
	printf("aligned_alloc huge: %s, errno ENOMEM %d\n",
	       huge ? "non-NULL" : "NULL", errno == ENOMEM);
	free(p);
	sc_free(&c_al, 1024);
	free(m);
	sc_free(&c_al, 300);
}

static struct sc_count c_zero = {"sm_zero"};

NOINLINE void sm_zero(void)
{
	void *a = malloc(0), *b = malloc(0);
	printf("malloc(0): %s %s, distinct %d\n", a ? "non-NULL" : "NULL",
	       b ? "non-NULL" : "NULL", a != b);
	sc_alloc(&c_zero, a, 0);
	sc_alloc(&c_zero, b, 0);
	free(a);
	if (a)
		sc_free(&c_zero, 0);
	free(NULL);
	printf("free(NULL): ok\n");
	/* b stays live: one live object of 0 bytes. */
}

int main(void)
{
	sm_usable();
	sm_realloc();
	sm_calloc();
	sm_aligned();
	sm_zero();
	sc_print(&c_usable);
	sc_print(&c_realloc);
	sc_print(&c_calloc);
	sc_print(&c_al);
	sc_print(&c_zero);
	return 26;
}
