/*
 * dfork_daemon DIR: a double-fork daemon (test_record_signals.sh).
 *
 * The command (the launcher) allocates in launcher_alloc (10 x
 * malloc(100), all live), makes a pipe, forks C1 and waits for it.  C1
 * calls setsid, forks C2 (the daemon) and _exits at once.  The launcher
 * prints its count line and exits 0 once C1 is gone.
 *
 * The daemon puts its stdin, stdout and stderr on /dev/null, writes its
 * pid to DIR/daemon.pid and waits until the launcher has exited (EOF on
 * the pipe, whose write end only the launcher still holds) and then
 * until the file DIR/go exists (the test makes it once it has seen the
 * launcher exit): it runs on after its parent and its grandparent, at
 * most 60 s each.  Then it allocates in daemon_alloc (40 x malloc(2500),
 * 15 freed), writes its count line to DIR/daemon.out (written as
 * DIR/daemon.tmp and renamed: the file appears complete) and exits 0.  A
 * daemon that waited in vain writes "timeout" there instead.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "safe_common.h"

static struct sc_count launcher_c = {"launcher_alloc", 0, 0, 0, 0};
static struct sc_count daemon_c = {"daemon_alloc", 0, 0, 0, 0};
static void *keep[64];

NOINLINE void launcher_alloc(void)
{
	for (int i = 0; i < 10; i++) {
		keep[i] = malloc(100);
		sc_touch(keep[i], 100);
		sc_alloc(&launcher_c, keep[i], 100);
	}
}

NOINLINE void daemon_alloc(void)
{
	for (int i = 0; i < 40; i++) {
		keep[i] = malloc(2500);
		sc_touch(keep[i], 2500);
		sc_alloc(&daemon_c, keep[i], 2500);
	}
	for (int i = 0; i < 15; i++) {
		free(keep[i]);
		sc_free(&daemon_c, 2500);
	}
}

/* Waits until path exists: 0, or -1 after 60 s. */
static int wait_file(const char *path)
{
	for (int waited = 0; waited < 60000; waited += 10) {
		if (access(path, F_OK) == 0)
			return 0;
		poll(NULL, 0, 10);
	}
	return -1;
}

/* Waits for EOF on fd: every writer gone.  0, or -1 after 60 s. */
static int wait_eof(int fd)
{
	for (int waited = 0; waited < 60000;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int rc = poll(&p, 1, 100);
		if (rc < 0)
			continue;
		if (rc == 0) {
			waited += 100;
			continue;
		}
		char b[16];
		ssize_t n = read(fd, b, sizeof(b));
		if (n == 0)
			return 0;
	}
	return -1;
}

static void run_daemon(const char *dir, int rfd)
{
	int null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	char path[4096], tmp[4096];
	snprintf(path, sizeof(path), "%s/daemon.pid", dir);
	FILE *f = fopen(path, "w");
	if (f) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	int rc = wait_eof(rfd);
	snprintf(path, sizeof(path), "%s/go", dir);
	if (rc == 0)
		rc = wait_file(path);
	if (rc == 0)
		daemon_alloc();
	snprintf(tmp, sizeof(tmp), "%s/daemon.tmp", dir);
	snprintf(path, sizeof(path), "%s/daemon.out", dir);
	f = fopen(tmp, "w");
	if (!f)
		_exit(1);
	if (rc == 0)
		fprintf(f, "count %s %ld %ld %ld %ld\n", daemon_c.name,
		        daemon_c.ao, daemon_c.as, daemon_c.o, daemon_c.s);
	else
		fprintf(f, "timeout\n");
	fclose(f);
	rename(tmp, path);
	exit(0);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: dfork_daemon DIR\n");
		return 2;
	}
	launcher_alloc();
	int p[2];
	if (pipe(p) != 0) {
		perror("pipe");
		return 1;
	}
	fflush(stdout);
	pid_t c1 = fork();
	if (c1 < 0) {
		perror("fork");
		return 1;
	}
	if (c1 == 0) {
		setsid();
		pid_t c2 = fork();
		if (c2 == 0) {
			close(p[1]);
			run_daemon(argv[1], p[0]);
		}
		_exit(c2 < 0 ? 1 : 0);
	}
	close(p[0]);
	int st;
	if (waitpid(c1, &st, 0) != c1 || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		printf("launcher: the first child failed (0x%x)\n", st);
		return 1;
	}
	printf("launcher: daemon started\n");
	sc_print(&launcher_c);
	return 0;
}
