/* Strict parsing of option values (numbers, durations, dumps) and the
 * "did you mean" of unknown options (util/suggest.c finds the word);
 * sizes in bytes are util/size.c's. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "config/config.h"
#include "util/err.h"
#include "util/suggest.h"

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

	/* strtol would skip blanks and take a '+': " 5" and "+5" are typos
	 * more often than numbers. */
	if (!s || !(isdigit((unsigned char)s[0]) ||
	            (s[0] == '-' && isdigit((unsigned char)s[1]))))
		return -1;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

int opt_parse_top(const char *cmd, const char *v, long *out)
{
	if (opt_parse_long(v, out) < 0 || *out < 1) {
		hp_err(cmd, "invalid --top '%s' (want a positive number)", v);
		return -1;
	}
	return 0;
}

int opt_nonempty(const char *cmd, const char *v, const char *empty,
                 const char **out)
{
	if (!v[0]) {
		hp_err(cmd, "%s", empty);
		return -1;
	}
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
			char hint[128];
			hp_err(cmd, "unknown option '%s'%s", a,
			       opt_hint(a, usage, hint, sizeof(hint)));
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
	out->which = DUMP_BY_REF;
	if (!strcmp(v, "peak") || !strcmp(v, "end")) {
		out->which = v[0] == 'p' ? DUMP_PEAK : DUMP_END;
		return 0;
	}
	/* All digits but out of range: a dump number, not a name. */
	size_t digits = strspn(v + (v[0] == '-'), "0123456789");
	bool numeric = digits > 0 && !v[(v[0] == '-') + digits];
	if (opt_parse_long(v, &n) == 0) {
		out->index = n;
		if (n != 0)
			return 0;
	} else if (!numeric && v[0] && strlen(v) < HP_SNAPSHOT_NAME_MAX) {
		out->name = v;
		return 0;
	}
	hp_err(cmd,
	       "invalid --dump '%s' (want 1 for the first dump, -1 for the "
	       "last, peak, end, or a snapshot's name)",
	       v);
	return -1;
}

const char *opt_dump_str(const struct dump_ref *ref, char *buf, size_t len)
{
	if (ref->which != DUMP_BY_REF)
		snprintf(buf, len, "the %s dump",
		         ref->which == DUMP_PEAK ? "peak" : "end");
	else if (ref->name)
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
	if (ref->which == DUMP_END)
		return (long)n - 1;
	if (ref->which == DUMP_PEAK) {
		/* Peaks only rise: the last at-max dump holds the highest. */
		for (size_t i = n; i-- > 0;)
			if (d[i].at_max)
				return (long)i;
		hp_err(cmd,
		       "%s has no dump at its peak (recorded with --no-peak,"
		       " or by an older heapprof)",
		       who);
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
	/* A pid is an int: 4294967297 would become pid 1 in a pid_t. */
	if (*out > CFG_PID_MAX) {
		hp_err(cmd, "invalid --pid '%s': too large (pids go up to %d)",
		       v, CFG_PID_MAX);
		return -1;
	}
	return 0;
}

int opt_parse_duration(const char *cmd, const char *what, const char *s,
                       int64_t *out_ns)
{
	static const struct {
		const char *name;
		int64_t ns;
	} units[] = {
	        {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
	const char *p = s ? s : "";
	const char *why = "want a number and a unit: ns, us, ms or s, as in "
	                  "1.5s or 500ms";
	uint64_t ipart = 0, frac = 0, scale = 1;
	int digits = 0, fdigits = 0;

	if (*p == '-') {
		why = "must not be negative";
		goto bad;
	}
	for (; isdigit((unsigned char)*p); p++, digits++) {
		if (ipart > (UINT64_MAX - 9) / 10) {
			why = "too large";
			goto bad;
		}
		ipart = ipart * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++, fdigits++) {
			/* Beyond nanoseconds of a second: not meaningful. */
			if (fdigits == 9) {
				why = "more than 9 decimals";
				goto bad;
			}
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
		}
	}
	if (!digits && !fdigits)
		goto bad;
	if (!*p && !fdigits && ipart == 0) {
		*out_ns = 0; /* a bare 0 needs no unit */
		return 0;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].name) != 0)
			continue;
		uint64_t u = (uint64_t)units[i].ns;
		if (ipart > (uint64_t)INT64_MAX / u) {
			why = "too large";
			goto bad;
		}
		uint64_t v = ipart * u + frac * u / scale;
		if (v > (uint64_t)INT64_MAX) {
			why = "too large";
			goto bad;
		}
		*out_ns = (int64_t)v;
		return 0;
	}
