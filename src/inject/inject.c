/*
 * The injector: see inject.h, and docs/ATTACH.md for why each rule is
 * there.  In short:
 *
 *  - PTRACE_SEIZE + PTRACE_INTERRUPT, one thread at a time, never
 *    PTRACE_ATTACH (its SIGSTOP races with the program's signals) and
 *    never PTRACE_O_EXITKILL (a crash of heapprof must not kill the
 *    target);
 *  - a thread is used only if its rip and every word of its live stack
 *    are outside the deny ranges (the loader's code, libc's allocator,
 *    fork, dl* and pthread_create/exit entry points, __restore_rt); the
 *    others are let go before anything runs;
 *  - the call runs on the thread's own stack below the red zone, returns
 *    to address 0 and is caught as the SIGSEGV at rip 0; orig_rax is -1
 *    meanwhile so that the kernel's syscall-restart fix-up leaves our rip
 *    alone; every signal is blocked (PTRACE_SETSIGMASK) and one that
 *    arrives anyway is held and re-delivered at the detach;
 *  - at the end the registers, the extended (FPU/SSE/AVX) state and the
 *    mask are put back verbatim, so the kernel restarts the interrupted
 *    system call exactly as it would have; the calls that return EINTR to
 *    any stop (epoll_wait, semop, sigtimedwait...) are issued again.
 */
#include "layout/region.h"
#include "inject/inject.h"

#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject/elf.h"
#include <elfutils/libdwfl.h>
#include "util/proc.h"
#include "util/clock.h"

#define DEFAULT_BUDGET_MS 50
#define DEFAULT_CALL_MS   10000
#define RED_ZONE          128
#define STACK_SCAN_MAX    (256 * 1024)
#define STACK_ROOM_MIN    (64 * 1024)
#define SCRATCH_MAX       (16 * 1024)
#define MAX_DENY          96
#define MAX_HELD          8
#define MAX_TIDS          512
#define XSTATE_MAX        (64 * 1024)
/* The stop of an interrupted thread can take a scheduler round trip on a
 * busy machine; this bounds it beyond any budget (a thread in D state). */
#define STOP_WAIT_MS       2000
#define PATH_IN_TARGET_MAX (PATH_MAX + 64)

#ifndef RTLD_NOW
#define RTLD_NOW 2
#endif

struct range {
	uint64_t lo, hi;
	const char *what;
	bool alloc; /* a function of the malloc family (alloc_free_call) */
};

struct seg {
	uint64_t start, end, offset;
	unsigned long inode;
	char perms[8];
	char *path;
};

struct tmaps {
	struct seg *v;
	size_t n, cap;
};

struct inject_ctx {
	pid_t pid, tid;
	struct inject_opts o;
	struct tmaps m;
	struct ielf libc;
	uint64_t libc_bias;
	struct range deny[MAX_DENY];
	int ndeny;
	struct user_regs_struct saved;
	uint8_t *xstate;
	size_t xlen;
	int xnote;
	uint64_t mask;
	bool mask_set;
	uint64_t scratch;   /* lowest byte we used below the red zone */
	uint64_t stack_low; /* the bottom of the thread's stack mapping */
	bool in_sigdeliv;   /* the stop is the SIGSEGV of a returned call */
	bool reissue;       /* an EINTR-only call: issue it again */
	/* How long the chosen thread had waited in its call when stopped
	 * (sleep_elapsed), cut from its timeout at the reissue; the other
	 * threads' (inject_stop_others) likewise. */
	uint64_t elapsed_ns;
	bool elapsed_known;
	uint64_t others_elapsed[MAX_TIDS];
	bool others_known[MAX_TIDS];
	/* Where a reissued call's new timeout (a struct timespec) may be
	 * written in the target: heapprof's library's, once loaded
	 * (inject_set_reissue_area); 0: none (such a call keeps its whole
	 * timeout). */
	uint64_t reissue_area;
	unsigned reissue_next;
	int reissue_cut_ms; /* the chosen thread's timeout cut by this */
	bool reissue_full;  /* a timed call reissued with its whole timeout */
	uint64_t tmpblk;    /* a temporary-mask call's own mask (SigBlk) */
	bool stuck;         /* a call did not return in time */
	bool gone;          /* the thread exited */
	siginfo_t held[MAX_HELD];
	int nheld;
	uint64_t *stackbuf;
	/* The thread's errno (its address, __errno_location's answer), put
	 * back at the detach: the interrupted code may be about to read it,
	 * and dlopen and our calls set it. */
	uint64_t errno_addr;
	int errno_val;
	double t0, t_seize, t_safe;
	double t_stop;   /* the last thread tried stopped (the chosen one's) */
	int entry_traps; /* threads run to an allocator entry */
	int unwound;     /* stacks checked by unwinding, not scanning */
	/* The target's objects for libdw's unwinder (unwind_check): NULL if
	 * it could not be set up (then the stack is scanned word by word). */
	Dwfl *dwfl;
	pid_t unw_tid;
	const struct user_regs_struct *unw_regs;
	int tries, threads;
	/* inject_stop_others: the threads it stopped, and while it checks
	 * them, denied() looks at the options' extra range only. */
	pid_t others[MAX_TIDS];
	int nothers;
	bool extra_only;
};

/* ---- small helpers ---------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static int fail(char *why,
                                                      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, INJECT_WHY, fmt, ap);
	va_end(ap);
	return -1;
}

static void pause_us(long us)
{
	struct timespec t = {0, us * 1000};
	nanosleep(&t, NULL);
}

/* waitpid for one thread with a bound: 0 and *st, or -1 with errno
 * (ETIMEDOUT, ECHILD...). */
static int wait_tid(pid_t tid, int *st, int timeout_ms)
{
	double end = hp_mono_msf() + timeout_ms;
	long us = 10;
	for (;;) {
		pid_t r = waitpid(tid, st, __WALL | WNOHANG);
		if (r == tid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (hp_mono_msf() >= end) {
			errno = ETIMEDOUT;
			return -1;
		}
		pause_us(us);
		if (us < 200)
			us *= 2;
	}
}

/* ---- the target's mappings ------------------------------------------- */

static void maps_free(struct tmaps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static int maps_add(void *ctx, const struct proc_map *pm)
{
	struct tmaps *m = ctx;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		struct seg *v = realloc(m->v, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		m->v = v;
		m->cap = cap;
	}
	struct seg *s = &m->v[m->n];
	s->start = pm->start;
	s->end = pm->end;
	s->offset = pm->offset;
	s->inode = pm->inode;
	snprintf(s->perms, sizeof(s->perms), "%s", pm->perms);
	s->path = strdup(pm->path);
	if (!s->path)
		return ENOMEM;
	m->n++;
	return 0;
}

static int maps_load(pid_t pid, struct tmaps *m, char *why)
{
	maps_free(m);
	int rc = proc_maps(pid, maps_add, m);
	if (rc) {
		int err = rc < 0 ? errno : rc;
		maps_free(m);
		return fail(why, "cannot read /proc/%d/maps: %s", (int)pid,
		            strerror(err));
	}
	return 0;
}

/* The first file-backed mapping at offset 0 whose file is named base (or
 * whose name starts with base when prefix). */
static const struct seg *maps_lib(const struct tmaps *m, const char *base,
                                  bool prefix)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct seg *s = &m->v[i];
		if (s->path[0] != '/' || s->offset != 0)
			continue;
		const char *b = hp_base_name(s->path);
		if (prefix ? !strncmp(b, base, strlen(base)) : !strcmp(b, base))
			return s;
	}
	return NULL;
}

static const struct seg *maps_at(const struct tmaps *m, uint64_t addr)
{
	for (size_t i = 0; i < m->n; i++)
		if (addr >= m->v[i].start && addr < m->v[i].end)
			return &m->v[i];
	return NULL;
}

/* A path through which we can read the file behind s as the target sees
 * it: /proc/PID/root/PATH, else /proc/PID/map_files/START-END (a file
 * deleted or replaced since it was mapped). */
static void seg_file(pid_t pid, const struct seg *s, char *buf, size_t len)
{
	const char *del = strstr(s->path, " (deleted)");
	if (s->path[0] == '/' && !del) {
		snprintf(buf, len, "/proc/%d/root%s", (int)pid, s->path);
		struct stat sb;
		if (stat(buf, &sb) == 0 && sb.st_ino == s->inode)
			return;
	}
	snprintf(buf, len, "/proc/%d/map_files/%llx-%llx", (int)pid,
	         (unsigned long long)s->start, (unsigned long long)s->end);
}

/* ---- refusals ------------------------------------------------------- */

static bool have_cap_sys_ptrace(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) != 0)
		return false;
	return (d[CAP_SYS_PTRACE / 32].effective >> (CAP_SYS_PTRACE % 32)) & 1;
}

