/*
 * `heapprof top` (docs/TOP.md): a live view of one process's heap,
 * refreshed every delay_ns: on a terminal until q, Ctrl-C, SIGTERM or
 * SIGHUP, or the process exiting; otherwise (or with iterations) as
 * plain text.  The command line is cli/cmd_top.c; here the loop (top.c),
 * the screen (screen.c) and top's own session (own.c).
 */
#ifndef HEAPPROF_TOP_H
#define HEAPPROF_TOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/reader.h"

struct top_config {
	pid_t pid;             /* -p; 0: the process named proc_name */
	const char *proc_name; /* -n */
	int64_t delay_ns;      /* -d */
	uint64_t iterations;   /* refreshes; 0: until quit (interactive) */
	long rows;             /* --top; 0: as the screen fits */
	enum rd_view view;     /* --view */
	enum top_sort {
		TOP_SORT_VALUE, /* the view's value */
		TOP_SORT_RATE,  /* its change per second */
		TOP_SORT_COUNT, /* the objects behind it */
	} sort;                 /* --sort */
	bool inclusive;         /* --inclusive: on the stack, not only the
	                           allocator's caller */
	const char *interval;   /* -i, for top's own session */
};

/*
 * Runs top on c's process.  The exit status: 0 after the last refresh,
 * q, SIGINT or SIGTERM, or the process exiting; 1 when it cannot be read
 * (each reason one line "heapprof: top: ..." on stderr).
 */
int top_run(const struct top_config *c);

#endif
