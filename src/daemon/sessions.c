/*
 * heapprofd's record sessions (`heapprof record -p/-n`): their start (the
 * targets they name are checked and signalled at once), their end (their
 * connection closed), the names they want, and the status text that
 * lists them with their targets.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/daemon_int.h"

/* ---- sessions ------------------------------------------------------------
 */

static void session_free(struct session *s)
{
	for (uint32_t i = 0; i < s->nnames; i++)
		free(s->names[i]);
	free(s->names);
	free(s->pids);
	free(s);
}

void session_end(struct session *s)
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

void session_start(struct conn *c, const uint8_t *p, uint32_t len)
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

int is_session_pid(int pid)
{
	for (size_t i = 0; i < D.nsessions; i++)
		if (D.sessions[i]->pid == pid)
			return 1;
	return 0;
}

int session_wants_name(const struct session *s, const char *argv0,
                       const char *comm)
{
	for (uint32_t i = 0; i < s->nnames; i++)
		if (proc_name_matches(s->names[i], argv0, comm))
			return 1;
	return 0;
}

/* ---- status --------------------------------------------------------------
 */

void status_reply(struct conn *c)
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
