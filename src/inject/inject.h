/*
 * Loading a shared library into a running process that never loaded
 * heapprof, by ptrace and without a debugger (issue 21; docs/ATTACH.md
 * says what each rule is for).  x86-64 Linux, glibc 2.34 or later.
 *
 * inject_check refuses, before anything is stopped, a process we cannot
 * or must not inject into.  inject_dlopen loads a library with the
 * target's own dlopen(path, RTLD_NOW) and returns its link_map;
 * inject_call_symbol calls an exported function of it afterwards.  Each
 * of them stops one thread of the target, at a point proven outside the
 * allocator and the loader, for the time of the calls only; the other
 * threads run on.  The thread resumes with its registers, signal mask and
 * interrupted system call exactly as the kernel left them.
 *
 * The lower level (inject_attach, inject_remote_call, inject_write,
 * inject_detach) is what they are made of, for a caller that needs
 * several calls under one stop.
 *
 * Every function that can fail returns -1 and writes one line saying why
 * (no newline) into why[INJECT_WHY]; nothing here prints.  The caller
 * runs in the collector: it may allocate.  One injection into a process
 * at a time (ptrace allows one tracer).  The thread that injects becomes
 * the tracer and waits for the target's threads by their ids: no other
 * thread of the caller's process may waitpid(-1) (or wait with __WALL)
 * meanwhile, or it could take a stop meant for the injector.
 */
#ifndef HEAPPROF_INJECT_H
#define HEAPPROF_INJECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define INJECT_WHY 512

/* Options of one injection; NULL or zeroed fields take the defaults. */
struct inject_opts {
	int budget_ms;       /* to find a safe point (default 50) */
	int call_timeout_ms; /* for one remote call to return (default 10000) */
	bool checked;        /* the caller ran inject_check just before */
	/* One more range no thread may be in, nor have a frame in, at the
	 * safe point (and, for inject_stop_others, the only one): e.g. the
	 * text of heapprof's library at a detach.  0, 0: none. */
	uint64_t deny_lo, deny_hi;
	const char *deny_what;
};

/* What the last attach took, for the caller's report (and the tests). */
struct inject_stats {
	pid_t tid;       /* the thread injected into */
	int tries;       /* threads stopped until a safe one */
	int threads;     /* threads the process had */
	double seize_ms; /* from the start to the first stop */
	double safe_ms;  /* from the start to the safe point */
	double total_ms; /* from the start to the detach */
	/* The injected thread's own stop: from its stop to its detach (the
	 * threads tried before it were each stopped only for a check). */
	double stopped_ms;
	int reissued;       /* 1: an EINTR-only call was issued again */
	int reissue_cut_ms; /* ... its timeout cut by what it had waited */
	int reissue_full;   /* 1: ... a timed one, with its whole timeout (no
	                       measure of its wait, or nowhere to put one) */
	int held_signals;   /* signals that arrived and were re-delivered */
	int entry_traps;    /* threads run from inside the allocator to its
	                       next entry (a breakpoint) */
	int unwound;        /* stacks checked by unwinding (not scanned) */
};

/* 0 if pid may be injected into; -1 with the one-line reason otherwise:
 * no ptrace rights (another user, no CAP_SYS_PTRACE, Yama, not
 * dumpable), already traced, a static executable or one with no dynamic
 * loader, no glibc >= 2.34 (musl...), a 32-bit or x32 executable, a
 * seccomp filter or strict mode.  Reads /proc only. */
int inject_check(pid_t pid, char *why);

/* 0 if path (a shared library in our mount namespace) is the same file
 * in pid's mount namespace (/proc/PID/root/path); -1 and which it is
 * (missing there, or another file) otherwise. */
int inject_check_path(pid_t pid, const char *path, char *why);

/* Loads path into pid with the target's dlopen(path, RTLD_NOW) and sets
 * *handle to its link_map.  A library that is mapped already (the same
 * file) is not loaded again: its link_map is looked up in the loader's
 * list (r_debug) without stopping anything.  On a NULL from dlopen, why
 * holds the target's dlerror().  stats (may be NULL) gets the timings;
 * its fields are zero when nothing was stopped. */
int inject_dlopen(pid_t pid, const char *path, const struct inject_opts *o,
                  uint64_t *handle, struct inject_stats *stats, char *why);

