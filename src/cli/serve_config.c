/*
 * `heapprof serve -c FILE` (serve_config.h): the config syntax with
 * serve's grammar first; the first format when that fails on a file
 * without a double quote (but in comment lines).
 *
 * Why that rule: the first format's values are unquoted (`listen:
 * 0.0.0.0:6060`, `token-file: /etc/heapprof/token`) and its keys may hold
 * '-', which the config syntax cannot read; a string field of the config
 * syntax is always quoted.  So a file without a quote that the syntax
 * cannot read can only be meant as the first format, and one that both
 * read (numbers and true/false alone, under the same names) means the
 * same either way.  Options are applied only once the whole file is read
 * by one or the other.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/serve_config.h"
#include "config/config.h"
#include "util/cfg.h"
#include "util/err.h"
#include "util/textfile.h"

#define SUBSYS "serve"

/* A config is a few lines; the bound keeps a wrong file (a log, a
 * binary) from being read into memory. */
#define CONFIG_FILE_MAX (1u << 20)

/* ---- serve's grammar of the config syntax -------------------------------- */

/* Each field is the long option `key` (serve_config_apply_fn's); the
 * shared ones have record's names (docs/CONFIG.md). */
enum serve_field {
	SF_PID,
	SF_NAME,
	SF_INTERVAL,
	SF_HEAPS,
	SF_ALL_HEAPS,
	SF_LISTEN,
	SF_ALLOW_REMOTE,
	SF_TOKEN_FILE,
	SF_ALL_USERS,
	SF_TOP,
	SF_MAX_CONNECTIONS,
	SF_TIMEOUT,
	SF_OUTPUT,
	SF_COUNT
};

static const struct cfg_field fields[] = {
        {"pid", SF_PID, K_U64, 1, 0, 1, CFG_PID_MAX},
        {"process_cmdline", SF_NAME, K_STRING, 1, 0, 0, 0},
        {"sampling_interval_bytes", SF_INTERVAL, K_U64, 0, 0, 1, UINT32_MAX},
        {"heaps", SF_HEAPS, K_STRING, 1, 0, 0, 0},
        {"all_heaps", SF_ALL_HEAPS, K_BOOL, 0, 0, 0, 0},
        {"listen", SF_LISTEN, K_STRING, 0, 0, 0, 0},
        {"allow_remote", SF_ALLOW_REMOTE, K_BOOL, 0, 0, 0, 0},
        {"token_file", SF_TOKEN_FILE, K_STRING, 0, 0, 0, 0},
        {"all_users", SF_ALL_USERS, K_BOOL, 0, 0, 0, 0},
        {"top", SF_TOP, K_U64, 0, 0, 1, LONG_MAX},
        {"max_connections", SF_MAX_CONNECTIONS, K_U64, 0, 0, 1, 1024},
        {"timeout", SF_TIMEOUT, K_U64, 0, 0, 1, 3600},
        {"output", SF_OUTPUT, K_STRING, 0, 0, 0, 0},
};
_Static_assert(SF_COUNT <= CFG_MAX_FIELDS, "serve's fields fit cfg.h's");

static const char *const keys[SF_COUNT] = {
        [SF_PID] = "pid",
        [SF_NAME] = "name",
        [SF_INTERVAL] = "interval",
        [SF_HEAPS] = "heaps",
        [SF_ALL_HEAPS] = "all-heaps",
        [SF_LISTEN] = "listen",
        [SF_ALLOW_REMOTE] = "allow-remote",
        [SF_TOKEN_FILE] = "token-file",
        [SF_ALL_USERS] = "all-users",
        [SF_TOP] = "top",
        [SF_MAX_CONNECTIONS] = "max-connections",
        [SF_TIMEOUT] = "timeout",
        [SF_OUTPUT] = "output",
};

/* One option the file sets. */
struct setting {
	enum serve_field id;
	char *value;
	int line;
};

/* What the syntax read, applied once the whole file is. */
struct serve_text {
	struct setting *set;
	size_t n, cap;
	char *heaps;   /* the heaps entries, joined by ',' (one --heaps) */
	long heaps_at; /* its place in set (the first entry's); -1: none */
};

static int add(struct cfg_parser *ps, enum serve_field id, char *value,
               int line)
{
	struct serve_text *st = ps->ctx;
	if (st->n == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 16;
		struct setting *a = realloc(st->set, cap * sizeof(*a));
		if (!a) {
			free(value);
			cfg_perr(ps, line, "out of memory");
			return -1;
		}
		st->set = a;
		st->cap = cap;
	}
	st->set[st->n++] = (struct setting){id, value, line};
	return 0;
}

static int set_field(struct cfg_parser *ps, const struct cfg_field *f,
                     struct value *v)
{
	struct serve_text *st = ps->ctx;
	enum serve_field id = (enum serve_field)f->id;
	char *text = NULL;

