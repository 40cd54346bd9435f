/*
 * Stack capture inside the target.  DWARF mode uses libunwind's local
 * unw_backtrace (CFI from .eh_frame, with libunwind's per-thread cache), so
 * stacks go through code built without frame pointers, such as Debian's
 * libc and libstdc++.  FP mode walks the frame-pointer chain: fast, but it
 * stops or goes wrong in code without frame pointers.  Either way the
 * leading frames that belong to heapprof or libunwind are dropped, so a
 * stack starts at the function that called malloc.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stdint.h>

#include "client/client.h"

static uintptr_t self_lo, self_hi; /* libheapprof.so text */
static uintptr_t unw_lo, unw_hi;   /* libunwind text */
static _Atomic int ready;

/*
 * Done at the first sample, not in the constructor: libunwind's own
 * initialisation costs tens of microseconds (several system calls), which
 * every process that loads the library but is never profiled would pay.
 * Two threads racing here both run it; they compute the same values and
 * libunwind serialises its own init.
 */
void unwind_init(void)
{
	if (HP_LIKELY(atomic_load_explicit(&ready, memory_order_acquire)))
		return;
	uintptr_t lo, hi, ulo, uhi;
	modules_text_range((const void *)&unwind_init, &lo, &hi);
	modules_text_range((const void *)&unw_backtrace, &ulo, &uhi);
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	__atomic_store_n(&self_lo, lo, __ATOMIC_RELAXED);
	__atomic_store_n(&self_hi, hi, __ATOMIC_RELAXED);
	__atomic_store_n(&unw_lo, ulo, __ATOMIC_RELAXED);
	__atomic_store_n(&unw_hi, uhi, __ATOMIC_RELAXED);
	atomic_store_explicit(&ready, 1, memory_order_release);
}

static inline bool is_ours(uintptr_t pc)
{
	return (pc >= self_lo && pc < self_hi) || (pc >= unw_lo && pc < unw_hi);
}

uint32_t unwind_keep(void *const *buf, int got, int want, uint64_t *pcs,
                     uint32_t max, bool *truncated)
{
	*truncated = false;
	if (got <= 0)
		return 0;
	int i = 0;
	while (i < got && is_ours((uintptr_t)buf[i]))
		i++;
	uint32_t n = 0;
	for (; i < got && n < max; i++)
		pcs[n++] = (uintptr_t)buf[i];
	*truncated = (got == want) || i < got;
	return n;
}

static uint32_t capture_dwarf(uint64_t *pcs, uint32_t max, bool *truncated)
{
	void *buf[HP_MAX_FRAMES + HP_UNWIND_SLACK];
	int want = (int)max + HP_UNWIND_SLACK;
	return unwind_keep(buf, unw_backtrace(buf, want), want, pcs, max,
	                   truncated);
}

static void stack_bounds(struct client_tls *t)
{
	pthread_attr_t attr;
	void *addr;
	size_t size;
	t->stack_lo = 1; /* "tried" even if the lookup fails */
	t->stack_hi = 0;
	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return;
	if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
		t->stack_lo = (uintptr_t)addr;
		t->stack_hi = (uintptr_t)addr + size;
	}
	pthread_attr_destroy(&attr);
}

__attribute__((noinline)) static uint32_t
capture_fp(uint64_t *pcs, uint32_t max, bool *truncated)
{
	struct client_tls *t = &hp_tls;
	if (!t->stack_lo)
		stack_bounds(t); /* may allocate: in_hook is set */
	uintptr_t lo = t->stack_lo, hi = t->stack_hi;
	uintptr_t *fp = __builtin_frame_address(0);
	if (hi <= lo)
		return 0;
	uint32_t n = 0;
	bool skipping = true;
	while ((uintptr_t)fp >= lo && (uintptr_t)fp + 16 <= hi &&
	       ((uintptr_t)fp & 7) == 0) {
		uintptr_t ret = fp[1];
		uintptr_t *next = (uintptr_t *)fp[0];
		if (ret == 0)
			break;
		if (skipping && is_ours(ret)) {
			/* still inside heapprof */
		} else {
			skipping = false;
			if (n == max) {
				*truncated = true;
				break;
			}
			pcs[n++] = ret;
		}
		if (next <= fp)
			break; /* the chain must go up the stack */
		fp = next;
	}
	return n;
}

uint32_t unwind_capture(uint64_t *pcs, uint32_t max, uint32_t mode,
                        bool *truncated)
{
	*truncated = false;
	unwind_init();
	if (mode == HP_UNWIND_FP)
		return capture_fp(pcs, max, truncated);
	return capture_dwarf(pcs, max, truncated);
}
