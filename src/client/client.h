/*
 * Internal interface of the client library (libheapprof.so), the part of
 * heapprof that runs inside the profiled program.  Rules for everything
 * under src/client: no stdio, no malloc of our own, no lock shared with the
 * program on the allocation or free path, errno preserved, bounded work.
 */
#ifndef HEAPPROF_CLIENT_H
#define HEAPPROF_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout/region.h"

#define HP_HIDDEN      __attribute__((visibility("hidden")))
#define HP_EXPORT      __attribute__((visibility("default")))
#define HP_LIKELY(x)   __builtin_expect(!!(x), 1)
#define HP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/*
 * Nonzero while this process records: the attach generation of the session
 * (see client_slot.gen).  The hooks test it first, once per call.  A
 * generation rather than a flag so that a recorder noticing STOP in an old
 * region cannot turn off a session that attached meanwhile.
 */
extern HP_HIDDEN _Atomic int hp_active;
/*
 * The same generation while the session also profiles libc.malloc (the
 * malloc hooks test this one), 0 otherwise: a session may select only
 * custom heaps (--heaps NAME), and then malloc costs what it costs idle.
 */
extern HP_HIDDEN _Atomic int hp_malloc_on;
/* hp_malloc_on's value from the program's start until the constructor
 * runs: the hooks take their tracked path, and the recorder keeps what
 * they see for the constructor (early.c). */
#define HP_MALLOC_EARLY (-1)
/* The process may run under a seccomp filter it installed (sandbox.c):
 * no system call but the region's from then on. */
extern HP_HIDDEN _Atomic int hp_sandboxed;
HP_HIDDEN bool sandbox_at_start(void);
/* Before the program starts a child (client.c, spawn.c). */
HP_HIDDEN void client_child_note(void);
/* spawn.c: the real functions, found once in the constructor. */
HP_HIDDEN void spawn_init(void);
/* The next definition of name after ours (dlsym RTLD_NEXT), looked up
 * once into *slot (spawn.c; exec.c's wrappers too). */
HP_HIDDEN void *client_real(_Atomic(void *) *slot, const char *name);
/* exec.c: the variables to put back for an exec of this process (its
 * pid now), from the constructor (env_scrub) before they leave environ. */
HP_HIDDEN void exec_keep(const char *preload, const char *socket,
                         const char *seccomp, const char *follow);
/* /proc/self/status, whole, in a static buffer (NULL if unreadable); a
 * normal context only (the constructor, the destructor). */
HP_HIDDEN const char *proc_status_read(void);
/* The number after KEY ("\nThreads:") in it; -1 if none. */
HP_HIDDEN long proc_status_field(const char *buf, const char *key);
/* The constructor's part: the real prctl and syscall found (dlsym). */
HP_HIDDEN void sandbox_init(void);

/*
 * One mapped region and what the recorder needs of its header.  Slots live
 * in a static array (no allocation); a hook loads hp_client.cur once per
 * call and uses that slot throughout, so switching regions (a late attach,
 * a new session, GROW) never tears what a running hook sees.  A slot that
 * is replaced stays mapped: see client.c, "Slots".
 */
struct client_slot {
	struct hp_region region;
	uint32_t gen;         /* attach generation (session) it belongs to */
	uint32_t unwind_mode; /* enum hp_unwind_mode */
	uint32_t max_frames;
	uint32_t flags; /* header.config_flags, cached */
	bool track_max; /* HP_CFG_TRACK_MAX with a STACK_MAX table */
	bool adaptive;  /* HP_CFG_ADAPTIVE */
	uint32_t block_timeout_ms;
	uint64_t base_interval; /* header.sampling_interval */
	uint64_t max_interval;  /* adaptive: never past it */
	uint32_t threshold_pct; /* adaptive: table fill that doubles */
	uint32_t live_trigger;  /* adaptive: bucket fill that looks closer */
	/* Earlier region of the same attach (GROW): a free that misses here
	 * looks there.  NULL for the first region of an attach. */
	struct client_slot *prev;
	/* First region of the attach.  Peak tracking keeps live bytes, the
	 * peak and its epoch in root's header; a new peak is copied into
	 * the headers of the later regions, whose STACK_MAX entries follow
	 * the same epochs (so each region reads right on its own). */
	struct client_slot *root;
	/* --block-client: no GROW before this (CLOCK_MONOTONIC ns) after
	 * one timed out; UINT64_MAX once the collector said it has no
	 * room.  Samples that find the table full meanwhile are dropped
	 * and counted as without the option. */
	_Atomic uint64_t grow_after_ns;
	_Atomic uint32_t state; /* SLOT_FREE / SLOT_MAPPED (client.c) */

