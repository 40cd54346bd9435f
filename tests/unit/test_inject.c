/*
 * The injector (src/inject/inject.c) against real processes started
 * bare: build/progs/inject_target blocked in a chosen call or running a
 * malloc storm, build/progs/inject_payload loaded into it with its own
 * dlopen.  A blocked call must complete as in the bare run (same output,
 * same exit status, no EINTR, not early and not late by more than
 * LATE_MS); the storm must finish with the bare checksum after 5
 * injections; each refusal is checked on a process that has its cause.
 *
 * Skips (one line, 0 failures) when ptrace is not permitted here; runs
 * under ASan and TSan too (the targets are not instrumented, the
 * injector is).  Every wait is bounded: a target that does
 * not answer is killed and the check fails.  HEAPPROF_INJECT_STRESS=N
 * adds N more remote calls into the storm, HEAPPROF_INJECT_STORMS=N N
 * more storms, each with its own dlopen.
 *
 * Attach times are printed, not checked (timed tests are not allowed
 * here); docs/ATTACH.md has the numbers of a run.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject/inject.h"
#include "unit.h"
#include "util/proc.h"

#define LATE_MS 20 /* a blocked call may end this much late */
#define WAIT_MS 10000
#define NOBODY  65534

static char target[PATH_MAX], payload[PATH_MAX], static_target[PATH_MAX];
static char tmpdir[PATH_MAX];

/* The attach times main() sums up: the stats' seize-to-detach time and
 * the whole call, checks and file reading included. */
static double idle_ms = -1, idle_all_ms = -1, busy_ms = -1, busy_all_ms = -1;

struct tgt {
	pid_t pid;
	int in, out, err; /* its stdin (ours to write), stdout, stderr */
};

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void pause_ms(int ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

static int spawn(struct tgt *t, const char *prog, const char *mode,
                 const char *arg)
{
	int in[2], out[2], err[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) ||
	    pipe2(err, O_CLOEXEC))
		return -1;
	fflush(NULL); /* nothing buffered is written twice */
	t->pid = fork();
	if (t->pid < 0)
		return -1;
	if (t->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		execl(prog, prog, mode, arg, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	t->in = in[1];
	t->out = out[0];
	t->err = err[0];
	return 0;
}

/* Reads one line from fd within ms; 0 or -1 (timeout, EOF). */
static int read_line(int fd, char *buf, size_t len, int ms)
{
	size_t n = 0;
	long long end = now_ns() + (long long)ms * 1000000;
	while (n + 1 < len) {
		int left = (int)((end - now_ns()) / 1000000);
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) != 1)
			break;
		if (read(fd, &buf[n], 1) != 1)
			break;
		if (buf[n] == '\n') {
			buf[n] = '\0';
			return 0;
		}
		n++;
	}
	buf[n] = '\0';
	return -1;
}

/* waitpid within ms, else SIGKILL (the watchdog) and -1. */
static int wait_exit(pid_t pid, int *st, int ms)
{
	long long end = now_ns() + (long long)ms * 1000000;
	for (;;) {
		pid_t r = waitpid(pid, st, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0)
			return -1;
		if (now_ns() > end) {
			fprintf(stderr,
			        "watchdog: %d did not exit in %d ms: "
			        "killed\n",
			        (int)pid, ms);
			kill(pid, SIGKILL);
			waitpid(pid, st, 0);
			return -1;
		}
		pause_ms(1);
	}
}

/* Until the process is blocked in system call nr (bounded). */
static bool wait_blocked(pid_t pid, long nr)
{
	for (int i = 0; i < 5000; i++) {
		struct proc_stat st;
		if (proc_task_syscall(pid, pid) == nr &&
		    proc_stat(pid, &st) == 0 && st.state == 'S')
			return true;
		pause_ms(1);
	}
	fprintf(stderr, "%d never blocked in system call %ld\n", (int)pid, nr);
	return false;
}

static void end_target(struct tgt *t, char *out, size_t outlen, int *st)
{
	close(t->in);
	if (wait_exit(t->pid, st, WAIT_MS))
		*st = -1;
	ssize_t n = read(t->out, out, outlen - 1);
	out[n > 0 ? n : 0] = '\0';
	close(t->out);
	close(t->err);
}

