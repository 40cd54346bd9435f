/*
 * Allocations made before the client attached at startup.
 *
 * The dynamic loader runs the constructors of the program's shared
 * libraries before this library's own (libstdc++'s emergency pool, LLVM's
 * option registration, a plugin's tables), and the first allocations of
 * the loader itself come earlier still.  Until the constructor attaches
 * there is no region to record into, and nothing to say whether a session
 * wants this process at all (the environment names the collector; the
 * constructor reads it).
 *
 * So from the first hook call until the constructor starts, every
 * allocation of the malloc family is kept here, in static memory (.bss:
 * pages are only touched as they fill), with its stack, and every free of
 * one of them marks it freed.  The hooks get here on their tracked path:
 * hp_malloc_on starts at HP_MALLOC_EARLY (client.h) and hp_client's
 * exact_from at 0, so every allocation asks the recorder, which finds no
 * region and hands the block to early_record; a free that finds no
 * region comes to early_free.  No system call, lock or allocation: the
 * capture is unwind.c's, on a context of its own here, with the stack's
 * top taken from the loader (__libc_stack_end) and this library's range
 * from _dl_find_object, both ready before any of it runs.
 *
 * The constructor ends this (early_end) before it does anything of its
 * own.  When it attached at startup and the session profiles libc.malloc,
 * it replays the blocks (early_replay): each becomes a record with its
 * stack, charged exactly (its size, one object: no sampling decided
 * before the interval was known), stamped with the attach's time; a block
 * freed before that is recorded and freed at once (it counts in the
 * alloc_* views only).  Otherwise the buffer is dropped.
 *
 * What is not kept is counted (startup_missed): allocations past the
 * buffer's room, those of a thread other than the first one seen (the
 * main thread: constructors run on it), and those nested in a hook of
 * ours (a signal handler that interrupted one).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "client/client.h"

#define EARLY_BLOCKS 32768u
#define EARLY_PCS    (1u << 17)
#define EARLY_HASH   65536u /* a power of two, twice EARLY_BLOCKS */
/* The main thread's stack below its top that a capture assumes mapped:
 * a walk only reads from sp up to the top. */
#define EARLY_STACK (8u << 20)

struct early_block {
	uint64_t ptr;
	uint64_t size;
	uint32_t pcs_at; /* its frames: pcs[pcs_at .. pcs_at + n) */
	uint16_t n;
	uint8_t freed;
	uint8_t truncated;
};

static struct early_block blocks[EARLY_BLOCKS];
static uint64_t pcs[EARLY_PCS];
/* ptr -> 1 + the index of its live block, linear probing; a free takes
 * the block out (backward shift), so a loop that allocates and frees one
 * address keeps one slot busy, not a cluster that grows. */
static uint32_t slots[EARLY_HASH];
static uint32_t nblocks, npcs;
static _Atomic uint64_t missed;
static struct capture_ctx ctx;

/* Blocks are kept until the constructor starts (early_end); frees are
 * marked until the blocks are replayed or dropped (early_replay,
 * early_finish). */
static _Atomic int keeping = 1, pending = 1;
/* The thread pointer of the one thread recorded (0: none yet). */
static _Atomic uintptr_t owner;
static int busy;
static bool ready;

extern void *__libc_stack_end;

static inline uint32_t slot_of(uint64_t ptr)
{
	return (uint32_t)((ptr * 0x9E3779B97F4A7C15ull) >> 48) &
	       (EARLY_HASH - 1);
}

/* The thread may record: the first one seen, not nested.  `alloc`: an
 * allocation (one turned away is counted). */
static bool enter(bool alloc)
{
	if (!atomic_load_explicit(alloc ? &keeping : &pending,
	                          memory_order_acquire))
		return false;
	uintptr_t tp = thread_pointer(), none = 0;
	if (!atomic_compare_exchange_strong_explicit(&owner, &none, tp,
	                                             memory_order_acq_rel,
	                                             memory_order_acquire) &&
	    none != tp) {
		if (alloc)
			atomic_fetch_add_explicit(&missed, 1,
			                          memory_order_relaxed);
		return false;
	}
	if (busy) {
		if (alloc)
			atomic_fetch_add_explicit(&missed, 1,
			                          memory_order_relaxed);
		return false;
	}
	busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return true;
}

static void leave(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	busy = 0;
}

