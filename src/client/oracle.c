/*
 * The unwind oracle: a differential check of the stack capture, compiled
 * in only with -DHP_UNWIND_ORACLE (the Makefile's libheapprof-oracle.so,
 * tests/integration/test_unwind_diff.sh); an empty unit otherwise.
 *
 * The recorder calls unwind_oracle_check right after each capture, from the
 * frame that captured, with the program's frames it got (leaf first: the
 * return address into the function that called malloc/new).  The oracle
 * unwinds again from its own frame with libgcc's _Unwind_Backtrace (a
 * different unwinder, with no cache), drops the frames that lie in
 * libheapprof's text (the oracle, the recorder, the hook, and a hook a
 * signal handler interrupted, past the signal frame), and compares
 * the rest with the capture: the same values (raw: a return address as
 * is, the exact pc for a frame interrupted by a signal) and the same
 * number of frames, or, when the capture stopped at max frames, the same
 * first n.  It counts captures, exact matches, mismatches and skips, keeps
 * the first ORACLE_KEEP mismatches, and at exit writes to stderr
 *
 *   heapprof: unwind oracle: N captures, E exact, M mismatches, S skipped
 *
 * then each kept mismatch, frame by frame with dladdr's names; every line
 * starts with "heapprof: ", like the client's other messages.
 *
 * The check path follows the client's rules: no malloc (the reference
 * stack goes into a thread-local buffer, kept mismatches into static
 * ones), no stdio, no lock of ours.  libgcc's unwinder finds FDEs with
 * _dl_find_object (glibc >= 2.35), which neither locks nor allocates.  It
 * runs inside the recorder, with the thread's re-entrancy guard held, so
 * an allocation made under it would be counted as nested_recorded (or, a
 * level deeper, reentrant_skipped): the test checks that both stay 0.
 */
#include "client/client.h"

#ifdef HP_UNWIND_ORACLE

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>

/* Reference frames kept per walk: every capture fits (max_frames <=
 * HP_MAX_FRAMES), with room to see that the reference is longer. */
#define ORACLE_FRAMES (HP_MAX_FRAMES + 16)
#define ORACLE_KEEP   3  /* mismatches kept for the report */
#define ORACLE_SHOW   64 /* frames of each stack kept per mismatch */

static uintptr_t self_lo, self_hi; /* libheapprof's text */
static _Atomic int oracle_ready;
/* The process that loaded us (or the fork child that inherited us): only
 * it reports, and only if it was profiled or captured.  A raw fork or
 * clone child, which ran no atfork handler, holds a copy of, or shares,
 * the counters of its parent; an unprofiled process has nothing to say. */
static pid_t oracle_pid;

/*
 * libgcc_s's unwinder, by dlsym on its own handle: libunwind.so.8 (which
 * the client links) also defines _Unwind_Backtrace and _Unwind_GetIPInfo,
 * on top of unw_step, and a plain reference could bind to those (the
 * global scope's first definition), which would compare libunwind with
 * itself.  Both come from the same library: a context is private to its
 * unwinder.
 */
typedef _Unwind_Reason_Code (*backtrace_fn)(_Unwind_Trace_Fn, void *);
typedef _Unwind_Ptr (*getipinfo_fn)(struct _Unwind_Context *, int *);
static backtrace_fn ref_backtrace;
static getipinfo_fn ref_getipinfo;

static _Atomic uint64_t n_captures, n_exact, n_mismatches, n_skipped;

struct oracle_walk {
	uint64_t pc[ORACLE_FRAMES];
	uint8_t sig[ORACLE_FRAMES]; /* _Unwind_GetIPInfo's ip_before_insn */
	uint32_t n;
	bool more;      /* the stack went on past the buffer */
	int32_t sig_at; /* the last frame a signal interrupted, or -1 */
	uint8_t busy;
};
/* Two: a capture nested in a hook (a signal handler's allocation) may
 * interrupt the walk of the capture under it. */
