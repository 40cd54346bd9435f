/*
 * A profiled process's hello (wire_v1.h): which session gets its
 * connection (HP_CTL_CLIENT, with the descriptor), or NOT_TARGET.  Who it
 * is comes from SO_PEERCRED and /proc, never from what the hello says.
 */
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "daemon/daemon_int.h"

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

void handle_hello(struct conn *c, const struct hp_hello *h)
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
