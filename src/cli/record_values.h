/*
 * The values of `heapprof record`'s options: numbers and sizes in a range,
 * seconds, a threshold, comma lists.  Each returns 0, or 2 (record's
 * usage-error status) after a one-line message naming the flag, the value
 * and the reason.
 */
#ifndef HEAPPROF_CLI_RECORD_VALUES_H
#define HEAPPROF_CLI_RECORD_VALUES_H

#include <stdint.h>

struct session_config;

/* "heapprof: record: invalid FLAG 'VAL': WHY"; returns 2. */
int rec_bad(const char *flag, const char *val, const char *why);
/* A whole decimal number in [min, max]. */
int rec_parse_u64(const char *flag, const char *s, uint64_t min, uint64_t max,
                  uint64_t *out);
/* A size in bytes (4096, 4k, 64M, 1GiB: hp_parse_size) in [min, max]. */
int rec_parse_size(const char *flag, const char *s, uint64_t min, uint64_t max,
                   uint64_t *out);
/* -d SECONDS: a positive decimal, at least a millisecond. */
int rec_parse_seconds(const char *flag, const char *s, uint64_t *ms);
/* --adaptive=T: a fraction (0.9) or a percentage (90%), in whole percent. */
int rec_parse_threshold(const char *flag, const char *s, uint32_t *pct);
/* Calls add(c, flag, item) for each comma-separated item of list; an empty
 * item is an error. */
int rec_each_item(const char *flag, const char *list,
                  int (*add)(struct session_config *, const char *,
                             const char *),
                  struct session_config *c);

#endif