static long payload_count(pid_t pid, uint64_t handle)
{
	uint64_t a;
	char why[INJECT_WHY];
	long v = -1;
	if (inject_symbol_addr(pid, handle, "inject_payload_count", &a, why)) {
		fprintf(stderr, "%s\n", why);
		return -1;
	}
	if (inject_read(pid, a, &v, sizeof(v)))
		return -1;
	return v;
}

static void print_stats(const char *what, const struct inject_stats *s)
{
	printf("  %s: tid %d of %d threads, %d tries (%d run to an allocator "
	       "entry, %d unwound), first stop %.3f ms, safe point %.3f ms, "
	       "detached %.3f ms, the thread stopped %.3f ms%s%s\n",
	       what, (int)s->tid, s->threads, s->tries, s->entry_traps,
	       s->unwound, s->seize_ms, s->safe_ms, s->total_ms, s->stopped_ms,
	       s->reissued ? ", call re-issued" : "",
	       s->held_signals ? ", signals held" : "");
}

/* ---- blocked calls --------------------------------------------------- */

enum wake { WAKE_NONE, WAKE_SIGNAL, WAKE_BYTE };

struct mode {
	const char *name;
	long nr;
	enum wake wake;
	int timed_ms; /* the call's own timeout (WAKE_NONE) */
};

/* One run of mode; inject first when inject.  out gets stdout, *st the
 * exit status, *late_ms how late the call returned. */
static void run_mode(const struct mode *m, bool inject, char *out,
                     size_t outlen, int *st, double *late_ms)
{
	struct tgt t;
	char line[256];
	*st = -1;
	*late_ms = -1;
	out[0] = '\0';
	CHECK(spawn(&t, target, m->name, NULL) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0 &&
	      !strcmp(line, "ready"));
	CHECK(wait_blocked(t.pid, m->nr));
	if (inject) {
		uint64_t h = 0;
		struct inject_stats s;
		char why[INJECT_WHY] = "";
		long long t_in = now_ns();
		int rc = inject_dlopen(t.pid, payload, NULL, &h, &s, why);
		if (!strcmp(m->name, "read")) {
			idle_ms = s.total_ms;
			idle_all_ms = (double)(now_ns() - t_in) / 1e6;
		}
		if (rc)
			fprintf(stderr, "inject into %s: %s\n", m->name, why);
		CHECK(rc == 0 && h != 0);
		print_stats(m->name, &s);
		CHECK_EQ_U64(payload_count(t.pid, h), 1000);
		/* A second time: mapped already, nothing is stopped. */
		uint64_t h2 = 0;
		CHECK(inject_dlopen(t.pid, payload, NULL, &h2, &s, why) == 0);
		CHECK(h2 == h && s.tid == 0);
		if (!strcmp(m->name, "epoll"))
			CHECK(s.reissued == 0); /* not stopped at all */
		if (m->wake != WAKE_NONE) {
			/* Still blocked, nothing printed. */
			struct pollfd p = {t.out, POLLIN, 0};
			CHECK(poll(&p, 1, 0) == 0);
			CHECK(wait_blocked(t.pid, m->nr));
		}
	}
	long long t_wake = now_ns();
	if (m->wake == WAKE_SIGNAL)
		kill(t.pid, SIGUSR1);
	else if (m->wake == WAKE_BYTE)
		CHECK(write(t.in, "x", 1) == 1);
	long long t0 = 0, t1 = 0;
	if (read_line(t.err, line, sizeof(line), WAIT_MS) == 0 &&
	    sscanf(line, "t_start=%lld t_end=%lld", &t0, &t1) == 2) {
		if (m->wake == WAKE_NONE)
			*late_ms = (double)(t1 - t0) / 1e6 - m->timed_ms;
		else
			*late_ms = (double)(t1 - t_wake) / 1e6;
	} else {
		fprintf(stderr, "%s: no timing line (%s)\n", m->name, line);
	}
	end_target(&t, out, outlen, st);
}

