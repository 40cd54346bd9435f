/*
 * execer: the profiled process execs itself (/proc/self/exe) with the
 * argument "child"; the new image allocates in after_exec_alloc and exits 6.
 * record follows the command through its exec by default (the new
 * image's row); with --no-follow-exec only before_exec shows:
 *   before_exec       20 x malloc(500), 5 freed (exact with -i 1)
 *   after_exec_alloc  (new image) 10 x malloc(700), none freed
 * With "true" as argv[1] it execs /bin/true instead (exit 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;

NOINLINE void before_exec(void)
{
	static void *p[20];
	for (int i = 0; i < 20; i++) {
		p[i] = malloc(500);
		memset(p[i], 1, 500);
		sink += ((unsigned char *)p[i])[499];
	}
	for (int i = 0; i < 5; i++)
		free(p[i]);
}

NOINLINE void after_exec_alloc(void)
{
	static void *p[10];
	for (int i = 0; i < 10; i++) {
		p[i] = malloc(700);
		memset(p[i], 1, 700);
		sink += ((unsigned char *)p[i])[699];
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child")) {
		after_exec_alloc();
		printf("execer: new image done\n");
		return 6;
	}
	before_exec();
	printf("execer: exec\n");
	fflush(stdout);
	if (argc > 1 && !strcmp(argv[1], "true")) {
		execl("/bin/true", "true", (char *)NULL);
		perror("execl /bin/true");
		return 1;
	}
	execl("/proc/self/exe", argv[0], "child", (char *)NULL);
	perror("execl /proc/self/exe");
	return 1;
}
