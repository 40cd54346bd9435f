/*
 * heapprofd, the per-user broker between profiled processes and `heapprof
 * record -p/-n` sessions (docs/DAEMON.md), and helpers of the control
 * protocol (ctl.h) that only the daemon side needs.
 */
#ifndef HEAPPROF_DAEMON_H
#define HEAPPROF_DAEMON_H

#include <stdint.h>

#include "daemon/ctl.h"

/*
 * Runs the daemon until SIGTERM/SIGINT/SIGHUP or a SHUTDOWN message.
 * Without `foreground` it forks: the parent returns 0 once the child
 * listens (after printing where) or 1 with the child's reason; the child
 * never returns.  With it, logs go to stderr.  Returns the exit status.
 */
int daemon_run(int foreground);

/*
 * The payload size a control message type must have: >= 0 exactly that;
 * -1 variable, at least *min_out; -2 unknown type.
 */
int ctl_payload_size(uint16_t type, uint32_t *min_out);
/* 0 when a header's magic, version, type and len are acceptable, else
 * -EPROTO. */
int ctl_check_hdr(const struct hp_ctl_hdr *h);

#endif
