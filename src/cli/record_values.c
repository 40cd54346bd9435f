/* The values of `heapprof record`'s options (record_values.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/record_values.h"
#include "config/config.h"
#include "util/size.h"

#define PFX "heapprof: record: "

int rec_bad(const char *flag, const char *val, const char *why)
{
	fprintf(stderr, PFX "invalid %s '%s': %s\n", flag, val, why);
	return 2;
}

/* A whole decimal number in [min, max]; 0 or 2 (message printed). */
int rec_parse_u64(const char *flag, const char *s, uint64_t min, uint64_t max,
                  uint64_t *out)
{
	char why[96];
	if (!*s)
		return rec_bad(flag, s, "empty value");
	if (*s == '-')
		return rec_bad(flag, s, "must be positive");
	if (!isdigit((unsigned char)*s))
		return rec_bad(flag, s, "not a number");
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end)
		return rec_bad(flag, s, "not a number");
	if (errno == ERANGE || v > max || v < min) {
		snprintf(why, sizeof(why), "out of range: %llu to %llu",
		         (unsigned long long)min, (unsigned long long)max);
		return rec_bad(flag, s, why);
	}
	*out = v;
	return 0;
}

/* A size in bytes (4096, 4k, 64M, 1GiB: hp_parse_size) in [min, max];
 * 0 or 2 (message printed). */
int rec_parse_size(const char *flag, const char *s, uint64_t min, uint64_t max,
                   uint64_t *out)
{
	char why[96];
	const char *reason;
	uint64_t v;
	if (hp_parse_size(s, &v, &reason) < 0)
		return rec_bad(flag, s, reason);
	if (v > max || v < min) {
		snprintf(why, sizeof(why), "out of range: %llu to %llu",
		         (unsigned long long)min, (unsigned long long)max);
		return rec_bad(flag, s, why);
	}
	*out = v;
	return 0;
}

/* Digits, then optionally '.' and digits, then `tail`: strtod alone would
 * take "1e3", "0x10", "inf" and "5." too. */
static bool plain_decimal(const char *s, const char *tail)
{
	const char *p = s;
	while (isdigit((unsigned char)*p))
		p++;
	if (p == s)
		return false;
	if (*p == '.') {
		const char *f = ++p;
		while (isdigit((unsigned char)*p))
			p++;
		if (p == f)
			return false;
	}
	return strcmp(p, tail) == 0;
}

/* -d SECONDS: a positive decimal, at least a millisecond. */
int rec_parse_seconds(const char *flag, const char *s, uint64_t *ms)
{
	if (!*s)
		return rec_bad(flag, s, "empty value");
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (*end || end == s || !plain_decimal(s, ""))
		return rec_bad(flag, s, "not a number of seconds");
	if (!isfinite(v) || errno == ERANGE || v * 1000.0 > (double)CFG_MS_MAX)
		return rec_bad(flag, s, "too long: at most 100 days");
	uint64_t m = (uint64_t)llround(v * 1000.0);
	if (m == 0)
		return rec_bad(flag, s, "too short: at least 0.001 s");
	*ms = m;
	return 0;
}

/* --adaptive=T: a fraction (0.9) or a percentage (90%). */
int rec_parse_threshold(const char *flag, const char *s, uint32_t *pct)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	bool percent = *end == '%' && end[1] == '\0';
	if (end == s || (*end && !percent) || !isfinite(v) ||
	    !plain_decimal(s, percent ? "%" : ""))
		return rec_bad(flag, s,
		               "want a fraction (0.9) or a percentage "
		               "(90%)");
	if (!percent)
		v *= 100.0;
	if (v <= 0.0 || v > 100.0 + 1e-9)
		return rec_bad(flag, s,
		               "out of range: above 0 and at most 1 "
		               "(100%)");
	/* The client counts in whole percent: 0.001 is not 0.1%. */
	if (v < 1.0 - 1e-9)
		return rec_bad(flag, s,
		               "too small: at least 0.01 (1%), in steps of "
		               "0.01");
	long r = lround(v);
	*pct = (uint32_t)r;
	return 0;
}

/* Calls add(item) for each comma-separated item of list. */
int rec_each_item(const char *flag, const char *list,
                  int (*add)(struct session_config *, const char *,
                             const char *),
                  struct session_config *c)
{
	char *copy = strdup(list);
	if (!copy)
		return rec_bad(flag, list, "out of memory");
	int rc = 0;
	char *p = copy;
	for (;;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (!*p) {
			rc = rec_bad(flag, list, "empty item in the list");
			break;
		}
		rc = add(c, flag, p);
		if (rc || !comma)
			break;
		p = comma + 1;
	}
	free(copy);
	return rc;
}
