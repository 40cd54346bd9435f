/*
 * api_sample sample N S
 * api_sample alloc N S
 *
 * One custom heap, "samp.heap".
 *
 * sample: sample_report calls AHeapProfile_reportSample N times for blocks
 *         of S bytes (ids 0..N-1, kept): the caller sampled them itself, so
 *         the profile must hold exactly N allocations and N * S bytes,
 *         whatever the session's interval.
 * alloc:  many_alloc calls AHeapProfile_reportAllocation N times for blocks
 *         of S bytes, each freed (reportFree) right after it is reported,
 *         so the live table stays small: the profiler samples them, and
 *         the estimate of N allocations and N * S bytes must be within
 *         statistical bounds (test_heaps.sh).
 *
 * Prints "recorded K" (the reports that returned true) and exits 0.
 */
#include <heapprof/heap_profile.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static uint32_t heap;

NOINLINE unsigned long sample_report(unsigned long n, uint64_t size)
{
	unsigned long k = 0;
	for (unsigned long i = 0; i < n; i++)
		k += AHeapProfile_reportSample(heap, i, size);
	return k;
}

NOINLINE unsigned long many_alloc(unsigned long n, uint64_t size)
{
	unsigned long k = 0;
	for (unsigned long i = 0; i < n; i++) {
		k += AHeapProfile_reportAllocation(heap, i, size);
		AHeapProfile_reportFree(heap, i);
	}
	return k;
}

int main(int argc, char **argv)
{
	if (argc != 4 ||
	    (strcmp(argv[1], "sample") && strcmp(argv[1], "alloc"))) {
		fprintf(stderr, "usage: api_sample sample|alloc N S\n");
		return 2;
	}
	unsigned long n = strtoul(argv[2], NULL, 10);
	uint64_t size = strtoull(argv[3], NULL, 10);
	heap = AHeapProfile_registerHeap(AHeapInfo_create("samp.heap"));
	if (!heap) {
		fprintf(stderr, "api_sample: registerHeap failed\n");
		return 1;
	}
	unsigned long k = !strcmp(argv[1], "sample") ? sample_report(n, size)
	                                             : many_alloc(n, size);
	printf("recorded %lu\n", k);
	return 0;
}
