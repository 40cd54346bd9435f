/*
 * The processes of a profile on the command line: `--pid PID` selects
 * every process of PID, `--pid PID.N` one of them (the ids of
 * store/procid.h), and the choice of one process and of one of its
 * dumps, with the messages every command prints.
 */
#ifndef HEAPPROF_CLI_PROCID_H
#define HEAPPROF_CLI_PROCID_H

#include <stdbool.h>
#include <stddef.h>

#include "cli/options.h"
#include "store/procid.h"
#include "store/reader.h"

/* A --pid value. */
struct procsel {
	long pid;
	long nth; /* 0: every process of pid */
};

/* "PID" or "PID.N".  0, or -1 with a message naming cmd. */
int procsel_parse(const char *cmd, const char *v, struct procsel *out);

/* Whether procs[i] is selected by sel. */
bool procsel_match(const struct procsel *sel, const struct rd_process *procs,
                   size_t n, size_t i);

/* sel as the user wrote it ("8681" or "8681.2"). */
void procsel_format(const struct procsel *sel, char *buf, size_t len);

/*
 * The one process of procs[0..n) that sel selects (any when sel is NULL):
 * its index, or -1 with "heapprof: <cmd>: FILE holds several processes;
 * choose one with --pid", "FILE: no process with pid P" or "FILE: no
 * processes in this profile" printed.
 */
long procid_pick_one(const char *cmd, const char *file,
                     const struct procsel *sel, const struct rd_process *procs,
                     size_t n);

/*
 * The dump ref picks among d[0..n), the dumps of process p: its 0-based
 * index, or -1 with "heapprof: <cmd>: [FILE: ]process PID: ..." printed
 * (opt_pick_dump; file NULL: not named).
 */
long procid_pick_dump(const char *cmd, const char *file,
                      const struct rd_process *p, const struct rd_dump *d,
                      size_t n, const struct dump_ref *ref);

#endif
