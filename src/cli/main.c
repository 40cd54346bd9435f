/* The heapprof command: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

#ifndef HEAPPROF_VERSION
#define HEAPPROF_VERSION "0.1.0"
#endif

static void usage(FILE *f)
{
	fputs("usage: heapprof <command> [options]\n"
	      "\n"
	      "commands:\n"
	      "  record [-i BYTES] [-o FILE] [--unwind dwarf|fp] [--max-frames "
	      "N] -- CMD [ARGS...]\n"
	      "                 run CMD under the profiler and write a profile "
	      "database\n"
	      "  report FILE [--view space|alloc_space|objects|alloc_objects] "
	      "[--top N]\n"
	      "                 summary and top call stacks of a profile\n"
	      "  sql FILE [QUERY] [--csv]\n"
	      "                 run an SQL query on a profile\n"
	      "  help           this text\n"
	      "  version        print the version\n"
	      "\n"
	      "Run 'heapprof <command> --help' for a command's options.\n",
	      f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
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
	if (!strcmp(cmd, "symbolize"))
		return cmd_symbolize(argc - 1, argv + 1);
	if (!strcmp(cmd, "flamegraph"))
		return cmd_flamegraph(argc - 1, argv + 1);
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") ||
	    !strcmp(cmd, "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("heapprof %s\n", HEAPPROF_VERSION);
		return 0;
	}
	fprintf(stderr, "heapprof: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