	/* The event trace (HP_TAB_TRACE), which lives in root's region: on
	 * in every slot of an attach whose first region has one.  Events of
	 * this slot name region_index (its stack table holds their
	 * stack_id). */
	bool traced;
	/* The live table is the collector's: allocations and frees go to
	 * the log in region 0 (HP_TRACE_LOG), not into the table. */
	bool live_log;
	/* root, once it took the table back from a collector stopped in the
	 * middle of inserting a block (log_inflight): that block. */
	bool lq_alloc;
	uint64_t lq_key;
	struct hp_live_v2 lq_v;
	/* root: when its takeover began (tick clock), kept across a longjmp
	 * out of it and the resumption. */
	uint64_t take_start_ns;
	uint8_t region_index;
	/* CLOCK_BOOTTIME - CLOCK_MONOTONIC at setup (recorder_alloc_ts). */
	uint64_t boot_offset;
	/* root only: streaming with HP_CFG_BLOCK_CLIENT: a writer that finds
	 * no room waits at most trace_block_ms; after a wait that timed out
	 * nobody waits before trace_stall_ns (CLOCK_MONOTONIC). */
	bool trace_block;
	uint32_t trace_block_ms;
	_Atomic uint64_t trace_stall_ns;

	/* The region's memfd, kept open (at a high number, client.c
	 * keep_fd_min; close-on-exec) so that
	 * `heapprof snapshot -p PID` finds the region through /proc/PID/fd;
	 * -1 without.  Closed with the slot only if it is still the same
	 * file (the program may have closed the number and reused it). */
	int keep_fd;
	uint64_t keep_dev, keep_ino;
};

#define HP_CLIENT_SLOTS 16

/* Profiling state. */
struct client_state {
	/* The region new samples go to; NULL before the first attach.
	 * Published (release) before hp_active is set. */
	_Atomic(struct client_slot *) cur;
	/* Sampling interval for newly drawn gaps (adaptive sampling raises
	 * it) and the size from which allocations are recorded exactly. */
	_Atomic uint64_t interval;
	_Atomic uint64_t exact_from;
	int sock_fd; /* connection to the collector, -1 if none */
	/* The socket's identity (device, inode), checked before every use
	 * of sock_fd: the program may have closed the number and reused it
	 * (client.c, sock_ours). */
	uint64_t sock_dev, sock_ino;
	struct client_slot slots[HP_CLIENT_SLOTS];
};
extern HP_HIDDEN struct client_state hp_client;

/*
 * A word that reads 1 in the process that attached and 0 in any child that
 * got a copy of its memory (MADV_WIPEONFORK), also one made by a raw
 * clone()/fork system call that ran no pthread_atfork handler: such a
 * child must never write into the parent's shared regions.  A CLONE_VM
 * child shares the page, sees 1, and rightly records into the same
 * regions: its heap is the parent's.  Points at a constant 1 when the
 * kernel has no MADV_WIPEONFORK (before 4.14).
 */
extern HP_HIDDEN const volatile int *hp_fork_guard;
/* The child of a fork nobody told us about: stop as a pthread_atfork
 * child handler would have; returns NULL (client.c). */
HP_HIDDEN struct client_slot *client_forked_unseen(void);

static inline struct client_slot *client_cur(void)
{
	struct client_slot *s =
	        atomic_load_explicit(&hp_client.cur, memory_order_acquire);
	if (HP_UNLIKELY(s != NULL && *hp_fork_guard == 0))
		return client_forked_unseen();
	return s;
}

#define HP_RULES_L1    512
#define HP_MEMO_FRAMES 64

/* One frame of a capture, as the next capture may take it again (unwind.c,
 * "Reuse"): the frame's registers and where the step to its caller read
 * the return address and rbp (sp + off - 1; 0: not read).  32 bytes: a
 * capture reads and writes one per frame. */
struct unwind_memo_frame {
	uintptr_t pc, sp, bp;
	uint32_t ra_off;
	uint16_t bp_off; /* a frame larger than 64 KiB is stepped again */
	uint16_t flags;  /* MF_* (unwind.c) */
};
_Static_assert(sizeof(struct unwind_memo_frame) == 32,
               "two memo frames per cache line");
