/*
 * A `heapprof record` run as a child by the commands that keep a session
 * of their own (`heapprof top`, `heapprof serve`): this very binary
 * (/proc/self/exe), in a process group of its own (a Ctrl-C at the
 * terminal is the parent's to pass on), ended with SIGINT if the parent
 * dies (PR_SET_PDEATHSIG), stdin /dev/null, stdout and stderr appended to
 * a log, the signal mask cleared and SIGPIPE at its default.
 */
#ifndef HEAPPROF_AGENT_RECORD_CHILD_H
#define HEAPPROF_AGENT_RECORD_CHILD_H

#include <stddef.h>
#include <sys/types.h>

/* Starts `heapprof ARGV` (argv[0] "heapprof", NULL-terminated) with its
 * output in log.  The child's pid, or -1 (message printed as subsys). */
pid_t record_child_start(const char *subsys, char *const argv[],
                         const char *log);

/* The last line of log that is not empty, into buf (len bytes); "no
 * message" when there is none.  Returns buf. */
const char *record_child_last_line(const char *log, char *buf, size_t len);

#endif
