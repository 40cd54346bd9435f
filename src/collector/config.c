/*
 * The session config in text form (see config.h, docs/CONFIG.md): a flat
 * subset of protobuf text format with HeapprofdConfig's field names, so a
 * heapprofd user can read and write it, plus heapprof's own fields.
 *
 * The file is read whole (it is small) and parsed by hand: a tokenizer that
 * counts lines, and one table of fields.  Every error is one line naming
 * the file, the line, the field and the reason, because a config is often
 * written by hand and the user must find the mistake without guessing.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/config.h"
#include "cli/options.h"
#include "layout/region.h"

_Static_assert(CFG_SHMEM_MIN == HP_REGION_MIN_SIZE, "shmem minimum");
_Static_assert(CFG_MAX_NAMES <= 64 && CFG_MAX_HEAPS <= 64, "name counts");

#define PREFIX "heapprof: record: "

/* A config is a few lines; the bound keeps a wrong file (a binary, a
 * huge log) from being read into memory. */
#define CFG_FILE_MAX (1u << 20)

/* Values are quoted in messages up to this many bytes. */
#define SHOW_MAX 40

void config_defaults(struct session_config *c)
{
	memset(c, 0, sizeof(*c));
	c->interval = CFG_DEFAULT_INTERVAL;
	c->unwind_mode = HP_UNWIND_DWARF;
	c->max_frames = HP_DEFAULT_FRAMES;
	c->block_timeout_ms = CFG_DEFAULT_BLOCK_MS;
	c->adaptive_threshold_pct = CFG_DEFAULT_ADAPTIVE_PCT;
}

static void free_argv_buf(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

void config_free(struct session_config *c)
{
	for (int i = 0; i < c->nnames; i++)
		free(c->names[i]);
	for (int i = 0; i < c->nheaps; i++)
		free(c->heaps[i]);
	for (int i = 0; i < c->nexclude_heaps; i++)
		free(c->exclude_heaps[i]);
	if (c->argv == c->argv_buf)
		c->argv = NULL;
	if (c->output == c->output_buf)
		c->output = NULL;
	free_argv_buf(c->argv_buf);
	free(c->output_buf);
	c->argv_buf = NULL;
	c->output_buf = NULL;
	c->nnames = c->nheaps = c->nexclude_heaps = 0;
}

int config_trace_mode(const char *word)
{
	if (!strcmp(word, "streaming"))
		return HP_TRACE_STREAMING;
	if (!strcmp(word, "oneshot"))
		return HP_TRACE_ONESHOT;
	if (!strcmp(word, "ring"))
		return HP_TRACE_RING;
	return -1;
}

const char *config_trace_mode_name(uint32_t mode)
{
	switch (mode) {
	case HP_TRACE_STREAMING:
		return "streaming";
	case HP_TRACE_ONESHOT:
		return "oneshot";
	case HP_TRACE_RING:
		return "ring";
	default:
		return "off";
	}
}

/* ---- adding targets and heaps ------------------------------------------- */

const char *config_add_pid(struct session_config *c, long pid)
{
	if (pid < 1)
		return "must be at least 1";
	if (pid > CFG_PID_MAX)
		return "too large: pids are at most 4194304";
	for (int i = 0; i < c->npids; i++)
		if (c->pids[i] == pid)
			return "given twice";
	if (c->npids >= CFG_MAX_PIDS)
		return "too many pids: at most 1024";
	c->pids[c->npids++] = (int)pid;
	return NULL;
}

static const char *add_string(char **arr, int *n, int max, size_t maxlen,
                              const char *s, const char *too_many,
                              const char *too_long)
{
	size_t len = strlen(s);

	if (len == 0)
		return "empty";
	if (len > maxlen)
		return too_long;
	for (int i = 0; i < *n; i++)
		if (!strcmp(arr[i], s))
			return "given twice";
	if (*n >= max)
		return too_many;
	char *d = strdup(s);
	if (!d)
		return "out of memory";
	arr[(*n)++] = d;
	return NULL;
}

const char *config_add_name(struct session_config *c, const char *name)
{
	return add_string(c->names, &c->nnames, CFG_MAX_NAMES, CFG_NAME_MAX,
	                  name, "too many process names: at most 64",
	                  "too long: at most 255 bytes");
}

const char *config_add_heap(struct session_config *c, const char *name)
{
	return add_string(c->heaps, &c->nheaps, CFG_MAX_HEAPS,
	                  CFG_HEAP_NAME_MAX, name, "too many heaps: at most 64",
	                  "too long: heap names are at most 63 bytes");
}

const char *config_add_exclude_heap(struct session_config *c, const char *name)
{
	return add_string(c->exclude_heaps, &c->nexclude_heaps, CFG_MAX_HEAPS,
	                  CFG_HEAP_NAME_MAX, name, "too many heaps: at most 64",
	                  "too long: heap names are at most 63 bytes");
}

/* ---- the field table ---------------------------------------------------- */

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
	F_COUNT
};

enum field_kind { K_U64, K_BOOL, K_STRING, K_MESSAGE };

struct field {
	const char *name;
	enum field_id id;
	enum field_kind kind;
	int repeatable;
	int in_continuous; /* a field of continuous_dump_config { } */
	uint64_t min, max; /* K_U64 */
};

