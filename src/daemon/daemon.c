/*
 * heapprofd: the per-user broker (docs/DAEMON.md).
 *
 * The daemon owns $XDG_RUNTIME_DIR/heapprof/heapprofd.sock (or
 * /tmp/heapprof-<uid>/).  Two kinds of peers connect to it:
 *
 *  - profiled processes (wire_v1.h hello): from the library constructor,
 *    from a forked child, or in answer to HP_ATTACH_SIGNAL.  The daemon
 *    reads the hello and either answers NOT_TARGET at once or passes the
 *    connection to the session that wants the process (HP_CTL_CLIENT with
 *    SCM_RIGHTS); the session answers the client itself.
 *  - heapprof commands (ctl.h): `record -p/-n` sessions, `dump`, `daemon
 *    --status/--stop`.
 *
 * The daemon never holds profile data: if it dies, sessions and their
 * targets go on.  It runs one poll loop and never blocks in it: every
 * connection is non-blocking, must deliver its first complete message
 * within CONN_DEADLINE_MS, and everything queued for a session is written
 * as the session reads it (bounded).  Everything a peer sends is checked:
 * sizes, counts, string termination; descriptors a peer sends us are
 * closed unread.
 */
#include "daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "layout/layout_v2.h"
#include "layout/paths.h"
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

/* ---- logging -------------------------------------------------------------
 */

static int g_startup_fd = -1; /* background startup: errors go to parent */
static char g_log_path[160];  /* background: rotated when too large */

