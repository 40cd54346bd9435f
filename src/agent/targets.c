/*
 * The processes `heapprof serve` serves (targets.h): its -p pids and every
 * process of its -n names, of its own user unless --all-users.
 */
#include <stdbool.h>
#include <unistd.h>

#include "agent/targets.h"
#include "util/proc.h"

static bool servable(const struct serve_config *c, pid_t pid)
{
	uid_t uid;
	if (!proc_alive(pid) || proc_owner(pid, &uid) < 0)
		return false;
	return c->all_users || uid == geteuid();
}

static size_t add_pid(const struct serve_config *c, pid_t *out, size_t n,
                      pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (out[i] == pid)
			return n;
	if (n < SERVE_MAX_TARGETS && servable(c, pid))
		out[n++] = pid;
	return n;
}

size_t targets_list(const struct serve_config *c, pid_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < c->npids; i++)
		n = add_pid(c, out, n, c->pids[i]);
	for (size_t i = 0; i < c->nnames; i++) {
		pid_t found[SERVE_MAX_TARGETS];
		int k = proc_find_by_name(c->names[i], found,
		                          SERVE_MAX_TARGETS);
		for (int j = 0; j < k && j < SERVE_MAX_TARGETS; j++)
			n = add_pid(c, out, n, found[j]);
	}
	return n;
}
