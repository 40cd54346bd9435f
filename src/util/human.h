/*
 * Human-readable numbers for reports: byte sizes in binary units with the
 * exact count beside them ("1.50 MiB (1572864 B)").
 */
#ifndef HEAPPROF_UTIL_HUMAN_H
#define HEAPPROF_UTIL_HUMAN_H

#include <stddef.h>
#include <stdint.h>

/* Longest text hp_fmt_bytes() can produce, with the NUL. */
#define HP_FMT_BYTES_MAX 48

/*
 * Format a (possibly negative) byte count as "<x.xx> <unit> (<n> B)", or
 * "<n> B" below 1 KiB.  Returns buf.
 */
char *hp_fmt_bytes(char *buf, size_t len, int64_t bytes);

/* Format a byte count in the short form only ("1.50 MiB", "512 B"). */
char *hp_fmt_bytes_short(char *buf, size_t len, int64_t bytes);

#endif
