/*
 * heapprof's one text config syntax (docs/CONFIG.md, "Syntax"): a flat
 * subset of protobuf text format, `field: value` with # comments, quoted
 * strings, numbers, sizes, true/false and one kind of block.  Which
 * fields there are is the reader's: record's session config
 * (config/read.c) and serve's options (cli/serve_config.c) each
 * give a grammar, a table of fields and what setting one does.
 *
 *   cfg_lex.c    tokens and typed values, each error one line naming the
 *                file, the line, the field and what is wrong
 *   cfg_parse.c  the fields of a grammar, its block, the whole text
 *
 * Errors go to stderr as "heapprof: SUBSYS: config WHAT:LINE: [field 'F':
 * ]MSG", or into the caller's buffer (cfg_parser.err) to print or not.
 */
#ifndef HEAPPROF_UTIL_CFG_H
#define HEAPPROF_UTIL_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Values are quoted in messages up to this many bytes. */
#define SHOW_MAX 40

/* Fields of one grammar, at most. */
#define CFG_MAX_FIELDS 64

enum cfg_kind { K_U64, K_BOOL, K_STRING, K_MESSAGE };

struct cfg_field {
	const char *name;
	int id; /* the grammar's own, < CFG_MAX_FIELDS */
	enum cfg_kind kind;
	int repeatable;
	int in_block;      /* a field of the grammar's block { } */
	uint64_t min, max; /* K_U64 */
};

struct cfg_parser;

/* A value token: a decoded string (quoted = 1) or a bare scalar. */
struct value {
	char *text; /* malloc'd, NUL-terminated */
	size_t len;
	int quoted;
	int line;
};

struct cfg_grammar {
	const struct cfg_field *fields;
	size_t nfields;
	/* The one block (a K_MESSAGE field) and, for a field that is not
	 * one of it, what is ("only A and B"); NULL: no block. */
	const char *block, *block_fields;
	/* Sets field f to v (v->text may be taken: set it NULL).  0, or -1
	 * (message given with cfg_perr). */
	int (*set)(struct cfg_parser *ps, const struct cfg_field *f,
	           struct value *v);
	/* Checks once the whole text is read; NULL: none.  0 or -1. */
	int (*end)(struct cfg_parser *ps);
};

/* The reader's state: where it is in the text, and what it has seen. */
struct cfg_parser {
	const struct cfg_grammar *g;
	void *ctx;          /* the grammar's (set, end) */
	const char *subsys; /* "record": "heapprof: record: config ..." */
	const char *what;   /* file name for messages */
	/* NULL: errors go to stderr; else the first error's line (without
	 * its newline) goes here, errlen bytes. */
	char *err;
	size_t errlen;
	const char *p, *end;
	int line;
	int seen_line[CFG_MAX_FIELDS]; /* line a non-repeatable field was
	                                  set on */
	int block_line;                /* where the open block began */
	const char *in_field;          /* field being parsed, for messages */
	char pathbuf[96];              /* "<block>.<field>" */
};

/*
 * Parses buf[0..len) (buf[len] a NUL), the text of ps->what, with
 * grammar ps->g: a control byte anywhere but the blanks is an error, then
 * every field is set in order, then g->end.  ps is set up by the caller
 * (g, ctx, subsys, what, err); the rest is cfg_parse's.  0, or -1 (message
 * given).
 */
int cfg_parse(struct cfg_parser *ps, const char *buf, size_t len);

/* Tokens (cfg_lex.c).  cfg_perr gives one line, "heapprof: SUBSYS: config
 * WHAT:LINE: [field 'F': ]MSG". */
void cfg_perr(struct cfg_parser *ps, int line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
const char *cfg_show(char *buf, size_t len, const char *s, size_t n);
void cfg_skip_space(struct cfg_parser *ps);
int cfg_is_ident_start(char ch);
int cfg_is_ident(char ch);
int cfg_read_value(struct cfg_parser *ps, struct value *v);

/* A value of a field's type; 0, or -1 (message given).  size: a field in
 * bytes, which takes K, M, G as the command line does. */
int cfg_value_u64(struct cfg_parser *ps, const struct value *v, int size,
                  uint64_t min, uint64_t max, uint64_t *out);
int cfg_value_bool(struct cfg_parser *ps, const struct value *v, bool *out);
/* A string in double quotes, without a NUL byte. */
int cfg_value_string(struct cfg_parser *ps, const struct value *v);
int cfg_value_threshold(struct cfg_parser *ps, const struct value *v,
                        uint32_t *pct);

#endif
