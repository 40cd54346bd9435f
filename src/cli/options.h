/* Parsing of numeric command-line values with clear messages. */
#ifndef HEAPPROF_OPTIONS_H
#define HEAPPROF_OPTIONS_H

#include <stdint.h>

#include "profile/reader.h"

/* Parses a decimal integer in [min, max]; on error prints
 * "heapprof: <cmd>: invalid <what> '<s>': <reason>" and returns -1. */
int opt_parse_u64(const char *cmd, const char *what, const char *s,
                  uint64_t min, uint64_t max, uint64_t *out);

/*
 * The value of long option `name` at argv[*i], given as "--x V" (then *i
 * moves to V) or "--x=V"; NULL if argv[*i] is another option, or if V is
 * missing (then *missing is set).
 */
const char *opt_value(int argc, char **argv, int *i, const char *name,
                      int *missing);

/* A whole decimal long (sign allowed); 0, or -1 without a message. */
int opt_parse_long(const char *s, long *out);

/* A view name (space, alloc_space, objects, alloc_objects); on error
 * prints "heapprof: <cmd>: invalid --view ..." and returns -1. */
int opt_parse_view(const char *cmd, const char *v, enum rd_view *out);

#endif
