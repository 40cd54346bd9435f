/*
 * The control-socket protocol between a client and a collector, version 1.
 * A client connects to the collector's Unix stream socket, sends one
 * hp_hello; the collector answers one hp_welcome and, when it accepts,
 * passes the region's memfd with SCM_RIGHTS.  After that the connection
 * stays open: its end tells the collector the client is gone.
 * Fixed-width little-endian fields; every size is checked by the reader.
 */
#ifndef HEAPPROF_LAYOUT_WIRE_V1_H
#define HEAPPROF_LAYOUT_WIRE_V1_H

#include <stdint.h>

#define HP_WIRE_MAGIC   0x4c4c4548u /* "HELL" */
#define HP_WIRE_VERSION 1u

/* Environment variable naming the collector's socket for a launched
 * program. */
#define HP_ENV_SOCKET "HEAPPROF_SOCKET"
/* Set by `heapprof record` for its command: how many seccomp filters
 * record itself runs under ("Seccomp_filters:" of /proc/self/status), so
 * the client can tell filters the program added (src/client/sandbox.c). */
#define HP_ENV_SECCOMP "HEAPPROF_SECCOMP_FILTERS"
/* Set by `heapprof record` for its command: what the client keeps of
 * these variables for what the program starts (src/client/client.c,
 * env_scrub).  "1": they stay in the environment (--follow-fork,
 * --follow-exec: children and new images say hello); HP_FOLLOW_OWN_EXEC:
 * they leave it, and come back only for an exec of the process itself
 * (src/client/exec.c: record follows its command through exec by
 * default); unset: they leave it. */
#define HP_ENV_FOLLOW      "HEAPPROF_FOLLOW"
#define HP_FOLLOW_OWN_EXEC "exec"

enum hp_hello_flags {
	HP_HELLO_AT_STARTUP = 0x1, /* sent from the library constructor */
	HP_HELLO_LATE = 0x2,       /* answering HP_ATTACH_SIGNAL */
	/* Already profiled by a collector that is still connected: the
	 * hello only tells the daemon so (a second session is refused for
	 * this process, rejected_concurrent); no region is wanted. */
	HP_HELLO_BUSY = 0x4,
	HP_HELLO_FORK_CHILD = 0x8, /* from a forked child (HP_CFG_FOLLOW_FORK);
	                              ppid is the profiled parent */
	/* From heapprof_internal_attach_begin: the collector's injector asked,
	 * on a socket pair it takes from the process (pidfd_getfd). */
	HP_HELLO_INJECTED = 0x10,
};

/*
 * The per-user daemon's socket: $XDG_RUNTIME_DIR/heapprof/heapprofd.sock,
 * or /tmp/heapprof-<uid>/heapprofd.sock without XDG_RUNTIME_DIR.  The
 * directory is 0700 and owned by the uid.  See src/layout/paths.c.
 */
#define HP_DAEMON_SOCK_NAME "heapprofd.sock"

/*
 * The signal a daemon sends to a running process that has the client
 * loaded, to make it connect (late attach).  A real-time signal whose
 * default action would kill a process without the client: the daemon only
 * sends it to processes whose /proc/PID/status shows it caught (SigCgt)
 * and whose maps hold libheapprof.  The client installs its handler only
 * if the program has not taken the signal itself.
 */
#define HP_ATTACH_SIGNAL 60

struct hp_hello {
	uint32_t magic;          /* HP_WIRE_MAGIC */
	uint32_t version;        /* HP_WIRE_VERSION */
	uint32_t layout_version; /* highest region layout the client speaks */
	uint32_t flags;          /* hp_hello_flags */
	int32_t pid; /* informative; the collector uses SO_PEERCRED */
	int32_t ppid;
	uint64_t reserved[4];
};
_Static_assert(sizeof(struct hp_hello) == 56, "hp_hello size");

enum hp_welcome_status {
	HP_WELCOME_ACCEPT = 0,     /* region fd attached */
	HP_WELCOME_NOT_TARGET = 1, /* this process is not profiled */
	HP_WELCOME_REJECTED_CONCURRENT = 2,
	HP_WELCOME_ERROR = 3,
};

struct hp_welcome {
	uint32_t magic;
	uint32_t version;
	uint32_t status;         /* hp_welcome_status */
	uint32_t layout_version; /* of the region */
	uint64_t region_size;
	/* The client message it answers (HP_CMSG_GROW, HP_CMSG_SNAPSHOT);
	 * 0 for the answer to a hello.  A client waiting for one answer
	 * can tell a late answer to an earlier request. */
	uint32_t answer_to;
	uint32_t reserved0;
	uint64_t reserved[3];
};
_Static_assert(sizeof(struct hp_welcome) == 56, "hp_welcome size");

/*
 * After the welcome, a client may send these on its connection (all other
 * bytes are a protocol error).  HP_CMSG_GROW (--block-client): a table of
 * the current region is full; arg is the enum hp_table.  The collector
 * answers with an hp_welcome: ACCEPT with a new, larger region's fd (new
 * samples go there; the old region stays mapped and is still read), or
 * ERROR when it cannot make room.
 */
enum hp_client_msg_type {
	HP_CMSG_GROW = 1,
	/*
	 * heapprof_take_named_snapshot: arg is the length of the name
	 * (1..HP_SNAPSHOT_NAME_MAX - 1) and that many bytes of name follow
	 * the message (no NUL).  The collector writes a dump of the process
	 * with every live block (reason "snapshot", that name) and answers
	 * with an hp_welcome without fd: ACCEPT once it is in the profile,
	 * ERROR if it could not write it.  One request at a time per
	 * connection (GROW and SNAPSHOT share it).
	 */
	HP_CMSG_SNAPSHOT = 2,
};

/* Longest snapshot name, with its terminating NUL. */
#define HP_SNAPSHOT_NAME_MAX 128

struct hp_client_msg {
	uint32_t magic; /* HP_WIRE_MAGIC */
	uint32_t type;  /* hp_client_msg_type */
	uint64_t arg;
};
_Static_assert(sizeof(struct hp_client_msg) == 16, "hp_client_msg size");

#endif
