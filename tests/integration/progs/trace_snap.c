/*
 * trace_snap: named snapshots taken from inside the program (the API of
 * include/heapprof/heapprof.h, found with dlsym so that the program also
 * runs without the library), before and after a phase:
 *   snap_phase1  10 x malloc(1000), live; their addresses are printed, one
 *                decimal number a line
 *   snapshot "before-phase"
 *   snap_phase2  20 x malloc(500), live; then 4 of phase 1's blocks freed
 *   snapshot "after-phase"
 * Then prints "snap: RC1 RC2" (the calls' results; 0 = stored) and exits 0,
 * or 1 when the API is not there.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *keep1[10], *keep2[20];

NOINLINE void snap_phase1(void)
{
	for (int i = 0; i < 10; i++) {
		keep1[i] = malloc(1000);
		memset(keep1[i], 1, 1000);
	}
}

NOINLINE void snap_phase2(void)
{
	for (int i = 0; i < 20; i++) {
		keep2[i] = malloc(500);
		memset(keep2[i], 2, 500);
	}
	for (int i = 0; i < 4; i++) {
		free(keep1[i]);
		keep1[i] = NULL;
	}
}

int main(void)
{
	int (*take)(const char *) = (int (*)(const char *))dlsym(
	        RTLD_DEFAULT, "heapprof_take_named_snapshot");
	if (!take) {
		fprintf(stderr,
		        "trace_snap: no heapprof_take_named_snapshot\n");
		return 1;
	}
	snap_phase1();
	for (int i = 0; i < 10; i++)
		printf("%lu\n", (unsigned long)keep1[i]);
	fflush(stdout);
	int rc1 = take("before-phase");
	snap_phase2();
	int rc2 = take("after-phase");
	printf("snap: %d %d\n", rc1, rc2);
	return 0;
}