static int yama_scope(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (!f)
		return 0; /* no Yama */
	int v = 0;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static bool is_our_descendant(pid_t pid)
{
	pid_t self = getpid();
	for (int i = 0; i < 4096 && pid > 1; i++) {
		pid = proc_ppid(pid);
		if (pid == self)
			return true;
	}
	return false;
}

/* The decision for Yama's ptrace_scope, apart so that it can be tested
 * on a machine without Yama. */
int inject_yama_refusal(int scope, bool cap, bool descendant, pid_t pid,
                        char *why)
{
	if (scope == 1 && !cap && !descendant)
		return fail(
		        why,
		        "Yama ptrace_scope is 1: only an ancestor of %d (or "
		        "a process with CAP_SYS_PTRACE) may trace it; run "
		        "heapprof as root or set "
		        "/proc/sys/kernel/yama/ptrace_scope to 0",
		        (int)pid);
	if (scope == 2 && !cap)
		return fail(why,
		            "Yama ptrace_scope is 2: tracing %d needs "
		            "CAP_SYS_PTRACE (run heapprof as root)",
		            (int)pid);
	if (scope >= 3)
		return fail(why,
		            "Yama ptrace_scope is 3: no process may trace %d "
		            "until the next boot",
		            (int)pid);
	return 0;
}

/* The executable's ELF header: class, machine, loader. */
int inject_check_exe(const char *path, pid_t pid, char *why)
{
	struct ielf e;
	char err[256];
	if (ielf_open(path, &e, err, sizeof(err)))
		return fail(why, "cannot read the executable of %d: %s",
		            (int)pid, err);
	int rc = 0;
	if (e.cls == ELFCLASS32 && e.machine == EM_X86_64)
		rc = fail(why,
		          "%d is an x32 program (32-bit pointers on x86-64): "
		          "not supported",
		          (int)pid);
	else if (e.cls == ELFCLASS32)
		rc = fail(why, "%d is a 32-bit program: not supported",
		          (int)pid);
	else if (e.machine != EM_X86_64)
		rc = fail(why,
		          "%d is not an x86-64 program (ELF machine %d): not "
		          "supported",
		          (int)pid, e.machine);
	else if (!e.has_interp)
		rc = fail(why,
		          "%d is statically linked (no dynamic loader): a "
		          "library cannot be loaded into it",
		          (int)pid);
	ielf_close(&e);
	return rc;
}

/* libc.so.6 of glibc 2.34 or later, whose dlopen we call. */
static int check_libc(pid_t pid, const struct tmaps *m, char *why)
{
	if (maps_lib(m, "ld-musl", true))
		return fail(why,
		            "%d uses musl libc: only glibc 2.34 or later is "
		            "supported",
		            (int)pid);
	if (!maps_lib(m, "ld-linux-x86-64.so.2", false))
		return fail(why,
		            "%d has no dynamic loader (ld-linux-x86-64.so.2) "
		            "mapped",
		            (int)pid);
	const struct seg *s = maps_lib(m, "libc.so.6", false);
	if (!s)
		return fail(why,
		            "%d has no glibc (libc.so.6) mapped: only glibc "
		            "2.34 or later is supported",
		            (int)pid);
	char path[PATH_IN_TARGET_MAX], err[256];
	seg_file(pid, s, path, sizeof(path));
	struct ielf e;
	if (ielf_open(path, &e, err, sizeof(err)))
		return fail(why, "cannot read the libc of %d: %s", (int)pid,
		            err);
	uint64_t v;
	int rc = 0;
	if (!ielf_has_version(&e, "GLIBC_2.34") ||
	    ielf_sym(&e, "dlopen", &v, NULL, NULL))
		rc = fail(
		        why,
		        "%d runs a glibc older than 2.34 (%s has no dlopen of "
		        "its own): not supported",
		        (int)pid, s->path);
	ielf_close(&e);
	return rc;
}

int inject_check(pid_t pid, char *why)
{
#ifndef __x86_64__
	return fail(why, "injection is only implemented for x86-64");
#endif
	struct proc_status st;
	if (pid <= 0 || proc_status(pid, &st))
		return fail(why, "no process %d", (int)pid);
	if (pid == getpid())
		return fail(why, "%d is heapprof itself", (int)pid);
	if (st.state == 'Z' || st.state == 'X')
		return fail(why, "%d is a zombie (it has exited)", (int)pid);
	bool cap = have_cap_sys_ptrace();
	if (!cap && (st.have & PROC_HAVE_UID)) {
		uid_t me = getuid();
		for (int i = 0; i < 3; i++)
			if (st.uid[i] != me)
				return fail(
				        why,
				        "%d runs as uid %u and we are uid %u "
				        "without CAP_SYS_PTRACE: run heapprof "
				        "as that user or as root",
				        (int)pid, (unsigned)st.uid[i],
				        (unsigned)me);
	}
	if (!cap && (st.have & PROC_HAVE_GID)) {
		gid_t me = getgid();
		for (int i = 0; i < 3; i++)
			if (st.gid[i] != me)
				return fail(
				        why,
				        "%d runs as gid %u and we are gid %u "
				        "without CAP_SYS_PTRACE: run heapprof "
				        "as that user or as root",
				        (int)pid, (unsigned)st.gid[i],
				        (unsigned)me);
	}
	uid_t owner;
	if (!cap && proc_owner(pid, &owner) == 0 && owner != getuid())
		return fail(why,
		            "%d is not dumpable (setuid, file capabilities or "
		            "PR_SET_DUMPABLE 0): only a tracer with "
		            "CAP_SYS_PTRACE may trace it",
		            (int)pid);
	if (inject_yama_refusal(yama_scope(), cap, is_our_descendant(pid), pid,
	                        why))
		return -1;
	if (st.tracer) {
		char comm[64];
		proc_comm(st.tracer, comm, sizeof(comm));
		return fail(why,
		            "%d is already traced by %d (%s): detach the "
		            "debugger or strace first",
		            (int)pid, (int)st.tracer, comm[0] ? comm : "?");
	}
	if (st.seccomp_mode == 1)
		return fail(why,
		            "%d runs in seccomp strict mode: it may make no "
		            "system call the injection needs",
		            (int)pid);
	if (st.seccomp_mode == 2 || st.seccomp > 0)
		return fail(
		        why,
		        "%d runs under %ld seccomp filter(s): one could kill "
		        "it on a system call the injection makes (openat, "
		        "mmap...); not injected",
		        (int)pid, st.seccomp > 0 ? st.seccomp : 1L);
	char exe[64];
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if (inject_check_exe(exe, pid, why))
		return -1;
	struct tmaps m = {0};
	if (maps_load(pid, &m, why))
		return -1;
	int rc = check_libc(pid, &m, why);
	maps_free(&m);
	return rc;
}

int inject_check_path(pid_t pid, const char *path, char *why)
{
	struct stat ours, theirs;
	if (stat(path, &ours) < 0)
		return fail(why, "cannot use %s: %s", path, strerror(errno));
	char in[PATH_IN_TARGET_MAX];
	snprintf(in, sizeof(in), "/proc/%d/root%s", (int)pid, path);
	char ns_ours[64] = "", ns_theirs[64] = "", nsp[64];
	snprintf(nsp, sizeof(nsp), "/proc/%d/ns/mnt", (int)pid);
	ssize_t n = readlink("/proc/self/ns/mnt", ns_ours, sizeof(ns_ours) - 1);
	if (n > 0)
		ns_ours[n] = '\0';
	n = readlink(nsp, ns_theirs, sizeof(ns_theirs) - 1);
	if (n > 0)
		ns_theirs[n] = '\0';
	const char *where = strcmp(ns_ours, ns_theirs)
	                            ? "its own mount namespace"
	                            : "its root directory";
	if (stat(in, &theirs) < 0)
		return fail(why,
		            "the library %s is not reachable from %d (%s): %s "
		            "there",
		            path, (int)pid, where,
		            errno == ENOENT ? "no such file" : strerror(errno));
	if (theirs.st_dev != ours.st_dev || theirs.st_ino != ours.st_ino)
		return fail(
		        why,
		        "the library %s is not reachable from %d (%s): that "
		        "path is another file there",
		        path, (int)pid, where);
	return 0;
}

/* ---- deny ranges ----------------------------------------------------- */

static const char *const deny_names[] = {
        "malloc",
        "free",
        "calloc",
        "realloc",
        "memalign",
        "posix_memalign",
        "aligned_alloc",
        "valloc",
        "pvalloc",
        "malloc_usable_size",
        "malloc_trim",
        "mallinfo",
        "mallinfo2",
        "malloc_info",
        "malloc_stats",
        "mallopt",
        "reallocarray",
        "fork",
        "_Fork",
        "vfork",
        "dl_iterate_phdr",
        "dlopen",
        "dlmopen",
        "dlclose",
        "dlsym",
        "dlvsym",
        "dladdr",
        "dladdr1",
        "dlinfo",
        "dlerror",
        "pthread_create",
        "pthread_exit",
        NULL,
};

struct deny_add {
	struct inject_ctx *c;
	const char *name;
};

static void add_range(struct inject_ctx *c, uint64_t lo, uint64_t hi,
                      const char *what)
{
	if (c->ndeny < MAX_DENY && hi > lo)
		c->deny[c->ndeny++] = (struct range){lo, hi, what, false};
}

/* The malloc family of deny_names (up to "reallocarray"). */
#define N_ALLOC_NAMES 17

static void deny_sym(void *ctx, uint64_t value, uint64_t size)
{
	struct deny_add *d = ctx;
	add_range(d->c, d->c->libc_bias + value,
	          d->c->libc_bias + value + (size ? size : 1), d->name);
	for (int k = 0; k < N_ALLOC_NAMES; k++)
		if (d->name == deny_names[k] && d->c->ndeny)
			d->c->deny[d->c->ndeny - 1].alloc = true;
}

/*
 * System calls no allocator makes (glibc's, jemalloc, tcmalloc: they
 * take locks with futex and get memory with mmap, munmap, madvise, brk;
 * jemalloc reads a /proc file once at its start): a thread blocked in
 * one of these is not inside malloc or free, whatever its stack holds.
 * Stale words of earlier calls are common there (bash waiting in wait4
 * keeps an old return address into free in a frame), and would make a
 * sleeping thread look unsafe for ever.  The loader's ranges, fork's
 * and a signal frame's (__restore_rt) still count.
 */
static bool alloc_free_call(long nr)
{
	switch (nr) {
	case SYS_wait4:
	case SYS_waitid:
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
	case SYS_poll:
	case SYS_ppoll:
	case SYS_select:
	case SYS_pselect6:
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
	case SYS_pause:
	case SYS_rt_sigsuspend:
	case SYS_rt_sigtimedwait:
	case SYS_accept:
	case SYS_accept4:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_recvmmsg:
	case SYS_sendto:
	case SYS_sendmsg:
	case SYS_connect:
	case SYS_msgrcv:
	case SYS_msgsnd:
	case SYS_semop:
	case SYS_semtimedop:
	case SYS_io_getevents:
		return true;
	default:
		return false;
	}
}

static int read_r_debug(pid_t pid, const struct tmaps *m, uint64_t *r_debug,
                        char *why);

/* ---- the precise stack check (libdw's CFI unwinder) ------------------- */

/*
 * Stale words are common on a stack (an old return address into free, or
 * an old signal frame's __restore_rt, in a slot of a live frame that was
 * never written again: bash waiting in wait4 shows both), and a word-by-
 * word scan takes each for a live frame: such a thread looks unsafe for
 * ever.  So the stopped thread is unwound by libdw with the target's own
 * CFI (.eh_frame of each object, read through /proc/PID/root at the load
 * bias the loader's list gives), and only its frames count.  An unwind
 * that does not reach the outermost frame (code without CFI, the vdso, a
 * read that failed) falls back to the scan: never less careful than it.
 */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                        Dwarf_Addr base, const char *file_name,
                        const char *debuglink_file, GElf_Word debuglink_crc,
                        char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1; /* .eh_frame is enough; no search, no debuginfod */
}

static const Dwfl_Callbacks unwind_dwfl_callbacks = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = no_debuginfo,
};

