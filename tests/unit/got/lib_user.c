/*
 * test_got's user of libgot_own.so's allocator: loaded RTLD_DEEPBIND, its
 * malloc and free slots hold libgot_own.so's functions, not the global
 * definition.
 */
#include <stdlib.h>

void *volatile user_sink;

void user_sequence(void)
{
	user_sink = malloc(40);
	free(user_sink);
}