struct unwind_memo {
	uint32_t n;    /* frames in f, outermost first; 0: none */
	uint32_t gen;  /* cfi_generation() it was made under */
	uint32_t mode; /* enum hp_unwind_mode */
	/* fold[q]: the stack hash's fold (region.h) of f[0 .. q]'s pcs;
	 * valid when folds is nonzero. */
	uint32_t folds;
	/* fr[0]: an edge whose sp is above every stack (a scan outward for
	 * the first frame at or above an sp stops on it); fr[1 + q]: f[q]. */
	struct unwind_memo_frame fr[1 + HP_MEMO_FRAMES];
	uint64_t fold[HP_MEMO_FRAMES];
};

/*
 * What a capture needs besides the program's stack: ~15 KiB, too much for
 * the program's stack and for static TLS (glibc carves a thread's static
 * TLS out of its stack: 9 KiB more made pthread_create fail with EINVAL
 * for a program's 16 KiB threads).  A pool of these is mapped at attach;
 * a thread claims one for each capture (unwind_ctx_claim), the one it had
 * last when it is free.  Everything in it but the scratch frames is a
 * cache that is right for any thread (rules are per pc, a memo is checked
 * against the stack before use), so a context may pass from thread to
 * thread.
 */
struct capture_ctx {
	/* 0: free; else who holds it: the claiming thread's pointer plus
	 * 1 + its guard level (unwind_ctx_claim), so that the context of a
	 * hook a longjmp left can be found and given back. */
	_Atomic uintptr_t busy;
	_Atomic uintptr_t owner; /* thread pointer of the last claimer */
	/* The last capture's frames, outermost first (unwind.c, "Reuse"),
	 * and the new frames of the capture under way, leaf first. */
	struct unwind_memo memo;
	struct unwind_memo_frame fresh[HP_MEMO_FRAMES];
	struct {
		uint64_t key;
		uint64_t rule;
	} rules[HP_RULES_L1];           /* the last rules used (cfi.c) */
	uint64_t frames[HP_MAX_FRAMES]; /* the capture's frames */
	/* The fold of all of them (hp_stack_fold_all's value), when the
	 * capture knew it from its memo (fold_ok); the capture sets both. */
	uint64_t fold;
	bool fold_ok;
	/* cfi.c's working memory when it works out a rule (the FDE lookup's
	 * result, the interpreter's rows): here, not on the program's
	 * stack. */
	_Alignas(16) unsigned char cfi_work[512];
	/* unwind.c's walk state (registers, bounds), for the same reason. */
	_Alignas(16) unsigned char walk[128];
};

/* One level of the re-entrancy guard (recorder.c, "The re-entrancy
 * guard"): the frame of a hook of this thread that is running (0: none;
 * HP_GUARD_CLOSED set: nothing may be recorded under it) and the return
 * address its frame holds while it runs. */
#define HP_GUARD_CLOSED 1u
struct client_guard {
	uintptr_t frame;
	uintptr_t ra;
};

/* A thread's Poisson sampler (sampler.c). */
struct client_sampler {
	uint64_t rng;
	/* The interval the pending gap was drawn with: the sample point that
	 * ends it is charged this much (adaptive sampling changes the
	 * interval between gaps, never within one).  0: not known (a record
	 * taken after the thread's countdown began): the interval in force
	 * stands in for it. */
	uint64_t gap_interval;
	/* The interval in force for the last sampled allocation (its first
	 * sample point's gap), for its object estimate. */
	uint64_t obj_interval;
	uint8_t seeded;
};

/*
 * A thread's state beyond what the hooks' fast path and the re-entrancy
 * guard need: a record of thread.c's pool (the library's own memory), not
 * static TLS, which glibc carves out of every thread's stack.  A thread
 * takes one at its first hook that needs it (client_thread) and gives it
 * back when it exits (a pthread key's destructor).  A thread without one
 * (the pool empty, or its record given back at its exit) is still
 * profiled, with what the hook can work out each time (thread.c).
 */
struct client_thread {
	struct client_sampler sm;
	/* The stack the capture may read (unwind.c): this thread's own
	 * stack [stack_lo, stack_hi) once stack_tried found it, and the
	 * alternate signal stack it set with sigaltstack() (0, 0 if none). */
	uintptr_t stack_lo, stack_hi;
	uintptr_t alt_lo, alt_hi;
	/* This thread is taking the live table back from the log: the frame
	 * (and its return address) of the call doing it.  A hook nested in
	 * it (a signal handler's) must not wait for it; a hook after a
	 * longjmp out of it (the frame gone: unwind_frame_gone) finishes
	 * it. */
	uintptr_t log_take_frame, log_take_ra;
	/* The custom heaps' gaps (thread_heap_gaps): a block of thread.c's
	 * second pool, 1 + its index; 0: none yet. */
	uint32_t gaps;
	/* The capture context this thread had last (unwind.c): a hint. */
	uint16_t ctx_hint;
	uint8_t stack_tried;
};

