/*
 * Capture contexts: what a capture needs besides the program's stack
 * (struct capture_ctx, client.h: ~15 KiB, too much for the program's
 * stack or static TLS).  A pool of CTX_COUNT is mapped at the first
 * attach (mmap is async-signal-safe) and never unmapped.
 *
 * Claiming one takes no lock and makes no system call.  A thread looks
 * first at the context it had last (its record's hint), then at CTX_PROBE
 * slots from a hash of its thread pointer; it takes one it owns (its
 * caches are warm for this thread) or, failing that, the first free one
 * it passed.  A context last owned by another thread is fine to take:
 * everything in it is a cache that is right for any thread.  A context
 * is held for one hook, tagged with the thread pointer and the hook's
 * guard level, so that the context of a hook a longjmp left is found and
 * given back (unwind_ctx_drop).  Every path out of a claim holds exactly
 * the context it returns: one held by nobody would stay busy for good,
 * and a thread whose probes all find busy ones records its allocations
 * with their caller only.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#include "client/client.h"

#define CTX_COUNT 512
#define CTX_PROBE 8
static struct capture_ctx *ctx_pool;

void unwind_ctx_init(void)
{
	if (__atomic_load_n(&ctx_pool, __ATOMIC_ACQUIRE))
		return;
	size_t size = CTX_COUNT * sizeof(struct capture_ctx);
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return; /* every capture keeps its caller only */
	void *expect = NULL;
	if (!__atomic_compare_exchange_n(&ctx_pool, &expect, m, false,
	                                 __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
		munmap(m, size);
}

/* Takes c for `holder` (a thread pointer plus 1 + a guard level). */
static inline bool ctx_take(struct capture_ctx *c, uintptr_t holder)
{
	uintptr_t free_ = 0;
	return atomic_load_explicit(&c->busy, memory_order_relaxed) == 0 &&
	       atomic_compare_exchange_strong_explicit(&c->busy, &free_, holder,
	                                               memory_order_acquire,
	                                               memory_order_relaxed);
}

static inline uint32_t ctx_hash(uintptr_t tp)
{
	return (uint32_t)((tp * 0x9E3779B97F4A7C15ull) >> 40);
}

struct capture_ctx *unwind_ctx_claim(uint32_t level)
{
	struct capture_ctx *pool = __atomic_load_n(&ctx_pool, __ATOMIC_ACQUIRE);
	if (!pool)
		return NULL;
	struct client_thread *t = client_thread();
	uintptr_t tp = thread_pointer();
	/* The thread pointer is aligned: tp + 1 + level is this thread's
	 * alone, per level. */
	uintptr_t holder = tp + 1 + level;
	/* (Without a record, no hint: the probes from the hash.) */
	struct capture_ctx *c =
	        &pool[(t ? t->ctx_hint : ctx_hash(tp)) % CTX_COUNT];
	if (HP_LIKELY(ctx_take(c, holder))) {
		if (HP_LIKELY(atomic_load_explicit(&c->owner,
		                                   memory_order_relaxed) == tp))
			return c;
		atomic_store_explicit(&c->busy, 0, memory_order_release);
	}
	uint32_t h = ctx_hash(tp);
	struct capture_ctx *spare = NULL;
	uint32_t spare_i = 0;
	for (uint32_t k = 0; k < CTX_PROBE; k++) {
		uint32_t i = (h + k) % CTX_COUNT;
		c = &pool[i];
		if (atomic_load_explicit(&c->owner, memory_order_relaxed) ==
		    tp) {
			if (ctx_take(c, holder)) {
				if (atomic_load_explicit(
				            &c->owner, memory_order_relaxed) ==
				    tp) {
					/* A spare taken on the way goes
					 * back: kept, it would stay busy for
					 * good, held by nobody. */
					if (spare)
						atomic_store_explicit(
						        &spare->busy, 0,
						        memory_order_release);
					if (t)
						t->ctx_hint = (uint16_t)i;
					return c;
				}
				atomic_store_explicit(&c->busy, 0,
				                      memory_order_release);
			}
		} else if (!spare && ctx_take(c, holder)) {
			spare = c;
			spare_i = i;
		}
	}
	if (!spare)
		return NULL;
	atomic_store_explicit(&spare->owner, tp, memory_order_relaxed);
	if (t)
		t->ctx_hint = (uint16_t)spare_i;
	return spare;
}

void unwind_ctx_release(struct capture_ctx *c)
{
	if (c)
		atomic_store_explicit(&c->busy, 0, memory_order_release);
}

/* A thread only ever holds contexts among its CTX_PROBE slots (the hint
 * is one of them once set; pool[0] before that is kept only if owned). */
void unwind_ctx_drop(uint32_t level)
{
	struct capture_ctx *pool = __atomic_load_n(&ctx_pool, __ATOMIC_ACQUIRE);
	if (!pool)
		return;
	uintptr_t tp = thread_pointer();
	uintptr_t holder = tp + 1 + level;
	uint32_t h = ctx_hash(tp);
	for (uint32_t k = 0; k <= CTX_PROBE; k++) {
		struct capture_ctx *c =
		        &pool[k < CTX_PROBE ? (h + k) % CTX_COUNT : 0];
		uintptr_t want = holder;
		atomic_compare_exchange_strong_explicit(&c->busy, &want, 0,
		                                        memory_order_release,
		                                        memory_order_relaxed);
	}
}