static void test_blocked_calls(void)
{
	static const struct mode modes[] = {
	        {"sigsuspend", SYS_rt_sigsuspend, WAKE_SIGNAL, 0},
	        {"read", SYS_read, WAKE_BYTE, 0},
	        {"nanosleep", SYS_clock_nanosleep, WAKE_NONE, 300},
	        {"poll", SYS_poll, WAKE_NONE, 300},
	        {"epoll", SYS_epoll_wait, WAKE_BYTE, 0},
	};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		const struct mode *m = &modes[i];
		char bare[512], inj[512];
		int st_bare, st_inj;
		double late_bare, late_inj;
		run_mode(m, false, bare, sizeof(bare), &st_bare, &late_bare);
		run_mode(m, true, inj, sizeof(inj), &st_inj, &late_inj);
		printf("  %s: bare '%.*s' late %.3f ms; injected '%.*s' late "
		       "%.3f ms\n",
		       m->name, (int)strcspn(bare, "\n"), bare, late_bare,
		       (int)strcspn(inj, "\n"), inj, late_inj);
		CHECK(st_bare == 0 && st_inj == 0);
		CHECK(bare[0] && !strcmp(bare, inj));
		/* No EINTR but sigsuspend's own (its SIGUSR1). */
		CHECK(m->wake == WAKE_SIGNAL || !strstr(inj, "Interrupted"));
		CHECK(late_inj >= 0 && late_inj <= LATE_MS);
	}
}

/* A signal sent while the thread runs our calls waits (blocked) and is
 * delivered after the detach, on the restored registers: sigsuspend then
 * returns its EINTR exactly as it would have for that signal.  Also the
 * lower level: two remote calls under one stop, a write on the stack. */
static void test_signal_during_injection(void)
{
	struct tgt t;
	char line[256], out[256], why[INJECT_WHY] = "";
	int st;
	CHECK(spawn(&t, target, "sigsuspend", NULL) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0);
	CHECK(wait_blocked(t.pid, SYS_rt_sigsuspend));
	struct inject_ctx *c = NULL;
	long long t_detach = 0;
	int rc = inject_attach(t.pid, NULL, &c, why);
	if (rc)
		fprintf(stderr, "attach: %s\n", why);
	CHECK(rc == 0 && c);
	if (c) {
		uint64_t getpid_fn = 0, strlen_fn = 0, ret = 0, str = 0;
		CHECK(kill(t.pid, SIGUSR1) == 0);
		CHECK(inject_libc_symbol(c, "getpid", &getpid_fn, why) == 0);
		CHECK(inject_remote_call(c, getpid_fn, NULL, &ret, why) == 0);
		CHECK_EQ_U64(ret, t.pid);
		CHECK(inject_write(c, "four", 5, &str, why) == 0);
		CHECK(str % 16 == 0);
		uint64_t args[6] = {str, 0, 0, 0, 0, 0};
		CHECK(inject_libc_symbol(c, "strlen", &strlen_fn, why) == 0);
		CHECK(inject_remote_call(c, strlen_fn, args, &ret, why) == 0);
		CHECK_EQ_U64(ret, 4);
		/* Still stopped: the signal has not run its handler. */
		struct proc_stat ps;
		CHECK(proc_stat(t.pid, &ps) == 0 && ps.state == 't');
		struct inject_stats s;
		t_detach = now_ns();
		CHECK(inject_detach(c, &s, why) == 0);
		print_stats("signal during injection", &s);
	}
	long long t0 = 0, t1 = 0;
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0 &&
	      sscanf(line, "t_start=%lld t_end=%lld", &t0, &t1) == 2);
	end_target(&t, out, sizeof(out), &st);
	printf("  signal during injection: '%.*s', returned %.3f ms after "
	       "the detach\n",
	       (int)strcspn(out, "\n"), out, (double)(t1 - t_detach) / 1e6);
	CHECK(st == 0 &&
	      !strcmp(out,
	              "sigsuspend: ret=-1 errno=Interrupted system call\n"));
}

/* sigsuspend with SIGUSR2 in its temporary mask and SIGUSR2 pending:
 * any stop of the thread ends the call inside the kernel, and the
 * program's own mask (which lets SIGUSR2 through) comes back.  The
 * injector then issues the call again behind the handler, as the kernel
 * does after a stop: the call goes on until SIGUSR1, no early EINTR. */