static void dlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dlog(const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	int n = (int)strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
	n += snprintf(line + n, sizeof(line) - (size_t)n,
	              " heapprofd[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	if (n < (int)sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* A peer that makes us log a lot must not fill the disk. */
	struct stat st;
	if (g_log_path[0] && fstat(2, &st) == 0 && st.st_size > LOG_MAX_BYTES) {
		char old[sizeof(g_log_path) + 4];
		snprintf(old, sizeof(old), "%s.1", g_log_path);
		rename(g_log_path, old);
		int fd = open(g_log_path,
		              O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
		                      O_CLOEXEC,
		              0600);
		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
	}
	ssize_t w = write(2, line, (size_t)n);
	(void)w;
}

/* A startup error: one line to the user (through the parent when we went
 * to the background). */
static void derr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void derr(const char *fmt, ...)
{
	char line[1024];
	int n = snprintf(line, sizeof(line), "heapprof: daemon: ");
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w =
	        write(g_startup_fd >= 0 ? g_startup_fd : 2, line, (size_t)n);
	(void)w;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- /proc ---------------------------------------------------------------
 */

/* /proc/PID/status with its four uids: 0, or -errno (-ENOENT: no such
 * process). */
static int read_status(int pid, struct proc_status *pi)
{
	if (proc_status(pid, pi))
		return -errno;
	return pi->have & PROC_HAVE_UID ? 0 : -EPROTO;
}

static int all_uids_ours(const struct proc_status *pi)
{
	uid_t me = getuid();
	for (int i = 0; i < 4; i++)
		if (pi->uid[i] != me)
			return 0;
	return (pi->have & PROC_HAVE_UID) != 0;
}

/* Start time and ppid from /proc/PID/stat; 0 or -errno.  A pid plus its
 * start time names one process even across pid reuse. */
static int read_stat(int pid, uint64_t *start, int *ppid)
{
	struct proc_stat st = {0};
	int rc = proc_stat(pid, &st) ? -errno : 0;
	if (start)
		*start = st.start_time;
	if (ppid)
		*ppid = st.ppid;
	return rc;
}

static int is_lib(void *ctx, const struct proc_map *m)
{
	const char *slash = strrchr(m->path, '/');
	return slash && !strncmp(slash + 1, "libheapprof", 11);
}

/* The kernel's ptrace-read check, as seen by us: can we read its maps?
 * 0, or -errno.  Also says whether libheapprof is mapped. */
static int check_maps(int pid, int *has_lib)
{
	int rc = proc_maps(pid, is_lib, NULL);
	*has_lib = rc > 0;
	return rc < 0 ? -errno : 0;
}

static int pidfd_open_(int pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/*
 * Sends the attach signal to pid if it is still the process that started
 * at `start`.  Through a pidfd when the kernel has one, so a pid reused
 * between our checks and the signal is never hit.  0 or -errno.
 */
static int send_attach_signal(int pid, uint64_t start)
{
	int pfd = pidfd_open_(pid);
	if (pfd < 0 && errno != ENOSYS)
		return -errno;
	uint64_t now_start;
	if (read_stat(pid, &now_start, NULL) || now_start != start) {
		if (pfd >= 0)
			close(pfd);
		return -ESRCH;
	}
	int rc;
	if (pfd >= 0) {
#ifdef SYS_pidfd_send_signal
		rc = (int)syscall(SYS_pidfd_send_signal, pfd, HP_ATTACH_SIGNAL,
		                  NULL, 0);
#else
		rc = kill(pid, HP_ATTACH_SIGNAL);
#endif
		int e = errno;
		close(pfd);
		errno = e;
	} else {
		rc = kill(pid, HP_ATTACH_SIGNAL);
	}
	return rc ? -errno : 0;
}

/* ---- state ---------------------------------------------------------------
 */

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

static struct {
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
} D;

/* ---- output --------------------------------------------------------------
 */

static void conn_kill(struct conn *c, const char *why)
{
	if (c->dead)
		return;
	if (why)
		dlog("%s", why);
	c->dead = 1;
}

/* Writes what a connection's queue holds, without blocking. */
static void conn_flush(struct conn *c)
{
	while (c->oq && !c->dead) {
		struct outmsg *m = c->oq;
		struct iovec iov = {.iov_base = m->data + m->off,
		                    .iov_len = m->len - m->off};
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		if (m->off == 0 && m->fd >= 0) {
			memset(&cbuf, 0, sizeof(cbuf));
			mh.msg_control = cbuf.buf;
			mh.msg_controllen = sizeof(cbuf.buf);
			struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &m->fd, sizeof(int));
		}
		ssize_t n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			char why[128];
			snprintf(why, sizeof(why),
			         "pid %d: write failed: %s; closing", c->pid,
			         strerror(errno));
			conn_kill(c, errno == EPIPE || errno == ECONNRESET
			                     ? NULL
			                     : why);
			return;
		}
		if (n > 0 && m->fd >= 0) {
			/* The peer has its copy now. */
			close(m->fd);
			m->fd = -1;
		}
		m->off += (size_t)n;
		if (m->off == m->len) {
			c->oq = m->next;
			if (!c->oq)
				c->oq_tail = NULL;
			c->oq_bytes -= m->len;
			free(m);
		}
	}
}

/* Queues one ctl message (and fd, whose ownership we take) on c. */
static int conn_send(struct conn *c, uint16_t type, const void *payload,
                     uint32_t len, int fd)
{
	if (c->dead || len > HP_CTL_MAX_PAYLOAD) {
		if (fd >= 0)
			close(fd);
		return -EPIPE;
	}
	if (c->oq_bytes + sizeof(struct hp_ctl_hdr) + len > OUTQ_MAX_BYTES) {
		char why[128];
		snprintf(why, sizeof(why),
		         "pid %d does not read its messages; closing it",
		         c->pid);
		conn_kill(c, why);
		if (fd >= 0)
			close(fd);
		return -ENOBUFS;
	}
	struct outmsg *m = malloc(sizeof(*m) + sizeof(struct hp_ctl_hdr) + len);
	if (!m) {
		conn_kill(c, "out of memory; closing a connection");
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	struct hp_ctl_hdr h = {.magic = HP_CTL_MAGIC,
	                       .version = HP_CTL_VERSION,
	                       .type = type,
	                       .len = len};
	memcpy(m->data, &h, sizeof(h));
	if (len)
		memcpy(m->data + sizeof(h), payload, len);
	m->next = NULL;
	m->len = sizeof(h) + len;
	m->off = 0;
	m->fd = fd;
	if (c->oq_tail)
		c->oq_tail->next = m;
	else
		c->oq = m;
	c->oq_tail = m;
	c->oq_bytes += m->len;
	conn_flush(c);
	return 0;
}

static void send_error(struct conn *c, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static void send_error(struct conn *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Every refused request is one line in the log, as the peer got it
	 * (the peer's pid is SO_PEERCRED's, not anything it said). */
	dlog("pid %d: refused: %s", c->pid, msg);
	conn_send(c, HP_CTL_ERROR, msg, (uint32_t)strlen(msg) + 1, -1);
	c->kind = C_CLOSING;
	c->deadline = now_ms() + CONN_DEADLINE_MS;
}

/* Answers a profiled process's hello and closes its connection. */
static void answer_client(struct conn *c, uint32_t status)
{
	struct hp_welcome w = {.magic = HP_WIRE_MAGIC,
	                       .version = HP_WIRE_VERSION,
	                       .status = status,
	                       .layout_version = HP_LAYOUT_VERSION};
	/* 56 bytes into a fresh socket's empty buffer: never blocks. */
	ssize_t n = send(c->fd, &w, sizeof(w), MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)n;
	c->dead = 1;
}

static void send_target(struct session *s, int pid, uint32_t status,
                        const char *name, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
static void send_target(struct session *s, int pid, uint32_t status,
                        const char *name, const char *fmt, ...)
{
	struct hp_ctl_target t;
	memset(&t, 0, sizeof(t));
	t.pid = pid;
	t.status = status;
	snprintf(t.name, sizeof(t.name), "%s", name ? name : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t.text, sizeof(t.text), fmt, ap);
	va_end(ap);
	conn_send(s->c, HP_CTL_TARGET, &t, sizeof(t), -1);
}

/* ---- targets -------------------------------------------------------------
 */

static void target_remove(size_t i)
{
	D.targets[i] = D.targets[--D.ntargets];
}

/* The record for pid whose start time matches, or NULL: a record of an
 * earlier process that had the same pid is not it (the timers and the
 * sweep drop those).  Never changes the array, so pointers stay valid. */
static struct target *target_find(int pid, uint64_t start)
{
	for (size_t i = 0; i < D.ntargets; i++)
		if (D.targets[i].pid == pid && D.targets[i].start == start)
			return &D.targets[i];
	return NULL;
}

static struct target *target_add(int pid, uint64_t start, struct session *s,
                                 int state)
{
	if (D.ntargets == D.cap_targets) {
		if (D.cap_targets >= MAX_TARGETS)
			return NULL;
		size_t nc = D.cap_targets ? D.cap_targets * 2 : 64;
		struct target *nt = realloc(D.targets, nc * sizeof(*nt));
		if (!nt)
			return NULL;
		D.targets = nt;
		D.cap_targets = nc;
	}
	struct target *t = &D.targets[D.ntargets++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->start = start;
	t->s = s;
	t->state = state;
	return t;
}

/* Forgets records of processes that are gone (bounded memory for sessions
 * that follow forks for days). */
static void targets_sweep(void)
{
	for (size_t i = 0; i < D.ntargets;) {
		uint64_t st;
		if (read_stat(D.targets[i].pid, &st, NULL) ||
		    st != D.targets[i].start) {
			/* A pending one not yet reported gets its GONE from
			 * the timer; an owned one's end is seen by its
			 * session. */
			if (D.targets[i].state == T_OWNED ||
			    D.targets[i].timeout_sent) {
				target_remove(i);
				continue;
			}
		}
		i++;
	}
}

static int is_session_pid(int pid)
{
	for (size_t i = 0; i < D.nsessions; i++)
		if (D.sessions[i]->pid == pid)
			return 1;
	return 0;
}

static int session_wants_name(const struct session *s, const char *argv0,
                              const char *comm)
{
	for (uint32_t i = 0; i < s->nnames; i++)
		if (proc_name_matches(s->names[i], argv0, comm))
			return 1;
	return 0;
}

/*
 * Checks one running process for session s and signals it (steps a-d of
 * docs/DAEMON.md).  `explicit` is 1 for -p, 0 for a name match (then pi,
 * start are already read and the uid checked by the caller).
 */
static void try_target(struct session *s, int pid, int explicit)
{
	struct proc_status pi;
	char comm[64] = "";
	if (pid == getpid()) {
		send_target(s, pid, HP_TGT_DENIED, "heapprofd",
		            "pid %d is heapprofd itself", pid);
		return;
	}
	if (pid == s->pid) {
		send_target(s, pid, HP_TGT_DENIED, "",
		            "pid %d is this session's own process", pid);
		return;
	}
	int rc = read_status(pid, &pi);
	if (rc == -ENOENT) {
		send_target(s, pid, HP_TGT_GONE, "", "no process %d", pid);
		return;
	}
	if (rc) {
		send_target(s, pid, HP_TGT_DENIED, "",
		            "cannot read /proc/%d/status: %s", pid,
		            strerror(-rc));
		return;
	}
	if (!all_uids_ours(&pi)) {
		send_target(s, pid, HP_TGT_DENIED, pi.name,
		            "%s (pid %d) runs as uid %u, not as uid %u",
		            pi.name, pid, (unsigned)pi.uid[1],
		            (unsigned)getuid());
		return;
	}
	int has_lib = 0;
	rc = check_maps(pid, &has_lib);
	if (rc) {
		send_target(s, pid, HP_TGT_DENIED, pi.name,
		            "%s (pid %d) cannot be traced by uid %u "
		            "(/proc/%d/maps: %s)",
		            pi.name, pid, (unsigned)getuid(), pid,
		            strerror(-rc));
		return;
	}
	proc_comm(pid, comm, sizeof(comm));
	const char *nm = comm[0] ? comm : pi.name;
	if (!has_lib) {
		send_target(s, pid, HP_TGT_NO_CLIENT, nm,
		            "%s (pid %d) does not have libheapprof loaded "
		            "(start it with LD_PRELOAD=libheapprof.so)",
		            nm, pid);
		return;
	}
	if (!(pi.sigcgt & (1ull << (HP_ATTACH_SIGNAL - 1)))) {
		send_target(s, pid, HP_TGT_NO_CLIENT, nm,
		            "%s (pid %d) has libheapprof but does not catch "
		            "signal %d (no heapprofd ran when it started: "
		            "start it after heapprofd, or with "
		            "HEAPPROF_ATTACH_SIGNAL=1; or the program uses the "
		            "signal)",
		            nm, pid, HP_ATTACH_SIGNAL);
		return;
	}
	uint64_t start;
	if (read_stat(pid, &start, NULL)) {
		send_target(s, pid, HP_TGT_GONE, nm, "no process %d", pid);
		return;
	}
	struct target *t = target_find(pid, start);
	if (t && t->s != s) {
		send_target(
		        s, pid, HP_TGT_REJECTED_CONCURRENT, nm,
		        "%s (pid %d) is already profiled by session %" PRIu64
		        " (pid %d)",
		        nm, pid, t->s->id, t->s->pid);
		return;
	}
	if (t)
		return; /* named twice by this session */
	t = target_add(pid, start, s, T_PENDING);
	if (!t) {
		send_target(s, pid, HP_TGT_DENIED, nm,
		            "heapprofd tracks too many processes");
		return;
	}
	rc = send_attach_signal(pid, start);
	if (rc) {
		target_remove((size_t)(t - D.targets));
		send_target(s, pid, HP_TGT_GONE, nm, "%s (pid %d) exited", nm,
		            pid);
		return;
	}
	t->signalled_ms = now_ms();
	dlog("session %" PRIu64 ": signalled %s (pid %d)%s", s->id, nm, pid,
	     explicit ? "" : " (name match)");
	send_target(s, pid, HP_TGT_SIGNALLED, nm, "%s (pid %d) asked to attach",
	            nm, pid);
}

/* One process of /proc for scan_names's session. */
static int scan_one(void *ctx, pid_t p)
{
	struct session *s = ctx;
	int pid = (int)p;
	if (pid == getpid() || is_session_pid(pid))
		return 0;
	int named = 0; /* already reported as an explicit -p */
	for (uint32_t i = 0; i < s->npids && !named; i++)
		named = s->pids[i] == pid;
	if (named)
		return 0;
	struct proc_status pi;
	if (read_status(pid, &pi))
		return 0;
	if (!all_uids_ours(&pi)) {
		/* Nothing else is read from another uid's process; its
		 * name (status) tells the user why it was left out. */
		if (session_wants_name(s, "", pi.name))
			send_target(s, pid, HP_TGT_DENIED, pi.name,
			            "%s (pid %d) runs as uid %u, not as uid %u",
			            pi.name, pid, (unsigned)pi.uid[1],
			            (unsigned)getuid());
		return 0;
	}
	int has_lib;
	if (check_maps(pid, &has_lib)) {
		if (session_wants_name(s, "", pi.name))
			try_target(s, pid, 0); /* says DENIED */
		return 0;
	}
	char argv0[4096], comm[64];
	proc_argv0(pid, argv0, sizeof(argv0));
	proc_comm(pid, comm, sizeof(comm));
	if (session_wants_name(s, argv0, comm))
		try_target(s, pid, 0);
	return 0;
}

/* Every running process whose name the session wants. */
static void scan_names(struct session *s)
{
	if (proc_pids(scan_one, s) < 0)
		dlog("cannot open /proc: %s", strerror(errno));
}

/* ---- sessions ------------------------------------------------------------
 */

static void dump_forget_session(uint64_t sid);

static void session_free(struct session *s)
{
	for (uint32_t i = 0; i < s->nnames; i++)
		free(s->names[i]);
	free(s->names);
	free(s->pids);
	free(s);
}

static void session_end(struct session *s)
{
	for (size_t i = 0; i < D.ntargets;) {
		if (D.targets[i].s == s)
			target_remove(i);
		else
			i++;
	}
	for (size_t i = 0; i < D.nsessions; i++) {
		if (D.sessions[i] == s) {
			D.sessions[i] = D.sessions[--D.nsessions];
			break;
		}
	}
	dump_forget_session(s->id);
	dlog("session %" PRIu64 " (pid %d) ended", s->id, s->pid);
	session_free(s);
}

static void session_start(struct conn *c, const uint8_t *p, uint32_t len)
{
	struct ctl_session_req req;
	char err[160];
	if (ctl_parse_session(p, len, &req, err, sizeof(err))) {
		send_error(c, "%s", err);
		return;
	}
	if (D.nsessions == MAX_SESSIONS) {
		ctl_session_req_free(&req);
		send_error(c, "heapprofd serves at most %d sessions",
		           MAX_SESSIONS);
		return;
	}
	struct session *s = calloc(1, sizeof(*s));
	if (!s) {
		ctl_session_req_free(&req);
		send_error(c, "out of memory");
		return;
	}
	s->pids = req.pids;
	s->npids = req.npids;
	s->names = req.names;
	s->nnames = req.nnames;
	s->id = ++D.next_session_id;
	s->c = c;
	s->pid = c->pid;
	s->flags = req.flags;
	s->started_ms = now_ms();
	D.sessions[D.nsessions++] = s;
	c->kind = C_SESSION;
	c->sess = s;
	c->deadline = -1;
	int big = SESSION_SNDBUF;
	setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	dlog("session %" PRIu64 " (pid %d): %u pids, %u names, flags 0x%x",
	     s->id, s->pid, s->npids, s->nnames, s->flags);
	struct hp_ctl_session_ok ok = {.session_id = s->id};
	conn_send(c, HP_CTL_SESSION_OK, &ok, sizeof(ok), -1);
	for (uint32_t i = 0; i < s->npids && !c->dead; i++)
		try_target(s, s->pids[i], 1);
	if (s->nnames && (s->flags & HP_SESS_RUNNING) && !c->dead)
		scan_names(s);
}

/* ---- dumps ---------------------------------------------------------------
 */

static void dump_finish(size_t i)
{
	struct dumpreq *r = D.dumps[i];
	r->res.timeouts += r->nwaiting;
	if (r->client && !r->client->dead) {
		conn_send(r->client, HP_CTL_DUMP_RESULT, &r->res,
		          sizeof(r->res), -1);
		r->client->kind = C_CLOSING;
		r->client->deadline = now_ms() + CONN_DEADLINE_MS;
	}
	if (r->client)
		r->client->dump_id = 0;
	dlog("dump %" PRIu64 ": %u sessions answered, %u processes dumped, "
	     "%u errors, %u timeouts",
	     r->id, r->res.sessions, r->res.dumps, r->res.errors,
	     r->res.timeouts);
	free(r);
	D.dumps[i] = D.dumps[--D.ndumps];
}

/* Sends DUMP_REQUEST to every session concerned; client may be NULL. */
static void dump_start(struct conn *client, int pid)
{
	if (D.ndumps == MAX_DUMPS) {
		if (client)
			send_error(client, "too many dumps in progress");
		return;
	}
	struct dumpreq *r = calloc(1, sizeof(*r));
	if (!r) {
		if (client)
			send_error(client, "out of memory");
		return;
	}
	r->id = ++D.next_dump_id;
	r->client = client;
	r->deadline = now_ms() + DUMP_TIMEOUT_MS;
	struct hp_ctl_dump_request q = {.request_id = r->id, .pid = pid};
	for (size_t i = 0; i < D.nsessions; i++) {
		struct session *s = D.sessions[i];
		if (pid) {
			uint64_t st;
			if (read_stat(pid, &st, NULL))
				break;
			struct target *t = target_find(pid, st);
			if (!t || t->s != s || t->state != T_OWNED)
				continue;
		}
		if (conn_send(s->c, HP_CTL_DUMP_REQUEST, &q, sizeof(q), -1))
			continue;
		r->waiting[r->nwaiting++] = s->id;
	}
	if (client) {
		client->kind = C_WAIT;
		client->dump_id = r->id;
		client->deadline = -1;
	}
	dlog("dump %" PRIu64 " (%s, pid %d): asked %u sessions", r->id,
	     client ? "heapprof dump" : "SIGUSR1", pid, r->nwaiting);
	D.dumps[D.ndumps++] = r;
	if (!r->nwaiting)
		dump_finish(D.ndumps - 1);
}

static void dump_done(struct session *s, const struct hp_ctl_dump_done *dd)
{
	for (size_t i = 0; i < D.ndumps; i++) {
		struct dumpreq *r = D.dumps[i];
		if (r->id != dd->request_id)
			continue;
		for (uint32_t k = 0; k < r->nwaiting; k++) {
			if (r->waiting[k] != s->id)
				continue;
			r->waiting[k] = r->waiting[--r->nwaiting];
			r->res.sessions++;
			r->res.dumps += dd->dumps;
			r->res.errors += dd->errors;
			if (!r->nwaiting)
				dump_finish(i);
			return;
		}
		return;
	}
}

static void dump_forget_session(uint64_t sid)
{
	for (size_t i = 0; i < D.ndumps;) {
		struct dumpreq *r = D.dumps[i];
		int finished = 0;
		for (uint32_t k = 0; k < r->nwaiting; k++) {
			if (r->waiting[k] != sid)
				continue;
			r->waiting[k] = r->waiting[--r->nwaiting];
			r->res.timeouts++;
			if (!r->nwaiting) {
				dump_finish(i);
				finished = 1;
			}
			break;
		}
		if (!finished)
			i++;
	}
}

/* ---- status --------------------------------------------------------------
 */

static void status_reply(struct conn *c)
{
	char *buf = malloc(STATUS_MAX + 64);
	if (!buf) {
		send_error(c, "out of memory");
		return;
	}
	size_t n = 0;
#define PUT(...)                                                               \
	do {                                                                   \
		if (n < STATUS_MAX)                                            \
			n += (size_t)snprintf(buf + n, STATUS_MAX + 64 - n,    \
			                      __VA_ARGS__);                    \
	} while (0)
	int64_t now = now_ms();
	PUT("heapprofd pid %d, socket %s, up %" PRId64 " s, %zu session%s\n",
	    (int)getpid(), D.sock, (now - D.started_ms) / 1000, D.nsessions,
	    D.nsessions == 1 ? "" : "s");
	for (size_t i = 0; i < D.nsessions; i++) {
		struct session *s = D.sessions[i];
		PUT("session %" PRIu64 ": pid %d, %" PRId64 " s,", s->id,
		    s->pid, (now - s->started_ms) / 1000);
		if (s->npids) {
			PUT(" -p ");
			for (uint32_t k = 0; k < s->npids && k < 32; k++)
				PUT("%s%d", k ? "," : "", s->pids[k]);
			if (s->npids > 32)
				PUT(",...");
		}
		if (s->nnames) {
			PUT(" -n ");
			for (uint32_t k = 0; k < s->nnames; k++)
				PUT("%s%.64s", k ? "," : "", s->names[k]);
		}
		PUT("%s%s%s%s; targets:",
		    s->flags & HP_SESS_STARTUP ? " startup" : "",
		    s->flags & HP_SESS_RUNNING ? " running" : "",
		    s->flags & HP_SESS_FOLLOW_FORK ? " follow-fork" : "",
		    s->flags & HP_SESS_FOLLOW_EXEC ? " follow-exec" : "");
		int any = 0;
		for (size_t k = 0; k < D.ntargets; k++) {
			if (D.targets[k].s != s)
				continue;
			PUT(" %d (%s)", D.targets[k].pid,
			    D.targets[k].state == T_OWNED ? "profiled"
			                                  : "pending");
			any = 1;
		}
		PUT("%s\n", any ? "" : " none");
	}
#undef PUT
	if (n >= STATUS_MAX) {
		n = STATUS_MAX;
		memcpy(buf + n - 5, "...\n", 5);
	}
	conn_send(c, HP_CTL_STATUS_REPLY, buf, (uint32_t)strlen(buf) + 1, -1);
	free(buf);
	c->kind = C_CLOSING;
	c->deadline = now_ms() + CONN_DEADLINE_MS;
}

/* ---- messages ------------------------------------------------------------
 */

static void handle_ctl(struct conn *c, uint16_t type, const uint8_t *p,
                       uint32_t len)
{
	if (c->kind == C_SESSION) {
		if (type == HP_CTL_DUMP_DONE) {
			struct hp_ctl_dump_done dd;
			memcpy(&dd, p, sizeof(dd));
			dump_done(c->sess, &dd);
			return;
		}
		dlog("session %" PRIu64 ": unexpected message type %u ignored",
		     c->sess->id, type);
		return;
	}
	if (c->kind != C_CTL) {
		conn_kill(c, NULL);
		return;
	}
	switch (type) {
	case HP_CTL_SESSION_START:
		session_start(c, p, len);
		return;
	case HP_CTL_DUMP: {
		struct hp_ctl_dump d;
		memcpy(&d, p, sizeof(d));
		if (d.pid < 0) {
			send_error(c, "DUMP: invalid pid %d", d.pid);
			return;
		}
		dump_start(c, d.pid);
		return;
	}
	case HP_CTL_STATUS:
		status_reply(c);
		return;
	case HP_CTL_SHUTDOWN:
		dlog("shutdown requested by pid %d", c->pid);
		D.quit = 1;
		c->kind = C_CLOSING;
		return;
	default:
		send_error(c, "unexpected message type %u", type);
		return;
	}
}

/* Hands a client's connection to session s (the daemon forgets it). */
static void give_client(struct conn *c, struct session *s,
                        const struct hp_hello *h, int ppid, int from_startup)
{
	struct hp_ctl_client m = {.pid = c->pid,
	                          .ppid = ppid,
	                          .hello_flags = h->flags,
	                          .from_startup = (uint32_t)from_startup,
	                          .layout_version = h->layout_version};
	int fd = c->fd;
	c->fd = -1;
	c->dead = 1;
	conn_send(s->c, HP_CTL_CLIENT, &m, sizeof(m), fd);
	dlog("session %" PRIu64 ": given pid %d (hello flags 0x%x)", s->id,
	     m.pid, h->flags);
}

static void handle_hello(struct conn *c, const struct hp_hello *h)
{
	if (h->magic != HP_WIRE_MAGIC || h->version != HP_WIRE_VERSION) {
		dlog("pid %d: hello of version %u; not a target", c->pid,
		     h->version);
		answer_client(c, HP_WELCOME_NOT_TARGET);
		return;
	}
	int pid = c->pid;
	uint32_t fl = h->flags;
	/* The hello's pid is informative: SO_PEERCRED's is the one used. */
	if (h->pid != pid)
		dlog("pid %d: hello claims pid %d; pid %d (SO_PEERCRED) is "
		     "used",
		     pid, h->pid, pid);
	/* The common case, a process starting while nobody wants anything
	 * from startup: answer at once without reading /proc. */
	if ((fl & HP_HELLO_AT_STARTUP) && !(fl & ~HP_HELLO_AT_STARTUP)) {
		int any = 0;
		for (size_t i = 0; i < D.nsessions && !any; i++)
			any = (D.sessions[i]->flags & HP_SESS_STARTUP) &&
			      D.sessions[i]->nnames;
		/* An exec'd target keeps its pid: only a pid we know can be
		 * one. */
		for (size_t i = 0; i < D.ntargets && !any; i++)
			any = D.targets[i].pid == pid;
		if (!any) {
			answer_client(c, HP_WELCOME_NOT_TARGET);
			return;
		}
	}
	uint64_t start;
	int ppid;
	struct proc_status pi;
	if (read_stat(pid, &start, &ppid) || read_status(pid, &pi) ||
	    !all_uids_ours(&pi) || pid == getpid() || is_session_pid(pid)) {
		answer_client(c, HP_WELCOME_NOT_TARGET);
		return;
	}
	struct target *t = target_find(pid, start);

	if (fl & HP_HELLO_BUSY) {
		char argv0[4096], comm[64];
		proc_argv0(pid, argv0, sizeof(argv0));
		proc_comm(pid, comm, sizeof(comm));
		if (!comm[0])
			snprintf(comm, sizeof(comm), "%s", pi.name);
		for (size_t i = 0; i < D.nsessions; i++) {
			struct session *s = D.sessions[i];
			int pending = t && t->s == s && t->state == T_PENDING;
			if (t && t->s == s && t->state == T_OWNED)
				continue;
			int by_name = !t && (s->flags & HP_SESS_RUNNING) &&
			              session_wants_name(s, argv0, comm);
			if (pending || by_name)
				send_target(
				        s, pid, HP_TGT_REJECTED_CONCURRENT,
				        comm,
				        "%s (pid %d) is already profiled by "
				        "another collector",
				        comm, pid);
		}
		if (t && t->state == T_PENDING)
			target_remove((size_t)(t - D.targets));
		answer_client(c, HP_WELCOME_NOT_TARGET);
		return;
	}
	if (fl & HP_HELLO_LATE) {
		if (t && t->state == T_PENDING && !t->s->c->dead) {
			t->state = T_OWNED;
			give_client(c, t->s, h, ppid, 0);
			return;
		}
		answer_client(c, HP_WELCOME_NOT_TARGET);
		return;
	}
	if (fl & HP_HELLO_FORK_CHILD) {
		/* The parent must be what the session owns: same pid and the
		 * same process (start time), verified here, not taken from the
		 * hello. */
		uint64_t pstart;
		struct target *pt = NULL;
		if (ppid > 0 && !read_stat(ppid, &pstart, NULL))
			pt = target_find(ppid, pstart);
		if (pt && pt->state == T_OWNED &&
		    (pt->s->flags & HP_SESS_FOLLOW_FORK) && !pt->s->c->dead &&
		    (!t || t->s == pt->s)) {
			struct session *s = pt->s;
			if (!t && !target_add(pid, start, s, T_OWNED)) {
				answer_client(c, HP_WELCOME_NOT_TARGET);
				return;
			}
			if (t)
				t->state = T_OWNED;
			give_client(c, s, h, ppid, 0);
			return;
		}
		answer_client(c, HP_WELCOME_NOT_TARGET);
		return;
	}
	if (fl & HP_HELLO_AT_STARTUP) {
		if (t && (t->s->flags & HP_SESS_FOLLOW_EXEC) &&
		    t->state == T_OWNED && !t->s->c->dead) {
			/* The owner's target exec'd (same pid, same start
			 * time): its new image. */
			give_client(c, t->s, h, ppid, 1);
			return;
		}
		char argv0[4096], comm[64];
		proc_argv0(pid, argv0, sizeof(argv0));
		proc_comm(pid, comm, sizeof(comm));
		struct session *winner = NULL;
		/* A session that has it pending (signalled while it was
		 * starting) wanted it first. */
		if (t && t->state == T_PENDING && !t->s->c->dead)
			winner = t->s;
		for (size_t i = 0; i < D.nsessions; i++) {
			struct session *s = D.sessions[i];
			if (s == winner || !(s->flags & HP_SESS_STARTUP) ||
			    !session_wants_name(s, argv0, comm))
				continue;
			if (!winner) {
				winner = s;
				continue;
			}
			send_target(s, pid, HP_TGT_REJECTED_CONCURRENT, comm,
			            "%s (pid %d) is already profiled by "
			            "session %" PRIu64,
			            comm, pid, winner->id);
		}
		if (!winner) {
			answer_client(c, HP_WELCOME_NOT_TARGET);
			return;
		}
		if (t) {
			/* An owner that does not follow exec loses the new
			 * image to the session that wants it. */
			t->s = winner;
			t->state = T_OWNED;
		} else if (!target_add(pid, start, winner, T_OWNED)) {
			answer_client(c, HP_WELCOME_NOT_TARGET);
			return;
		}
		give_client(c, winner, h, ppid, 1);
		return;
	}
	answer_client(c, HP_WELCOME_NOT_TARGET);
}

/* ---- connections ---------------------------------------------------------
 */

static void conn_free(struct conn *c)
{
	if (c->sess)
		session_end(c->sess);
	for (size_t i = 0; i < D.ndumps; i++)
		if (D.dumps[i]->client == c)
			D.dumps[i]->client = NULL;
	while (c->oq) {
		struct outmsg *m = c->oq;
		c->oq = m->next;
		if (m->fd >= 0)
			close(m->fd);
		free(m);
	}
	if (c->fd >= 0)
		close(c->fd);
	free(c->payload);
	free(c);
}

static void accept_conns(void)
{
	for (int k = 0; k < 64; k++) {
		int fd = accept4(D.listen_fd, NULL, NULL,
		                 SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				/* Every waiting peer is in: the episode
				 * of a failing accept is over. */
				D.said_accept_err = 0;
				return;
			}
			if (errno == EINTR || errno == ECONNABORTED)
				return;
			if (!D.said_accept_err)
				dlog("cannot accept a peer: %s; new peers wait "
				     "until a connection closes",
				     strerror(errno));
			D.said_accept_err = 1;
			D.accept_pause_until = now_ms() + ACCEPT_PAUSE_MS;
			return;
		}
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) ||
		    cl != sizeof(cred)) {
			dlog("a peer without credentials refused");
			close(fd);
			continue;
		}
		if (cred.uid != getuid()) {
			dlog("refused a peer of uid %u (pid %d)",
			     (unsigned)cred.uid, (int)cred.pid);
			close(fd);
			continue;
		}
		if (cred.pid <= 0) {
			dlog("refused a peer from another pid namespace");
			close(fd);
			continue;
		}
		if (D.nconns == MAX_CONNS) {
			if (!D.said_full)
				dlog("too many connections (%d); pid %d "
				     "refused, and any other peer until one "
				     "closes",
				     MAX_CONNS, (int)cred.pid);
			D.said_full = 1;
			close(fd);
			continue;
		}
		D.said_full = 0;
		struct conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->pid = cred.pid;
		c->kind = C_NEW;
		c->want = 4;
		c->deadline = now_ms() + CONN_DEADLINE_MS;
		D.conns[D.nconns++] = c;
	}
}

/* Reads what is there into the current message; dispatches it once
 * complete. */
static void conn_read(struct conn *c)
{
	if (c->kind == C_CLOSING || c->kind == C_WAIT) {
		/* Nothing more is expected: EOF ends it, data is an error. */
		char b[64];
		ssize_t n = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			conn_kill(c, NULL);
		return;
	}
	uint8_t *dst;
	size_t room;
	int in_payload = c->payload != NULL;
	if (in_payload) {
		struct hp_ctl_hdr h;
		memcpy(&h, c->head, sizeof(h));
		dst = c->payload + (c->have - sizeof(h));
		room = sizeof(h) + h.len - c->have;
	} else {
		dst = c->head + c->have;
		room = c->want - c->have;
	}
	union {
		char buf[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = dst, .iov_len = room};
	struct msghdr mh = {.msg_iov = &iov,
	                    .msg_iovlen = 1,
	                    .msg_control = cbuf.buf,
	                    .msg_controllen = sizeof(cbuf.buf)};
	ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	/* No peer sends the daemon a descriptor: close any, unused (the
	 * kernel closes those beyond our buffer, MSG_CTRUNC). */
	if (n >= 0) {
		int nfds = 0;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm;
		     cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int f;
				memcpy(&f, CMSG_DATA(cm) + i * sizeof(int),
				       sizeof(f));
				if (f >= 0)
					close(f);
				nfds++;
			}
		}
		if ((nfds || (mh.msg_flags & MSG_CTRUNC)) && !c->said_fds) {
			dlog("pid %d: passed %d descriptor%s%s; closed, "
			     "unused",
			     c->pid, nfds, nfds == 1 ? "" : "s",
			     (mh.msg_flags & MSG_CTRUNC) ? " and more" : "");
			c->said_fds = 1;
		}
	}
	if (n <= 0) {
		char why[160] = "";
		if (c->kind != C_SESSION && c->have)
			snprintf(why, sizeof(why),
			         "pid %d: connection ended in the middle of a "
			         "message (%zu bytes)",
			         c->pid, c->have);
		else if (c->kind == C_SESSION && c->have)
			snprintf(why, sizeof(why),
			         "session %" PRIu64 ": connection ended in the "
			         "middle of a message",
			         c->sess->id);
		conn_kill(c, why[0] ? why : NULL);
		return;
	}
	if (c->have == 0 && c->kind == C_SESSION)
		c->deadline = now_ms() + MSG_DEADLINE_MS;
	c->have += (size_t)n;
	if (in_payload) {
		struct hp_ctl_hdr h;
		memcpy(&h, c->head, sizeof(h));
		if (c->have < sizeof(h) + h.len)
			return;
		c->payload[h.len] = '\0';
		uint8_t *p = c->payload;
		c->payload = NULL;
		c->have = 0;
		c->want = sizeof(h);
		if (c->kind == C_SESSION)
			c->deadline = -1;
		handle_ctl(c, h.type, p, h.len);
		free(p);
		return;
	}
	if (c->have < c->want)
		return;
	if (c->kind == C_NEW) {
		uint32_t magic;
		memcpy(&magic, c->head, 4);
		if (magic == HP_WIRE_MAGIC) {
			c->kind = C_HELLO;
			c->want = sizeof(struct hp_hello);
		} else if (magic == HP_CTL_MAGIC) {
			c->kind = C_CTL;
			c->want = sizeof(struct hp_ctl_hdr);
		} else {
			dlog("pid %d: unknown protocol (first bytes "
			     "%02x %02x %02x %02x); closing",
			     c->pid, c->head[0], c->head[1], c->head[2],
			     c->head[3]);
			conn_kill(c, NULL);
		}
		return;
	}
	if (c->kind == C_HELLO) {
		struct hp_hello h;
		memcpy(&h, c->head, sizeof(h));
		handle_hello(c, &h);
		return;
	}
	/* A ctl header is complete. */
	struct hp_ctl_hdr h;
	memcpy(&h, c->head, sizeof(h));
	if (ctl_check_hdr(&h)) {
		/* One line either way: a session's connection is closed,
		 * any other peer gets the reason (send_error logs it). */
		if (c->kind == C_SESSION) {
			dlog("session %" PRIu64 ": bad control message header "
			     "(type %u, length %u, version %u); closing",
			     c->sess->id, h.type, h.len, h.version);
			conn_kill(c, NULL);
		} else {
			send_error(c, "bad message (type %u, length %u)",
			           h.type, h.len);
		}
		return;
	}
	if (h.len == 0) {
		/* Complete already. */
		c->have = 0;
		c->want = sizeof(h);
		if (c->kind == C_SESSION)
			c->deadline = -1;
		uint8_t none = 0;
		handle_ctl(c, h.type, &none, 0);
		return;
	}
	c->payload = malloc((size_t)h.len + 1);
	if (!c->payload)
		conn_kill(c, "out of memory reading a message");
}

/* ---- timers --------------------------------------------------------------
 */

static void check_timers(void)
{
	int64_t now = now_ms();
	for (size_t i = 0; i < D.nconns; i++) {
		struct conn *c = D.conns[i];
		if (c->dead || c->deadline < 0 || now < c->deadline)
			continue;
		if (c->kind == C_CLOSING)
			conn_kill(c, NULL);
		else if (c->kind == C_SESSION)
			dlog("session %" PRIu64 ": message not complete in "
			     "%d ms; closing",
			     c->sess->id, MSG_DEADLINE_MS);
		else
			dlog("pid %d: no complete message in %d ms (%zu "
			     "bytes); closing",
			     c->pid, CONN_DEADLINE_MS, c->have);
		conn_kill(c, NULL);
	}
	for (size_t i = 0; i < D.ntargets;) {
		struct target *t = &D.targets[i];
		if (t->state != T_PENDING || t->timeout_sent ||
		    now < t->signalled_ms + TARGET_TIMEOUT_MS) {
			i++;
			continue;
		}
		uint64_t st = 0;
		char comm[64] = "";
		if (read_stat(t->pid, &st, NULL) || st != t->start) {
			send_target(t->s, t->pid, HP_TGT_GONE, "",
			            "pid %d exited before it attached", t->pid);
			target_remove(i);
			continue;
		}
		proc_comm(t->pid, comm, sizeof(comm));
		send_target(t->s, t->pid, HP_TGT_TIMEOUT, comm,
		            "%s (pid %d) did not attach within %d s", comm,
		            t->pid, TARGET_TIMEOUT_MS / 1000);
		t->timeout_sent = 1;
		i++;
	}
	for (size_t i = 0; i < D.ndumps;) {
		if (now >= D.dumps[i]->deadline)
			dump_finish(i);
		else
			i++;
	}
	if (now >= D.next_sweep_ms) {
		targets_sweep();
		D.next_sweep_ms = now + SWEEP_MS;
	}
}

static int next_timeout(void)
{
	int64_t now = now_ms(), next = D.next_sweep_ms;
	for (size_t i = 0; i < D.nconns; i++)
		if (D.conns[i]->deadline >= 0 && D.conns[i]->deadline < next)
			next = D.conns[i]->deadline;
	for (size_t i = 0; i < D.ntargets; i++) {
		struct target *t = &D.targets[i];
		if (t->state == T_PENDING && !t->timeout_sent &&
		    t->signalled_ms + TARGET_TIMEOUT_MS < next)
			next = t->signalled_ms + TARGET_TIMEOUT_MS;
	}
	for (size_t i = 0; i < D.ndumps; i++)
		if (D.dumps[i]->deadline < next)
			next = D.dumps[i]->deadline;
	if (D.accept_pause_until > now && D.accept_pause_until < next)
		next = D.accept_pause_until;
	int64_t d = next - now;
	return d < 0 ? 0 : d > 60000 ? 60000 : (int)d;
}

static void handle_signals(void)
{
	struct signalfd_siginfo si;
	for (;;) {
		ssize_t n = read(D.sig_fd, &si, sizeof(si));
		if (n != (ssize_t)sizeof(si))
			return;
		switch (si.ssi_signo) {
		case SIGUSR1:
			dlog("SIGUSR1 from pid %u: dump requested", si.ssi_pid);
			dump_start(NULL, 0);
			break;
		case SIGTERM:
		case SIGINT:
		case SIGHUP:
			dlog("signal %u: exiting", si.ssi_signo);
			D.quit = 1;
			break;
		}
	}
}

/* ---- setup ---------------------------------------------------------------
 */

/* The socket directory must be ours alone: a real directory (not a
 * symlink), owned by our uid, no group or other permissions. */
static int check_dir(const char *dir)
{
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		derr("cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(dir, &st) != 0) {
		derr("cannot stat %s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		derr("%s is not a directory (a symlink or a file); refusing "
		     "to use it",
		     dir);
		return -1;
	}
	if (st.st_uid != getuid()) {
		derr("%s belongs to uid %u, not to uid %u; refusing to use it",
		     dir, (unsigned)st.st_uid, (unsigned)getuid());
		return -1;
	}
	if (st.st_mode & 077) {
		derr("%s has mode %04o; it must be 0700 (private); refusing "
		     "to use it",
		     dir, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/* The pid of whatever daemon answers on the socket, or 0. */
static int running_daemon_pid(const char *sock)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	int pid = 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl))
			pid = cred.pid > 0 ? cred.pid : 1;
		else
			pid = 1;
	}
	close(fd);
	return pid;
}

