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
 *
 * This file starts the daemon and runs its poll loop; daemon_int.h lists
 * the files that hold the rest.
 */
#include "daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
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
#include <unistd.h>

#include "daemon/daemon_int.h"
#include "layout/paths.h"
#include "util/err.h"

struct daemon_state D;

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
		hp_log("heapprof: daemon: the socket path is too long "
		       "(XDG_RUNTIME_DIR)\n");
		return 1;
	}
	int pipefd[2] = {-1, -1};
	if (!foreground) {
		if (pipe2(pipefd, O_CLOEXEC) != 0) {
			hp_log("heapprof: daemon: pipe: %s\n", strerror(errno));
			return 1;
		}
		fflush(NULL);
		pid_t child = fork();
		if (child < 0) {
			hp_log("heapprof: daemon: fork: %s\n", strerror(errno));
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
				hp_log("%s", buf);
			else
				hp_log("heapprof: daemon: heapprofd exited "
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
		hp_log("heapprofd: listening on %s (pid %d)\n", D.sock,
		       (int)getpid());
	}
	int rc = serve();
	dlog("exiting");
	cleanup();
	if (!foreground)
		_exit(rc);
	return rc;
}
