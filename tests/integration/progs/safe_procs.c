/*
 * safe_procs MODE: processes made while profiling (test_safety.sh).
 *   fork      fork without exec, 20 times: each child allocates, frees
 *             blocks of the parent's, prints and exits 3 (its changes are
 *             in its own copy of the heap, never in the parent's profile)
 *   forkexec  fork then exec of this program ("child"), 10 times
 *   vfork     vfork + exec, and posix_spawn (glibc: clone(CLONE_VM |
 *             CLONE_VFORK)) of this program, 10 times each
 *   clonevm   raw clone() with CLONE_VM: (a) CLONE_VM|CLONE_VFORK then exec,
 *             as posix_spawn does; (b) CLONE_VM|CLONE_VFORK where the child
 *             mallocs and frees before _exit: the parent is suspended, so
 *             the child runs on its thread's TLS alone, and its blocks are
 *             real blocks of the shared heap; (c) CLONE_VM children that
 *             share the address space and the parent's TLS pointer while
 *             the parent allocates: they touch no libc and no TLS, only a
 *             shared counter, and leave with the raw exit system call
 *   rawfork   fork by the raw clone system call (no pthread_atfork
 *             handlers run), 10 times: the children allocate and free the
 *             parent's blocks in their own copy of the heap
 * The parent allocates before and after in pp_before / pp_after (exact at
 * -i 1); children's allocations are in pc_child, never in the profile.
 * Prints the children's lines, then the count lines; exits 21.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "safe_common.h"

extern char **environ;

static struct sc_count c_before = {"pp_before"}, c_after = {"pp_after"},
                       c_child = {"pc_child"};
static void *before[40];

NOINLINE void pp_before(void)
{
	for (int i = 0; i < 40; i++) {
		before[i] = malloc(700 + i);
		sc_touch(before[i], 700 + i);
		sc_alloc(&c_before, before[i], 700 + i);
	}
	/* The parent frees its first 10. */
	for (int i = 0; i < 10; i++) {
		free(before[i]);
		sc_free(&c_before, 700 + i);
		before[i] = NULL;
	}
}

NOINLINE void pp_after(void)
{
	static void *p[25];
	for (int i = 0; i < 25; i++) {
		p[i] = calloc(3, 100 + i);
		sc_alloc(&c_after, p[i], 3 * (100 + i));
	}
	for (int i = 0; i < 5; i++) {
		free(p[i]);
		sc_free(&c_after, 3 * (100 + i));
	}
}

static struct sc_count c_small = {"pp_small"};

NOINLINE void pp_small(void)
{
	for (int i = 0; i < 50; i++) {
		void *p = malloc(32 + i);
		sc_touch(p, 32 + i);
		sc_alloc(&c_small, p, 32 + i);
		free(p);
		sc_free(&c_small, 32 + i);
	}
}

/* In a child: allocate, free the parent's blocks (in the child's copy of
 * the heap), return a checksum that does not depend on addresses. */
NOINLINE int pc_child(int k)
{
	void *p[30];
	int sum = 0;
	for (int i = 0; i < 30; i++) {
		p[i] = malloc(64 * (i + 1));
		sc_touch(p[i], 64 * (i + 1));
		sum += p[i] != NULL;
	}
	for (int i = 10; i < 40; i++) {
		free(before[i]);
		before[i] = NULL;
	}
	for (int i = 0; i < 30; i += 2)
		free(p[i]);
	return sum + k;
}

static int check_child(const char *what, pid_t pid, int want)
{
	int st = 0;
	pid_t r;
	do
		r = waitpid(pid, &st, 0);
	while (r < 0 && errno == EINTR);
	if (r != pid || !WIFEXITED(st) || WEXITSTATUS(st) != want) {
		printf("%s: child status 0x%x, expected exit %d\n", what, st,
		       want);
		return 1;
	}
	return 0;
}

static int do_fork(void)
{
	int bad = 0;
	for (int k = 0; k < 20; k++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			printf("fork child %d sum %d\n", k, pc_child(k));
			fflush(stdout);
			_exit(3);
		}
		bad |= check_child("fork", pid, 3);
	}
	return bad;
}

static int do_forkexec(const char *self)
{
	int bad = 0;
	for (int k = 0; k < 10; k++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			char arg[16];
			snprintf(arg, sizeof arg, "%d", k);
			execl(self, "safe_procs", "child", arg, (char *)NULL);
			_exit(99);
		}
		bad |= check_child("forkexec", pid, 4);
	}
	return bad;
}

static int do_vfork(const char *self)
{
	int bad = 0;
	for (int k = 0; k < 10; k++) {
		char arg[16];
		snprintf(arg, sizeof arg, "%d", k);
		fflush(stdout);
		pid_t pid = vfork();
		if (pid < 0) {
			perror("vfork");
			return 1;
		}
		if (pid == 0) {
			execl(self, "safe_procs", "child", arg, (char *)NULL);
			_exit(99);
		}
		bad |= check_child("vfork", pid, 4);
		char *argv[] = {"safe_procs", "child", arg, NULL};
		if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0) {
			printf("posix_spawn failed\n");
			return 1;
		}
		bad |= check_child("posix_spawn", pid, 4);
	}
	return bad;
}

