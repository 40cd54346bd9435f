/* A size in bytes as a person writes it (size.h). */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/size.h"

int hp_parse_size(const char *s, uint64_t *out, const char **why)
{
	static const struct {
		const char *name;
		unsigned shift;
	} units[] = {{"", 0},     {"B", 0},  {"k", 10},  {"K", 10},
	             {"KiB", 10}, {"m", 20}, {"M", 20},  {"MiB", 20},
	             {"g", 30},   {"G", 30}, {"GiB", 30}};
	const char *p = s ? s : "";
	uint64_t v = 0;

	if (!*p) {
		*why = "empty value";
		return -1;
	}
	if (*p == '-') {
		*why = "must be positive";
		return -1;
	}
	if (!isdigit((unsigned char)*p)) {
		*why = "not a number";
		return -1;
	}
	for (; isdigit((unsigned char)*p); p++) {
		if (v > (UINT64_MAX - 9) / 10) {
			*why = "too large";
			return -1;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.' || *p == ',') {
		*why = "not a whole number of bytes";
		return -1;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].name) != 0)
			continue;
		if (v > UINT64_MAX >> units[i].shift) {
			*why = "too large";
			return -1;
		}
		*out = v << units[i].shift;
		return 0;
	}
	if (!strcmp(p, "kB") || !strcmp(p, "KB") || !strcmp(p, "MB") ||
	    !strcmp(p, "GB"))
		*why = "ambiguous unit: use K, M or G (or KiB, MiB, GiB), "
		       "multiples of 1024";
	else
		*why = "unknown unit: want a number of bytes, optionally with "
		       "K, M or G (or KiB, MiB, GiB), multiples of 1024";
	return -1;
}