static void unwind_setup(struct inject_ctx *c)
{
	c->dwfl = dwfl_begin(&unwind_dwfl_callbacks);
	if (c->dwfl)
		dwfl_report_begin(c->dwfl);
}

static bool unw_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_arg)
{
	(void)dwfl;
	struct inject_ctx *c = arg;
	*thread_arg = c;
	return tid == c->unw_tid;
}

static pid_t unw_next_thread(Dwfl *dwfl, void *arg, void **thread_arg)
{
	(void)dwfl, (void)arg, (void)thread_arg;
	return 0;
}

static bool unw_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result,
                            void *arg)
{
	(void)dwfl;
	struct inject_ctx *c = arg;
	struct iovec l = {result, sizeof(*result)};
	struct iovec rm = {(void *)(uintptr_t)addr, sizeof(*result)};
	return process_vm_readv(c->unw_tid, &l, 1, &rm, 1, 0) ==
	       (ssize_t)sizeof(*result);
}

static bool unw_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	const struct user_regs_struct *r = ((struct inject_ctx *)arg)->unw_regs;
	/* DWARF's x86-64 numbering: rax rdx rcx rbx rsi rdi rbp rsp r8..r15,
	 * then the return address column (rip). */
	Dwarf_Word regs[17] = {r->rax, r->rdx, r->rcx, r->rbx, r->rsi, r->rdi,
	                       r->rbp, r->rsp, r->r8,  r->r9,  r->r10, r->r11,
	                       r->r12, r->r13, r->r14, r->r15, r->rip};
	if (!dwfl_thread_state_registers(thread, 0, 17, regs))
		return false;
	dwfl_thread_state_register_pc(thread, r->rip);
	return true;
}

static const Dwfl_Thread_Callbacks unwind_callbacks = {
        .next_thread = unw_next_thread,
        .get_thread = unw_get_thread,
        .memory_read = unw_memory_read,
        .set_initial_registers = unw_set_initial_registers,
};

static const struct range *denied(const struct inject_ctx *c, uint64_t a);

struct unw_walk {
	struct inject_ctx *c;
	const struct range *hit;
	bool no_alloc;
	int frames;
};

static int unw_frame(Dwfl_Frame *f, void *arg)
{
	struct unw_walk *w = arg;
	Dwarf_Addr pc;
	bool act;
	if (!dwfl_frame_pc(f, &pc, &act))
		return DWARF_CB_ABORT;
	if (w->frames++ == 0)
		return DWARF_CB_OK; /* rip: checked already */
	/* A return address (and the byte before it: a call that ends its
	 * function, and the nop glibc puts before __restore_rt). */
	const struct range *d = denied(w->c, pc);
	if (!d && !act)
		d = denied(w->c, pc - 1);
	if (d && d->alloc && w->no_alloc)
		d = NULL;
	if (d) {
		w->hit = d;
		return DWARF_CB_ABORT;
	}
	return w->frames > 1024 ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* 1: unwound to the outermost frame, none denied; 0: a frame is denied
 * (*hit); -1: not unwound (scan the stack instead). */
static int unwind_check(struct inject_ctx *c, pid_t tid,
                        const struct user_regs_struct *r, bool no_alloc,
                        const struct range **hit)
{
	if (!c->dwfl)
		return -1;
	c->unw_tid = tid;
	c->unw_regs = r;
	struct unw_walk w = {c, NULL, no_alloc, 0};
	int rc = dwfl_getthread_frames(c->dwfl, tid, unw_frame, &w);
	if (w.hit) {
		*hit = w.hit;
		return 0;
	}
	return rc == 0 && w.frames > 1 ? 1 : -1;
}

/*
 * A process whose malloc is not libc's (jemalloc, tcmalloc or mimalloc
 * linked or preloaded, or the executable's own): the first object of the
 * loader's list (the global scope's order) that defines malloc gets the
 * deny ranges libc's allocator has, before libc's, so that the entry
 * breakpoints (trap_at_entry) go to the allocator the program calls.
 * Stops at libc.  Best effort: an object that cannot be read is skipped.
 */
static void unwind_setup(struct inject_ctx *c);

static void deny_other_allocator(struct inject_ctx *c)
{
	uint64_t lm = 0;
	char ignored[INJECT_WHY];
	if (read_r_debug(c->pid, &c->m, &lm, ignored))
		return;
	bool found = false;
	for (int i = 0; lm && i < 4096; i++) {
		uint64_t w[4]; /* l_addr, l_name, l_ld, l_next */
		if (inject_read(c->pid, lm, w, sizeof(w)))
			return;
		lm = w[3];
		char name[PATH_MAX] = "";
		if (w[1])
			for (size_t n = sizeof(name) - 1; n >= 64; n /= 2)
				if (inject_read(c->pid, w[1], name, n) == 0) {
					name[n] = '\0';
					break;
				}
		char file[PATH_IN_TARGET_MAX];
		if (i == 0 && !name[0])
			snprintf(file, sizeof(file), "/proc/%d/exe",
			         (int)c->pid);
		else if (name[0] == '/')
			snprintf(file, sizeof(file), "/proc/%d/root%s",
			         (int)c->pid, name);
		else
			continue; /* the vdso */
		/* Every object (ld.so included) for the unwinder, at its
		 * load bias, read as the target sees it. */
		if (c->dwfl)
			dwfl_report_elf(c->dwfl, name[0] ? name : "[exe]", file,
			                -1, w[0], false);
		if (found || strstr(name, "/ld-linux"))
			continue;
		struct ielf e;
		char err[256];
		if (ielf_open(file, &e, err, sizeof(err)))
			continue;
		uint64_t v;
		bool defines = ielf_sym(&e, "malloc", &v, NULL, NULL) == 0;
		bool is_libc = w[0] == c->libc_bias && strstr(name, "libc.so");
		if (defines && !is_libc) {
			uint64_t saved = c->libc_bias;
			/* deny_sym adds libc_bias: this object's, for now. */
			c->libc_bias = w[0]; /* l_addr */
			for (int k = 0; k < N_ALLOC_NAMES; k++) {
				struct deny_add d = {c, deny_names[k]};
				ielf_sym_each(&e, deny_names[k], deny_sym, &d);
			}
			c->libc_bias = saved;
		}
		ielf_close(&e);
		found = defines || is_libc;
	}
}

static int load_target(struct inject_ctx *c, char *why)
{
	if (maps_load(c->pid, &c->m, why))
		return -1;
	const struct seg *lc = maps_lib(&c->m, "libc.so.6", false);
	if (!lc)
		return fail(why, "%d has no libc.so.6 mapped", (int)c->pid);
	char path[PATH_IN_TARGET_MAX], err[256];
	seg_file(c->pid, lc, path, sizeof(path));
	if (ielf_open(path, &c->libc, err, sizeof(err)))
		return fail(why, "cannot read the libc of %d: %s", (int)c->pid,
		            err);
	c->libc_bias = lc->start - c->libc.load_min;
	unwind_setup(c);
	deny_other_allocator(c);
	if (c->dwfl &&
	    (dwfl_report_end(c->dwfl, NULL, NULL) != 0 ||
	     !dwfl_attach_state(c->dwfl, NULL, c->pid, &unwind_callbacks, c))) {
		dwfl_end(c->dwfl);
		c->dwfl = NULL;
	}
	for (int i = 0; deny_names[i]; i++) {
		struct deny_add d = {c, deny_names[i]};
		ielf_sym_each(&c->libc, deny_names[i], deny_sym, &d);
	}
	/* __restore_rt: mov $15,%rax; syscall.  A signal frame on the stack
	 * means the thread runs a signal handler, which may have interrupted
	 * anything. */
	static const unsigned char restore_rt[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00,
	                                           0x00, 0x00, 0x0f, 0x05};
	uint64_t v;
	if (ielf_find_code(&c->libc, restore_rt, sizeof(restore_rt), &v) == 0)
		add_range(c, c->libc_bias + v,
		          c->libc_bias + v + sizeof(restore_rt),
		          "__restore_rt (a signal handler)");
	const struct seg *ld = maps_lib(&c->m, "ld-linux-x86-64.so.2", false);
	for (size_t i = 0; ld && i < c->m.n; i++) {
		const struct seg *s = &c->m.v[i];
		if (s->inode == ld->inode && !strcmp(s->path, ld->path) &&
		    s->perms[2] == 'x')
			add_range(c, s->start, s->end, "the dynamic loader");
	}
	return 0;
}

static const struct range *denied(const struct inject_ctx *c, uint64_t a)
{
	if (c->extra_only) {
		/* The extra range is the last one (inject_attach). */
		const struct range *x =
		        c->ndeny ? &c->deny[c->ndeny - 1] : NULL;
		return x && c->o.deny_hi && a >= x->lo && a < x->hi ? x : NULL;
	}
	for (int i = 0; i < c->ndeny; i++)
		if (a >= c->deny[i].lo && a < c->deny[i].hi)
			return &c->deny[i];
	return NULL;
}

/* ---- system calls at the stop ---------------------------------------- */

/* Calls that return EINTR to any stop, even one the program never sees
 * (ptrace(2) BUGS, signal(7)): at the first stop rax is -EINTR. */
static bool eintr_only(long nr)
{
	switch (nr) {
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_semop:
	case SYS_semtimedop:
	case SYS_rt_sigtimedwait:
	case SYS_io_getevents:
	case SYS_read: /* inotify's read */
		return true;
	default:
		return false;
	}
}

/* Calls that run with a temporary signal mask (TIF_RESTORE_SIGMASK):
 * at the stop the thread blocks the call's mask (SigBlk) and the
 * program's own is saved aside.  PTRACE_GETSIGMASK returns the saved one
 * then (kernel/ptrace.c; measured: it did for sigsuspend here), which is
 * what inject_detach puts back; the restarted call installs its own
 * again. */
static bool temp_mask(long nr)
{
	switch (nr) {
	case SYS_rt_sigsuspend:
	case SYS_ppoll:
	case SYS_pselect6:
	case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_io_pgetevents:
		return true;
	default:
		return false;
	}
}

static bool stopped_eintr(const struct user_regs_struct *r)
{
	return (long long)r->orig_rax >= 0 && (long long)r->rax == -EINTR &&
	       eintr_only((long)r->orig_rax);
}

/* Whether a signal the thread does not block is pending: then an EINTR
 * is what the program gets anyway, and the call is not issued again. */
static bool signal_pending(pid_t tid, uint64_t blocked)
{
	struct proc_status st;
	if (proc_status(tid, &st))
		return true;
	return ((st.sigpnd | st.shdpnd) & ~blocked) != 0;
}

/* A signal pending that the call's temporary mask (tmp) blocks and the
 * program's own (own) does not: at any stop of the thread it is
 * delivered when the thread resumes, the kernel having restarted the call
 * first (the handler runs, the call goes on waiting). */
static bool temp_blocked_pending(pid_t tid, uint64_t tmp, uint64_t own)
{
	struct proc_status st;
	if (proc_status(tid, &st))
		return false;
	return ((st.sigpnd | st.shdpnd) & tmp & ~own) != 0;
}

/*
 * Reissued with the time that remains.  The calls above that take a
 * timeout take it relative, and the kernel does not say how much of it
 * is left: issued again as they were, each stop restarts the wait (a
 * thread in epoll_wait(2500) attached to five times waited 12.9 s).  So
 * the injector measures how long the thread had slept in the call when
 * it stopped, and cuts that from the timeout.
 *
 * The measure: the scheduler's se.exec_start (/proc/PID/task/TID/sched)
 * is the time the thread last left the CPU, on that CPU's task clock.
 * Read before the stop (the thread asleep in its call) and after it (the
 * thread ran to the stop and left the CPU again), on the same CPU, with
 * one voluntary switch between (the stop's own), the difference is how
 * long it slept in that call.  Per-CPU task clocks differ (they leave
 * out interrupt and steal time since boot), so on another CPU the wall
 * time between our two reads stands in: less than the truth, never more
 * (the call only ends later than bare, never sooner).  More switches
 * (the thread woke and called again) or no sched file: no cut, counted
 * (inject_stats.reissue_full).
 */
struct sleep_mark {
	bool ok;
	int cpu;
	uint64_t nvcsw;
	uint64_t exec_ns;
	uint64_t mono_ns;
	uint64_t int_ns; /* the interrupt (CLOCK_MONOTONIC) */
};

/* The EINTR-only calls with a relative timeout, and the argument that
 * holds it. */
static int timeout_arg(long nr)
{
	switch (nr) {
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_semtimedop:
		return 4;
	case SYS_rt_sigtimedwait:
		return 3;
	case SYS_io_getevents:
		return 5;
	default:
		return 0;
	}
}

static unsigned long long *arg_reg(struct user_regs_struct *r, int i)
{
	switch (i) {
	case 3:
		return &r->rdx;
	case 4:
		return &r->r10;
	default:
		return &r->r8;
	}
}

/* "se.exec_start   :   23777520.799286" (ms, 6 decimals) and
 * "nr_voluntary_switches   :   12" from the sched file; the CPU (field
 * 39) from stat. */
static bool sleep_mark_read(pid_t pid, pid_t tid, struct sleep_mark *m)
{
	char buf[4096];
	if (proc_task_read(pid, tid, "sched", buf, sizeof(buf)) <= 0)
		return false;
	bool have_exec = false, have_sw = false;
	for (char *l = buf; l && *l;) {
		char *nl = strchr(l, '\n');
		char *line = l;
		l = nl ? nl + 1 : NULL;
		char *colon = strchr(line, ':');
		if (!colon || (nl && colon > nl))
			continue;
		if (!strncmp(line, "se.exec_start ", 14)) {
			char *end;
			unsigned long long ms = strtoull(colon + 1, &end, 10);
			unsigned long long frac = 0;
			int digits = 0;
			if (*end == '.')
				for (end++;
				     *end >= '0' && *end <= '9' && digits < 6;
				     end++, digits++)
					frac = frac * 10 +
					       (unsigned)(*end - '0');
			for (; digits < 6; digits++)
				frac *= 10;
			m->exec_ns = ms * 1000000ull + frac;
			have_exec = true;
		} else if (!strncmp(line, "nr_voluntary_switches ", 22)) {
			m->nvcsw = strtoull(colon + 1, NULL, 10);
			have_sw = true;
		}
	}
	if (!have_exec || !have_sw ||
	    proc_task_read(pid, tid, "stat", buf, sizeof(buf)) <= 0)
		return false;
	/* Field 3 follows the ") " that ends the name; the CPU is field
	 * 39. */
	char *p = strrchr(buf, ')');
	if (!p)
		return false;
	int field = 2;
	for (; *p && field < 39; p++)
		if (*p == ' ')
			field++;
	if (field != 39 || *p < '0' || *p > '9')
		return false;
	m->cpu = atoi(p);
	m->mono_ns = hp_clock_ns(CLOCK_MONOTONIC);
	return true;
}

/* CPU cpu's task clock less CLOCK_MONOTONIC, read on it (this thread
 * moved there for the read, then back): at most the true offset (our own
 * se.exec_start is when we began to run there, or later). */
static bool cpu_offset(int cpu, int64_t *off)
{
	cpu_set_t was, one;
	if (cpu < 0 || cpu >= CPU_SETSIZE ||
	    sched_getaffinity(0, sizeof(was), &was) != 0)
		return false;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) != 0)
		return false;
	struct sleep_mark me;
	bool ok = sleep_mark_read(getpid(), (pid_t)syscall(SYS_gettid), &me) &&
	          me.cpu == cpu;
	sched_setaffinity(0, sizeof(was), &was);
	if (!ok)
		return false;
	*off = (int64_t)me.exec_ns - (int64_t)me.mono_ns;
	return true;
}

