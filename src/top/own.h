/*
 * top's own session, for a process no session profiles (docs/TOP.md):
 * `heapprof record -p PID -o $TMPDIR/heapprof-top.XXXXXX/top.db [-i N]`
 * as a child (agent/record_child.h), which attaches even to a process
 * that never loaded the library; ended with SIGINT (the process runs on,
 * detached) and its directory removed when top quits.
 */
#ifndef HEAPPROF_TOP_OWN_H
#define HEAPPROF_TOP_OWN_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct own_session {
	pid_t child; /* heapprof record; 0: none */
	char dir[PATH_MAX];
	char log[PATH_MAX + 16];
};

/* Starts record on pid (interval: its -i, NULL for record's default), its
 * output to s->log, in its own process group (a Ctrl-C at the terminal is
 * top's to pass on).  0, or -1 with the reason printed. */
int own_start(struct own_session *s, pid_t pid, const char *interval);

/* Whether record still runs (reaps it when not). */
bool own_running(struct own_session *s);

/* Ends record (SIGINT: its session detaches and writes its profile, which
 * top does not keep; SIGKILL after 20 s) and removes the directory.  A
 * session never started is nothing. */
void own_end(struct own_session *s);

#endif
