/*
 * `heapprof serve`'s sessions (supervisor.h, docs/FLEET.md "Processes and
 * threads"): one `heapprof record -p PID` child per process served
 * (record_child.h), its profile and log in the agent's directory; a
 * session that ends while its process still runs started again after
 * 1 s, 2 s, 4 s ... at most RETRY_MAX_MS; every session ended (SIGINT)
 * at the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/record_child.h"
#include "agent/supervisor.h"
#include "agent/targets.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/proc.h"

#define SUBSYS "serve"
/* A session that ends while its process runs is started again after
 * 1 s, 2 s, 4 s ... at most this long. */
#define RETRY_MAX_MS 60000
/* How long the sessions may take to end after SIGINT before SIGKILL. */
#define END_WAIT_MS 20000

struct session {
	pid_t target;      /* 0: a free slot */
	uint64_t start;    /* the target's start time (pid reuse) */
	pid_t child;       /* heapprof record; 0: none now */
	unsigned failures; /* ended while the target ran, in a row */
	uint64_t retry_ms; /* CLOCK_MONOTONIC ms: start again from then */
	char comm[64];
	char db[PATH_MAX], log[PATH_MAX];
};

struct supervisor {
	const struct supervisor_opts *o;
	const struct serve_config *c;
	struct session s[SERVE_MAX_TARGETS];
};

static int start_record(struct supervisor *a, struct session *ss)
{
	const struct supervisor_opts *o = a->o;
	char pid[16];
	char *argv[16];
	size_t n = 0;
	snprintf(pid, sizeof(pid), "%d", (int)ss->target);
	argv[n++] = "heapprof";
	argv[n++] = "record";
	argv[n++] = "-p";
	argv[n++] = pid;
	if (o->interval) {
		argv[n++] = "-i";
		argv[n++] = (char *)o->interval;
	}
	if (o->heaps) {
		argv[n++] = "--heaps";
		argv[n++] = (char *)o->heaps;
	}
	if (o->all_heaps)
		argv[n++] = "--all-heaps";
	argv[n++] = "-o";
	argv[n++] = ss->db;
	argv[n] = NULL;
	ss->child = record_child_start(SUBSYS, argv, ss->log);
	if (ss->child < 0) {
		ss->child = 0;
		return -1;
	}
	return 0;
}

/* Slot ss is free again: its files removed unless kept. */
static void forget(struct supervisor *a, struct session *ss)
{
	if (!a->c->keep) {
		char side[PATH_MAX + 8];
		unlink(ss->db);
		unlink(ss->log);
		/* SQLite's, when record was killed */
		snprintf(side, sizeof(side), "%s-wal", ss->db);
		unlink(side);
		snprintf(side, sizeof(side), "%s-shm", ss->db);
		unlink(side);
	}
	memset(ss, 0, sizeof(*ss));
}

static struct session *session_of(struct supervisor *a, pid_t child)
{
	for (size_t i = 0; i < SERVE_MAX_TARGETS; i++)
		if (a->s[i].target && a->s[i].child == child)
			return &a->s[i];
	return NULL;
}

/* The children that ended: a session whose process runs is tried again
 * later (1 s, 2 s, ... 60 s); the others are forgotten. */
static void reap(struct supervisor *a)
{
	int st;
	pid_t w;
	while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
		struct session *ss = session_of(a, w);
		if (!ss)
			continue;
		ss->child = 0;
		if (proc_alive(ss->target) &&
		    proc_start_time(ss->target) == ss->start) {
			char why[512];
			record_child_last_line(ss->log, why, sizeof(why));
			unsigned k = ss->failures < 6 ? ss->failures : 6;
			uint64_t wait = 1000u << k;
			ss->failures++;
			ss->retry_ms =
			        hp_mono_ms() +
			        (wait < RETRY_MAX_MS ? wait : RETRY_MAX_MS);
			hp_log("heapprof: serve: pid %d (%s): session ended"
			       " (%s); again in %" PRIu64 " s\n",
			       (int)ss->target, ss->comm, why,
			       (wait < RETRY_MAX_MS ? wait : RETRY_MAX_MS) /
			               1000);
			continue;
		}
		forget(a, ss);
	}
}

