/*
 * `heapprof serve`: an agent that keeps sessions on processes and serves
 * their heaps to Prometheus (/metrics) and to pprof scrapers
 * (/debug/pprof/heap), docs/FLEET.md.
 *
 * One session per process: `heapprof record -p PID` run as a child for
 * each process serve's -p and -n name (looked for each second), started
 * again (backing off) when it ends while its process still runs, ended
 * (SIGINT) when serve ends.  A process that starts later under a -n name
 * gets its own session; one that ends takes only its own.  The HTTP
 * server (src/export/serve.c) runs on libmicrohttpd's thread and reads
 * the processes' shared regions from the outside; this thread only
 * waits for signals and the children.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/record_child.h"
#include "export/serve.h"
#include "util/err.h"
#include "util/proc.h"
#include "util/textfile.h"
#include "util/clock.h"

#define SUBSYS   "serve"
#define MAX_ARGS 64
/* A session that ends while its process runs is started again after
 * 1 s, 2 s, 4 s ... at most this long. */
#define RETRY_MAX_MS 60000
/* How long the sessions may take to end after SIGINT before SIGKILL. */
#define END_WAIT_MS 20000
/* Config file values kept (the options point into them). */
#define MAX_CONFIG_VALUES 256

struct serve_opts {
	const char *pid_args[MAX_ARGS];
	size_t npid_args;
	const char *name_args[MAX_ARGS];
	size_t nname_args;
	const char *interval; /* -i */
	const char *heaps;    /* --heaps */
	int all_heaps;        /* --all-heaps */
	const char *listen;   /* --listen */
	int allow_remote;     /* --allow-remote */
	int all_users;        /* --all-users */
	const char *token_file;
	long top_n;
	uint64_t max_connections, timeout_s;
	const char *output; /* -o: the agent's directory, kept */
	const char *file;   /* a stray operand: refused */
	/* -c FILE: the values read, owned */
	char *config_values[MAX_CONFIG_VALUES];
	size_t nconfig_values;
};

static void usage(FILE *f)
{
	fputs("usage: heapprof serve -p PID[,PID...] | -n NAME[,NAME...]"
	      " [-i N] [--heaps A,B | --all-heaps]\n"
	      "                      [--listen ADDR:PORT] [--allow-remote]"
	      " [--token-file FILE]\n"
	      "                      [--all-users] [--top N]"
	      " [--max-connections N]\n"
	      "                      [--timeout SECONDS] [-o DIR]"
	      " [-c FILE]\n"
	      "\n"
	      "An agent: keeps a session on each process (as 'heapprof"
	      " record -p' does) for\n"
	      "as long as it runs, and serves their heaps over HTTP:\n"
	      "  /metrics                  Prometheus text format: live,"
	      " allocated and freed\n"
	      "                            bytes and objects per heap, RSS,"
	      " memory limit,\n"
	      "                            samples dropped, top functions\n"
	      "  /debug/pprof/heap?pid=N   a heap profile taken now (gzipped"
	      " pprof, Go's\n"
	      "  /debug/pprof/heap?name=N  sample types: go tool pprof reads"
	      " it); &heap=H\n"
	      "                            another heap, &save=1 keeps it"
	      " in DIR (-o)\n"
	      "  /debug/pprof/heap         the processes, profiled or why"
	      " not\n"
	      "  /debug/pprof/symbol       the names of the profiles'"
	      " addresses, for go tool\n"
	      "                            pprof (as Go's net/http/pprof)\n"
	      "\n"
	      "  -p, --pid PID[,PID]     running processes (repeatable)\n"
	      "  -n, --name NAME[,NAME]  processes by name, running and"
	      " started later\n"
	      "  -i, --interval N        sampling interval in bytes (1: every"
	      " allocation)\n"
	      "      --heaps A,B         the heaps to profile (as record's)\n"
	      "      --all-heaps         every heap, custom ones too\n"
	      "      --listen ADDR:PORT  where to listen (default"
	      " 127.0.0.1:6060; [::1]:PORT\n"
	      "                          for IPv6; port 0: any)\n"
	      "      --allow-remote      allow an address other than"
	      " loopback\n"
	      "      --token-file FILE   ask for 'Authorization: Bearer"
	      " <the file's first line>'\n"
	      "                          (FILE: mode 0600 or 0400, as ssh"
	      " wants of a key)\n"
	      "      --all-users         every user's processes (root only;"
	      " default: the\n"
	      "                          agent's own user's)\n"
	      "      --top N             functions per process and heap in"
	      " /metrics (default 5)\n"
	      "      --max-connections N at once (default 16)\n"
	      "      --timeout SECONDS   an idle connection is closed after"
	      " this (default 10)\n"
	      "  -o, --output DIR        keep the sessions' profiles"
	      " (DIR/COMM.PID.db) and the\n"
	      "                          snapshots asked with save=1"
	      " (default: a temporary\n"
	      "                          directory, each profile removed"
	      " when its process ends)\n"
	      "  -c, --config FILE       read these options from FILE, one"
	      " 'key: value' a line\n"
	      "                          (pid, name, interval, heaps,"
	      " all-heaps, listen,\n"
	      "                          allow-remote, token-file,"
	      " all-users, top,\n"
	      "                          max-connections, timeout,"
	      " output); later flags\n"
	      "                          override it\n",
	      f);
}