static int lock_fd = -1;

/* Takes DIR/heapprofd.lock (flock): one daemon per directory. */
static int take_lock(const char *dir)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/heapprofd.lock", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		derr("cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		char buf[32] = "";
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		close(fd);
		if (e == EWOULDBLOCK) {
			int pid = atoi(buf);
			if (pid > 0)
				derr("heapprofd is already running (pid %d)",
				     pid);
			else
				derr("heapprofd is already running");
			return -1;
		}
		derr("cannot lock %s: %s", path, strerror(e));
		return -1;
	}
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n)
		dlog("cannot write %s: %s", path, strerror(errno));
	lock_fd = fd;
	return 0;
}

static int open_socket(void)
{
	struct stat st;
	if (lstat(D.sock, &st) == 0) {
		int pid = running_daemon_pid(D.sock);
		if (pid) {
			derr("heapprofd is already running (pid %d)", pid);
			return -1;
		}
		/* Left by a daemon that died: we hold the lock, so nobody
		 * else is about to use it. */
		if (unlink(D.sock) != 0) {
			derr("cannot remove the stale socket %s: %s", D.sock,
			     strerror(errno));
			return -1;
		}
		dlog("removed a stale socket %s", D.sock);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		derr("socket: %s", strerror(errno));
		return -1;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", D.sock);
	mode_t old = umask(077);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc != 0 || listen(fd, 128) != 0) {
		derr("cannot listen on %s: %s", D.sock, strerror(errno));
		close(fd);
		return -1;
	}
	D.listen_fd = fd;
	return 0;
}

