/*
 * hostile_seccomp HOW ACTION: a program that sandboxes itself, then forks
 * (issue 18, case 8).  Installs a seccomp filter that forbids socket and
 * connect (ACTION kill: SECCOMP_RET_KILL_PROCESS; errno: EPERM), through
 * HOW = prctl (PR_SET_SECCOMP) or syscall (SYS_seccomp), then forks 5
 * children that each allocate and exit 0 (the last one execs /bin/true,
 * which starts under the filter), and waits for them.  A profiler
 * must make no call the filter forbids: bare, every child exits 0.
 * stdout: one "child I: exit N" line per child, then
 *   count hs_parent 1000 32000 0 0
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "safe_common.h"

static struct sc_count c_parent = {"hs_parent"};

static NOINLINE void hs_parent(void)
{
	void *p = malloc(32);
	sc_alloc(&c_parent, p, 32);
	sc_touch(p, 32);
	sc_free(&c_parent, 32);
	free(p);
}

static NOINLINE void hs_child(void)
{
	for (int i = 0; i < 100; i++) {
		void *p = malloc(64);
		sc_touch(p, 64);
		free(p);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr,
		        "usage: hostile_seccomp prctl|syscall kill|errno\n");
		return 2;
	}
	hs_child(); /* warm-up: attached and set up */
	unsigned action =
	        strcmp(argv[2], "kill") == 0
	                ? SECCOMP_RET_KILL_PROCESS
	                : SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
	struct sock_filter f[] = {
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	                 offsetof(struct seccomp_data, arch)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	                 offsetof(struct seccomp_data, nr)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 1, 0),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 1),
	        BPF_STMT(BPF_RET | BPF_K, action),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		perror("PR_SET_NO_NEW_PRIVS");
		return 77;
	}
	int rc = strcmp(argv[1], "prctl") == 0
	                 ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)
	                 : (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0,
	                                &prog);
	if (rc != 0) {
		perror("seccomp");
		return 77;
	}
	for (int i = 0; i < 5; i++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0) {
			hs_child();
			if (i == 4)
				execl("/bin/true", "true", (char *)NULL);
			_exit(0);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid)
			return 2;
		if (WIFEXITED(st))
			printf("child %d: exit %d\n", i, WEXITSTATUS(st));
		else
			printf("child %d: killed by signal %d\n", i,
			       WTERMSIG(st));
	}
	for (int i = 0; i < 1000; i++)
		hs_parent();
	sc_print(&c_parent);
	return 0;
}
