/*
 * forker: fork without exec.  The parent allocates (parent_before), forks;
 * the child frees some of the parent's blocks, allocates in child_only_alloc
 * and exits 3 through exit() (atexit handlers run in the child); the parent
 * waits, checks the child's status, then allocates again (parent_after).
 * The child is not profiled: nothing it does may show in the profile.
 *
 * Parent, exact with -i 1:
 *   parent_before  50 x malloc(1000), all live in the parent
 *   parent_after   30 x malloc(2000), 10 freed
 * Child (never in the profile): child_only_alloc 40 x malloc(3000), and
 * frees of 25 of parent_before's blocks (in its copy of the heap).
 *
 * stdout is the same with and without the profiler; the pids go to stderr.
 * Exits 5 on success, 1 if the child's status was wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;
static void *before[50];

NOINLINE void parent_before(void)
{
	for (int i = 0; i < 50; i++) {
		before[i] = malloc(1000);
		memset(before[i], 1, 1000);
		sink += ((unsigned char *)before[i])[999];
	}
}

NOINLINE void child_only_alloc(void)
{
	void *p[40];
	for (int i = 0; i < 40; i++) {
		p[i] = malloc(3000);
		memset(p[i], 2, 3000);
		sink += ((unsigned char *)p[i])[2999];
	}
	for (int i = 0; i < 20; i++)
		free(p[i]);
}

NOINLINE void parent_after(void)
{
	void *p[30];
	for (int i = 0; i < 30; i++) {
		p[i] = malloc(2000);
		memset(p[i], 3, 2000);
		sink += ((unsigned char *)p[i])[1999];
	}
	for (int i = 0; i < 10; i++)
		free(p[i]);
}

int main(void)
{
	parent_before();
	printf("forker: parent allocated\n");
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		for (int i = 0; i < 25; i++)
			free(before[i]);
		child_only_alloc();
		printf("forker: child done\n");
		fflush(stdout);
		exit(3);
	}
	fprintf(stderr, "forker: parent pid %d child pid %d\n", (int)getpid(),
	        (int)pid);
	int st = 0;
	if (waitpid(pid, &st, 0) != pid) {
		perror("waitpid");
		return 1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 3) {
		printf("forker: child status 0x%x, expected exit 3\n", st);
		return 1;
	}
	printf("forker: child exited 3\n");
	parent_after();
	printf("forker: parent done\n");
	return 5;
}
