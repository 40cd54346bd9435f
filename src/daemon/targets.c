/*
 * The processes heapprofd's sessions ask for (docs/DAEMON.md, steps a-d):
 * what /proc says of them (uid, maps, the attach signal caught), the
 * attach signal, and the table of targets, each named by its pid and
 * start time so that a reused pid is never taken for the process.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/daemon_int.h"

/* ---- /proc ---------------------------------------------------------------
 */

/* /proc/PID/status with its four uids: 0, or -errno (-ENOENT: no such
 * process). */
int read_status(int pid, struct proc_status *pi)
{
	if (proc_status(pid, pi))
		return -errno;
	return pi->have & PROC_HAVE_UID ? 0 : -EPROTO;
}

int all_uids_ours(const struct proc_status *pi)
{
	uid_t me = getuid();
	for (int i = 0; i < 4; i++)
		if (pi->uid[i] != me)
			return 0;
	return (pi->have & PROC_HAVE_UID) != 0;
}

/* Start time and ppid from /proc/PID/stat; 0 or -errno.  A pid plus its
 * start time names one process even across pid reuse. */
int read_stat(int pid, uint64_t *start, int *ppid)
{
	struct proc_stat st = {0};
	int rc = proc_stat(pid, &st) ? -errno : 0;
	if (start)
		*start = st.start_time;
	if (ppid)
		*ppid = st.ppid;
	return rc;
}

/* Whether m maps a file named libheapprof*. */
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

/* ---- targets -------------------------------------------------------------
 */

void send_target(struct session *s, int pid, uint32_t status, const char *name,
                 const char *fmt, ...)
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

void target_remove(size_t i)
{
	D.targets[i] = D.targets[--D.ntargets];
}

/* The record for pid whose start time matches, or NULL: a record of an
 * earlier process that had the same pid is not it (the timers and the
 * sweep drop those).  Never changes the array, so pointers stay valid. */
struct target *target_find(int pid, uint64_t start)
{
	for (size_t i = 0; i < D.ntargets; i++)
		if (D.targets[i].pid == pid && D.targets[i].start == start)
			return &D.targets[i];
	return NULL;
}

struct target *target_add(int pid, uint64_t start, struct session *s, int state)
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

void target_attached(struct session *s, int pid)
{
	uint64_t start;
	struct proc_status pi;
	if (pid <= 0 || read_stat(pid, &start, NULL) || read_status(pid, &pi) ||
	    !all_uids_ours(&pi)) {
		dlog("session %" PRIu64 ": attached pid %d: not ours or gone",
		     s->id, pid);
		return;
	}
	struct target *t = target_find(pid, start);
	if (t && t->s != s && t->state == T_OWNED) {
		dlog("session %" PRIu64 ": attached pid %d: session %" PRIu64
		     " has it",
		     s->id, pid, t->s->id);
		return;
	}
	if (!t)
		t = target_add(pid, start, s, T_OWNED);
	if (!t) {
		dlog("session %" PRIu64 ": attached pid %d: too many targets",
		     s->id, pid);
		return;
	}
	t->s = s;
	t->state = T_OWNED;
	dlog("session %" PRIu64 ": pid %d attached by the session", s->id, pid);
}

/* Forgets records of processes that are gone (bounded memory for sessions
 * that follow forks for days). */
void targets_sweep(void)
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

/*
 * Checks one running process for session s and signals it (steps a-d of
 * docs/DAEMON.md).  `explicit` is 1 for -p, 0 for a name match (then pi,
 * start are already read and the uid checked by the caller).
 */
void try_target(struct session *s, int pid, int explicit)
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
void scan_names(struct session *s)
{
	if (proc_pids(scan_one, s) < 0)
		dlog("cannot open /proc: %s", strerror(errno));
}
