/* Strict parsing of numeric option values: no sign, no junk, no overflow. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/options.h"

int opt_parse_u64(const char *cmd, const char *what, const char *s,
                  uint64_t min, uint64_t max, uint64_t *out)
{
	const char *why = NULL;
	if (!s || !*s) {
		why = "empty value";
	} else if (*s == '-') {
		why = "must be positive";
	} else if (!isdigit((unsigned char)*s)) {
		why = "not a number";
	} else {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(s, &end, 10);
		if (*end)
			why = "not a number";
		else if (errno == ERANGE || v > max)
			why = "too large";
		else if (v < min)
			why = min == 1 ? "must be at least 1" : "too small";
		else {
			*out = v;
			return 0;
		}
	}
	fprintf(stderr, "heapprof: %s: invalid %s '%s': %s\n", cmd, what,
	        s ? s : "", why);
	return -1;
}
