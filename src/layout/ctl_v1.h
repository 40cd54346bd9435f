/*
 * The daemon's control protocol, version 1: messages between heapprofd and
 * the heapprof commands that talk to it (a `record -p/-n` session,
 * `heapprof dump`, `heapprof daemon --status/--stop`).  Profiled processes
 * speak wire_v1.h's hello on the same socket; the daemon tells the two
 * apart by the first four bytes (HP_WIRE_MAGIC or HP_CTL_MAGIC).
 *
 * Every message is a struct hp_ctl_hdr followed by `len` payload bytes
 * (len <= HP_CTL_MAX_PAYLOAD); a message may carry one file descriptor
 * (SCM_RIGHTS).  Fixed-width little-endian fields.  A reader checks the
 * magic, version, type and len before it reads the payload, and every
 * payload's size against its type; nothing in a message is trusted.
 * Sent and received by src/daemon/ctl.c (ctl.h).
 */
#ifndef HEAPPROF_LAYOUT_CTL_V1_H
#define HEAPPROF_LAYOUT_CTL_V1_H

#include <stdint.h>

#define HP_CTL_MAGIC       0x54435048u /* "HPCT" */
#define HP_CTL_VERSION     1u
#define HP_CTL_MAX_PAYLOAD 65536u
#define HP_CTL_MAX_PIDS    1024u
#define HP_CTL_MAX_NAMES   64u
#define HP_CTL_NAME_MAX    256u /* bytes of one process name, with NUL */

struct hp_ctl_hdr {
	uint32_t magic;   /* HP_CTL_MAGIC */
	uint16_t version; /* HP_CTL_VERSION */
	uint16_t type;    /* enum hp_ctl_type */
	uint32_t len;     /* payload bytes that follow */
	uint32_t reserved;
};
_Static_assert(sizeof(struct hp_ctl_hdr) == 16, "hp_ctl_hdr size");

enum hp_ctl_type {
	/* session -> daemon: struct hp_ctl_session, then npids int32 pids,
	 * then nnames NUL-terminated names.  Answer: SESSION_OK or ERROR. */
	HP_CTL_SESSION_START = 1,
	/* daemon -> session: struct hp_ctl_session_ok */
	HP_CTL_SESSION_OK = 2,
	/* daemon -> anyone: a NUL-terminated one-line message; the daemon
	 * closes the connection after it when the request failed. */
	HP_CTL_ERROR = 3,
	/* daemon -> session: struct hp_ctl_client, with the client's
	 * connection as the fd.  Its hello has been read; the session answers
	 * it with wire_v1.h's welcome (and region) on that fd. */
	HP_CTL_CLIENT = 4,
	/* daemon -> session: struct hp_ctl_target, what became of a target
	 * the session asked for (or of a process that matched its names). */
	HP_CTL_TARGET = 5,
	/* `heapprof dump` -> daemon: struct hp_ctl_dump.  Answer DUMP_RESULT
	 * once every session concerned has answered (or a bounded wait). */
	HP_CTL_DUMP = 6,
	/* daemon -> session: struct hp_ctl_dump_request */
	HP_CTL_DUMP_REQUEST = 7,
	/* session -> daemon: struct hp_ctl_dump_done */
	HP_CTL_DUMP_DONE = 8,
	/* daemon -> `heapprof dump`: struct hp_ctl_dump_result */
	HP_CTL_DUMP_RESULT = 9,
	/* anyone -> daemon: no payload.  Answer STATUS_REPLY: text, one line
	 * per session and target. */
	HP_CTL_STATUS = 10,
	HP_CTL_STATUS_REPLY = 11,
	/* anyone -> daemon: no payload; the daemon exits cleanly. */
	HP_CTL_SHUTDOWN = 12,
	/* session -> daemon: struct hp_ctl_attached, a process the session
	 * profiles by attaching to it itself (injection, docs/ATTACH.md):
	 * the daemon counts it the session's, for `heapprof dump -p` and
	 * `--status`.  No answer (a daemon that predates it logs and ignores
	 * it). */
	HP_CTL_ATTACHED = 13,
};

/* hp_ctl_session.flags */
#define HP_SESS_STARTUP     0x1u /* profile matching processes that start */
#define HP_SESS_RUNNING     0x2u /* profile matching processes running now */
#define HP_SESS_FOLLOW_FORK 0x4u /* children forked by targets */
#define HP_SESS_FOLLOW_EXEC 0x8u /* targets after they exec */

struct hp_ctl_session {
	uint32_t flags;  /* HP_SESS_* */
	uint32_t npids;  /* <= HP_CTL_MAX_PIDS */
	uint32_t nnames; /* <= HP_CTL_MAX_NAMES */
	uint32_t reserved;
};
_Static_assert(sizeof(struct hp_ctl_session) == 16, "hp_ctl_session size");

struct hp_ctl_session_ok {
	uint64_t session_id;
};

struct hp_ctl_client {
	int32_t pid;           /* from SO_PEERCRED */
	int32_t ppid;          /* from /proc/PID/stat, checked by the daemon */
	uint32_t hello_flags;  /* hp_hello_flags */
	uint32_t from_startup; /* 1: hello from the library constructor */
	uint32_t layout_version; /* from the hello */
	uint32_t reserved;
};

/* hp_ctl_target.status */
enum hp_target_status {
	HP_TGT_SIGNALLED = 1, /* asked to attach (HP_ATTACH_SIGNAL sent) */
	HP_TGT_REJECTED_CONCURRENT = 2, /* profiled by another session */
	HP_TGT_DENIED = 3,    /* another uid, or not ptrace-able by ours */
	HP_TGT_NO_CLIENT = 4, /* libheapprof not loaded, or no handler */
	HP_TGT_GONE = 5,      /* no such process */
	HP_TGT_TIMEOUT = 6,   /* signalled but did not connect in time */
};

struct hp_ctl_target {
	int32_t pid;
	uint32_t status; /* enum hp_target_status */
	char name[64];   /* process name (comm), NUL-terminated */
	char text[192];  /* one-line explanation, NUL-terminated */
};

struct hp_ctl_attached {
	int32_t pid;
	uint32_t reserved;
};

struct hp_ctl_dump {
	int32_t pid; /* 0: every session, every process */
	uint32_t reserved;
};

struct hp_ctl_dump_request {
	uint64_t request_id;
	int32_t pid; /* 0: all of the session's processes */
	uint32_t reserved;
};

struct hp_ctl_dump_done {
	uint64_t request_id;
	uint32_t dumps; /* processes dumped */
	uint32_t errors;
};

struct hp_ctl_dump_result {
	uint32_t sessions; /* sessions that answered */
	uint32_t dumps;    /* processes dumped */
	uint32_t errors;
	uint32_t timeouts; /* sessions that did not answer in time */
};

#endif
