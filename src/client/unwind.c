/*
 * The stack capture inside the profiled program, written for where it
 * runs: inside any allocation hook, in any thread, in signal handlers, on
 * small stacks.  It makes no system call, takes no lock, allocates
 * nothing, opens no descriptor, is no cancellation point, and reads
 * memory only where it can prove the read safe:
 *
 *   - The program's stack, from the current sp up to the top of the stack
 *     sp is on, when that stack is one of: the main thread's (its top is
 *     __libc_stack_end's page; it grows down at most RLIMIT_STACK, and
 *     the kernel keeps other mappings further away than that); a glibc
 *     thread's own stack (glibc keeps its bounds in the thread descriptor
 *     at the thread pointer; where in it is found once, by looking for the
 *     one pair of words that bounds both sp and the descriptor itself, and
 *     every thread's values are checked against that rule again); the
 *     alternate signal stack the thread set with sigaltstack(); a stack
 *     made for makecontext().  hooks.c interposes the last two, so
 *     heapprof hears of them.  On any other stack the allocation is
 *     recorded with its caller only, and counted.
 *   - The code and .eh_frame of loaded objects, found through
 *     _dl_find_object (cfi.c).
 *
 * A read outside those bounds, a frame whose CFA does not go up the
 * stack, or a frame no rule describes ends the unwind; the stack keeps
 * the frames found so far and the capture says it stopped early.
 *
 * Per frame the cost is a rule lookup in cfi.c's cache and two or three
 * loads: about what a frame-pointer walk costs.  The return addresses on
 * the program's stack are never changed (its backtrace(), exceptions,
 * debuggers and shadow stacks see what they would see bare).
 *
 * Our own frames (hook, recorder, this) are skipped by their frame
 * pointers (libheapprof is built with them), so the unwind starts at the
 * program's call into the hook with the registers the program had there.
 */
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "client/client.h"

static uintptr_t self_lo, self_hi; /* libheapprof.so text */

/* The main thread's stack: [main_lo, main_hi). */
static uintptr_t main_lo, main_hi;

/* glibc's thread descriptor (struct pthread) at the thread pointer: its
 * size, where it keeps the thread's kernel id, and where its stack block
 * (stackblock, stackblock_size, guardsize) is, found at the first capture
 * on a thread other than the main one: -1 not yet, -2 not found. */
static uint32_t pd_size;
static int32_t pd_tid_off = -1;
static _Atomic int32_t pd_stack_off = -1;

extern void *__libc_stack_end;

void unwind_early_setup(uintptr_t stack_top, uintptr_t span, const void *self)
{
	if (!main_hi && stack_top) {
		main_hi = (stack_top | 4095) + 1;
		main_lo = main_hi - span;
	}
	struct dl_find_object fo;
	if (!self_lo && _dl_find_object((void *)(uintptr_t)self, &fo) == 0) {
		self_lo = (uintptr_t)fo.dlfo_map_start;
		self_hi = (uintptr_t)fo.dlfo_map_end;
	}
}

void unwind_setup(void)
{
	uintptr_t lo, hi;
	if (modules_text_range((const void *)&unwind_setup, &lo, &hi)) {
		self_lo = lo;
		self_hi = hi;
	}
	uintptr_t top = (uintptr_t)__libc_stack_end;
	if (top) {
		main_hi = (top | 4095) + 1;
		struct rlimit rl;
		uint64_t span = 8u << 20;
		if (getrlimit(RLIMIT_STACK, &rl) == 0)
			span = rl.rlim_cur;
		if (span > (1ull << 30) || span < (128u << 10))
			span = span < (128u << 10) ? (128u << 10)
			                           : (1ull << 30);
		main_lo = main_hi - span;
	}
	/* libthread_db's descriptions of glibc's struct pthread: exported
	 * (GLIBC_PRIVATE) for debuggers, stable in meaning: a size and
	 * {bit size, count, offset} triples. */
	const uint32_t *sz = dlsym(RTLD_DEFAULT, "_thread_db_sizeof_pthread");
	const uint32_t *tid = dlsym(RTLD_DEFAULT, "_thread_db_pthread_tid");
	if (sz && *sz >= 64 && *sz <= 65536)
		pd_size = *sz;
	if (tid && pd_size && tid[0] == 32 && tid[2] + 4 <= pd_size)
		pd_tid_off = (int32_t)tid[2];
	/* The threads' records (thread.c): their key, the fork child's
	 * reset. */
	thread_setup();
}

/* At attach: the rule cache and the capture contexts (unwind_ctx.c). */
void unwind_init(void)
{
	cfi_init();
	unwind_ctx_init();
}

uint32_t unwind_thread_id(void)
{
	if (pd_tid_off >= 0) {
		int32_t tid;
		__builtin_memcpy(&tid,
		                 (const void *)(thread_pointer() +
		                                (uintptr_t)pd_tid_off),
		                 4);
		if (tid > 0)
			return (uint32_t)tid;
	}
	return (uint32_t)syscall(SYS_gettid);
}

