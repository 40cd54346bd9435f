/*
 * `record -p/-n` (session_int.h): the session registered with the per-user
 * daemon (ctl.h), the processes it asked for, the clients and news the
 * daemon hands it, and when such a session is over.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "session/session_int.h"
#include "daemon/ctl.h"
#include "util/proc.h"
#include "util/err.h"

/* The daemon answers SESSION_START at once; this bounds a broken one. */
#define SESSION_OK_MS 5000
/* -n with --no-startup: the daemon reports every running match right
 * after SESSION_OK; a session that heard of none within this time has
 * nothing to wait for. */
#define NAMES_QUIET_MS 1000

static struct want *want_find(struct session *s, int pid)
{
	for (size_t i = 0; i < s->nwants; i++)
		if (s->wants[i].pid == pid)
			return &s->wants[i];
	return NULL;
}

struct want *session_want_add(struct session *s, int pid, bool explicit_pid)
{
	struct want *w = want_find(s, pid);
	if (w)
		return w;
	if (s->nwants == s->wants_cap) {
		size_t cap = s->wants_cap ? s->wants_cap * 2 : 16;
		struct want *n = realloc(s->wants, cap * sizeof(*n));
		if (!n)
			return NULL;
		s->wants = n;
		s->wants_cap = cap;
	}
	w = &s->wants[s->nwants++];
	*w = (struct want){
	        .pid = pid, .st = W_PENDING, .explicit_pid = explicit_pid};
	return w;
}

static bool is_explicit_pid(const struct session *s, int pid)
{
	for (int i = 0; i < s->cfg->npids; i++)
		if (s->cfg->pids[i] == pid)
			return true;
	return false;
}

static const char *target_status_name(uint32_t st)
{
	switch (st) {
	case HP_TGT_SIGNALLED:
		return "signalled";
	case HP_TGT_REJECTED_CONCURRENT:
		return "rejected_concurrent";
	case HP_TGT_DENIED:
		return "denied";
	case HP_TGT_NO_CLIENT:
		return "no_client";
	case HP_TGT_GONE:
		return "gone";
	case HP_TGT_TIMEOUT:
		return "timeout";
	default:
		return "unknown";
	}
}

