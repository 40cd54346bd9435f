/*
 * safe_atfork_main: forks 5 children while a library's atfork child
 * handler allocates (libsrc/safe_atfork_lib.c), for test_safety.sh.
 *   af_parent  20 x malloc(300), 5 freed            (the parent)
 *   af_child   in each child: 10 x malloc(100), 5 freed, then exit 7
 * Exits 29.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;

NOINLINE void af_parent(void)
{
	void *p[20];
	for (int i = 0; i < 20; i++) {
		p[i] = malloc(300);
		sink += p[i] != NULL;
	}
	for (int i = 0; i < 5; i++)
		free(p[i]);
}

NOINLINE void af_child(void)
{
	void *p[10];
	for (int i = 0; i < 10; i++) {
		p[i] = malloc(100);
		sink += p[i] != NULL;
	}
	for (int i = 0; i < 5; i++)
		free(p[i]);
}

int main(void)
{
	af_parent();
	for (int k = 0; k < 5; k++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			af_child();
			_exit(7);
		}
		int st = 0;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 7) {
			printf("child %d: status 0x%x\n", k, st);
			return 1;
		}
		printf("child %d: ok\n", k);
	}
	printf("count af_parent 20 6000 15 4500\n");
	return 29;
}
