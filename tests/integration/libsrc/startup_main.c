/*
 * startup_main: links libstartup_lib (its constructor allocates before
 * heapprof attaches), then allocates 10 x malloc(50) in main_alloc, all
 * kept.  Prints "live N" (the library's blocks still live); exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

long sl_live(void);

static void *mine[10];

__attribute__((noinline)) void main_alloc(void)
{
	for (int i = 0; i < 10; i++)
		mine[i] = malloc(50);
}

int main(void)
{
	main_alloc();
	printf("live %ld\n", sl_live());
	return 0;
}
