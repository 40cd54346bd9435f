/*
 * The session's targets (session_int.h): the end of one (gone, a new
 * image, the command), who is a target on the embedded socket, and, with
 * --follow-fork, when a `-- CMD` session is over.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/session_int.h"
#include "util/proc.h"
#include "util/err.h"

/* A target whose connection closed may be exec'ing: with --follow-exec,
 * its new image gets this long to say hello before the old one is
 * finished as gone (its last dump then says "disconnect", not "exec"). */
#define EXEC_GRACE_MS 500
/* --follow-fork with -- CMD: once the command and every followed process
 * are gone, a descendant still running (reparented to record, its child
 * subreaper) may be a fork child about to say hello (it says it from fork
 * itself, at once): the session waits this long after the last process
 * came or went, looking every FOLLOW_POLL_MS, unless no descendant runs. */
#define FOLLOW_GRACE_MS 1000
#define FOLLOW_POLL_MS  10
/* At most this many pids named in one line. */
#define PIDS_SAID 8

bool session_is_command(const struct session *s, const struct target *t)
{
	return !s->daemon_mode && t->pid == s->child;
}

/* Whether a new image of pid is followed: every target's with
 * --follow-exec; by default the command's own (its pid: not a child's). */
static bool follows_exec(const struct session *s, pid_t pid)
{
	return s->cfg->follow_exec ||
	       (!s->daemon_mode && !s->cfg->no_follow_exec && pid == s->child);
}

/* The dump of a target whose connection closed and that did not come
 * back as a new image: its last state, then its row ends. */
void session_finish_gone(struct session *s, struct target *t)
{
	if (collector_dump_final(&s->col, t,
	                         session_final_reason(s, t, "disconnect"),
	                         0) != 0)
		s->write_errors++;
	collector_stop(t);
	collector_retire(&s->col, t);
	uint64_t end = t->disconnect_ts ? t->disconnect_ts : boottime_ns();
	if (collector_end_row(&s->col, t, end, -1, true) != 0)
		s->write_errors++;
}

/* A target's image was replaced (--follow-exec): the old image's row ends
 * here with its last dump; the new image gets a row of its own. */
void session_finish_exec(struct session *s, struct target *t)
{
	if (collector_dump_final(&s->col, t, "exec", 0) != 0)
		s->write_errors++;
	collector_stop(t);
	collector_retire(&s->col, t);
	if (collector_end_row(&s->col, t, boottime_ns(), -1, false) != 0)
		s->write_errors++;
}

/* The command exited (SIGCHLD) and its connection closed, while the
 * session goes on (--follow-fork): its end dump and its exit status. */
static void finish_command(struct session *s, struct target *t)
{
	if (collector_dump_final(&s->col, t, session_final_reason(s, t, "end"),
	                         0) != 0)
		s->write_errors++;
	collector_stop(t);
	collector_retire(&s->col, t);
	if (collector_end_row(&s->col, t, t->disconnect_ts,
	                      session_status_code(s->child_status), false) != 0)
		s->write_errors++;
}

/* How often a target whose connection the program closed is looked at
 * (does it still map its region?). */
#define CONN_LOST_CHECK_MS 200

/* Targets that went away: finished once the exec grace is over.  The
 * command of a `-- CMD` session is left to the end (its exit status comes
 * with SIGCHLD).  Returns ms until the next grace ends, or -1. */
