/* Parsing of numeric command-line values with clear messages. */
#ifndef HEAPPROF_OPTIONS_H
#define HEAPPROF_OPTIONS_H

#include <stdint.h>

/* Parses a decimal integer in [min, max]; on error prints
 * "heapprof: <cmd>: invalid <what> '<s>': <reason>" and returns -1. */
int opt_parse_u64(const char *cmd, const char *what, const char *s,
                  uint64_t min, uint64_t max, uint64_t *out);

#endif