static void run_pending_blocked(bool inject, char *out, size_t outlen, int *st,
                                double *late_ms)
{
	struct tgt t;
	char line[256], why[INJECT_WHY] = "";
	CHECK(spawn(&t, target, "sigsuspend2", NULL) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0);
	CHECK(wait_blocked(t.pid, SYS_rt_sigsuspend));
	CHECK(kill(t.pid, SIGUSR2) == 0);
	bool pending = false;
	for (int i = 0; i < 5000 && !pending; i++) {
		struct proc_status ps;
		pending = proc_status(t.pid, &ps) == 0 &&
		          ((ps.sigpnd | ps.shdpnd) & (1ULL << (SIGUSR2 - 1)));
		if (!pending)
			pause_ms(1);
	}
	CHECK(pending);
	if (inject) {
		uint64_t h = 0;
		struct inject_stats s;
		int rc = inject_dlopen(t.pid, payload, NULL, &h, &s, why);
		if (rc)
			fprintf(stderr, "inject: %s\n", why);
		CHECK(rc == 0 && h);
		print_stats("sigsuspend, a signal pending", &s);
		CHECK(s.reissued == 1);
		CHECK(wait_blocked(t.pid, SYS_rt_sigsuspend));
	}
	long long t_wake = now_ns(), t0 = 0, t1 = 0;
	CHECK(kill(t.pid, SIGUSR1) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0 &&
	      sscanf(line, "t_start=%lld t_end=%lld", &t0, &t1) == 2);
	*late_ms = (double)(t1 - t_wake) / 1e6;
	end_target(&t, out, outlen, st);
}

static void test_pending_blocked_signal(void)
{
	char bare[256], inj[256];
	int st_bare, st_inj;
	double late_bare, late_inj;
	run_pending_blocked(false, bare, sizeof(bare), &st_bare, &late_bare);
	run_pending_blocked(true, inj, sizeof(inj), &st_inj, &late_inj);
	printf("  sigsuspend, a signal pending: bare '%.*s' late %.3f ms; "
	       "injected '%.*s' late %.3f ms\n",
	       (int)strcspn(bare, "\n"), bare, late_bare,
	       (int)strcspn(inj, "\n"), inj, late_inj);
	CHECK(st_bare == 0 && st_inj == 0 && bare[0] && !strcmp(bare, inj));
	CHECK(late_inj >= 0 && late_inj <= LATE_MS);
}

/* The library is refused when dlopen fails: the target's dlerror() is
 * the reason, and the target runs on. */
static void test_dlopen_error(void)
{
	char bad[PATH_MAX + 32];
	snprintf(bad, sizeof(bad), "%s/not-a-library.so", tmpdir);
	int fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0 && write(fd, "hello\n", 6) == 6);
	close(fd);
	struct tgt t;
	char line[256], out[256], why[INJECT_WHY] = "";
	int st;
	CHECK(spawn(&t, target, "read", NULL) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0);
	CHECK(wait_blocked(t.pid, SYS_read));
	uint64_t h = 1;
	CHECK(inject_dlopen(t.pid, bad, NULL, &h, NULL, why) == -1 && h == 0);
	printf("  dlopen error: %s\n", why);
	CHECK(strstr(why, "dlopen(") && strstr(why, "not-a-library.so"));
	CHECK(strstr(why, "ELF") || strstr(why, "too short"));
	CHECK(write(t.in, "y", 1) == 1);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0);
	end_target(&t, out, sizeof(out), &st);
	CHECK(st == 0 && !strcmp(out, "read: ret=1 errno=- byte=y\n"));
	unlink(bad);
}

/* A thread stopped in its own code, between setting errno and reading
 * it, gets it back as it was: the remote calls (here close(-1), which
 * sets EBADF) must not leak theirs. */
