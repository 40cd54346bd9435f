/*
 * The flame graph page's template files, embedded at build time
 * (assets.c).  Each blob runs from NAME to NAME_end (exclusive) and is
 * followed by a NUL byte.
 */
#ifndef HEAPPROF_FLAMEGRAPH_ASSETS_H
#define HEAPPROF_FLAMEGRAPH_ASSETS_H

#include <stddef.h>
#include <stdint.h>

extern const char hp_fg_html[], hp_fg_html_end[];
extern const char hp_fg_css[], hp_fg_css_end[];
extern const char hp_fg_js[], hp_fg_js_end[];

/* Length of the blob from start to end. */
static inline size_t hp_fg_len(const char *start, const char *end)
{
	return (size_t)((uintptr_t)end - (uintptr_t)start);
}

#endif
