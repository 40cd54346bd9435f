/*
 * api_fork: a custom heap across fork(), for --follow-fork.
 *
 * The parent registers "fork.heap" and reports in parent_report, forks;
 * the child reports in child_report, frees some of its own blocks and some
 * of the parent's (its copy of them), exits 3; the parent waits, checks
 * the status, reports in parent_after and exits 0 (1 if the child's status
 * was wrong).  Exact with -i 1, heap fork.heap:
 *
 *   parent_report  (parent)  10 blocks of 100 B, kept:   10, 1000; 10, 1000
 *   parent_after   (parent)  5 blocks of 300 B, kept:    5, 1500; 5, 1500
 *   child_report   (child)   20 blocks of 200 B, 5 freed: 20, 4000; 15, 3000
 *
 * The child's frees of parent blocks (ids 1..3) were not recorded in the
 * child, so they change nothing.  stdout is the same profiled or not.
 */
#include <heapprof/heap_profile.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static uint32_t heap;

NOINLINE void parent_report(void)
{
	for (int i = 1; i <= 10; i++)
		AHeapProfile_reportAllocation(heap, (uint64_t)i, 100);
}

NOINLINE void child_report(void)
{
	for (int i = 1001; i <= 1020; i++)
		AHeapProfile_reportAllocation(heap, (uint64_t)i, 200);
	for (int i = 1001; i <= 1005; i++)
		AHeapProfile_reportFree(heap, (uint64_t)i);
	for (int i = 1; i <= 3; i++)
		AHeapProfile_reportFree(heap, (uint64_t)i);
}

NOINLINE void parent_after(void)
{
	for (int i = 2001; i <= 2005; i++)
		AHeapProfile_reportAllocation(heap, (uint64_t)i, 300);
}

int main(void)
{
	heap = AHeapProfile_registerHeap(AHeapInfo_create("fork.heap"));
	parent_report();
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		child_report();
		exit(3);
	}
	int st = 0;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 3) {
		printf("api_fork: child status wrong\n");
		return 1;
	}
	parent_after();
	printf("api_fork: child exited 3\n");
	return 0;
}
