/*
 * Human-readable byte sizes for reports (see human.h).  Binary units,
 * because allocators and page sizes are powers of two.
 */
#include <stdio.h>

#include "util/human.h"

static const char *const units[] = {"B",   "KiB", "MiB", "GiB",
                                    "TiB", "PiB", "EiB"};

char *hp_fmt_bytes_short(char *buf, size_t len, int64_t bytes)
{
	/* Work on the magnitude in double: exact enough for two decimals. */
	double v = bytes < 0 ? -(double)bytes : (double)bytes;
	size_t u = 0;

	while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lld B", (long long)bytes);
	else
		snprintf(buf, len, "%s%.2f %s", bytes < 0 ? "-" : "", v,
		         units[u]);
	return buf;
}

char *hp_fmt_bytes(char *buf, size_t len, int64_t bytes)
{
	char s[32];

	hp_fmt_bytes_short(s, sizeof(s), bytes);
	if (bytes > -1024 && bytes < 1024)
		snprintf(buf, len, "%s", s);
	else
		snprintf(buf, len, "%s (%lld B)", s, (long long)bytes);
	return buf;
}