static const struct field fields[] = {
        {"sampling_interval_bytes", F_INTERVAL, K_U64, 0, 0, 1,
         CFG_INTERVAL_MAX},
        {"pid", F_PID, K_U64, 1, 0, 1, CFG_PID_MAX},
        {"process_cmdline", F_CMDLINE, K_STRING, 1, 0, 0, 0},
        {"no_startup", F_NO_STARTUP, K_BOOL, 0, 0, 0, 0},
        {"no_running", F_NO_RUNNING, K_BOOL, 0, 0, 0, 0},
        {"shmem_size_bytes", F_SHMEM, K_U64, 0, 0, CFG_SHMEM_MIN,
         CFG_SHMEM_MAX},
        {"block_client", F_BLOCK, K_BOOL, 0, 0, 0, 0},
        {"block_client_timeout_us", F_BLOCK_TIMEOUT, K_U64, 0, 0, 1,
         CFG_BLOCK_TIMEOUT_MAX_MS * 1000ull},
        {"dump_at_max", F_DUMP_AT_MAX, K_BOOL, 0, 0, 0, 0},
        {"continuous_dump_config", F_CONTINUOUS, K_MESSAGE, 0, 0, 0, 0},
        {"dump_phase_ms", F_DUMP_PHASE, K_U64, 0, 1, 0, CFG_MS_MAX},
        {"dump_interval_ms", F_DUMP_INTERVAL, K_U64, 0, 1, 0, CFG_MS_MAX},
        {"heaps", F_HEAPS, K_STRING, 1, 0, 0, 0},
        {"all_heaps", F_ALL_HEAPS, K_BOOL, 0, 0, 0, 0},
        {"exclude_heaps", F_EXCLUDE_HEAPS, K_STRING, 1, 0, 0, 0},
        {"heap_sampling_intervals", F_HEAP_INTERVALS, K_U64, 1, 0, 1,
         CFG_INTERVAL_MAX},
        /* A fraction, parsed by its own case. */
        {"adaptive_sampling_shmem_threshold", F_ADAPTIVE_THRESHOLD, K_U64, 0, 0,
         0, 0},
        {"adaptive_sampling_max_sampling_interval_bytes", F_ADAPTIVE_MAX, K_U64,
         0, 0, 1, CFG_INTERVAL_MAX},
        /* "dwarf" or "fp", quoted or not. */
        {"unwind", F_UNWIND, K_STRING, 0, 0, 0, 0},
        {"max_frames", F_MAX_FRAMES, K_U64, 0, 0, 1, HP_MAX_FRAMES},
        {"duration_ms", F_DURATION, K_U64, 0, 0, 0, CFG_MS_MAX},
        {"output", F_OUTPUT, K_STRING, 0, 0, 0, 0},
        {"follow_fork", F_FOLLOW_FORK, K_BOOL, 0, 0, 0, 0},
        {"follow_exec", F_FOLLOW_EXEC, K_BOOL, 0, 0, 0, 0},
        {"command", F_COMMAND, K_STRING, 1, 0, 0, 0},
        /* "streaming", "oneshot" or "ring", quoted or not. */
        {"trace_mode", F_TRACE_MODE, K_STRING, 0, 0, 0, 0},
        {"trace_buffer_bytes", F_TRACE_BUFFER, K_U64, 0, 0, HP_TRACE_MIN_BYTES,
         HP_TRACE_MAX_BYTES},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static const struct field *field_find(const char *name, size_t len,
                                      int in_block)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (strlen(fields[i].name) == len &&
		    !memcmp(fields[i].name, name, len) &&
		    fields[i].in_continuous == in_block)
			return &fields[i];
	return NULL;
}

/* ---- the tokenizer ------------------------------------------------------ */

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

static void perr(struct parser *ps, int line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void perr(struct parser *ps, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ps->in_field)
		fprintf(stderr, PREFIX "config %s:%d: field '%s': %s\n",
		        ps->what, line, ps->in_field, msg);
	else
		fprintf(stderr, PREFIX "config %s:%d: %s\n", ps->what, line,
		        msg);
}

/* A value for a message: cut, control characters as '?'. */
static const char *show(char *buf, size_t len, const char *s, size_t n)
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
static void skip_space(struct parser *ps)
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

static int is_ident_start(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       ch == '_';
}

static int is_ident(char ch)
{
	return is_ident_start(ch) || (ch >= '0' && ch <= '9');
}

/* A bare value: a number, true/false, or an identifier. */
static int is_scalar(char ch)
{
	return is_ident(ch) || ch == '.' || ch == '-' || ch == '+';
}

/* A value token: a decoded string (quoted = 1) or a bare scalar. */
struct value {
	char *text; /* malloc'd, NUL-terminated */
	size_t len;
	int quoted;
	int line;
};

/*
 * A double-quoted string at ps->p, decoded.  Escapes: \" \\ \n \t \r \'.
 * 0, or -1 (message printed).
 */
