/* Growing an array by doubling. */
#ifndef HEAPPROF_UTIL_GROW_H
#define HEAPPROF_UTIL_GROW_H

#include <stdlib.h>

/*
 * Room for element n of an array of sz-byte elements with *cap slots:
 * arr itself while n < *cap, else arr reallocated to twice the slots (256
 * at first) and *cap updated.  NULL when out of memory; arr is then still
 * valid and still the caller's to free.
 */
static inline void *hp_grow(void *arr, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return arr;
	size_t ncap = *cap ? *cap * 2 : 256;
	void *a = realloc(arr, ncap * sz);
	if (a)
		*cap = ncap;
	return a;
}

#endif