static int read_config(struct serve_opts *o, const char *path);

static int parse_opt(int argc, char **argv, int *i, void *ctx)
{
	struct serve_opts *o = ctx;
	int missing = 0;
	const char *v;

	if ((v = opt_value(argc, argv, i, "-p", &missing)) ||
	    (v = opt_value(argc, argv, i, "--pid", &missing))) {
		if (o->npid_args == MAX_ARGS) {
			hp_err(SUBSYS, "too many -p");
			return -1;
		}
		o->pid_args[o->npid_args++] = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "-n", &missing)) ||
	    (v = opt_value(argc, argv, i, "--name", &missing))) {
		if (o->nname_args == MAX_ARGS) {
			hp_err(SUBSYS, "too many -n");
			return -1;
		}
		o->name_args[o->nname_args++] = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "-i", &missing)) ||
	    (v = opt_value(argc, argv, i, "--interval", &missing))) {
		uint64_t n;
		if (opt_parse_u64(SUBSYS, "-i", v, 1, UINT32_MAX, &n) < 0)
			return -1;
		o->interval = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "--heaps", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --heaps", &o->heaps);
	if ((v = opt_value(argc, argv, i, "--listen", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --listen", &o->listen);
	if ((v = opt_value(argc, argv, i, "--token-file", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --token-file",
		                    &o->token_file);
	if ((v = opt_value(argc, argv, i, "--top", &missing)))
		return opt_parse_top(SUBSYS, v, &o->top_n);
	if ((v = opt_value(argc, argv, i, "--max-connections", &missing)))
		return opt_parse_u64(SUBSYS, "--max-connections", v, 1, 1024,
		                     &o->max_connections);
	if ((v = opt_value(argc, argv, i, "--timeout", &missing)))
		return opt_parse_u64(SUBSYS, "--timeout", v, 1, 3600,
		                     &o->timeout_s);
	if ((v = opt_value(argc, argv, i, "-o", &missing)) ||
	    (v = opt_value(argc, argv, i, "--output", &missing)))
		return opt_nonempty(SUBSYS, v, "empty -o", &o->output);
	if ((v = opt_value(argc, argv, i, "-c", &missing)) ||
	    (v = opt_value(argc, argv, i, "--config", &missing)))
		return read_config(o, v);
	if (missing) {
		hp_err(SUBSYS, "option '%s' needs a value", argv[*i]);
		return -1;
	}
	if (!strcmp(argv[*i], "--allow-remote")) {
		o->allow_remote = 1;
		return 0;
	}
	if (!strcmp(argv[*i], "--all-users")) {
		o->all_users = 1;
		return 0;
	}
	if (!strcmp(argv[*i], "--all-heaps")) {
		o->all_heaps = 1;
		return 0;
	}
	return 1;
}

/* A config value of a yes/no key: 1, 0, or -1. */
static int config_bool(const char *v)
{
	if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1"))
		return 1;
	if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0"))
		return 0;
	return -1;
}

/* One "key: value" line of a config (trimmed, not a comment) as the
 * option --key.  0 or -1 (message printed). */
static int config_line(struct serve_opts *o, const char *path, int lineno,
                       char *line)
{
	char *colon = strchr(line, ':');
	if (!colon) {
		hp_err(SUBSYS, "%s:%d: expected 'key: value'", path, lineno);
		return -1;
	}
	*colon = '\0';
	char *key = line, *val = colon + 1;
	key[strcspn(key, " \t")] = '\0';
	val += strspn(val, " \t");
	for (char *c = key; *c; c++)
		*c = *c == '_' ? '-' : *c;
	int *flag_of = !strcmp(key, "allow-remote") ? &o->allow_remote
	               : !strcmp(key, "all-users")  ? &o->all_users
	               : !strcmp(key, "all-heaps")  ? &o->all_heaps
	                                            : NULL;
	if (flag_of) {
		int b = config_bool(val);
		if (b < 0) {
			hp_err(SUBSYS, "%s:%d: %s is true or false", path,
			       lineno, key);
			return -1;
		}
		*flag_of = b;
		return 0;
	}
	if (!strcmp(key, "config")) {
		hp_err(SUBSYS, "%s:%d: a config cannot read another", path,
		       lineno);
		return -1;
	}
	if (o->nconfig_values == MAX_CONFIG_VALUES) {
		hp_err(SUBSYS, "%s:%d: too many lines", path, lineno);
		return -1;
	}
	char flag[64];
	char *value = strdup(val);
	if (!value) {
		hp_err(SUBSYS, "out of memory");
		return -1;
	}
	o->config_values[o->nconfig_values++] = value;
	snprintf(flag, sizeof(flag), "--%s", key);
	char *argv[] = {"serve", flag, value, NULL};
	int i = 1;
	int r = parse_opt(3, argv, &i, o);
	if (r > 0)
		hp_err(SUBSYS, "%s:%d: unknown key '%s'", path, lineno, key);
	return r ? -1 : 0;
}

/* A config is a few lines; the bound keeps a wrong file (a log, a
 * binary) from being read into memory. */
#define CONFIG_FILE_MAX (1u << 20)

static int read_config(struct serve_opts *o, const char *path)
{
	char *buf, why[HP_TEXT_WHY_MAX];
	size_t len;
	if (hp_text_read(path, CONFIG_FILE_MAX, HP_TEXT_STDIN, &buf, &len,
	                 why) < 0) {
		hp_err(SUBSYS, "--config %s: %s", path, why);
		return -1;
	}
	int lineno = 0, err = 0;
	for (char *p = buf, *end = buf + len; !err && p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char *l = p;
		lineno++;
		p += n + 1;
		if (n && l[n - 1] == '\r')
			n--; /* a CRLF file */
		/* A NUL would end the value there; any other control byte
		 * (a tab is a blank) is no part of a path, a name or a
		 * number: the file is not what it should be. */
		const char *c = hp_text_control(l, n, "\t");
		if (c && !*c) {
			hp_err(SUBSYS, "%s:%d: a NUL byte: not a text config",
			       path, lineno);
			err = -1;
			break;
		}
		if (c) {
			hp_err(SUBSYS,
			       "%s:%d: a control byte (\\x%02x): not a"
			       " text config",
			       path, lineno, (unsigned char)*c);
			err = -1;
			break;
		}
		l[n] = '\0'; /* the '\n', or buf's own NUL at the end */
		l += strspn(l, " \t");
		n = strlen(l);
		while (n && (l[n - 1] == ' ' || l[n - 1] == '\t'))
			l[--n] = '\0';
		if (!*l || *l == '#')
			continue;
		err = config_line(o, path, lineno, l);
	}
	/* The values kept point into copies (config_line): buf goes. */
	free(buf);
	return err;
}

/* ADDR:PORT (IPv4, or [IPv6]:PORT) into *sa; loopback unless
 * allow_remote.  0 or -1 (message printed). */
static int parse_listen(const char *s, int allow_remote,
                        struct sockaddr_storage *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	long port;
	if (!colon || (size_t)(colon - s) >= sizeof(host) ||
	    opt_parse_long(colon + 1, &port) < 0 || port < 0 || port > 65535) {
		hp_err(SUBSYS,
		       "invalid --listen '%s' (ADDR:PORT, e.g."
		       " 127.0.0.1:6060 or [::1]:6060)",
		       s);
		return -1;
	}
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	bool loopback;
	size_t hl = strlen(host);
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)sa;
		host[hl - 1] = '\0';
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1) {
			hp_err(SUBSYS,
			       "invalid --listen address '%s' (an IPv6"
			       " address)",
			       host + 1);
			return -1;
		}
		loopback = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)sa;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1) {
			hp_err(SUBSYS,
			       "invalid --listen address '%s' (an IPv4"
			       " address, or [IPv6])",
			       host);
			return -1;
		}
		loopback = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
	}
	if (!loopback && !allow_remote) {
		hp_err(SUBSYS,
		       "--listen %s is not a loopback address: anyone"
		       " who reaches it reads these heaps; add --allow-remote"
		       " (and --token-file) to mean it",
		       s);
		return -1;
	}
	return 0;
}

