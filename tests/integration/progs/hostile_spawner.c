/*
 * hostile_spawner READY GO DONE: a program that starts other processes
 * while its collector may be stopped (issue 18, case 12).  Allocates,
 * creates READY, waits (bounded, 60 s) for GO to exist, then runs
 * system("echo spawned I") ten times and writes into DONE the longest
 * one took, in milliseconds.  stdout: the ten "spawned I" lines.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: hostile_spawner READY GO DONE\n");
		return 2;
	}
	volatile char *p = malloc(4096);
	p[0] = 1;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return 2;
	close(fd);
	long until = now_ms() + 60000;
	while (access(argv[2], F_OK) != 0) {
		if (now_ms() > until) {
			fprintf(stderr, "hostile_spawner: no GO in 60 s\n");
			return 2;
		}
		usleep(10000);
	}
	long worst = 0;
	char cmd[64];
	for (int i = 0; i < 10; i++) {
		snprintf(cmd, sizeof(cmd), "echo spawned %d", i);
		fflush(stdout);
		long t0 = now_ms();
		if (system(cmd) != 0)
			return 3;
		long t = now_ms() - t0;
		if (t > worst)
			worst = t;
	}
	FILE *f = fopen(argv[3], "w");
	if (!f)
		return 2;
	fprintf(f, "%ld\n", worst);
	fclose(f);
	free((void *)p);
	return 0;
}
