/*
 * `heapprof serve`: an agent that keeps sessions on processes and serves
 * their heaps to Prometheus (/metrics) and to pprof scrapers
 * (/debug/pprof/heap), docs/FLEET.md.
 *
 * The session is `heapprof record` with serve's targets, run as a child
 * (as `heapprof top` runs its own): restarted when it ends while serve
 * runs, ended (SIGINT) when serve ends.  The HTTP server (src/export/
 * serve.c) runs on libmicrohttpd's thread and reads the targets' shared
 * regions from the outside; this thread only waits for signals and the
 * child.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "export/serve.h"
#include "util/err.h"

#define SUBSYS   "serve"
#define MAX_ARGS 64
/* A session that ends is started again after this long. */
#define RESTART_DELAY_MS 1000
/* How long record may take to end after SIGINT before SIGKILL. */
#define END_WAIT_MS 20000

struct serve_opts {
	const char *pid_args[MAX_ARGS];
	size_t npid_args;
	const char *name_args[MAX_ARGS];
	size_t nname_args;
	const char *interval; /* -i */
	const char *heaps;    /* --heaps */
	const char *listen;   /* --listen */
	int allow_remote;     /* --allow-remote */
	const char *token_file;
	long top_n;
	uint64_t max_connections, timeout_s;
	const char *output; /* -o: the sessions' profile */
	const char *file;   /* a stray operand: refused */
};

static void usage(FILE *f)
{
	fputs("usage: heapprof serve -p PID[,PID...] | -n NAME[,NAME...]"
	      " [-i N] [--heaps A,B]\n"
	      "                      [--listen ADDR:PORT] [--allow-remote]"
	      " [--token-file FILE]\n"
	      "                      [--top N] [--max-connections N]"
	      " [--timeout SECONDS] [-o FILE]\n"
	      "\n"
	      "An agent: keeps a session on the processes (as 'heapprof"
	      " record -p/-n' does)\n"
	      "for as long as it runs and serves their heaps over HTTP:\n"
	      "  /metrics                  Prometheus text format: live,"
	      " allocated and freed\n"
	      "                            bytes and objects, RSS, memory"
	      " limit, top functions\n"
	      "  /debug/pprof/heap?pid=N   a heap profile taken now (gzipped"
	      " pprof, Go's\n"
	      "  /debug/pprof/heap?name=N  sample types: go tool pprof reads"
	      " it)\n"
	      "  /debug/pprof/heap         the processes profiled\n"
	      "\n"
	      "  -p, --pid PID[,PID]     running processes (repeatable)\n"
	      "  -n, --name NAME[,NAME]  processes by name, running and"
	      " started later\n"
	      "  -i, --interval N        sampling interval in bytes (1: every"
	      " allocation)\n"
	      "      --heaps A,B         the heaps to profile (as record's)\n"
	      "      --listen ADDR:PORT  where to listen (default"
	      " 127.0.0.1:6060; port 0: any)\n"
	      "      --allow-remote      allow an address other than"
	      " loopback\n"
	      "      --token-file FILE   ask for 'Authorization: Bearer"
	      " <the file's first line>'\n"
	      "      --top N             functions per process in /metrics"
	      " (default 5)\n"
	      "      --max-connections N at once (default 16)\n"
	      "      --timeout SECONDS   an idle connection is closed after"
	      " this (default 10)\n"
	      "  -o, --output FILE       the sessions' profile (default: a"
	      " temporary file,\n"
	      "                          removed)\n",
	      f);
}

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
	if (missing) {
		hp_err(SUBSYS, "option '%s' needs a value", argv[*i]);
		return -1;
	}
	if (!strcmp(argv[*i], "--allow-remote")) {
		o->allow_remote = 1;
		return 0;
	}
	return 1;
}

/* ADDR:PORT (IPv4) into *sa; loopback unless allow_remote.  0 or -1
 * (message printed). */