/* Copies a fixed-size text field of a message, cut at its end. */
static void field_str(char *dst, size_t dstlen, const char *src, size_t len)
{
	size_t n = strnlen(src, len);
	if (n >= dstlen)
		n = dstlen - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	/* One line: no control characters from the daemon. */
	for (char *p = dst; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = '?';
}

/* A process the daemon signalled that did not answer: attached by
 * injection (its library is loaded already: the injector calls it). */
static void signal_unanswered(struct session *s, struct want *w,
                              const char *name)
{
	char comm[64];
	if (!name || !name[0]) {
		proc_comm(w->pid, comm, sizeof(comm));
		name = comm[0] ? comm : "?";
	}
	hp_log(PFX "pid %d (%s): no answer to heapprofd's signal in %d ms "
	           "(a runtime that takes every signal, as Go's does, drops "
	           "it); attaching by injection\n",
	       w->pid, name, SIGNAL_ANSWER_MS);
	w->st = W_PENDING;
	session_attach(s, w->pid, w->explicit_pid);
}

int session_signal_fallback(struct session *s)
{
	if (s->finished)
		return -1;
	uint64_t now = hp_clock_ns(CLOCK_MONOTONIC), next = UINT64_MAX;
	const uint64_t wait = SIGNAL_ANSWER_MS * 1000000ull;
	for (size_t i = 0; i < s->nwants; i++) {
		struct want *w = &s->wants[i];
		if (w->st != W_SIGNALLED)
			continue;
		if (now >= w->signalled_ns + wait) {
			signal_unanswered(s, w, NULL);
			/* session_attach may have grown the array. */
			continue;
		}
		if (w->signalled_ns + wait < next)
			next = w->signalled_ns + wait;
	}
	if (next == UINT64_MAX)
		return -1;
	return (int)((next - now) / 1000000 + 1);
}

void session_say_unanswered(struct session *s)
{
	for (size_t i = 0; i < s->nwants; i++) {
		const struct want *w = &s->wants[i];
		if (w->st != W_SIGNALLED && w->st != W_PENDING)
			continue;
		char comm[64];
		proc_comm(w->pid, comm, sizeof(comm));
		hp_log(PFX
		       "pid %d (%s): not profiled: the session ended before "
		       "it answered%s\n",
		       w->pid, comm[0] ? comm : "?",
		       w->st == W_SIGNALLED ? " heapprofd's signal" : "");
	}
}

static void on_target_msg(struct session *s, const struct hp_ctl_msg *m)
{
	struct hp_ctl_target t;
	if (m->len != sizeof(t))
		return;
	memcpy(&t, m->payload, sizeof(t));
	char name[64], text[192];
	field_str(name, sizeof(name), t.name, sizeof(t.name));
	field_str(text, sizeof(text), t.text, sizeof(t.text));
	struct want *w = session_want_add(s, t.pid, is_explicit_pid(s, t.pid));
	const char *sn = target_status_name(t.status);
	if (t.status == HP_TGT_SIGNALLED) {
		if (w && w->st != W_ATTACHED) {
			w->st = W_SIGNALLED;
			w->signalled_ns = hp_clock_ns(CLOCK_MONOTONIC);
		}
		hp_log(PFX "pid %d (%s): asked to attach\n", t.pid,
		       name[0] ? name : "?");
		return;
	}
	/* Attached meanwhile (by injection, when the signal went
	 * unanswered): what the daemon says of the signal no longer
	 * matters (the client, profiled, answers a late one BUSY). */
	if (w && w->st == W_ATTACHED)
		return;
	if (t.status == HP_TGT_TIMEOUT && w && w->st == W_SIGNALLED) {
		signal_unanswered(s, w, name);
		return;
	}
	if (t.status == HP_TGT_NO_CLIENT) {
		/* No client, or one that does not catch the signal: the
		 * injector reaches it all the same. */
		if (!w || w->st != W_ATTACHED)
			session_attach(s, t.pid, w && w->explicit_pid);
		return;
	}
	/* A process that timed out may still attach later: a later CLIENT
	 * makes it a target all the same. */
	if (w && w->st != W_ATTACHED)
		w->st = W_FAILED;
	hp_log(PFX "pid %d (%s): not profiled: %s (%s)\n", t.pid,
	       name[0] ? name : "?", text[0] ? text : sn, sn);
	if (t.status == HP_TGT_REJECTED_CONCURRENT) {
		if (collector_add_rejected(&s->col, t.pid,
		                           w && w->explicit_pid ? "pid"
		                                                : "name",
		                           name, text[0] ? text : sn) != 0)
			s->write_errors++;
		s->rejected++;
	}
}

static void on_client_msg(struct session *s, struct hp_ctl_msg *m)
{
	struct hp_ctl_client cm;
	if (m->len != sizeof(cm) || m->fd < 0)
		return;
	memcpy(&cm, m->payload, sizeof(cm));
	int fd = m->fd;
	m->fd = -1; /* ours now */
	/* The connection itself says who is at the other end. */
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    cred.uid != getuid() || s->finished) {
		collector_refuse(fd, HP_WELCOME_NOT_TARGET);
		return;
	}
	int nonblock = fcntl(fd, F_GETFL);
	if (nonblock >= 0)
		fcntl(fd, F_SETFL, nonblock | O_NONBLOCK);
	pid_t pid = cred.pid;
	if (cm.layout_version < HP_LAYOUT_MIN_VERSION) {
		/* As the embedded socket does: no layout we can make. */
		hp_log(PFX "pid %d: not profiled: its heapprof library asks "
		           "for layout version %u\n",
		       (int)pid, cm.layout_version);
		collector_refuse(fd, HP_WELCOME_NOT_TARGET);
		struct want *w = want_find(s, pid);
		if (w && w->st != W_ATTACHED)
			w->st = W_FAILED;
		return;
	}
	struct target_info ti = {.pid = pid,
	                         .ppid = cm.ppid > 0 ? cm.ppid : proc_ppid(pid),
	                         .from_startup = cm.from_startup != 0,
	                         .layout_version = cm.layout_version};
	struct target *old = collector_find(&s->col, pid);
	bool again = collector_had_pid(&s->col, pid);
	if (cm.hello_flags & HP_HELLO_FORK_CHILD) {
		ti.how = "fork";
		/* As with record -- CMD: the child is profiled from its
		 * first moment (the fork). */
		ti.from_startup = true;
	} else if (again && (cm.hello_flags & HP_HELLO_AT_STARTUP) &&
	           s->cfg->follow_exec)
		ti.how = "exec";
	else if (is_explicit_pid(s, pid))
		ti.how = "pid";
	else
		ti.how = "name";
	if (old) {
		if (!strcmp(ti.how, "exec"))
			session_finish_exec(s, old);
		else
			session_finish_gone(s, old);
	}
	struct target *t;
	int rc = collector_answer(&s->col, fd, &ti, &t);
	struct want *w = session_want_add(s, pid, is_explicit_pid(s, pid));
	if (!t) {
		hp_log(PFX "pid %d: not profiled: %s\n", (int)pid,
		       strerror(-rc));
		if (w && w->st != W_ATTACHED)
			w->st = W_FAILED;
		return;
	}
	if (rc)
		s->write_errors++;
	if (w)
		w->st = W_ATTACHED;
	char comm[64];
	proc_comm(pid, comm, sizeof(comm));
	const char *what = !strcmp(ti.how, "fork")   ? " (forked child)"
	                   : !strcmp(ti.how, "exec") ? " (new image)"
	                   : ti.from_startup         ? " from startup"
	                                             : "";
	hp_log(PFX "pid %d (%s): profiling%s\n", (int)pid, comm[0] ? comm : "?",
	       what);
}

