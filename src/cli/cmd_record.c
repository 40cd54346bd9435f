/*
 * heapprof record: the command line of a recording session.
 *
 * Options are applied left to right into one struct session_config, so
 * `-c FILE` reads a config on top of what came before and later flags
 * override it; the result is checked once (config_check) and either
 * printed (--print-config) or run (session_run, src/session/session.h).
 * Every bad value is one line naming the flag and the reason, and exit
 * status 2, before anything runs.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/progress.h"
#include "cli/commands.h"
#include "config/config.h"
#include "cli/options.h"
#include "cli/record_summary.h"
#include "cli/record_values.h"
#include "session/session.h"
#include "layout/region.h"

#define PFX "heapprof: record: "

static void record_usage(FILE *f)
{
	fputs("usage: heapprof record [options] [--] CMD [ARGS...]\n"
	      "       heapprof record [options] -p PID[,PID...] | -n "
	      "NAME[,NAME...]\n"
	      "\n"
	      "Runs CMD under the heap profiler, or profiles running "
	      "processes:\n"
	      "-p/-n load libheapprof into a process that does not have it "
	      "(no\n"
	      "restart, no daemon); with the heapprofd daemon running ("
	      "'heapprofd'),\n"
	      "-n also profiles processes as they start.  Writes one "
	      "profile\n"
	      "database: heapprof.<cmd>.<pid>.db for CMD, "
	      "heapprof.<first name or\n"
	      "pid>.<record's pid>.db for -p/-n.  With CMD, exits with CMD's "
	      "status\n"
	      "(1 when CMD succeeded but the profile could not be written, "
	      "e.g. a\n"
	      "full disk); with -p/-n, 0 when at least one process was "
	      "profiled,\n"
	      "else 1.\n"
	      "\n"
	      "targets:\n"
	      "  -p, --pid PID[,PID]    running processes (repeatable)\n"
	      "  -n, --name NAME[,NAME] processes by name (comm or argv[0]; "
	      "repeatable):\n"
	      "                         running ones and ones that start "
	      "during the\n"
	      "                         session (these are profiled from "
	      "startup)\n"
	      "      --no-startup       -n: not the ones that start later\n"
	      "      --no-running       -n: not the ones running now\n"
	      "      --follow-fork      also profile children the targets "
	      "fork; with CMD,\n"
	      "                         also orphans (daemons), and record "
	      "lasts while\n"
	      "                         any of them runs\n"
	      "      --follow-exec      keep profiling every target after it "
	      "execs (new\n"
	      "                         row); without it, CMD itself is "
	      "followed through\n"
	      "                         its own execs (a shim, sh -c 'exec "
	      "...'), not its\n"
	      "                         children\n"
	      "      --no-follow-exec   not even CMD's own exec: profile its "
	      "first image\n"
	      "\n"
	      "session:\n"
	      "  -d, --duration SECONDS end after this long (decimals "
	      "allowed).  With\n"
	      "                         CMD the program runs on unprofiled "
	      "and record\n"
	      "                         still waits for it.  -p/-n sessions "
	      "also end at\n"
	      "                         Ctrl-C/SIGTERM, or when every target "
	      "is gone\n"
	      "                         (-n without --no-startup waits for "
	      "new ones)\n"
	      "  -o, --output FILE      profile to write\n"
	      "  -c, --config FILE      read a text config (- = stdin); "
	      "later flags\n"
	      "                         override it\n"
	      "      --print-config     print the session as a text config "
	      "and exit\n"
	      "\n"
	      "dumps (one is always written at the end; SIGUSR1 to record, "
	      "SIGUSR1 to\n"
	      "heapprofd and 'heapprof dump' add one):\n"
	      "      --dump-interval MS a dump every MS milliseconds\n"
	      "      --dump-phase MS    the first of them after MS (default: "
	      "one interval)\n"
	      "      --dump-at-max      every dump shows the peak of live "
	      "bytes so far\n"
	      "      --no-peak          no peak tracking (by default the peak "
	      "of "
	      "live bytes\n"
	      "                         gets a dump of its own, \"peak\", "
	      "beside the end's)\n"
	      "      --memory-dump PCT%|BYTES  a dump when the process's RSS "
	      "crosses PCT%\n"
	      "                         of its memory cgroup's limit "
	      "(default 80%, when\n"
	      "                         it has one) or BYTES; the dump at "
	      "an OOM kill\n"
	      "                         is marked as such (docs/INCIDENTS.md)\n"
	      "      --no-memory-dumps  no RSS dumps\n"
	      "      --pressure-dumps[=PSI]  a dump when its cgroup reports "
	      "pressure\n"
	      "                         (memory.events high/max, v1 failcnt, "
	      "or PSI some\n"
	      "                         avg10 >= PSI%, default 10); at most "
	      "one per 5 s\n"
	      "\n"
	      "sampling and memory (BYTES: a number, or with K, M, G or KiB, "
	      "MiB, GiB,\n"
	      "multiples of 1024: 4k, 64M):\n"
	      "  -i, --interval BYTES   mean sampling interval (default "
	      "4096);\n"
	      "                         1 records every allocation exactly\n"
	      "      --unwind MODE      dwarf (default, works without frame\n"
	      "                         pointers) or fp (faster, needs them)\n"
	      "      --max-frames N     deepest stack kept, 1..256 (default "
	      "64)\n"
	      "      --shmem-size BYTES shared region per process (default\n"
	      "                         64 MiB, 512 MiB with -i 1)\n"
	      "      --block-client[=MS] when the region is full, the "
	      "program waits up\n"
	      "                         to MS (default 1000) for a larger "
	      "one instead\n"
	      "                         of dropping samples\n"
	      "      --adaptive[=T]     when tables are T full (fraction or "
	      "percent,\n"
	      "                         default 0.9) double the interval\n"
	      "      --adaptive-max-interval BYTES  ... up to this (default "
	      "64 x -i)\n"
	      "\n"
	      "event trace (every allocation and free with time, thread "
	      "and stack;\n"
	      "sampled at -i like the profile, all of them with -i 1; "
	      "docs/TRACE.md):\n"
	      "      --trace[=MODE]     record a trace; MODE (default "
	      "streaming):\n"
	      "                         streaming  read while the program "
	      "runs; when\n"
	      "                                    the buffer is full, drop "
	      "and count\n"
	      "                                    (or wait: --block-client)\n"
	      "                         oneshot    the first events that fit "
	      "the buffer\n"
	      "                         ring       the newest events that fit "
	      "the buffer\n"
	      "                         (also '--trace MODE' when the word is "
	      "one of\n"
	      "                         these three)\n"
	      "      --trace-buffer BYTES  the trace's shared buffer per "
	      "process\n"
	      "                         (default 67108864 = 64 MiB; 65536 to "
	      "16 GiB;\n"
	      "                         rounded down to a power of two of "
	      "64-byte events)\n"
	      "\n"
	      "heaps (custom allocators report theirs through "
	      "<heapprof/heap_profile.h>,\n"
	      "each under its name; docs/HEAPS.md):\n"
	      "      --heaps A,B        profile exactly these heaps "
	      "(default: libc.malloc)\n"
	      "      --all-heaps        every heap the program registers, "
	      "and libc.malloc\n"
	      "      --exclude-heaps A,B  with --all-heaps: not these\n"
	      "      --heap-intervals N,M  per --heaps entry, its interval\n"
	      "  -h, --help             this text\n",
	      f);
}

static int add_pid(struct session_config *c, const char *flag, const char *s)
{
	uint64_t v;
	if (rec_parse_u64(flag, s, 1, CFG_PID_MAX, &v))
		return 2;
	const char *why = config_add_pid(c, (long)v);
	return why ? rec_bad(flag, s, why) : 0;
}

static int add_name(struct session_config *c, const char *flag, const char *s)
{
	const char *why = config_add_name(c, s);
	return why ? rec_bad(flag, s, why) : 0;
}

static int add_heap(struct session_config *c, const char *flag, const char *s)
{
	const char *why = config_add_heap(c, s);
	return why ? rec_bad(flag, s, why) : 0;
}

static int add_exclude(struct session_config *c, const char *flag,
                       const char *s)
{
	const char *why = config_add_exclude_heap(c, s);
	return why ? rec_bad(flag, s, why) : 0;
}

static int add_heap_interval(struct session_config *c, const char *flag,
                             const char *s)
{
	uint64_t v;
	if (rec_parse_size(flag, s, 1, CFG_INTERVAL_MAX, &v))
		return 2;
	const char *why = config_add_heap_interval(c, v);
	return why ? rec_bad(flag, s, why) : 0;
}

enum {
	OPT_UNWIND = 256,
	OPT_MAXF,
	OPT_SHMEM,
	OPT_NO_STARTUP,
	OPT_NO_RUNNING,
	OPT_FOLLOW_FORK,
	OPT_FOLLOW_EXEC,
	OPT_NO_FOLLOW_EXEC,
	OPT_DUMP_INTERVAL,
	OPT_DUMP_PHASE,
	OPT_DUMP_AT_MAX,
	OPT_NO_PEAK,
	OPT_BLOCK,
	OPT_ADAPTIVE,
	OPT_ADAPTIVE_MAX,
	OPT_HEAPS,
	OPT_ALL_HEAPS,
	OPT_EXCLUDE_HEAPS,
	OPT_HEAP_INTERVALS,
	OPT_PRINT_CONFIG,
	OPT_TRACE,
	OPT_TRACE_BUFFER,
	OPT_MEMORY_DUMP,
	OPT_NO_MEMORY_DUMPS,
	OPT_PRESSURE_DUMPS,
};

static const struct option longopts[] = {
        {"interval", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},
        {"unwind", required_argument, NULL, OPT_UNWIND},
        {"max-frames", required_argument, NULL, OPT_MAXF},
        {"shmem-size", required_argument, NULL, OPT_SHMEM},
        {"pid", required_argument, NULL, 'p'},
        {"name", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'd'},
        {"no-startup", no_argument, NULL, OPT_NO_STARTUP},
        {"no-running", no_argument, NULL, OPT_NO_RUNNING},
        {"follow-fork", no_argument, NULL, OPT_FOLLOW_FORK},
        {"follow-exec", no_argument, NULL, OPT_FOLLOW_EXEC},
        {"no-follow-exec", no_argument, NULL, OPT_NO_FOLLOW_EXEC},
        {"dump-interval", required_argument, NULL, OPT_DUMP_INTERVAL},
        {"dump-phase", required_argument, NULL, OPT_DUMP_PHASE},
        {"dump-at-max", no_argument, NULL, OPT_DUMP_AT_MAX},
        {"no-peak", no_argument, NULL, OPT_NO_PEAK},
        {"block-client", optional_argument, NULL, OPT_BLOCK},
        {"adaptive", optional_argument, NULL, OPT_ADAPTIVE},
        {"adaptive-max-interval", required_argument, NULL, OPT_ADAPTIVE_MAX},
        {"heaps", required_argument, NULL, OPT_HEAPS},
        {"all-heaps", no_argument, NULL, OPT_ALL_HEAPS},
        {"exclude-heaps", required_argument, NULL, OPT_EXCLUDE_HEAPS},
        {"heap-intervals", required_argument, NULL, OPT_HEAP_INTERVALS},
        {"config", required_argument, NULL, 'c'},
        {"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
        {"trace", optional_argument, NULL, OPT_TRACE},
        {"trace-buffer", required_argument, NULL, OPT_TRACE_BUFFER},
        {"memory-dump", required_argument, NULL, OPT_MEMORY_DUMP},
        {"no-memory-dumps", no_argument, NULL, OPT_NO_MEMORY_DUMPS},
        {"pressure-dumps", optional_argument, NULL, OPT_PRESSURE_DUMPS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

/* One option into c; 0, or the exit status (message printed). */
static int apply_opt(struct session_config *c, int opt, const char *arg,
                     bool *print_config)
{
	uint64_t v;
	switch (opt) {
	case 'i':
		if (rec_parse_size("-i/--interval", arg, 1, CFG_INTERVAL_MAX,
		                   &v))
			return 2;
		c->interval = v;
		return 0;
	case 'o':
		if (!*arg) {
			fprintf(stderr, PFX "invalid -o/--output '': empty "
			                    "file name\n");
			return 2;
		}
		c->output = arg;
		return 0;
	case OPT_UNWIND: {
		int m = config_unwind_mode(arg);
		if (m < 0)
			return rec_bad("--unwind", arg, "use dwarf or fp");
		c->unwind_mode = (uint32_t)m;
		return 0;
	}
	case OPT_MAXF:
		if (rec_parse_u64("--max-frames", arg, 1, HP_MAX_FRAMES, &v))
			return 2;
		c->max_frames = (uint32_t)v;
		return 0;
	case OPT_SHMEM:
		if (rec_parse_size("--shmem-size", arg, CFG_SHMEM_MIN,
		                   CFG_SHMEM_MAX, &v))
			return 2;
		c->shmem_size = v;
		return 0;
	case 'p':
		return rec_each_item("-p/--pid", arg, add_pid, c);
	case 'n':
		return rec_each_item("-n/--name", arg, add_name, c);
	case 'd':
		return rec_parse_seconds("-d/--duration", arg, &c->duration_ms);
	case OPT_NO_STARTUP:
		c->no_startup = true;
		return 0;
	case OPT_NO_RUNNING:
		c->no_running = true;
		return 0;
	case OPT_FOLLOW_FORK:
		c->follow_fork = true;
		return 0;
	case OPT_FOLLOW_EXEC:
		c->follow_exec = true;
		return 0;
	case OPT_NO_FOLLOW_EXEC:
		c->no_follow_exec = true;
		return 0;
	case OPT_DUMP_INTERVAL:
		return rec_parse_u64("--dump-interval", arg,
		                     CFG_DUMP_INTERVAL_MIN_MS, CFG_MS_MAX,
		                     &c->dump_interval_ms);
	case OPT_DUMP_PHASE:
		return rec_parse_u64("--dump-phase", arg, 0, CFG_MS_MAX,
		                     &c->dump_phase_ms);
	case OPT_DUMP_AT_MAX:
		c->dump_at_max = true;
		return 0;
	case OPT_NO_PEAK:
		c->no_peak = true;
		return 0;
	case OPT_MEMORY_DUMP: {
		/* PCT% of the memory limit, or an RSS in bytes. */
		size_t n = strlen(arg);
		if (n && arg[n - 1] == '%') {
			char pct[16];
			if (n - 1 >= sizeof(pct) || n == 1) {
				fprintf(stderr,
				        PFX "invalid --memory-dump '%s': not a "
				            "percentage of 1 to 100\n",
				        arg);
				return 2;
			}
			memcpy(pct, arg, n - 1);
			pct[n - 1] = '\0';
			if (rec_parse_u64("--memory-dump", pct, 1, 100, &v))
				return 2;
			c->memory_dump_pct = (uint32_t)v;
			c->memory_dump_bytes = 0;
			return 0;
		}
		return rec_parse_size("--memory-dump", arg, 1, CFG_SHMEM_MAX,
		                      &c->memory_dump_bytes);
	}
	case OPT_NO_MEMORY_DUMPS:
		c->no_memory_dumps = true;
		return 0;
	case OPT_PRESSURE_DUMPS:
		c->pressure_dumps = true;
		if (arg) {
			if (rec_parse_u64("--pressure-dumps", arg, 1, 100, &v))
				return 2;
			c->pressure_psi_pct = (uint32_t)v;
		}
		return 0;
	case OPT_BLOCK:
		c->block_client = true;
		if (arg) {
			if (rec_parse_u64("--block-client", arg, 1,
			                  CFG_BLOCK_TIMEOUT_MAX_MS, &v))
				return 2;
			c->block_timeout_ms = (uint32_t)v;
		}
		return 0;
	case OPT_ADAPTIVE:
		c->adaptive = true;
		if (arg)
			return rec_parse_threshold("--adaptive", arg,
			                           &c->adaptive_threshold_pct);
		return 0;
	case OPT_ADAPTIVE_MAX:
		return rec_parse_size("--adaptive-max-interval", arg, 1,
		                      CFG_INTERVAL_MAX,
		                      &c->adaptive_max_interval);
	case OPT_HEAPS:
		return rec_each_item("--heaps", arg, add_heap, c);
	case OPT_ALL_HEAPS:
		c->all_heaps = true;
		return 0;
	case OPT_EXCLUDE_HEAPS:
		return rec_each_item("--exclude-heaps", arg, add_exclude, c);
	case OPT_HEAP_INTERVALS:
		return rec_each_item("--heap-intervals", arg, add_heap_interval,
		                     c);
	case 'c':
		return config_load(c, arg) == 0 ? 0 : 2;
	case OPT_PRINT_CONFIG:
		*print_config = true;
		return 0;
	case OPT_TRACE: {
		int m = arg ? config_trace_mode(arg) : HP_TRACE_STREAMING;
		if (m < 0)
			return rec_bad("--trace", arg,
			               "use streaming, oneshot or ring");
		c->trace_mode = (uint32_t)m;
		return 0;
	}
	case OPT_TRACE_BUFFER:
		return rec_parse_size("--trace-buffer", arg, HP_TRACE_MIN_BYTES,
		                      HP_TRACE_MAX_BYTES, &c->trace_bytes);
	default:
		return 2;
	}
}

