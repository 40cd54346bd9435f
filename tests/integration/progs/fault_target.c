/*
 * fault_target DIR MODE [N]: a program for test_faults.sh, driven through
 * files in DIR so that every step is waited on with a bound (60 s, then
 * exit 3).  The test injects a fault into the profiler between steps.
 *
 *   before_alloc: 10 x malloc(1000), live; then DIR/ready appears
 *   (holding the pid).
 *   Waits for DIR/go.  Then, by MODE:
 *     churn  churn_alloc: N (default 200000) x malloc(64), every block
 *            freed at once except every 1000th (N/1000 live)
 *     full   full_alloc: N (default 20000) x malloc(24), all live
 *   Then DIR/done appears (holding "done CHECKSUM", written by rename so
 *   it is whole when seen), and it waits for DIR/exit.
 *     steps  N steps (default 3): step S makes 100 x malloc(100), live
 *            (step_alloc), then DIR/stepS appears and it waits for
 *            DIR/goS; after the last step it waits for DIR/exit.
 *            With FT_WIDE=B in the environment, the last step is followed
 *            by wide_alloc: 2^B blocks of 32 bytes, live, each from its
 *            own call stack (B levels of tree(), two call sites each), so
 *            the next dump is large (a full disk).
 *   Prints "fault_target: MODE CHECKSUM" and exits 7 (FT_EXIT=N: N).
 *
 * Exact with -i 1 (nothing dropped): before_alloc 10 10000 10 10000;
 * churn_alloc N 64N N/1000 64(N/1000); full_alloc N 24N N 24N; at step S,
 * step_alloc 100S 10000S 100S 10000S.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static const char *dir;
static unsigned long checksum;

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void touch(const char *name)
{
	char p[4096];
	path_of(p, sizeof(p), name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0)
		close(fd);
}

/* Polls every 1 ms; 60 s at most (the test died: do not linger). */
static void wait_for(const char *name)
{
	char p[4096];
	path_of(p, sizeof(p), name);
	for (int i = 0; i < 60000; i++) {
		if (access(p, F_OK) == 0)
			return;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "fault_target: no %s within 60 s\n", p);
	exit(3);
}

NOINLINE static void before_alloc(void **keep)
{
	for (int i = 0; i < 10; i++) {
		keep[i] = malloc(1000);
		memset(keep[i], 1, 1000);
	}
}

NOINLINE static void churn_alloc(long n)
{
	for (long i = 0; i < n; i++) {
		unsigned char *p = malloc(64);
		p[0] = (unsigned char)i;
		checksum += p[0];
		if (i % 1000 != 999)
			free(p);
	}
}

NOINLINE static void full_alloc(long n)
{
	for (long i = 0; i < n; i++) {
		unsigned char *p = malloc(24);
		memset(p, (int)(i & 0xff), 24);
		checksum += p[23];
	}
}

/* Stack i: one call site per bit of i, so every i is its own stack. */
NOINLINE static void *tree(int level, unsigned long i)
{
	if (level == 0)
		return malloc(32);
	if (i & 1)
		return tree(level - 1, i >> 1);
	else
		return tree(level - 1, i >> 1);
}

NOINLINE static void wide_alloc(int bits)
{
	for (unsigned long i = 0; i < (1ul << bits); i++) {
		unsigned char *p = tree(bits, i);
		p[0] = 1;
		checksum += p[0];
	}
}

NOINLINE static void step_alloc(void)
{
	for (int i = 0; i < 100; i++) {
		unsigned char *p = malloc(100);
		memset(p, 2, 100);
		checksum += p[99];
	}
}

/* NAME holds TEXT once it appears (written aside, then renamed). */
static void write_file(const char *name, const char *text)
{
	char tmp[4096], p[4096];
	path_of(p, sizeof(p), name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	int n = (int)strlen(text);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, text, (size_t)n) != n || close(fd) != 0 ||
	    rename(tmp, p) != 0) {
		fprintf(stderr, "fault_target: cannot write %s: %s\n", p,
		        strerror(errno));
		exit(4);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr,
		        "usage: fault_target DIR churn|full|steps [N]\n");
		return 2;
	}
	dir = argv[1];
	const char *mode = argv[2];
	long n = argc > 3 ? atol(argv[3]) : 0;
	void *keep[10];

	char line[64];
	before_alloc(keep);
	snprintf(line, sizeof(line), "%d\n", (int)getpid());
	write_file("ready", line);
	wait_for("go");
	if (!strcmp(mode, "churn")) {
		churn_alloc(n > 0 ? n : 200000);
	} else if (!strcmp(mode, "full")) {
		full_alloc(n > 0 ? n : 20000);
	} else if (!strcmp(mode, "steps")) {
		for (long s = 1; s <= (n > 0 ? n : 3); s++) {
			char name[32];
			step_alloc();
			snprintf(name, sizeof(name), "step%ld", s);
			touch(name);
			snprintf(name, sizeof(name), "go%ld", s);
			wait_for(name);
		}
		const char *wide = getenv("FT_WIDE");
		if (wide && atoi(wide) > 0 && atoi(wide) < 24)
			wide_alloc(atoi(wide));
	} else {
		fprintf(stderr, "fault_target: unknown mode '%s'\n", mode);
		return 2;
	}
	snprintf(line, sizeof(line), "done %lu\n", checksum);
	write_file("done", line);
	wait_for("exit");
	printf("fault_target: %s %lu\n", mode, checksum);
	const char *code = getenv("FT_EXIT");
	return code ? atoi(code) : 7;
}
