/*
 * heaps_dlsym: a program that uses the custom allocator API without
 * linking libheapprof: it looks the functions up with dlsym, so it runs
 * alone (the API is absent: it says so) and reports its heap when the
 * library is preloaded (`heapprof record -- heaps_dlsym`).
 *
 * Heap "dl.heap": dl_alloc reports 300 blocks of 40 bytes (ids 1..300)
 * and frees the first 100: 300 allocations, 12000 B, 200 live, 8000 B.
 * Prints "api present" or "api absent", then "done".
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline, noclone))

typedef void *(*create_fn)(const char *);
typedef uint32_t (*register_fn)(void *);
typedef bool (*report_fn)(uint32_t, uint64_t, uint64_t);
typedef void (*free_fn)(uint32_t, uint64_t);

static report_fn report_alloc;
static free_fn report_free;
static uint32_t heap;

NOINLINE static void dl_alloc(void)
{
	for (uint64_t id = 1; id <= 300; id++)
		if (report_alloc)
			report_alloc(heap, id, 40);
	for (uint64_t id = 1; id <= 100; id++)
		if (report_free)
			report_free(heap, id);
}

int main(void)
{
	create_fn create = (create_fn)dlsym(RTLD_DEFAULT, "AHeapInfo_create");
	register_fn reg =
	        (register_fn)dlsym(RTLD_DEFAULT, "AHeapProfile_registerHeap");
	report_alloc =
	        (report_fn)dlsym(RTLD_DEFAULT, "AHeapProfile_reportAllocation");
	report_free = (free_fn)dlsym(RTLD_DEFAULT, "AHeapProfile_reportFree");
	if (create && reg && report_alloc && report_free) {
		heap = reg(create("dl.heap"));
		printf("api present\n");
	} else {
		report_alloc = NULL;
		report_free = NULL;
		printf("api absent\n");
	}
	dl_alloc();
	printf("done\n");
	return 0;
}
