/*
 * hostile_vlimit: asks for 100 blocks of 4 MiB (each touched) and says
 * how many it got.  Run under an address-space limit (ulimit -v 900000),
 * bare it gets all 100; a profiler's shared region counts against the
 * same limit and must leave the program what it had (issue 18, case 9).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	static char *blocks[100];
	int got = 0;
	for (int i = 0; i < 100; i++) {
		blocks[i] = malloc(4u << 20);
		if (blocks[i]) {
			memset(blocks[i], 1, 4096);
			got++;
		}
	}
	printf("got %d of 100 blocks of 4 MiB\n", got);
	for (int i = 0; i < 100; i++)
		free(blocks[i]);
	return 0;
}