/* Before stopping tid: a mark if it sleeps in a timed EINTR-only call. */
static void sleep_mark_before(pid_t pid, pid_t tid, struct sleep_mark *m)
{
	m->ok = false;
	long nr = proc_task_syscall(pid, tid);
	if (nr < 0 || !timeout_arg(nr))
		return;
	m->ok = sleep_mark_read(pid, tid, m);
	/* stop_one interrupts it next. */
	m->int_ns = hp_clock_ns(CLOCK_MONOTONIC);
}

/* After its stop: how long it had slept in the call (0: unknown). */
static uint64_t sleep_elapsed(pid_t pid, pid_t tid, const struct sleep_mark *m,
                              bool *known)
{
	struct sleep_mark m2;
	*known = false;
	if (!m->ok || !sleep_mark_read(pid, tid, &m2) ||
	    m2.nvcsw != m->nvcsw + 1)
		return 0;
	*known = true;
	if (m2.cpu == m->cpu && m2.exec_ns >= m->exec_ns)
		return m2.exec_ns - m->exec_ns;
	/* It woke on another CPU: its sleep's start on our clock, from that
	 * CPU's offset now (its task clock has lost interrupt and steal time
	 * since: the start comes out later, the wait shorter), to the
	 * interrupt (the stop came after it). */
	int64_t off;
	if (cpu_offset(m->cpu, &off)) {
		int64_t start = (int64_t)m->exec_ns - off;
		if (start > 0 && (uint64_t)start < m->int_ns)
			return m->int_ns - (uint64_t)start;
	}
	return m->int_ns > m->mono_ns ? m->int_ns - m->mono_ns : 0;
}

/* The call's timeout less elapsed_ns, in r (its argument, or for a
 * struct timespec a new one in the reissue area).  False: it keeps its
 * whole timeout (no measure, or nowhere to put a timespec). */