void early_record(uint64_t ptr, size_t size)
{
	if (!enter(true))
		return;
	if (!ready) {
		/* What the capture needs, without a system call: the stack's
		 * top (the loader's) and this library's range. */
		unwind_early_setup((uintptr_t)__libc_stack_end, EARLY_STACK,
		                   (const void *)&early_record);
		ready = true;
	}
	if (nblocks >= EARLY_BLOCKS || hooks_ours((const void *)ptr)) {
		if (nblocks >= EARLY_BLOCKS)
			atomic_fetch_add_explicit(&missed, 1,
			                          memory_order_relaxed);
		leave();
		return;
	}
	uint32_t cap = 0;
	uint32_t n =
	        unwind_capture(&ctx, HP_MAX_FRAMES, HP_UNWIND_DWARF,
	                       (uintptr_t)__builtin_return_address(0), &cap);
	if (cap & HP_CAP_LOW) {
		atomic_fetch_add_explicit(&missed, 1, memory_order_relaxed);
		leave();
		return;
	}
#ifdef HP_UNWIND_ORACLE
	/* Made for the oracle's own constructor (it asks libc for symbols
	 * before the client's runs): not the program's.  (In the client
	 * alone, a frame of ours mid-stack is a wrapper the program called,
	 * popen, posix_spawn: its allocations are the program's.) */
	for (uint32_t i = 0; i < n; i++) {
		if (unwind_is_ours(ctx.frames[i])) {
			leave();
			return;
		}
	}
#endif
	/* A loop's blocks share their stack: kept once. */
	const struct early_block *last = nblocks ? &blocks[nblocks - 1] : NULL;
	uint32_t at = npcs;
	if (last && last->n == n &&
	    memcmp(&pcs[last->pcs_at], ctx.frames, n * sizeof(pcs[0])) == 0) {
		at = last->pcs_at;
	} else if (n > EARLY_PCS - npcs) {
		atomic_fetch_add_explicit(&missed, 1, memory_order_relaxed);
		leave();
		return;
	} else {
		memcpy(&pcs[npcs], ctx.frames, n * sizeof(pcs[0]));
		npcs += n;
	}
	struct early_block *b = &blocks[nblocks];
	b->ptr = ptr;
	b->size = size;
	b->pcs_at = at;
	b->n = (uint16_t)n;
	b->freed = 0;
	b->truncated = (cap & HP_CAP_TRUNCATED) != 0;
	uint32_t i = slot_of(ptr);
	while (slots[i])
		i = (i + 1) & (EARLY_HASH - 1);
	slots[i] = ++nblocks;
	leave();
}

/* Takes slot i out of the table, moving the probe chain after it back
 * (linear probing's deletion: no tombstones). */
static void slot_delete(uint32_t i)
{
	uint32_t j = i;
	for (;;) {
		slots[i] = 0;
		for (;;) {
			j = (j + 1) & (EARLY_HASH - 1);
			if (!slots[j])
				return;
			uint32_t home = slot_of(blocks[slots[j] - 1].ptr);
			/* j's entry may move to i when its home is not in
			 * (i, j] (cyclically). */
			if (i <= j ? (home <= i || home > j)
			           : (home <= i && home > j))
				break;
		}
		slots[i] = slots[j];
		i = j;
	}
}

void early_free(uint64_t ptr)
{
	if (!enter(false))
		return;
	for (uint32_t i = slot_of(ptr); slots[i];
	     i = (i + 1) & (EARLY_HASH - 1)) {
		struct early_block *b = &blocks[slots[i] - 1];
		if (b->ptr == ptr) {
			b->freed = 1;
			slot_delete(i);
			break;
		}
	}
	leave();
}

void early_end(void)
{
	atomic_store_explicit(&keeping, 0, memory_order_release);
}

void early_replay(struct client_slot *s, bool want)
{
	if (!atomic_exchange_explicit(&pending, 0, memory_order_acq_rel))
		return;
	/* No free marks a block any more: the buffer is ours alone (a
	 * thread of the program that frees one of these blocks now, before
	 * the region is published, leaves it live in the profile). */
	if (want && s) {
		uint32_t done = 0;
		for (uint32_t k = 0; k < nblocks; k++) {
			const struct early_block *b = &blocks[k];
			if (recorder_replay(s, b->ptr, b->size, &pcs[b->pcs_at],
			                    b->n, b->truncated, b->freed))
				done++;
		}
		region_count(&s->region, HP_CTR_STARTUP_RECORDED, done);
		region_count(
		        &s->region, HP_CTR_STARTUP_MISSED,
		        atomic_load_explicit(&missed, memory_order_relaxed) +
		                (nblocks - done));
	}
	nblocks = npcs = 0;
	atomic_store_explicit(&missed, 0, memory_order_relaxed);
}

void early_finish(void)
{
	early_replay(NULL, false);
	int early = HP_MALLOC_EARLY;
	atomic_compare_exchange_strong_explicit(&hp_malloc_on, &early, 0,
	                                        memory_order_acq_rel,
	                                        memory_order_acquire);
}
