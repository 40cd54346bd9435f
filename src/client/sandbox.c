/*
 * Programs that sandbox themselves with seccomp.
 *
 * A seccomp filter may kill the process on any system call (a sandbox
 * typically forbids socket and connect), and it is inherited by every
 * child and kept across exec.  Recording needs no system call (the shared
 * region), but attaching does (socket, connect, sendmsg), and so do a
 * GROW, a named snapshot, following a fork, a late attach and the memory
 * figures read at exit.  So once a process may be under a filter, the
 * client makes none of those calls any more:
 *
 *   - a filter the program installs is seen as it is installed:
 *     prctl(PR_SET_SECCOMP) and syscall(SYS_seccomp) / syscall(SYS_prctl)
 *     (how glibc programs and libseccomp install one) are interposed by a
 *     few instructions that note it and jump to the real function with
 *     every register and stack argument as the program passed them (both
 *     are variadic; and a jump leaves no frame of ours under a raw clone
 *     or vfork made through syscall());
 *   - a process that starts under one (a child of a sandboxed program,
 *     after exec) is seen by the constructor in /proc/self/status: strict
 *     mode, or more filters ("Seccomp_filters:") than `heapprof record`
 *     had when it launched the command (HEAPPROF_SECCOMP_FILTERS): the
 *     filters of the environment (a container's default profile) are no
 *     sign, they were there for record too.  The loader has just opened
 *     and read the program's libraries, this one among them, so open and
 *     read are not forbidden at that point.
 *
 * A process under a filter that a session had reached keeps recording
 * (into memory); one that is not reached stays unprofiled, and the parent
 * that forked it counts it (sandboxed_children), so the profile says why.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "client/client.h"
#include "client/trampoline.h"
#include "layout/wire_v1.h"

HP_HIDDEN _Atomic int hp_sandboxed;

#define HP_STR_(x) #x
#define HP_STR(x)  HP_STR_(x)

static void note_filter(void)
{
	atomic_store_explicit(&hp_sandboxed, 1, memory_order_release);
}

long proc_status_field(const char *buf, const char *key)
{
	const char *p = strstr(buf, key);
	if (!p)
		return -1;
	p += strlen(key);
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	long v = 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (*p++ - '0');
	return v;
}

const char *proc_status_read(void)
{
	static char buf[8192];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(buf) - 1 &&
	       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return buf;
}

bool sandbox_at_start(void)
{
	const char *buf = proc_status_read();
	if (!buf)
		return false;
	long mode = proc_status_field(buf, "\nSeccomp:");
	if (mode <= 0)
		return false;
	/* Strict mode, or more filters than the collector that launched us
	 * had (it says how many in HP_ENV_SECCOMP): installed after it, by
	 * the program.  Its own filters (a container's) are no sign. */
	long filters = proc_status_field(buf, "\nSeccomp_filters:");
	const char *base = getenv(HP_ENV_SECCOMP);
	bool sandboxed = mode == 1 || (base && *base && filters >= 0 &&
	                               filters > strtol(base, NULL, 10));
	if (sandboxed)
		note_filter();
	return sandboxed;
}

#if defined(__x86_64__)
#define PR_SET_SECCOMP_ 22 /* <linux/prctl.h> */

/* The real functions, found at first use (NULL: not yet; the system call
 * itself is made then). */
HP_HIDDEN void *hp_next_syscall;
HP_HIDDEN void *hp_next_prctl;

/* The system call, as glibc's syscall() and prctl() make it: number in
 * rdi, arguments in rsi rdx rcx r8 r9 and on the stack; -1 and errno on
 * an error.  Reached by a jump with the program's registers. */
HP_HIDDEN long hp_syscall_raw(long nr, long a1, long a2, long a3, long a4,
                              long a5, long a6);
HP_HIDDEN long hp_syscall_raw(long nr, long a1, long a2, long a3, long a4,
                              long a5, long a6)
{
	long ret;
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	__asm__ volatile("syscall"
	                 : "=a"(ret)
	                 : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10),
	                   "r"(r8), "r"(r9)
	                 : "rcx", "r11", "memory");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* prctl's own number for hp_prctl_raw (option in rdi: shift by one). */
HP_HIDDEN int hp_prctl_raw(int option, unsigned long a2, unsigned long a3,
                           unsigned long a4, unsigned long a5);