static bool cut_timeout(struct inject_ctx *c, pid_t tid,
                        struct user_regs_struct *r, uint64_t elapsed_ns,
                        bool known, int *cut_ms)
{
	long nr = (long)r->orig_rax;
	int a = timeout_arg(nr);
	*cut_ms = 0;
	if (!a)
		return true;
	unsigned long long *reg = arg_reg(r, a);
	if (nr == SYS_epoll_wait || nr == SYS_epoll_pwait) {
		int ms = (int)*reg;
		if (ms <= 0)
			return true; /* no wait, or none to cut */
		if (!known)
			return false;
		/* Whole milliseconds slept: the rest rounds up. */
		uint64_t e = elapsed_ns / 1000000ull;
		int left = e >= (uint64_t)ms ? 0 : ms - (int)e;
		*cut_ms = ms - left;
		*reg = (unsigned long long)(unsigned)left;
		return true;
	}
	if (*reg == 0)
		return true; /* NULL: no timeout */
	struct timespec ts = {0, 0};
	if (inject_read(c->pid, *reg, &ts, sizeof(ts)) != 0 || ts.tv_sec < 0 ||
	    ts.tv_nsec < 0 || ts.tv_nsec >= 1000000000L)
		return false; /* the kernel's EINVAL or EFAULT, as it was */
	if (!known)
		return false;
	uint64_t total =
	        (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	uint64_t left = elapsed_ns >= total ? 0 : total - elapsed_ns;
	*cut_ms = (int)((total - left) / 1000000ull);
#ifdef SYS_epoll_pwait2
	if (nr == SYS_epoll_pwait2 && (left + 999999) / 1000000 <= INT32_MAX) {
		/* epoll_pwait with the same arguments and the rest in
		 * milliseconds, rounded up: no memory of ours needed. */
		*reg = (unsigned long long)((left + 999999) / 1000000);
		r->rax = SYS_epoll_pwait;
		return true;
	}
#endif
	if (!c->reissue_area)
		return false;
	struct timespec nts = {(time_t)(left / 1000000000ull),
	                       (long)(left % 1000000000ull)};
	uint64_t at = c->reissue_area +
	              (c->reissue_next++ % INJECT_REISSUE_SLOTS) * sizeof(nts);
	struct iovec local = {&nts, sizeof(nts)};
	struct iovec remote = {(void *)(uintptr_t)at, sizeof(nts)};
	if (process_vm_writev(c->pid, &local, 1, &remote, 1, 0) !=
	    (ssize_t)sizeof(nts))
		return false;
	(void)tid;
	*reg = at;
	return true;
}

static void make_reissue(struct inject_ctx *c, pid_t tid,
                         struct user_regs_struct *r, uint64_t elapsed_ns,
                         bool known)
{
	int cut = 0;
	r->rax = r->orig_rax;
	/* Before orig_rax goes: cut_timeout reads it (and may issue
	 * another call, rax). */
	bool whole = !cut_timeout(c, tid, r, elapsed_ns, known, &cut);
	r->rip -= 2; /* the syscall instruction */
	r->orig_rax = (unsigned long long)-1;
	if (tid == c->tid) {
		c->reissue_cut_ms = cut;
		c->reissue_full = whole;
	}
}

/* ---- choosing the thread ---------------------------------------------- */

/* Why the stopped thread is not at a safe point (a static string, or
 * buf), or NULL if it is. */
static const char *unsafe(struct inject_ctx *c, pid_t tid,
                          const struct user_regs_struct *r, uint64_t entry_ok,
                          const struct range **hit, char *buf, size_t len)
{
	/* At the first byte of an allocator entry (entry_ok, a breakpoint
	 * there) the thread has run none of it. */
	const struct range *d = r->rip == entry_ok ? NULL : denied(c, r->rip);
	*hit = d;
	if (d) {
		snprintf(buf, len, "thread %d was in %s", (int)tid, d->what);
		return buf;
	}
	const struct seg *s = maps_at(&c->m, r->rsp);
	if (!s) {
		char ignored[INJECT_WHY];
		if (maps_load(c->pid, &c->m, ignored) == 0)
			s = maps_at(&c->m, r->rsp);
		if (!s) {
			snprintf(buf, len, "thread %d: its stack is not mapped",
			         (int)tid);
			return buf;
		}
	}
	bool grows = !strcmp(s->path, "[stack]");
	if (!grows && r->rsp - s->start < STACK_ROOM_MIN) {
		snprintf(buf, len, "thread %d has %llu KiB of stack left",
		         (int)tid,
		         (unsigned long long)((r->rsp - s->start) / 1024));
		return buf;
	}
	bool no_alloc = (long long)r->orig_rax >= 0 &&
	                alloc_free_call((long)r->orig_rax);
	int u = unwind_check(c, tid, r, no_alloc, hit);
	if (u == 0) {
		snprintf(buf, len, "thread %d was inside %s", (int)tid,
		         (*hit)->what);
		return buf;
	}
	if (u == 1) {
		c->unwound++;
		c->stack_low = grows ? r->rsp - STACK_ROOM_MIN : s->start;
		return NULL;
	}
	uint64_t n = s->end - r->rsp;
	if (n > STACK_SCAN_MAX)
		n = STACK_SCAN_MAX;
	struct iovec l = {c->stackbuf, n};
	struct iovec rm = {(void *)(uintptr_t)r->rsp, n};
	ssize_t got = process_vm_readv(tid, &l, 1, &rm, 1, 0);
	if (got <= 0) {
		snprintf(buf, len, "thread %d: cannot read its stack: %s",
		         (int)tid, strerror(errno));
		return buf;
	}
	for (ssize_t i = 0; i < got / 8; i++) {
		d = denied(c, c->stackbuf[i]);
		if (d && d->alloc && no_alloc)
			continue; /* a stale word (alloc_free_call) */
		if (d) {
			*hit = d;
			snprintf(buf, len, "thread %d was inside %s", (int)tid,
			         d->what);
			return buf;
		}
	}
	c->stack_low = grows ? r->rsp - STACK_ROOM_MIN : s->start;
	return NULL;
}

struct tids {
	pid_t v[MAX_TIDS];
	int n;
};

static int add_tid(void *ctx, pid_t tid)
{
	struct tids *t = ctx;
	if (t->n < MAX_TIDS)
		t->v[t->n++] = tid;
	return 0;
}

enum { TRY_SAFE = 1, TRY_UNSAFE = 0, TRY_FATAL = -1 };

/* Seizes and stops tid (a signal that comes first is let through as it
 * came): 1 stopped, 0 gone or exited, -ETIMEDOUT not stopped in
 * STOP_WAIT_MS (it stays seized), -errno the seize failed. */
static int stop_one(pid_t tid)
{
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0)
		return errno == ESRCH ? 0 : -errno;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return 0;
	}
	int st;
	for (;;) {
		if (wait_tid(tid, &st, STOP_WAIT_MS) < 0)
			return errno == ETIMEDOUT ? -ETIMEDOUT : 0;
		if (!WIFSTOPPED(st))
			return 0;
		if ((st >> 16) == PTRACE_EVENT_STOP)
			return 1;
		ptrace(PTRACE_CONT, tid, 0, (void *)(long)WSTOPSIG(st));
	}
}

/* Lets a stopped thread go, its interrupted call issued again when the
 * stop made it return EINTR (and no signal is pending to take its
 * place). */
static void resume_other(struct inject_ctx *c, pid_t tid, uint64_t elapsed_ns,
                         bool known)
{
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, tid, 0, &r) == 0 && stopped_eintr(&r)) {
		uint64_t mask = 0;
		ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(mask), &mask);
		if (!signal_pending(tid, mask)) {
			make_reissue(c, tid, &r, elapsed_ns, known);
			ptrace(PTRACE_SETREGS, tid, 0, &r);
		}
	}
	ptrace(PTRACE_DETACH, tid, 0, 0);
}

/*
 * A thread stopped inside the allocator (a malloc storm: most of the time
 * every thread is) is let run to the next entry of malloc, free, calloc or
 * realloc, where it holds none of the allocator's locks, instead of being
 * let go: execute breakpoints in the debug registers (no code is written
 * into the target), for at most ENTRY_WAIT_MS.  The program's own debug
 * registers are left alone: only when DR7 is 0 (nothing armed), and every
 * register is given back its value.  The breakpoint's SIGTRAP is never
 * delivered: the thread stays in that stop for our calls, which resume it
 * with no signal.  Returns 1 stopped at an entry (*r its registers,
 * *entry the address), 0 not (the thread stopped again as it was, or
 * still running if it could not be stopped: *gone), -1 not tried.
 */
#define ENTRY_WAIT_MS 15
#define DR_OFF(i)     (offsetof(struct user, u_debugreg) + (i) * sizeof(long))

static const char *const entry_names[] = {"malloc", "free", "calloc",
                                          "realloc"};

static int trap_at_entry(struct inject_ctx *c, pid_t tid,
                         struct user_regs_struct *r, uint64_t *entry,
                         bool *gone)
{
	*gone = false;
	uint64_t at[4];
	int n = 0;
	for (size_t k = 0; k < 4; k++)
		for (int i = 0; i < c->ndeny; i++)
			if (!strcmp(c->deny[i].what, entry_names[k])) {
				at[n++] = c->deny[i].lo;
				break;
			}
	if (!n)
		return -1;
	errno = 0;
	long dr7 = ptrace(PTRACE_PEEKUSER, tid, (void *)DR_OFF(7), 0);
	if (errno || dr7 != 0)
		return -1;
	long old[4];
	for (int i = 0; i < n; i++) {
		errno = 0;
		old[i] = ptrace(PTRACE_PEEKUSER, tid, (void *)DR_OFF(i), 0);
		if (errno)
			return -1;
	}
	long en = 0;
	int set = 0;
	for (; set < n; set++) {
		if (ptrace(PTRACE_POKEUSER, tid, (void *)DR_OFF(set),
		           (void *)(uintptr_t)at[set]) < 0)
			break;
		en |= 1L << (2 * set); /* Ln; R/W 00 (execute), LEN 00 */
	}
	int rc = 0;
	if (set < n ||
	    ptrace(PTRACE_POKEUSER, tid, (void *)DR_OFF(7), (void *)en) < 0) {
		rc = -1;
		goto restore;
	}
	if (ptrace(PTRACE_CONT, tid, 0, 0) < 0) {
		rc = -1;
		goto restore;
	}
	double end = hp_mono_msf() + ENTRY_WAIT_MS;
	bool interrupted = false;
	for (;;) {
		double left = end - hp_mono_msf();
		int st;
		if (!interrupted && left <= 0) {
			ptrace(PTRACE_INTERRUPT, tid, 0, 0);
			interrupted = true;
		}
		if (wait_tid(tid, &st,
		             interrupted ? STOP_WAIT_MS : (int)left + 1) < 0) {
			if (errno == ETIMEDOUT && !interrupted)
				continue;
			*gone = errno != ETIMEDOUT;
			rc = 0;
			goto restore_running;
		}
		if (!WIFSTOPPED(st)) {
			*gone = true;
			return 0;
		}
		if ((st >> 16) == PTRACE_EVENT_STOP)
			break; /* our interrupt (or a group stop): not there */
		int sig = WSTOPSIG(st);
		siginfo_t si;
		if (sig == SIGTRAP &&
		    ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 &&
		    si.si_code == TRAP_HWBKPT &&
		    ptrace(PTRACE_GETREGS, tid, 0, r) == 0) {
			for (int i = 0; i < n; i++)
				if (r->rip == at[i]) {
					*entry = at[i];
					rc = 1;
				}
			if (rc == 1)
				break;
			sig = 0; /* ours, but somewhere else: go on */
		}
		/* The program's own signal: delivered as it came. */
		ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig);
	}
restore:
	/* DR7 first: nothing armed while the addresses go back. */
	ptrace(PTRACE_POKEUSER, tid, (void *)DR_OFF(7), 0);
	ptrace(PTRACE_POKEUSER, tid, (void *)DR_OFF(6), 0);
	for (int i = 0; i < set; i++)
		ptrace(PTRACE_POKEUSER, tid, (void *)DR_OFF(i), (void *)old[i]);
	return rc;
restore_running:
	/* Not stopped: the registers of a running thread cannot be
	 * written; this thread stays seized until heapprof exits. */
	return rc;
}

/* Seizes and stops tid; keeps it if it is at a safe point, else lets it
 * go as it was. */
