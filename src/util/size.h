/*
 * A size in bytes as a person writes it (4096, 4k, 64MiB): what the
 * command line's and the text config's byte values take.
 */
#ifndef HEAPPROF_UTIL_SIZE_H
#define HEAPPROF_UTIL_SIZE_H

#include <stdint.h>

/*
 * A size in bytes: a whole decimal number, optionally followed by a
 * binary multiple: k or K, KiB (1024), m, M, MiB (1024^2), g, G, GiB
 * (1024^3), or B (bytes).  "kB", "MB", "GB" are refused as ambiguous
 * (1000 or 1024?).  No range check beyond 64 bits.  0 with *out set, or
 * -1 with *why set to a reason for a message ("not a number", ...).
 */
int hp_parse_size(const char *s, uint64_t *out, const char **why);

#endif
