/*
 * A recording session's configuration: what `heapprof record` takes from
 * its command line, from a text config (-c FILE, -c -) and prints with
 * --print-config.  Field names in the text form follow Perfetto's
 * HeapprofdConfig where one exists (docs/CONFIG.md).
 */
#ifndef HEAPPROF_CONFIG_H
#define HEAPPROF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "layout/layout_v2.h"

#define CFG_MAX_PIDS  1024
#define CFG_MAX_NAMES 64
#define CFG_MAX_HEAPS HP_MAX_HEAPS

/* Ranges, shared by the command line and the text config (CONFIG.md). */
#define CFG_INTERVAL_MAX         (1ull << 40) /* bytes */
#define CFG_SHMEM_MIN            (1ull << 20) /* = HP_REGION_MIN_SIZE */
#define CFG_SHMEM_MAX            (1ull << 40)
#define CFG_PID_MAX              4194304 /* the kernel's PID_MAX_LIMIT */
#define CFG_NAME_MAX             255     /* bytes of a process name */
#define CFG_HEAP_NAME_MAX        (HP_HEAP_NAME_MAX - 1)
#define CFG_BLOCK_TIMEOUT_MAX_MS 60000u
#define CFG_MS_MAX               (100ull * 24 * 3600 * 1000) /* 100 days */
#define CFG_DUMP_INTERVAL_MIN_MS 10u
#define CFG_DEFAULT_INTERVAL     4096u
#define CFG_DEFAULT_BLOCK_MS     1000u
#define CFG_DEFAULT_ADAPTIVE_PCT 90u
#define CFG_DEFAULT_MEMORY_PCT   80u
#define CFG_DEFAULT_PSI_PCT      10u

struct session_config {
	/* Sampling and stacks. */
	uint64_t interval;    /* bytes, 1 = every allocation; default 4096 */
	uint32_t unwind_mode; /* enum hp_unwind_mode */
	uint32_t max_frames;  /* 1..HP_MAX_FRAMES */
	uint64_t shmem_size;  /* 0: collector_default_shmem(interval) */

	/* Targets: a command (argv, NULL-terminated), or pids and names. */
	char **argv;
	int pids[CFG_MAX_PIDS];
	int npids;
	char *names[CFG_MAX_NAMES];
	int nnames;
	bool no_startup; /* -n: do not take processes that start later */
	bool no_running; /* -n: do not take processes running now */
	bool follow_fork;
	bool follow_exec;
	/* -- CMD: not even the command's own exec (record follows it by
	 * default: a shim, a wrapper script, sh -c 'exec ...'). */
	bool no_follow_exec;

	/* Session. */
	const char *output;   /* NULL: heapprof.<name>.<pid>.db */
	uint64_t duration_ms; /* -d; 0: until the targets are gone / Ctrl-C */

	/* Dumps. */
	uint64_t dump_interval_ms; /* 0: no continuous dumps */
	uint64_t dump_phase_ms;    /* first continuous dump after this */
	bool dump_at_max;          /* dumps show the state at the peak */
	bool no_peak;              /* no peak tracking, no "peak" dump */
	/* Memory incidents (session/memwatch.c, docs/INCIDENTS.md): a dump
	 * when the process's RSS crosses memory_dump_bytes, or without it
	 * memory_dump_pct of its cgroup's memory limit (default 80); none
	 * with no_memory_dumps.  pressure_dumps: a dump when its cgroup
	 * reports pressure (memory.events high/max, v1 failcnt, or PSI some
	 * avg10 at pressure_psi_pct or more, default 10). */
	uint64_t memory_dump_bytes;
	uint32_t memory_dump_pct;
	bool no_memory_dumps;
	bool pressure_dumps;
	uint32_t pressure_psi_pct;

	/* Shared memory. */
	bool block_client;
	uint32_t block_timeout_ms; /* default 1000 */
	bool adaptive;             /* double the interval when tables fill */
	uint32_t adaptive_threshold_pct; /* default 90 */
	uint64_t adaptive_max_interval;  /* 0: 64 * interval */

	/* Event trace (record --trace). */
	uint32_t trace_mode;  /* enum hp_trace_mode; HP_TRACE_OFF: none */
	uint64_t trace_bytes; /* --trace-buffer; 0: HP_TRACE_DEFAULT_BYTES */

	/* Heaps (custom allocator API, issue 5; libc.malloc by default). */
	char *heaps[CFG_MAX_HEAPS];
	int nheaps;
	bool all_heaps;
	char *exclude_heaps[CFG_MAX_HEAPS];
	int nexclude_heaps;
	uint64_t heap_intervals[CFG_MAX_HEAPS]; /* parallel to heaps; 0 =
	                                           the session's interval */
	int nheap_intervals;

	/* Storage config_read allocated for argv and output (config_free
	 * frees it); the command line may point argv and output at its own
	 * strings instead.  names, heaps and exclude_heaps are always
	 * malloc'd (config_add_* copies them). */
	char **argv_buf;
	char *output_buf;
};

/* Defaults: interval 4096, dwarf, 64 frames, block timeout 1000 ms,
 * adaptive threshold 90%. */
void config_defaults(struct session_config *c);

/*
 * Reads a text config from f (named `what` in messages, e.g. the file name
 * or "<stdin>") on top of c.  On error prints one line
 * "heapprof: record: config WHAT:LINE: field 'F': REASON" and returns -1.
 */
int config_read(struct session_config *c, FILE *f, const char *what);
/* Loads a file ("-" is stdin) with config_read. */
int config_load(struct session_config *c, const char *path);

/* Checks cross-field rules (e.g. -p with a command, names too long);
 * prints one line naming the field and returns -1 on error. */
int config_check(const struct session_config *c);

/* Writes c as a text config that config_read reads back to the same c. */
void config_print(const struct session_config *c, FILE *f);

/* Frees the strings config_read/strdup'd (names, heaps, argv copies). */
void config_free(struct session_config *c);
/* Frees an argv config_read made (NULL-terminated, each string malloc'd;
 * NULL is nothing). */
void config_free_argv(char **v);

/*
 * Add one target or heap with the checks config_read makes (range, length,
 * count, duplicates); the string is copied.  NULL on success, else the
 * reason ("too long: at most 255 bytes"), for the caller's message.
 */
const char *config_add_pid(struct session_config *c, long pid);
const char *config_add_name(struct session_config *c, const char *name);
const char *config_add_heap(struct session_config *c, const char *name);
const char *config_add_exclude_heap(struct session_config *c, const char *name);
/* The next heap's interval (heap_intervals, parallel to heaps); the range
 * is the caller's to check. */
const char *config_add_heap_interval(struct session_config *c,
                                     uint64_t interval);

/* "dwarf", "fp": the enum hp_unwind_mode; -1 for any other word. */
int config_unwind_mode(const char *word);

/* "streaming", "oneshot", "ring": the enum hp_trace_mode; -1 for any
 * other word. */
int config_trace_mode(const char *word);
/* The word for a mode (HP_TRACE_OFF: "off"). */
const char *config_trace_mode_name(uint32_t mode);

/* Whether libc.malloc is profiled: named in heaps, or, with no heaps
 * named, not excluded. */
bool config_profiles_malloc(const struct session_config *c);

/* Same session: equal fields (the adaptive threshold only counts when
 * adaptive sampling is on: the text form cannot hold it otherwise). */
bool config_equal(const struct session_config *a,
                  const struct session_config *b);

#endif
