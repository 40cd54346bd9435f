/*
 * runone: run one benchmark command and measure it.
 *
 *     runone [-t SECONDS] [-m MIB] [-r FILE] [-e NAME=VALUE]... [-u NAME]...
 *            -- CMD [ARGS...]
 *
 * Forks, execs CMD in a process group of its own, waits for it and writes
 * one line to FILE (default stderr):
 *
 *     status=exit:0 seconds=1.234567 maxrss_kib=12345 cpu_seconds=1.2
 *
 * seconds is wall time on CLOCK_MONOTONIC from just before fork to the
 * return of wait. maxrss_kib is getrusage(RUSAGE_CHILDREN).ru_maxrss
 * after the wait: the largest peak RSS of any single process in the
 * command's tree that was waited for (the kernel folds a reaped child's
 * own peak and its children's into its parent's "children" figure, taking
 * the maximum, not the sum). For `heapprof record -- CMD` that is
 * max(peak of the recorder, peak of CMD); for heaptrack's script it is
 * the max over CMD, heaptrack_interpret and the compressor. cpu_seconds
 * is user + system time of the same tree.
 *
 * status is exit:N, signal:N, or timeout (after -t SECONDS the whole
 * process group gets SIGTERM, then SIGKILL 5 s later). -m sets RLIMIT_AS
 * for the command tree, so a runaway tool fails instead of taking the
 * machine's memory. -e sets and -u removes an environment variable in
 * the child only. Exit status: 0 when the line was written (whatever the
 * command did), 2 on a usage or system error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_ENV_OPS = 64, KILL_GRACE_SECONDS = 5 };

struct env_op {
	char *name;  /* for -u */
	char *value; /* NAME=VALUE for -e */
};

static void usage(void)
{
	fprintf(stderr, "usage: runone [-t SECONDS] [-m MIB] [-r FILE] "
	                "[-e NAME=VALUE]... [-u NAME]... -- CMD [ARGS...]\n");
	exit(2);
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv_seconds(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Wait for pid until deadline (monotonic seconds); 0 on exit, -1 on
 * timeout. SIGCHLD is blocked, so sigtimedwait wakes exactly when a child
 * changes state, without polling. */
static int wait_until(pid_t pid, double deadline, int *status,
                      const sigset_t *chld)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR) {
			perror("runone: waitpid");
			exit(2);
		}
		double left = deadline - now_seconds();
		if (left <= 0)
			return -1;
		struct timespec ts = {
		        .tv_sec = (time_t)left,
		        .tv_nsec = (long)((left - (double)(time_t)left) * 1e9),
		};
		if (sigtimedwait(chld, NULL, &ts) < 0 && errno != EAGAIN &&
		    errno != EINTR) {
			perror("runone: sigtimedwait");
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	double timeout = 600;
	long mem_mib = 0;
	const char *result_path = NULL;
	struct env_op env[MAX_ENV_OPS];
	int nenv = 0;
	int opt;

	while ((opt = getopt(argc, argv, "+t:m:r:e:u:")) != -1) {
		char *end;
		switch (opt) {
		case 't':
			timeout = strtod(optarg, &end);
			if (*end || timeout <= 0)
				usage();
			break;
		case 'm':
			mem_mib = strtol(optarg, &end, 10);
			if (*end || mem_mib < 0)
				usage();
			break;
		case 'r':
			result_path = optarg;
			break;
		case 'e':
		case 'u':
			if (nenv == MAX_ENV_OPS)
				usage();
			if (opt == 'e' && !strchr(optarg, '='))
				usage();
			env[nenv].name = opt == 'u' ? optarg : NULL;
			env[nenv].value = opt == 'e' ? optarg : NULL;
			nenv++;
			break;
		default:
			usage();
		}
	}
	if (optind >= argc)
		usage();
	char **cmd = argv + optind;

	FILE *out = stderr;
	if (result_path) {
		out = fopen(result_path, "w");
		if (!out) {
			fprintf(stderr, "runone: %s: %s\n", result_path,
			        strerror(errno));
			return 2;
		}
	}

	sigset_t chld, old_mask;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old_mask);

	double start = now_seconds();
	pid_t pid = fork();
	if (pid < 0) {
		perror("runone: fork");
		return 2;
	}
	if (pid == 0) {
		/* The signal mask survives exec: give the command ours. */
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		setpgid(0, 0);
		for (int i = 0; i < nenv; i++) {
			if (env[i].value)
				putenv(env[i].value);
			else
				unsetenv(env[i].name);
		}
		if (mem_mib > 0) {
			struct rlimit rl;
			rl.rlim_cur = rl.rlim_max = (rlim_t)mem_mib << 20;
			if (setrlimit(RLIMIT_AS, &rl) != 0)
				perror("runone: setrlimit");
		}
		execvp(cmd[0], cmd);
		fprintf(stderr, "runone: %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	/* Also from the parent, so the group exists before any kill. */
	setpgid(pid, pid);

	int status = 0;
	int timed_out = 0;
	if (wait_until(pid, start + timeout, &status, &chld) < 0) {
		timed_out = 1;
		kill(-pid, SIGTERM);
		if (wait_until(pid, now_seconds() + KILL_GRACE_SECONDS, &status,
		               &chld) < 0) {
			kill(-pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
	}
	double elapsed = now_seconds() - start;
	/* Whatever the group left behind after a timeout goes too. */
	if (timed_out)
		kill(-pid, SIGKILL);

	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	double cpu = tv_seconds(ru.ru_utime) + tv_seconds(ru.ru_stime);

	char st[32];
	if (timed_out)
		snprintf(st, sizeof(st), "timeout");
	else if (WIFEXITED(status))
		snprintf(st, sizeof(st), "exit:%d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(st, sizeof(st), "signal:%d", WTERMSIG(status));
	else
		snprintf(st, sizeof(st), "unknown:%d", status);

	fprintf(out, "status=%s seconds=%.6f maxrss_kib=%ld cpu_seconds=%.3f\n",
	        st, elapsed, ru.ru_maxrss, cpu);
	if (out != stderr && fclose(out) != 0) {
		perror("runone: write result");
		return 2;
	}
	return 0;
}
