/*
 * waiter READY_FIFO GO_FIFO: allocates (phase1_alloc), writes "ready" to
 * READY_FIFO, waits until GO_FIFO is opened and closed by the test, then
 * allocates again (phase2_alloc).  Lets a test act (e.g. send SIGUSR1 to
 * `heapprof record`) at a known point, without sleeping.
 *   phase1_alloc  10 x malloc(1000), live
 *   phase2_alloc  20 x malloc(500), live; then 4 of phase 1's blocks are
 *                 freed (phase1_alloc: 10 allocated, 6 live at the end)
 * Exits 12 on success, 1 on a FIFO error.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;
static void *keep1[10], *keep2[20];

NOINLINE void phase1_alloc(void)
{
	for (int i = 0; i < 10; i++) {
		keep1[i] = malloc(1000);
		memset(keep1[i], 1, 1000);
		sink += ((unsigned char *)keep1[i])[999];
	}
}

NOINLINE void phase2_alloc(void)
{
	for (int i = 0; i < 20; i++) {
		keep2[i] = malloc(500);
		memset(keep2[i], 2, 500);
		sink += ((unsigned char *)keep2[i])[499];
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: waiter READY_FIFO GO_FIFO\n");
		return 1;
	}
	phase1_alloc();
	int fd = open(argv[1], O_WRONLY);
	if (fd < 0 || write(fd, "ready\n", 6) != 6) {
		perror(argv[1]);
		return 1;
	}
	close(fd);
	fd = open(argv[2], O_RDONLY);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	char buf[64];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	phase2_alloc();
	for (int i = 0; i < 4; i++)
		free(keep1[i]);
	printf("waiter: done\n");
	return 12;
}
