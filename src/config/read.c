/*
 * The session config in text form (see config.h, docs/CONFIG.md): a flat
 * subset of protobuf text format with HeapprofdConfig's field names, so a
 * heapprofd user can read and write it, plus heapprof's own fields.
 *
 * The file is read whole (it is small) and parsed by the one config syntax
 * (util/cfg.h: tokens in cfg_lex.c, fields and the block in cfg_parse.c)
 * with record's grammar: the table of fields and what each sets (here).
 * Every error is one line naming the file, the line, the field and the
 * reason, because a config is often written by hand and the user must
 * find the mistake without guessing.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "layout/region.h"
#include "util/cfg.h"
#include "util/textfile.h"
#include "util/err.h"

/* A config is a few lines; the bound keeps a wrong file (a binary, a
 * huge log) from being read into memory. */
#define CFG_FILE_MAX (1u << 20)

#define PREFIX "heapprof: record: "

/* The fields of the text form, one per entry of the table below. */
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
	F_NO_PEAK,
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

/* record's state while reading (cfg_parser.ctx). */
struct record_text {
	struct session_config *c;
	char **cmd; /* `command` values, in order */
	size_t ncmd, capcmd;
	int heap_intervals_line;
};

/* ---- the field table ---------------------------------------------------- */

static const struct cfg_field fields[] = {
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
        {"no_peak", F_NO_PEAK, K_BOOL, 0, 0, 0, 0},
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
        {"memory_dump_bytes", F_MEMORY_DUMP_BYTES, K_U64, 0, 0, 1,
         CFG_SHMEM_MAX},
        {"memory_dump_percent", F_MEMORY_DUMP_PCT, K_U64, 0, 0, 1, 100},
        {"no_memory_dumps", F_NO_MEMORY_DUMPS, K_BOOL, 0, 0, 0, 0},
        {"pressure_dumps", F_PRESSURE_DUMPS, K_BOOL, 0, 0, 0, 0},
        {"pressure_psi_percent", F_PRESSURE_PSI, K_U64, 0, 0, 1, 100},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* ---- fields ------------------------------------------------------------- */

static int add_cmd(struct cfg_parser *ps, struct value *v)
{
	struct record_text *rt = ps->ctx;
	if (rt->ncmd + 2 > rt->capcmd) {
		size_t cap = rt->capcmd ? rt->capcmd * 2 : 8;
		char **a = realloc(rt->cmd, cap * sizeof(*a));
		if (!a) {
			cfg_perr(ps, v->line, "out of memory");
			return -1;
		}
		rt->cmd = a;
		rt->capcmd = cap;
	}
	rt->cmd[rt->ncmd++] = v->text;
	rt->cmd[rt->ncmd] = NULL;
	v->text = NULL; /* now owned by rt->cmd */
	return 0;
}

/* Fields in bytes: they take K, M, G as the command line does. */
static int size_field(enum field_id id)
{
	return id == F_INTERVAL || id == F_SHMEM || id == F_HEAP_INTERVALS ||
	       id == F_ADAPTIVE_MAX || id == F_TRACE_BUFFER ||
	       id == F_MEMORY_DUMP_BYTES;
}

static int set_field(struct cfg_parser *ps, const struct cfg_field *f,
                     struct value *v)
{
	struct record_text *rt = ps->ctx;
	struct session_config *c = rt->c;
	char b[SHOW_MAX + 8];
	uint64_t x = 0;
	const char *why;

	if (f->kind == K_U64 && f->id != F_ADAPTIVE_THRESHOLD &&
	    cfg_value_u64(ps, v, size_field(f->id), f->min, f->max, &x) < 0)
		return -1;
	if (f->kind == K_STRING && f->id != F_UNWIND && f->id != F_TRACE_MODE &&
	    cfg_value_string(ps, v) < 0)
		return -1;
	switch ((enum field_id)f->id) {
	case F_INTERVAL:
		c->interval = x;
		return 0;
	case F_PID:
		why = config_add_pid(c, (long)x);
		if (why)
			cfg_perr(ps, v->line, "%s ('%s')", why, v->text);
		return why ? -1 : 0;
	case F_CMDLINE:
	case F_HEAPS:
	case F_EXCLUDE_HEAPS:
		why = f->id == F_CMDLINE ? config_add_name(c, v->text)
		      : f->id == F_HEAPS ? config_add_heap(c, v->text)
		                         : config_add_exclude_heap(c, v->text);
		if (why)
			cfg_perr(ps, v->line, "%s (\"%s\")", why,
			         cfg_show(b, sizeof(b), v->text, v->len));
		return why ? -1 : 0;
	case F_NO_STARTUP:
		return cfg_value_bool(ps, v, &c->no_startup);
	case F_NO_RUNNING:
		return cfg_value_bool(ps, v, &c->no_running);
	case F_SHMEM:
		c->shmem_size = x;
		return 0;
	case F_BLOCK:
		return cfg_value_bool(ps, v, &c->block_client);
	case F_BLOCK_TIMEOUT:
		/* Whole milliseconds, rounded up: a client never waits less
		 * than asked. */
		c->block_timeout_ms = (uint32_t)((x + 999) / 1000);
		return 0;
	case F_DUMP_AT_MAX:
		return cfg_value_bool(ps, v, &c->dump_at_max);
	case F_NO_PEAK:
		return cfg_value_bool(ps, v, &c->no_peak);
	case F_DUMP_PHASE:
		c->dump_phase_ms = x;
		return 0;
	case F_DUMP_INTERVAL:
		if (x && x < CFG_DUMP_INTERVAL_MIN_MS) {
			cfg_perr(ps, v->line,
			         "too small ('%s'): 0 (no continuous dumps) or "
			         "at least %u",
			         v->text, CFG_DUMP_INTERVAL_MIN_MS);
			return -1;
		}
		c->dump_interval_ms = x;
		return 0;
	case F_ALL_HEAPS:
		return cfg_value_bool(ps, v, &c->all_heaps);
	case F_HEAP_INTERVALS:
		why = config_add_heap_interval(c, x);
		if (why) {
			cfg_perr(ps, v->line, "%s", why);
			return -1;
		}
		if (!rt->heap_intervals_line)
			rt->heap_intervals_line = v->line;
		return 0;
	case F_ADAPTIVE_THRESHOLD:
		if (cfg_value_threshold(ps, v, &c->adaptive_threshold_pct) < 0)
			return -1;
		c->adaptive = true;
		return 0;
	case F_ADAPTIVE_MAX:
		c->adaptive_max_interval = x;
		return 0;
	case F_UNWIND: {
		int m = config_unwind_mode(v->text);
		if (m < 0) {
			cfg_perr(ps, v->line,
			         "expected \"dwarf\" or \"fp\" ('%s')",
			         cfg_show(b, sizeof(b), v->text, v->len));
			return -1;
		}
		c->unwind_mode = (uint32_t)m;
		return 0;
	}
	case F_MAX_FRAMES:
		c->max_frames = (uint32_t)x;
		return 0;
	case F_DURATION:
		c->duration_ms = x;
		return 0;
	case F_OUTPUT:
		if (!v->len || v->len >= PATH_MAX) {
			cfg_perr(ps, v->line, v->len ? "too long" : "empty");
			return -1;
		}
		free(c->output_buf);
		c->output = c->output_buf = v->text;
		v->text = NULL;
		return 0;
	case F_FOLLOW_FORK:
		return cfg_value_bool(ps, v, &c->follow_fork);
	case F_FOLLOW_EXEC:
		return cfg_value_bool(ps, v, &c->follow_exec);
	case F_COMMAND:
		return add_cmd(ps, v);
	case F_TRACE_MODE: {
		int m = config_trace_mode(v->text);
		if (m < 0) {
			cfg_perr(ps, v->line,
			         "expected \"streaming\", \"oneshot\" or "
			         "\"ring\" ('%s')",
			         cfg_show(b, sizeof(b), v->text, v->len));
			return -1;
		}
		c->trace_mode = (uint32_t)m;
		return 0;
	}
	case F_TRACE_BUFFER:
		c->trace_bytes = x;
		return 0;
	case F_MEMORY_DUMP_BYTES:
		c->memory_dump_bytes = x;
		return 0;
	case F_MEMORY_DUMP_PCT:
		c->memory_dump_pct = (uint32_t)x;
		return 0;
	case F_NO_MEMORY_DUMPS:
		return cfg_value_bool(ps, v, &c->no_memory_dumps);
	case F_PRESSURE_DUMPS:
		return cfg_value_bool(ps, v, &c->pressure_dumps);
	case F_PRESSURE_PSI:
		c->pressure_psi_pct = (uint32_t)x;
		return 0;
	case F_CONTINUOUS:
	case F_COUNT:
		break;
	}
	return -1;
}

/* Checks made once the whole file is read. */
static int parse_end(struct cfg_parser *ps)
{
	struct record_text *rt = ps->ctx;
	struct session_config *c = rt->c;

	if (c->nheap_intervals && c->nheap_intervals != c->nheaps) {
		ps->in_field = "heap_sampling_intervals";
		cfg_perr(ps, rt->heap_intervals_line,
		         "%d given for %d heap%s: one per `heaps` entry, in "
		         "the same order",
		         c->nheap_intervals, c->nheaps,
		         c->nheaps == 1 ? "" : "s");
		return -1;
	}
	if (rt->ncmd) {
		if (c->argv == c->argv_buf)
			c->argv = NULL;
		config_free_argv(c->argv_buf);
		c->argv = c->argv_buf = rt->cmd;
		rt->cmd = NULL;
		rt->ncmd = 0;
	}
	return 0;
}

static const struct cfg_grammar record_grammar = {
        .fields = fields,
        .nfields = NFIELDS,
        .block = "continuous_dump_config",
        .block_fields = "only dump_phase_ms and dump_interval_ms",
        .set = set_field,
        .end = parse_end,
};
_Static_assert(F_COUNT <= CFG_MAX_FIELDS, "record's fields fit cfg.h's");

static int read_all(FILE *f, const char *what, char **buf, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);

	if (!b) {
		hp_log(PREFIX "config %s: out of memory\n", what);
		return -1;
	}
	for (;;) {
		if (n == cap) {
			if (cap > CFG_FILE_MAX) {
				hp_log(PREFIX "config %s: too large (more "
				              "than 1 MiB)\n",
				       what);
				free(b);
				return -1;
			}
			char *nb = realloc(b, cap * 2);
			if (!nb) {
				hp_log(PREFIX "config %s: out of memory\n",
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
		hp_log(PREFIX "config %s: cannot read: %s\n", what,
		       strerror(errno ? errno : EIO));
		free(b);
		return -1;
	}
	if (n > CFG_FILE_MAX) {
		hp_log(PREFIX "config %s: too large (more than 1 MiB)\n", what);
		free(b);
		return -1;
	}
	*buf = b;
	*len = n;
	return 0;
}

/* Parse buf[0..len) (buf[len] a NUL), the text of what. */
static int parse_text(struct session_config *c, char *buf, size_t len,
                      const char *what)
{
	struct record_text rt = {.c = c};
	struct cfg_parser ps = {.g = &record_grammar,
	                        .ctx = &rt,
	                        .subsys = "record",
	                        .what = what};
	int rc = cfg_parse(&ps, buf, len);
	config_free_argv(rt.cmd);
	return rc;
}

int config_read(struct session_config *c, FILE *f, const char *what)
{
	char *buf;
	size_t len;

	if (read_all(f, what, &buf, &len) < 0)
		return -1;
	int rc = parse_text(c, buf, len, what);
	free(buf);
	return rc;
}

int config_load(struct session_config *c, const char *path)
{
	if (!strcmp(path, "-"))
		return config_read(c, stdin, "<stdin>");
	/* A regular file only: a FIFO would block record for ever. */
	char *buf, why[HP_TEXT_WHY_MAX];
	size_t len;
	if (hp_text_read(path, CFG_FILE_MAX, 0, &buf, &len, why) < 0) {
		hp_log(PREFIX "config %s: %s\n", path, why);
		return -1;
	}
	int rc = parse_text(c, buf, len, path);
	free(buf);
	return rc;
}
