/*
 * heapprof record: run a command with the client preloaded and an embedded
 * collector, write the profile, exit with the command's status.
 *
 * The child is forked first and waits on a pipe until the profile file
 * exists (its default name holds the child's pid), so a bad -o fails before
 * the program runs.  Signals are read through a signalfd: SIGUSR1 adds a
 * dump, SIGCHLD ends the session, SIGTERM/SIGHUP/SIGQUIT and a SIGINT sent
 * by another process are passed on to the program (a Ctrl-C from the
 * terminal reaches it directly).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "collector/collector.h"
#include "layout/wire_v1.h"

struct record_args {
	struct collector_opts opts;
	const char *output;
	char **argv;
};

static void record_usage(FILE *f)
{
	fputs("usage: heapprof record [options] [--] CMD [ARGS...]\n"
	      "\n"
	      "Runs CMD under the heap profiler and writes a profile database\n"
	      "(default heapprof.<cmd>.<pid>.db). Exits with CMD's status.\n"
	      "SIGUSR1 to heapprof adds a dump; one dump is written at the "
	      "end.\n"
	      "\n"
	      "options:\n"
	      "  -i, --interval BYTES   mean sampling interval (default "
	      "4096);\n"
	      "                         1 records every allocation exactly\n"
	      "  -o, --output FILE      profile to write\n"
	      "      --unwind MODE      dwarf (default, works without frame\n"
	      "                         pointers) or fp (faster, needs them)\n"
	      "      --max-frames N     deepest stack kept, 1..256 (default "
	      "64)\n"
	      "      --shmem-size BYTES shared region per process (default\n"
	      "                         64 MiB, 512 MiB with -i 1)\n"
	      "  -h, --help             this text\n",
	      f);
}

static int parse_args(int argc, char **argv, struct record_args *a)
{
	enum { OPT_UNWIND = 256, OPT_MAXF, OPT_SHMEM };
	static const struct option longopts[] = {
	        {"interval", required_argument, NULL, 'i'},
	        {"output", required_argument, NULL, 'o'},
	        {"unwind", required_argument, NULL, OPT_UNWIND},
	        {"max-frames", required_argument, NULL, OPT_MAXF},
	        {"shmem-size", required_argument, NULL, OPT_SHMEM},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	a->opts.interval = 4096;
	a->opts.unwind_mode = HP_UNWIND_DWARF;
	a->opts.max_frames = HP_DEFAULT_FRAMES;
	optind = 1;
	opterr = 0;
	int c;
	uint64_t v;
	while ((c = getopt_long(argc, argv, "+i:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (opt_parse_u64("record", "interval", optarg, 1,
			                  1ull << 40, &v))
				return 2;
			a->opts.interval = v;
			break;
		case 'o':
			if (!*optarg) {
				fprintf(stderr, "heapprof: record: empty "
				                "output file name\n");
				return 2;
			}
			a->output = optarg;
			break;
		case OPT_UNWIND:
			if (!strcmp(optarg, "dwarf"))
				a->opts.unwind_mode = HP_UNWIND_DWARF;
			else if (!strcmp(optarg, "fp"))
				a->opts.unwind_mode = HP_UNWIND_FP;
			else {
				fprintf(stderr,
				        "heapprof: record: invalid unwind mode "
				        "'%s': use dwarf or fp\n",
				        optarg);
				return 2;
			}
			break;
		case OPT_MAXF:
			if (opt_parse_u64("record", "max-frames", optarg, 1,
			                  HP_MAX_FRAMES, &v))
				return 2;
			a->opts.max_frames = (uint32_t)v;
			break;
		case OPT_SHMEM:
			if (opt_parse_u64("record", "shmem-size", optarg,
			                  HP_REGION_MIN_SIZE, 1ull << 40, &v))
				return 2;
			a->opts.shmem_size = v;
			break;
		case 'h':
			record_usage(stdout);
			return 0;
		case '?':
		default:
			if (optopt && optopt < 256)
				fprintf(stderr,
				        "heapprof: record: unknown or "
				        "incomplete "
				        "option '-%c'\n",
				        optopt);
			else
				fprintf(stderr,
				        "heapprof: record: unknown or "
				        "incomplete "
				        "option '%s'\n",
				        argv[optind - 1]);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "heapprof: record: no command given "
		                "(heapprof record [options] -- CMD)\n");
		return 2;
	}
	a->argv = argv + optind;
	return -1; /* go on */
}