static void cleanup(void)
{
	for (size_t i = 0; i < D.nconns; i++)
		conn_free(D.conns[i]);
	D.nconns = 0;
	while (D.ndumps)
		dump_finish(D.ndumps - 1);
	/* Unlink the socket only if it is still ours. */
	struct stat a, b;
	if (D.listen_fd >= 0) {
		if (fstat(D.listen_fd, &a) == 0 && stat(D.sock, &b) == 0 &&
		    S_ISSOCK(b.st_mode))
			unlink(D.sock);
		close(D.listen_fd);
	}
	if (D.sig_fd >= 0)
		close(D.sig_fd);
	free(D.targets);
	if (lock_fd >= 0)
		close(lock_fd);
}

static int serve(void)
{
	struct pollfd *pfd = calloc(MAX_CONNS + 2, sizeof(*pfd));
	if (!pfd)
		return 1;
	while (!D.quit) {
		size_t n = 0;
		/* A negative fd is skipped by poll: paused accepting. */
		pfd[n++] = (struct pollfd){.fd = now_ms() < D.accept_pause_until
		                                         ? -1
		                                         : D.listen_fd,
		                           .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = D.sig_fd, .events = POLLIN};
		for (size_t i = 0; i < D.nconns; i++) {
			struct conn *c = D.conns[i];
			short ev = POLLIN;
			if (c->oq)
				ev |= POLLOUT;
			pfd[n++] = (struct pollfd){.fd = c->fd, .events = ev};
		}
		int rc = poll(pfd, n, next_timeout());
		if (rc < 0 && errno != EINTR) {
			dlog("poll: %s", strerror(errno));
			break;
		}
		size_t nc = D.nconns; /* accept below appends */
		if (rc > 0) {
			if (pfd[1].revents)
				handle_signals();
			for (size_t i = 0; i < nc; i++) {
				struct conn *c = D.conns[i];
				short re = pfd[i + 2].revents;
				if (!re || c->dead)
					continue;
				if (re & POLLOUT)
					conn_flush(c);
				if (!c->dead && (re & (POLLIN | POLLHUP |
				                       POLLERR | POLLNVAL)))
					conn_read(c);
			}
			if (pfd[0].revents)
				accept_conns();
		}
		check_timers();
		/* Closing answered connections once their reply is out. */
		for (size_t i = 0; i < D.nconns; i++) {
			struct conn *c = D.conns[i];
			if (c->kind == C_CLOSING && !c->oq && !D.quit)
				c->dead = 1;
		}
		for (size_t i = 0; i < D.nconns;) {
			if (D.conns[i]->dead) {
				conn_free(D.conns[i]);
				D.conns[i] = D.conns[--D.nconns];
			} else {
				i++;
			}
		}
	}
	free(pfd);
	return 0;
}