static inline bool is_ours(uintptr_t pc)
{
	return pc >= self_lo && pc < self_hi;
}

#ifdef HP_UNWIND_ORACLE
bool unwind_is_ours(uintptr_t pc)
{
	return is_ours(pc);
}
#endif

/* ---- which stack is sp on ------------------------------------------- */

struct bounds {
	uintptr_t lo; /* lowest usable address (0: unknown) */
	uintptr_t hi; /* reads stay below */
};

/* Stacks made for makecontext(): the newest win. */
#define KNOWN_STACKS 64
static struct {
	_Atomic uintptr_t lo, hi; /* hi 0: empty, 1: being written */
} known[KNOWN_STACKS];
static _Atomic uint32_t known_next;

void unwind_note_stack(const void *sp, size_t size)
{
	uintptr_t lo = (uintptr_t)sp, hi = lo + size;
	if (!sp || size < 1024 || hi < lo)
		return;
	uint32_t i = atomic_fetch_add_explicit(&known_next, 1,
	                                       memory_order_relaxed) %
	             KNOWN_STACKS;
	uintptr_t old =
	        atomic_load_explicit(&known[i].hi, memory_order_relaxed);
	if (old == 1 || !atomic_compare_exchange_strong_explicit(
	                        &known[i].hi, &old, 1, memory_order_acquire,
	                        memory_order_relaxed))
		return;
	atomic_store_explicit(&known[i].lo, lo, memory_order_relaxed);
	atomic_store_explicit(&known[i].hi, hi, memory_order_release);
}

void unwind_note_altstack(const void *sp, size_t size, int flags)
{
	/* A thread without a record cannot keep it: a capture on that
	 * stack keeps the caller only (counted, stack_unbounded). */
	struct client_thread *t = client_thread();
	if (!t)
		return;
	uintptr_t lo = (uintptr_t)sp;
	if ((flags & SS_DISABLE) || !sp || lo + size < lo) {
		t->alt_lo = t->alt_hi = 0;
		return;
	}
	t->alt_hi = 0; /* a handler reading it meanwhile sees none */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->alt_lo = lo;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->alt_hi = lo + size;
}