/* `heapprof dump`: DUMP_DONE once the dumps are in the profile. */
struct dump_reply {
	struct dump_group g; /* first: done gets it */
	struct session *s;
	uint64_t request_id;
};

static void send_dump_done(struct session *s, uint64_t request_id, int dumps,
                           int errors)
{
	struct hp_ctl_dump_done d = {.request_id = request_id,
	                             .dumps = (uint32_t)dumps,
	                             .errors = (uint32_t)errors};
	if (s->dfd >= 0)
		ctl_send(s->dfd, HP_CTL_DUMP_DONE, &d, sizeof(d), -1);
}

static void dump_reply_done(struct dump_group *g)
{
	struct dump_reply *r = (struct dump_reply *)g;
	send_dump_done(r->s, r->request_id, g->dumps, g->errors);
	free(r);
}

static void on_dump_request(struct session *s, const struct hp_ctl_msg *m)
{
	struct hp_ctl_dump_request q;
	if (m->len != sizeof(q))
		return;
	memcpy(&q, m->payload, sizeof(q));
	struct dump_reply *r = s->finished ? NULL : malloc(sizeof(*r));
	if (!r) {
		int errors = 0;
		int n = s->finished ? 0
		                    : session_dump_now(s, q.pid, "request",
		                                       &errors);
		send_dump_done(s, q.request_id, n, errors);
		return;
	}
	*r = (struct dump_reply){.g = {.done = dump_reply_done},
	                         .s = s,
	                         .request_id = q.request_id};
	collector_dump_group(&s->col, q.pid, "request", &r->g);
}

static void daemon_lost(struct session *s, const char *why)
{
	if (s->dfd >= 0)
		close(s->dfd);
	s->dfd = -1;
	s->daemon_gone = true;
	/* Nothing more can arrive through it; processes already attached
	 * talk to us directly and go on. */
	for (size_t i = 0; i < s->nwants; i++)
		if (s->wants[i].st == W_PENDING ||
		    s->wants[i].st == W_SIGNALLED)
			s->wants[i].st = W_FAILED;
	hp_log(PFX "lost the connection to heapprofd (%s); going on with "
	           "the %zu process(es) attached\n",
	       why, s->col.ntargets);
}

void session_on_daemon(struct session *s)
{
	/* Several messages may be queued; a bounded number per turn. */
	for (int i = 0; i < 32 && s->dfd >= 0; i++) {
		struct pollfd p = {.fd = s->dfd, .events = POLLIN};
		if (i > 0 && poll(&p, 1, 0) <= 0)
			return;
		struct hp_ctl_msg m;
		int rc = ctl_recv(s->dfd, &m, 1000, NULL);
		if (rc == -ETIMEDOUT && i > 0)
			return;
		if (rc) {
			daemon_lost(s, rc == -ECONNRESET ? "it closed it"
			                                 : strerror(-rc));
			return;
		}
		switch (m.type) {
		case HP_CTL_CLIENT:
			on_client_msg(s, &m);
			break;
		case HP_CTL_TARGET:
			on_target_msg(s, &m);
			break;
		case HP_CTL_DUMP_REQUEST:
			on_dump_request(s, &m);
			break;
		case HP_CTL_ERROR:
			hp_log(PFX "heapprofd: %.200s\n",
			       m.payload ? (const char *)m.payload : "");
			break;
		default:
			break; /* newer daemon: ignore what we do not know */
		}
		ctl_msg_free(&m);
	}
}

