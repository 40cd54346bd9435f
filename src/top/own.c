/*
 * top's own session (own.h): `heapprof record -p PID` as a child, its
 * profile and output in a temporary directory that goes with it.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/record_child.h"
#include "top/own.h"
#include "util/clock.h"
#include "util/err.h"

#define SUBSYS "top"
/* How long its record may take to end after SIGINT before SIGKILL. */
#define OWN_SESSION_END_MS 20000

/* `heapprof record -p PID -o DIR/top.db [-i N]`, its output to DIR/log,
 * in its own process group (a Ctrl-C at the terminal is ours to pass
 * on).  0, or -1 with the reason printed. */
int own_start(struct own_session *s, pid_t pid, const char *interval)
{
	const char *tmp = getenv("TMPDIR");
	char db[PATH_MAX + 16], pidstr[16];

	snprintf(s->dir, sizeof(s->dir), "%s/heapprof-top.XXXXXX",
	         tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(s->dir)) {
		hp_err(SUBSYS, "creating a temporary directory in %s: %s",
		       tmp && tmp[0] ? tmp : "/tmp", strerror(errno));
		s->dir[0] = '\0';
		return -1;
	}
	snprintf(db, sizeof(db), "%s/top.db", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/record.log", s->dir);
	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	char *argv[] = {"heapprof",
	                "record",
	                "-p",
	                pidstr,
	                "-o",
	                db,
	                interval ? "-i" : NULL,
	                (char *)interval,
	                NULL};
	s->child = record_child_start(SUBSYS, argv, s->log);
	if (s->child < 0) {
		s->child = 0;
		return -1;
	}
	return 0;
}

/* Whether record still runs (reaps it when not). */
bool own_running(struct own_session *s)
{
	if (!s->child)
		return false;
	if (waitpid(s->child, NULL, WNOHANG) == s->child) {
		s->child = 0;
		return false;
	}
	return true;
}

/* Ends record (SIGINT: its session detaches and writes its profile, which
 * we do not keep) and removes the directory. */
void own_end(struct own_session *s)
{
	if (s->child) {
		kill(s->child, SIGINT);
		uint64_t until = hp_mono_ms() + OWN_SESSION_END_MS;
		while (waitpid(s->child, NULL, WNOHANG) == 0) {
			if (hp_mono_ms() > until) {
				kill(s->child, SIGKILL);
				waitpid(s->child, NULL, 0);
				break;
			}
			poll(NULL, 0, 20);
		}
		s->child = 0;
	}
	if (!s->dir[0])
		return;
	DIR *d = opendir(s->dir);
	struct dirent *e;
	char path[PATH_MAX + 256];
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", s->dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(s->dir);
	s->dir[0] = '\0';
}
