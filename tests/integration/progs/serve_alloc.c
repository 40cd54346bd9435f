/*
 * serve_alloc READY GO: a process for `heapprof serve` (test_serve.sh).
 * Writes "pid N" to READY, then waits for the file GO to exist (the test
 * creates it once the agent's session is attached); then keep_here()
 * keeps 10 blocks of 100000 bytes (at -i 1: live 1000000 B, 10 objects,
 * exactly, nothing else allocating) and temp_here() allocates and frees 5
 * blocks of 1000 bytes; then it waits.  Ends on SIGTERM or SIGINT (exit
 * 0), or after 120 s.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile sig_atomic_t stop;
static volatile unsigned long sink;
static void *kept[10];

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

NOINLINE void keep_here(void)
{
	for (int i = 0; i < 10; i++) {
		kept[i] = malloc(100000);
		memset(kept[i], 3, 100000);
		sink += ((unsigned char *)kept[i])[99999];
	}
}

NOINLINE void temp_here(void)
{
	for (int i = 0; i < 5; i++) {
		char *p = malloc(1000);
		memset(p, 4, 1000);
		sink += (unsigned char)p[999];
		free(p);
	}
}

/* Without stdio, whose FILE and buffer would be allocations of their
 * own. */
static int ready(const char *path)
{
	char tmp[4096], line[32];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int n = snprintf(line, sizeof(line), "pid %d\n", (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	if (write(fd, line, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	close(fd);
	return rename(tmp, path);
}

static void nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (ready(argv[1]) < 0)
		return 1;
	int waited = 0;
	while (!stop && access(argv[2], F_OK) != 0 && waited < 120000) {
		nap(10);
		waited += 10;
	}
	if (!stop && waited < 120000) {
		keep_here();
		temp_here();
	}
	while (!stop && waited < 120000) {
		nap(10);
		waited += 10;
	}
	return 0;
}