int session_reap_disconnected(struct session *s)
{
	uint64_t grace = s->cfg->follow_exec ? EXEC_GRACE_MS * 1000000ull : 0;
	uint64_t now = boottime_ns(), next = UINT64_MAX;
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (!t->disconnected || t->retired || session_is_command(s, t))
			continue;
		if (now < t->disconnect_ts + grace) {
			if (t->disconnect_ts + grace < next)
				next = t->disconnect_ts + grace;
			continue;
		}
		/* A closed connection is not always an exit: a program that
		 * closes every descriptor (as daemons do) closes ours, and
		 * records on into its region.  While it still maps the
		 * region it is profiled; looked at again every
		 * CONN_LOST_CHECK_MS, and finished once it is gone. */
		if (collector_target_maps_region(t)) {
			if (!t->conn_lost) {
				t->conn_lost = true;
				hp_log(PFX
				       "pid %d closed its connection to the "
				       "collector (the program closed or "
				       "reused the descriptor); profiled on "
				       "through its shared region\n",
				       (int)t->pid);
			}
			uint64_t again = now + CONN_LOST_CHECK_MS * 1000000ull;
			if (again < next)
				next = again;
			continue;
		}
		if (t->conn_lost)
			t->disconnect_ts = now; /* it ended about now */
		session_finish_gone(s, t);
	}
	if (next == UINT64_MAX)
		return -1;
	return (int)((next - now) / 1000000 + 1);
}

/* ---- embedded: who is a target ---------------------------------- */

/* pid's parent, from /proc; for a process that hung up before its answer
 * (ti->gone: it may have exited since), the one its hello names when
 * /proc no longer knows it.  The hello is trusted only there, where the
 * answer makes no region, only a row saying it ran unprofiled. */
static pid_t parent_of(pid_t pid, const struct hp_hello *h,
                       const struct target_info *ti)
{
	pid_t ppid = proc_ppid(pid);
	if (ppid <= 0 && ti->gone)
		ppid = h->ppid;
	return ppid;
}

/*
 * Who gets a region on the embedded socket: the launched command's first
 * image; with --follow-fork, a child whose parent (checked in /proc, not
 * taken from the hello) is a target; with --follow-exec, the new image of
 * a target.  Anyone else (e.g. a program the command runs) is told it is
 * not a target and runs unprofiled.
 */
uint32_t session_want_embedded(void *ctx, pid_t pid, const struct hp_hello *h,
                               struct target_info *ti)
{
	struct session *s = ctx;
	const struct session_config *cfg = s->cfg;
	if (s->finished)
		return HP_WELCOME_NOT_TARGET;
	if ((h->flags & HP_HELLO_FORK_CHILD) && !cfg->follow_fork) {
		/* Without --follow-fork a target says this hello itself,
		 * before its first fork, vfork or spawn, only to tell us
		 * (src/client/client.c, client_child_note): the report
		 * says its children were not followed. */
		struct target *p = collector_find(&s->col, pid);
		if (p)
			p->children_not_followed = 1;
		return HP_WELCOME_NOT_TARGET;
	}
	if (!follows_exec(s, pid) && !(h->flags & HP_HELLO_FORK_CHILD)) {
		/* A target's new image (it kept the environment: with
		 * --follow-fork) says hello while it runs: not followed. */
		struct target *old = collector_find(&s->col, pid);
		if (old)
			collector_note_exec(&s->col, old);
	}
	if (h->flags & HP_HELLO_FORK_CHILD) {
		if (collector_had_pid(&s->col, pid))
			return HP_WELCOME_NOT_TARGET;
		/* Its parent is (or was: it may be exiting) a target, or is
		 * gone and the child was reparented to record, the child
		 * subreaper: the grandchild of a double-fork daemon. */
		pid_t ppid = parent_of(pid, h, ti);
		if (ppid <= 0 ||
		    (ppid != getpid() && !collector_had_pid(&s->col, ppid)))
			return HP_WELCOME_NOT_TARGET;
		/* Its parent at the fork, when the hello names a target
		 * (the /proc one may already be record). */
		ti->ppid = h->ppid > 0 && collector_had_pid(&s->col, h->ppid)
		                   ? h->ppid
		                   : ppid;
		ti->how = "fork";
		ti->from_startup = true; /* profiled from its first moment */
		return HP_WELCOME_ACCEPT;
	}
	if (pid == s->child && !collector_had_pid(&s->col, pid)) {
		ti->ppid = getpid();
		ti->how = "command";
		ti->from_startup = true;
		ti->name = s->cmd_name;
		ti->cmdline = s->cmdline;
		return HP_WELCOME_ACCEPT;
	}
	if (cfg->follow_fork && (h->flags & HP_HELLO_AT_STARTUP) &&
	    !collector_had_pid(&s->col, pid)) {
		/* A child started by vfork, posix_spawn, system or popen
		 * runs no atfork handler: its first image of its own is the
		 * one it exec'd, which says hello from its constructor.
		 * Followed as a fork when its parent is (or was) a target. */
		pid_t ppid = parent_of(pid, h, ti);
		if (ppid > 0 && ppid != getpid() &&
		    collector_had_pid(&s->col, ppid)) {
			ti->ppid = ppid;
			ti->how = "fork";
			ti->from_startup = true;
			return HP_WELCOME_ACCEPT;
		}
	}
	if (follows_exec(s, pid) && collector_had_pid(&s->col, pid)) {
		/* The same pid says hello again from a constructor: its
		 * image was replaced.  The old one's connection may not have
		 * closed yet (two sockets, no order between them). */
		struct target *old = collector_find(&s->col, pid);
		if (old) {
			old->exec_followed = true;
			old->exec_not_followed[0] = '\0';
			session_finish_exec(s, old);
		}
		ti->ppid = proc_ppid(pid);
		ti->how = "exec";
		ti->from_startup = true;
		return HP_WELCOME_ACCEPT;
	}
	return HP_WELCOME_NOT_TARGET;
}