static void test_errno_kept(void)
{
	struct tgt t;
	char line[256], out[256], why[INJECT_WHY] = "";
	int st;
	CHECK(spawn(&t, target, "errno", NULL) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0);
	for (int i = 0; i < 3; i++) {
		struct inject_ctx *c = NULL;
		uint64_t close_fn = 0, ret = 0;
		const uint64_t args[6] = {(uint64_t)-1};
		CHECK(inject_attach(t.pid, NULL, &c, why) == 0 && c);
		if (!c) {
			printf("  attach: %s\n", why);
			break;
		}
		CHECK(inject_libc_symbol(c, "close", &close_fn, why) == 0);
		CHECK(inject_remote_call(c, close_fn, args, &ret, why) == 0);
		CHECK((int)ret == -1); /* an int: eax */
		CHECK(inject_detach(c, NULL, why) == 0);
	}
	CHECK(kill(t.pid, SIGUSR1) == 0);
	end_target(&t, out, sizeof(out), &st);
	CHECK(st == 0 && !strcmp(out, "errno: changed=0\n"));
	if (strcmp(out, "errno: changed=0\n"))
		printf("  errno target said: %s", out);
}

/* A thread blocked inside a signal handler is never a safe point (the
 * handler may have interrupted anything): the stack is unwound through
 * the signal frame (or scanned), __restore_rt found, the attach refused
 * within its budget; the handler then returns as bare. */
static void test_refuse_in_handler(void)
{
	struct tgt t;
	char line[256], out[256], why[INJECT_WHY] = "";
	int st;
	CHECK(spawn(&t, target, "inhandler", NULL) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0);
	CHECK(wait_blocked(t.pid, SYS_read));
	struct inject_opts o = {.budget_ms = 100};
	struct inject_ctx *c = NULL;
	CHECK(inject_attach(t.pid, &o, &c, why) == -1 && !c);
	printf("  refused (in a handler): %s\n", why);
	CHECK(strstr(why, "__restore_rt") != NULL);
	CHECK(write(t.in, "h", 1) == 1);
	end_target(&t, out, sizeof(out), &st);
	CHECK(st == 0 && !strcmp(out, "inhandler: byte=h\n"));
}

/* ---- the storm --------------------------------------------------------- */

static void run_storm(bool inject, char *out, size_t outlen, int *st)
{
	struct tgt t;
	char line[256];
	CHECK(spawn(&t, target, "storm", NULL) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0 &&
	      !strcmp(line, "ready"));
	if (inject) {
		struct inject_opts o = {.budget_ms = 2000,
		                        .call_timeout_ms = 5000};
		struct inject_stats s;
		uint64_t h = 0, ret = 0;
		char why[INJECT_WHY] = "";
		long long t_in = now_ns();
		int rc = inject_dlopen(t.pid, payload, &o, &h, &s, why);
		busy_ms = s.total_ms;
		busy_all_ms = (double)(now_ns() - t_in) / 1e6;
		if (rc)
			fprintf(stderr, "inject into the storm: %s\n", why);
		CHECK(rc == 0 && h);
		print_stats("storm dlopen", &s);
		CHECK_EQ_U64(payload_count(t.pid, h), 1000);
		const char *e = getenv("HEAPPROF_INJECT_STRESS");
		int calls = 4 + (e ? atoi(e) : 0);
		long want = 1000;
		double worst = 0, sum = 0;
		int tries = 0;
		for (int i = 1; h && i <= calls; i++) {
			uint64_t args[6] = {(uint64_t)i, 0, 0, 0, 0, 0};
			rc = inject_call_symbol(t.pid, h, "inject_payload_bump",
			                        args, &o, &ret, &s, why);
			if (rc) {
				fprintf(stderr, "call %d into the storm: %s\n",
				        i, why);
				CHECK(rc == 0);
				break;
			}
			want += i;
			CHECK_EQ_U64(ret, want);
			if (i <= 4)
				print_stats("storm call", &s);
			sum += s.total_ms;
			tries += s.tries;
			if (s.total_ms > worst)
				worst = s.total_ms;
		}
		printf("  storm: %d calls, mean %.3f ms, worst %.3f ms, %d "
		       "tries\n",
		       calls, sum / calls, worst, tries);
		CHECK(proc_alive(t.pid));
	}
	CHECK(write(t.in, "x", 1) == 1);
	end_target(&t, out, outlen, st);
}