int session_daemon_start(struct session *s)
{
	const struct session_config *cfg = s->cfg;
	size_t len = sizeof(struct hp_ctl_session) + (size_t)cfg->npids * 4;
	for (int i = 0; i < cfg->nnames; i++)
		len += strlen(cfg->names[i]) + 1;
	if (len > HP_CTL_MAX_PAYLOAD) {
		hp_log(PFX "too many targets for one session\n");
		return -1;
	}
	uint8_t *buf = calloc(1, len);
	if (!buf)
		return -1;
	struct hp_ctl_session h = {.npids = (uint32_t)cfg->npids,
	                           .nnames = (uint32_t)cfg->nnames};
	if (!cfg->no_startup)
		h.flags |= HP_SESS_STARTUP;
	if (!cfg->no_running)
		h.flags |= HP_SESS_RUNNING;
	if (cfg->follow_fork)
		h.flags |= HP_SESS_FOLLOW_FORK;
	if (cfg->follow_exec)
		h.flags |= HP_SESS_FOLLOW_EXEC;
	memcpy(buf, &h, sizeof(h));
	size_t off = sizeof(h);
	for (int i = 0; i < cfg->npids; i++) {
		int32_t p = cfg->pids[i];
		memcpy(buf + off, &p, 4);
		off += 4;
	}
	for (int i = 0; i < cfg->nnames; i++) {
		size_t n = strlen(cfg->names[i]) + 1;
		memcpy(buf + off, cfg->names[i], n);
		off += n;
	}
	int rc = ctl_send(s->dfd, HP_CTL_SESSION_START, buf, (uint32_t)len, -1);
	free(buf);
	if (rc) {
		hp_log(PFX "cannot talk to heapprofd: %s\n", strerror(-rc));
		return -1;
	}
	struct hp_ctl_msg m;
	rc = ctl_recv(s->dfd, &m, SESSION_OK_MS, NULL);
	if (rc) {
		hp_log(PFX "heapprofd did not answer: %s\n",
		       rc == -ECONNRESET ? "it closed the connection"
		                         : strerror(-rc));
		return -1;
	}
	if (m.type == HP_CTL_ERROR) {
		hp_log(PFX "heapprofd refused the session: %.200s\n",
		       m.payload ? (const char *)m.payload : "");
		ctl_msg_free(&m);
		return -1;
	}
	if (m.type != HP_CTL_SESSION_OK ||
	    m.len != sizeof(struct hp_ctl_session_ok)) {
		hp_log(PFX "heapprofd answered with message type %u "
		           "instead of SESSION_OK\n",
		       m.type);
		ctl_msg_free(&m);
		return -1;
	}
	struct hp_ctl_session_ok ok;
	memcpy(&ok, m.payload, sizeof(ok));
	ctl_msg_free(&m);
	s->session_id = ok.session_id;
	s->col.opts.session_id = ok.session_id;
	return 0;
}

void session_on_signal_daemon(struct session *s,
                              const struct signalfd_siginfo *si)
{
	if (si->ssi_signo == SIGUSR1) {
		if (!s->finished)
			session_dump_now(s, 0, "signal", NULL);
		return;
	}
	/* SIGINT, SIGTERM, SIGHUP: the end of the session. */
	s->stopping = true;
}

/*
 * Whether a -p/-n session has nothing left to wait for: every process it
 * asked for attached or failed, no target is still connected, profiled
 * without its connection, or within its exec grace, and, with names, no new
 * process can come (--no-startup after the daemon's report of running matches,
 * or the daemon is gone).
 */
bool session_daemon_over(struct session *s)
{
	for (size_t i = 0; i < s->col.ntargets; i++) {
		const struct target *t = s->col.targets[i];
		/* A connection the program closed or reused is no exit: it
		 * is profiled on through its region while it maps it
		 * (session_reap_disconnected). */
		if (!t->retired && (!t->disconnected || t->conn_lost))
			return false;
		if (!t->retired && s->cfg->follow_exec)
			return false; /* in its grace */
	}
	for (size_t i = 0; i < s->nwants; i++)
		if (s->wants[i].st == W_PENDING ||
		    s->wants[i].st == W_SIGNALLED)
			return false;
	if (s->cfg->nnames && !s->daemon_gone) {
		if (s->names_startup)
			return false;
		if (hp_clock_ns(CLOCK_MONOTONIC) <
		    s->start_ns + NAMES_QUIET_MS * 1000000ull)
			return false;
	}
	return true;
}