/* Path of libheapprof.so: next to the heapprof binary, or under ../lib. */
static int find_library(char *out, size_t len)
{
	const char *env = getenv("HEAPPROF_LIB");
	if (env && *env) {
		if (access(env, R_OK) != 0)
			goto missing_env;
		snprintf(out, len, "%s", env);
		return 0;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	char *dir = dirname(self);
	const char *cands[] = {"%s/libheapprof.so", "%s/../lib/libheapprof.so"};
	for (size_t i = 0; i < 2; i++) {
		snprintf(out, len, cands[i], dir);
		if (access(out, R_OK) == 0) {
			char real[PATH_MAX];
			if (realpath(out, real))
				snprintf(out, len, "%s", real);
			return 0;
		}
	}
	fprintf(stderr,
	        "heapprof: record: cannot find libheapprof.so next to "
	        "%s (set HEAPPROF_LIB)\n",
	        self);
	return -1;
missing_env:
	fprintf(stderr, "heapprof: record: HEAPPROF_LIB=%s is not readable\n",
	        env);
	return -1;
}

static char *join_args(char **argv)
{
	size_t len = 1;
	for (char **p = argv; *p; p++)
		len += strlen(*p) + 1;
	char *s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (char **p = argv; *p; p++) {
		if (p != argv)
			strcat(s, " ");
		strcat(s, *p);
	}
	return s;
}

static int setup_child_env(const char *lib, const char *sock)
{
	const char *old = getenv("LD_PRELOAD");
	char *v;
	if (old && *old) {
		if (asprintf(&v, "%s:%s", lib, old) < 0)
			return -1;
	} else {
		v = strdup(lib);
		if (!v)
			return -1;
	}
	int rc = setenv("LD_PRELOAD", v, 1) | setenv(HP_ENV_SOCKET, sock, 1);
	free(v);
	return rc;
}

/* In the child: wait for the go byte, then exec; if exec fails, send its
 * errno through err_fd (close-on-exec, so success closes it silently).
 * Never returns. */
static void child_run(int go_fd, int err_fd, const sigset_t *oldmask,
                      char **argv)
{
	char b;
	ssize_t n;
	do
		n = read(go_fd, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		_exit(127); /* parent gave up; it already said why */
	close(go_fd);
	sigprocmask(SIG_SETMASK, oldmask, NULL);
	execvp(argv[0], argv);
	int e = errno;
	ssize_t w = write(err_fd, &e, sizeof(e));
	(void)w;
	_exit(e == ENOENT ? 127 : 126);
}

/* In the parent: 0 once the child has exec'd, else the exec errno. */
static int exec_result(int err_fd)
{
	int e = 0;
	ssize_t n;
	do
		n = read(err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(e) ? e : 0;
}

struct want_ctx {
	pid_t child;
	bool attached;
};

static bool want_child(void *ctx, pid_t pid)
{
	struct want_ctx *w = ctx;
	/* Only the launched process, and only its first image. */
	if (pid != w->child || w->attached)
		return false;
	w->attached = true;
	return true;
}

static int status_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

struct session {
	struct collector col;
	struct want_ctx want;
	int sfd;
	const char *name;
	char *cmdline;
	bool done;
	int status;
	int write_errors;
};

static void on_signal(struct session *s, const struct signalfd_siginfo *si)
{
	switch (si->ssi_signo) {
	case SIGUSR1:
		if (collector_dump_all(&s->col, "signal") != 0)
			s->write_errors++;
		break;
	case SIGCHLD: {
		int st;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			if (p == s->want.child) {
				s->done = true;
				s->status = st;
			}
		break;
	}
	case SIGINT:
		/* From the terminal the program got it too; from a process,
		 * pass it on. */
		if (si->ssi_code == SI_USER || si->ssi_code == SI_QUEUE)
			kill(s->want.child, SIGINT);
		break;
	default:
		kill(s->want.child, (int)si->ssi_signo);
		break;
	}
}

static void event_loop(struct session *s)
{
	while (!s->done) {
		struct pollfd fds[2 + COLLECTOR_MAX_TARGETS];
		size_t n = 0;
		fds[n++] = (struct pollfd){.fd = s->sfd, .events = POLLIN};
		fds[n++] = (struct pollfd){.fd = s->col.listen_fd,
		                           .events = POLLIN};
		for (size_t i = 0; i < s->col.ntargets; i++)
			fds[n++] = (struct pollfd){.fd = s->col.targets[i].fd,
			                           .events = POLLIN};
		if (poll(fds, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("heapprof: record: poll");
			break;
		}
		if (fds[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(s->sfd, &si, sizeof(si)) == sizeof(si))
				on_signal(s, &si);
		}
		if (fds[1].revents & POLLIN)
			collector_accept(&s->col, want_child, &s->want, s->name,
			                 s->cmdline);
		for (size_t i = 2; i < n; i++)
			if (fds[i].revents && fds[i].fd >= 0)
				collector_poll_client(&s->col,
				                      &s->col.targets[i - 2]);
	}
}

static char *default_output(const char *cmd, pid_t pid)
{
	char *copy = strdup(cmd), *out = NULL;
	if (!copy)
		return NULL;
	if (asprintf(&out, "heapprof.%s.%d.db", basename(copy), (int)pid) < 0)
		out = NULL;
	free(copy);
	return out;
}

static void finish(struct session *s)
{
	if (collector_dump_all(&s->col, "end") != 0)
		s->write_errors++;
	uint64_t end = boottime_ns();
	if (s->col.ntargets == 0) {
		/* The program never attached (static binary, setuid, or the
		 * library failed): still say what ran and how it ended. */
		struct prof_process info = {
		        .pid = s->want.child,
		        .name = s->name,
		        .cmdline = s->cmdline,
		        .sampling_interval = s->col.opts.interval,
		        .unwind = s->col.opts.unwind_mode == HP_UNWIND_FP
		                          ? "fp"
		                          : "dwarf",
		        .max_frames = s->col.opts.max_frames,
		        .from_startup = 0,
		        .start_ts_ns = end,
		};
		int64_t upid;
		struct prof_process_end e = {.end_ts_ns = end,
		                             .exit_status =
		                                     status_code(s->status),
		                             .disconnected = 1};
		if (profile_begin_process(s->col.profile, &info, &upid) != 0 ||
		    profile_end_process(s->col.profile, upid, &e) != 0)
			s->write_errors++;
		fprintf(stderr,
		        "heapprof: record: %s never attached to the profiler "
		        "(statically linked, setuid, or LD_PRELOAD ignored?); "
		        "the profile holds no allocations\n",
		        s->name);
	}
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = &s->col.targets[i];
		struct prof_process_end e = {
		        .end_ts_ns = end,
		        .exit_status = t->pid == s->want.child
		                               ? status_code(s->status)
		                               : -1,
		        .disconnected = 0,
		};
		if (profile_end_process(s->col.profile, t->upid, &e) != 0)
			s->write_errors++;
	}
}

int cmd_record(int argc, char **argv)
{
	struct record_args a = {0};
	int rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	char lib[PATH_MAX];
	if (find_library(lib, sizeof(lib)) != 0)
		return 1;

	struct session s = {.sfd = -1};
	if (collector_open(&s.col, &a.opts) != 0) {
		collector_close(&s.col);
		return 1;
	}
	sigset_t mask, oldmask;
	sigemptyset(&mask);
	int sigs[] = {SIGCHLD, SIGUSR1, SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&mask, sigs[i]);
	sigprocmask(SIG_BLOCK, &mask, &oldmask);
	s.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	int go[2], err[2];
	if (s.sfd < 0 || pipe2(go, O_CLOEXEC) != 0 ||
	    pipe2(err, O_CLOEXEC) != 0) {
		perror("heapprof: record");
		collector_close(&s.col);
		return 1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("heapprof: record: fork");
		collector_close(&s.col);
		return 1;
	}
	if (pid == 0) {
		close(go[1]);
		close(err[0]);
		if (setup_child_env(lib, s.col.path) != 0)
			_exit(127);
		child_run(go[0], err[1], &oldmask, a.argv);
	}
	close(go[0]);
	close(err[1]);
	s.want.child = pid;
	s.name = a.argv[0];
	s.cmdline = join_args(a.argv);

	char *out =
	        a.output ? strdup(a.output) : default_output(a.argv[0], pid);
	char *rec_cmd = join_args(argv);
	s.col.profile = out ? profile_create(out, rec_cmd) : NULL;
	free(rec_cmd);
	if (!s.col.profile) {
		/* Nothing ran yet: closing the pipe makes the child exit. */
		close(go[1]);
		close(err[0]);
		waitpid(pid, NULL, 0);
		collector_close(&s.col);
		free(out);
		free(s.cmdline);
		return 1;
	}
	if (write(go[1], "g", 1) != 1)
		perror("heapprof: record");
	close(go[1]);
	int exec_err = exec_result(err[0]);
	close(err[0]);
	if (exec_err) {
		/* Nothing ran: no profile is better than an empty one. */
		fprintf(stderr, "heapprof: record: cannot run '%s': %s\n",
		        a.argv[0], strerror(exec_err));
		waitpid(pid, NULL, 0);
		profile_close(s.col.profile);
		unlink(out);
		collector_close(&s.col);
		free(out);
		free(s.cmdline);
		return exec_err == ENOENT ? 127 : 126;
	}

	event_loop(&s);
	finish(&s);
	rc = profile_close(s.col.profile);
	collector_close(&s.col);
	close(s.sfd);
	if (rc != 0 || s.write_errors)
		fprintf(stderr,
		        "heapprof: record: the profile %s may be "
		        "incomplete (write errors above)\n",
		        out);
	else
		fprintf(stderr, "heapprof: profile written to %s\n", out);
	free(out);
	free(s.cmdline);
	if (rc != 0 || s.write_errors)
		return s.done ? status_code(s.status) : 1;
	return status_code(s.status);
}