/* The custom heaps' samplers of one thread (heaps.c): bytes to the next
 * sample point of each heap (0: none drawn), for the session gen. */
struct heap_gaps {
	int gen;
	uint32_t reserved;
	int64_t left[HP_MAX_HEAPS]; /* [0] unused: libc.malloc */
};

/*
 * Per-thread state in static TLS: what the allocation fast path and the
 * re-entrancy guard need, and no more (at most 64 bytes: glibc carves a
 * thread's static TLS out of its stack, and a program's 16 KiB threads
 * have none to spare; tests/integration/test_tls.sh checks the size).
 * The rest is the thread's record (struct client_thread).
 */
struct client_tls {
	int64_t bytes_left; /* bytes until the next sample point */
	/* This thread's record: NULL before it took one, HP_THREAD_GONE
	 * once it gave it back (its exit). */
	struct client_thread *th;
	/* [0]: the outermost hook running on this thread; [1]: a record
	 * nested in it (an allocation by a signal handler that interrupted
	 * it).  Written only by this thread, read by its signal handlers. */
	struct client_guard guard[2];
	/* gettid(), read at this thread's first sampled allocation or
	 * traced free; 0 until then (and in a fork child: reset there). */
	uint32_t tid;
	uint32_t flags; /* HP_TLS_* */
};
/* bytes_left counts down a gap drawn by sampler_slow (before: 0 - the
 * bytes allocated). */
#define HP_TLS_GAP_DRAWN 1u
/* This thread found the pool of records empty (counted once). */
#define HP_TLS_MISSED 2u
_Static_assert(sizeof(struct client_tls) <= 64, "static TLS budget");
extern HP_HIDDEN __thread struct client_tls hp_tls
        __attribute__((tls_model("initial-exec")));

#define HP_THREAD_GONE ((struct client_thread *)(uintptr_t)1)

/* thread.c: the records. */
/* This thread's record, taken now if it has none; NULL when the pool is
 * empty or the thread gave its record back (it is exiting).  Lock-free,
 * no system call, async-signal-safe. */
HP_HIDDEN struct client_thread *thread_claim(void);
static inline struct client_thread *client_thread(void)
{
	struct client_thread *th = hp_tls.th;
	if (HP_LIKELY((uintptr_t)th > (uintptr_t)HP_THREAD_GONE))
		return th;
	return th ? NULL : thread_claim();
}
/* th's custom-heap gaps, taken now if it has none; NULL when there are
 * none free.  Async-signal-safe. */
HP_HIDDEN struct heap_gaps *thread_heap_gaps(struct client_thread *th);
/* The constructor's part (from unwind_setup): the key whose destructor
 * gives a thread's record back, and the fork child's reset. */
HP_HIDDEN void thread_setup(void);

/* recorder.c: accounting of one allocation / free / realloc. */
/*
 * Records a sampled allocation of heap_id under live-table key `key` (an
 * address for libc.malloc, heaps_key() for custom heaps) charged
 * `charged` bytes and `objs` objects (16.16), with the current stack.
 * false when nothing was recorded (re-entered, or the session stopped).
 */
HP_HIDDEN bool recorder_record(uint32_t heap_id, uint64_t key, size_t size,
                               uint64_t charged, uint64_t objs,
                               uintptr_t caller);
/* libc.malloc's sample: objects from exact / the thread's obj_interval. */
HP_HIDDEN void recorder_sample(void *ptr, size_t size, uint64_t charged,
                               bool exact, uintptr_t caller);
/* A free of live-table key `key`: its charge leaves its stack. */
HP_HIDDEN void recorder_forget(uint64_t key);
HP_HIDDEN void recorder_free(void *ptr);
/* Caches what the recorder needs of a bound region's header into s (the
 * first region of an attach: root = s). */
HP_HIDDEN void recorder_slot_setup(struct client_slot *s, uint32_t gen);
/* Makes ns the region after s in s's attach (GROW): prev, root, and the
 * peak state copied from the root. */
HP_HIDDEN void recorder_slot_chain(struct client_slot *ns,
                                   struct client_slot *s);
/* Takes ptr's live entry out (realloc); returns the slot it was found in,
 * or NULL. */
HP_HIDDEN struct client_slot *recorder_take(void *ptr, struct hp_live_v2 *out);
/* The free of key's entry v, taken out of slot s: its charge leaves its
 * stack, and a FREE event goes to the trace. */
