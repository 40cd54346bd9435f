/*
 * trace_known THREADS N [DIR before|after]: a known sequence of
 * allocations and frees for the event trace tests (test_trace.sh).
 *
 * Each thread t = 0..THREADS-1 makes N allocations (N a multiple of 4) in
 * trace_alloc, block k of size(t, k) = 16 + 8 * (k % 61) + t bytes, in this
 * order:
 *   k = 0, 1, 2, 3: allocate k; after allocating k with k % 4 == 3, free
 *   block k - 1 (trace_free);
 * and when all N are allocated, frees the blocks with k % 4 == 0 in
 * increasing k.  So a thread's events are, in order:
 *   a0 a1 a2 a3 f2 a4 a5 a6 a7 f6 ... then f0 f4 f8 ...
 * N allocations and N / 2 frees per thread; the blocks with k % 4 of 1 or
 * 3 stay live at exit (N / 2 per thread).  Every event's stack has
 * trace_alloc as its leaf (a free carries its block's allocation stack).
 *
 * With DIR, the program creates DIR/ready and waits (at most 60 s) until
 * DIR/go exists: `before` the allocations (a session can attach first) or
 * `after` them (a test can look at the session while the program still
 * runs).  Prints "trace_known: done" and exits 0; 3 if go never came.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static int nper;
static volatile unsigned long sink;

NOINLINE void *trace_alloc(size_t size)
{
	void *p = malloc(size);
	if (p) {
		memset(p, 0x5a, size);
		sink += ((unsigned char *)p)[size - 1];
	}
	return p;
}

NOINLINE void trace_free(void *p)
{
	free(p);
}

static size_t size_of(int t, int k)
{
	return 16 + 8 * (size_t)(k % 61) + (size_t)t;
}

static void *thread_main(void *arg)
{
	int t = (int)(long)arg;
	void **blk = calloc((size_t)nper, sizeof(*blk));
	if (!blk)
		return NULL;
	for (int k = 0; k < nper; k++) {
		blk[k] = trace_alloc(size_of(t, k));
		if (k % 4 == 3) {
			trace_free(blk[k - 1]);
			blk[k - 1] = NULL;
		}
	}
	for (int k = 0; k < nper; k += 4) {
		trace_free(blk[k]);
		blk[k] = NULL;
	}
	/* The live ones stay live: leaks at exit, on purpose. */
	return blk;
}

static int touch(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* Waits until DIR/go exists, at most 60 s. */
static int wait_go(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/go", dir);
	for (int i = 0; i < 60000; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: trace_known THREADS N [DIR "
		                "before|after]\n");
		return 2;
	}
	int nthreads = atoi(argv[1]);
	nper = atoi(argv[2]);
	const char *dir = argc == 5 ? argv[3] : NULL;
	int before = dir && !strcmp(argv[4], "before");
	if (nthreads < 1 || nthreads > 64 || nper < 4 || nper % 4) {
		fprintf(stderr, "trace_known: bad THREADS or N\n");
		return 2;
	}
	if (dir && before && (touch(dir, "ready") || wait_go(dir)))
		return 3;
	pthread_t th[64];
	for (int t = 0; t < nthreads; t++)
		if (pthread_create(&th[t], NULL, thread_main,
		                   (void *)(long)t)) {
			fprintf(stderr, "trace_known: pthread_create failed\n");
			return 1;
		}
	for (int t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	if (dir && !before && (touch(dir, "ready") || wait_go(dir)))
		return 3;
	printf("trace_known: done\n");
	return 0;
}
