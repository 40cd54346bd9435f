/*
 * Clocks and paths every part reads the same way (one copy each: issue
 * 32).  Header-only: no state.
 */
#ifndef HEAPPROF_UTIL_CLOCK_H
#define HEAPPROF_UTIL_CLOCK_H

#include <stdint.h>
#include <string.h>
#include <time.h>

/* CLOCK_MONOTONIC in whole milliseconds: deadlines, ages. */
static inline uint64_t hp_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* CLOCK_MONOTONIC in milliseconds with their fraction: durations said in
 * messages ("attached in 4.3 ms"). */
static inline double hp_mono_msf(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The last component of a path ("" for NULL; the path itself when it
 * ends in '/'). */
static inline const char *hp_base_name(const char *path)
{
	if (!path)
		return "";
	const char *b = strrchr(path, '/');
	return b && b[1] ? b + 1 : path;
}

#endif
