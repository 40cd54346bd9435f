/*
 * String helpers every part uses the same way (one copy each).
 * Header-only: no state.
 */
#ifndef HEAPPROF_UTIL_STR_H
#define HEAPPROF_UTIL_STR_H

#include <stdlib.h>
#include <string.h>

/* A copy of x, or NULL for NULL; *oom set when it cannot be made. */
static inline char *hp_strdup_opt(const char *x, int *oom)
{
	char *d = x ? strdup(x) : NULL;
	if (x && !d)
		*oom = 1;
	return d;
}

#endif