/* A session that leaves malloc out says so: an empty-looking profile of
 * a program that only mallocs is then no surprise. */
static void warn_heaps(const struct session_config *c)
{
	if (!config_profiles_malloc(c))
		fprintf(stderr, PFX "libc.malloc is not selected: malloc and "
		                    "new stay out of the profile\n");
}

int cmd_record(int argc, char **argv)
{
	struct session_config cfg;
	config_defaults(&cfg);
	bool print_config = false;
	int rc = 0;
	optind = 1;
	opterr = 0;
	int opt;
	while ((opt = getopt_long(argc, argv, "+:i:o:p:n:d:c:h", longopts,
	                          NULL)) != -1) {
		if (opt == 'h') {
			record_usage(stdout);
			config_free(&cfg);
			return 0;
		}
		if (opt == '?' || opt == ':') {
			/* Name the word as typed (--interval, not -i). */
			const char *w = optind > 1 && optind - 1 < argc
			                        ? argv[optind - 1]
			                        : "";
			if (opt == ':')
				fprintf(stderr,
				        PFX "option '%s' needs a value\n", w);
			else if (optopt > 0 && optopt < 256 &&
			         !(w[0] == '-' && w[1] == '-' && optopt == 'h'))
				/* A short one (maybe inside -abc, where
				 * optind has not moved on yet). */
				fprintf(stderr, PFX "unknown option '-%c'\n",
				        optopt);
			else {
				char hint[128];
				fprintf(stderr, PFX "unknown option '%s'%s\n",
				        w,
				        opt_hint(w, record_usage, hint,
				                 sizeof(hint)));
			}
			config_free(&cfg);
			return 2;
		}
		const char *arg = optarg;
		/* `--trace MODE`: the next word is the mode only when it is
		 * one (else it is the command, or the next option). */
		if (opt == OPT_TRACE && !arg && optind < argc &&
		    config_trace_mode(argv[optind]) >= 0)
			arg = argv[optind++];
		rc = apply_opt(&cfg, opt, arg, &print_config);
		if (rc) {
			config_free(&cfg);
			return rc;
		}
	}
	if (optind < argc)
		cfg.argv = argv + optind; /* overrides a config's command */
	if (config_check(&cfg) != 0) {
		config_free(&cfg);
		return 2;
	}
	warn_heaps(&cfg);
	if (print_config) {
		config_print(&cfg, stdout);
		config_free(&cfg);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	/* argv[argc] is NULL, as main's. */
	progress_record();
	char written[4096];
	rc = session_run(&cfg, argv, written, sizeof(written));
	config_free(&cfg);
	/* On a terminal, what the profile says first (issue 33): read back
	 * from the file just written.  Scripts see the one "profile
	 * written" line, as before. */
	if (written[0] && isatty(STDERR_FILENO))
		record_summary(written);
	return rc;
}