	if (f->kind == K_U64) {
		uint64_t x;
		if (cfg_value_u64(ps, v, id == SF_INTERVAL, f->min, f->max,
		                  &x) < 0 ||
		    asprintf(&text, "%" PRIu64, x) < 0)
			return -1;
	} else if (f->kind == K_BOOL) {
		bool b;
		if (cfg_value_bool(ps, v, &b) < 0)
			return -1;
		text = strdup(b ? "true" : "false");
	} else {
		if (cfg_value_string(ps, v) < 0)
			return -1;
		if (!v->len) {
			cfg_perr(ps, v->line, "empty");
			return -1;
		}
		/* -n and --heaps split their values at commas: one name
		 * per field here, as in record's config. */
		if ((id == SF_NAME || id == SF_HEAPS) && strchr(v->text, ',')) {
			cfg_perr(ps, v->line,
			         "a ',' in a name: give the field once per "
			         "name");
			return -1;
		}
		if (id == SF_HEAPS) {
			char *j = NULL;
			if (asprintf(&j, "%s%s%s", st->heaps ? st->heaps : "",
			             st->heaps ? "," : "", v->text) < 0) {
				cfg_perr(ps, v->line, "out of memory");
				return -1;
			}
			free(st->heaps);
			st->heaps = j;
			if (st->heaps_at >= 0)
				return 0;
			st->heaps_at = (long)st->n; /* filled in parse_end */
			return add(ps, id, NULL, v->line);
		}
		text = v->text;
		v->text = NULL;
	}
	if (!text) {
		cfg_perr(ps, v->line, "out of memory");
		return -1;
	}
	return add(ps, id, text, v->line);
}

/* The heaps, as one --heaps where the first was. */
static int parse_end(struct cfg_parser *ps)
{
	struct serve_text *st = ps->ctx;
	if (st->heaps_at >= 0) {
		st->set[st->heaps_at].value = st->heaps;
		st->heaps = NULL;
	}
	return 0;
}

static const struct cfg_grammar serve_grammar = {
        .fields = fields,
        .nfields = sizeof(fields) / sizeof(fields[0]),
        .set = set_field,
        .end = parse_end,
};

/* ---- the first format ---------------------------------------------------- */

/* One "key: value" line of the first format (trimmed, not a comment),
 * its key as the long option's name.  0 or -1 (message printed). */
static int config_line(const char *path, int lineno, char *line,
                       serve_config_apply_fn apply, void *ctx)
{
	char *colon = strchr(line, ':');
	if (!colon) {
		hp_err(SUBSYS, "%s:%d: expected 'key: value'", path, lineno);
		return -1;
	}
	*colon = '\0';
	char *key = line, *val = colon + 1;
	key[strcspn(key, " \t")] = '\0';
	val += strspn(val, " \t");
	for (char *c = key; *c; c++)
		*c = *c == '_' ? '-' : *c;
	return apply(ctx, path, lineno, key, val);
}

/* buf[0..len) in the first format (buf is cut into its lines). */
static int read_first_format(char *buf, size_t len, const char *path,
                             serve_config_apply_fn apply, void *ctx)
{
	int lineno = 0, err = 0;
	for (char *p = buf, *end = buf + len; !err && p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char *l = p;
		lineno++;
		p += n + 1;
		if (n && l[n - 1] == '\r')
			n--; /* a CRLF file */
		/* A NUL would end the value there; any other control byte
		 * (a tab is a blank) is no part of a path, a name or a
		 * number: the file is not what it should be. */
		const char *c = hp_text_control(l, n, "\t");
		if (c && !*c) {
			hp_err(SUBSYS, "%s:%d: a NUL byte: not a text config",
			       path, lineno);
			err = -1;
			break;
		}
		if (c) {
			hp_err(SUBSYS,
			       "%s:%d: a control byte (\\x%02x): not a"
			       " text config",
			       path, lineno, (unsigned char)*c);
			err = -1;
			break;
		}
		l[n] = '\0'; /* the '\n', or buf's own NUL at the end */
		l += strspn(l, " \t");
		n = strlen(l);
		while (n && (l[n - 1] == ' ' || l[n - 1] == '\t'))
			l[--n] = '\0';
		if (!*l || *l == '#')
			continue;
		err = config_line(path, lineno, l, apply, ctx);
	}
	return err;
}

/* ---- the file ------------------------------------------------------------ */

/* Whether a line of buf[0..len) that is not a comment line (its first
 * non-blank a '#', in both formats) holds a double quote: a quoted value,
 * which only the config syntax has. */
static bool has_quote(const char *buf, size_t len)
{
	bool comment = false, start = true;
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		if (c == '\n') {
			comment = false;
			start = true;
		} else if (start && c != ' ' && c != '\t') {
			comment = c == '#';
			start = false;
		}
		if (c == '"' && !comment)
			return true;
	}
	return false;
}

int serve_config_read(const char *path, serve_config_apply_fn apply, void *ctx)
{
	char *buf, why[HP_TEXT_WHY_MAX];
	size_t len;
	if (hp_text_read(path, CONFIG_FILE_MAX, HP_TEXT_STDIN, &buf, &len,
	                 why) < 0) {
		hp_err(SUBSYS, "--config %s: %s", path, why);
		return -1;
	}
	struct serve_text st;
	char msg[1024] = "";
	memset(&st, 0, sizeof(st));
	st.heaps_at = -1;
	struct cfg_parser ps = {.g = &serve_grammar,
	                        .ctx = &st,
	                        .subsys = SUBSYS,
	                        .what = strcmp(path, "-") ? path : "<stdin>",
	                        .err = msg,
	                        .errlen = sizeof(msg)};
	int err = cfg_parse(&ps, buf, len);
	if (!err) {
		for (size_t i = 0; !err && i < st.n; i++)
			err = apply(ctx, path, st.set[i].line,
			            keys[st.set[i].id], st.set[i].value);
	} else if (has_quote(buf, len)) {
		fprintf(stderr, "%s\n", msg);
	} else {
		err = read_first_format(buf, len, path, apply, ctx);
	}
	for (size_t i = 0; i < st.n; i++)
		free(st.set[i].value);
	free(st.set);
	free(st.heaps);
	free(buf);
	return err;
}
