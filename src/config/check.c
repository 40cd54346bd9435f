/*
 * The session config's cross-field rules (config_check): what neither the
 * command line nor the text form can check one value at a time.  Each
 * error is one line naming the field in both forms (the text field and
 * the flag).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "util/err.h"

#define PREFIX "heapprof: record: "

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
	hp_log(PREFIX "field '%s' (%s): %s\n", field, flag, msg);
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
