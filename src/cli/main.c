/* The heapprof command: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "util/suggest.h"

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
	      "and\n"
	      "                 starting processes through heapprofd; write a "
	      "profile database\n"
	      "  report FILE [--view VIEW] [--top N] [--dump N|NAME] [--pid "
	      "P]\n"
	      "                 summary, process memory and top call stacks\n"
	      "  pprof FILE [-o PATH] [--dump N|NAME|--all] [--pid P] [--heap "
	      "H]\n"
	      "                 export gzipped pprof profiles\n"
	      "  flamegraph FILE [-o OUT.html]\n"
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
	      "  help           this text\n"
	      "  version        print the version\n"
	      "\n"
	      "Run 'heapprof <command> --help' for a command's options.\n",
	      f);
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
	if (!strcmp(cmd, "record"))
		return cmd_record(argc - 1, argv + 1);
	if (!strcmp(cmd, "report"))
		return cmd_report(argc - 1, argv + 1);
	if (!strcmp(cmd, "sql"))
		return cmd_sql(argc - 1, argv + 1);
	if (!strcmp(cmd, "pprof"))
		return cmd_pprof(argc - 1, argv + 1);
	if (!strcmp(cmd, "diff"))
		return cmd_diff(argc - 1, argv + 1);
	if (!strcmp(cmd, "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(cmd, "symbolize"))
		return cmd_symbolize(argc - 1, argv + 1);
	if (!strcmp(cmd, "flamegraph"))
		return cmd_flamegraph(argc - 1, argv + 1);
	if (!strcmp(cmd, "daemon"))
		return cmd_daemon(argc - 1, argv + 1);
	if (!strcmp(cmd, "dump"))
		return cmd_dump(argc - 1, argv + 1);
	if (!strcmp(cmd, "snapshot"))
		return cmd_snapshot(argc - 1, argv + 1);
	if (!strcmp(cmd, "top"))
		return cmd_top(argc - 1, argv + 1);
	if (!strcmp(cmd, "serve"))
		return cmd_serve(argc - 1, argv + 1);
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") ||
	    !strcmp(cmd, "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("heapprof %s\n", HEAPPROF_VERSION);
		return 0;
	}
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