bad:
	if (cmd) /* NULL: the caller says it (opt_parse_offset) */
		hp_err(cmd, "invalid %s '%s' (%s)", what, s ? s : "", why);
	return -1;
}

int opt_parse_offset(const char *cmd, const char *what, const char *s,
                     int64_t *out_ns)
{
	int neg = s && (s[0] == '-' || s[0] == '+');

	if (!neg)
		return opt_parse_duration(cmd, what, s, out_ns);
	/* The sign is ours; the rest must be a plain duration. */
	if (s[1] == '-' || s[1] == '+' ||
	    opt_parse_duration(NULL, what, s + 1, out_ns) < 0) {
		hp_err(cmd,
		       "invalid %s '%s' (want a time such as 1.5s, 500ms or"
		       " -2ms)",
		       what, s);
		return -1;
	}
	if (s[0] == '-')
		*out_ns = -*out_ns;
	return 0;
}

const char *opt_duration_str(int64_t ns, char *buf, size_t len)
{
	static const struct {
		const char *name;
		int64_t ns;
	} units[] = {{"s", 1000000000}, {"ms", 1000000}, {"us", 1000}};
	const char *unit = "ns";
	int64_t u = 1;

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (ns >= units[i].ns || -ns >= units[i].ns) {
			unit = units[i].name;
			u = units[i].ns;
			break;
		}
	if (ns == 0)
		unit = "s";
	if (ns % u == 0) {
		snprintf(buf, len, "%lld %s", (long long)(ns / u), unit);
		return buf;
	}
	/* Three decimals, trailing zeros dropped: "1.5 ms". */
	snprintf(buf, len, "%.3f", (double)ns / (double)u);
	char *e = buf + strlen(buf);
	while (e > buf && e[-1] == '0')
		*--e = '\0';
	if (e > buf && e[-1] == '.')
		*--e = '\0';
	snprintf(e, len - (size_t)(e - buf), " %s", unit);
	return buf;
}

const char *opt_hint(const char *word, void (*usage)(FILE *f), char *buf,
                     size_t len)
{
	char *text = NULL, want[64];
	size_t tlen = 0;
	const char *cands[128];
	char names[128][48];
	size_t n = 0;

	buf[0] = '\0';
	if (word[0] != '-' || word[1] != '-' || !word[2])
		return buf;
	snprintf(want, sizeof(want), "%.*s", (int)strcspn(word, "="), word);
	FILE *f = open_memstream(&text, &tlen);
	if (!f)
		return buf;
	usage(f);
	if (fclose(f) != 0 || !text) {
		free(text);
		return buf;
	}
	/* Every "--name" the usage shows, as a word of its own. */
	for (const char *p = text; (p = strstr(p, "--")) && n < 128; p += 2) {
		if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '-'))
			continue;
		size_t k = 2;
		while (isalnum((unsigned char)p[k]) || p[k] == '-')
			k++;
		if (k == 2 || k >= sizeof(names[0]))
			continue;
		memcpy(names[n], p, k);
		names[n][k] = '\0';
		cands[n] = names[n];
		n++;
	}
	free(text);
	const char *s = hp_suggest(want, cands, n);
	if (s && strcmp(s, want) != 0)
		snprintf(buf, len, "; did you mean '%s'?", s);
	return buf;
}