static int parse_listen(const char *s, int allow_remote, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	long port;
	if (!colon || (size_t)(colon - s) >= sizeof(host) ||
	    opt_parse_long(colon + 1, &port) < 0 || port < 0 || port > 65535) {
		hp_err(SUBSYS,
		       "invalid --listen '%s' (ADDR:PORT, e.g."
		       " 127.0.0.1:6060)",
		       s);
		return -1;
	}
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
		hp_err(SUBSYS,
		       "invalid --listen address '%s' (an IPv4"
		       " address)",
		       host);
		return -1;
	}
	bool loopback = (ntohl(sa->sin_addr.s_addr) >> 24) == 127;
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

/* The token: the file's first line, not empty.  0 or -1 (message). */
static int read_token(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f || !fgets(buf, (int)len, f)) {
		hp_err(SUBSYS, "--token-file %s: %s", path,
		       f ? "empty" : strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	buf[strcspn(buf, "\r\n")] = '\0';
	if (!buf[0]) {
		hp_err(SUBSYS, "--token-file %s: the first line is empty",
		       path);
		return -1;
	}
	return 0;
}

/* ---- the session: heapprof record as a child ------------------------------
 */

struct child {
	pid_t pid; /* 0: none */
	char log[PATH_MAX];
};

static int start_record(struct child *c, const struct serve_opts *o,
                        const char *db)
{
	char *argv[2 * MAX_ARGS * 2 + 16];
	size_t n = 0;
	argv[n++] = "heapprof";
	argv[n++] = "record";
	for (size_t i = 0; i < o->npid_args; i++) {
		argv[n++] = "-p";
		argv[n++] = (char *)o->pid_args[i];
	}
	for (size_t i = 0; i < o->nname_args; i++) {
		argv[n++] = "-n";
		argv[n++] = (char *)o->name_args[i];
	}
	if (o->interval) {
		argv[n++] = "-i";
		argv[n++] = (char *)o->interval;
	}
	if (o->heaps) {
		argv[n++] = "--heaps";
		argv[n++] = (char *)o->heaps;
	}
	argv[n++] = "-o";
	argv[n++] = (char *)db;
	argv[n] = NULL;
	fflush(stdout);
	fflush(stderr);
	pid_t me = getpid();
	c->pid = fork();
	if (c->pid < 0) {
		hp_err(SUBSYS, "fork: %s", strerror(errno));
		c->pid = 0;
		return -1;
	}
	if (c->pid == 0) {
		setpgid(0, 0);
		if (prctl(PR_SET_PDEATHSIG, SIGINT) < 0 || getppid() != me)
			_exit(127);
		int in = open("/dev/null", O_RDONLY);
		int out = open(c->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (in < 0 || out < 0)
			_exit(127);
		dup2(in, STDIN_FILENO);
		dup2(out, STDOUT_FILENO);
		dup2(out, STDERR_FILENO);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv("/proc/self/exe", argv);
		fprintf(stderr,
		        "heapprof: serve: running heapprof record: %s\n",
		        strerror(errno));
		_exit(127);
	}
	return 0;
}

static void end_record(struct child *c)
{
	if (!c->pid)
		return;
	kill(c->pid, SIGINT);
	for (int waited = 0; waitpid(c->pid, NULL, WNOHANG) == 0;
	     waited += 20) {
		if (waited > END_WAIT_MS) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, NULL, 0);
			break;
		}
		poll(NULL, 0, 20);
	}
	c->pid = 0;
}