/* ---- raw clone ------------------------------------------------------ */

static struct sc_count c_vm = {"pv_vmchild"};

/* In a CLONE_VM|CLONE_VFORK child: the heap is the parent's, so these are
 * real allocations of the profiled process; all freed. */
NOINLINE int pv_vmchild(int k)
{
	void *p[8];
	int sum = 0;
	for (int i = 0; i < 8; i++) {
		p[i] = malloc(200 + 8 * i);
		sc_touch(p[i], 200 + 8 * i);
		sc_alloc(&c_vm, p[i], 200 + 8 * i);
		sum += p[i] != NULL;
	}
	for (int i = 0; i < 8; i++) {
		free(p[i]);
		sc_free(&c_vm, 200 + 8 * i);
	}
	return sum + k;
}

struct clone_arg {
	const char *self;
	int k;
	int sum;
};

static int clone_exec(void *v)
{
	struct clone_arg *a = v;
	char arg[16];
	/* (snprintf of a small int: no allocation.) */
	snprintf(arg, sizeof arg, "%d", a->k);
	char *argv[] = {"safe_procs", "child", arg, NULL};
	execve(a->self, argv, environ);
	_exit(99);
}

static int clone_alloc(void *v)
{
	struct clone_arg *a = v;
	a->sum = pv_vmchild(a->k);
	_exit(5);
}

/* Runs in a CLONE_VM child with the parent's TLS pointer, concurrently
 * with the parent: no libc, no TLS, no stack protector data. */
static volatile long vm_shared;

static int clone_spin(void *v)
{
	struct clone_arg *a = v;
	for (int i = 0; i < 100000; i++)
		__atomic_fetch_add(&vm_shared, 1, __ATOMIC_RELAXED);
	a->sum = 1;
	syscall(SYS_exit, 6);
	return 0;
}

#define CSTACK (256 * 1024)

static int do_clonevm(const char *self)
{
	int bad = 0;
	char *stk = mmap(NULL, CSTACK, PROT_READ | PROT_WRITE,
	                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stk == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (int k = 0; k < 10; k++) {
		struct clone_arg a = {self, k, 0};
		fflush(stdout);
		/* (a) as posix_spawn: the child only execs. */
		pid_t pid = clone(clone_exec, stk + CSTACK,
		                  CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
		if (pid < 0) {
			perror("clone");
			return 1;
		}
		bad |= check_child("clone exec", pid, 4);
		/* (b) the child allocates while the parent is suspended. */
		pid = clone(clone_alloc, stk + CSTACK,
		            CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
		if (pid < 0) {
			perror("clone");
			return 1;
		}
		bad |= check_child("clone alloc", pid, 5);
		printf("clone alloc %d sum %d\n", k, a.sum);
		/* (c) a concurrent CLONE_VM child while the parent
		 * allocates. */
		a.sum = 0;
		pid = clone(clone_spin, stk + CSTACK, CLONE_VM | SIGCHLD, &a);
		if (pid < 0) {
			perror("clone");
			return 1;
		}
		pp_small();
		bad |= check_child("clone spin", pid, 6);
		printf("clone spin %d done %d\n", k, a.sum);
	}
	printf("clone spin total %ld\n", vm_shared);
	munmap(stk, CSTACK);
	return bad;
}

/* fork by the raw system call: glibc's fork handlers (and the profiler's
 * pthread_atfork handler) do not run in the child. */
static int do_rawfork(void)
{
	int bad = 0;
	for (int k = 0; k < 10; k++) {
		fflush(stdout);
		long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (pid < 0) {
			perror("clone");
			return 1;
		}
		if (pid == 0) {
			printf("rawfork child %d sum %d\n", k, pc_child(k));
			fflush(stdout);
			_exit(3);
		}
		bad |= check_child("rawfork", (pid_t)pid, 3);
	}
	return bad;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child")) {
		int k = atoi(argv[2]);
		printf("exec child %d sum %d\n", k, pc_child(k));
		return 4;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: safe_procs "
		                "fork|forkexec|vfork|clonevm|rawfork\n");
		return 2;
	}
	const char *self = "/proc/self/exe";
	char buf[4096];
	ssize_t n = readlink(self, buf, sizeof buf - 1);
	if (n > 0) {
		buf[n] = 0;
		self = buf;
	}
	pp_before();
	int bad;
	if (!strcmp(argv[1], "fork"))
		bad = do_fork();
	else if (!strcmp(argv[1], "forkexec"))
		bad = do_forkexec(self);
	else if (!strcmp(argv[1], "vfork"))
		bad = do_vfork(self);
	else if (!strcmp(argv[1], "clonevm"))
		bad = do_clonevm(self);
	else if (!strcmp(argv[1], "rawfork"))
		bad = do_rawfork();
	else {
		fprintf(stderr, "safe_procs: unknown mode %s\n", argv[1]);
		return 2;
	}
	pp_after();
	sc_print(&c_before);
	sc_print(&c_after);
	sc_print(&c_child);
	sc_print(&c_small);
	sc_print(&c_vm);
	return bad ? 1 : 21;
}