/* The address in pid of symbol, exported by the library whose link_map
 * is handle: the link_map's l_addr plus the symbol's value in the
 * library's .dynsym (read from the file through /proc/PID/root). */
int inject_symbol_addr(pid_t pid, uint64_t handle, const char *symbol,
                       uint64_t *addr, char *why);

/* Calls symbol(args[0..5]) of that library in pid (at a safe point, as
 * inject_dlopen) and sets *ret to what it returned (rax). */
int inject_call_symbol(pid_t pid, uint64_t handle, const char *symbol,
                       const uint64_t args[6], const struct inject_opts *o,
                       uint64_t *ret, struct inject_stats *stats, char *why);

/* Parts of inject_check, apart for the tests: the decision for Yama's
 * ptrace_scope (scope, whether we have CAP_SYS_PTRACE, whether pid
 * descends from us), and the checks of the executable at path (class,
 * machine, PT_INTERP; pid is for the message). */
int inject_yama_refusal(int scope, bool cap, bool descendant, pid_t pid,
                        char *why);
int inject_check_exe(const char *path, pid_t pid, char *why);

/* ---- the machinery -------------------------------------------------- */

struct inject_ctx;

/* Seizes pid's threads one at a time until one stops at a safe point
 * (within the budget), resumes the others, saves the chosen one's
 * registers, extended state and signal mask and blocks every signal in
 * it.  Runs inject_check first. */
int inject_attach(pid_t pid, const struct inject_opts *o,
                  struct inject_ctx **out, char *why);
/* Calls fn(args[0..5]) on the stopped thread, on its own stack below the
 * red zone and below what inject_write put there; *ret is rax. */
int inject_remote_call(struct inject_ctx *c, uint64_t fn,
                       const uint64_t args[6], uint64_t *ret, char *why);
/* Copies len bytes into the thread's stack below the red zone (and below
 * earlier writes), 16-byte aligned; *addr is where they are. */
int inject_write(struct inject_ctx *c, const void *buf, size_t len,
                 uint64_t *addr, char *why);
/* 1 and *handle (its link_map) if the file at path (absolute) is mapped
 * in pid already, 0 if not, -1 on error.  Reads /proc only. */
int inject_loaded(pid_t pid, const char *path, uint64_t *handle, char *why);
/* dlopen(path, RTLD_NOW) on c's stopped thread (path absolute, as the
 * target sees it); *handle is the link_map, or why has its dlerror. */
int inject_dlopen_in(struct inject_ctx *c, const char *path, uint64_t *handle,
                     char *why);
/* Reads len bytes at addr in the target. */
int inject_read(pid_t pid, uint64_t addr, void *buf, size_t len);
/* The address of a function of the target's libc, by its .dynsym name
 * (the default version); an IFUNC's resolver is called (remotely) for
 * the implementation. */
int inject_libc_symbol(struct inject_ctx *c, const char *name, uint64_t *addr,
                       char *why);
/* With c's thread stopped: stops every other thread of the process too
 * and checks that none is in, or has a frame in, the options' extra deny
 * range (unwound, or its stack scanned when it cannot be).  0: all
 * stopped and outside it (inject_resume_others lets them go); 1: one was
 * inside (why says which; every other thread runs again: try later);
 * -1: error (every other thread runs again).  A thread stopped in a call
 * that returns EINTR to a stop has it issued again when let go. */
int inject_stop_others(struct inject_ctx *c, char *why);
/* Where a reissued call's new timeout (a struct timespec) may be written
 * in the target: INJECT_REISSUE_SLOTS of them at addr (heapprof's
 * library's heapprof_internal_reissue, once loaded).  Without, a call
 * whose timeout is a timespec keeps its whole timeout when reissued. */
#define INJECT_REISSUE_SLOTS 8
void inject_set_reissue_area(struct inject_ctx *c, uint64_t addr);
void inject_resume_others(struct inject_ctx *c);
/* Puts back the mask, the extended state and the registers, re-delivers
 * the signals that arrived meanwhile, detaches and frees c.  stats (may
 * be NULL) gets the timings.  -1 if the thread could not be restored
 * (gone: why says so). */
int inject_detach(struct inject_ctx *c, struct inject_stats *stats, char *why);

#endif