static void test_storm(void)
{
	char bare[256], inj[256];
	int st_bare, st_inj;
	run_storm(false, bare, sizeof(bare), &st_bare);
	run_storm(true, inj, sizeof(inj), &st_inj);
	printf("  storm: bare '%.*s', injected '%.*s'\n",
	       (int)strcspn(bare, "\n"), bare, (int)strcspn(inj, "\n"), inj);
	CHECK(st_bare == 0 && st_inj == 0);
	CHECK(strstr(bare, "checksum=") && !strcmp(bare, inj));
	/* HEAPPROF_INJECT_STORMS=N: N more storms, each loaded anew. */
	const char *e = getenv("HEAPPROF_INJECT_STORMS");
	int runs = e ? atoi(e) : 0, same = 0;
	for (int i = 0; i < runs; i++) {
		run_storm(true, inj, sizeof(inj), &st_inj);
		same += st_inj == 0 && !strcmp(bare, inj);
	}
	if (runs)
		printf("  storm: %d more storms, %d ended with the bare "
		       "checksum\n",
		       runs, same);
	CHECK(same == runs);
}

/* ---- refusals ---------------------------------------------------------- */

/* inject_check of a target in mode (blocked in read) must fail with a
 * reason that holds want; the target then runs on untouched. */
static void expect_refusal(const char *prog, const char *mode, const char *arg,
                           const char *want, bool as_nobody)
{
	struct tgt t;
	char line[256], out[256], why[INJECT_WHY] = "";
	int st;
	CHECK(spawn(&t, prog, mode, arg) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0 &&
	      !strcmp(line, "ready"));
	CHECK(wait_blocked(t.pid, SYS_read));
	int rc;
	if (as_nobody) {
		/* The check from a tracer without privileges. */
		int p[2];
		CHECK(pipe(p) == 0);
		fflush(NULL);
		pid_t c = fork();
		if (c == 0) {
			close(p[0]);
			if (setresgid(NOBODY, NOBODY, NOBODY) ||
			    setresuid(NOBODY, NOBODY, NOBODY))
				_exit(3);
			char w[INJECT_WHY] = "";
			int r = inject_check(t.pid, w);
			if (write(p[1], w, strlen(w) + 1) < 0)
				_exit(4);
			_exit(r ? 1 : 0);
		}
		close(p[1]);
		ssize_t n = read(p[0], why, sizeof(why) - 1);
		why[n > 0 ? n : 0] = '\0';
		close(p[0]);
		int cst;
		CHECK(wait_exit(c, &cst, WAIT_MS) == 0);
		rc = WIFEXITED(cst) && WEXITSTATUS(cst) == 1 ? -1 : 0;
	} else {
		rc = inject_check(t.pid, why);
		uint64_t h = 0;
		char why2[INJECT_WHY] = "";
		CHECK(inject_dlopen(t.pid, payload, NULL, &h, NULL, why2) ==
		      -1);
		CHECK(!strcmp(why, why2));
	}
	printf("  refused (%s): %s\n", mode, why);
	CHECK(rc == -1 && strstr(why, want));
	CHECK(write(t.in, "z", 1) == 1);
	end_target(&t, out, sizeof(out), &st);
	CHECK(st == 0 && strstr(out, "ret=1"));
}

static void test_refuse_traced(void)
{
	struct tgt t;
	char line[256], out[256], why[INJECT_WHY] = "";
	int st, hold[2], ready[2];
	CHECK(spawn(&t, target, "read", NULL) == 0);
	CHECK(read_line(t.err, line, sizeof(line), WAIT_MS) == 0);
	CHECK(wait_blocked(t.pid, SYS_read));
	CHECK(pipe(hold) == 0 && pipe(ready) == 0);
	fflush(NULL);
	pid_t tracer = fork();
	if (tracer == 0) {
		close(hold[1]);
		close(ready[0]);
		char c = ptrace(PTRACE_SEIZE, t.pid, 0, 0) == 0 ? 1 : 0;
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		while (read(hold[0], &c, 1) > 0)
			;
		_exit(0); /* the tracer's exit detaches it */
	}
	close(hold[0]);
	close(ready[1]);
	char ok = 0;
	CHECK(read(ready[0], &ok, 1) == 1 && ok == 1);
	close(ready[0]);
	CHECK(inject_check(t.pid, why) == -1);
	printf("  refused (traced): %s\n", why);
	CHECK(strstr(why, "already traced by") != NULL);
	close(hold[1]);
	int tst;
	CHECK(wait_exit(tracer, &tst, WAIT_MS) == 0);
	CHECK(write(t.in, "z", 1) == 1);
	end_target(&t, out, sizeof(out), &st);
	CHECK(st == 0 && strstr(out, "ret=1"));
}

