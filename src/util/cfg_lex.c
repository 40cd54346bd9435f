/*
 * The text config's tokens (cfg.h): blanks and # comments, field
 * names, quoted strings with their escapes, bare scalars, and the typed
 * values of fields, each error one line naming the file, the line, the
 * field and what is wrong.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cfg.h"
#include "util/size.h"
#include "util/err.h"

/* ---- the tokenizer ------------------------------------------------------ */

void cfg_perr(struct cfg_parser *ps, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	char field[160] = "";
	if (ps->in_field)
		snprintf(field, sizeof(field), "field '%s': ", ps->in_field);
	if (ps->err && !ps->err[0])
		snprintf(ps->err, ps->errlen,
		         "heapprof: %s: config %s:%d: %s%s", ps->subsys,
		         ps->what, line, field, msg);
	else if (!ps->err)
		hp_log("heapprof: %s: config %s:%d: %s%s\n", ps->subsys,
		       ps->what, line, field, msg);
}

/* A value for a message: cut, control characters as '?'. */
const char *cfg_show(char *buf, size_t len, const char *s, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 4 < len && i < SHOW_MAX; i++)
		buf[o++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
	if (n > SHOW_MAX && o + 4 < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

/* Skip blanks, newlines and # comments. */
void cfg_skip_space(struct cfg_parser *ps)
{
	while (ps->p < ps->end) {
		char ch = *ps->p;
		if (ch == '\n') {
			ps->line++;
			ps->p++;
		} else if (ch == ' ' || ch == '\t' || ch == '\r' ||
		           ch == '\f' || ch == '\v') {
			ps->p++;
		} else if (ch == '#') {
			while (ps->p < ps->end && *ps->p != '\n')
				ps->p++;
		} else {
			break;
		}
	}
}

int cfg_is_ident_start(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       ch == '_';
}

int cfg_is_ident(char ch)
{
	return cfg_is_ident_start(ch) || (ch >= '0' && ch <= '9');
}

/* A bare value: a number, true/false, or an identifier. */
static int is_scalar(char ch)
{
	return cfg_is_ident(ch) || ch == '.' || ch == '-' || ch == '+';
}

/*
 * A double-quoted string at ps->p, decoded.  Escapes: \" \\ \n \t \r \'.
 * 0, or -1 (message printed).
 */
/* A hex digit's value, or -1. */
static int hexval(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

static int read_string(struct cfg_parser *ps, struct value *v)
{
	int line = ps->line;
	const char *s = ++ps->p; /* past the quote */
	char *out = malloc((size_t)(ps->end - s) + 1);
	size_t o = 0;

	if (!out) {
		cfg_perr(ps, line, "out of memory");
		return -1;
	}
	for (;;) {
		if (ps->p >= ps->end || *ps->p == '\n') {
			cfg_perr(ps, line,
			         "unterminated string (a '\"' is missing on "
			         "this line)");
			free(out);
			return -1;
		}
		char ch = *ps->p++;
		if (ch == '"')
			break;
		if (ch != '\\') {
			out[o++] = ch;
			continue;
		}
		if (ps->p >= ps->end || *ps->p == '\n') {
			cfg_perr(ps, line,
			         "unterminated string (ends in '\\')");
			free(out);
			return -1;
		}
		char e = *ps->p++;
		switch (e) {
		case '"':
		case '\\':
		case '\'':
			out[o++] = e;
			break;
		case 'n':
			out[o++] = '\n';
			break;
		case 't':
			out[o++] = '\t';
			break;
		case 'r':
			out[o++] = '\r';
			break;
		case 'x': {
			/* \xNN, as protobuf: how --print-config writes any
			 * other control byte, which the file may not hold
			 * raw */
			int hi = ps->end - ps->p >= 2 ? hexval(ps->p[0]) : -1;
			int lo = hi >= 0 ? hexval(ps->p[1]) : -1;
			if (lo < 0) {
				cfg_perr(ps, line,
				         "'\\x' in a string needs two hex"
				         " digits");
				free(out);
				return -1;
			}
			ps->p += 2;
			out[o++] = (char)(hi << 4 | lo);
			break;
		}
		default:
			cfg_perr(ps, line,
			         "unknown escape '\\%c' in a string (use \\\" "
			         "\\\\ \\n \\t \\r \\xNN)",
			         (unsigned char)e < 0x20 ? '?' : e);
			free(out);
			return -1;
		}
	}
	out[o] = '\0';
	v->text = out;
	v->len = o;
	v->quoted = 1;
	v->line = line;
	return 0;
}

/* The value after "field:".  0, or -1 (message printed). */
int cfg_read_value(struct cfg_parser *ps, struct value *v)
{
	cfg_skip_space(ps);
	memset(v, 0, sizeof(*v));
	if (ps->p < ps->end && *ps->p == '"')
		return read_string(ps, v);
	if (ps->p < ps->end && *ps->p == '\'') {
		cfg_perr(ps, ps->line, "strings are written in double quotes");
		return -1;
	}
	const char *s = ps->p;
	while (ps->p < ps->end && is_scalar(*ps->p))
		ps->p++;
	if (ps->p == s) {
		char b[8];
		if (s >= ps->end)
			cfg_perr(ps, ps->line,
			         "missing value at the end of the file");
		else
			cfg_perr(ps, ps->line, "missing value (found '%s')",
			         cfg_show(b, sizeof(b), s, 1));
		return -1;
	}
	v->len = (size_t)(ps->p - s);
	v->text = strndup(s, v->len);
	v->line = ps->line;
	if (!v->text) {
		cfg_perr(ps, ps->line, "out of memory");
		return -1;
	}
	return 0;
}

/* ---- values ------------------------------------------------------------- */

int cfg_value_u64(struct cfg_parser *ps, const struct value *v, int size,
                  uint64_t min, uint64_t max, uint64_t *out)
{
	char b[SHOW_MAX + 8];
	const char *t = v->text;

	cfg_show(b, sizeof(b), v->text, v->len);
	if (v->quoted) {
		cfg_perr(ps, v->line,
		         "expected a number, not a string (\"%s\")", b);
		return -1;
	}
	if (t[0] == '-' && t[1] >= '0' && t[1] <= '9') {
		cfg_perr(ps, v->line, "must not be negative ('%s')", b);
		return -1;
	}
	if (!(t[0] >= '0' && t[0] <= '9')) {
		cfg_perr(ps, v->line, "not a number ('%s')", b);
		return -1;
	}
	uint64_t x;
	const char *why = NULL;
	if (size) {
		/* 4096, 4K, 64MiB: the command line's parser. */
		if (hp_parse_size(t, &x, &why) < 0 &&
		    strcmp(why, "too large") != 0) {
			cfg_perr(ps, v->line, "%s ('%s')", why, b);
			return -1;
		}
	} else {
		char *end;
		errno = 0;
		x = strtoull(t, &end, 10);
		if (*end) {
			cfg_perr(ps, v->line, "not a number ('%s')", b);
			return -1;
		}
		if (errno == ERANGE)
			why = "too large";
	}
	if (why || x > max) {
		cfg_perr(ps, v->line, "too large ('%s'): at most %" PRIu64, b,
		         max);
		return -1;
	}
	if (x < min) {
		cfg_perr(ps, v->line, "too small ('%s'): at least %" PRIu64, b,
		         min);
		return -1;
	}
	*out = x;
	return 0;
}

int cfg_value_bool(struct cfg_parser *ps, const struct value *v, bool *out)
{
	char b[SHOW_MAX + 8];

	if (!v->quoted && !strcmp(v->text, "true"))
		*out = true;
	else if (!v->quoted && !strcmp(v->text, "false"))
		*out = false;
	else {
		cfg_perr(ps, v->line, "expected true or false ('%s')",
		         cfg_show(b, sizeof(b), v->text, v->len));
		return -1;
	}
	return 0;
}

int cfg_value_string(struct cfg_parser *ps, const struct value *v)
{
	char b[SHOW_MAX + 8];

	if (!v->quoted) {
		cfg_perr(ps, v->line,
		         "expected a string in double quotes ('%s')",
		         cfg_show(b, sizeof(b), v->text, v->len));
		return -1;
	}
	if (strlen(v->text) != v->len) {
		cfg_perr(ps, v->line, "a string holds a NUL byte");
		return -1;
	}
	return 0;
}

/* (0, 1], in whole percent: the client compares table fill in percent. */
int cfg_value_threshold(struct cfg_parser *ps, const struct value *v,
                        uint32_t *pct)
{
	char b[SHOW_MAX + 8];
	char *end;

	cfg_show(b, sizeof(b), v->text, v->len);
	errno = 0;
	double x = v->quoted ? NAN : strtod(v->text, &end);
	if (v->quoted || *end || errno || !isfinite(x)) {
		cfg_perr(ps, v->line, "not a number ('%s')", b);
		return -1;
	}
	if (!(x > 0 && x <= 1)) {
		cfg_perr(ps, v->line,
		         "out of range ('%s'): a fraction of the tables, "
		         "greater than 0 and at most 1",
		         b);
		return -1;
	}
	long p = lround(x * 100);
	if (p < 1) {
		cfg_perr(ps, v->line,
		         "too small ('%s'): the resolution is 0.01 (1%%)", b);
		return -1;
	}
	*pct = (uint32_t)p;
	return 0;
}