/* ---- --follow-fork with -- CMD: the end of the session -------------- */

/* Record's children that run (not zombies): with --follow-fork these are
 * descendants of the command whose parents are gone.  From
 * /proc/self/task/TID/children, else (a kernel without them) by a scan of
 * /proc; -1 if neither can tell. */
struct child_count {
	pid_t self;
	int n;
};

static int count_running(void *ctx, pid_t pid)
{
	((struct child_count *)ctx)->n += proc_alive(pid);
	return 0;
}

static int count_running_orphans(void *ctx, pid_t pid)
{
	struct child_count *cc = ctx;
	struct proc_stat st;
	cc->n += proc_stat(pid, &st) == 0 && st.ppid == cc->self &&
	         st.state != 'Z' && st.state != 'X';
	return 0;
}

static int running_children(void)
{
	struct child_count cc = {.self = getpid(), .n = 0};
	if (proc_children(cc.self, count_running, &cc) == 0)
		return cc.n;
	cc.n = 0;
	if (proc_pids(count_running_orphans, &cc) < 0)
		return -1;
	return cc.n;
}

/* "PID PID ..." of at most PIDS_SAID processes, " ..." past them. */
struct pid_list {
	char s[PIDS_SAID * 12 + 16];
	size_t o, n;
};

static void pid_list_add(struct pid_list *l, pid_t pid)
{
	if (l->n++ < PIDS_SAID && l->o < sizeof(l->s))
		l->o += (size_t)snprintf(l->s + l->o, sizeof(l->s) - l->o,
		                         "%s%d", l->o ? " " : "", (int)pid);
	else if (l->n == PIDS_SAID + 1 && l->o < sizeof(l->s))
		l->o += (size_t)snprintf(l->s + l->o, sizeof(l->s) - l->o,
		                         " ...");
}

/* Once: the command is gone and the session goes on for the processes it
 * left running. */
static void say_waiting(struct session *s)
{
	struct pid_list l = {.s = ""};
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		/* (A connection whose end is not read yet may be of a
		 * process that is gone already.) */
		if (t->retired || t->disconnected || session_is_command(s, t) ||
		    !proc_alive(t->pid))
			continue;
		pid_list_add(&l, t->pid);
	}
	if (!l.n)
		return; /* said at a later turn, if any runs then */
	s->said_waiting = true;
	hp_log(PFX "%s exited (status %d); the session goes on while %zu "
	           "followed process%s run%s (pid %s); -d or Ctrl-C ends "
	           "it\n",
	       s->cmd_name, session_status_code(s->child_status), l.n,
	       l.n == 1 ? "" : "es", l.n == 1 ? "s" : "", l.s);
}

