/*
 * vforker: vfork + exec, and posix_spawn (clone(CLONE_VM|CLONE_VFORK)).
 * The parent allocates before and after; the vfork child execs this program
 * with "child", which allocates in vchild_alloc and exits 4; posix_spawn
 * runs /bin/true.  Neither child is profiled.
 *   vparent_before  10 x malloc(1500), live         (exact with -i 1)
 *   vparent_after   12 x malloc(2500), 2 freed
 *   vchild_alloc    (exec'd child) never in the profile
 * Exits 8 on success, 1 if a child's status was wrong.
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

extern char **environ;
static volatile unsigned long sink;

/* A macro, so that malloc's caller is the function that uses it. */
#define FILL(dst, n)                                                           \
	do {                                                                   \
		unsigned char *p_ = malloc(n);                                 \
		if (p_) {                                                      \
			memset(p_, 7, n);                                      \
			sink += p_[(n)-1];                                     \
		}                                                              \
		(dst) = p_;                                                    \
	} while (0)

NOINLINE void vparent_before(void)
{
	static void *p[10];
	for (int i = 0; i < 10; i++)
		FILL(p[i], 1500);
}

NOINLINE void vparent_after(void)
{
	static void *p[12];
	for (int i = 0; i < 12; i++)
		FILL(p[i], 2500);
	free(p[0]);
	free(p[1]);
}

NOINLINE void vchild_alloc(void)
{
	static void *p[10];
	for (int i = 0; i < 10; i++)
		FILL(p[i], 900);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child")) {
		vchild_alloc();
		return 4;
	}
	vparent_before();
	fflush(stdout);
	pid_t pid = vfork();
	if (pid < 0) {
		perror("vfork");
		return 1;
	}
	if (pid == 0) {
		execl("/proc/self/exe", argv[0], "child", (char *)NULL);
		_exit(99);
	}
	int st = 0;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 4) {
		printf("vforker: vfork child status 0x%x, expected exit 4\n",
		       st);
		return 1;
	}
	printf("vforker: vfork child exited 4\n");

	char *targv[] = {"true", NULL};
	pid_t sp;
	int rc = posix_spawn(&sp, "/bin/true", NULL, NULL, targv, environ);
	if (rc != 0) {
		printf("vforker: posix_spawn failed: %s\n", strerror(rc));
		return 1;
	}
	if (waitpid(sp, &st, 0) != sp || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		printf("vforker: spawned child status 0x%x, expected exit 0\n",
		       st);
		return 1;
	}
	printf("vforker: spawned child exited 0\n");
	vparent_after();
	printf("vforker: done\n");
	return 8;
}