static int try_thread(struct inject_ctx *c, pid_t tid, bool may_reissue,
                      char *last, size_t lastlen, char *why)
{
	struct sleep_mark mark;
	sleep_mark_before(c->pid, tid, &mark);
	int stopped = stop_one(tid);
	if (stopped == -ETIMEDOUT)
		return fail(
		        why,
		        "thread %d of %d did not stop in %d ms "
		        "(uninterruptible?); it stays seized until heapprof "
		        "exits",
		        (int)tid, (int)c->pid, STOP_WAIT_MS);
	if (stopped < 0)
		return fail(why, "ptrace(PTRACE_SEIZE) of %d (thread %d): %s",
		            (int)c->pid, (int)tid,
		            stopped == -EPERM ? "not permitted (traced by "
		                                "someone else, or no ptrace "
		                                "rights)"
		                              : strerror(-stopped));
	if (!stopped)
		return TRY_UNSAFE; /* gone */
	c->t_stop = hp_mono_msf();
	if (!c->t_seize)
		c->t_seize = c->t_stop;
	c->tries++;
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, tid, 0, &r) < 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return TRY_UNSAFE;
	}
	const char *bad = NULL;
	bool eintr = stopped_eintr(&r);
	bool known = false;
	uint64_t elapsed =
	        eintr ? sleep_elapsed(c->pid, tid, &mark, &known) : 0;
	if (eintr && !may_reissue) {
		snprintf(last, lastlen,
		         "thread %d was in a call that the stop interrupts "
		         "(system call %lld)",
		         (int)tid, (long long)r.orig_rax);
		bad = last;
	} else {
		const struct range *hit = NULL;
		bad = unsafe(c, tid, &r, 0, &hit, last, lastlen);
		bool alloc = false;
		for (size_t k = 0;
		     hit && k < sizeof(entry_names) / sizeof(entry_names[0]);
		     k++)
			alloc |= !strcmp(hit->what, entry_names[k]);
		uint64_t entry = 0;
		bool gone = false;
		int t = alloc && !eintr
		                ? trap_at_entry(c, tid, &r, &entry, &gone)
		                : -1;
		if (gone)
			return TRY_UNSAFE;
		if (t == 1) {
			/* Its stop for us starts now: it ran meanwhile. */
			c->t_stop = hp_mono_msf();
			c->entry_traps++;
			bad = unsafe(c, tid, &r, entry, &hit, last, lastlen);
		} else if (t == 0) {
			/* Stopped again by our interrupt, anywhere: let go
			 * below as any unsafe stop (an EINTR-only call it
			 * entered meanwhile issued again). */
			if (ptrace(PTRACE_GETREGS, tid, 0, &r) < 0) {
				ptrace(PTRACE_DETACH, tid, 0, 0);
				return TRY_UNSAFE;
			}
			/* A call entered since: it began a moment ago. */
			eintr = stopped_eintr(&r);
			elapsed = 0;
			known = true;
		}
	}
	if (!bad) {
		c->tid = tid;
		c->saved = r;
		c->reissue = eintr;
		c->elapsed_ns = elapsed;
		c->elapsed_known = known;
		struct proc_status ps;
		if ((long long)r.orig_rax >= 0 && temp_mask((long)r.orig_rax) &&
		    proc_status(tid, &ps) == 0)
			c->tmpblk = ps.sigblk;
		return TRY_SAFE;
	}
	resume_other(c, tid, elapsed, known);
	return TRY_UNSAFE;
}

/* The order threads are tried in: sleeping in a restartable call first,
 * then the running ones, then (last round only) the rest. */
static int rank(pid_t pid, pid_t tid)
{
	struct proc_stat st;
	if (proc_stat(tid, &st))
		return 9;
	if (st.state == 'S') {
		/* read returns EINTR to a stop only on inotify: a thread
		 * in read is not put last for that.  Nor is one in
		 * sigsuspend (ppoll...) with a signal pending that its
		 * temporary mask blocks: any stop runs that signal's
		 * handler early. */
		long nr = proc_task_syscall(pid, tid);
		if (nr >= 0 && nr != SYS_read && eintr_only(nr))
			return 3;
		struct proc_status ps;
		if (nr >= 0 && temp_mask(nr) && proc_status(tid, &ps) == 0 &&
		    ((ps.sigpnd | ps.shdpnd) & ps.sigblk))
			return 3;
		return 0;
	}
	if (st.state == 'R')
		return 1;
	if (st.state == 'D' || st.state == 'T' || st.state == 't' ||
	    st.state == 'Z' || st.state == 'X')
		return 9;
	return 2;
}

static int find_safe_thread(struct inject_ctx *c, char *why)
{
	double end = c->t0 + c->o.budget_ms;
	char last[INJECT_WHY] = "";
	for (int round = 0;; round++) {
		struct tids t = {.n = 0};
		if (proc_tasks(c->pid, add_tid, &t) < 0 || !t.n)
			return fail(why, "%d has exited", (int)c->pid);
		c->threads = t.n;
		int ranks[MAX_TIDS];
		for (int i = 0; i < t.n; i++)
			ranks[i] = rank(c->pid, t.v[i]);
		for (int want = 0; want <= 3; want++) {
			for (int i = 0; i < t.n; i++) {
				if (ranks[i] != want)
					continue;
				/* An EINTR-only call is issued again only when
				 * no other thread would do: single-threaded, or
				 * after a round that found nothing. */
				bool reissue_ok = t.n == 1 || round > 0;
				if (want == 3 && !reissue_ok)
					continue;
				int r = try_thread(c, t.v[i], reissue_ok, last,
				                   sizeof(last), why);
				if (r != TRY_UNSAFE)
					return r == TRY_SAFE ? 0 : -1;
			}
		}
		if (hp_mono_msf() >= end && !c->tries)
			return fail(
			        why,
			        "no thread of %d could be stopped within %d "
			        "ms: each of its %d threads is stopped, in "
			        "uninterruptible sleep or exiting",
			        (int)c->pid, c->o.budget_ms, t.n);
		if (hp_mono_msf() >= end)
			return fail(
			        why,
			        "no safe point in %d within %d ms (%d tries "
			        "on %d threads; last: %s): every thread was in "
			        "the allocator or the loader, try again",
			        (int)c->pid, c->o.budget_ms, c->tries, t.n,
			        last[0] ? last : "none stopped");
		pause_us(round < 10 ? 50 + 50 * round : 500);
	}
}

/* ---- the remote call --------------------------------------------------- */

static int save_state(struct inject_ctx *c, char *why)
{
	c->xstate = malloc(XSTATE_MAX);
	if (!c->xstate)
		return fail(why, "out of memory");
	struct iovec io = {c->xstate, XSTATE_MAX};
	c->xnote = NT_X86_XSTATE;
	if (ptrace(PTRACE_GETREGSET, c->tid, (void *)(long)NT_X86_XSTATE, &io) <
	    0) {
		io.iov_len = XSTATE_MAX;
		c->xnote = NT_PRFPREG;
		if (ptrace(PTRACE_GETREGSET, c->tid, (void *)(long)NT_PRFPREG,
		           &io) < 0)
			return fail(
			        why,
			        "cannot save the FPU state of thread %d: %s",
			        (int)c->tid, strerror(errno));
	}
	c->xlen = io.iov_len;
	return 0;
}

static void hold_signal(struct inject_ctx *c, const siginfo_t *si)
{
	/* A standard signal already held is pending once, as the kernel
	 * would have it. */
	for (int i = 0; i < c->nheld; i++)
		if (si->si_signo < SIGRTMIN &&
		    c->held[i].si_signo == si->si_signo)
			return;
	if (c->nheld < MAX_HELD)
		c->held[c->nheld++] = *si;
}

int inject_remote_call(struct inject_ctx *c, uint64_t fn,
                       const uint64_t args[6], uint64_t *ret, char *why)
{
	if (c->stuck || c->gone)
		return fail(why, "thread %d of %d is not usable any more",
		            (int)c->tid, (int)c->pid);
	uint64_t sp = (c->scratch & ~(uint64_t)15) - 8;
	uint64_t zero = 0;
	struct iovec l = {&zero, 8}, rm = {(void *)(uintptr_t)sp, 8};
	if (process_vm_writev(c->tid, &l, 1, &rm, 1, 0) != 8)
		return fail(why, "cannot write on the stack of thread %d: %s",
		            (int)c->tid, strerror(errno));
	struct user_regs_struct r = c->saved;
	static const uint64_t none[6] = {0};
	const uint64_t *a = args ? args : none;
	r.rip = fn;
	r.rsp = sp;
	r.rdi = a[0];
	r.rsi = a[1];
	r.rdx = a[2];
	r.rcx = a[3];
	r.r8 = a[4];
	r.r9 = a[5];
	r.rax = 0;                           /* no vector arguments */
	r.orig_rax = (unsigned long long)-1; /* not in a system call */
	r.eflags &= ~(0x400ULL | 0x100ULL);  /* DF and TF clear */
	if (ptrace(PTRACE_SETREGS, c->tid, 0, &r) < 0 ||
	    ptrace(PTRACE_CONT, c->tid, 0, 0) < 0)
		return fail(why, "cannot start the call in thread %d: %s",
		            (int)c->tid, strerror(errno));
	c->in_sigdeliv = false;
	for (;;) {
		int st;
		if (wait_tid(c->tid, &st, c->o.call_timeout_ms) < 0) {
			if (errno == ETIMEDOUT) {
				c->stuck = true;
				return fail(
				        why,
				        "the call in thread %d of %d did not "
				        "return in %d ms",
				        (int)c->tid, (int)c->pid,
				        c->o.call_timeout_ms);
			}
			c->gone = true;
			return fail(why, "%d exited during the call",
			            (int)c->pid);
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			c->gone = true;
			return WIFSIGNALED(st)
			               ? fail(why,
			                      "%d was killed by signal %d "
			                      "during "
			                      "the call",
			                      (int)c->pid, WTERMSIG(st))
			               : fail(why, "%d exited during the call",
			                      (int)c->pid);
		}
		int sig = WSTOPSIG(st), ev = st >> 16;
		if (ev) {
			/* A group stop (SIGSTOP to the process) or another
			 * event: the call goes on; the process stops after. */
			ptrace(PTRACE_CONT, c->tid, 0, 0);
			continue;
		}
		if (ptrace(PTRACE_GETREGS, c->tid, 0, &r) < 0) {
			c->gone = true;
			return fail(why, "%d exited during the call",
			            (int)c->pid);
		}
		if (sig == SIGSEGV && r.rip == 0) {
			c->in_sigdeliv = true;
			*ret = r.rax;
			return 0;
		}
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		ptrace(PTRACE_GETSIGINFO, c->tid, 0, &si);
		bool fault = si.si_code > 0 &&
		             (sig == SIGSEGV || sig == SIGBUS ||
		              sig == SIGILL || sig == SIGFPE || sig == SIGTRAP);
		if (fault) {
			c->in_sigdeliv = true;
			return fail(
			        why,
			        "the call in thread %d of %d faulted (signal "
			        "%d at %#llx); its registers are put back",
			        (int)c->tid, (int)c->pid, sig,
			        (unsigned long long)r.rip);
		}
		hold_signal(c, &si);
		ptrace(PTRACE_CONT, c->tid, 0, 0);
	}
}

int inject_write(struct inject_ctx *c, const void *buf, size_t len,
                 uint64_t *addr, char *why)
{
	uint64_t a = (c->scratch - len) & ~(uint64_t)15;
	if (c->saved.rsp - a > SCRATCH_MAX || a - 512 < c->stack_low)
		return fail(why,
		            "no room on the stack of thread %d for %zu "
		            "bytes",
		            (int)c->tid, len);
	struct iovec l = {(void *)buf, len}, rm = {(void *)(uintptr_t)a, len};
	if (process_vm_writev(c->tid, &l, 1, &rm, 1, 0) != (ssize_t)len)
		return fail(why, "cannot write into %d: %s", (int)c->pid,
		            strerror(errno));
	c->scratch = a;
	*addr = a;
	return 0;
}

