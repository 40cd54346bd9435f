/*
 * inject_payload: a shared object (built -shared, see the Makefile) that
 * the injector's test (tests/unit/test_inject.c) loads into
 * inject_target with the target's own dlopen.  Its constructor allocates
 * 1000 blocks, keeps them and sets inject_payload_count to 1000: the test
 * reads the counter to see that it ran.  inject_payload_bump(x) is the
 * function the test calls afterwards: it allocates and frees a block and
 * adds x to the counter, which it returns.  Prints nothing: the target's
 * output must stay the bare run's.
 */
#include <stdlib.h>
#include <string.h>

void *inject_payload_blocks[1000];
volatile long inject_payload_count;

__attribute__((constructor)) static void payload_init(void)
{
	for (int i = 0; i < 1000; i++) {
		inject_payload_blocks[i] = malloc(16 + (size_t)i);
		if (inject_payload_blocks[i])
			memset(inject_payload_blocks[i], 0x5a, 16);
	}
	inject_payload_count = 1000;
}

long inject_payload_bump(long x)
{
	void *p = malloc((size_t)x + 100);
	free(p);
	inject_payload_count += x;
	return inject_payload_count;
}