static void close_other_fds(int keep)
{
#ifdef SYS_close_range
	if (keep > 3)
		syscall(SYS_close_range, 3u, (unsigned)keep - 1, 0u);
	if (syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u) == 0)
		return;
#endif
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 65536)
		max = 65536;
	for (int fd = 3; fd < max; fd++)
		if (fd != keep)
			close(fd);
}

int daemon_run(int foreground)
{
	memset(&D, 0, sizeof(D));
	D.listen_fd = -1;
	D.sig_fd = -1;
	if (hp_daemon_paths(D.dir, sizeof(D.dir), D.sock, sizeof(D.sock))) {
		fprintf(stderr, "heapprof: daemon: the socket path is too long "
		                "(XDG_RUNTIME_DIR)\n");
		return 1;
	}
	int pipefd[2] = {-1, -1};
	if (!foreground) {
		if (pipe2(pipefd, O_CLOEXEC) != 0) {
			fprintf(stderr, "heapprof: daemon: pipe: %s\n",
			        strerror(errno));
			return 1;
		}
		fflush(NULL);
		pid_t child = fork();
		if (child < 0) {
			fprintf(stderr, "heapprof: daemon: fork: %s\n",
			        strerror(errno));
			return 1;
		}
		if (child > 0) {
			/* Wait until the daemon listens or tells why not. */
			close(pipefd[1]);
			char buf[2048];
			size_t got = 0;
			for (;;) {
				ssize_t r = read(pipefd[0], buf + got,
				                 sizeof(buf) - 1 - got);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0)
					break;
				got += (size_t)r;
				if (got == sizeof(buf) - 1)
					break;
			}
			close(pipefd[0]);
			buf[got] = '\0';
			if (!strncmp(buf, "OK ", 3)) {
				printf("heapprofd: listening on %s (pid %s)\n",
				       D.sock, buf + 3);
				return 0;
			}
			int st = 0;
			waitpid(child, &st, 0);
			if (got)
				fputs(buf, stderr);
			else
				fprintf(stderr,
				        "heapprof: daemon: heapprofd exited "
				        "during startup\n");
			return 1;
		}
		close(pipefd[0]);
		g_startup_fd = pipefd[1];
		setsid();
		/* Descriptors our caller left open (a pipe of a shell's
		 * command substitution, say) must not be held for the
		 * daemon's lifetime. */
		close_other_fds(pipefd[1]);
	}
	if (chdir("/") != 0) {
		/* Harmless: only to not hold a mount busy. */
	}
	if (check_dir(D.dir)) {
		if (!foreground)
			_exit(1);
		return 1;
	}
	if (!foreground) {
		/* From here on the daemon's own messages go to its log. */
		snprintf(g_log_path, sizeof(g_log_path), "%s/heapprofd.log",
		         D.dir);
		int lf = open(g_log_path,
		              O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
		                      O_CLOEXEC,
		              0600);
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (lf < 0 || nul < 0) {
			derr("cannot open %s: %s", g_log_path, strerror(errno));
			_exit(1);
		}
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(lf, 2);
		close(lf);
		close(nul);
	}
	if (take_lock(D.dir) || open_socket()) {
		if (!foreground)
			_exit(1);
		cleanup();
		return 1;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	D.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (D.sig_fd < 0) {
		derr("signalfd: %s", strerror(errno));
		if (!foreground)
			_exit(1);
		cleanup();
		return 1;
	}
	/* MAX_CONNS peers need as many descriptors, beside the sessions'
	 * and our own: raise the soft limit toward it (never the hard one).
	 * Should the limit still be hit, accept_conns pauses instead. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur < MAX_CONNS + 256) {
		rl.rlim_cur = rl.rlim_max < MAX_CONNS + 256 ? rl.rlim_max
		                                            : MAX_CONNS + 256;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	D.started_ms = now_ms();
	D.next_sweep_ms = D.started_ms + SWEEP_MS;
	if (!foreground) {
		dlog("listening on %s", D.sock);
		char ok[32];
		int n = snprintf(ok, sizeof(ok), "OK %d", (int)getpid());
		ssize_t w = write(g_startup_fd, ok, (size_t)n);
		(void)w;
		close(g_startup_fd);
		g_startup_fd = -1;
	} else {
		fprintf(stderr, "heapprofd: listening on %s (pid %d)\n", D.sock,
		        (int)getpid());
	}
	int rc = serve();
	dlog("exiting");
	cleanup();
	if (!foreground)
		_exit(rc);
	return rc;
}