int inject_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = {buf, len}, rm = {(void *)(uintptr_t)addr, len};
	ssize_t n = process_vm_readv(pid, &l, 1, &rm, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n >= 0)
		errno = EFAULT;
	return -1;
}

int inject_libc_symbol(struct inject_ctx *c, const char *name, uint64_t *addr,
                       char *why)
{
	uint64_t v;
	int type = 0;
	if (ielf_sym(&c->libc, name, &v, NULL, &type))
		return fail(why, "the libc of %d has no %s", (int)c->pid, name);
	*addr = c->libc_bias + v;
	if (type != STT_GNU_IFUNC)
		return 0;
	/* An IFUNC (strlen, memcpy...): its value is the resolver, which
	 * returns the implementation for this CPU; it takes no lock. */
	uint64_t impl = 0;
	if (inject_remote_call(c, *addr, NULL, &impl, why))
		return -1;
	if (!impl)
		return fail(why, "the resolver of %s in %d returned NULL", name,
		            (int)c->pid);
	*addr = impl;
	return 0;
}

static void ctx_free(struct inject_ctx *c)
{
	if (c->dwfl)
		dwfl_end(c->dwfl);
	maps_free(&c->m);
	ielf_close(&c->libc);
	free(c->xstate);
	free(c->stackbuf);
	free(c);
}

int inject_attach(pid_t pid, const struct inject_opts *o,
                  struct inject_ctx **out, char *why)
{
	*out = NULL;
	if (!(o && o->checked) && inject_check(pid, why))
		return -1;
	struct inject_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return fail(why, "out of memory");
	c->pid = pid;
	c->o.budget_ms =
	        o && o->budget_ms > 0 ? o->budget_ms : DEFAULT_BUDGET_MS;
	c->o.call_timeout_ms = o && o->call_timeout_ms > 0 ? o->call_timeout_ms
	                                                   : DEFAULT_CALL_MS;
	if (o && o->deny_hi > o->deny_lo) {
		c->o.deny_lo = o->deny_lo;
		c->o.deny_hi = o->deny_hi;
		c->o.deny_what = o->deny_what ? o->deny_what : "heapprof";
	}
	c->stackbuf = malloc(STACK_SCAN_MAX);
	if (!c->stackbuf) {
		ctx_free(c);
		return fail(why, "out of memory");
	}
	if (load_target(c, why)) {
		ctx_free(c);
		return -1;
	}
	if (c->o.deny_hi) {
		/* Last, where denied() finds it alone (extra_only). */
		if (c->ndeny == MAX_DENY)
			c->ndeny--;
		add_range(c, c->o.deny_lo, c->o.deny_hi, c->o.deny_what);
	}
	c->t0 = hp_mono_msf();
	if (find_safe_thread(c, why)) {
		ctx_free(c);
		return -1;
	}
	c->t_safe = hp_mono_msf();
	c->scratch = (c->saved.rsp - RED_ZONE) & ~(uint64_t)15;
	if (save_state(c, why))
		goto undo;
	/* The program's own mask, also in sigsuspend and its kin (see
	 * temp_mask): no call is needed first. */
	uint64_t all = ~0ULL;
	if (ptrace(PTRACE_GETSIGMASK, c->tid, (void *)sizeof(c->mask),
	           &c->mask) < 0 ||
	    ptrace(PTRACE_SETSIGMASK, c->tid, (void *)sizeof(all), &all) < 0) {
		fail(why, "cannot block the signals of thread %d: %s",
		     (int)c->tid, strerror(errno));
		goto undo;
	}
	c->mask_set = true;
	uint64_t errno_fn = 0;
	const uint64_t none[6] = {0};
	if (inject_libc_symbol(c, "__errno_location", &errno_fn, why) ||
	    inject_remote_call(c, errno_fn, none, &c->errno_addr, why))
		goto undo;
	if (!c->errno_addr || inject_read(c->pid, c->errno_addr, &c->errno_val,
	                                  sizeof(c->errno_val))) {
		fail(why, "cannot read the errno of thread %d", (int)c->tid);
		c->errno_addr = 0;
		goto undo;
	}
	*out = c;
	return 0;
undo:;
	char ignored[INJECT_WHY];
	inject_detach(c, NULL, ignored);
	return -1;
}

void inject_resume_others(struct inject_ctx *c)
{
	for (int i = 0; i < c->nothers; i++)
		resume_other(c, c->others[i], c->others_elapsed[i],
		             c->others_known[i]);
	c->nothers = 0;
}

void inject_set_reissue_area(struct inject_ctx *c, uint64_t addr)
{
	c->reissue_area = addr;
}

/* Whether the stopped thread tid is in, or has a frame in, the extra
 * range: 1 inside (or not provable), 0 outside. */
static int other_inside(struct inject_ctx *c, pid_t tid, char *buf, size_t len)
{
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, tid, 0, &r) < 0) {
		snprintf(buf, len, "thread %d: no registers", (int)tid);
		return 1;
	}
	c->extra_only = true;
	const struct range *hit = denied(c, r.rip);
	int u = hit ? 0 : unwind_check(c, tid, &r, false, &hit);
	if (u == -1) {
		/* Not unwound: every word of its stack from sp up. */
		const struct seg *s = maps_at(&c->m, r.rsp);
		uint64_t n = s ? s->end - r.rsp : 0;
		if (n > STACK_SCAN_MAX)
			n = STACK_SCAN_MAX;
		struct iovec l = {c->stackbuf, n};
		struct iovec rm = {(void *)(uintptr_t)r.rsp, n};
		ssize_t got = n ? process_vm_readv(tid, &l, 1, &rm, 1, 0) : -1;
		if (got <= 0) {
			hit = &c->deny[c->ndeny - 1];
		} else {
			for (ssize_t i = 0; i < got / 8 && !hit; i++)
				hit = denied(c, c->stackbuf[i]);
		}
	}
	c->extra_only = false;
	if (hit) {
		snprintf(buf, len, "thread %d was inside %s", (int)tid,
		         hit->what);
		return 1;
	}
	return 0;
}

int inject_stop_others(struct inject_ctx *c, char *why)
{
	if (!c->o.deny_hi)
		return fail(why, "no range to check the threads against");
	c->nothers = 0;
	struct tids t = {.n = 0};
	if (proc_tasks(c->pid, add_tid, &t) < 0 || !t.n)
		return fail(why, "%d has exited", (int)c->pid);
	if (t.n == MAX_TIDS)
		return fail(why, "%d has too many threads (%d or more)",
		            (int)c->pid, MAX_TIDS);
	for (int i = 0; i < t.n; i++) {
		if (t.v[i] == c->tid)
			continue;
		struct sleep_mark mark;
		sleep_mark_before(c->pid, t.v[i], &mark);
		int rc = stop_one(t.v[i]);
		if (rc < 0) {
			inject_resume_others(c);
			return fail(why, "thread %d of %d could not be stopped",
			            (int)t.v[i], (int)c->pid);
		}
		if (rc > 0) {
			int k = c->nothers++;
			c->others[k] = t.v[i];
			c->others_elapsed[k] = sleep_elapsed(
			        c->pid, t.v[i], &mark, &c->others_known[k]);
		}
	}
	/* A thread started meanwhile (by a thread not yet stopped) is not
	 * in the list: look again, now that every thread listed is stopped. */
	struct tids t2 = {.n = 0};
	bool fresh = proc_tasks(c->pid, add_tid, &t2) < 0;
	for (int i = 0; i < t2.n && !fresh; i++) {
		bool known = t2.v[i] == c->tid;
		for (int k = 0; k < c->nothers && !known; k++)
			known = c->others[k] == t2.v[i];
		fresh = !known;
	}
	if (fresh) {
		inject_resume_others(c);
		snprintf(why, INJECT_WHY,
		         "%d started a thread while being stopped",
		         (int)c->pid);
		return 1;
	}
	char buf[INJECT_WHY];
	for (int i = 0; i < c->nothers; i++) {
		if (other_inside(c, c->others[i], buf, sizeof(buf))) {
			inject_resume_others(c);
			snprintf(why, INJECT_WHY, "%s", buf);
			return 1;
		}
	}
	return 0;
}

int inject_detach(struct inject_ctx *c, struct inject_stats *stats, char *why)
{
	inject_resume_others(c);
	int rc = 0;
	pid_t tid = c->tid;
	if (c->gone) {
		rc = fail(why, "%d exited during the injection", (int)c->pid);
		goto out;
	}
	if (c->stuck) {
		/* Take the thread back from the call it did not finish: a
		 * lock that call held stays held (docs/ATTACH.md). */
		int st;
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		if (wait_tid(tid, &st, STOP_WAIT_MS) < 0 || !WIFSTOPPED(st)) {
			rc = fail(why,
			          "thread %d of %d could not be stopped to "
			          "put it back",
			          (int)tid, (int)c->pid);
			goto out;
		}
		c->in_sigdeliv = (st >> 16) == 0;
	}
	if (c->errno_addr) {
		struct iovec l = {&c->errno_val, sizeof(c->errno_val)};
		struct iovec rm = {(void *)(uintptr_t)c->errno_addr,
		                   sizeof(c->errno_val)};
		if (process_vm_writev(tid, &l, 1, &rm, 1, 0) !=
		            (ssize_t)sizeof(c->errno_val) &&
		    !rc)
			rc = fail(why, "cannot put back the errno of thread %d",
			          (int)tid);
	}
	if (c->mask_set)
		ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(c->mask),
		       &c->mask);
	if (c->xstate && c->xlen) {
		struct iovec io = {c->xstate, c->xlen};
		if (ptrace(PTRACE_SETREGSET, tid, (void *)(long)c->xnote, &io) <
		    0)
			rc = fail(why,
			          "cannot put back the FPU state of thread "
			          "%d: %s",
			          (int)tid, strerror(errno));
	}
	struct user_regs_struct r = c->saved;
	bool reissue = c->reissue && !c->nheld && !signal_pending(tid, c->mask);
	/* A signal that the interrupted call's temporary mask held back is
	 * delivered now (the mask is the program's own again): the call is
	 * issued again behind it, as the kernel does after any stop, rather
	 * than ending with EINTR. */
	uint64_t held = 0;
	for (int i = 0; i < c->nheld; i++)
		held |= 1ULL << (c->held[i].si_signo - 1);
	if (c->tmpblk && !reissue &&
	    ((held & c->tmpblk & ~c->mask) ||
	     temp_blocked_pending(tid, c->tmpblk, c->mask)))
		reissue = true;
	if (reissue)
		make_reissue(c, tid, &r, c->elapsed_ns, c->elapsed_known);
	c->reissue = reissue;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r) < 0 && !rc)
		rc = fail(why, "cannot put back the registers of thread %d: %s",
		          (int)tid, strerror(errno));
	int sig = 0;
	if (c->nheld && c->in_sigdeliv) {
		/* The stop is a signal-delivery-stop (our SIGSEGV): the first
		 * held signal takes its place, delivered on the restored
		 * registers as it would have been. */
		ptrace(PTRACE_SETSIGINFO, tid, 0, &c->held[0]);
		sig = c->held[0].si_signo;
	}
	if (ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig) < 0 && !rc)
		rc = fail(why, "cannot detach from thread %d: %s", (int)tid,
		          strerror(errno));
	for (int i = sig ? 1 : 0; i < c->nheld; i++) {
		siginfo_t si = c->held[i];
		if (syscall(SYS_rt_tgsigqueueinfo, c->pid, tid, si.si_signo,
		            &si) < 0)
			syscall(SYS_tgkill, c->pid, tid, si.si_signo);
	}