static __thread struct oracle_walk walk_tls[2]
        __attribute__((tls_model("initial-exec")));

struct oracle_kept {
	_Atomic int ready;
	uint32_t tid;
	bool truncated;
	bool ref_more;
	uint32_t n_cap, n_ref; /* full lengths */
	uint64_t cap[ORACLE_SHOW], ref[ORACLE_SHOW];
	uint8_t ref_sig[ORACLE_SHOW];
};
static struct oracle_kept kept[ORACLE_KEEP];

static void oracle_init(void)
{
	if (atomic_load_explicit(&oracle_ready, memory_order_acquire))
		return;
	uintptr_t lo, hi;
	if (!modules_text_range((const void *)&unwind_oracle_check, &lo, &hi))
		lo = hi = 0;
	/* Linked with --no-as-needed -lgcc_s: already loaded. */
	void *h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libgcc_s.so.1", RTLD_NOW);
	backtrace_fn bt =
	        h ? (backtrace_fn)dlsym(h, "_Unwind_Backtrace") : NULL;
	getipinfo_fn gi =
	        h ? (getipinfo_fn)dlsym(h, "_Unwind_GetIPInfo") : NULL;
	if (!bt || !gi) {
		bt = NULL;
		gi = NULL;
	}
	__atomic_store_n(&self_lo, lo, __ATOMIC_RELAXED);
	__atomic_store_n(&self_hi, hi, __ATOMIC_RELAXED);
	__atomic_store_n(&ref_backtrace, bt, __ATOMIC_RELAXED);
	__atomic_store_n(&ref_getipinfo, gi, __ATOMIC_RELAXED);
	atomic_store_explicit(&oracle_ready, 1, memory_order_release);
	if (!bt || !lo)
		client_log("unwind oracle",
		           !lo ? "libheapprof's text not found, every "
		                 "capture is skipped"
		               : "libgcc_s's _Unwind_Backtrace not found, "
		                 "every capture is skipped");
}

static _Unwind_Reason_Code oracle_step(struct _Unwind_Context *ctx, void *arg)
{
	struct oracle_walk *w = arg;
	int before = 0;
	uintptr_t ip = ref_getipinfo(ctx, &before);
	/* Inside heapprof: the leading frames (the oracle, the recorder,
	 * the hook), and, past a signal frame, a hook that a signal
	 * handler's allocation interrupted.  The capture leaves those out,
	 * and the frames the hook called since the signal (from the one the
	 * signal interrupted on): so does the reference. */
	if (ip >= self_lo && ip < self_hi) {
		if (w->sig_at >= 0) {
			w->n = (uint32_t)w->sig_at;
			w->sig_at = -1;
		}
		return _URC_NO_REASON;
	}
	/* The outermost frame (_start, a thread's clone, a context's
	 * __start_context) marks its return address undefined; libgcc then
	 * still calls us once more, with ip 0 (glibc's backtrace() drops
	 * that entry too).  Not a frame. */
	if (ip == 0)
		return _URC_END_OF_STACK;
	if (w->n == ORACLE_FRAMES) {
		w->more = true;
		return _URC_END_OF_STACK; /* stops the walk */
	}
	if (before)
		w->sig_at = (int32_t)w->n;
	w->sig[w->n] = (uint8_t)(before != 0);
	w->pc[w->n++] = ip;
	return _URC_NO_REASON;
}

static void keep_mismatch(uint64_t k, const uint64_t *pcs, uint32_t n,
                          bool truncated, const struct oracle_walk *w)
{
	if (k >= ORACLE_KEEP)
		return;
	struct oracle_kept *m = &kept[k];
	m->tid = (uint32_t)syscall(SYS_gettid);
	m->truncated = truncated;
	m->ref_more = w->more;
	m->n_cap = n;
	m->n_ref = w->n;
	for (uint32_t i = 0; i < n && i < ORACLE_SHOW; i++)
		m->cap[i] = pcs[i];
	for (uint32_t i = 0; i < w->n && i < ORACLE_SHOW; i++) {
		m->ref[i] = w->pc[i];
		m->ref_sig[i] = w->sig[i];
	}
	atomic_store_explicit(&m->ready, 1, memory_order_release);
}

