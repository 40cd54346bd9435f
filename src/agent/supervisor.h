/*
 * `heapprof serve`'s process supervisor: a `heapprof record -p PID`
 * session as a child for every process the agent serves (targets.h),
 * started when the process is found, started again (backing off) when it
 * ends while its process still runs, forgotten with its process, and
 * ended (SIGINT) when the agent ends.  The profiles and logs are in the
 * agent's directory (serve_config.dir), removed unless kept.
 *
 * Errors: one line "heapprof: serve: ..." on stderr, as is every session
 * that ends while its process runs (its last message, and when it will be
 * tried again).
 */
#ifndef HEAPPROF_AGENT_SUPERVISOR_H
#define HEAPPROF_AGENT_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>

#include "agent/serve.h"

/* What each session's `heapprof record` is given. */
struct supervisor_opts {
	const char *interval; /* -i; NULL: record's default */
	const char *heaps;    /* --heaps; NULL: none */
	bool all_heaps;       /* --all-heaps */
};

struct supervisor;

/* A supervisor of the processes c asks for; c and o must outlive it.
 * NULL when out of memory (message printed). */
struct supervisor *supervisor_new(const struct serve_config *c,
                                  const struct supervisor_opts *o);

/* Once a second: the sessions that ended reaped (those whose process runs
 * are due again later), and one started for every process without one
 * (and for those due again). */
void supervisor_tick(struct supervisor *a);

/* Ends every session (SIGINT; SIGKILL to those still running after
 * 20 s), forgets them (their files removed unless kept) and frees a.
 * NULL is nothing. */
void supervisor_end(struct supervisor *a);

/* The agent's directory into dir (len bytes): output (-o DIR), made if
 * missing, or without it a new temporary one.  0 or -1 (message
 * printed). */
int supervisor_make_dir(const char *output, char *dir, size_t len);

#endif
