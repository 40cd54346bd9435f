/*
 * `heapprof daemon [--foreground] [--status] [--stop]`, also run as
 * `heapprofd`: starts the per-user daemon (src/daemon/daemon.c,
 * docs/DAEMON.md), or asks a running one for its status or to stop.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "daemon/ctl.h"
#include "daemon/daemon.h"
#include "util/err.h"
#include "util/proc.h"

#define SUBSYS "daemon"

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
	        "usage: %s [--foreground]   start the per-user daemon\n"
	        "       %s --status         show its sessions and targets\n"
	        "       %s --stop           stop it\n"
	        "\n"
	        "The daemon brokers 'heapprof record -p PID / -n NAME' "
	        "sessions and the\n"
	        "processes that have libheapprof loaded.  See "
	        "docs/DAEMON.md.\n",
	        prog, prog, prog);
}

static int status(void)
{
	char err[512];
	int fd = ctl_connect_daemon(err, sizeof(err));
	if (fd < 0) {
		hp_err(SUBSYS, "%s", err);
		return 1;
	}
	int rc = ctl_send(fd, HP_CTL_STATUS, NULL, 0, -1);
	struct hp_ctl_msg m;
	if (!rc)
		rc = ctl_recv(fd, &m, 5000, NULL);
	close(fd);
	if (rc) {
		hp_err(SUBSYS, "no answer from heapprofd: %s", strerror(-rc));
		return 1;
	}
	if (m.type == HP_CTL_ERROR) {
		hp_err(SUBSYS, "heapprofd: %s", (char *)m.payload);
		ctl_msg_free(&m);
		return 1;
	}
	if (m.type != HP_CTL_STATUS_REPLY) {
		hp_err(SUBSYS, "unexpected answer (type %u) from heapprofd",
		       m.type);
		ctl_msg_free(&m);
		return 1;
	}
	/* The text is the daemon's; print it as text only. */
	for (uint32_t i = 0; i < m.len && m.payload[i]; i++) {
		unsigned char ch = m.payload[i];
		putchar(ch == '\n' || (ch >= 32 && ch < 127) ? ch : '?');
	}
	ctl_msg_free(&m);
	return 0;
}

/* Whether a process is gone: no such pid, or a zombie nobody reaped yet
 * (a daemon's parent is whoever adopted it). */
static int gone(int pid)
{
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return 1;
	return !proc_alive(pid);
}

static int stop(void)
{
	char err[512];
	int fd = ctl_connect_daemon(err, sizeof(err));
	if (fd < 0) {
		hp_err(SUBSYS, "%s", err);
		return 1;
	}
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	int pid = 0;
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl))
		pid = cred.pid;
	int rc = ctl_send(fd, HP_CTL_SHUTDOWN, NULL, 0, -1);
	if (rc) {
		close(fd);
		hp_err(SUBSYS, "cannot ask heapprofd to stop: %s",
		       strerror(-rc));
		return 1;
	}
	/* The daemon closes the connection as it exits; then wait for the
	 * process itself to be gone, so a new daemon can start at once. */
	struct hp_ctl_msg m;
	rc = ctl_recv(fd, &m, 5000, NULL);
	if (!rc)
		ctl_msg_free(&m);
	close(fd);
	for (int i = 0; pid > 0 && i < 500; i++) {
		if (gone(pid)) {
			printf("heapprofd: stopped (pid %d)\n", pid);
			return 0;
		}
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (pid > 0) {
		hp_err(SUBSYS, "heapprofd (pid %d) did not exit within 5 s",
		       pid);
		return 1;
	}
	printf("heapprofd: stopped\n");
	return 0;
}

int cmd_daemon(int argc, char **argv)
{
	/* `heapprof daemon ...` or `heapprofd ...` */
	const char *prog =
	        strcmp(argv[0], "daemon") ? argv[0] : "heapprof daemon";
	int foreground = 0, want_status = 0, want_stop = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--foreground") || !strcmp(a, "-f"))
			foreground = 1;
		else if (!strcmp(a, "--status"))
			want_status = 1;
		else if (!strcmp(a, "--stop"))
			want_stop = 1;
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout, prog);
			return 0;
		} else {
			hp_err(SUBSYS, "unknown option '%s' (see %s --help)", a,
			       prog);
			return 2;
		}
	}
	if (want_status + want_stop + foreground > 1) {
		hp_err(SUBSYS,
		       "--foreground, --status and --stop exclude each other");
		return 2;
	}
	if (want_status)
		return status();
	if (want_stop)
		return stop();
	return daemon_run(foreground);
}
