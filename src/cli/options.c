/* Strict parsing of numeric option values: no sign, no junk, no overflow. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "util/err.h"

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

const char *opt_value(int argc, char **argv, int *i, const char *name,
                      int *missing)
{
	size_t n = strlen(name);
	const char *a = argv[*i];

	if (strncmp(a, name, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] != '\0')
		return NULL;
	if (*i + 1 >= argc) {
		*missing = 1;
		return NULL;
	}
	return argv[++*i];
}

int opt_parse_long(const char *s, long *out)
{
	char *end;

	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

int opt_parse_view(const char *cmd, const char *v, enum rd_view *out)
{
	for (int i = 0; i < RD_NVIEWS; i++)
		if (!strcmp(v, rd_view_names[i])) {
			*out = (enum rd_view)i;
			return 0;
		}
	hp_err(cmd,
	       "invalid --view '%s' (want space, alloc_space, objects or "
	       "alloc_objects)",
	       v);
	return -1;
}

int opt_walk(const char *cmd, int argc, char **argv,
             int (*parse)(int argc, char **argv, int *i, void *ctx), void *ctx,
             void (*usage)(FILE *f), const char **operands, size_t max,
             size_t *n)
{
	*n = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 1;
		}
		int r = parse(argc, argv, &i, ctx);
		if (r < 0)
			return 2;
		if (r == 0)
			continue;
		if (a[0] == '-' && a[1]) {
			hp_err(cmd, "unknown option '%s'", a);
			return 2;
		}
		if (*n == max) {
			hp_err(cmd, "unexpected argument '%s'", a);
			return 2;
		}
		operands[(*n)++] = a;
	}
	return 0;
}

int opt_parse_dump(const char *cmd, const char *v, struct dump_ref *out)
{
	long n;
	out->index = 0;
	out->name = NULL;
	if (opt_parse_long(v, &n) == 0) {
		out->index = n;
		if (n != 0)
			return 0;
	} else if (v[0] && strlen(v) < HP_SNAPSHOT_NAME_MAX) {
		out->name = v;
		return 0;
	}
	hp_err(cmd,
	       "invalid --dump '%s' (want 1 for the first dump, -1 for the "
	       "last, or a snapshot's name)",
	       v);
	return -1;
}

const char *opt_dump_str(const struct dump_ref *ref, char *buf, size_t len)
{
	if (ref->name)
		snprintf(buf, len, "snapshot '%s'", ref->name);
	else
		snprintf(buf, len, "dump %ld", ref->index ? ref->index : -1);
	return buf;
}

long opt_pick_dump(const char *cmd, const char *who, const struct rd_dump *d,
                   size_t n, const struct dump_ref *ref)
{
	if (n == 0) {
		hp_err(cmd, "%s has no dumps", who);
		return -1;
	}
	if (ref->name) {
		for (size_t i = n; i-- > 0;)
			if (d[i].name && !strcmp(d[i].name, ref->name))
				return (long)i;
		hp_err(cmd,
		       "%s has no snapshot named '%s' (heapprof snapshot "
		       "--list shows them)",
		       who, ref->name);
		return -1;
	}
	long want = ref->index ? ref->index : -1;
	long idx = want > 0 ? want : (long)n + 1 + want;
	if (idx < 1 || (size_t)idx > n) {
		hp_err(cmd, "%s has %zu dump%s; dump %ld is out of range", who,
		       n, n == 1 ? "" : "s", want);
		return -1;
	}
	return idx - 1;
}

int opt_parse_pid(const char *cmd, const char *v, long *out)
{
	if (opt_parse_long(v, out) < 0 || *out <= 0) {
		hp_err(cmd, "invalid --pid '%s'", v);
		return -1;
	}
	return 0;
}
