/*
 * api_snapshot: named snapshots from inside the program.
 *
 *   phase 1  alloc_phase1: 10 x malloc(1000), kept
 *            heapprof_take_named_snapshot("before")
 *   phase 2  alloc_phase2: 5 x malloc(3000), kept; free_phase1 frees 4 of
 *            phase 1's blocks
 *            heapprof_take_named_snapshot("after")
 *
 * so "after" - "before" is exactly +15000 bytes (5 blocks) in
 * alloc_phase2 and -4000 bytes (4 blocks) in alloc_phase1.  Nothing else
 * allocates between the two calls (the API never does).  Then one call with
 * an empty name.  Prints "before=RC after=RC invalid=RC" (the API's return
 * values: 0, or a negative errno such as -107 = -ENOTCONN when nobody
 * profiles the program) and exits 0.
 *
 * api_snapshot hold READYFILE GOFILE: blocks of a custom heap for
 * `heapprof snapshot --contents-dir` (whose addresses are ids): registers
 * heap "snap.heap", reports 3 allocations (ids 1..3, 100 bytes each) and
 * one malloc(64) (hold_alloc), writes READYFILE with "pid PID", then
 * waits until GOFILE exists (at most 60 s: exit 3).
 */
#include <heapprof/heap_profile.h>
#include <heapprof/heapprof.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *p1[10], *p2[5];

NOINLINE void alloc_phase1(void)
{
	for (int i = 0; i < 10; i++)
		p1[i] = malloc(1000);
}

NOINLINE void alloc_phase2(void)
{
	for (int i = 0; i < 5; i++)
		p2[i] = malloc(3000);
}

NOINLINE void free_phase1(void)
{
	for (int i = 0; i < 4; i++)
		free(p1[i]);
}

NOINLINE void *hold_alloc(void)
{
	return malloc(64);
}

static int hold(const char *ready, const char *go)
{
	uint32_t heap =
	        AHeapProfile_registerHeap(AHeapInfo_create("snap.heap"));
	for (uint64_t id = 1; id <= 3; id++)
		AHeapProfile_reportAllocation(heap, id, 100);
	void *p = hold_alloc();
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", ready);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "pid %d\n", (int)getpid()) < 0 || fclose(f) ||
	    rename(tmp, ready)) {
		perror(ready);
		return 1;
	}
	struct timespec ms10 = {0, 10 * 1000 * 1000};
	for (int i = 0; i < 6000; i++) {
		if (access(go, F_OK) == 0) {
			free(p);
			return 0;
		}
		nanosleep(&ms10, NULL);
	}
	fprintf(stderr, "api_snapshot: %s did not appear within 60 s\n", go);
	return 3;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold(argv[2], argv[3]);
	alloc_phase1();
	int before = heapprof_take_named_snapshot("before");
	alloc_phase2();
	free_phase1();
	int after = heapprof_take_named_snapshot("after");
	int invalid = heapprof_take_named_snapshot("");
	printf("before=%d after=%d invalid=%d\n", before, after, invalid);
	return 0;
}