HP_HIDDEN void recorder_apply_free(struct client_slot *s, uint64_t key,
                                   const struct hp_live_v2 *v);
HP_HIDDEN void recorder_put_back(struct client_slot *s, void *ptr,
                                 const struct hp_live_v2 *v);
/* realloc with the live table's log: a position in the log held across
 * the real call (a free logged after it could come after the allocation
 * of the same address by another thread), then filled in with the
 * free of the old block, or with nothing if the call failed.  hold: false
 * when the table is not the log's (use recorder_take); e NULL in a hook
 * nested in this thread's takeover of the table (not recorded). */
struct recorder_hold {
	struct client_slot *s;
	struct hp_event_v2 *e;
	uint64_t pos, was, key;
};
HP_HIDDEN bool recorder_log_hold(void *old, struct recorder_hold *h);
HP_HIDDEN void recorder_log_release(const struct recorder_hold *h, bool freed);
/* Objects a sampled allocation stands for (16.16 fixed): 1 when exact,
 * else 1/p with p the probability that a block of `size` bytes is sampled
 * at `interval`. */
HP_HIDDEN uint64_t recorder_objects_fp(size_t size, bool exact,
                                       uint64_t interval);
/* The re-entrancy guard for code that is not a record (a traced free's
 * wait, a named snapshot, the exit's memory figures): takes the guard's
 * free level for the frame `frame` of the caller; closed: nothing is
 * recorded on this thread under it (counted as reentrant).  Returns the
 * level taken (0: no hook of this thread runs under the caller, 1: one
 * does), or -1 when none is free.  ra: the return address the caller's
 * frame holds (__builtin_return_address(0)).  recorder_unhold gives the
 * level back. */
HP_HIDDEN int recorder_hold(uintptr_t frame, uintptr_t ra, bool closed);
HP_HIDDEN void recorder_unhold(int level);
/* Adaptive sampling: doubles the interval of slot s (CAS on
 * header.current_interval from `seen`), up to its max.  true if done. */
HP_HIDDEN bool recorder_adapt(struct client_slot *s, uint64_t seen);

/* sampler.c: the slow path of the Poisson sampler (bytes_left in t, the
 * rest in the thread's record, or drawn afresh without one). */
HP_HIDDEN uint64_t sampler_slow(struct client_tls *t, size_t size);
/* The interval for the object estimate of the allocation sampler_slow
 * just sampled on this thread. */
HP_HIDDEN uint64_t sampler_obj_interval(void);
/* th's sampler, or, for a thread without a record (th NULL), *local,
 * seeded afresh: the gaps of a Poisson process are memoryless, so a
 * sampler that starts anew at a report draws what one kept would. */
HP_HIDDEN struct client_sampler *sampler_of(struct client_thread *th,
                                            struct client_sampler *local);
/* One exponential gap of mean `interval` from sm's generator (seeded on
 * first use): the custom heaps' samplers. */
HP_HIDDEN int64_t sampler_gap(struct client_sampler *sm, uint64_t interval);

/*
 * Called by every allocating hook after the real allocator returned p != 0,
 * only while hp_active.  The common case is one thread-local subtraction.
 */
static inline void client_on_alloc(void *p, size_t size, uintptr_t caller)
{
	if (size >=
	    atomic_load_explicit(&hp_client.exact_from, memory_order_relaxed)) {
		recorder_sample(p, size, size, true, caller);
		return;
	}
	struct client_tls *t = &hp_tls;
	t->bytes_left -= (int64_t)size;
	if (HP_LIKELY(t->bytes_left > 0))
		return;
	uint64_t charged = sampler_slow(t, size);
	if (charged)
		recorder_sample(p, size, charged, false, caller);
}

/*
 * The allocating hooks ask before the real call, while hp_active: 0 when
 * this allocation is not recorded (nearly always: one thread-local
 * subtraction, and the hook ends in a tail call of the allocator, with no
 * frame of its own around it), 1 when it is sampled, 2 when it is
 * recorded exactly (size >= exact_from).  A hook that got 1 or 2 calls the
 * allocator, then client_alloc_recorded.
 */
static inline int client_alloc_sampled(size_t size)
{
	if (HP_UNLIKELY(size >= atomic_load_explicit(&hp_client.exact_from,
	                                             memory_order_relaxed)))
		return 2;
	struct client_tls *t = &hp_tls;
	t->bytes_left -= (int64_t)size;
	return t->bytes_left <= 0;
}
/* After the real call, for an allocation client_alloc_sampled gave `how`
 * (1 or 2) for; p may be NULL (then the bytes go back to the countdown). */