HP_HIDDEN int hp_prctl_raw(int option, unsigned long a2, unsigned long a3,
                           unsigned long a4, unsigned long a5)
{
	return (int)hp_syscall_raw(SYS_prctl, option, (long)a2, (long)a3,
	                           (long)a4, (long)a5, 0);
}

/* Called from the trampolines when the call installs a filter, or before
 * the real function is known: notes the filter, finds the real function
 * (the raw call if there is none).  Returns what to jump to. */
HP_HIDDEN void *hp_syscall_note(long nr, long a1);
HP_HIDDEN void *hp_syscall_note(long nr, long a1)
{
	int saved = errno;
	if (nr == SYS_seccomp || (nr == SYS_prctl && a1 == PR_SET_SECCOMP_))
		note_filter();
	void *f = __atomic_load_n(&hp_next_syscall, __ATOMIC_ACQUIRE);
	if (!f) {
		f = dlsym(RTLD_NEXT, "syscall");
		if (f)
			__atomic_store_n(&hp_next_syscall, f, __ATOMIC_RELEASE);
	}
	errno = saved;
	return f ? f : (void *)hp_syscall_raw;
}

HP_HIDDEN void *hp_prctl_note(int option);
HP_HIDDEN void *hp_prctl_note(int option)
{
	int saved = errno;
	if (option == PR_SET_SECCOMP_)
		note_filter();
	void *f = __atomic_load_n(&hp_next_prctl, __ATOMIC_ACQUIRE);
	if (!f) {
		f = dlsym(RTLD_NEXT, "prctl");
		if (f)
			__atomic_store_n(&hp_next_prctl, f, __ATOMIC_RELEASE);
	}
	errno = saved;
	return f ? f : (void *)hp_prctl_raw;
}

void sandbox_init(void)
{
	/* In the constructor, a normal context: later calls (one in a
	 * signal handler among them) take the fast path, with no dlsym. */
	if (!__atomic_load_n(&hp_next_syscall, __ATOMIC_ACQUIRE))
		__atomic_store_n(&hp_next_syscall, dlsym(RTLD_NEXT, "syscall"),
		                 __ATOMIC_RELEASE);
	if (!__atomic_load_n(&hp_next_prctl, __ATOMIC_ACQUIRE))
		__atomic_store_n(&hp_next_prctl, dlsym(RTLD_NEXT, "prctl"),
		                 __ATOMIC_RELEASE);
}

/* syscall(number, ...): a filter's installation, or the first call, go
 * the slow way; every other call is five instructions and a jump. */
__asm__(".text\n"
        ".globl syscall\n"
        ".type syscall, @function\n"
        "syscall:\n"
        ".cfi_startproc\n"
        "cmp $" HP_STR(
                SYS_seccomp) ", %rdi\n"
                             "je 1f\n"
                             "cmp $" HP_STR(
                                     SYS_prctl) ", %rdi\n"
                                                "je 1f\n"
                                                "mov "
                                                "hp_next_syscall(%rip), "
                                                "%r11\n"
                                                "test %r11, %r11\n"
                                                "jz 1f\n"
                                                "jmp *%r11\n"
                                                "1:\n" HP_TRAMPOLINE_TO_NOTE(
                                                        "hp_syscall_"
                                                        "note") ".cfi_"
                                                                "endproc"
                                                                "\n"
                                                                ".size "
                                                                "syscall"
                                                                ", "
                                                                ".-"
                                                                "syscall"
                                                                "\n");

/* prctl(option, ...) */
__asm__(".text\n"
        ".globl prctl\n"
        ".type prctl, @function\n"
        "prctl:\n"
        ".cfi_startproc\n"
        "cmp $" HP_STR(
                PR_SET_SECCOMP_) ", %edi\n"
                                 "je 1f\n"
                                 "mov hp_next_prctl(%rip), %r11\n"
                                 "test %r11, %r11\n"
                                 "jz 1f\n"
                                 "jmp *%r11\n"
                                 "1:\n" HP_TRAMPOLINE_TO_NOTE(
                                         "hp_prctl_note") ".cfi_endproc\n"
                                                          ".size prctl, "
                                                          ".-prctl\n");
#else
void sandbox_init(void)
{
}
#endif
