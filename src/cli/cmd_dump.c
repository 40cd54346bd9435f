/*
 * `heapprof dump [-p PID]`: asks heapprofd to have every recording session
 * (or the one profiling PID) write a dump now, and says what came of it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "config/config.h"
#include "cli/options.h"
#include "daemon/ctl.h"
#include "util/err.h"

#define SUBSYS "dump"

/* The daemon waits up to 10 s for sessions; leave it room to answer. */
#define DUMP_WAIT_MS 15000

static void usage(FILE *f)
{
	fputs("usage: heapprof dump [-p PID]\n"
	      "\n"
	      "Asks every 'heapprof record -p/-n' session (through heapprofd) "
	      "to write a\n"
	      "dump now; with -p, only the session profiling PID.\n"
	      "Exit status: 0 when something was dumped, 1 when nothing was "
	      "(no session,\n"
	      "no daemon), 2 on a usage error.\n",
	      f);
}

static const char *plural(uint32_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

int cmd_dump(int argc, char **argv)
{
	uint64_t pid = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		const char *v = NULL;
		if (!strcmp(a, "-p") || !strcmp(a, "--pid")) {
			if (i + 1 >= argc) {
				hp_err(SUBSYS, "%s needs a PID", a);
				return 2;
			}
			v = argv[++i];
		} else if (!strncmp(a, "-p", 2) && a[2]) {
			v = a + 2;
		} else if (!strncmp(a, "--pid=", 6)) {
			v = a + 6;
		} else {
			hp_err(SUBSYS,
			       "unknown argument '%s' (usage: heapprof dump "
			       "[-p PID])",
			       a);
			return 2;
		}
		if (opt_parse_u64(SUBSYS, "PID", v, 1, CFG_PID_MAX, &pid))
			return 2;
	}
	char err[512];
	int fd = ctl_connect_daemon(err, sizeof(err));
	if (fd < 0) {
		hp_err(SUBSYS, "%s", err);
		return 1;
	}
	struct hp_ctl_dump d = {.pid = (int32_t)pid};
	int rc = ctl_send(fd, HP_CTL_DUMP, &d, sizeof(d), -1);
	struct hp_ctl_msg m;
	if (!rc)
		rc = ctl_recv(fd, &m, DUMP_WAIT_MS, NULL);
	close(fd);
	if (rc) {
		hp_err(SUBSYS, "no answer from heapprofd: %s",
		       rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
		return 1;
	}
	if (m.type == HP_CTL_ERROR) {
		hp_err(SUBSYS, "heapprofd: %.300s", (char *)m.payload);
		ctl_msg_free(&m);
		return 1;
	}
	if (m.type != HP_CTL_DUMP_RESULT) {
		hp_err(SUBSYS, "unexpected answer (type %u) from heapprofd",
		       m.type);
		ctl_msg_free(&m);
		return 1;
	}
	struct hp_ctl_dump_result r;
	memcpy(&r, m.payload, sizeof(r));
	ctl_msg_free(&m);
	if (!r.sessions && !r.timeouts) {
		if (pid)
			hp_err(SUBSYS,
			       "no session is recording pid %llu; nothing "
			       "dumped",
			       (unsigned long long)pid);
		else
			hp_err(SUBSYS,
			       "no session is recording; nothing dumped");
		return 1;
	}
	char extra[160] = "";
	size_t n = 0;
	if (r.errors)
		n += (size_t)snprintf(extra + n, sizeof(extra) - n, ", %u %s",
		                      r.errors,
		                      plural(r.errors, "error", "errors"));
	if (r.timeouts)
		snprintf(extra + n, sizeof(extra) - n,
		         ", %u %s did not answer in time", r.timeouts,
		         plural(r.timeouts, "session", "sessions"));
	fprintf(r.dumps ? stdout : stderr,
	        "heapprof: dump: %u %s dumped in %u %s%s\n", r.dumps,
	        plural(r.dumps, "process", "processes"), r.sessions,
	        plural(r.sessions, "session", "sessions"), extra);
	return r.dumps ? 0 : 1;
}