HP_HIDDEN void client_alloc_recorded(void *p, size_t size, uintptr_t caller,
                                     int how);

/*
 * Called by every freeing hook for p != 0, only while hp_active.  Nearly
 * every free is of an unsampled block, which the live filter tells here,
 * with one byte load and no call; the rest (a block that may be sampled,
 * a region grown since (prev), a forked child's first free, no filter at
 * -i 1) take the recorder's path.
 */
static inline void client_on_free(void *p)
{
	struct client_slot *s =
	        atomic_load_explicit(&hp_client.cur, memory_order_acquire);
	if (HP_LIKELY(s != NULL && s->region.live_filter != NULL &&
	              s->prev == NULL && *hp_fork_guard != 0) &&
	    !livetab_maybe_live(&s->region, (uintptr_t)p))
		return;
	recorder_free(p);
}

/* This thread's pointer (its TCB): a thread's identity without a system
 * call, ready before any hook runs. */
static inline uintptr_t thread_pointer(void)
{
	uintptr_t tp;
#if defined(__x86_64__)
	__asm__("mov %%fs:0, %0" : "=r"(tp));
#else
	tp = (uintptr_t)__builtin_thread_pointer();
#endif
	return tp;
}

/* early.c: allocations before the constructor attached (see the file).
 * early_record/early_free: from the recorder, while no region is there;
 * early_end: the constructor's first step (no more blocks kept; frees
 * still marked); early_replay: in the constructor's attach, before it
 * publishes the region s (want: libc.malloc is profiled), records the
 * blocks kept, once; early_finish: the constructor's last step, drops
 * what no attach took and ends the hooks' early mode. */
HP_HIDDEN void early_record(uint64_t ptr, size_t size);
HP_HIDDEN void early_free(uint64_t ptr);
HP_HIDDEN void early_end(void);
HP_HIDDEN void early_replay(struct client_slot *s, bool want);
HP_HIDDEN void early_finish(void);
/* recorder.c: one block early.c kept, recorded now into s (not yet
 * published) with its frames (leaf first), exactly. */
HP_HIDDEN bool recorder_replay(struct client_slot *s, uint64_t key, size_t size,
                               const uint64_t *pcs, uint32_t n, bool truncated,
                               bool freed);
/* hooks.c: p is heapprof's own (the bootstrap pool of the hooks). */
HP_HIDDEN bool hooks_ours(const void *p);
/* hooks.c, for a client the collector injected (route.c): set before the
 * hooks resolve; where got.c stores the definition of a malloc-family
 * name (NULL for the others); operator new/delete after the routing. */
HP_HIDDEN void hooks_init(void);
HP_HIDDEN void hooks_set_injected(void);
HP_HIDDEN bool hooks_injected(void);
HP_HIDDEN void **hooks_real_slot(const char *name);
HP_HIDDEN void hooks_routed(void);
/* route.c: routes every loaded object's slots of the functions this
 * library exports to them (got.c): 0 and what was done, or -1. */
struct got_stats;
HP_HIDDEN int route_all(struct got_stats *st);

/* unwind.c: the stack capture inside the program (no system call, no
 * lock, no allocation; see the file). */
/* Before the constructor (early.c): the main stack's top and the span
 * below it taken as mapped, and this library's range from the loader's
 * _dl_find_object of `self` (no system call); unwind_setup refines both. */
HP_HIDDEN void unwind_early_setup(uintptr_t stack_top, uintptr_t span,
                                  const void *self);
#ifdef HP_UNWIND_ORACLE
/* pc is in libheapprof's own code (early.c, the oracle build only). */
HP_HIDDEN bool unwind_is_ours(uintptr_t pc);
#endif
/* At load, in the constructor: what the capture needs that costs a
 * system call or dlsym (not async-signal-safe). */
HP_HIDDEN void unwind_setup(void);
/* At attach (async-signal-safe): the rule cache. */
HP_HIDDEN void unwind_init(void);
/* What a capture says besides its frames (HP_CAP_*). */
#define HP_CAP_TRUNCATED 1u /* deeper than max: cut there */
#define HP_CAP_STOPPED                                                         \
	2u                  /* ended early: a read it could not prove          \
	                     * safe, or no rule for a frame */
#define HP_CAP_UNBOUNDED 4u /* on a stack it cannot bound: caller only */
#define HP_CAP_LOW       8u /* less than HP_HOOK_STACK left: not recorded */
/* In *flags on the way in: the record is nested in a hook of its thread
 * (the recorder's guard knows; with --unwind fp the capture cannot see
 * the signal frame that says so). */
