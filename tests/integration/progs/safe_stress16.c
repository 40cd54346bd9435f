/*
 * safe_stress16 [SECONDS]: 16 threads allocating and freeing for SECONDS
 * (default 60) of wall-clock time, checked in the loop (test_stress.sh).
 *
 * Each thread draws from its own xorshift generator and, per step, either
 * allocates at one of five call sites into its ring of 256 slots (freeing
 * the block the slot held), or hands a block to a shared queue that any
 * thread frees (cross-thread frees: the block is freed by a thread that
 * did not allocate it), or frees one block from the queue.
 *   st_small    malloc(1 .. 256)
 *   st_medium   calloc(1 .. 16, 64 .. 575)
 *   st_large    malloc(16 KiB .. 144 KiB)
 *   st_realloc  malloc(8 .. 135) then realloc to twice that (a free of
 *               the first block and an allocation of the second, both here)
 *   st_aligned  posix_memalign(64 << (0 .. 3), 32 .. 1055)
 * Counters: allocations and bytes per call site (per thread, summed at the
 * end); what is still live at the end is found by walking the rings and
 * the queue.  Prints, after the threads are joined:
 *     count SITE ALLOC_OBJECTS ALLOC_SPACE OBJECTS SPACE
 *     total ALLOCS BYTES FREES THREADS SECONDS
 * Exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "safe_common.h"

#define NTHREADS 16
#define RING     256
#define QCAP     4096

enum { SMALL, MEDIUM, LARGE, REALLOC, ALIGNED, NSITES };
static const char *site_names[NSITES] = {"st_small", "st_medium", "st_large",
                                         "st_realloc", "st_aligned"};

struct block {
	void *p;
	size_t n;
	int site;
};

struct thread_state {
	uint64_t rng;
	long allocs[NSITES], bytes[NSITES];
	long frees;
	struct block ring[RING];
	char pad[64];
};

static struct thread_state ts[NTHREADS];
static struct timespec t_end;

/* The shared queue of blocks to free elsewhere. */
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static struct block queue[QCAP];
static unsigned qhead, qlen;

static uint64_t next(struct thread_state *t)
{
	uint64_t x = t->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return t->rng = x;
}

static void count(struct thread_state *t, int site, size_t n)
{
	t->allocs[site]++;
	t->bytes[site] += (long)n;
}

NOINLINE struct block st_small(struct thread_state *t)
{
	size_t n = 1 + next(t) % 256;
	void *p = malloc(n);
	sc_touch(p, n);
	if (p)
		count(t, SMALL, n);
	return (struct block){p, n, SMALL};
}

NOINLINE struct block st_medium(struct thread_state *t)
{
	size_t k = 1 + next(t) % 16, m = 64 + next(t) % 512;
	void *p = calloc(k, m);
	if (p)
		count(t, MEDIUM, k * m);
	return (struct block){p, k * m, MEDIUM};
}

NOINLINE struct block st_large(struct thread_state *t)
{
	size_t n = 16384 + next(t) % 131072;
	void *p = malloc(n);
	sc_touch(p, 64);
	if (p)
		count(t, LARGE, n);
	return (struct block){p, n, LARGE};
}

NOINLINE struct block st_realloc(struct thread_state *t)
{
	size_t n = 8 + next(t) % 128;
	void *p = malloc(n);
	if (!p)
		return (struct block){NULL, 0, REALLOC};
	count(t, REALLOC, n);
	sc_touch(p, n);
	void *q = realloc(p, 2 * n);
	if (!q) {
		free(p);
		t->frees++;
		return (struct block){NULL, 0, REALLOC};
	}
	t->frees++; /* the first block */
	count(t, REALLOC, 2 * n);
	return (struct block){q, 2 * n, REALLOC};
}

NOINLINE struct block st_aligned(struct thread_state *t)
{
	size_t a = (size_t)64 << (next(t) % 4), n = 32 + next(t) % 1024;
	void *p = NULL;
	if (posix_memalign(&p, a, n) != 0)
		return (struct block){NULL, 0, ALIGNED};
	sc_touch(p, n);
	count(t, ALIGNED, n);
	return (struct block){p, n, ALIGNED};
}

static int expired(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t_end.tv_sec ||
	       (now.tv_sec == t_end.tv_sec && now.tv_nsec >= t_end.tv_nsec);
}

static void *worker(void *arg)
{
	struct thread_state *t = arg;
	for (unsigned long step = 0;; step++) {
		if ((step & 255) == 0 && expired())
			break;
		uint64_t r = next(t) % 100;
		if (r < 80) {
			struct block b;
			switch (next(t) % 16) {
			case 0:
				b = st_large(t);
				break;
			case 1:
			case 2:
				b = st_realloc(t);
				break;
			case 3:
			case 4:
				b = st_aligned(t);
				break;
			case 5:
			case 6:
			case 7:
			case 8:
				b = st_medium(t);
				break;
			default:
				b = st_small(t);
				break;
			}
			struct block *slot = &t->ring[next(t) % RING];
			if (slot->p) {
				free(slot->p);
				t->frees++;
			}
			*slot = b;
		} else if (r < 90) {
			/* Hand a block to another thread. */
			struct block *slot = &t->ring[next(t) % RING];
			if (!slot->p)
				continue;
			pthread_mutex_lock(&qlock);
			if (qlen < QCAP) {
				queue[(qhead + qlen) % QCAP] = *slot;
				qlen++;
				slot->p = NULL;
			}
			pthread_mutex_unlock(&qlock);
		} else {
			/* Free a block some thread handed over. */
			struct block b = {NULL, 0, 0};
			pthread_mutex_lock(&qlock);
			if (qlen) {
				b = queue[qhead];
				qhead = (qhead + 1) % QCAP;
				qlen--;
			}
			pthread_mutex_unlock(&qlock);
			if (b.p) {
				free(b.p);
				t->frees++;
			}
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long secs = argc > 1 ? atol(argv[1]) : 60;
	if (secs < 0 || secs > 86400) {
		fprintf(stderr, "safe_stress16: bad duration\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t_end);
	t_end.tv_sec += secs;
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		ts[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		if (pthread_create(&th[i], NULL, worker, &ts[i]) != 0) {
			fprintf(stderr,
			        "safe_stress16: pthread_create failed\n");
			return 1;
		}
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	long ao[NSITES] = {0}, as[NSITES] = {0}, o[NSITES] = {0},
	     s[NSITES] = {0};
	long frees = 0;
	for (int i = 0; i < NTHREADS; i++) {
		for (int k = 0; k < NSITES; k++) {
			ao[k] += ts[i].allocs[k];
			as[k] += ts[i].bytes[k];
		}
		frees += ts[i].frees;
		for (int j = 0; j < RING; j++)
			if (ts[i].ring[j].p) {
				o[ts[i].ring[j].site]++;
				s[ts[i].ring[j].site] += (long)ts[i].ring[j].n;
			}
	}
	for (unsigned j = 0; j < qlen; j++) {
		struct block *b = &queue[(qhead + j) % QCAP];
		o[b->site]++;
		s[b->site] += (long)b->n;
	}
	long tao = 0, tas = 0;
	for (int k = 0; k < NSITES; k++) {
		printf("count %s %ld %ld %ld %ld\n", site_names[k], ao[k],
		       as[k], o[k], s[k]);
		tao += ao[k];
		tas += as[k];
	}
	printf("total %ld %ld %ld %d %ld\n", tao, tas, frees, NTHREADS, secs);
	return 0;
}
