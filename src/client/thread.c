/*
 * Per-thread state that is not static TLS.
 *
 * glibc carves a thread's static TLS out of its stack: every byte of TLS
 * a preloaded library has is a byte less for each of the program's
 * threads, and a thread whose stack the program sized (16 KiB is allowed)
 * may have none to spare.  So the library's static TLS (struct client_tls)
 * holds only what the hooks' fast path and the re-entrancy guard need, at
 * most 64 bytes, and the rest of a thread's state (the sampler's
 * generator, the stacks the capture may read, the log takeover's mark,
 * the custom heaps' gaps) is a record of a pool in the library's own
 * memory (.bss: usable from the first hook, before the constructor).
 *
 * Taking one.  A thread takes a record at its first hook that needs one
 * (client_thread): a sampled allocation, a capture, a sigaltstack() call.
 * The pool is a lock-free stack of free entries (a tagged head: a CAS
 * that saw an entry leave and come back fails) over entries never used
 * yet (a bump index), so a take is a few atomic operations, with no
 * system call, no lock and no allocation, safe in a signal handler that
 * interrupted another take on the same thread: the record is installed
 * with a CAS on the thread's pointer, and a take that finds one installed
 * meanwhile gives its own back.
 *
 * Giving it back.  The first take also sets the thread's value of a
 * pthread key whose destructor gives the record back when the thread
 * exits (and marks the thread HP_THREAD_GONE: hooks that run later in
 * its exit, other keys' destructors and glibc's own cleanup, take no
 * record again), with any capture context a hook a longjmp left still
 * held in its name (unwind_ctx.c).  pthread_setspecific allocates for
 * keys from 32 up (glibc keeps the first 32 in the thread descriptor):
 * the key is made at the first take, or in the constructor, whichever
 * comes first, and a key numbered 32 or more is not used.  Without a
 * usable key, records are not given back (counted as the pool running
 * out once they are all taken).  A fork child has one thread: every
 * record but its own is free again (a pthread_atfork child handler).
 *
 * Without a record.  A thread that finds the pool empty, or that gave its
 * record back, is profiled all the same: its countdown (bytes_left) and
 * its re-entrancy guard are in static TLS; its sampler draws each gap
 * from a generator seeded afresh (the gaps of a Poisson process are
 * memoryless: the same distribution), the custom heaps' samplers
 * likewise, the capture finds the thread's stack from the thread
 * descriptor each time and starts its search for a capture context at
 * the thread's hash.  What it lacks: an alternate signal stack it set
 * while without a record is unknown (a capture on it keeps the caller
 * only, counted as stack_unbounded), and it never takes the live table
 * back from the log (its events wait for room, or are skipped and
 * counted as reentrant_skipped).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "client/client.h"

/* Threads with a record at once; more run without one.  128 bytes each
 * (512 KiB of .bss, touched as threads take them). */
#ifndef THREAD_RECORDS
#define THREAD_RECORDS 4096u
#endif
/* Threads that report to custom heaps, with their gaps, at once. */
#ifndef THREAD_GAP_BLOCKS
#define THREAD_GAP_BLOCKS 256u
#endif

/* A lock-free stack of free entries 0 .. cap - 1 over the ones never
 * used, [fresh, cap). */
struct pool {
	/* tag << 32 | (1 + the first free entry); low half 0: none.  The
	 * tag changes with every push and pop. */
	_Atomic uint64_t head;
	_Atomic uint32_t fresh;
	uint32_t cap;
	_Atomic uint32_t *next; /* 1 + the entry after each free one */
	/* Entries taken now, the most ever taken at once, and the takes
	 * that found none (a thread counted once). */
	_Atomic uint32_t used, most;
	_Atomic uint64_t misses;
};

static struct rec {
	_Alignas(64) struct client_thread th;
} recs[THREAD_RECORDS];
static _Atomic uint32_t rec_next[THREAD_RECORDS];
static struct pool rec_pool = {.cap = THREAD_RECORDS, .next = rec_next};