#define HP_CAP_NESTED 16u
/* The most stack a hook may use, its capture included (the suite
 * measures it: tests/integration/test_capture.sh).  A hook that finds
 * less than that left below the program's frame does not record the
 * allocation (counted: stack_low).  One threshold, not two: recording
 * even the caller alone takes the recorder's deepest path (interning, a
 * module scan), most of the budget. */
#define HP_HOOK_STACK 1024u
/* The program's stack below its call into the hook: false when the stack
 * cannot be bounded (*room is then UINTPTR_MAX, as when only its top is
 * known).  For a hook without a capture context; the capture measures
 * it itself. */
HP_HIDDEN bool unwind_stack_room(uintptr_t *room);
/* unwind_ctx.c, at attach (async-signal-safe): the pool of contexts. */
HP_HIDDEN void unwind_ctx_init(void);
/* A capture context for this thread's hook at guard level `level`, or
 * NULL when every one is busy (the capture then keeps the caller only).
 * Async-signal-safe. */
HP_HIDDEN struct capture_ctx *unwind_ctx_claim(uint32_t level);
HP_HIDDEN void unwind_ctx_release(struct capture_ctx *c);
/* Gives back every context this thread's hook at guard level `level`
 * holds: that hook is gone (a longjmp left it). */
HP_HIDDEN void unwind_ctx_drop(uint32_t level);
/* Fills c->frames (leaf first, the program's frames only: frames[0] is the
 * return address into the function that called the hook); returns the
 * count (at least 1 when caller != 0) and sets *flags (HP_CAP_NESTED in
 * it on the way in: see there). */
HP_HIDDEN uint32_t unwind_capture(struct capture_ctx *c, uint32_t max,
                                  uint32_t mode, uintptr_t caller,
                                  uint32_t *flags);
/* Whether the hook frame `mark` of this thread, which holds the return
 * address ra while the hook runs, is provably gone: `here`, a frame of
 * the code running now, lies above it (or at it) on the same stack, or
 * the frame's return address slot holds something else now (the
 * re-entrancy guard, recorder.c). */
HP_HIDDEN bool unwind_frame_gone(uintptr_t mark, uintptr_t ra, uintptr_t here);
/* Whether a signal handler is running on this thread's stack (true when
 * the unwind cannot tell). */
HP_HIDDEN bool unwind_in_signal_handler(void);
/* This thread's kernel id without a system call when glibc says where it
 * keeps it (libthread_db's descriptor); gettid() otherwise. */
HP_HIDDEN uint32_t unwind_thread_id(void);
/* sigaltstack() and makecontext() tell the capture about stacks it could
 * not otherwise bound (hooks.c interposes both). */
HP_HIDDEN void unwind_note_altstack(const void *sp, size_t size, int flags);
HP_HIDDEN void unwind_note_stack(const void *sp, size_t size);

/* cfi.c: unwind rules per pc from .eh_frame, cached. */
enum cfi_kind {
	CFI_FRAME = 0, /* an ordinary frame: cfa, bp, ra_off8 say how */
	CFI_END,       /* the outermost frame (return address undefined) */
	CFI_SIGNAL,    /* the sigreturn trampoline: a ucontext at sp */
	CFI_NOCFI,     /* in an object, but no FDE covers it */
	CFI_NOMODULE,  /* in no loaded object */
	CFI_BAD,       /* CFI we do not follow */
};
enum { CFI_CFA_SP = 0, CFI_CFA_BP = 1, CFI_CFA_DEREF_BP = 2 };
enum { BP_SAME = 0, BP_AT_CFA = 1, BP_AT_BP = 2, BP_LOST = 3 };
struct cfi_rule {
	int32_t cfa_off; /* CFA = sp/bp + cfa_off, or *(bp + cfa_off) */
	int16_t bp_off;  /* caller's rbp at CFA/bp + bp_off */
	int8_t ra_off8;  /* return address at CFA + 8 * ra_off8 */
	/* fast: a CFI_FRAME rule of the plainest shape (cfi.c's mark_fast),
	 * stepped by the capture's tight loop (unwind.c). */
	uint8_t kind : 3, cfa : 2, bp : 2, fast : 1;
};
_Static_assert(sizeof(struct cfi_rule) == 8, "one word per rule");
HP_HIDDEN void cfi_init(void);
/* An object was unloaded: cached rules are stale. */
HP_HIDDEN void cfi_forget(void);
/* Bumped by every cfi_forget. */
HP_HIDDEN uint32_t cfi_generation(void);
/* The rule for pc: `exact` when pc is the next instruction to run (a
 * frame a signal interrupted), not a return address.  c: the capture
 * context whose rules to look in first, or NULL. */
