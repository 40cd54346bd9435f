/*
 * mallocbench: a deterministic, multi-threaded, malloc-heavy
 * microbenchmark for measuring profiler overhead.
 *
 *     mallocbench THREADS OPS
 *
 * Each thread keeps a working set of live blocks and does OPS operations.
 * An operation picks a random live block and replaces it: mostly free +
 * malloc, sometimes free + calloc, sometimes realloc in place of the old
 * block, and now and then a burst of short-lived temporaries freed in LIFO
 * order (the way string building or parsing churns the heap). Sizes come
 * from a fixed-seed distribution: mostly 16-512 B, some 513 B-4 KiB, a few
 * 4-64 KiB. Every allocation is reached through a chain of two to six
 * non-inlined frames chosen at random among four "modules", so there are
 * thousands of distinct allocating stacks, as in a real program.
 *
 * The random streams depend only on the thread index, so the work and the
 * printed checksum are the same on every run and under every profiler;
 * the checksum reads back bytes written into every block, which keeps the
 * compiler from removing the work and catches a profiler that corrupts
 * memory or changes what malloc returns.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
/* Work after a call keeps the compiler from turning it into a tail call,
 * which would drop the caller's frame from the stack. */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

enum {
	WORKING_SET = 4096, /* live blocks per thread */
	BURST_LEN = 16,     /* temporaries in one burst */
	MAX_DEPTH = 6,      /* deepest module chain below mb_op */
};

enum alloc_kind { KIND_MALLOC, KIND_CALLOC, KIND_REALLOC };

struct mb_block {
	unsigned char *p;
	size_t n;
};

struct mb_worker {
	pthread_t thread;
	int index;
	long ops;
	uint64_t rng;
	uint64_t sum;
	struct mb_block live[WORKING_SET];
};

static pthread_barrier_t start_barrier;

/* splitmix64: small, fast and good enough for picking sizes and slots. */
static inline uint64_t mb_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* 90% 16-512 B (skewed small), 8% 513 B-4 KiB, 2% 4-64 KiB. */
static size_t mb_size(uint64_t *rng)
{
	uint64_t x = mb_rand(rng);
	unsigned bucket = (unsigned)(x % 100);
	x >>= 8;
	if (bucket < 55)
		return 16 + x % 113; /* 16..128 */
	if (bucket < 90)
		return 129 + x % 384; /* 129..512 */
	if (bucket < 98)
		return 513 + x % 3583;     /* 513..4095 */
	return 4096 + x % (60 * 1024 + 1); /* 4 KiB..64 KiB */
}

/* Write a tag at both ends and the middle, fill a prefix and touch every page,
 * like a program that initializes what it allocates. */
static void mb_fill(unsigned char *p, size_t n, uint64_t tag)
{
	size_t prefix = n < 64 ? n : 64;
	memset(p, (int)(tag & 0xff), prefix);
	for (size_t off = 4096; off < n; off += 4096)
		p[off] = (unsigned char)(tag >> 8);
	p[n / 2] = (unsigned char)(tag >> 24);
	p[n - 1] = (unsigned char)(tag >> 16);
}

/* Read back what mb_fill wrote, for the checksum. */
static uint64_t mb_digest(const unsigned char *p, size_t n)
{
	uint64_t d = p[0] * 31u + p[n - 1] * 7u + p[n / 2] + n;
	for (size_t off = 4096; off < n; off += 4096)
		d = d * 3 + p[off];
	return d;
}

