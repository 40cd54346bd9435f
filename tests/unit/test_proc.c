/*
 * util/proc.c against this test's own process and a child it forks: the
 * child renames itself, moves to "/", holds a pipe and waits; then it is
 * killed and looked at as a zombie, then reaped and looked at as gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "util/proc.h"

#define KID_NAME "hp-proc-kid"

static pid_t kid = -1;
static int kid_pipe = -1; /* the write end of the pipe the kid waits on */
static char self_argv0[4096];

/* Forks the kid and waits until it has renamed itself and moved to "/". */
static void start_kid(void)
{
	int ready[2], hold[2];
	if (pipe(ready) || pipe(hold))
		abort();
	kid = fork();
	if (kid == 0) {
		close(ready[0]);
		close(hold[1]);
		prctl(PR_SET_NAME, KID_NAME);
		if (chdir("/") != 0)
			_exit(1);
		char c = 1;
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		/* Until the parent closes its end or kills us. */
		while (read(hold[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	char c;
	CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	kid_pipe = hold[1];
}

static void test_stat(void)
{
	struct proc_stat st;
	CHECK(proc_stat(getpid(), &st) == 0);
	CHECK(st.state == 'R');
	CHECK(st.ppid == getppid());
	CHECK(st.start_time > 0);
	CHECK(proc_ppid(getpid()) == getppid());
	CHECK(proc_alive(getpid()));

	struct proc_stat ks;
	CHECK(proc_stat(kid, &ks) == 0);
	CHECK(ks.ppid == getpid());
	CHECK(ks.start_time >= st.start_time);
	CHECK(ks.state == 'S' || ks.state == 'R');
	CHECK(proc_alive(kid));
}

static void on_signal(int sig)
{
	(void)sig;
}

static void test_status(void)
{
	struct proc_status st;
	CHECK(proc_status(getpid(), &st) == 0);
	CHECK(st.have & PROC_HAVE_UID);
	CHECK(st.have & PROC_HAVE_RSS);
	CHECK(st.have & PROC_HAVE_HWM);
	CHECK(st.uid[0] == getuid() && st.uid[1] == geteuid());
	CHECK(st.ppid == getppid());
	CHECK(st.state == 'R');
	CHECK(st.rss > 0 && st.rss % 1024 == 0);
	CHECK(st.rss_peak >= st.rss);
	CHECK(st.rss_anon + st.rss_file + st.rss_shmem == st.rss);

	/* A caught signal shows in SigCgt. */
	struct sigaction sa = {.sa_handler = on_signal}, old;
	sigaction(SIGUSR2, NULL, &old);
	sigaction(SIGUSR2, &sa, NULL);
	CHECK(proc_status(getpid(), &st) == 0);
	CHECK(st.sigcgt & (1ull << (SIGUSR2 - 1)));
	sigaction(SIGUSR2, &old, NULL);

	CHECK(proc_status(kid, &st) == 0);
	CHECK(!strcmp(st.name, KID_NAME));
	CHECK(st.ppid == getpid());

	uid_t owner = (uid_t)-1;
	CHECK(proc_owner(kid, &owner) == 0);
	CHECK(owner == geteuid());
	/* The lines the injector reads (src/inject/inject.c). */
	CHECK(st.have & PROC_HAVE_GID);
	CHECK(st.gid[0] == getgid() && st.gid[1] == getegid());
	CHECK(st.tracer == 0);
	CHECK(st.seccomp_mode == 0);
	sigset_t blk, oldblk;
	sigemptyset(&blk);
	sigaddset(&blk, SIGUSR1);
	sigprocmask(SIG_BLOCK, &blk, &oldblk);
	raise(SIGUSR1);
	CHECK(proc_status(getpid(), &st) == 0);
	CHECK(st.sigblk & (1ull << (SIGUSR1 - 1)));
	CHECK((st.sigpnd | st.shdpnd) & (1ull << (SIGUSR1 - 1)));
	signal(SIGUSR1, SIG_IGN); /* discards the pending one */
	sigprocmask(SIG_SETMASK, &oldblk, NULL);
	signal(SIGUSR1, SIG_DFL);
}

static void test_names(void)
{
	char comm[64], argv0[4096], exe[4096], kexe[4096], cwd[4096];
	proc_comm(kid, comm, sizeof(comm));
	CHECK(!strcmp(comm, KID_NAME));
	/* fork keeps the command line and the executable. */
	CHECK(proc_argv0(kid, argv0, sizeof(argv0)) == 0);
	CHECK(!strcmp(argv0, self_argv0));
	char *cmd = proc_cmdline(getpid());
	CHECK(cmd && !strncmp(cmd, self_argv0, strlen(self_argv0)));
	free(cmd);
	CHECK(proc_exe(getpid(), exe, sizeof(exe)) == 0);
	CHECK(exe[0] == '/');
	CHECK(proc_exe(kid, kexe, sizeof(kexe)) == 0);
	CHECK(!strcmp(exe, kexe));
	CHECK(proc_cwd(kid, cwd, sizeof(cwd)) == 0);
	CHECK(!strcmp(cwd, "/"));
	/* Cut to fit. */
	char small[4];
	CHECK(proc_exe(getpid(), small, sizeof(small)) == 0);
	CHECK(strlen(small) == 3);

	CHECK(proc_name_matches(KID_NAME, "", KID_NAME));
	CHECK(proc_name_matches("prog", "/usr/bin/prog", ""));
	CHECK(proc_name_matches("/usr/bin/prog", "/usr/bin/prog", "x"));
	CHECK(!proc_name_matches("bin/prog", "/usr/bin/prog", "x"));
	CHECK(!proc_name_matches("", "", ""));

	pid_t pids[8];
	int n = proc_find_by_name(KID_NAME, pids, 8);
	CHECK(n >= 1);
	int found = 0;
	for (int i = 0; i < n && i < 8; i++)
		found += pids[i] == kid;
	CHECK(found == 1);
	/* Our own process is never one of them. */
	const char *b = strrchr(self_argv0, '/');
	n = proc_find_by_name(b ? b + 1 : self_argv0, pids, 8);
	for (int i = 0; i < n && i < 8; i++)
		CHECK(pids[i] != getpid());
}

struct map_find {
	uintptr_t addr;
	char path[4096];
	char perms[8];
	int n;
};

static int find_map(void *ctx, const struct proc_map *m)
{
	struct map_find *f = ctx;
	f->n++;
	if (f->addr < m->start || f->addr >= m->end)
		return 0;
	snprintf(f->path, sizeof(f->path), "%s", m->path);
	memcpy(f->perms, m->perms, sizeof(f->perms));
	return 7;
}

static int count_map(void *ctx, const struct proc_map *m)
{
	(*(int *)ctx)++;
	return 0;
}

static void test_maps(void)
{
	char exe[4096];
	CHECK(proc_exe(getpid(), exe, sizeof(exe)) == 0);
	/* This function's code is in a mapping of our executable. */
	struct map_find f = {.addr = (uintptr_t)test_maps};
	CHECK(proc_maps(getpid(), find_map, &f) == 7);
	CHECK(!strcmp(f.path, exe));
	CHECK(f.perms[0] == 'r' && f.perms[2] == 'x');
	/* A heap block is in an anonymous mapping or [heap]. */
	void *p = malloc(64);
	struct map_find h = {.addr = (uintptr_t)p};
	CHECK(proc_maps(getpid(), find_map, &h) == 7);
	CHECK(h.path[0] != '/');
	free(p);
	int n = 0;
	CHECK(proc_maps(kid, count_map, &n) == 0);
	CHECK(n > 3);
}

struct fd_find {
	int want;
	int reopen; /* read what proc_fd_open opens (not a pipe) */
	char target[256];
	int reopened;
};

static int find_fd(void *ctx, const struct proc_fd *f)
{
	struct fd_find *ff = ctx;
	if (f->fd != ff->want)
		return 0;
	snprintf(ff->target, sizeof(ff->target), "%s",
	         f->target ? f->target : "");
	int fd = ff->reopen ? proc_fd_open(f, O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		char buf[8] = "";
		ff->reopened = read(fd, buf, sizeof(buf)) == 5 &&
		               !memcmp(buf, "proc!", 5);
		close(fd);
	}
	return 1;
}

static void test_fds(void)
{
	char path[] = "/tmp/hp-test-proc-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(write(fd, "proc!", 5) == 5);
	struct fd_find ff = {.want = fd, .reopen = 1};
	CHECK(proc_fds(getpid(), find_fd, &ff) == 1);
	CHECK(!strcmp(ff.target, path));
	CHECK(ff.reopened);
	close(fd);
	unlink(path);
	/* The kid holds the read end of a pipe. */
	struct fd_find kf = {.want = 0};
	int kid_fds = 0;
	for (int i = 3; i < 64 && !kid_fds; i++) {
		kf.want = i;
		kf.target[0] = '\0';
		proc_fds(kid, find_fd, &kf);
		kid_fds = !strncmp(kf.target, "pipe:[", 6);
	}
	CHECK(kid_fds);
}

static int count_child(void *ctx, pid_t child)
{
	int *n = ctx;
	if (child == kid)
		(*n)++;
	return 0;
}

static int count_pid(void *ctx, pid_t pid)
{
	int *n = ctx;
	if (pid == kid || pid == getpid())
		(*n)++;
	return 0;
}

static int find_kid_task(void *ctx, pid_t tid)
{
	if (tid == kid)
		*(bool *)ctx = true;
	return 0;
}

static void test_walks(void)
{
	int n = 0;
	if (proc_children(getpid(), count_child, &n) == 0)
		CHECK(n == 1);
	else
		CHECK(errno == ENOENT);
	n = 0;
	CHECK(proc_pids(count_pid, &n) == 0);
	CHECK(n == 2);
	/* The kid's main thread is one of its tasks (under TSan it has
	 * the runtime's thread too), blocked in read. */
	bool found = false;
	CHECK(proc_tasks(kid, find_kid_task, &found) == 0 && found);
	long nr = -3;
	for (int i = 0; i < 2000 && nr != SYS_read; i++) {
		nr = proc_task_syscall(kid, kid);
		if (nr != SYS_read)
			usleep(1000);
	}
	CHECK(nr == SYS_read);
}

static void test_gone(void)
{
	struct proc_stat st;
	struct proc_status ps;
	kill(kid, SIGKILL);
	/* A zombie until reaped: its stat says so, its status has no
	 * memory, its executable cannot be read. */
	siginfo_t si;
	CHECK(waitid(P_PID, (id_t)kid, &si, WEXITED | WNOWAIT) == 0);
	CHECK(proc_stat(kid, &st) == 0);
	CHECK(st.state == 'Z');
	CHECK(!proc_alive(kid));
	CHECK(proc_status(kid, &ps) == 0);
	CHECK(!(ps.have & PROC_HAVE_RSS));
	char exe[256] = "x";
	CHECK(proc_exe(kid, exe, sizeof(exe)) == -1 && exe[0] == '\0');
	int status;
	CHECK(waitpid(kid, &status, 0) == kid);
	/* Gone. */
	CHECK(proc_stat(kid, &st) == -1 && errno == ENOENT);
	CHECK(proc_status(kid, &ps) == -1 && errno == ENOENT);
	CHECK(proc_ppid(kid) == -1);
	CHECK(!proc_alive(kid));
	char comm[64] = "x";
	proc_comm(kid, comm, sizeof(comm));
	CHECK(comm[0] == '\0');
	char *cmd = proc_cmdline(kid);
	CHECK(cmd && cmd[0] == '\0');
	free(cmd);
	char a0[64] = "x";
	CHECK(proc_argv0(kid, a0, sizeof(a0)) == -1 && a0[0] == '\0');
	CHECK(proc_maps(kid, count_map, &(int){0}) == -1 && errno == ENOENT);
	CHECK(proc_fds(kid, find_fd, &(struct fd_find){0}) == -1 &&
	      errno == ENOENT);
	uid_t u;
	CHECK(proc_owner(kid, &u) == -1 && errno == ENOENT);
	close(kid_pipe);
}

int main(int argc, char **argv)
{
	(void)argc;
	snprintf(self_argv0, sizeof(self_argv0), "%s", argv[0]);
	start_kid();
	static const struct unit_test tests[] = {
	        {"stat", test_stat},   {"status", test_status},
	        {"names", test_names}, {"maps", test_maps},
	        {"fds", test_fds},     {"walks", test_walks},
	        {"gone", test_gone},   {NULL, NULL},
	};
	return unit_main("proc", tests);
}
