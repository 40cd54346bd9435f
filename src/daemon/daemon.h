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

/* A SESSION_START payload, checked: pids (> 0) and names (1..255 bytes,
 * NUL-terminated in the payload), nothing left over. */
struct ctl_session_req {
	uint32_t flags; /* HP_SESS_* */
	int32_t *pids;
	uint32_t npids;
	char **names; /* malloc'd */
	uint32_t nnames;
};
/* 0, or -EPROTO / -ENOMEM with a one-line reason in err.  Frees what it
 * allocated on error; on success free with ctl_session_req_free. */
int ctl_parse_session(const uint8_t *p, uint32_t len,
                      struct ctl_session_req *out, char *err, size_t errlen);
void ctl_session_req_free(struct ctl_session_req *r);

#endif
