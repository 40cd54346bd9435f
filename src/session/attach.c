/*
 * `record -p/-n` by injection (session_int.h, attach.h): a process the
 * daemon reports it cannot reach (no client loaded, or a client that does
 * not catch the attach signal), and, with no daemon running, every
 * process the session names.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ctl.h"
#include "inject/attach.h"
#include "session/session_int.h"
#include "layout/paths.h"
#include "util/proc.h"
#include "util/err.h"

/* Processes one -n may name without a daemon. */
#define MAX_NAMED 256

void session_attach(struct session *s, pid_t pid, bool explicit_pid)
{
	struct want *w = session_want_add(s, pid, explicit_pid);
	if ((w && w->st == W_ATTACHED) || s->finished)
		return;
	char comm[64];
	proc_comm(pid, comm, sizeof(comm));
	if (!s->lib[0] && session_find_library(s->lib, sizeof(s->lib)) != 0) {
		s->lib[0] = '\0';
		if (w)
			w->st = W_FAILED;
		return;
	}
	char why[INJECT_WHY] = "";
	struct attach_result r;
	struct target *t = NULL;
	/* A forked child of a --follow-fork session says hello on our
	 * socket (no daemon) or the daemon's, which hands it to us. */
	const char *fork_path = NULL;
	char dsock[108];
	if (s->cfg->follow_fork) {
		if (s->direct)
			fork_path = s->col.path[0] ? s->col.path : NULL;
		else if (hp_daemon_paths(NULL, 0, dsock, sizeof(dsock)) == 0)
			fork_path = dsock;
	}
	int rc = attach_process(&s->col, pid, explicit_pid ? "pid" : "name",
	                        s->lib, fork_path, &t, &r, why);
	if (rc) {
		hp_log(PFX "pid %d (%s): not profiled: %s\n", (int)pid,
		       comm[0] ? comm : "?", why);
		if (w)
			w->st = W_FAILED;
		return;
	}
	if (w)
		w->st = W_ATTACHED;
	/* The daemon (when the session has one) counts it the session's:
	 * `heapprof dump -p` and `daemon --status` find it there. */
	if (s->dfd >= 0) {
		struct hp_ctl_attached a = {.pid = (int32_t)pid};
		ctl_send(s->dfd, HP_CTL_ATTACHED, &a, sizeof(a), -1);
	}
	char routed[96] = "";
	if (r.slots)
		snprintf(routed, sizeof(routed),
		         "; %u slots in %u objects routed", r.slots, r.objects);
	hp_log(PFX "pid %d (%s): profiling (attached in %.1f ms, stopped "
	           "%.1f ms%s%s)\n",
	       (int)pid, comm[0] ? comm : "?", r.total_ms, r.stop.stopped_ms,
	       r.loaded ? "; client loaded" : "", routed);
}

int session_attach_direct(struct session *s)
{
	const struct session_config *cfg = s->cfg;
	for (int i = 0; i < cfg->npids; i++)
		session_attach(s, cfg->pids[i], true);
	for (int i = 0; i < cfg->nnames; i++) {
		if (cfg->no_running)
			break;
		pid_t pids[MAX_NAMED];
		int n = proc_find_by_name(cfg->names[i], pids, MAX_NAMED);
		if (n < 0) {
			hp_log(PFX "cannot read /proc: %s\n", strerror(errno));
			return -1;
		}
		if (n > MAX_NAMED) {
			hp_log(PFX "%d processes are named %s; the first %d "
			           "are profiled\n",
			       n, cfg->names[i], MAX_NAMED);
			n = MAX_NAMED;
		}
		if (n == 0)
			hp_log(PFX "no running process is named %s\n",
			       cfg->names[i]);
		for (int k = 0; k < n; k++)
			session_attach(s, pids[k], false);
	}
	if (cfg->nnames && !cfg->no_startup && s->col.ntargets)
		hp_log(PFX "processes named %s that start from now on are not "
		           "waited for: that takes heapprofd\n",
		       cfg->names[0]);
	return 0;
}
