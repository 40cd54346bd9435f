/* The heapprof command: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "util/suggest.h"

/* The commit it was built from (Makefile: build/gen/version.h). */
#if defined(__has_include) && __has_include("version.h")
#include "version.h"
#endif
#ifndef HEAPPROF_COMMIT
#define HEAPPROF_COMMIT "unknown"
#endif
#ifndef HEAPPROF_VERSION
#define HEAPPROF_VERSION "0.1.0"
#endif

static void usage(FILE *f)
{
	fputs("usage: heapprof <command> [options]\n"
	      "\n"
	      "commands:\n"
	      "  record [options] -- CMD | -p PID[,..] | -n NAME[,..]\n"
	      "                 run CMD under the profiler, or profile running "
	      "processes\n"
	      "                 (attached, no restart; starting ones through "
	      "heapprofd);\n"
	      "                 write a profile database (the peak, the end, "
	      "memory over time)\n"
	      "  report FILE [--view VIEW] [--top N] [--dump N|NAME|peak|end] "
	      "[--pid "
	      "P]\n"
	      "                 summary, process memory and top call stacks\n"
	      "  pprof FILE [-o PATH] [--dump N|NAME|peak|end|--all] [--pid P] "
	      "[--heap "
	      "H]\n"
	      "                 export gzipped pprof profiles\n"
	      "  flamegraph FILE [-o OUT.html] [--dump N|NAME|peak|end]\n"
	      "                 write a self-contained interactive flame graph "
	      "page\n"
	      "  diff A B | FILE --dumps N,M [-o OUT.pb.gz]\n"
	      "                 call stacks that grew or shrank between two "
	      "profiles or dumps\n"
	      "  check FILE [--baseline OLD.db] RULE... [-f RULES] [--junit "
	      "OUT.xml]\n"
	      "                 a memory gate for CI: exit 1 when a rule "
	      "fails\n"
	      "  symbolize FILE add source lines and inlined frames "
	      "(HEAPPROF_BINARY_PATH)\n"
	      "  sql FILE [QUERY] [--csv]\n"
	      "                 run SQL on a profile; without QUERY, a shell\n"
	      "  daemon [--foreground | --status | --stop]\n"
	      "                 the per-user daemon heapprofd (also run as "
	      "'heapprofd')\n"
	      "  dump [-p PID]  ask the sessions recording through heapprofd "
	      "for a dump now\n"
	      "  snapshot -p PID | -n NAME [-o FILE] [--contents-dir DIR]\n"
	      "                 every live block of a profiled process, now;\n"
	      "                 --list FILE / --name NAME FILE: named "
	      "snapshots\n"
	      "  top -p PID | -n NAME [-d SECONDS] [--once | --iterations N]\n"
	      "                 a live view of a process's heap, like top\n"
	      "  serve -p PID | -n NAME [--listen ADDR:PORT] [-i N]\n"
	      "                 an agent serving heaps: /metrics (Prometheus),"
	      "\n"
	      "                 /debug/pprof/heap (pprof)\n"
	      "  help [COMMAND] this text, or a command's options\n"
	      "  version        print the version\n"
	      "\n"
	      "Run 'heapprof help COMMAND' (or 'heapprof COMMAND --help') for"
	      " its options.\n",
	      f);
}

static const struct {
	const char *name;
	int (*run)(int, char **);
} commands_run[] = {
        {"record", cmd_record},
        {"report", cmd_report},
        {"sql", cmd_sql},
        {"pprof", cmd_pprof},
        {"diff", cmd_diff},
        {"check", cmd_check},
        {"symbolize", cmd_symbolize},
        {"flamegraph", cmd_flamegraph},
        {"daemon", cmd_daemon},
        {"dump", cmd_dump},
        {"snapshot", cmd_snapshot},
        {"top", cmd_top},
        {"serve", cmd_serve},
};

/* The command named name, or NULL. */
static int (*command(const char *name))(int, char **)
{
	for (size_t i = 0; i < sizeof(commands_run) / sizeof(commands_run[0]);
	     i++)
		if (!strcmp(name, commands_run[i].name))
			return commands_run[i].run;
	return NULL;
}

int main(int argc, char **argv)
{
	/* build/heapprofd is a link to heapprof: the daemon by its own name. */
	const char *base = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
	base = base ? base + 1 : argc > 0 && argv[0] ? argv[0] : "";
	if (!strcmp(base, "heapprofd"))
		return cmd_daemon(argc, argv);
	if (argc < 2) {
		/* Nothing asked: the usage is the answer, not an error line. */
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	int (*run)(int, char **) = command(cmd);
	if (run)
		return run(argc - 1, argv + 1);
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") ||
	    !strcmp(cmd, "-h")) {
		/* heapprof help CMD: CMD's own help, as CMD --help. */
		if (argc > 2 && (run = command(argv[2]))) {
			char *hargv[] = {argv[2], "--help", NULL};
			return run(2, hargv);
		}
		if (argc > 2 && strcmp(argv[2], "help") &&
		    strcmp(argv[2], "version")) {
			cmd = argv[2];
			goto unknown;
		}
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("heapprof %s (commit %s)\n", HEAPPROF_VERSION,
		       HEAPPROF_COMMIT);
		return 0;
	}
unknown:;
	/* One line, as every other error: the usage would bury it. */
	static const char *const commands[] = {
	        "record",   "report",    "sql",        "pprof",  "diff",
	        "check",    "symbolize", "flamegraph", "daemon", "dump",
	        "snapshot", "top",       "serve",      "help",   "version"};
	const char *near = hp_suggest(cmd, commands,
	                              sizeof(commands) / sizeof(commands[0]));
	fprintf(stderr,
	        "heapprof: unknown command '%s' (heapprof help lists them)"
	        "%s%s%s\n",
	        cmd, near ? "; did you mean '" : "", near ? near : "",
	        near ? "'?" : "");
	return 2;
}