/* A token is a line; the bound keeps a wrong file from being read. */
#define TOKEN_FILE_MAX (64u << 10)

/* The token: the file's first line, not empty, in a regular file only
 * its owner may use (a token others can read is no secret; one they can
 * write lets them in).  0 or -1 (message). */
static int read_token(const char *path, char *tok, size_t len)
{
	char *buf, why[HP_TEXT_WHY_MAX];
	size_t n;
	if (hp_text_read(path, TOKEN_FILE_MAX, HP_TEXT_PRIVATE, &buf, &n, why) <
	    0) {
		hp_err(SUBSYS, "--token-file %s: %s", path, why);
		return -1;
	}
	const char *nl = memchr(buf, '\n', n);
	size_t k = nl ? (size_t)(nl - buf) : n;
	if (k && buf[k - 1] == '\r')
		k--;
	/* No control byte can travel in an HTTP header: such a token could
	 * never match, and a NUL would cut it short. */
	const char *c = hp_text_control(buf, k, "");
	const char *bad = !n         ? "empty"
	                  : !k       ? "the first line is empty"
	                  : c        ? "a control byte in the first line"
	                  : k >= len ? "the first line is too long"
	                             : NULL;
	if (bad) {
		if (c)
			hp_err(SUBSYS, "--token-file %s: %s (\\x%02x)", path,
			       bad, (unsigned char)*c);
		else
			hp_err(SUBSYS, "--token-file %s: %s", path, bad);
		free(buf);
		return -1;
	}
	memcpy(tok, buf, k);
	tok[k] = '\0';
	free(buf);
	return 0;
}