static struct gap_block {
	_Alignas(64) struct heap_gaps g;
} gap_blocks[THREAD_GAP_BLOCKS];
static _Atomic uint32_t gap_next[THREAD_GAP_BLOCKS];
static struct pool gap_pool = {.cap = THREAD_GAP_BLOCKS, .next = gap_next};

/* 1 + an entry of p, or 0 when none is free. */
static uint32_t pool_take(struct pool *p)
{
	uint64_t h = atomic_load_explicit(&p->head, memory_order_acquire);
	uint32_t got = 0;
	while ((uint32_t)h != 0) {
		uint32_t i = (uint32_t)h - 1;
		uint32_t nx =
		        atomic_load_explicit(&p->next[i], memory_order_relaxed);
		uint64_t nh = (((h >> 32) + 1) << 32) | nx;
		if (atomic_compare_exchange_weak_explicit(
		            &p->head, &h, nh, memory_order_acquire,
		            memory_order_acquire)) {
			got = i + 1;
			break;
		}
	}
	if (!got) {
		uint32_t f =
		        atomic_load_explicit(&p->fresh, memory_order_relaxed);
		while (f < p->cap)
			if (atomic_compare_exchange_weak_explicit(
			            &p->fresh, &f, f + 1, memory_order_relaxed,
			            memory_order_relaxed)) {
				got = f + 1;
				break;
			}
	}
	if (got) {
		uint32_t u = atomic_fetch_add_explicit(&p->used, 1,
		                                       memory_order_relaxed) +
		             1;
		uint32_t m =
		        atomic_load_explicit(&p->most, memory_order_relaxed);
		while (u > m && !atomic_compare_exchange_weak_explicit(
		                        &p->most, &m, u, memory_order_relaxed,
		                        memory_order_relaxed))
			;
	}
	return got;
}