/* The leaves: the only places that call the allocator. */
static NOINLINE unsigned char *leaf_malloc(size_t n)
{
	unsigned char *p = malloc(n);
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *leaf_calloc(size_t n)
{
	/* Element size 16 when it divides n, to exercise the multiply. */
	unsigned char *p = (n % 16 == 0) ? calloc(n / 16, 16) : calloc(n, 1);
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *leaf_realloc(unsigned char *old, size_t n)
{
	unsigned char *p = realloc(old, n);
	KEEP_FRAME();
	return p;
}

struct mb_req {
	enum alloc_kind kind;
	unsigned char *old; /* for KIND_REALLOC */
	size_t n;
	uint64_t path; /* random bits choosing the chain of modules */
	int depth;     /* frames still to descend */
};

/* One counter per module, so that the four bodies differ: identical
 * functions would be folded into one by the compiler (-fipa-icf at -O2),
 * and every stack would name the same function. */
enum { MOD_PARSE, MOD_BUILD, MOD_CACHE, MOD_INDEX };
static volatile unsigned long mb_visits[4];

static unsigned char *mod_parse(struct mb_req *r);
static unsigned char *mod_build(struct mb_req *r);
static unsigned char *mod_cache(struct mb_req *r);
static unsigned char *mod_index(struct mb_req *r);

static unsigned char *mb_leaf(struct mb_req *r)
{
	switch (r->kind) {
	case KIND_CALLOC:
		return leaf_calloc(r->n);
	case KIND_REALLOC:
		return leaf_realloc(r->old, r->n);
	default:
		return leaf_malloc(r->n);
	}
}

/* Go one module deeper (chosen by two bits of path) or call the leaf. */
static unsigned char *mb_descend(struct mb_req *r)
{
	if (r->depth <= 0)
		return mb_leaf(r);
	r->depth--;
	unsigned which = (unsigned)(r->path & 3);
	r->path >>= 2;
	switch (which) {
	case 0:
		return mod_parse(r);
	case 1:
		return mod_build(r);
	case 2:
		return mod_cache(r);
	default:
		return mod_index(r);
	}
}

static NOINLINE unsigned char *mod_parse(struct mb_req *r)
{
	unsigned char *p = mb_descend(r);
	mb_visits[MOD_PARSE]++;
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *mod_build(struct mb_req *r)
{
	unsigned char *p = mb_descend(r);
	mb_visits[MOD_BUILD]++;
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *mod_cache(struct mb_req *r)
{
	unsigned char *p = mb_descend(r);
	mb_visits[MOD_CACHE]++;
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *mod_index(struct mb_req *r)
{
	unsigned char *p = mb_descend(r);
	mb_visits[MOD_INDEX]++;
	KEEP_FRAME();
	return p;
}

static unsigned char *mb_alloc(struct mb_worker *w, enum alloc_kind kind,
                               unsigned char *old, size_t n)
{
	uint64_t x = mb_rand(&w->rng);
	struct mb_req r = {
	        .kind = kind,
	        .old = old,
	        .n = n,
	        .path = x >> 8,
	        .depth = 2 + (int)(x % (MAX_DEPTH - 1)),
	};
	unsigned char *p = mb_descend(&r);
	if (!p) {
		fprintf(stderr, "mallocbench: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

/* Short-lived temporaries, allocated then freed newest first. */
static NOINLINE void mb_burst(struct mb_worker *w)
{
	unsigned char *tmp[BURST_LEN];
	size_t len[BURST_LEN];
	for (int i = 0; i < BURST_LEN; i++) {
		len[i] = 16 + mb_rand(&w->rng) % 240;
		tmp[i] = mb_alloc(w, KIND_MALLOC, NULL, len[i]);
		mb_fill(tmp[i], len[i], (uint64_t)i * 0x10101);
	}
	for (int i = BURST_LEN - 1; i >= 0; i--) {
		w->sum += mb_digest(tmp[i], len[i]);
		free(tmp[i]);
	}
}

static NOINLINE void mb_op(struct mb_worker *w, long op)
{
	uint64_t x = mb_rand(&w->rng);
	struct mb_block *b = &w->live[x % WORKING_SET];
	unsigned roll = (unsigned)((x >> 32) % 100);
	size_t n = mb_size(&w->rng);
	uint64_t tag = (uint64_t)op * 0x9e3779b1u + (uint64_t)w->index;

	w->sum += mb_digest(b->p, b->n);
	if (roll < 10) {
		/* realloc keeps the old prefix; the tag written below
		 * overwrites it, so the digest stays deterministic. */
		b->p = mb_alloc(w, KIND_REALLOC, b->p, n);
	} else if (roll < 20) {
		free(b->p);
		b->p = mb_alloc(w, KIND_CALLOC, NULL, n);
		/* calloc'd memory must read as zero. */
		w->sum += b->p[n / 2] + b->p[n - 1] * 5u;
	} else {
		free(b->p);
		b->p = mb_alloc(w, KIND_MALLOC, NULL, n);
	}
	b->n = n;
	mb_fill(b->p, n, tag);
	if (roll == 99)
		mb_burst(w);
}

static void *mb_worker_main(void *arg)
{
	struct mb_worker *w = arg;
	for (int i = 0; i < WORKING_SET; i++) {
		size_t n = mb_size(&w->rng);
		w->live[i].p = mb_alloc(w, KIND_MALLOC, NULL, n);
		w->live[i].n = n;
		mb_fill(w->live[i].p, n, (uint64_t)i);
	}
	pthread_barrier_wait(&start_barrier);
	for (long op = 0; op < w->ops; op++)
		mb_op(w, op);
	for (int i = 0; i < WORKING_SET; i++) {
		w->sum += mb_digest(w->live[i].p, w->live[i].n);
		free(w->live[i].p);
	}
	return NULL;
}

static long mb_parse(const char *s, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max)
		return -1;
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mallocbench THREADS OPS\n");
		return 2;
	}
	long threads = mb_parse(argv[1], 1024);
	long ops = mb_parse(argv[2], 1L << 40);
	if (threads < 0 || ops < 0) {
		fprintf(stderr, "mallocbench: THREADS must be 1..1024 and OPS "
		                "a positive integer\n");
		return 2;
	}

	struct mb_worker *w = calloc((size_t)threads, sizeof(*w));
	if (!w) {
		perror("mallocbench: calloc");
		return 1;
	}
	pthread_barrier_init(&start_barrier, NULL, (unsigned)threads);
	for (long i = 0; i < threads; i++) {
		w[i].index = (int)i;
		w[i].ops = ops;
		w[i].rng = 0x5eed0000ULL + (uint64_t)i * 0x100000001ULL;
		int err = pthread_create(&w[i].thread, NULL, mb_worker_main,
		                         &w[i]);
		if (err) {
			fprintf(stderr, "mallocbench: pthread_create: %s\n",
			        strerror(err));
			return 1;
		}
	}
	uint64_t checksum = 0;
	for (long i = 0; i < threads; i++) {
		pthread_join(w[i].thread, NULL);
		checksum = checksum * 0x100000001b3ULL + w[i].sum;
	}
	pthread_barrier_destroy(&start_barrier);
	free(w);
	printf("RESULT mallocbench threads=%ld ops=%ld checksum=%016" PRIx64
	       "\n",
	       threads, ops, checksum);
	return 0;
}