/* ---- the sessions: heapprof record -p PID as children ---------------------
 */

struct session {
	pid_t target;      /* 0: a free slot */
	uint64_t start;    /* the target's start time (pid reuse) */
	pid_t child;       /* heapprof record; 0: none now */
	unsigned failures; /* ended while the target ran, in a row */
	uint64_t retry_ms; /* CLOCK_MONOTONIC ms: start again from then */
	char comm[64];
	char db[PATH_MAX], log[PATH_MAX];
};

struct agent {
	const struct serve_opts *o;
	const struct serve_config *c;
	struct session s[SERVE_MAX_TARGETS];
};

static uint64_t start_time(pid_t pid)
{
	struct proc_stat st;
	return proc_stat(pid, &st) == 0 ? st.start_time : 0;
}

static int start_record(struct agent *a, struct session *ss)
{
	const struct serve_opts *o = a->o;
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
static void forget(struct agent *a, struct session *ss)
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

static struct session *session_of(struct agent *a, pid_t child)
{
	for (size_t i = 0; i < SERVE_MAX_TARGETS; i++)
		if (a->s[i].target && a->s[i].child == child)
			return &a->s[i];
	return NULL;
}

/* The children that ended: a session whose process runs is tried again
 * later (1 s, 2 s, ... 60 s); the others are forgotten. */
static void reap(struct agent *a)
{
	int st;
	pid_t w;
	while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
		struct session *ss = session_of(a, w);
		if (!ss)
			continue;
		ss->child = 0;
		if (proc_alive(ss->target) &&
		    start_time(ss->target) == ss->start) {
			char why[512];
			record_child_last_line(ss->log, why, sizeof(why));
			unsigned k = ss->failures < 6 ? ss->failures : 6;
			uint64_t wait = 1000u << k;
			ss->failures++;
			ss->retry_ms =
			        hp_mono_ms() +
			        (wait < RETRY_MAX_MS ? wait : RETRY_MAX_MS);
			fprintf(stderr,
			        "heapprof: serve: pid %d (%s): session ended"
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
static void follow(struct agent *a)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = serve_targets(a->c, t);
	uint64_t now = hp_mono_ms();
	for (size_t i = 0; i < n; i++) {
		uint64_t start = start_time(t[i]);
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
		     start_time(x->target) != x->start))
			forget(a, x);
	}
}

/* SIGINT to every session, SIGKILL to those still running after
 * END_WAIT_MS; every slot forgotten. */
static void end_all(struct agent *a)
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

/* ---- the command ---------------------------------------------------------
 */

/* The -p values and -n names, split at commas (names into bufs, owned). */
static int split_targets(const struct serve_opts *o, pid_t *pids, size_t *npids,
                         const char **names, size_t *nnames, char **bufs)
{
	*npids = *nnames = 0;
	for (size_t i = 0; i < o->npid_args; i++) {
		char *dup = strdup(o->pid_args[i]), *save = NULL;
		for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t;
		     t = strtok_r(NULL, ",", &save)) {
			long p;
			if (opt_parse_pid(SUBSYS, t, &p) < 0) {
				free(dup);
				return -1;
			}
			if (*npids < SERVE_MAX_TARGETS)
				pids[(*npids)++] = (pid_t)p;
		}
		free(dup);
	}
	for (size_t i = 0; i < o->nname_args; i++) {
		char *save = NULL;
		bufs[i] = strdup(o->name_args[i]);
		for (char *t = bufs[i] ? strtok_r(bufs[i], ",", &save) : NULL;
		     t; t = strtok_r(NULL, ",", &save))
			if (*nnames < SERVE_MAX_TARGETS)
				names[(*nnames)++] = t;
	}
	return 0;
}