int cmd_serve(int argc, char **argv)
{
	struct serve_opts o;
	memset(&o, 0, sizeof(o));
	o.listen = "127.0.0.1:6060";
	o.top_n = 5;
	o.max_connections = 16;
	o.timeout_s = 10;
	size_t nops;
	int rc = opt_walk(SUBSYS, argc, argv, parse_opt, &o, usage, &o.file, 1,
	                  &nops);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (o.file) {
		hp_err(SUBSYS,
		       "serve takes no operand ('%s'): -p or -n names"
		       " the processes",
		       o.file);
		return 2;
	}
	if (!o.npid_args && !o.nname_args) {
		hp_err(SUBSYS, "need -p PID or -n NAME (see heapprof serve"
		               " --help)");
		return 2;
	}

	/* the pids and names, split at commas, for the server */
	pid_t pids[SERVE_MAX_TARGETS];
	size_t npids = 0;
	const char *names[SERVE_MAX_TARGETS];
	size_t nnames = 0;
	char *names_buf[MAX_ARGS];
	for (size_t i = 0; i < o.npid_args; i++) {
		char *dup = strdup(o.pid_args[i]), *save = NULL;
		for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t;
		     t = strtok_r(NULL, ",", &save)) {
			long p;
			if (opt_parse_pid(SUBSYS, t, &p) < 0) {
				free(dup);
				return 2;
			}
			if (npids < SERVE_MAX_TARGETS)
				pids[npids++] = (pid_t)p;
		}
		free(dup);
	}
	for (size_t i = 0; i < o.nname_args; i++) {
		char *save = NULL;
		names_buf[i] = strdup(o.name_args[i]);
		for (char *t = names_buf[i] ? strtok_r(names_buf[i], ",", &save)
		                            : NULL;
		     t; t = strtok_r(NULL, ",", &save))
			if (nnames < SERVE_MAX_TARGETS)
				names[nnames++] = t;
	}

	struct serve_config c;
	memset(&c, 0, sizeof(c));
	char token[4096];
	if (parse_listen(o.listen, o.allow_remote, &c.addr) < 0)
		return 2;
	if (o.token_file && read_token(o.token_file, token, sizeof(token)) < 0)
		return 2;
	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX - 64], db[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/heapprof-serve.XXXXXX",
	         tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		hp_err(SUBSYS, "creating a temporary directory: %s",
		       strerror(errno));
		return 1;
	}
	c.pids = pids;
	c.npids = npids;
	c.names = names;
	c.nnames = nnames;
	c.top_n = o.top_n;
	c.token = o.token_file ? token : NULL;
	c.max_connections = (unsigned)o.max_connections;
	c.timeout_s = (unsigned)o.timeout_s;
	c.tmpdir = dir;

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

	struct serve_server *s = serve_start(&c);
	if (!s) {
		rmdir(dir);
		return 1;
	}
	struct child ch = {0};
	snprintf(ch.log, sizeof(ch.log), "%s/record.log", dir);
	snprintf(db, sizeof(db), "%s", o.output ? o.output : "");
	if (!o.output)
		snprintf(db, sizeof(db), "%s/serve.db", dir);
	printf("heapprof serve: listening on http://%s:%u/ (/metrics,"
	       " /debug/pprof/heap); session log %s\n",
	       inet_ntoa(c.addr.sin_addr), serve_port(s), ch.log);
	fflush(stdout);
	int status = 0;
	if (start_record(&ch, &o, db) < 0)
		status = 1;
	while (!status) {
		struct timespec ts = {.tv_sec = 1};
		int sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
			break;
		if (ch.pid && waitpid(ch.pid, NULL, WNOHANG) == ch.pid) {
			/* every target gone (or record failed): again, later */
			ch.pid = 0;
			poll(NULL, 0, RESTART_DELAY_MS);
			if (start_record(&ch, &o, db) < 0)
				status = 1;
		}
	}
	serve_stop(s);
	end_record(&ch);
	/* The mask stays: a second SIGTERM (timeout(1) sends one to the
	 * process group too) must not kill serve on its way out. */
	if (!o.output)
		unlink(db);
	unlink(ch.log);
	rmdir(dir);
	for (size_t i = 0; i < o.nname_args; i++)
		free(names_buf[i]);
	return status;
}
