/*
 * attach_fdreuse GO N [STOP]: a program that takes every descriptor number
 * (test_attach_hostile.sh, issue 31): it prints "ready", waits for the file
 * GO (at most 60 s, else exit 3), then dup2s /dev/null over every number
 * from 3 to its RLIMIT_NOFILE but its own /dev/null (a profiler's
 * connection included: as a program that "owns" its table may), and makes
 * N x (fd_alloc: malloc(96), written, freed).  With STOP it then goes on
 * allocating (fd_more: malloc(64), freed, every millisecond) until the
 * file STOP exists (at most 60 s).  Each of its numbers must still be
 * /dev/null at the end: else it says which and exits 1.
 *
 * stdout: "ready", "taken K" (numbers dup2'd over), "made fd_alloc N 96",
 * "ok".  Exits 0.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

NOINLINE void fd_alloc(void)
{
	char *p = malloc(96);
	if (!p)
		exit(4);
	p[0] = 1;
	sink = p;
	free(p);
}

NOINLINE void fd_more(void)
{
	char *p = malloc(64);
	if (!p)
		exit(4);
	p[0] = 1;
	sink = p;
	free(p);
}

static void wait_file(const char *path)
{
	for (int i = 0; i < 30000 && access(path, F_OK) != 0; i++) {
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	if (access(path, F_OK) != 0)
		exit(3);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long n = atol(argv[2]);
	printf("ready\n");
	fflush(stdout);
	wait_file(argv[1]);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 2;
	int lim = rl.rlim_cur > 4096 ? 4096 : (int)rl.rlim_cur;
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul < 0)
		return 2;
	struct stat ns;
	fstat(nul, &ns);
	int taken = 0;
	for (int fd = 3; fd < lim; fd++) {
		if (fd == nul)
			continue;
		if (dup2(nul, fd) == fd)
			taken++;
	}
	printf("taken %d\n", taken);
	fflush(stdout);
	for (long i = 0; i < n; i++)
		fd_alloc();
	printf("made fd_alloc %ld 96\n", n);
	fflush(stdout);
	if (argc > 3) {
		for (int i = 0; i < 60000 && access(argv[3], F_OK) != 0; i++) {
			fd_more();
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	for (int fd = 3; fd < lim; fd++) {
		struct stat st;
		if (fstat(fd, &st) != 0 || st.st_dev != ns.st_dev ||
		    st.st_ino != ns.st_ino) {
			printf("descriptor %d is no longer /dev/null\n", fd);
			return 1;
		}
	}
	printf("ok\n");
	return 0;
}
