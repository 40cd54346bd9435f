/*
 * model_main.c: the program of tests/integration/test_model.sh, which
 * checks that every view of a profile gives the same numbers per function
 * and per node.  Four static functions named helper allocate: two in this
 * program's files (model_f1.c, model_f2.c), one in each library
 * (model_lib.c built as libmodel_a.so and libmodel_b.so).  A custom heap
 * ("model.pool") gets blocks from pool_take; a named snapshot "start"
 * comes before any of it; a forked child allocates in f1_child.
 *
 * Usage: model_main [[START] READY GO]  (exits 0; 1 if a child failed)
 * With START, first creates START.pid (holding its pid) and waits for the
 * file START.go before it allocates (for a session to attach).  With READY
 * and GO: once everything is allocated, creates the file READY and waits
 * for the file GO before it exits, allocating nothing more, so that a
 * reader of the live process sees what the profile's last dump holds.
 * Each wait is 120 s at most.
 */
#define _GNU_SOURCE
#include <heapprof/heap_profile.h>
#include <heapprof/heapprof.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

void f1_run(void);
void f1_child(void);
void f2_run(void);
void model_lib_a(void);
void model_lib_b(void);

static char pool[64 * 1000];

/* 64 blocks of 1000 B of the custom heap; 24 given back. */
NOINLINE static void pool_take(uint32_t heap)
{
	for (int i = 0; i < 64; i++)
		AHeapProfile_reportAllocation(heap, (uintptr_t)&pool[i * 1000],
		                              1000);
	for (int i = 40; i < 64; i++)
		AHeapProfile_reportFree(heap, (uintptr_t)&pool[i * 1000]);
}

/* Create ready (holding our pid), then wait for go to exist (120 s at
 * most).  No allocation: the reader must see the heap as it is. */
static void hold(const char *ready, const char *go)
{
	char tmp[4096], pid[32];
	int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", ready);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, pid, (size_t)n) != n)
			n = -1;
		close(fd);
		if (n > 0)
			rename(tmp, ready);
	}
	struct timespec ts = {0, 10 * 1000 * 1000};
	for (int i = 0; i < 12000 && access(go, F_OK) != 0; i++)
		nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	if (argc == 4) {
		char ready[4096], go[4096];
		snprintf(ready, sizeof(ready), "%s.pid", argv[1]);
		snprintf(go, sizeof(go), "%s.go", argv[1]);
		hold(ready, go);
		argv++;
		argc--;
	}
	uint32_t heap =
	        AHeapProfile_registerHeap(AHeapInfo_create("model.pool"));

	heapprof_take_named_snapshot("start");
	f1_run();
	f2_run();
	model_lib_a();
	model_lib_b();
	pool_take(heap);
	pid_t pid = fork();
	if (pid == 0) {
		f1_child();
		_exit(0);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
		return 1;
	if (argc == 3)
		hold(argv[1], argv[2]);
	return 0;
}
