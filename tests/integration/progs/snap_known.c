/*
 * snap_known ADDRFILE GOFILE [ptracer]
 *
 * Allocates a known set of blocks and keeps them while `heapprof snapshot`
 * reads it (test_snapshot.sh):
 *
 *   alloc_small   main thread: 10 x malloc(16 * (i + 1)), i = 0..9; the
 *                 ones with i % 3 == 0 are freed (6 stay)
 *   alloc_big     main thread: malloc(5000), malloc(70000),
 *                 malloc(200000) (above the mmap threshold); the 70000
 *                 one is freed (2 stay)
 *   thread_alloc  two threads t = 0, 1: 5 x malloc(100 + 10 t + i),
 *                 i = 0..4; i == 2 freed (4 stay each); the blocks outlive
 *                 the threads
 *
 * Byte j of the k-th block listed is (31 k + j) & 0xff.  Then it writes
 * ADDRFILE (atomically: a temporary file renamed): "pid PID", then one
 * line per live block, "0xADDRESS SIZE TID", and waits until GOFILE
 * exists (at most 60 s: exit 3), and exits 0.  With "ptracer" it first
 * lets any process of the user read its memory (Yama's
 * PR_SET_PTRACER_ANY), for --contents-dir under ptrace_scope 1.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
#define MAXB     64

struct blk {
	void *p;
	size_t size;
	long tid;
};

static struct blk live[MAXB];
static int nlive;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static long tid(void)
{
	return syscall(SYS_gettid);
}

static void keep(void *p, size_t size)
{
	if (!p) {
		fprintf(stderr, "snap_known: allocation failed\n");
		exit(1);
	}
	pthread_mutex_lock(&lock);
	live[nlive++] = (struct blk){p, size, tid()};
	pthread_mutex_unlock(&lock);
}

NOINLINE void alloc_small(void)
{
	for (int i = 0; i < 10; i++) {
		void *p = malloc(16 * (size_t)(i + 1));
		if (i % 3 == 0)
			free(p);
		else
			keep(p, 16 * (size_t)(i + 1));
	}
}

NOINLINE void alloc_big(void)
{
	void *a = malloc(5000), *b = malloc(70000), *c = malloc(200000);
	keep(a, 5000);
	free(b);
	keep(c, 200000);
}

NOINLINE void thread_alloc(int t)
{
	for (int i = 0; i < 5; i++) {
		size_t n = 100 + 10 * (size_t)t + (size_t)i;
		void *p = malloc(n);
		if (i == 2)
			free(p);
		else
			keep(p, n);
	}
}

static void *thread_main(void *arg)
{
	thread_alloc((int)(intptr_t)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr,
		        "usage: snap_known ADDRFILE GOFILE [ptracer]\n");
		return 2;
	}
	if (argc > 3 && !strcmp(argv[3], "ptracer"))
		prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	alloc_small();
	alloc_big();
	for (int t = 0; t < 2; t++) {
		pthread_t th;
		if (pthread_create(&th, NULL, thread_main,
		                   (void *)(intptr_t)t) ||
		    pthread_join(th, NULL)) {
			fprintf(stderr, "snap_known: thread failed\n");
			return 1;
		}
	}
	for (int k = 0; k < nlive; k++)
		for (size_t j = 0; j < live[k].size; j++)
			((unsigned char *)live[k].p)[j] =
			        (unsigned char)((31 * k + (int)j) & 0xff);

	/* open/dprintf: no stdio buffer allocated while the blocks are
	 * listed (it would be a block of libc's, not ours, anyway). */
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(tmp);
		return 1;
	}
	dprintf(fd, "pid %d\n", (int)getpid());
	for (int k = 0; k < nlive; k++)
		dprintf(fd, "%p %zu %ld\n", live[k].p, live[k].size,
		        live[k].tid);
	if (close(fd) || rename(tmp, argv[1])) {
		perror(argv[1]);
		return 1;
	}
	struct timespec ms10 = {0, 10 * 1000 * 1000};
	for (int i = 0; i < 6000; i++) {
		if (access(argv[2], F_OK) == 0)
			return 0;
		nanosleep(&ms10, NULL);
	}
	fprintf(stderr, "snap_known: %s did not appear within 60 s\n", argv[2]);
	return 3;
}