static int read_string(struct parser *ps, struct value *v)
{
	int line = ps->line;
	const char *s = ++ps->p; /* past the quote */
	char *out = malloc((size_t)(ps->end - s) + 1);
	size_t o = 0;

	if (!out) {
		perr(ps, line, "out of memory");
		return -1;
	}
	for (;;) {
		if (ps->p >= ps->end || *ps->p == '\n') {
			perr(ps, line,
			     "unterminated string (a '\"' is missing on this "
			     "line)");
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
			perr(ps, line, "unterminated string (ends in '\\')");
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
		default:
			perr(ps, line,
			     "unknown escape '\\%c' in a string (use \\\" \\\\ "
			     "\\n \\t \\r)",
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
static int read_value(struct parser *ps, struct value *v)
{
	skip_space(ps);
	memset(v, 0, sizeof(*v));
	if (ps->p < ps->end && *ps->p == '"')
		return read_string(ps, v);
	if (ps->p < ps->end && *ps->p == '\'') {
		perr(ps, ps->line, "strings are written in double quotes");
		return -1;
	}
	const char *s = ps->p;
	while (ps->p < ps->end && is_scalar(*ps->p))
		ps->p++;
	if (ps->p == s) {
		char b[8];
		if (s >= ps->end)
			perr(ps, ps->line,
			     "missing value at the end of the "
			     "file");
		else
			perr(ps, ps->line, "missing value (found '%s')",
			     show(b, sizeof(b), s, 1));
		return -1;
	}
	v->len = (size_t)(ps->p - s);
	v->text = strndup(s, v->len);
	v->line = ps->line;
	if (!v->text) {
		perr(ps, ps->line, "out of memory");
		return -1;
	}
	return 0;
}

/* ---- values ------------------------------------------------------------- */

static int value_u64(struct parser *ps, const struct value *v, int size,
                     uint64_t min, uint64_t max, uint64_t *out)
{
	char b[SHOW_MAX + 8];
	const char *t = v->text;

	show(b, sizeof(b), v->text, v->len);
	if (v->quoted) {
		perr(ps, v->line, "expected a number, not a string (\"%s\")",
		     b);
		return -1;
	}
	if (t[0] == '-' && t[1] >= '0' && t[1] <= '9') {
		perr(ps, v->line, "must not be negative ('%s')", b);
		return -1;
	}
	if (!(t[0] >= '0' && t[0] <= '9')) {
		perr(ps, v->line, "not a number ('%s')", b);
		return -1;
	}
	uint64_t x;
	const char *why = NULL;
	if (size) {
		/* 4096, 4K, 64MiB: the command line's parser. */
		if (opt_parse_size(t, &x, &why) < 0 &&
		    strcmp(why, "too large") != 0) {
			perr(ps, v->line, "%s ('%s')", why, b);
			return -1;
		}
	} else {
		char *end;
		errno = 0;
		x = strtoull(t, &end, 10);
		if (*end) {
			perr(ps, v->line, "not a number ('%s')", b);
			return -1;
		}
		if (errno == ERANGE)
			why = "too large";
	}
	if (why || x > max) {
		perr(ps, v->line, "too large ('%s'): at most %" PRIu64, b, max);
		return -1;
	}
	if (x < min) {
		perr(ps, v->line, "too small ('%s'): at least %" PRIu64, b,
		     min);
		return -1;
	}
	*out = x;
	return 0;
}

static int value_bool(struct parser *ps, const struct value *v, bool *out)
{
	char b[SHOW_MAX + 8];

	if (!v->quoted && !strcmp(v->text, "true"))
		*out = true;
	else if (!v->quoted && !strcmp(v->text, "false"))
		*out = false;
	else {
		perr(ps, v->line, "expected true or false ('%s')",
		     show(b, sizeof(b), v->text, v->len));
		return -1;
	}
	return 0;
}

static int value_string(struct parser *ps, const struct value *v)
{
	char b[SHOW_MAX + 8];

	if (!v->quoted) {
		perr(ps, v->line, "expected a string in double quotes ('%s')",
		     show(b, sizeof(b), v->text, v->len));
		return -1;
	}
	if (strlen(v->text) != v->len) {
		perr(ps, v->line, "a string holds a NUL byte");
		return -1;
	}
	return 0;
}

/* (0, 1], in whole percent: the client compares table fill in percent. */
static int value_threshold(struct parser *ps, const struct value *v,
                           uint32_t *pct)
{
	char b[SHOW_MAX + 8];
	char *end;

	show(b, sizeof(b), v->text, v->len);
	errno = 0;
	double x = v->quoted ? NAN : strtod(v->text, &end);
	if (v->quoted || *end || errno || !isfinite(x)) {
		perr(ps, v->line, "not a number ('%s')", b);
		return -1;
	}
	if (!(x > 0 && x <= 1)) {
		perr(ps, v->line,
		     "out of range ('%s'): a fraction of the tables, greater "
		     "than 0 and at most 1",
		     b);
		return -1;
	}
	long p = lround(x * 100);
	if (p < 1) {
		perr(ps, v->line,
		     "too small ('%s'): the resolution is 0.01 (1%%)", b);
		return -1;
	}
	*pct = (uint32_t)p;
	return 0;
}

/* ---- fields ------------------------------------------------------------- */

static int add_cmd(struct parser *ps, struct value *v)
{
	if (ps->ncmd + 2 > ps->capcmd) {
		size_t cap = ps->capcmd ? ps->capcmd * 2 : 8;
		char **a = realloc(ps->cmd, cap * sizeof(*a));
		if (!a) {
			perr(ps, v->line, "out of memory");
			return -1;
		}
		ps->cmd = a;
		ps->capcmd = cap;
	}
	ps->cmd[ps->ncmd++] = v->text;
	ps->cmd[ps->ncmd] = NULL;
	v->text = NULL; /* now owned by ps->cmd */
	return 0;
}

/* Fields in bytes: they take K, M, G as the command line does. */
static int size_field(enum field_id id)
{
	return id == F_INTERVAL || id == F_SHMEM || id == F_HEAP_INTERVALS ||
	       id == F_ADAPTIVE_MAX || id == F_TRACE_BUFFER;
}

static int set_field(struct parser *ps, const struct field *f, struct value *v)
{
	struct session_config *c = ps->c;
	char b[SHOW_MAX + 8];
	uint64_t x = 0;
	const char *why;

	if (f->kind == K_U64 && f->id != F_ADAPTIVE_THRESHOLD &&
	    value_u64(ps, v, size_field(f->id), f->min, f->max, &x) < 0)
		return -1;
	if (f->kind == K_STRING && f->id != F_UNWIND && f->id != F_TRACE_MODE &&
	    value_string(ps, v) < 0)
		return -1;
	switch (f->id) {
	case F_INTERVAL:
		c->interval = x;
		return 0;
	case F_PID:
		why = config_add_pid(c, (long)x);
		if (why)
			perr(ps, v->line, "%s ('%s')", why, v->text);
		return why ? -1 : 0;
	case F_CMDLINE:
	case F_HEAPS:
	case F_EXCLUDE_HEAPS:
		why = f->id == F_CMDLINE ? config_add_name(c, v->text)
		      : f->id == F_HEAPS ? config_add_heap(c, v->text)
		                         : config_add_exclude_heap(c, v->text);
		if (why)
			perr(ps, v->line, "%s (\"%s\")", why,
			     show(b, sizeof(b), v->text, v->len));
		return why ? -1 : 0;
	case F_NO_STARTUP:
		return value_bool(ps, v, &c->no_startup);
	case F_NO_RUNNING:
		return value_bool(ps, v, &c->no_running);
	case F_SHMEM:
		c->shmem_size = x;
		return 0;
	case F_BLOCK:
		return value_bool(ps, v, &c->block_client);
	case F_BLOCK_TIMEOUT:
		/* Whole milliseconds, rounded up: a client never waits less
		 * than asked. */
		c->block_timeout_ms = (uint32_t)((x + 999) / 1000);
		return 0;
	case F_DUMP_AT_MAX:
		return value_bool(ps, v, &c->dump_at_max);
	case F_DUMP_PHASE:
		c->dump_phase_ms = x;
		return 0;
	case F_DUMP_INTERVAL:
		if (x && x < CFG_DUMP_INTERVAL_MIN_MS) {
			perr(ps, v->line,
			     "too small ('%s'): 0 (no continuous dumps) or at "
			     "least %u",
			     v->text, CFG_DUMP_INTERVAL_MIN_MS);
			return -1;
		}
		c->dump_interval_ms = x;
		return 0;
	case F_ALL_HEAPS:
		return value_bool(ps, v, &c->all_heaps);
	case F_HEAP_INTERVALS:
		if (c->nheap_intervals >= (int)CFG_MAX_HEAPS) {
			perr(ps, v->line, "too many: at most %u",
			     CFG_MAX_HEAPS);
			return -1;
		}
		if (!ps->heap_intervals_line)
			ps->heap_intervals_line = v->line;
		c->heap_intervals[c->nheap_intervals++] = x;
		return 0;
	case F_ADAPTIVE_THRESHOLD:
		if (value_threshold(ps, v, &c->adaptive_threshold_pct) < 0)
			return -1;
		c->adaptive = true;
		return 0;
	case F_ADAPTIVE_MAX:
		c->adaptive_max_interval = x;
		return 0;
	case F_UNWIND:
		if (!strcmp(v->text, "dwarf"))
			c->unwind_mode = HP_UNWIND_DWARF;
		else if (!strcmp(v->text, "fp"))
			c->unwind_mode = HP_UNWIND_FP;
		else {
			perr(ps, v->line, "expected \"dwarf\" or \"fp\" ('%s')",
			     show(b, sizeof(b), v->text, v->len));
			return -1;
		}
		return 0;
	case F_MAX_FRAMES:
		c->max_frames = (uint32_t)x;
		return 0;
	case F_DURATION:
		c->duration_ms = x;
		return 0;
	case F_OUTPUT:
		if (!v->len || v->len >= PATH_MAX) {
			perr(ps, v->line, v->len ? "too long" : "empty");
			return -1;
		}
		free(c->output_buf);
		c->output = c->output_buf = v->text;
		v->text = NULL;
		return 0;
	case F_FOLLOW_FORK:
		return value_bool(ps, v, &c->follow_fork);
	case F_FOLLOW_EXEC:
		return value_bool(ps, v, &c->follow_exec);
	case F_COMMAND:
		return add_cmd(ps, v);
	case F_TRACE_MODE: {
		int m = config_trace_mode(v->text);
		if (m < 0) {
			perr(ps, v->line,
			     "expected \"streaming\", \"oneshot\" or \"ring\" "
			     "('%s')",
			     show(b, sizeof(b), v->text, v->len));
			return -1;
		}
		c->trace_mode = (uint32_t)m;
		return 0;
	}
	case F_TRACE_BUFFER:
		c->trace_bytes = x;
		return 0;
	case F_CONTINUOUS:
	case F_COUNT:
		break;
	}
	return -1;
}

static int parse_fields(struct parser *ps, int in_block);

/* One field, its name at ps->p.  0, or -1 (message printed). */
static int parse_field(struct parser *ps, int in_block)
{
	const char *name = ps->p;
	int line = ps->line;
	char b[SHOW_MAX + 8];

	while (ps->p < ps->end && is_ident(*ps->p))
		ps->p++;
	size_t len = (size_t)(ps->p - name);
	const struct field *f = field_find(name, len, in_block);
	if (!f) {
		/* Say where a known field does belong. */
		const struct field *other = field_find(name, len, !in_block);
		show(b, sizeof(b), name, len);
		if (other && !in_block)
			perr(ps, line,
			     "field '%s': belongs inside "
			     "continuous_dump_config { }",
			     b);
		else if (other)
			perr(ps, line,
			     "field '%s': not a field of "
			     "continuous_dump_config (only dump_phase_ms and "
			     "dump_interval_ms)",
			     b);
		else
			perr(ps, line, "field '%s': unknown field", b);
		return -1;
	}
	if (in_block) {
		snprintf(ps->pathbuf, sizeof(ps->pathbuf),
		         "continuous_dump_config.%s", f->name);
		ps->in_field = ps->pathbuf;
	} else {
		ps->in_field = f->name;
	}
	if (!f->repeatable && ps->seen_line[f->id]) {
		perr(ps, line, "given twice (first on line %d)",
		     ps->seen_line[f->id]);
		return -1;
	}
	ps->seen_line[f->id] = line;
	skip_space(ps);
	int colon = ps->p < ps->end && *ps->p == ':';
	if (colon) {
		ps->p++;
		skip_space(ps);
	}
	if (f->kind == K_MESSAGE) {
		if (ps->p >= ps->end || *ps->p != '{') {
			perr(ps, ps->line, "expected '{' after the field name");
			return -1;
		}
		ps->p++;
		ps->block_line = line;
		return parse_fields(ps, 1);
	}
	if (!colon) {
		perr(ps, ps->line, "expected ':' after the field name");
		return -1;
	}
	struct value v;
	if (read_value(ps, &v) < 0)
		return -1;
	int rc = set_field(ps, f, &v);
	free(v.text);
	return rc;
}

/* Fields up to the end of the file, or to the '}' of a block. */
static int parse_fields(struct parser *ps, int in_block)
{
	for (;;) {
		ps->in_field = NULL;
		skip_space(ps);
		if (ps->p >= ps->end) {
			if (!in_block)
				return 0;
			ps->in_field = "continuous_dump_config";
			perr(ps, ps->block_line,
			     "unterminated block: no '}' before the end of the "
			     "file");
			return -1;
		}
		char ch = *ps->p;
		if (ch == '}') {
			if (!in_block) {
				perr(ps, ps->line, "'}' without a block");
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
		if (!is_ident_start(ch)) {
			char b[8];
			perr(ps, ps->line, "expected a field name, found '%s'",
			     show(b, sizeof(b), ps->p, 1));
			return -1;
		}
		if (parse_field(ps, in_block) < 0)
			return -1;
	}
}

/* Checks made once the whole file is read. */
static int parse_end(struct parser *ps)
{
	struct session_config *c = ps->c;

	if (c->nheap_intervals && c->nheap_intervals != c->nheaps) {
		ps->in_field = "heap_sampling_intervals";
		perr(ps, ps->heap_intervals_line,
		     "%d given for %d heap%s: one per `heaps` entry, in the "
		     "same order",
		     c->nheap_intervals, c->nheaps, c->nheaps == 1 ? "" : "s");
		return -1;
	}
	if (ps->ncmd) {
		if (c->argv == c->argv_buf)
			c->argv = NULL;
		free_argv_buf(c->argv_buf);
		c->argv = c->argv_buf = ps->cmd;
		ps->cmd = NULL;
		ps->ncmd = 0;
	}
	return 0;
}

static int read_all(FILE *f, const char *what, char **buf, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);

	if (!b) {
		fprintf(stderr, PREFIX "config %s: out of memory\n", what);
		return -1;
	}
	for (;;) {
		if (n == cap) {
			if (cap > CFG_FILE_MAX) {
				fprintf(stderr,
				        PREFIX
				        "config %s: too large (more than "
				        "1 MiB)\n",
				        what);
				free(b);
				return -1;
			}
			char *nb = realloc(b, cap * 2);
			if (!nb) {
				fprintf(stderr,
				        PREFIX "config %s: out of memory\n",
				        what);
				free(b);
				return -1;
			}
			b = nb;
			cap *= 2;
		}
		size_t r = fread(b + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, PREFIX "config %s: cannot read: %s\n", what,
		        strerror(errno ? errno : EIO));
		free(b);
		return -1;
	}
	if (n > CFG_FILE_MAX) {
		fprintf(stderr,
		        PREFIX "config %s: too large (more than 1 MiB)\n",
		        what);
		free(b);
		return -1;
	}
	*buf = b;
	*len = n;
	return 0;
}

int config_read(struct session_config *c, FILE *f, const char *what)
{
	struct parser ps;
	char *buf;
	size_t len;

	if (read_all(f, what, &buf, &len) < 0)
		return -1;
	memset(&ps, 0, sizeof(ps));
	ps.c = c;
	ps.what = what;
	ps.p = buf;
	ps.end = buf + len;
	ps.line = 1;
	const char *nul = memchr(buf, '\0', len);
	int rc;
	if (nul) {
		int line = 1;
		for (const char *q = buf; q < nul; q++)
			line += *q == '\n';
		perr(&ps, line, "a NUL byte: not a text config");
		rc = -1;
	} else {
		rc = parse_fields(&ps, 0);
		if (!rc)
			rc = parse_end(&ps);
	}
	free_argv_buf(ps.cmd);
	free(buf);
	return rc;
}

int config_load(struct session_config *c, const char *path)
{
	if (!strcmp(path, "-"))
		return config_read(c, stdin, "<stdin>");
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, PREFIX "config %s: cannot open: %s\n", path,
		        strerror(errno));
		return -1;
	}
	int rc = config_read(c, f, path);
	fclose(f);
	return rc;
}

/* ---- cross-field rules -------------------------------------------------- */

static int cerr(const char *field, const char *flag, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int cerr(const char *field, const char *flag, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, PREFIX "field '%s' (%s): %s\n", field, flag, msg);
	return -1;
}

static int check_ranges(const struct session_config *c)
{
	if (c->interval < 1 || c->interval > CFG_INTERVAL_MAX)
		return cerr("sampling_interval_bytes", "-i/--interval",
		            "out of range: 1 to %llu",
		            (unsigned long long)CFG_INTERVAL_MAX);
	if (c->unwind_mode != HP_UNWIND_DWARF && c->unwind_mode != HP_UNWIND_FP)
		return cerr("unwind", "--unwind", "must be dwarf or fp");
	if (c->max_frames < 1 || c->max_frames > HP_MAX_FRAMES)
		return cerr("max_frames", "--max-frames",
		            "out of range: 1 to %u", HP_MAX_FRAMES);
	if (c->shmem_size &&
	    (c->shmem_size < CFG_SHMEM_MIN || c->shmem_size > CFG_SHMEM_MAX))
		return cerr("shmem_size_bytes", "--shmem-size",
		            "out of range: 1 MiB (1048576) to 1 TiB");
	if (c->duration_ms > CFG_MS_MAX)
		return cerr("duration_ms", "-d/--duration",
		            "too long: at most 100 days");
	if (c->dump_interval_ms &&
	    (c->dump_interval_ms < CFG_DUMP_INTERVAL_MIN_MS ||
	     c->dump_interval_ms > CFG_MS_MAX))
		return cerr("continuous_dump_config.dump_interval_ms",
		            "--dump-interval",
		            "out of range: %u ms to 100 days",
		            CFG_DUMP_INTERVAL_MIN_MS);
	if (c->dump_phase_ms > CFG_MS_MAX)
		return cerr("continuous_dump_config.dump_phase_ms",
		            "--dump-phase", "too long: at most 100 days");
	if (c->block_timeout_ms < 1 ||
	    c->block_timeout_ms > CFG_BLOCK_TIMEOUT_MAX_MS)
		return cerr("block_client_timeout_us", "--block-client[=MS]",
		            "out of range: 1 ms to %u ms",
		            CFG_BLOCK_TIMEOUT_MAX_MS);
	if (c->adaptive &&
	    (c->adaptive_threshold_pct < 1 || c->adaptive_threshold_pct > 100))
		return cerr("adaptive_sampling_shmem_threshold", "--adaptive",
		            "out of range: greater than 0 and at most 1 "
		            "(100%%)");
	if (c->adaptive_max_interval > CFG_INTERVAL_MAX)
		return cerr("adaptive_sampling_max_sampling_interval_bytes",
		            "--adaptive-max-interval",
		            "too large: at most %llu",
		            (unsigned long long)CFG_INTERVAL_MAX);
	if (c->trace_mode > HP_TRACE_RING)
		return cerr("trace_mode", "--trace",
		            "must be streaming, oneshot or ring");
	if (c->trace_bytes && (c->trace_bytes < HP_TRACE_MIN_BYTES ||
	                       c->trace_bytes > HP_TRACE_MAX_BYTES))
		return cerr("trace_buffer_bytes", "--trace-buffer",
		            "out of range: %llu (64 KiB) to %llu (16 GiB)",
		            (unsigned long long)HP_TRACE_MIN_BYTES,
		            (unsigned long long)HP_TRACE_MAX_BYTES);
	return 0;
}

static int check_targets(const struct session_config *c)
{
	int have_cmd = c->argv && c->argv[0];

	if (c->npids < 0 || c->npids > CFG_MAX_PIDS)
		return cerr("pid", "-p/--pid", "too many pids: at most %d",
		            CFG_MAX_PIDS);
	if (c->nnames < 0 || c->nnames > CFG_MAX_NAMES)
		return cerr("process_cmdline", "-n/--name",
		            "too many process names: at most %d",
		            CFG_MAX_NAMES);
	for (int i = 0; i < c->npids; i++)
		if (c->pids[i] < 1 || c->pids[i] > CFG_PID_MAX)
			return cerr("pid", "-p/--pid", "invalid pid %d",
			            c->pids[i]);
	for (int i = 0; i < c->nnames; i++) {
		size_t n = c->names[i] ? strlen(c->names[i]) : 0;
		if (n == 0 || n > CFG_NAME_MAX)
			return cerr("process_cmdline", "-n/--name",
			            "%s process name: 1 to %d bytes",
			            n ? "too long a" : "empty", CFG_NAME_MAX);
	}
	if (have_cmd && (c->npids || c->nnames))
		return cerr(c->npids ? "pid" : "process_cmdline",
		            c->npids ? "-p/--pid" : "-n/--name",
		            "a session profiles either a command (-- CMD) or "
		            "running processes (-p, -n), not both");
	if (!have_cmd && !c->npids && !c->nnames)
		return cerr("command", "-- CMD",
		            "nothing to profile: give a command, -p PID or "
		            "-n NAME");
	if (c->argv && c->argv[0] && !c->argv[0][0])
		return cerr("command", "-- CMD", "the program name is empty");
	if ((c->no_startup || c->no_running) && !c->nnames)
		return cerr(c->no_startup ? "no_startup" : "no_running",
		            c->no_startup ? "--no-startup" : "--no-running",
		            "applies only to processes chosen by name "
		            "(process_cmdline, -n)");
	if (c->no_startup && c->no_running && !c->npids)
		return cerr("no_running", "--no-running",
		            "with no_startup too, no process can match the "
		            "names: nothing to profile");
	if (c->output && !c->output[0])
		return cerr("output", "-o/--output", "empty file name");
	return 0;
}

static int check_heap_names(char *const *h, int n, const char *field,
                            const char *flag)
{
	if (n < 0 || n > (int)CFG_MAX_HEAPS)
		return cerr(field, flag, "too many heaps: at most %u",
		            CFG_MAX_HEAPS);
	for (int i = 0; i < n; i++) {
		size_t len = h[i] ? strlen(h[i]) : 0;
		if (len == 0 || len > CFG_HEAP_NAME_MAX)
			return cerr(field, flag, "%s heap name: 1 to %u bytes",
			            len ? "too long a" : "empty",
			            CFG_HEAP_NAME_MAX);
	}
	return 0;
}

static int check_session(const struct session_config *c)
{
	if (c->dump_phase_ms && !c->dump_interval_ms)
		return cerr("continuous_dump_config.dump_phase_ms",
		            "--dump-phase",
		            "needs dump_interval_ms (--dump-interval): the "
		            "phase is when the first continuous dump is taken");
	if (!c->block_client && c->block_timeout_ms != CFG_DEFAULT_BLOCK_MS)
		return cerr("block_client_timeout_us", "--block-client[=MS]",
		            "needs block_client: true");
	if (c->trace_bytes && !c->trace_mode)
		return cerr("trace_buffer_bytes", "--trace-buffer",
		            "needs trace_mode (--trace): the buffer holds the "
		            "event trace");
	if (c->adaptive_max_interval && !c->adaptive)
		return cerr("adaptive_sampling_max_sampling_interval_bytes",
		            "--adaptive-max-interval",
		            "needs adaptive sampling "
		            "(adaptive_sampling_shmem_threshold, --adaptive)");
	if (c->adaptive_max_interval && c->adaptive_max_interval < c->interval)
		return cerr("adaptive_sampling_max_sampling_interval_bytes",
		            "--adaptive-max-interval",
		            "%llu is below the sampling interval %llu",
		            (unsigned long long)c->adaptive_max_interval,
		            (unsigned long long)c->interval);
	if (check_heap_names(c->heaps, c->nheaps, "heaps", "--heaps") ||
	    check_heap_names(c->exclude_heaps, c->nexclude_heaps,
	                     "exclude_heaps", "--exclude-heaps"))
		return -1;
	if (c->all_heaps && c->nheaps)
		return cerr("all_heaps", "--all-heaps",
		            "all_heaps and heaps exclude each other");
	if (c->nexclude_heaps && !c->all_heaps)
		return cerr("exclude_heaps", "--exclude-heaps",
		            "needs all_heaps: true (it removes heaps from "
		            "all of them)");
	if (c->nheap_intervals < 0 || c->nheap_intervals > (int)CFG_MAX_HEAPS)
		return cerr("heap_sampling_intervals", "--heap-intervals",
		            "too many: at most %u", CFG_MAX_HEAPS);
	if (c->nheap_intervals && c->nheap_intervals != c->nheaps)
		return cerr("heap_sampling_intervals", "--heap-intervals",
		            "%d given for %d heaps: one per heap, in the same "
		            "order",
		            c->nheap_intervals, c->nheaps);
	for (int i = 0; i < c->nheap_intervals; i++)
		if (c->heap_intervals[i] < 1 ||
		    c->heap_intervals[i] > CFG_INTERVAL_MAX)
			return cerr("heap_sampling_intervals",
			            "--heap-intervals",
			            "out of range: 1 to %llu",
			            (unsigned long long)CFG_INTERVAL_MAX);
	return 0;
}

int config_check(const struct session_config *c)
{
	if (check_ranges(c) || check_targets(c) || check_session(c))
		return -1;
	return 0;
}

/* ---- printing ----------------------------------------------------------- */

static void put_string(FILE *f, const char *key, const char *s)
{
	fprintf(f, "%s: \"", key);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
	fputs("\"\n", f);
}

static void put_u64(FILE *f, const char *key, uint64_t v)
{
	fprintf(f, "%s: %" PRIu64 "\n", key, v);
}

void config_print(const struct session_config *c, FILE *f)
{
	put_u64(f, "sampling_interval_bytes", c->interval);
	if (c->unwind_mode != HP_UNWIND_DWARF)
		put_string(f, "unwind",
		           c->unwind_mode == HP_UNWIND_FP ? "fp" : "?");
	if (c->max_frames != HP_DEFAULT_FRAMES)
		put_u64(f, "max_frames", c->max_frames);
	if (c->shmem_size)
		put_u64(f, "shmem_size_bytes", c->shmem_size);
	for (int i = 0; i < c->npids; i++)
		put_u64(f, "pid", (uint64_t)c->pids[i]);
	for (int i = 0; i < c->nnames; i++)
		put_string(f, "process_cmdline", c->names[i]);
	if (c->no_startup)
		fputs("no_startup: true\n", f);
	if (c->no_running)
		fputs("no_running: true\n", f);
	if (c->follow_fork)
		fputs("follow_fork: true\n", f);
	if (c->follow_exec)
		fputs("follow_exec: true\n", f);
	for (char **a = c->argv; a && *a; a++)
		put_string(f, "command", *a);
	if (c->output)
		put_string(f, "output", c->output);
	if (c->duration_ms)
		put_u64(f, "duration_ms", c->duration_ms);
	if (c->dump_phase_ms || c->dump_interval_ms) {
		fputs("continuous_dump_config {", f);
		if (c->dump_phase_ms)
			fprintf(f, " dump_phase_ms: %" PRIu64,
			        c->dump_phase_ms);
		if (c->dump_interval_ms)
			fprintf(f, " dump_interval_ms: %" PRIu64,
			        c->dump_interval_ms);
		fputs(" }\n", f);
	}
	if (c->dump_at_max)
		fputs("dump_at_max: true\n", f);
	if (c->block_client)
		fputs("block_client: true\n", f);
	if (c->block_timeout_ms != CFG_DEFAULT_BLOCK_MS)
		put_u64(f, "block_client_timeout_us",
		        (uint64_t)c->block_timeout_ms * 1000);
	if (c->adaptive)
		fprintf(f, "adaptive_sampling_shmem_threshold: %g\n",
		        c->adaptive_threshold_pct / 100.0);
	if (c->adaptive_max_interval)
		put_u64(f, "adaptive_sampling_max_sampling_interval_bytes",
		        c->adaptive_max_interval);
	for (int i = 0; i < c->nheaps; i++)
		put_string(f, "heaps", c->heaps[i]);
	for (int i = 0; i < c->nheap_intervals; i++)
		put_u64(f, "heap_sampling_intervals", c->heap_intervals[i]);
	if (c->all_heaps)
		fputs("all_heaps: true\n", f);
	for (int i = 0; i < c->nexclude_heaps; i++)
		put_string(f, "exclude_heaps", c->exclude_heaps[i]);
	if (c->trace_mode)
		put_string(f, "trace_mode",
		           config_trace_mode_name(c->trace_mode));
	if (c->trace_bytes)
		put_u64(f, "trace_buffer_bytes", c->trace_bytes);
}

/* ---- equality ----------------------------------------------------------- */

static int str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static int strv_eq(char *const *a, char *const *b, int n)
{
	for (int i = 0; i < n; i++)
		if (!str_eq(a[i], b[i]))
			return 0;
	return 1;
}

static int argv_eq(char *const *a, char *const *b)
{
	/* NULL and an empty argv are the same: no command. */
	if (!a || !*a || !b || !*b)
		return (!a || !*a) && (!b || !*b);
	for (; *a && *b; a++, b++)
		if (strcmp(*a, *b))
			return 0;
	return !*a && !*b;
}

bool config_equal(const struct session_config *a,
                  const struct session_config *b)
{
	if (a->interval != b->interval || a->unwind_mode != b->unwind_mode ||
	    a->max_frames != b->max_frames || a->shmem_size != b->shmem_size)
		return false;
	if (!argv_eq(a->argv, b->argv) || a->npids != b->npids ||
	    a->nnames != b->nnames || a->no_startup != b->no_startup ||
	    a->no_running != b->no_running ||
	    a->follow_fork != b->follow_fork ||
	    a->follow_exec != b->follow_exec)
		return false;
	if (a->npids < 0 || a->npids > CFG_MAX_PIDS || a->nnames < 0 ||
	    a->nnames > CFG_MAX_NAMES)
		return false;
	if (memcmp(a->pids, b->pids, (size_t)a->npids * sizeof(a->pids[0])) ||
	    !strv_eq(a->names, b->names, a->nnames))
		return false;
	if (!str_eq(a->output, b->output) || a->duration_ms != b->duration_ms)
		return false;
	if (a->dump_interval_ms != b->dump_interval_ms ||
	    a->dump_phase_ms != b->dump_phase_ms ||
	    a->dump_at_max != b->dump_at_max)
		return false;
	if (a->block_client != b->block_client ||
	    a->block_timeout_ms != b->block_timeout_ms ||
	    a->adaptive != b->adaptive ||
	    (a->adaptive &&
	     a->adaptive_threshold_pct != b->adaptive_threshold_pct) ||
	    a->adaptive_max_interval != b->adaptive_max_interval)
		return false;
	if (a->trace_mode != b->trace_mode || a->trace_bytes != b->trace_bytes)
		return false;
	if (a->nheaps != b->nheaps || a->all_heaps != b->all_heaps ||
	    a->nexclude_heaps != b->nexclude_heaps ||
	    a->nheap_intervals != b->nheap_intervals)
		return false;
	if (a->nheaps < 0 || a->nheaps > (int)CFG_MAX_HEAPS ||
	    a->nexclude_heaps < 0 || a->nexclude_heaps > (int)CFG_MAX_HEAPS ||
	    a->nheap_intervals < 0 || a->nheap_intervals > (int)CFG_MAX_HEAPS)
		return false;
	return strv_eq(a->heaps, b->heaps, a->nheaps) &&
	       strv_eq(a->exclude_heaps, b->exclude_heaps, a->nexclude_heaps) &&
	       !memcmp(a->heap_intervals, b->heap_intervals,
	               (size_t)a->nheap_intervals * sizeof(uint64_t));
}