void unwind_oracle_check(const uint64_t *pcs, uint32_t n, bool truncated,
                         bool skip)
{
	atomic_fetch_add_explicit(&n_captures, 1, memory_order_relaxed);
	struct oracle_walk *w = &walk_tls[walk_tls[0].busy ? 1 : 0];
	/* The constructor ran before the library could attach (its
	 * priority puts it before client_init); nothing here may dlopen. */
	if (skip || w->busy ||
	    !atomic_load_explicit(&oracle_ready, memory_order_acquire) ||
	    !ref_backtrace || !self_lo) {
		atomic_fetch_add_explicit(&n_skipped, 1, memory_order_relaxed);
		return;
	}
	int saved = errno;
	w->busy = 1;
	w->n = 0;
	w->more = false;
	w->sig_at = -1;
	ref_backtrace(oracle_step, w);

	bool same;
	if (truncated)
		same = w->n >= n;
	else
		same = w->n == n && !w->more;
	for (uint32_t i = 0; same && i < n; i++)
		same = w->pc[i] == pcs[i];
	if (same) {
		atomic_fetch_add_explicit(&n_exact, 1, memory_order_relaxed);
	} else {
		uint64_t k = atomic_fetch_add_explicit(&n_mismatches, 1,
		                                       memory_order_relaxed);
		keep_mismatch(k, pcs, n, truncated, w);
	}
	w->busy = 0;
	errno = saved;
}

/* ---- the report at exit: one write(2) per line, no stdio ------------ */

struct line {
	char buf[512];
	size_t n;
};

static void put_str(struct line *l, const char *s)
{
	size_t len = strlen(s);
	if (len > sizeof(l->buf) - 1 - l->n)
		len = sizeof(l->buf) - 1 - l->n;
	memcpy(l->buf + l->n, s, len);
	l->n += len;
}