static void test_refuse_static(void)
{
	if (access(static_target, X_OK) != 0) {
		printf("  skipped: no %s (the toolchain cannot link -static)\n",
		       static_target);
		return;
	}
	expect_refusal(static_target, "read", NULL, "statically linked", false);
}

static void test_refuse_seccomp(void)
{
	expect_refusal(target, "seccomp", NULL, "seccomp filter", false);
}

static void test_refuse_other_user(void)
{
	if (getuid() != 0) {
		printf("  skipped: needs root to run a target as root and a "
		       "checker as nobody\n");
		return;
	}
	/* A root target, a checker as nobody. */
	expect_refusal(target, "read", NULL, "runs as uid 0", true);
	/* A target of the checker's own uid, but not dumpable. */
	char id[16];
	snprintf(id, sizeof(id), "%d", NOBODY);
	expect_refusal(target, "nodump", id, "not dumpable", true);
}

static void test_refuse_mount_ns(void)
{
	if (getuid() != 0) {
		printf("  skipped: needs root for a mount namespace\n");
		return;
	}
	char dir[PATH_MAX + 16], lib[PATH_MAX + 32], cmd[3 * PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/hidden", tmpdir);
	snprintf(lib, sizeof(lib), "%s/payload.so", dir);
	CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", payload, lib);
	CHECK(system(cmd) == 0);
	struct tgt t;
	char line[256], out[256], why[INJECT_WHY] = "";
	int st;
	CHECK(spawn(&t, target, "mntns", dir) == 0);
	if (read_line(t.err, line, sizeof(line), WAIT_MS) != 0) {
		/* No mount namespaces here (a container without
		 * CAP_SYS_ADMIN): nothing to test. */
		end_target(&t, out, sizeof(out), &st);
		printf("  skipped: cannot make a mount namespace here\n");
		return;
	}
	CHECK(wait_blocked(t.pid, SYS_read));
	uint64_t h = 0;
	CHECK(inject_dlopen(t.pid, lib, NULL, &h, NULL, why) == -1);
	printf("  refused (mount namespace): %s\n", why);
	CHECK(strstr(why, "not reachable") && strstr(why, "mount namespace"));
	CHECK(write(t.in, "z", 1) == 1);
	end_target(&t, out, sizeof(out), &st);
	CHECK(st == 0 && strstr(out, "ret=1"));
	unlink(lib);
	rmdir(dir);
}

/* The executable checks on synthetic ELF headers: there is no -m32
 * toolchain here to build a real 32-bit target. */
static void test_refuse_elf_class(void)
{
	static const struct {
		int cls, machine;
		const char *want;
	} cases[] = {
	        {1, 3, "32-bit program"},  /* ELFCLASS32, EM_386 */
	        {1, 62, "x32 program"},    /* ELFCLASS32, EM_X86_64 */
	        {2, 183, "not an x86-64"}, /* ELFCLASS64, EM_AARCH64 */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned char h[64] = {0x7f, 'E', 'L', 'F'};
		h[4] = (unsigned char)cases[i].cls;
		h[5] = 1; /* little endian */
		h[6] = 1;
		h[16] = 2; /* ET_EXEC */
		h[18] = (unsigned char)cases[i].machine;
		char path[PATH_MAX + 16], why[INJECT_WHY] = "";
		snprintf(path, sizeof(path), "%s/elf%zu", tmpdir, i);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		CHECK(fd >= 0 && write(fd, h, sizeof(h)) == (ssize_t)sizeof(h));
		close(fd);
		CHECK(inject_check_exe(path, 42, why) == -1);
		printf("  refused (ELF): %s\n", why);
		CHECK(strstr(why, cases[i].want) != NULL);
		unlink(path);
	}
}

/* Yama is not on this kernel: the decision alone. */
static void test_refuse_yama(void)
{
	char why[INJECT_WHY];
	CHECK(inject_yama_refusal(0, false, false, 7, why) == 0);
	CHECK(inject_yama_refusal(1, false, true, 7, why) == 0);
	CHECK(inject_yama_refusal(1, true, false, 7, why) == 0);
	CHECK(inject_yama_refusal(1, false, false, 7, why) == -1 &&
	      strstr(why, "ptrace_scope is 1"));
	CHECK(inject_yama_refusal(2, true, false, 7, why) == 0);
	CHECK(inject_yama_refusal(2, false, true, 7, why) == -1 &&
	      strstr(why, "ptrace_scope is 2"));
	CHECK(inject_yama_refusal(3, true, true, 7, why) == -1 &&
	      strstr(why, "ptrace_scope is 3"));
}

static void test_refuse_gone(void)
{
	char why[INJECT_WHY];
	fflush(NULL);
	pid_t c = fork();
	if (c == 0)
		_exit(0);
	int st;
	waitpid(c, &st, 0);
	CHECK(inject_check(c, why) == -1 && strstr(why, "no process"));
	CHECK(inject_check(getpid(), why) == -1 && strstr(why, "heapprof"));
}

/* ---- main ---------------------------------------------------------- */

/* Whether we may ptrace a child of ours here (a container may forbid
 * ptrace altogether). */
static bool ptrace_permitted(char *why)
{
	struct tgt t;
	char line[256], out[64];
	int st;
	if (spawn(&t, target, "read", NULL))
		return false;
	bool ok = read_line(t.err, line, sizeof(line), WAIT_MS) == 0 &&
	          inject_check(t.pid, why) == 0;
	if (ok) {
		ok = ptrace(PTRACE_SEIZE, t.pid, 0, 0) == 0;
		if (!ok)
			snprintf(why, INJECT_WHY, "PTRACE_SEIZE: %s",
			         strerror(errno));
		else
			ptrace(PTRACE_DETACH, t.pid, 0, 0);
	}
	end_target(&t, out, sizeof(out), &st);
	return ok;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	char self[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	/* BUILD/tests/test_inject -> BUILD/progs/... */
	*strrchr(self, '/') = '\0';
	*strrchr(self, '/') = '\0';
	snprintf(target, sizeof(target), "%s/progs/inject_target", self);
	snprintf(payload, sizeof(payload), "%s/progs/inject_payload", self);
	snprintf(static_target, sizeof(static_target), "%s/progs/inject_static",
	         self);
	if (access(target, X_OK) || access(payload, R_OK)) {
		fprintf(stderr, "no %s or %s (make unit builds them)\n", target,
		        payload);
		return 1;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/hpinject.XXXXXX",
	         tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tmpdir))
		return 1;
	/* The nobody checker and the mount-namespace target reach it. */
	chmod(tmpdir, 0755);
	char why[INJECT_WHY] = "";
	if (!ptrace_permitted(why)) {
		printf("inject: skipped: ptrace is not permitted here (%s)\n",
		       why);
		printf("inject: 0 passed, 0 failed\n");
		rmdir(tmpdir);
		return 0;
	}
	static const struct unit_test tests[] = {
	        {"blocked_calls", test_blocked_calls},
	        {"signal_during_injection", test_signal_during_injection},
	        {"pending_blocked_signal", test_pending_blocked_signal},
	        {"dlopen_error", test_dlopen_error},
	        {"errno_kept", test_errno_kept},
	        {"refuse_in_handler", test_refuse_in_handler},
	        {"storm", test_storm},
	        {"refuse_traced", test_refuse_traced},
	        {"refuse_static", test_refuse_static},
	        {"refuse_seccomp", test_refuse_seccomp},
	        {"refuse_other_user", test_refuse_other_user},
	        {"refuse_mount_ns", test_refuse_mount_ns},
	        {"refuse_elf_class", test_refuse_elf_class},
	        {"refuse_yama", test_refuse_yama},
	        {"refuse_gone", test_refuse_gone},
	        {NULL, NULL},
	};
	int rc = unit_main("inject", tests);
	printf("inject: attach time (seize to detach, the payload loaded): "
	       "idle %.3f ms (%.3f ms with the checks), busy 4-thread storm "
	       "%.3f ms (%.3f ms with the checks); not checked\n",
	       idle_ms, idle_all_ms, busy_ms, busy_all_ms);
	rmdir(tmpdir);
	return rc;
}