HP_HIDDEN struct cfi_rule cfi_rule_for(struct capture_ctx *c, uintptr_t pc,
                                       bool exact);

/* A capture context's rule cache (capture_ctx.rules): the key of pc under
 * cfi generation gen, and its slot. */
static inline uint64_t cfi_l1_key(uintptr_t pc, bool exact, uint32_t gen)
{
	return ((uint64_t)pc & 0xffffffffffffull) |
	       ((uint64_t)(gen & 0x7fff) << 48) | (exact ? 1ull << 63 : 0);
}
static inline uint32_t cfi_l1_slot(uintptr_t pc)
{
	return (uint32_t)(pc ^ (pc >> 7)) & (HP_RULES_L1 - 1);
}
/* cfi_rule_for(c, pc, exact) with the context's cache looked in inline
 * (a walk's common case), for a walk that read gen at its start. */
static inline __attribute__((always_inline)) struct cfi_rule
cfi_rule_cached(struct capture_ctx *c, uintptr_t pc, bool exact, uint32_t gen)
{
	uint32_t i = cfi_l1_slot(pc);
	if (HP_LIKELY(!(pc >> 48) &&
	              c->rules[i].key == cfi_l1_key(pc, exact, gen))) {
		struct cfi_rule r;
		__builtin_memcpy(&r, &c->rules[i].rule, sizeof(r));
		return r;
	}
	return cfi_rule_for(c, pc, exact);
}

#ifdef HP_UNWIND_ORACLE
/* oracle.c (libheapprof-oracle.so only): checks a capture against libgcc's
 * _Unwind_Backtrace from the caller's frame.  pcs[0..n) are the program's
 * frames, leaf first, as captured; truncated: the capture stopped at max
 * frames (then only the first n must match); skip: the capture
 * deliberately did not unwind (counted, not compared).  Call it from the
 * frame that captured, right after the capture. */
HP_HIDDEN void unwind_oracle_check(const uint64_t *pcs, uint32_t n,
                                   bool truncated, bool skip);
#endif

/* modules.c */
HP_HIDDEN void modules_init(void);
/* After fork, in the child: a scan the parent's other threads held is
 * gone with them. */
HP_HIDDEN void modules_reset_after_fork(void);
HP_HIDDEN void modules_scan(struct hp_region *r);
/* Rescans when a pc lies outside every known module (a library was
 * loaded since the last scan). */
HP_HIDDEN void modules_check(struct hp_region *r, const uint64_t *pcs,
                             uint32_t n);
/* Bounds of an object's executable code, by an address inside it. */
HP_HIDDEN bool modules_text_range(const void *addr, uintptr_t *lo,
                                  uintptr_t *hi);

/* log.c: one line to stderr through a fixed buffer, errno preserved. */
HP_HIDDEN void client_log(const char *msg, const char *detail);

/* memstat.c: RSS and mallinfo2 into the header, at exit. */
HP_HIDDEN void memstat_init(void);
HP_HIDDEN void memstat_take(void);

/* heaps.c: the custom allocator API (include/heapprof/heap_profile.h). */
/* Writes every registered custom heap into s's heap table with the
 * interval s's session selects for it.  Async-signal-safe. */
HP_HIDDEN void heaps_publish(struct client_slot *s);
/* The session changed (attached, stopped): the heaps' enable / disable
 * callbacks are due.  Async-signal-safe; cheap when none are set. */
HP_HIDDEN void heaps_session_changed(void);
/* In a fork child, before it may attach: the callback thread is the
 * parent's. */
HP_HIDDEN void heaps_after_fork_child(void);

/* client.c */
/* Ends the session when its collector set STOP or closed our connection
 * (the callback thread asks, a few times a second, while profiling). */
HP_HIDDEN void client_check_session(void);
/* Stops recording into s (control = STOP seen, or an internal failure):
 * records why in its header and turns hp_active off unless another
 * session attached meanwhile. */
HP_HIDDEN void client_stop(struct client_slot *s, uint32_t reason);
/* --block-client: asks the collector for a larger region when a table of
 * s is full (one thread at a time, bounded by block_timeout_ms).  Returns
 * the new current slot, or NULL (the sample is dropped as without it). */
HP_HIDDEN struct client_slot *client_grow(struct client_slot *s,
                                          uint32_t table);

#endif
