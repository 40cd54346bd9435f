/*
 * `heapprof serve`: an agent that keeps sessions on processes and serves
 * their heaps to Prometheus (/metrics) and to pprof scrapers
 * (/debug/pprof/heap), docs/FLEET.md.  Here: its options (and -c FILE,
 * cli/serve_config.c), and its main thread, which only waits for signals
 * and ticks the agent.
 *
 * The agent is src/agent/: the sessions, one `heapprof record -p PID`
 * child per process of serve's -p and -n names, looked for each second
 * (supervisor.c), and the HTTP server (serve.c and its endpoints), which
 * runs on libmicrohttpd's thread and reads the processes' shared regions
 * from the outside.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/serve.h"
#include "agent/supervisor.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/serve_config.h"
#include "util/err.h"
#include "util/textfile.h"

#define SUBSYS   "serve"
#define MAX_ARGS 64
/* Config file values kept (the options point into them). */
#define MAX_CONFIG_VALUES 256

/* serve's sampling interval without -i: Go's runtime.MemProfileRate. */
#define SERVE_DEFAULT_INTERVAL "524288"

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
	      " allocation;\n"
	      "                          default 524288, Go's 512 KiB)\n"
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

static int config_apply(void *ctx, const char *path, int lineno,
                        const char *key, const char *val);

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
		return serve_config_read(v, config_apply, o);
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

/* One option of -c FILE (serve_config.h) as the option --key.  0 or -1
 * (message printed). */
static int config_apply(void *ctx, const char *path, int lineno,
                        const char *key, const char *val)
{
	struct serve_opts *o = ctx;
	static const char *const flags[] = {"allow-remote", "all-users",
	                                    "all-heaps"};
	int *const flag_of[] = {&o->allow_remote, &o->all_users, &o->all_heaps};
	for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
		if (strcmp(key, flags[k]))
			continue;
		int b = config_bool(val);
		if (b < 0) {
			hp_err(SUBSYS, "%s:%d: %s is true or false", path,
			       lineno, key);
			return -1;
		}
		*flag_of[k] = b;
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
	/* An always-on agent samples as Go's runtime does by default
	 * (runtime.MemProfileRate, 512 KiB): a cost no service notices,
	 * still a profile of where the memory is. */
	struct supervisor_opts so = {
	        .interval = o->interval ? o->interval : SERVE_DEFAULT_INTERVAL,
	        .heaps = o->heaps,
	        .all_heaps = o->all_heaps};
	struct supervisor *a = supervisor_new(c, &so);
	if (!a) {
		serve_stop(s);
		return 1;
	}
	char where[INET6_ADDRSTRLEN + 16];
	serve_addr_str(&c->addr, serve_port(s), where, sizeof(where));
	printf("heapprof serve: listening on http://%s/ (/metrics,"
	       " /debug/pprof/heap); sessions in %s\n",
	       where, c->dir);
	fflush(stdout);
	for (;;) {
		supervisor_tick(a);
		serve_tick(s);
		struct timespec ts = {.tv_sec = 1};
		int sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
			break;
	}
	serve_stop(s);
	supervisor_end(a);
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
	else if (supervisor_make_dir(o.output, dir, sizeof(dir)) < 0)
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
	for (size_t i = 0; i < MAX_ARGS; i++)
		free(names_buf[i]);
	for (size_t i = 0; i < o.nconfig_values; i++)
		free(o.config_values[i]);
	return rc;
}