/*
 * Whether a `-- CMD` session is over: when the command has exited; with
 * --follow-fork, when also no followed process runs (connected), no hello
 * is being read, and no descendant still running may yet say one (within
 * FOLLOW_GRACE_MS of the last process that came or went).  Sets
 * s->follow_timeout: when to look again.
 */
bool session_embedded_over(struct session *s)
{
	s->follow_timeout = -1;
	if (!s->child_exited)
		return false;
	if (!s->cfg->follow_fork)
		return true;
	uint64_t last = s->child_exit_ts;
	bool live = false;
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (session_is_command(s, t)) {
			/* Its last dump and its row's end now, not when the
			 * processes it left are done. */
			if (!t->retired && t->disconnected)
				finish_command(s, t);
			continue;
		}
		if (!t->retired && (!t->disconnected || t->conn_lost))
			live = true;
		if (t->start_ts > last)
			last = t->start_ts;
		if (t->disconnected && t->disconnect_ts > last)
			last = t->disconnect_ts;
	}
	if (live) {
		if (!s->said_waiting)
			say_waiting(s);
		return false;
	}
	if (s->col.npending)
		return false; /* bounded by the hello's own timeout */
	uint64_t now = boottime_ns();
	uint64_t until = last + FOLLOW_GRACE_MS * 1000000ull;
	if (now >= until || running_children() == 0)
		return true;
	uint64_t left = (until - now) / 1000000 + 1;
	s->follow_timeout = left < FOLLOW_POLL_MS ? (int)left : FOLLOW_POLL_MS;
	return false;
}

/* At the end: the processes to follow that stopped waiting for the
 * collector (a row each in the profile), in one line. */
static void say_unprofiled(struct session *s)
{
	pid_t pids[PIDS_SAID];
	unsigned n = collector_add_unprofiled(&s->col, pids, PIDS_SAID);
	if (!n)
		return;
	/* (pid_list_add says the first PIDS_SAID, then " ...".) */
	struct pid_list l = {.s = ""};
	for (unsigned i = 0; i < n; i++)
		pid_list_add(&l, i < PIDS_SAID ? pids[i] : 0);
	hp_log(PFX "%u process%s to follow stopped waiting for the "
	           "collector (busy or stopped for over 100 ms) and ran "
	           "unprofiled (pid %s; a row each in the profile)\n",
	       n, n == 1 ? "" : "es", l.s);
}

/* At the end: what the session did not follow, in one line each (the
 * report says it per process): execs into a new image, processes that
 * started children, and processes to follow that did not wait. */
void session_say_not_followed(struct session *s)
{
	say_unprofiled(s);
	struct pid_list l = {.s = ""};
	for (size_t i = 0; i < s->col.ntargets; i++) {
		const struct target *t = s->col.targets[i];
		if (!t->exec_not_followed[0])
			continue;
		hp_log(PFX "pid %d (%s) exec'd %s, which was not profiled "
		           "(--follow-exec follows every process's exec)\n",
		       (int)t->pid, t->comm[0] ? t->comm : "?",
		       t->exec_not_followed);
	}
	for (size_t i = 0; i < s->col.ntargets; i++) {
		const struct target *t = s->col.targets[i];
		if (!t->children_not_followed)
			continue;
		/* One pid once (its images are targets of their own). */
		bool seen = false;
		for (size_t k = 0; k < i && !seen; k++)
			seen = s->col.targets[k]->pid == t->pid &&
			       s->col.targets[k]->children_not_followed;
		if (!seen)
			pid_list_add(&l, t->pid);
	}
	if (!l.n)
		return;
	hp_log(PFX "%zu profiled process%s started child processes, which "
	           "were not profiled (pid %s; --follow-fork profiles "
	           "them)\n",
	       l.n, l.n == 1 ? "" : "es", l.s);
}