out:
	if (stats) {
		double end = hp_mono_msf();
		memset(stats, 0, sizeof(*stats));
		stats->tid = tid;
		stats->tries = c->tries;
		stats->threads = c->threads;
		stats->seize_ms = c->t_seize ? c->t_seize - c->t0 : 0;
		stats->safe_ms = c->t_safe ? c->t_safe - c->t0 : 0;
		stats->total_ms = end - c->t0;
		stats->stopped_ms = c->t_safe ? end - c->t_stop : 0;
		stats->reissued = c->reissue;
		stats->reissue_cut_ms = c->reissue ? c->reissue_cut_ms : 0;
		stats->reissue_full = c->reissue && c->reissue_full;
		stats->held_signals = c->nheld;
		stats->entry_traps = c->entry_traps;
		stats->unwound = c->unwound;
	}
	ctx_free(c);
	return rc;
}

/* ---- loading a library ---------------------------------------------- */

/* The first link_map of ld.so's _r_debug list (r_map), read without
 * stopping anything. */
static int read_r_debug(pid_t pid, const struct tmaps *m, uint64_t *first,
                        char *why)
{
	const struct seg *ld = maps_lib(m, "ld-linux-x86-64.so.2", false);
	if (!ld)
		return fail(why, "%d has no dynamic loader mapped", (int)pid);
	char path[PATH_IN_TARGET_MAX], err[256];
	seg_file(pid, ld, path, sizeof(path));
	struct ielf e;
	if (ielf_open(path, &e, err, sizeof(err)))
		return fail(why, "cannot read the loader of %d: %s", (int)pid,
		            err);
	uint64_t v = 0;
	int rc = ielf_sym(&e, "_r_debug", &v, NULL, NULL);
	uint64_t r_debug = ld->start - e.load_min + v;
	ielf_close(&e);
	if (rc)
		return fail(why, "the loader of %d has no _r_debug", (int)pid);
	if (inject_read(pid, r_debug + 8, first, 8))
		return fail(why, "cannot read _r_debug in %d", (int)pid);
	return 0;
}

/* The link_map whose l_addr is bias, from ld.so's _r_debug list, read
 * without stopping anything. */
static int find_link_map(pid_t pid, const struct tmaps *m, uint64_t bias,
                         uint64_t *handle, char *why)
{
	uint64_t lm = 0;
	if (read_r_debug(pid, m, &lm, why))
		return -1;
	for (int i = 0; lm && i < 65536; i++) {
		uint64_t w[4]; /* l_addr, l_name, l_ld, l_next */
		if (inject_read(pid, lm, w, sizeof(w)))
			break;
		if (w[0] == bias) {
			*handle = lm;
			return 0;
		}
		lm = w[3];
	}
	return fail(why,
	            "the library is mapped in %d but not in its loader's list",
	            (int)pid);
}

/* If the file at path (our namespace, reachable in the target's) is
 * mapped in pid: 1 and *handle; 0 if not; -1 on error. */
static int already_loaded(pid_t pid, const char *path, uint64_t *handle,
                          char *why)
{
	struct stat sb;
	if (stat(path, &sb) < 0)
		return fail(why, "cannot use %s: %s", path, strerror(errno));
	struct tmaps m = {0};
	if (maps_load(pid, &m, why))
		return -1;
	int rc = 0;
	for (size_t i = 0; i < m.n; i++) {
		const struct seg *s = &m.v[i];
		if (s->offset != 0 || s->inode != sb.st_ino ||
		    s->path[0] != '/')
			continue;
		char in[PATH_IN_TARGET_MAX];
		struct stat ts;
		seg_file(pid, s, in, sizeof(in));
		if (stat(in, &ts) < 0 || ts.st_dev != sb.st_dev ||
		    ts.st_ino != sb.st_ino)
			continue;
		struct ielf e;
		char err[256];
		if (ielf_open(in, &e, err, sizeof(err))) {
			rc = fail(why, "cannot read %s: %s", path, err);
			break;
		}
		uint64_t bias = s->start - e.load_min;
		ielf_close(&e);
		rc = find_link_map(pid, &m, bias, handle, why) ? -1 : 1;
		break;
	}
	maps_free(&m);
	return rc;
}

int inject_loaded(pid_t pid, const char *path, uint64_t *handle, char *why)
{
	*handle = 0;
	return already_loaded(pid, path, handle, why);
}

int inject_dlopen_in(struct inject_ctx *c, const char *path, uint64_t *handle,
                     char *why)
{
	*handle = 0;
	uint64_t dlopen_fn = 0, dlerror_fn = 0, str = 0, ret = 0;
	const uint64_t none[6] = {0};
	if (inject_libc_symbol(c, "dlopen", &dlopen_fn, why) ||
	    inject_libc_symbol(c, "dlerror", &dlerror_fn, why) ||
	    inject_write(c, path, strlen(path) + 1, &str, why))
		return -1;
	uint64_t args[6] = {str, RTLD_NOW, 0, 0, 0, 0};
	if (inject_remote_call(c, dlopen_fn, args, &ret, why))
		return -1;
	if (ret) {
		*handle = ret;
		return 0;
	}
	uint64_t msg = 0;
	char text[400] = "";
	if (inject_remote_call(c, dlerror_fn, none, &msg, why))
		return -1;
	if (msg) {
		/* Byte by byte would be slow; read what may be there. */
		for (size_t n = sizeof(text) - 1; n >= 16; n /= 2)
			if (inject_read(c->pid, msg, text, n) == 0) {
				text[n] = '\0';
				break;
			}
	}
	return fail(why, "dlopen(%s) in %d failed: %s", path, (int)c->pid,
	            text[0] ? text : "(no dlerror message)");
}

int inject_dlopen(pid_t pid, const char *path, const struct inject_opts *o,
                  uint64_t *handle, struct inject_stats *stats, char *why)
{
	if (stats)
		memset(stats, 0, sizeof(*stats));
	*handle = 0;
	if (inject_check(pid, why))
		return -1;
	char abs[PATH_MAX];
	if (!realpath(path, abs))
		return fail(why, "cannot use %s: %s", path, strerror(errno));
	if (inject_check_path(pid, abs, why))
		return -1;
	int loaded = already_loaded(pid, abs, handle, why);
	if (loaded)
		return loaded < 0 ? -1 : 0;
	struct inject_ctx *c = NULL;
	if (inject_attach(pid, o, &c, why) || !c)
		return -1;
	int rc = inject_dlopen_in(c, abs, handle, why);
	char why2[INJECT_WHY] = "";
	if (inject_detach(c, stats, rc ? why2 : why) && !rc)
		rc = -1;
	return rc;
}

int inject_symbol_addr(pid_t pid, uint64_t handle, const char *symbol,
                       uint64_t *addr, char *why)
{
	uint64_t w[2]; /* l_addr, l_name */
	if (!handle || inject_read(pid, handle, w, sizeof(w)))
		return fail(why, "cannot read the link_map %#llx in %d",
		            (unsigned long long)handle, (int)pid);
	char name[PATH_MAX] = "";
	if (w[1]) {
		for (size_t n = sizeof(name) - 1; n >= 64; n /= 2)
			if (inject_read(pid, w[1], name, n) == 0) {
				name[n] = '\0';
				break;
			}
	}
	char file[PATH_IN_TARGET_MAX];
	if (name[0] == '/')
		snprintf(file, sizeof(file), "/proc/%d/root%s", (int)pid, name);
	else if (!name[0])
		snprintf(file, sizeof(file), "/proc/%d/exe", (int)pid);
	else
		snprintf(file, sizeof(file), "/proc/%d/map_files/%llx-",
		         (int)pid, (unsigned long long)w[0]);
	if (name[0] && name[0] != '/') {
		/* A relative l_name: the file behind the mapping at l_addr. */
		struct tmaps m = {0};
		if (maps_load(pid, &m, why))
			return -1;
		const struct seg *s = maps_at(&m, w[0]);
		if (s)
			seg_file(pid, s, file, sizeof(file));
		maps_free(&m);
	}
	struct ielf e;
	char err[256];
	if (ielf_open(file, &e, err, sizeof(err)))
		return fail(why,
		            "cannot read the library of link_map %#llx: %s",
		            (unsigned long long)handle, err);
	uint64_t v;
	int type = 0;
	int rc = ielf_sym(&e, symbol, &v, NULL, &type);
	ielf_close(&e);
	if (rc)
		return fail(why, "%s does not export %s",
		            name[0] ? name : "the executable", symbol);
	if (type == STT_GNU_IFUNC)
		return fail(why,
		            "%s in %s is an IFUNC (its address is chosen at "
		            "load time): not supported",
		            symbol, name[0] ? name : "the executable");
	*addr = w[0] + v;
	return 0;
}

int inject_call_symbol(pid_t pid, uint64_t handle, const char *symbol,
                       const uint64_t args[6], const struct inject_opts *o,
                       uint64_t *ret, struct inject_stats *stats, char *why)
{
	if (stats)
		memset(stats, 0, sizeof(*stats));
	uint64_t fn = 0;
	if (inject_symbol_addr(pid, handle, symbol, &fn, why))
		return -1;
	struct inject_ctx *c = NULL;
	if (inject_attach(pid, o, &c, why) || !c)
		return -1;
	int rc = inject_remote_call(c, fn, args, ret, why);
	char why2[INJECT_WHY] = "";
	if (inject_detach(c, stats, rc ? why2 : why))
		rc = -1;
	return rc;
}