/* The agent's directory: -o DIR (made if missing), or a temporary one. */
static int make_dir(const struct serve_opts *o, char *dir, size_t len)
{
	if (o->output) {
		snprintf(dir, len, "%s", o->output);
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

static int check_opts(const struct serve_opts *o)
{
	if (o->file) {
		hp_err(SUBSYS,
		       "serve takes no operand ('%s'): -p or -n names"
		       " the processes",
		       o->file);
		return -1;
	}
	if (!o->npid_args && !o->nname_args) {
		hp_err(SUBSYS, "need -p PID or -n NAME (see heapprof serve"
		               " --help)");
		return -1;
	}
	if (o->all_users && geteuid() != 0) {
		hp_err(SUBSYS,
		       "--all-users needs root (the agent runs as uid"
		       " %d)",
		       (int)geteuid());
		return -1;
	}
	return 0;
}

static int run(struct serve_opts *o, struct serve_config *c)
{
	/* signals: waited for, not handled; SIGPIPE ignored (MHD writes to
	 * sockets that clients close) */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct serve_server *s = serve_start(c);
	if (!s)
		return 1;
	static struct agent a;
	memset(&a, 0, sizeof(a));
	a.o = o;
	a.c = c;
	char where[INET6_ADDRSTRLEN + 16];
	serve_addr_str(&c->addr, serve_port(s), where, sizeof(where));
	printf("heapprof serve: listening on http://%s/ (/metrics,"
	       " /debug/pprof/heap); sessions in %s\n",
	       where, c->dir);
	fflush(stdout);
	for (;;) {
		reap(&a);
		follow(&a);
		serve_tick(s);
		struct timespec ts = {.tv_sec = 1};
		int sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
			break;
	}
	serve_stop(s);
	end_all(&a);
	/* The mask stays: a second SIGTERM (timeout(1) sends one to the
	 * process group too) must not kill serve on its way out. */
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	static struct serve_opts o;
	memset(&o, 0, sizeof(o));
	o.listen = "127.0.0.1:6060";
	o.top_n = 5;
	o.max_connections = 16;
	o.timeout_s = 10;
	size_t nops;
	int rc = opt_walk(SUBSYS, argc, argv, parse_opt, &o, usage, &o.file, 1,
	                  &nops);
	pid_t pids[SERVE_MAX_TARGETS];
	const char *names[SERVE_MAX_TARGETS];
	char *names_buf[MAX_ARGS] = {0};
	struct serve_config c;
	char token[4096], dir[PATH_MAX - 128];
	memset(&c, 0, sizeof(c));
	bool helped = rc == 1;
	if (rc)
		rc = rc == 1 ? 0 : 2;
	else if (check_opts(&o) < 0 ||
	         split_targets(&o, pids, &c.npids, names, &c.nnames,
	                       names_buf) < 0 ||
	         parse_listen(o.listen, o.allow_remote, &c.addr) < 0 ||
	         (o.token_file &&
	          read_token(o.token_file, token, sizeof(token)) < 0))
		rc = 2;
	else if (make_dir(&o, dir, sizeof(dir)) < 0)
		rc = 1;
	if (!rc && !helped) {
		c.pids = pids;
		c.names = names;
		c.all_users = o.all_users;
		c.top_n = o.top_n;
		c.token = o.token_file ? token : NULL;
		c.max_connections = (unsigned)o.max_connections;
		c.timeout_s = (unsigned)o.timeout_s;
		c.dir = dir;
		c.keep = o.output != NULL;
		rc = run(&o, &c);
		if (!c.keep)
			rmdir(dir);
	}
	for (size_t i = 0; i < o.nname_args; i++)
		free(names_buf[i]);
	for (size_t i = 0; i < o.nconfig_values; i++)
		free(o.config_values[i]);
	return rc;
}