/* A session for every target without one; those due started again. */
static void follow(struct supervisor *a)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = targets_list(a->c, t);
	uint64_t now = hp_mono_ms();
	for (size_t i = 0; i < n; i++) {
		uint64_t start = proc_start_time(t[i]);
		struct session *ss = NULL, *free_slot = NULL;
		for (size_t k = 0; k < SERVE_MAX_TARGETS; k++) {
			struct session *x = &a->s[k];
			if (x->target == t[i] && x->start == start)
				ss = x;
			else if (x->target == t[i] && !x->child)
				forget(a, x); /* its pid names another now */
			if (!x->target && !free_slot)
				free_slot = x;
		}
		if (!ss && free_slot) {
			ss = free_slot;
			ss->target = t[i];
			ss->start = start;
			proc_comm(t[i], ss->comm, sizeof(ss->comm));
			for (char *c = ss->comm; *c; c++)
				if (*c == '/' || *c == ' ')
					*c = '_';
			snprintf(ss->db, sizeof(ss->db), "%s/%s.%d.db",
			         a->c->dir, ss->comm, (int)t[i]);
			snprintf(ss->log, sizeof(ss->log), "%s/%s.%d.log",
			         a->c->dir, ss->comm, (int)t[i]);
		}
		if (ss && !ss->child && now >= ss->retry_ms)
			start_record(a, ss);
	}
	/* the sessions of processes gone whose record ended */
	for (size_t k = 0; k < SERVE_MAX_TARGETS; k++) {
		struct session *x = &a->s[k];
		if (x->target && !x->child &&
		    (!proc_alive(x->target) ||
		     proc_start_time(x->target) != x->start))
			forget(a, x);
	}
}

/* SIGINT to every session, SIGKILL to those still running after
 * END_WAIT_MS; every slot forgotten. */
static void end_all(struct supervisor *a)
{
	for (size_t k = 0; k < SERVE_MAX_TARGETS; k++)
		if (a->s[k].child)
			kill(a->s[k].child, SIGINT);
	for (int waited = 0;; waited += 20) {
		int st;
		pid_t w;
		while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
			struct session *ss = session_of(a, w);
			if (ss)
				ss->child = 0;
		}
		bool running = false;
		for (size_t k = 0; k < SERVE_MAX_TARGETS; k++)
			running |= a->s[k].child != 0;
		if (!running)
			break;
		if (waited > END_WAIT_MS) {
			for (size_t k = 0; k < SERVE_MAX_TARGETS; k++)
				if (a->s[k].child) {
					kill(a->s[k].child, SIGKILL);
					waitpid(a->s[k].child, NULL, 0);
					a->s[k].child = 0;
				}
			break;
		}
		poll(NULL, 0, 20);
	}
	for (size_t k = 0; k < SERVE_MAX_TARGETS; k++)
		if (a->s[k].target)
			forget(a, &a->s[k]);
}

struct supervisor *supervisor_new(const struct serve_config *c,
                                  const struct supervisor_opts *o)
{
	struct supervisor *a = calloc(1, sizeof(*a));
	if (!a) {
		hp_err(SUBSYS, "out of memory");
		return NULL;
	}
	a->o = o;
	a->c = c;
	return a;
}

void supervisor_tick(struct supervisor *a)
{
	reap(a);
	follow(a);
}

void supervisor_end(struct supervisor *a)
{
	if (!a)
		return;
	end_all(a);
	free(a);
}

int supervisor_make_dir(const char *output, char *dir, size_t len)
{
	if (output) {
		snprintf(dir, len, "%s", output);
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			hp_err(SUBSYS, "-o %s: %s", dir, strerror(errno));
			return -1;
		}
		struct stat st;
		if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    access(dir, W_OK) < 0) {
			hp_err(SUBSYS,
			       "-o %s: not a directory this user can"
			       " write",
			       dir);
			return -1;
		}
		return 0;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, len, "%s/heapprof-serve.XXXXXX",
	         tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		hp_err(SUBSYS, "creating a temporary directory: %s",
		       strerror(errno));
		return -1;
	}
	return 0;
}
