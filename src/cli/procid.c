/*
 * Process ids shared by the commands that read profiles (procid.h).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "cli/procid.h"
#include "util/err.h"

int procsel_parse(const char *cmd, const char *v, struct procsel *out)
{
	char pid[32];
	const char *dot = strchr(v, '.');
	size_t plen = dot ? (size_t)(dot - v) : strlen(v);
	out->pid = 0;
	out->nth = 0;
	if (plen >= sizeof(pid)) {
		hp_err(cmd, "--pid: '%s' is not a pid or PID.N", v);
		return -1;
	}
	memcpy(pid, v, plen);
	pid[plen] = '\0';
	if (opt_parse_pid(cmd, pid, &out->pid) != 0)
		return -1;
	if (dot) {
		char *end = NULL;
		long nth = strtol(dot + 1, &end, 10);
		if (!dot[1] || *end || nth < 1 || nth > 1000000) {
			hp_err(cmd,
			       "--pid: '%s': after the pid, '.N' numbers one "
			       "of "
			       "its processes from 1",
			       v);
			return -1;
		}
		out->nth = nth;
	}
	return 0;
}

bool procsel_match(const struct procsel *sel, const struct rd_process *procs,
                   size_t n, size_t i)
{
	if (procs[i].pid != sel->pid)
		return false;
	if (!sel->nth)
		return true;
	long nth, count;
	procid_nth(procs, n, i, &nth, &count);
	return nth == sel->nth;
}

void procsel_format(const struct procsel *sel, char *buf, size_t len)
{
	if (sel->nth)
		snprintf(buf, len, "%ld.%ld", sel->pid, sel->nth);
	else
		snprintf(buf, len, "%ld", sel->pid);
}

long procid_pick_one(const char *cmd, const char *file,
                     const struct procsel *sel, const struct rd_process *procs,
                     size_t n)
{
	long one = -1;

	for (size_t i = 0; i < n; i++) {
		if (sel && !procsel_match(sel, procs, n, i))
			continue;
		if (one >= 0) {
			hp_err(cmd,
			       "%s holds several processes%s; choose one with "
			       "--pid%s",
			       file, sel ? " of that pid" : "",
			       sel ? " PID.N" : "");
			return -1;
		}
		one = (long)i;
	}
	if (one < 0 && sel) {
		char buf[48];
		procsel_format(sel, buf, sizeof(buf));
		hp_err(cmd, "%s: no process with pid %s", file, buf);
	} else if (one < 0) {
		hp_err(cmd, "%s: no processes in this profile", file);
	}
	return one;
}

long procid_pick_dump(const char *cmd, const char *file,
                      const struct rd_process *p, const struct rd_dump *d,
                      size_t n, const struct dump_ref *ref)
{
	char who[PATH_MAX + 64];

	snprintf(who, sizeof(who), "%s%sprocess %" PRId64, file ? file : "",
	         file ? ": " : "", p->pid);
	return opt_pick_dump(cmd, who, d, n, ref);
}
