/*
 * sigexit: allocates, then ends by calling exit(3) from a SIGUSR2 handler,
 * as programs that end on SIGTERM do.  The profiler's exit-time reading of
 * the process's memory must not call mallinfo2 there (it takes every
 * arena's lock, which the interrupted code could hold); RSS is still read.
 * Prints "allocated" and exits 3.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile keep;

static void on_usr2(int sig)
{
	(void)sig;
	exit(3);
}

int main(void)
{
	signal(SIGUSR2, on_usr2);
	keep = malloc(1000);
	memset(keep, 1, 1000);
	puts("allocated");
	fflush(stdout);
	raise(SIGUSR2);
	return 0;
}
