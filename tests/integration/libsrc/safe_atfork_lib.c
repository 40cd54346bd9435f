/*
 * safe_atfork_lib: linked (DT_NEEDED) into safe_atfork_main by
 * test_safety.sh.  Its constructor runs before the preloaded profiler's,
 * so its pthread_atfork child handler runs first in a fork child, and it
 * allocates: the child's first allocation happens before the profiler's
 * own handler has told it that it is a child.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

volatile unsigned long safe_atfork_sink;

static void in_child(void)
{
	char *p = malloc(77);
	if (p) {
		memset(p, 1, 77);
		safe_atfork_sink += (unsigned char)p[76];
	}
	free(p);
}

__attribute__((constructor)) static void safe_atfork_init(void)
{
	pthread_atfork(NULL, NULL, in_child);
}
