/*
 * A progress line on stderr for what may take seconds: reading a big
 * event trace (report, flamegraph, pprof) and writing one at the end of
 * record.  "heapprof: report: reading trace: 3.2M of 7.1M events",
 * rewritten in place, shown only once the command has run for a second,
 * cleared when done, and never when stderr is not a terminal.
 */
#ifndef HEAPPROF_CLI_PROGRESS_H
#define HEAPPROF_CLI_PROGRESS_H

#include <stdint.h>

/* The command cmd ("report") shows the trace reader's progress from now
 * on (tr_set_progress), when stderr is a terminal. */
void progress_trace(const char *cmd);

/* record: the trace read at the end of the session, when stderr is a
 * terminal (collector_set_trace_progress). */
void progress_record(void);

/*
 * The line "heapprof: CMD: WHAT: DONE of TOTAL events" (TOTAL 0:
 * unknown), after the first second since progress_trace; done < 0 clears
 * it.  For any caller with counts of its own.
 */
void progress_show(const char *what, int64_t done, int64_t total);

#endif
