/*
 * The session config (config.h): defaults, targets and heaps added with
 * their checks, the trace mode's words, printing as a text config and
 * equality.  The text form is read by config/read.c (with util/cfg.h)
 * and the cross-field rules are config/check.c's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "layout/region.h"

_Static_assert(CFG_SHMEM_MIN == HP_REGION_MIN_SIZE, "shmem minimum");
_Static_assert(CFG_MAX_NAMES <= 64 && CFG_MAX_HEAPS <= 64, "name counts");

void config_defaults(struct session_config *c)
{
	memset(c, 0, sizeof(*c));
	c->interval = CFG_DEFAULT_INTERVAL;
	c->unwind_mode = HP_UNWIND_DWARF;
	c->max_frames = HP_DEFAULT_FRAMES;
	c->block_timeout_ms = CFG_DEFAULT_BLOCK_MS;
	c->adaptive_threshold_pct = CFG_DEFAULT_ADAPTIVE_PCT;
	c->memory_dump_pct = CFG_DEFAULT_MEMORY_PCT;
	c->pressure_psi_pct = CFG_DEFAULT_PSI_PCT;
}

void config_free_argv(char **v)
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
	config_free_argv(c->argv_buf);
	free(c->output_buf);
	c->argv_buf = NULL;
	c->output_buf = NULL;
	c->nnames = c->nheaps = c->nexclude_heaps = 0;
}

int config_unwind_mode(const char *word)
{
	if (!strcmp(word, "dwarf"))
		return HP_UNWIND_DWARF;
	if (!strcmp(word, "fp"))
		return HP_UNWIND_FP;
	return -1;
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

static bool has_heap(char *const *list, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(list[i], "libc.malloc"))
			return true;
	return false;
}

bool config_profiles_malloc(const struct session_config *c)
{
	return c->nheaps ? has_heap(c->heaps, c->nheaps)
	                 : !has_heap(c->exclude_heaps, c->nexclude_heaps);
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

const char *config_add_heap_interval(struct session_config *c,
                                     uint64_t interval)
{
	if (c->nheap_intervals >= (int)CFG_MAX_HEAPS)
		return "too many: at most 64";
	c->heap_intervals[c->nheap_intervals++] = interval;
	return NULL;
}

const char *config_add_exclude_heap(struct session_config *c, const char *name)
{
	return add_string(c->exclude_heaps, &c->nexclude_heaps, CFG_MAX_HEAPS,
	                  CFG_HEAP_NAME_MAX, name, "too many heaps: at most 64",
	                  "too long: heap names are at most 63 bytes");
}

/* ---- printing ----------------------------------------------------------- */

static void put_string(FILE *f, const char *key, const char *s)
{
	fprintf(f, "%s: \"", key);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", f);
		else if (ch == '\t')
			fputs("\\t", f);
		else if (ch == '\r')
			fputs("\\r", f);
		else if (ch < 0x20 || ch == 0x7f)
			/* a config holds no raw control byte (config_read) */
			fprintf(f, "\\x%02x", ch);
		else
			fputc(ch, f);
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
	if (c->no_peak)
		fputs("no_peak: true\n", f);
	if (c->memory_dump_bytes)
		put_u64(f, "memory_dump_bytes", c->memory_dump_bytes);
	if (c->memory_dump_pct != CFG_DEFAULT_MEMORY_PCT)
		put_u64(f, "memory_dump_percent", c->memory_dump_pct);
	if (c->no_memory_dumps)
		fputs("no_memory_dumps: true\n", f);
	if (c->pressure_dumps)
		fputs("pressure_dumps: true\n", f);
	if (c->pressure_psi_pct != CFG_DEFAULT_PSI_PCT)
		put_u64(f, "pressure_psi_percent", c->pressure_psi_pct);
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
	    a->dump_at_max != b->dump_at_max || a->no_peak != b->no_peak)
		return false;
	if (a->memory_dump_bytes != b->memory_dump_bytes ||
	    a->memory_dump_pct != b->memory_dump_pct ||
	    a->no_memory_dumps != b->no_memory_dumps ||
	    a->pressure_dumps != b->pressure_dumps ||
	    a->pressure_psi_pct != b->pressure_psi_pct)
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