static void put_num(struct line *l, uint64_t v, unsigned base)
{
	char tmp[24];
	int i = 0;
	do {
		tmp[i++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v && i < (int)sizeof(tmp));
	if (base == 16)
		put_str(l, "0x");
	while (i > 0 && l->n < sizeof(l->buf) - 1)
		l->buf[l->n++] = tmp[--i];
}

static void put_end(struct line *l)
{
	l->buf[l->n++] = '\n';
	ssize_t w = write(2, l->buf, l->n);
	(void)w;
	l->n = 0;
}

/* "name+0xoff (module)" of pc, or "module+0xoff", or "?".  A return
 * address is looked up one byte back (a call at the very end of a
 * function returns past it); the exact pc of a signal frame as is. */
static void put_sym(struct line *l, uint64_t pc, bool exact)
{
	Dl_info di;
	uintptr_t at = exact || pc == 0 ? pc : pc - 1;
	if (pc == 0 || !dladdr((void *)at, &di) || !di.dli_fname) {
		put_str(l, "?");
		return;
	}
	const char *mod = strrchr(di.dli_fname, '/');
	mod = mod ? mod + 1 : di.dli_fname;
	if (di.dli_sname && di.dli_saddr) {
		put_str(l, di.dli_sname);
		put_str(l, "+");
		put_num(l, pc - (uintptr_t)di.dli_saddr, 16);
		put_str(l, " (");
		put_str(l, *mod ? mod : "main program");
		put_str(l, ")");
	} else {
		put_str(l, *mod ? mod : "main program");
		put_str(l, "+");
		put_num(l, pc - (uintptr_t)di.dli_fbase, 16);
	}
}

static void report_mismatch(unsigned k, const struct oracle_kept *m)
{
	struct line l = {.n = 0};
	put_str(&l, "heapprof: unwind oracle: mismatch ");
	put_num(&l, k + 1, 10);
	put_str(&l, ", thread ");
	put_num(&l, m->tid, 10);
	put_str(&l, ": capture ");
	put_num(&l, m->n_cap, 10);
	put_str(&l, m->truncated ? " frames (truncated)" : " frames");
	put_str(&l, ", reference ");
	put_num(&l, m->n_ref, 10);
	put_str(&l, m->ref_more ? "+ frames" : " frames");
	put_end(&l);
	uint32_t rows = m->n_cap > m->n_ref ? m->n_cap : m->n_ref;
	if (rows > ORACLE_SHOW)
		rows = ORACLE_SHOW;
	for (uint32_t i = 0; i < rows; i++) {
		bool hc = i < m->n_cap, hr = i < m->n_ref;
		bool differ = !hc || !hr || m->cap[i] != m->ref[i];
		put_str(&l, differ ? "heapprof:   ! #" : "heapprof:     #");
		put_num(&l, i, 10);
		put_str(&l, " capture ");
		if (hc) {
			put_num(&l, m->cap[i], 16);
			put_str(&l, " ");
			put_sym(&l, m->cap[i], hr && m->ref_sig[i]);
		} else {
			put_str(&l, "-");
		}
		put_str(&l, " | reference ");
		if (hr) {
			put_num(&l, m->ref[i], 16);
			if (m->ref_sig[i])
				put_str(&l, " [signal frame]");
			if (differ) {
				put_str(&l, " ");
				put_sym(&l, m->ref[i], m->ref_sig[i]);
			}
		} else {
			put_str(&l, "-");
		}
		put_end(&l);
	}
}

static void oracle_report(void)
{
	int saved = errno;
	if (getpid() != oracle_pid ||
	    (atomic_load(&n_captures) == 0 && atomic_load(&hp_active) == 0)) {
		errno = saved;
		return;
	}
	struct line l = {.n = 0};
	put_str(&l, "heapprof: unwind oracle: ");
	put_num(&l, atomic_load(&n_captures), 10);
	put_str(&l, " captures, ");
	put_num(&l, atomic_load(&n_exact), 10);
	put_str(&l, " exact, ");
	put_num(&l, atomic_load(&n_mismatches), 10);
	put_str(&l, " mismatches, ");
	put_num(&l, atomic_load(&n_skipped), 10);
	put_str(&l, " skipped");
	put_end(&l);
	for (unsigned k = 0; k < ORACLE_KEEP; k++)
		if (atomic_load_explicit(&kept[k].ready, memory_order_acquire))
			report_mismatch(k, &kept[k]);
	errno = saved;
}

/* A fork child counts its own captures (it inherited the parent's): with
 * --follow-fork it reports them at exit. */
static void oracle_fork_child(void)
{
	atomic_store(&n_captures, 0);
	atomic_store(&n_exact, 0);
	atomic_store(&n_mismatches, 0);
	atomic_store(&n_skipped, 0);
	for (unsigned k = 0; k < ORACLE_KEEP; k++)
		atomic_store(&kept[k].ready, 0);
	walk_tls[0].busy = 0;
	walk_tls[1].busy = 0;
	oracle_pid = getpid();
}

/* Before client_init (default priority), which may attach and sample. */
__attribute__((constructor(101))) static void oracle_ctor(void)
{
	int saved = errno;
	oracle_pid = getpid();
	oracle_init();
	pthread_atfork(NULL, NULL, oracle_fork_child);
	errno = saved;
}

/* A destructor runs in _dl_fini, after the program's atexit handlers and
 * destructors (the preloaded library was initialised before them). */
__attribute__((destructor)) static void oracle_dtor(void)
{
	oracle_report();
}

#else
/* ISO C forbids an empty translation unit. */
typedef int unwind_oracle_unused;
#endif