/* Entry i of p is free again. */
static void pool_put(struct pool *p, uint32_t i)
{
	atomic_fetch_sub_explicit(&p->used, 1, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
	uint64_t nh;
	do {
		atomic_store_explicit(&p->next[i], (uint32_t)h,
		                      memory_order_relaxed);
		nh = (((h >> 32) + 1) << 32) | (i + 1);
	} while (!atomic_compare_exchange_weak_explicit(
	        &p->head, &h, nh, memory_order_release, memory_order_relaxed));
}

/* In a fork child (one thread): every entry but `keep` (1 + an entry; 0:
 * none) is free. */
static void pool_reset(struct pool *p, uint32_t keep)
{
	uint64_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
	atomic_store_explicit(&p->head, ((h >> 32) + 1) << 32,
	                      memory_order_relaxed);
	uint32_t f = atomic_load_explicit(&p->fresh, memory_order_relaxed);
	atomic_store_explicit(&p->used, f, memory_order_relaxed);
	for (uint32_t i = 0; i < f; i++)
		if (i + 1 != keep)
			pool_put(p, i);
}

static uint32_t rec_index(const struct client_thread *th)
{
	return (uint32_t)(((uintptr_t)th - (uintptr_t)recs) / sizeof(recs[0]));
}

/* ---- the key ---------------------------------------------------------- */

/* glibc keeps a thread's values of keys 0 .. 31 in its descriptor
 * (PTHREAD_KEY_2NDLEVEL_SIZE); pthread_setspecific of a higher key
 * allocates their block on its first use in a thread. */
#define KEY_IN_DESCRIPTOR 32u

enum { KEY_NONE = 0, KEY_MAKING, KEY_READY, KEY_UNUSABLE };
static _Atomic int key_state;
static pthread_key_t exit_key;

static void thread_exit(void *v);

/* The key, made on first use (one thread makes it; one that finds it
 * being made does without). */
static bool key_ready(void)
{
	int st = atomic_load_explicit(&key_state, memory_order_acquire);
	if (HP_LIKELY(st == KEY_READY))
		return true;
	if (st != KEY_NONE ||
	    !atomic_compare_exchange_strong_explicit(
	            &key_state, &st, KEY_MAKING, memory_order_acquire,
	            memory_order_relaxed))
		return false;
	/* No allocation, lock or system call: a CAS on glibc's key table. */
	pthread_key_t k;
	int ok = pthread_key_create(&k, thread_exit) == 0;
	if (ok && (unsigned)k >= KEY_IN_DESCRIPTOR) {
		pthread_key_delete(k);
		ok = 0;
	}
	if (ok)
		exit_key = k;
	atomic_store_explicit(&key_state, ok ? KEY_READY : KEY_UNUSABLE,
	                      memory_order_release);
	return ok;
}

/* The thread exits: its record goes back, and it takes none again. */
static void thread_exit(void *v)
{
	struct client_thread *th = v;
	if (__atomic_load_n(&hp_tls.th, __ATOMIC_RELAXED) != th)
		return;
	__atomic_store_n(&hp_tls.th, HP_THREAD_GONE, __ATOMIC_RELAXED);
	/* A signal handler's hook from here on finds no record. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* No hook of this thread is live under a key's destructor (one a
	 * signal handler runs here ends before it returns): a capture
	 * context still held in the thread's name is a hook's that a
	 * longjmp out of a handler left, or a pthread_exit in one.  It goes
	 * back before the thread pointer can be another thread's. */
	unwind_ctx_drop(0);
	unwind_ctx_drop(1);
	if (th->gaps)
		pool_put(&gap_pool, th->gaps - 1);
	pool_put(&rec_pool, rec_index(th));
}

/* ---- records ---------------------------------------------------------- */

struct client_thread *thread_claim(void)
{
	struct client_thread *th =
	        __atomic_load_n(&hp_tls.th, __ATOMIC_RELAXED);
	if (th == HP_THREAD_GONE)
		return NULL;
	if (th)
		return th;
	uint32_t i = pool_take(&rec_pool);
	if (!i) {
		if (!(hp_tls.flags & HP_TLS_MISSED)) {
			hp_tls.flags |= HP_TLS_MISSED;
			atomic_fetch_add_explicit(&rec_pool.misses, 1,
			                          memory_order_relaxed);
		}
		return NULL;
	}
	th = &recs[i - 1].th;
	memset(th, 0, sizeof(*th));
	struct client_thread *none = NULL;
	if (!__atomic_compare_exchange_n(&hp_tls.th, &none, th, false,
	                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		/* A signal handler's hook took one meanwhile: the thread's. */
		pool_put(&rec_pool, i - 1);
		return none == HP_THREAD_GONE ? NULL : none;
	}
	if (key_ready())
		pthread_setspecific(exit_key, th);
	return th;
}

struct heap_gaps *thread_heap_gaps(struct client_thread *th)
{
	uint32_t g = __atomic_load_n(&th->gaps, __ATOMIC_RELAXED);
	if (HP_LIKELY(g != 0))
		return &gap_blocks[g - 1].g;
	uint32_t i = pool_take(&gap_pool);
	if (!i) {
		atomic_fetch_add_explicit(&gap_pool.misses, 1,
		                          memory_order_relaxed);
		return NULL;
	}
	memset(&gap_blocks[i - 1].g, 0, sizeof(gap_blocks[0].g));
	if (!__atomic_compare_exchange_n(&th->gaps, &g, i, false,
	                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		pool_put(&gap_pool, i - 1);
		i = g;
	}
	return &gap_blocks[i - 1].g;
}

/* ---- setup and fork --------------------------------------------------- */

static void thread_fork_child(void)
{
	struct client_thread *th =
	        __atomic_load_n(&hp_tls.th, __ATOMIC_RELAXED);
	if (th == HP_THREAD_GONE)
		th = NULL;
	pool_reset(&rec_pool, th ? rec_index(th) + 1 : 0);
	pool_reset(&gap_pool, th ? th->gaps : 0);
}

void thread_setup(void)
{
	key_ready();
	/* First of our handlers in the child (unwind_setup runs before
	 * client.c registers its own): the pool is whole before a
	 * --follow-fork attach records. */
	pthread_atfork(NULL, NULL, thread_fork_child);
}