static bool known_stack(uintptr_t sp, struct bounds *b)
{
	uint32_t next = atomic_load_explicit(&known_next, memory_order_acquire);
	uint32_t n = next < KNOWN_STACKS ? next : KNOWN_STACKS;
	for (uint32_t k = 1; k <= n; k++) {
		uint32_t i = (next - k) % KNOWN_STACKS;
		uintptr_t hi = atomic_load_explicit(&known[i].hi,
		                                    memory_order_acquire);
		uintptr_t lo = atomic_load_explicit(&known[i].lo,
		                                    memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (hi <= 1 || atomic_load_explicit(&known[i].hi,
		                                    memory_order_relaxed) != hi)
			continue;
		if (sp >= lo && sp < hi) {
			b->lo = lo;
			b->hi = hi;
			return true;
		}
	}
	return false;
}

static inline uintptr_t word_at(uintptr_t a)
{
	uintptr_t v;
	__builtin_memcpy(&v, (const void *)a, sizeof(v));
	return v;
}

/* Does the triple at offset off of the descriptor at tp bound sp, with the
 * descriptor at the top of the block, as glibc lays a thread out? */
static bool pd_stack_at(uintptr_t tp, uint32_t off, uintptr_t sp,
                        struct bounds *b)
{
	uintptr_t block = word_at(tp + off);
	uintptr_t size = word_at(tp + off + 8);
	uintptr_t guard = word_at(tp + off + 16);
	uintptr_t end = block + size;
	if (!block || size < 4096 || end < block || guard >= size)
		return false;
	if (!(sp > block + guard && sp < end && tp > block && tp < end))
		return false;
	/* The descriptor sits at the top of the block, below at most the
	 * static TLS alignment's slack. */
	if (end - tp < pd_size || end - tp > (uintptr_t)pd_size + 4096)
		return false;
	b->lo = block + guard;
	b->hi = end;
	return true;
}

/* This thread's own stack, from glibc's thread descriptor, if sp is on
 * it. */
static bool thread_stack_find(uintptr_t sp, struct bounds *b)
{
	if (!pd_size)
		return false;
	uintptr_t tp = thread_pointer();
	int32_t off = atomic_load_explicit(&pd_stack_off, memory_order_relaxed);
	if (off == -1) {
		/* Look for the one offset that fits; more than one: give up
		 * (never guess). */
		int32_t found = -1;
		for (uint32_t o = 0; o + 24 <= pd_size; o += 8) {
			if (!pd_stack_at(tp, o, sp, b))
				continue;
			if (found >= 0) {
				found = -2;
				break;
			}
			found = (int32_t)o;
		}
		/* None: maybe not a glibc thread stack; later. */
		if (found == -1)
			return false;
		int32_t expect = -1;
		atomic_compare_exchange_strong_explicit(
		        &pd_stack_off, &expect, found, memory_order_relaxed,
		        memory_order_relaxed);
		off = atomic_load_explicit(&pd_stack_off, memory_order_relaxed);
	}
	return off >= 0 && pd_stack_at(tp, (uint32_t)off, sp, b);
}

/* The same, once per record.  The bounds are written before stack_tried:
 * a signal handler's capture that interrupts this one looks again and
 * finds the same values. */
static void thread_stack(struct client_thread *t, uintptr_t sp)
{
	struct bounds b;
	if (thread_stack_find(sp, &b)) {
		t->stack_lo = b.lo;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t->stack_hi = b.hi;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
	t->stack_tried = 1;
}

/* The bounds of the stack sp is on; false when heapprof cannot prove
 * them.  t: this thread's record (NULL: none; its own stack is looked up
 * each time, and an alternate signal stack is not known). */
static bool stack_bounds(struct client_thread *t, uintptr_t sp,
                         struct bounds *b)
{
	if (HP_LIKELY(t != NULL)) {
		if (sp >= t->stack_lo && sp < t->stack_hi) {
			b->lo = t->stack_lo;
			b->hi = t->stack_hi;
			return true;
		}
		uintptr_t ahi = t->alt_hi;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		uintptr_t alo = t->alt_lo;
		if (sp >= alo && sp < ahi) {
			b->lo = alo;
			b->hi = ahi;
			return true;
		}
	}
	if (sp >= main_lo && sp < main_hi) {
		b->lo = main_lo;
		b->hi = main_hi;
		return true;
	}
	if (!t) {
		if (thread_stack_find(sp, b))
			return true;
	} else if (!t->stack_tried) {
		thread_stack(t, sp);
		if (sp >= t->stack_lo && sp < t->stack_hi) {
			b->lo = t->stack_lo;
			b->hi = t->stack_hi;
			return true;
		}
	}
	return known_stack(sp, b);
}

bool unwind_frame_gone(uintptr_t mark, uintptr_t ra, uintptr_t here)
{
	/* Code that runs while the hook at mark is live (a signal handler
	 * that interrupted it, and what that calls) runs below it on its
	 * stack, or on another stack: on the same stack at or above it, the
	 * hook's frame was left (a longjmp out of such a handler).  And a
	 * live frame keeps its return address: another word there (a deeper
	 * call since wrote over it) says the same.  That word is read only
	 * on a stack that is surely mapped: the one we run on, the thread's
	 * own, the main thread's. */
	struct client_thread *t = client_thread();
	struct bounds b;
	if (!stack_bounds(t, here, &b) || !b.lo)
		return false;
	if (mark >= b.lo && mark <= b.hi - 16)
		return here >= mark || word_at(mark + 8) != ra;
	struct bounds own = {0, 0};
	if (t) {
		own.lo = t->stack_lo;
		own.hi = t->stack_hi;
	} else if (!thread_stack_find(mark, &own)) {
		own.lo = own.hi = 0;
	}
	if ((mark >= own.lo && mark + 16 <= own.hi) ||
	    (mark >= main_lo && mark + 16 <= main_hi))
		return word_at(mark + 8) != ra;
	return false;
}

/* ---- the walk ------------------------------------------------------- */

struct regs {
	uintptr_t pc, sp, bp;
	bool bp_ok; /* bp holds the caller's rbp (not lost by a rule) */
};

/* A word of [lo, hi) at a, if a..a+8 lies in it. */
static inline bool load(const struct bounds *b, uintptr_t lo, uintptr_t a,
                        uintptr_t *out)
{
	if (a < lo || a > b->hi - 8 || (a & 7))
		return false;
	*out = word_at(a);
	return true;
}

/* Offsets of rip, rsp, rbp in the kernel's ucontext on x86-64. */
#define UC_GREGS ((uintptr_t) __builtin_offsetof(ucontext_t, uc_mcontext))

/* unwind_memo_frame.flags (see "Reuse" below). */
#define MF_BP_OK  1u
#define MF_EXACT  2u
#define MF_OPAQUE 4u /* the step read more than ra_at and bp_at */
#define MF_END    8u /* the step ended the walk by its rule alone */

/* What a step read (for the memo): where the return address and rbp
 * were (0: not read), and whether it read more than those two words. */
struct step_read {
	uintptr_t ra_at, bp_at;
	bool opaque;
};

/* One step from the frame at r (its rule c) to its caller.  0: done (the
 * outermost frame), 1: stepped, 2: stepped through a signal frame, -1:
 * stopped early. */
static int step(struct client_thread *t, struct capture_ctx *cx, struct regs *r,
                struct bounds *b, struct cfi_rule c, bool *exact, bool dwarf,
                struct step_read *rd)
{
	uintptr_t cfa, v;
	rd->ra_at = 0;
	rd->bp_at = 0;
	rd->opaque = false;
	switch (c.kind) {
	case CFI_END:
		return 0;
	case CFI_SIGNAL: {
		/* The handler returned here with sp at the kernel's ucontext.
		 */
		rd->opaque = true;
		uintptr_t g = r->sp + UC_GREGS;
		uintptr_t pc, sp, bp;
		if (!load(b, r->sp, g + 8 * REG_RIP, &pc) ||
		    !load(b, r->sp, g + 8 * REG_RSP, &sp) ||
		    !load(b, r->sp, g + 8 * REG_RBP, &bp))
			return -1;
		/* The interrupted code may run on another stack. */
		struct bounds nb;
		if (!stack_bounds(t, sp, &nb))
			return -1;
		*b = nb;
		r->pc = pc;
		r->sp = sp;
		r->bp = bp;
		r->bp_ok = true;
		*exact = true;
		return pc ? 2 : 0;
	}
	case CFI_NOCFI:
	case CFI_NOMODULE:
		/* No rule: the frame-pointer chain, where it is there. */
		if (r->bp_ok && r->bp == 0)
			return 0; /* the chain's end, as thread starts mark it
			           */
		if (!r->bp_ok || r->bp < r->sp ||
		    !load(b, r->sp, r->bp + 8, &v))
			return -1;
		cfa = r->bp + 16;
		r->pc = v;
		rd->ra_at = r->bp + 8;
		rd->bp_at = r->bp;
		if (!load(b, r->sp, r->bp, &r->bp))
			return -1;
		r->sp = cfa;
		*exact = false;
		if (!r->pc)
			return 0;
		/* Without --unwind fp, a frame found this way must return into
		 * code we know. */
		return !dwarf || cfi_rule_for(cx, r->pc, false).kind !=
		                               CFI_NOMODULE
		               ? 1
		               : -1;
	case CFI_FRAME:
		break;
	default:
		return -1;
	}
	if (c.cfa == CFI_CFA_SP) {
		cfa = r->sp + (intptr_t)c.cfa_off;
	} else {
		if (!r->bp_ok)
			return -1;
		cfa = r->bp + (intptr_t)c.cfa_off;
		if (c.cfa == CFI_CFA_DEREF_BP) {
			rd->opaque = true;
			if (!load(b, r->sp, cfa, &cfa))
				return -1;
		}
	}
	/* The caller's frame is above this one. */
	if (cfa <= r->sp || cfa > b->hi)
		return -1;
	uintptr_t ra;
	rd->ra_at = cfa + 8 * (intptr_t)c.ra_off8;
	if (!load(b, r->sp, rd->ra_at, &ra))
		return -1;
	switch (c.bp) {
	case BP_SAME:
		break;
	case BP_AT_CFA:
		/* A slot below sp was popped already (an epilogue after
		 * `leave` or `pop %rbp`, whose CFI keeps the old rule): rbp
		 * holds the caller's value again. */
		if (cfa + (intptr_t)c.bp_off < r->sp)
			break;
		rd->bp_at = cfa + (intptr_t)c.bp_off;
		if (!load(b, r->sp, rd->bp_at, &v))
			return -1;
		r->bp = v;
		r->bp_ok = true;
		break;
	case BP_AT_BP:
		rd->bp_at = r->bp + (intptr_t)c.bp_off;
		if (!r->bp_ok || !load(b, r->sp, rd->bp_at, &v))
			return -1;
		r->bp = v;
		break;
	default:
		r->bp_ok = false;
		break;
	}
	r->sp = cfa;
	r->pc = ra;
	*exact = false;
	return ra ? 1 : 0;
}

/* unwind_capture's state, in capture_ctx.walk. */
#define UNWIND_SIGNALS 4
struct capture_walk {
	struct regs r;
	struct bounds b;
	struct unwind_memo_frame spare; /* a record not (yet) in the memo */
	struct step_read rd;
	/* Where in pcs the frames signals interrupted are (the first
	 * UNWIND_SIGNALS of them). */
	uint32_t nsig;
	uint32_t sig_at[UNWIND_SIGNALS];
};
_Static_assert(sizeof(struct capture_walk) <=
                       sizeof(((struct capture_ctx *)0)->walk),
               "capture_walk fits the capture context");

/* ---- reuse ----------------------------------------------------------
 *
 * Most allocations share their outer frames with the thread's previous
 * one (the same loop, parser, request handler).  Each capture keeps, per
 * frame, its registers and the stack words its step to the caller read
 * (capture_ctx.memo).  When the next capture reaches a frame with the
 * same pc, sp and rbp as one of the last capture's, and those words still
 * hold what they held, the step is the same (the rule is a function of the
 * pc, within one cfi generation), so the caller is the last capture's next
 * frame: two loads and compares instead of a rule lookup and a step.  A
 * frame whose step ended the walk by its rule alone (the outermost one) is
 * marked so, and a walk that reaches it again ends there.  The program's
 * stack is only read, never marked.  Signal frames and realigned CFAs,
 * whose steps read more, are always stepped again.
 */

/* The largest offsets from sp a memo frame keeps. */
#define MEMO_RA_MAX 0xfffffffeu
#define MEMO_BP_MAX 0xfffeu

/* The program's registers at its call into the hook: our frames are
 * skipped by their frame pointers.  false if the chain looks wrong. */
static __attribute__((always_inline)) inline bool program_regs(struct regs *r)
{
	uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
	uintptr_t here = fp, floor = fp;
	for (int i = 0; i < 16; i++) {
		if ((fp & 7) || fp < floor || fp - here > 65536)
			return false;
		uintptr_t pc = word_at(fp + 8);
		uintptr_t up = word_at(fp);
		if (!is_ours(pc)) {
			r->pc = pc;
			r->sp = fp + 16;
			r->bp = up;
			r->bp_ok = true;
			return true;
		}
		floor = fp + 16;
		fp = up;
	}
	return false;
}

/*
 * Frames of heapprof's own under the program's: a signal handler's
 * allocation that interrupted a hook (the walk went through the signal
 * frame into the hook).  They are not recorded, and neither is what the
 * hook had called when the signal came (the allocator, the vDSO's clock,
 * memcpy): from the frame the signal interrupted (sig_at, in pcs) to the
 * last of ours after it, the stack shows the program's call into the
 * allocator, as if the signal had interrupted that.  Rare: only a capture
 * that passed a signal frame looks, and so costs nothing otherwise.  With
 * --unwind fp the signal frame is not seen (and the frame it interrupted
 * is not in the stack): only a record nested in another one (the guard
 * says so) looks, and leaves out our frames alone; a handler's allocation
 * that interrupted a hook outside its record (its call of the allocator,
 * a free) may keep them.  Returns the new frame count.
 */
static __attribute__((noinline)) uint32_t
drop_ours(uint64_t *pcs, uint32_t n, const uint32_t *sig_at, uint32_t nsig)
{
	uint32_t out = 0, s = 0, mark = UINT32_MAX;
	for (uint32_t i = 0; i < n; i++) {
		for (; s < nsig && sig_at[s] <= i; s++)
			if (sig_at[s] == i)
				mark = out;
		if (is_ours(pcs[i])) {
			if (mark != UINT32_MAX)
				out = mark;
			mark = UINT32_MAX;
			continue;
		}
		pcs[out++] = pcs[i];
	}
	return out;
}

/* Would the stack go on past the frame at pc (cut at max_frames)? */
static bool goes_on(struct capture_ctx *cx, uintptr_t pc, bool exact,
                    uint32_t mode)
{
	return mode == HP_UNWIND_FP ||
	       cfi_rule_for(cx, pc, exact).kind != CFI_END;
}

/* The step from a frame whose rule is CFI_FRAME with its CFA at sp or rbp
 * plus an offset (almost every frame), inline in the walk: step()'s
 * CFI_FRAME case on registers.  1: stepped (the caller's return address is
 * not 0), 0: done, -1: stopped early.  *ra_at and *bp_at: where it read
 * (0: not read). */
static inline __attribute__((always_inline)) int
step_frame(struct cfi_rule c, uintptr_t *pc, uintptr_t *sp, uintptr_t *bp,
           bool *bp_ok, uintptr_t hi, uintptr_t *ra_at, uintptr_t *bp_at)
{
	uintptr_t s = *sp, cfa;
	if (c.cfa == CFI_CFA_SP) {
		cfa = s + (intptr_t)c.cfa_off;
	} else {
		if (!*bp_ok)
			return -1;
		cfa = *bp + (intptr_t)c.cfa_off;
	}
	/* The caller's frame is above this one. */
	if (cfa <= s || cfa > hi)
		return -1;
	uintptr_t a = cfa + 8 * (intptr_t)c.ra_off8;
	*ra_at = a;
	if (a < s || a > hi - 8 || (a & 7))
		return -1;
	uintptr_t ra = word_at(a);
	switch (c.bp) {
	case BP_SAME:
		break;
	case BP_AT_CFA:
		/* A slot below sp was popped already (see step()). */
		if (cfa + (intptr_t)c.bp_off < s)
			break;
		a = cfa + (intptr_t)c.bp_off;
		*bp_at = a;
		if (a > hi - 8 || (a & 7))
			return -1;
		*bp = word_at(a);
		*bp_ok = true;
		break;
	case BP_AT_BP:
		a = *bp + (intptr_t)c.bp_off;
		*bp_at = a;
		if (!*bp_ok || a < s || a > hi - 8 || (a & 7))
			return -1;
		*bp = word_at(a);
		break;
	default:
		*bp_ok = false;
		break;
	}
	*sp = cfa;
	*pc = ra;
	return ra ? 1 : 0;
}

/* The memo's offsets of where a step from the frame at sp read (ra_at,
 * bp_at; 0: not read); a read below sp or too far above it makes the
 * frame opaque (stepped again).  Returns the flags to add. */
static inline __attribute__((always_inline)) uint16_t
memo_offsets(struct unwind_memo_frame *f, uintptr_t sp, uintptr_t ra_at,
             uintptr_t bp_at)
{
	uint16_t fl = 0;
	uint32_t ra = 0, bp = 0;
	/* (ra + 1 and bp + 1 fit: the limits are one below the types') */
	if (ra_at) {
		if (ra_at < sp || ra_at - sp > MEMO_RA_MAX)
			fl = MF_OPAQUE;
		else
			ra = (uint32_t)(ra_at - sp) + 1;
	}
	if (bp_at) {
		if (bp_at < sp || bp_at - sp > MEMO_BP_MAX)
			fl = MF_OPAQUE;
		else
			bp = (uint32_t)(bp_at - sp) + 1;
	}
	f->ra_off = ra;
	f->bp_off = (uint16_t)bp;
	return fl;
}

__attribute__((noinline)) uint32_t unwind_capture(struct capture_ctx *cx,
                                                  uint32_t max, uint32_t mode,
                                                  uintptr_t caller,
                                                  uint32_t *flags)
{
	struct client_thread *t = client_thread();
	uint64_t *pcs = cx->frames;
	/* What a rare step (signal frames, frames without CFI) works on
	 * lives in the context, not on the program's stack: under it, a rule
	 * may still be worked out (cfi.c).  The common walk keeps its
	 * registers in registers. */
	struct capture_walk *w = (struct capture_walk *)(void *)cx->walk;
	bool nested = *flags & HP_CAP_NESTED;
	*flags = 0;
	w->nsig = 0;
	cx->fold_ok = false;
	if (!program_regs(&w->r))
		goto caller_only;
	if (!stack_bounds(t, w->r.sp, &w->b)) {
		*flags = HP_CAP_UNBOUNDED;
		goto caller_only;
	}
	/* sp lies in [b.lo, b.hi); b.lo is 0 where only the top is known. */
	if (w->b.lo && w->r.sp - w->b.lo < HP_HOOK_STACK) {
		*flags = HP_CAP_LOW;
		return 0;
	}
	uintptr_t pc = w->r.pc, sp = w->r.sp, bp = w->r.bp, hi = w->b.hi;
	bool bp_ok = w->r.bp_ok, exact = false;
	bool fp = mode == HP_UNWIND_FP;
	uint32_t n = 0;
	uint32_t gen = cfi_generation();
	uint64_t kb = cfi_l1_key(0, false, gen); /* a rule's key: pc | kb */
	struct unwind_memo *M = &cx->memo;
	/* The memo's frames, F[-1] its edge (client.h). */
	struct unwind_memo_frame *F = M->fr + 1;
	M->fr[0].sp = UINTPTR_MAX;
	M->fr[0].pc = 0;
	struct unwind_memo_frame *S = cx->fresh;
	/* candidates: F[m - 1] and out (F[-1]: the edge) */
	int32_t m =
	        M->n && M->gen == gen && M->mode == mode ? (int32_t)M->n : 0;
	uint32_t ns = 0;   /* frames in S, leaf first */
	int32_t keep = -1; /* F[0 .. keep] stay: the walk ended on them */
	for (;;) {
		int32_t k = -1; /* the memo's frame equal to this one, if any */
		if (m) {
			while (F[m - 1].sp < sp)
				m--;
			const struct unwind_memo_frame *e = &F[m - 1];
			if (e->sp == sp && e->pc == pc && e->bp == bp &&
			    (e->flags & (MF_BP_OK | MF_EXACT)) ==
			            ((bp_ok ? MF_BP_OK : 0u) |
			             (exact ? MF_EXACT : 0u)))
				k = m - 1;
		}
		pcs[n++] = pc;
		if (n == max) {
			if (goes_on(cx, pc, exact, mode))
				*flags |= HP_CAP_TRUNCATED;
			if (ns < HP_MEMO_FRAMES) {
				struct unwind_memo_frame *f = &S[ns++];
				f->pc = pc;
				f->sp = sp;
				f->bp = bp;
				f->flags = (bp_ok ? MF_BP_OK : 0u) |
				           (exact ? MF_EXACT : 0u) | MF_OPAQUE;
				f->ra_off = f->bp_off = 0;
			}
			break;
		}
		int32_t vj =
		        -1; /* after a run of reuse: the frame it ended on */
		if (k >= 0) {
			/* A tight loop: check a step of the memo, record the
			 * caller, until a word changed or the memo ends. */
			uint32_t j = (uint32_t)k, n0 = n;
			uint32_t lim = j < max - n ? j : max - n;
			uintptr_t hi8 = hi - 8;
			const struct unwind_memo_frame *f = &F[j];
			uint32_t i = 0;
			for (; i < lim; i++, f--) {
				uint32_t ra_off = f->ra_off, bp_off = f->bp_off;
				uintptr_t fsp = f->sp, up = f[-1].pc;
				if ((f->flags & MF_OPAQUE) || !ra_off)
					break;
				uintptr_t at = fsp + ra_off - 1;
				if (at > hi8 || word_at(at) != up)
					break;
				if (bp_off) {
					at = fsp + bp_off - 1;
					if (at > hi8 || word_at(at) != f[-1].bp)
						break;
				}
				pcs[n0 + i] = up;
			}
			n = n0 + i;
			vj = k - (int32_t)i;
			/* The frame recorded last is the memo's vj-th. */
			const struct unwind_memo_frame *cur = &F[vj];
			pc = cur->pc;
			sp = cur->sp;
			bp = cur->bp;
			bp_ok = cur->flags & MF_BP_OK;
			exact = cur->flags & MF_EXACT;
			if (cur->flags & MF_END) {
				/* The outermost frame, as last time: the memo
				 * stays as it is from it out. */
				keep = k;
				break;
			}
			if (n == max) {
				/* Cut on a memo frame: the memo stays as it is
				 * from it out (every later reuse checks its
				 * words again). */
				if (goes_on(cx, pc, exact, mode))
					*flags |= HP_CAP_TRUNCATED;
				keep = k;
				break;
			}
		}
		if (HP_LIKELY(vj < 0 && !fp && !exact && !(sp & 7))) {
			/* The tight loop: fresh frames whose rules are cached
			 * and of the plainest shape (is_fast in cfi.c), the
			 * step and the memo's record in a few instructions.
			 * It leaves the current frame to the full step below
			 * when its rule is anything else, and goes back to the
			 * top with the next frame when that may be the memo's
			 * or the last one. */
			bool top = false;
			while (HP_LIKELY(ns < HP_MEMO_FRAMES)) {
				uint32_t i = cfi_l1_slot(pc);
				if (cx->rules[i].key != (pc | kb) || (pc >> 48))
					break;
				struct cfi_rule c;
				__builtin_memcpy(&c, &cx->rules[i].rule,
				                 sizeof(c));
				if (!c.fast)
					break;
				uintptr_t cfa =
				        sp + (uintptr_t)(intptr_t)c.cfa_off;
				if (cfa > hi)
					break;
				uintptr_t ra = word_at(cfa - 8);
				if (!ra)
					break;
				struct unwind_memo_frame *f = &S[ns++];
				f->pc = pc;
				f->sp = sp;
				f->bp = bp;
				f->ra_off = (uint32_t)c.cfa_off - 7;
				f->flags = bp_ok ? MF_BP_OK : 0u;
				if (c.bp == BP_AT_CFA) {
					f->bp_off = (uint16_t)(c.cfa_off +
					                       c.bp_off + 1);
					bp = word_at(cfa + (intptr_t)c.bp_off);
					bp_ok = true;
				} else {
					f->bp_off = 0;
				}
				sp = cfa;
				pc = ra;
				while (F[m - 1].sp < sp)
					m--;
				if ((F[m - 1].sp == sp && F[m - 1].pc == pc) ||
				    n + 1 >= max) {
					top = true;
					break;
				}
				pcs[n++] = pc;
			}
			if (top)
				continue;
		}
		struct cfi_rule c = {0};
		if (fp)
			c.kind = CFI_NOCFI;
		else
			c = cfi_rule_cached(cx, pc, exact, gen);
		/* The frame as it was before the step, and the words the step
		 * read: a new frame's record goes to S; the step from the
		 * frame a run of reuse ended on, aside until it is known
		 * where it goes. */
		struct unwind_memo_frame *f =
		        vj < 0 && ns < HP_MEMO_FRAMES ? &S[ns] : &w->spare;
		f->pc = pc;
		f->sp = sp;
		f->bp = bp;
		uint16_t fl = (bp_ok ? MF_BP_OK : 0u) | (exact ? MF_EXACT : 0u);
		int rc;
		if (HP_LIKELY(c.kind == CFI_FRAME &&
		              c.cfa != CFI_CFA_DEREF_BP)) {
			uintptr_t ra_at = 0, bp_at = 0;
			rc = step_frame(c, &pc, &sp, &bp, &bp_ok, hi, &ra_at,
			                &bp_at);
			fl |= memo_offsets(f, f->sp, ra_at, bp_at);
			exact = false;
		} else {
			/* The rare steps, on the walk's state in the context.
			 * A step that ends the walk by the rule alone (the
			 * outermost frame, the end of a frame-pointer chain)
			 * ends it the same way next time: marked. */
			bool end = c.kind == CFI_END ||
			           ((c.kind == CFI_NOCFI ||
			             c.kind == CFI_NOMODULE) &&
			            bp_ok && bp == 0);
			w->r.pc = pc;
			w->r.sp = sp;
			w->r.bp = bp;
			w->r.bp_ok = bp_ok;
			w->b.hi = hi;
			rc = step(t, cx, &w->r, &w->b, c, &exact, !fp, &w->rd);
			pc = w->r.pc;
			sp = w->r.sp;
			bp = w->r.bp;
			bp_ok = w->r.bp_ok;
			hi = w->b.hi;
			if (HP_UNLIKELY(rc == 2)) {
				/* Through a signal frame: pcs[n] is the frame
				 * the signal interrupted (see drop_ours). */
				if (w->nsig < UNWIND_SIGNALS)
					w->sig_at[w->nsig++] = n;
				rc = 1;
			}
			fl |= memo_offsets(f, f->sp, w->rd.ra_at, w->rd.bp_at);
			if (w->rd.opaque)
				fl |= MF_OPAQUE;
			if (rc == 0 && end)
				fl |= MF_END;
		}
		if (rc <= 0)
			fl |= MF_OPAQUE;
		if (rc < 0)
			*flags |= HP_CAP_STOPPED;
		f->flags = fl;
		if (vj >= 0) {
			if (rc <= 0) {
				/* The walk ends on the memo: F[0 .. k]
				 * stay where they are. */
				F[vj] = *f;
				keep = k;
				break;
			}
			/* It goes on past the memo's frames: they become
			 * new frames of this capture (rare: a changed caller,
			 * or a memo cut at HP_MEMO_FRAMES). */
			for (int32_t q = k; q > vj && ns < HP_MEMO_FRAMES; q--)
				S[ns++] = F[q];
			if (ns < HP_MEMO_FRAMES)
				S[ns++] = *f;
			m = vj;
		} else if (f != &w->spare) {
			ns++;
		}
		if (rc <= 0)
			break;
	}
	bool dropped = false;
	if (HP_UNLIKELY(w->nsig != 0) || (HP_UNLIKELY(nested) && fp)) {
		n = drop_ours(pcs, n, w->sig_at, w->nsig);
		dropped = true;
	}
	/* The memo for the next capture, outermost first: the frames kept
	 * in place, then this capture's new ones (the leaf-most
	 * HP_MEMO_FRAMES in all), and the stack hash's fold up to each
	 * (region.h): the kept frames have theirs, the new ones continue
	 * it.  A memo cut at its outer end has no folds until a capture
	 * makes it anew. */
	uint32_t base = keep >= 0 ? (uint32_t)keep + 1 : 0;
	if (base == 0)
		M->folds = 1;
	if (base + ns > HP_MEMO_FRAMES) {
		uint32_t drop = base + ns - HP_MEMO_FRAMES;
		for (uint32_t q = drop; q < base; q++)
			F[q - drop] = F[q];
		base -= drop;
		M->folds = 0;
	}
	uint64_t h = base ? M->fold[base - 1] : HP_STACK_FOLD_SEED;
	for (uint32_t q = 0; q < ns; q++) {
		F[base + q] = S[ns - 1 - q];
		h = hp_stack_fold(h, S[ns - 1 - q].pc);
		M->fold[base + q] = h;
	}
	M->n = base + ns;
	M->gen = gen;
	M->mode = mode;
	/* When the memo now holds exactly this capture's frames (it ended
	 * on the memo's outermost frame, or stepped all of them itself, and
	 * nothing was cut or left out), the fold of the whole stack is its
	 * last: the stack table need not fold them again. */
	if (M->folds && !dropped && M->n == n && n > 0 &&
	    F[0].pc == pcs[n - 1] && F[n - 1].pc == pcs[0]) {
		cx->fold = h;
		cx->fold_ok = true;
	}
	return n;

caller_only:
	if (!caller || max == 0)
		return 0;
	pcs[0] = caller;
	return 1;
}

__attribute__((noinline)) bool unwind_stack_room(uintptr_t *room)
{
	struct client_thread *t = client_thread();
	struct regs r;
	struct bounds b;
	*room = UINTPTR_MAX;
	if (!program_regs(&r) || !stack_bounds(t, r.sp, &b))
		return false;
	if (b.lo)
		*room = r.sp > b.lo ? r.sp - b.lo : 0;
	return true;
}

bool unwind_in_signal_handler(void)
{
	struct client_thread *t = client_thread();
	struct regs r;
	struct bounds b;
	if (!program_regs(&r) || !stack_bounds(t, r.sp, &b))
		return true;
	bool exact = false;
	for (int depth = 0; depth < 1024; depth++) {
		struct cfi_rule c = cfi_rule_for(NULL, r.pc, exact);
		if (c.kind == CFI_SIGNAL)
			return true;
		struct step_read rd;
		int rc = step(t, NULL, &r, &b, c, &exact, true, &rd);
		if (rc == 0)
			return false;
		if (rc < 0)
			return true;
	}
	return true;
}
