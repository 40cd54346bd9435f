/*
 * heapprofd's own declarations, shared by its files (daemon.c says what
 * the daemon does):
 *
 *   daemon.c    startup (socket directory, lock, socket), the poll loop,
 *               its timers and signals, the state D
 *   log.c       the daemon's log and its startup errors
 *   conn.c      peers' connections: accept, reading messages, the
 *               output queue, dispatching a command's messages
 *   hello.c     a profiled process's hello: which session gets it
 *   sessions.c  record sessions: start, end, which names they want,
 *               the status text
 *   targets.c   processes a session asked for: the checks in /proc,
 *               the attach signal, the table of targets
 *   dumps.c     dump requests: asking the sessions, collecting answers
 */
#ifndef HEAPPROF_DAEMON_INT_H
#define HEAPPROF_DAEMON_INT_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/daemon.h"
#include "layout/wire_v1.h"
#include "util/proc.h"

#define CONN_DEADLINE_MS  2000  /* first complete message of a peer */
#define MSG_DEADLINE_MS   2000  /* rest of a later message, once begun */
#define TARGET_TIMEOUT_MS 3000  /* signalled target must connect by then */
#define DUMP_TIMEOUT_MS   10000 /* sessions must answer a DUMP by then */
#define SWEEP_MS          10000 /* forget targets whose process is gone */
#define MAX_CONNS         1024
#define MAX_SESSIONS      128
#define MAX_TARGETS       65536
#define MAX_DUMPS         64
#define OUTQ_MAX_BYTES    (4u << 20)
#define SESSION_SNDBUF    (1 << 20)
#define LOG_MAX_BYTES     (8 << 20)
#define STATUS_MAX        (HP_CTL_MAX_PAYLOAD - 64)
#define ACCEPT_PAUSE_MS   100 /* no descriptor for a new peer: wait */

struct outmsg {
	struct outmsg *next;
	size_t len, off;
	int fd; /* passed with the first byte, closed once sent */
	uint8_t data[];
};

enum conn_kind {
	C_NEW,     /* reading the first 4 bytes */
	C_HELLO,   /* a profiled process: reading its hello */
	C_CTL,     /* a command: reading its first ctl message */
	C_SESSION, /* a record session */
	C_WAIT,    /* a `heapprof dump` waiting for its result */
	C_CLOSING, /* answered; closes once its queue is written */
};

struct session;

struct conn {
	int fd;
	int pid;
	int kind;
	int dead;
	int64_t deadline; /* -1: none */
	uint8_t head[64]; /* hello, or a ctl header */
	size_t have, want;
	uint8_t *payload; /* ctl payload being read */
	struct outmsg *oq, *oq_tail;
	size_t oq_bytes;
	struct session *sess;
	uint64_t dump_id; /* C_WAIT */
	int said_fds;     /* passed descriptors were logged */
};

struct session {
	uint64_t id;
	struct conn *c;
	int pid; /* the record process */
	uint32_t flags;
	int32_t *pids;
	uint32_t npids;
	char **names;
	uint32_t nnames;
	int64_t started_ms;
};

enum tstate { T_PENDING = 1, T_OWNED = 2 };

struct target {
	int pid;
	uint64_t start;
	struct session *s;
	int state;
	int64_t signalled_ms;
	int timeout_sent;
};

struct dumpreq {
	uint64_t id;
	struct conn *client; /* NULL: from SIGUSR1 */
	int64_t deadline;
	uint64_t waiting[MAX_SESSIONS]; /* session ids yet to answer */
	uint32_t nwaiting;
	struct hp_ctl_dump_result res;
};

/* The daemon's one state (daemon.c). */
struct daemon_state {
	int listen_fd, sig_fd;
	char dir[108], sock[108];
	struct conn *conns[MAX_CONNS];
	size_t nconns;
	struct session *sessions[MAX_SESSIONS];
	size_t nsessions;
	struct target *targets;
	size_t ntargets, cap_targets;
	struct dumpreq *dumps[MAX_DUMPS];
	size_t ndumps;
	uint64_t next_session_id, next_dump_id;
	int64_t started_ms, next_sweep_ms;
	/* accept failed for want of descriptors or memory: the listening
	 * socket is not polled until then (else poll returns at once, for
	 * the peer still queued, and the loop spins). */
	int64_t accept_pause_until;
	/* Said once per episode, so that a flood of peers gets one log
	 * line, not one per peer: said_full until a peer is let in again,
	 * said_accept_err until accept finds no peer waiting. */
	int said_full, said_accept_err;
	int quit;
};
extern struct daemon_state D;

/* ---- log.c ---- */

extern int g_startup_fd;     /* background startup: errors go to parent */
extern char g_log_path[160]; /* background: rotated when too large */
/* One line to the daemon's log (stderr; the log file in the
 * background). */
void dlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A startup error: one line to the user. */
void derr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int64_t now_ms(void); /* CLOCK_MONOTONIC */

/* ---- conn.c ---- */

void conn_kill(struct conn *c, const char *why);
void conn_flush(struct conn *c);
int conn_send(struct conn *c, uint16_t type, const void *payload, uint32_t len,
              int fd);
/* Refuses a command's request: an ERROR message, then the close. */
void send_error(struct conn *c, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
void answer_client(struct conn *c, uint32_t status);
void conn_free(struct conn *c);
void accept_conns(void);
void conn_read(struct conn *c);

/* ---- hello.c ---- */

void handle_hello(struct conn *c, const struct hp_hello *h);

/* ---- sessions.c ---- */

void session_start(struct conn *c, const uint8_t *p, uint32_t len);
void session_end(struct session *s);
int is_session_pid(int pid);
int session_wants_name(const struct session *s, const char *argv0,
                       const char *comm);
void status_reply(struct conn *c);

/* ---- targets.c ---- */

int read_status(int pid, struct proc_status *pi);
int all_uids_ours(const struct proc_status *pi);
int read_stat(int pid, uint64_t *start, int *ppid);
/* Tells session s about a target (HP_CTL_TARGET). */
void send_target(struct session *s, int pid, uint32_t status, const char *name,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void target_remove(size_t i);
/* A process session s attached to itself (HP_CTL_ATTACHED): its target,
 * if it runs as our uid and no other session owns it. */
void target_attached(struct session *s, int pid);
struct target *target_find(int pid, uint64_t start);
struct target *target_add(int pid, uint64_t start, struct session *s,
                          int state);
void targets_sweep(void);
void try_target(struct session *s, int pid, int explicit);
void scan_names(struct session *s);

/* ---- dumps.c ---- */

void dump_start(struct conn *client, int pid);
void dump_done(struct session *s, const struct hp_ctl_dump_done *dd);
void dump_finish(size_t i);
void dump_forget_session(uint64_t sid);

#endif
