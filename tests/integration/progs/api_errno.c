/*
 * api_errno: errno across the first stack unwind of a profiled process.
 *
 * The client's rule (src/client/client.h) is that nothing it does on the
 * allocation path changes the program's errno, and the API's header says
 * the same of its functions.  The first sample of a process is special:
 * the first unwind fills the rule cache, the first new stack scans the
 * modules, a thread's first sample seeds its sampler.  This program makes
 * its first
 * report and its first malloc with errno set to a marker and prints what
 * errno was afterwards:
 *
 *   reportAllocation: recorded|not recorded, errno N
 *   malloc: errno N
 *   malloc again: errno N
 *
 * N must be 4321 each time, profiled or not, whichever heap is selected.
 */
#include <heapprof/heap_profile.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	uint32_t h = AHeapProfile_registerHeap(AHeapInfo_create("errno.heap"));
	errno = 4321;
	int r = AHeapProfile_reportAllocation(h, 1, 100);
	int e1 = errno;
	errno = 4321;
	void *volatile p = malloc(100);
	int e2 = errno;
	errno = 4321;
	void *volatile q = malloc(200);
	int e3 = errno;
	printf("reportAllocation: %s, errno %d\n",
	       r ? "recorded" : "not recorded", e1);
	printf("malloc: errno %d\n", e2);
	printf("malloc again: errno %d\n", e3);
	free(p);
	free(q);
	return 0;
}
