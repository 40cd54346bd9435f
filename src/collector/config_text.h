/*
 * The text config's reader in two halves, private to them (the interface
 * is config.h): config_lex.c reads tokens and typed values and says what
 * is wrong with one; config_read.c knows the fields and the grammar.
 */
#ifndef HEAPPROF_CONFIG_TEXT_H
#define HEAPPROF_CONFIG_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/config.h"

#define PREFIX "heapprof: record: "

/* Values are quoted in messages up to this many bytes. */
#define SHOW_MAX 40

/* The fields of the text form, one per entry of config_read.c's table. */
enum field_id {
	F_INTERVAL,
	F_PID,
	F_CMDLINE,
	F_NO_STARTUP,
	F_NO_RUNNING,
	F_SHMEM,
	F_BLOCK,
	F_BLOCK_TIMEOUT,
	F_DUMP_AT_MAX,
	F_CONTINUOUS,
	F_DUMP_PHASE,
	F_DUMP_INTERVAL,
	F_HEAPS,
	F_ALL_HEAPS,
	F_EXCLUDE_HEAPS,
	F_HEAP_INTERVALS,
	F_ADAPTIVE_THRESHOLD,
	F_ADAPTIVE_MAX,
	F_UNWIND,
	F_MAX_FRAMES,
	F_DURATION,
	F_OUTPUT,
	F_FOLLOW_FORK,
	F_FOLLOW_EXEC,
	F_COMMAND,
	F_TRACE_MODE,
	F_TRACE_BUFFER,
	F_MEMORY_DUMP_BYTES,
	F_MEMORY_DUMP_PCT,
	F_NO_MEMORY_DUMPS,
	F_PRESSURE_DUMPS,
	F_PRESSURE_PSI,
	F_COUNT
};

/* The reader's state: where it is in the file, and what it has seen. */
struct parser {
	struct session_config *c;
	const char *what; /* file name for messages */
	const char *p, *end;
	int line;
	int seen_line[F_COUNT]; /* line a non-repeatable field was set on */
	char **cmd;             /* `command` values, in order */
	size_t ncmd, capcmd;
	int heap_intervals_line;
	int block_line;       /* where the open continuous_dump_config began */
	const char *in_field; /* field being parsed, for messages */
	char pathbuf[96];     /* "continuous_dump_config.<field>" */
};

/* A value token: a decoded string (quoted = 1) or a bare scalar. */
struct value {
	char *text; /* malloc'd, NUL-terminated */
	size_t len;
	int quoted;
	int line;
};

/* Tokens (config_lex.c).  perr prints one line, "heapprof: record: config
 * WHAT:LINE: [field 'F': ]MSG". */
void cfg_perr(struct parser *ps, int line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
const char *cfg_show(char *buf, size_t len, const char *s, size_t n);
void cfg_skip_space(struct parser *ps);
int cfg_is_ident_start(char ch);
int cfg_is_ident(char ch);
int cfg_read_value(struct parser *ps, struct value *v);

/* A value of a field's type; 0, or -1 (message printed).  size: a field
 * in bytes, which takes K, M, G as the command line does. */
int cfg_value_u64(struct parser *ps, const struct value *v, int size,
                  uint64_t min, uint64_t max, uint64_t *out);
int cfg_value_bool(struct parser *ps, const struct value *v, bool *out);
/* A string in double quotes, without a NUL byte. */
int cfg_value_string(struct parser *ps, const struct value *v);
int cfg_value_threshold(struct parser *ps, const struct value *v,
                        uint32_t *pct);

#endif
