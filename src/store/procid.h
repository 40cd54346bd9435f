/*
 * How every command names a process of a profile (report, pprof,
 * flamegraph): its pid when the profile has one process of that pid, else
 * PID.N, the N-th of them (1-based, in the order they started: upid
 * order).  A pid has several when it exec'd under --follow-exec (a row per
 * image) or was reused.  `--pid PID` selects every process of PID,
 * `--pid PID.N` one of them (cli/procid.h).
 */
#ifndef HEAPPROF_STORE_PROCID_H
#define HEAPPROF_STORE_PROCID_H

#include <stddef.h>

#include "store/reader.h"

/* The id of procs[i] among procs[0..n) into buf ("8681" or "8681.2"). */
void procid_format(const struct rd_process *procs, size_t n, size_t i,
                   char *buf, size_t len);

/* Which of its pid's processes procs[i] is (1-based), and how many there
 * are among procs[0..n). */
void procid_nth(const struct rd_process *procs, size_t n, size_t i, long *nth,
                long *count);

#endif
