/*
 * The text config's grammar engine (cfg.h): fields by the grammar's table,
 * `name: value` or `name { ... }` for its one block, protobuf's optional
 * `,` and `;` between fields, each non-repeatable field at most once.
 * Every error is one line naming the file, the line, the field and the
 * reason, because a config is often written by hand and the user must
 * find the mistake without guessing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cfg.h"
#include "util/textfile.h"

static const struct cfg_field *field_find(const struct cfg_grammar *g,
                                          const char *name, size_t len,
                                          int in_block)
{
	for (size_t i = 0; i < g->nfields; i++)
		if (strlen(g->fields[i].name) == len &&
		    !memcmp(g->fields[i].name, name, len) &&
		    g->fields[i].in_block == in_block)
			return &g->fields[i];
	return NULL;
}

static int parse_fields(struct cfg_parser *ps, int in_block);

/* One field, its name at ps->p.  0, or -1 (message given). */
static int parse_field(struct cfg_parser *ps, int in_block)
{
	const char *name = ps->p;
	int line = ps->line;
	char b[SHOW_MAX + 8];

	while (ps->p < ps->end && cfg_is_ident(*ps->p))
		ps->p++;
	size_t len = (size_t)(ps->p - name);
	const struct cfg_field *f = field_find(ps->g, name, len, in_block);
	if (!f) {
		/* Say where a known field does belong. */
		const struct cfg_field *other =
		        field_find(ps->g, name, len, !in_block);
		cfg_show(b, sizeof(b), name, len);
		if (other && !in_block)
			cfg_perr(ps, line, "field '%s': belongs inside %s { }",
			         b, ps->g->block);
		else if (other)
			cfg_perr(ps, line, "field '%s': not a field of %s (%s)",
			         b, ps->g->block, ps->g->block_fields);
		else
			cfg_perr(ps, line, "field '%s': unknown field", b);
		return -1;
	}
	if (in_block) {
		snprintf(ps->pathbuf, sizeof(ps->pathbuf), "%s.%s",
		         ps->g->block, f->name);
		ps->in_field = ps->pathbuf;
	} else {
		ps->in_field = f->name;
	}
	if (!f->repeatable && ps->seen_line[f->id]) {
		cfg_perr(ps, line, "given twice (first on line %d)",
		         ps->seen_line[f->id]);
		return -1;
	}
	ps->seen_line[f->id] = line;
	cfg_skip_space(ps);
	int colon = ps->p < ps->end && *ps->p == ':';
	if (colon) {
		ps->p++;
		cfg_skip_space(ps);
	}
	if (f->kind == K_MESSAGE) {
		if (ps->p >= ps->end || *ps->p != '{') {
			cfg_perr(ps, ps->line,
			         "expected '{' after the field name");
			return -1;
		}
		ps->p++;
		ps->block_line = line;
		return parse_fields(ps, 1);
	}
	if (!colon) {
		cfg_perr(ps, ps->line, "expected ':' after the field name");
		return -1;
	}
	struct value v;
	if (cfg_read_value(ps, &v) < 0)
		return -1;
	int rc = ps->g->set(ps, f, &v);
	free(v.text);
	return rc;
}

/* Fields up to the end of the file, or to the '}' of a block. */
static int parse_fields(struct cfg_parser *ps, int in_block)
{
	for (;;) {
		ps->in_field = NULL;
		cfg_skip_space(ps);
		if (ps->p >= ps->end) {
			if (!in_block)
				return 0;
			ps->in_field = ps->g->block;
			cfg_perr(ps, ps->block_line,
			         "unterminated block: no '}' before the end of "
			         "the file");
			return -1;
		}
		char ch = *ps->p;
		if (ch == '}') {
			if (!in_block) {
				cfg_perr(ps, ps->line, "'}' without a block");
				return -1;
			}
			ps->p++;
			return 0;
		}
		if (ch == ',' ||
		    ch == ';') { /* protobuf's optional separators */
			ps->p++;
			continue;
		}
		if (!cfg_is_ident_start(ch)) {
			char b[8];
			cfg_perr(ps, ps->line,
			         "expected a field name, found '%s'",
			         cfg_show(b, sizeof(b), ps->p, 1));
			return -1;
		}
		if (parse_field(ps, in_block) < 0)
			return -1;
	}
}

int cfg_parse(struct cfg_parser *ps, const char *buf, size_t len)
{
	ps->p = buf;
	ps->end = buf + len;
	ps->line = 1;
	memset(ps->seen_line, 0, sizeof(ps->seen_line));
	ps->block_line = 0;
	ps->in_field = NULL;
	if (ps->err && ps->errlen)
		ps->err[0] = '\0';
	/* A NUL would end a value there; any other control byte but the
	 * blanks is no part of a config (a binary, a paste gone wrong), and
	 * inside a string it would reach a file name or a heap name. */
	const char *bad = hp_text_control(buf, len, "\t\n\r\f\v");
	if (bad) {
		int line = 1;
		for (const char *q = buf; q < bad; q++)
			line += *q == '\n';
		if (*bad)
			cfg_perr(ps, line,
			         "a control byte (\\x%02x): not a"
			         " text config",
			         (unsigned char)*bad);
		else
			cfg_perr(ps, line, "a NUL byte: not a text config");
		return -1;
	}
	int rc = parse_fields(ps, 0);
	if (!rc && ps->g->end)
		rc = ps->g->end(ps);
	return rc;
}
