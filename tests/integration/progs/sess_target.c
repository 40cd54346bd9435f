/*
 * sess_target DIR: a process for session tests (test_session.sh), driven
 * through files in DIR so the test acts at known points without sleeping:
 *
 *   main             startup_alloc, writes DIR/pid (its pid) and DIR/ready
 *   waits for DIR/go (a test creates it once `heapprof record` says the
 *   process is profiled)
 *                    attached_alloc, peak_alloc, writes DIR/allocated
 *   waits for DIR/exit, prints "sess_target: done", exits 0
 *
 * Exact with -i 1 (blocks allocated before a late attach are not in the
 * profile; their frees are ignored):
 *   startup_alloc   5 x malloc(2000), live: 5, 10000; 5, 10000 (only when
 *                   profiled from startup)
 *   attached_alloc  10 x malloc(1000) live, 4 x malloc(3000) freed:
 *                   14, 22000; 10, 10000
 *   peak_alloc      100 x malloc(10000), all freed again: 100, 1000000;
 *                   0, 0.  The peak of live bytes (from the attach on) is
 *                   10000 + 1000000 = 1010000, with these 100 blocks and
 *                   attached_alloc's 10 live.
 * Between go and allocated nothing else allocates: the files are written
 * with system calls, not stdio.  Each wait gives up after 60 s (exit 3).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;
static void *keep_start[5], *keep_att[10];

NOINLINE void startup_alloc(void)
{
	for (int i = 0; i < 5; i++) {
		keep_start[i] = malloc(2000);
		memset(keep_start[i], 1, 2000);
	}
}

NOINLINE void attached_alloc(void)
{
	void *tmp[4];
	for (int i = 0; i < 10; i++) {
		keep_att[i] = malloc(1000);
		memset(keep_att[i], 2, 1000);
	}
	for (int i = 0; i < 4; i++) {
		tmp[i] = malloc(3000);
		memset(tmp[i], 3, 3000);
		sink += ((unsigned char *)tmp[i])[2999];
	}
	for (int i = 0; i < 4; i++)
		free(tmp[i]);
}

NOINLINE void peak_alloc(void)
{
	static void *p[100];
	for (int i = 0; i < 100; i++) {
		p[i] = malloc(10000);
		memset(p[i], 4, 10000);
	}
	for (int i = 0; i < 100; i++)
		free(p[i]);
}

static const char *dir;

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* Writes DIR/name through a temporary name, so a reader never sees it
 * half written. */
static int put_file(const char *name, const char *text)
{
	char tmp[4096], dst[4096];
	path_of(dst, sizeof(dst), name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	size_t n = strlen(text);
	int ok = write(fd, text, n) == (ssize_t)n;
	close(fd);
	return ok && rename(tmp, dst) == 0 ? 0 : -1;
}

static int wait_file(const char *name)
{
	char p[4096];
	path_of(p, sizeof(p), name);
	struct timespec ts = {0, 5 * 1000 * 1000};
	for (int i = 0; i < 60 * 200; i++) {
		if (access(p, F_OK) == 0)
			return 0;
		nanosleep(&ts, NULL);
	}
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sess_target DIR\n");
		return 2;
	}
	dir = argv[1];
	startup_alloc();
	char pid[32];
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (put_file("pid", pid) || put_file("ready", "ready\n"))
		return 1;
	if (wait_file("go"))
		return 3;
	attached_alloc();
	peak_alloc();
	if (put_file("allocated", "allocated\n"))
		return 1;
	if (wait_file("exit"))
		return 3;
	for (int i = 0; i < 5; i++)
		free(keep_start[i]);
	printf("sess_target: done\n");
	return 0;
}
