/*
 * The custom allocator API (include/heapprof/heap_profile.h): named heaps
 * next to libc.malloc.
 *
 * Heaps.  AHeapInfo_create hands out the next of 63 static records; its
 * index is the heap id for the life of the process, and the same id is the
 * heap's index in every region's heap table (heap 0 there is libc.malloc).
 * A session selects heaps by name (struct hp_heap_select_v1, written by the
 * collector); the client writes each registered heap into the region with
 * the interval the selection gives it, 0 when it is not selected
 * (heaps_publish, at attach and at registration).  A report reads that
 * entry of the current region: no state of ours can go stale between
 * sessions.
 *
 * Reports.  Idle (no session), a report is one relaxed load of hp_active
 * and a return.  Profiling, reportAllocation samples with a per-thread,
 * per-heap Poisson sampler at the heap's interval (the malloc sampler's
 * maths, docs/SAMPLING.md); blocks of at least the interval, and every
 * block at interval 1, are recorded exactly.  Live-table keys of custom
 * heaps are the block's id mixed with the heap id by a bijection (so two
 * heaps, or a pool and the malloc block under it, never share a key).
 *
 * Callbacks.  A heap's enable / disable callbacks run when the session's
 * view of it changes, under one lock, from the registering thread (when a
 * session profiles the process already) or from the "heapprof-cb" thread.
 * That thread exists only in processes that registered a heap with a
 * callback; a futex wakes it (from any context, including the attach
 * signal handler: no descriptor of ours in the program's table, which a
 * program that closes every descriptor would take away or reuse), and
 * while a session runs it also looks every
 * CHECK_MS whether the session ended, so a disable callback comes even
 * when the program stops allocating.  A fork child does not inherit it:
 * it is started again, in the child, by the next registration or report.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "heapprof/heap_profile.h"

_Static_assert(HEAPPROFD_HEAP_NAME_SZ == HP_HEAP_NAME_MAX, "heap name size");
_Static_assert(HEAPPROF_MAX_CUSTOM_HEAPS == HP_MAX_HEAPS - 1, "heap count");

#define CALLER() ((uintptr_t)__builtin_return_address(0))
/* How often the callback thread looks for the end of a session, and,
 * with none, for a session its wake-up did not announce. */
#define CHECK_MS      200
#define IDLE_CHECK_MS 1000

enum { HEAP_FREE = 0, HEAP_CREATED = 1, HEAP_REGISTERED = 2 };
/* hp_heap_v1.ready while a client thread writes the entry. */
#define ENTRY_WRITING 2u

struct AHeapInfo {
	char name[HP_HEAP_NAME_MAX];
	void (*on_enable)(void *, const AHeapProfileEnableCallbackInfo *);
	void *enable_data;
	void (*on_disable)(void *, const AHeapProfileDisableCallbackInfo *);
	void *disable_data;
	_Atomic uint32_t state; /* HEAP_* */
	/* What the callbacks were last told (under cb_lock): the interval
	 * given to on_enable and the session (attach generation); 0, 0 when
	 * the heap is not enabled as far as the program knows. */
	uint64_t told_interval;
	int told_gen;
};

struct AHeapProfileEnableCallbackInfo {
	uint64_t interval;
};

struct AHeapProfileDisableCallbackInfo {
	uint32_t reserved;
};

static struct AHeapInfo heap_tab[HP_MAX_HEAPS]; /* [0] unused: malloc */
static _Atomic uint32_t heap_next = 1;

/* Per thread and heap, bytes to the next sample point are kept in a
 * block of thread.c's (struct heap_gaps, not static TLS: 512 bytes a
 * thread), taken at the thread's first sampled report; a thread without
 * one draws a gap afresh at each report (the gaps are memoryless: the
 * same sampler, one draw more per report). */

/* ---- misuse: one line, once per kind ---------------------------------- */

static _Atomic uint32_t said;

static void complain(uint32_t kind, const char *msg, const char *detail)
{
	if (atomic_fetch_or_explicit(&said, kind, memory_order_relaxed) & kind)
		return;
	client_log(msg, detail);
}

/* ---- heap table entries ----------------------------------------------- */

static uint32_t heaps_known(void)
{
	uint32_t n = atomic_load_explicit(&heap_next, memory_order_acquire);
	return n < HP_MAX_HEAPS ? n : HP_MAX_HEAPS;
}

/* Writes heap id into s's table unless it is there already. */
static void publish_one(struct client_slot *s, uint32_t id)
{
	struct hp_region *r = &s->region;
	if (id >= r->heaps_cap)
		return;
	struct hp_heap_v1 *e = &r->heaps[id];
	uint32_t want = 0;
	if (!atomic_compare_exchange_strong_explicit(
	            &e->ready, &want, ENTRY_WRITING, memory_order_acquire,
	            memory_order_relaxed))
		return; /* written, or being written by another thread */
	const struct AHeapInfo *h = &heap_tab[id];
	memcpy(e->name, h->name, HP_HEAP_NAME_MAX);
	uint64_t iv = region_heap_interval(r, h->name);
	e->interval = iv;
	e->flags = iv ? HP_HEAP_ENABLED : 0;
	atomic_store_explicit(&e->ready, 1, memory_order_release);
	/* heaps_used: one past the highest id written. */
	uint64_t used =
	        atomic_load_explicit(&r->hdr->heaps_used, memory_order_relaxed);
	while (used < (uint64_t)id + 1 &&
	       !atomic_compare_exchange_weak_explicit(
	               &r->hdr->heaps_used, &used, (uint64_t)id + 1,
	               memory_order_release, memory_order_relaxed))
		;
}

void heaps_publish(struct client_slot *s)
{
	uint32_t n = heaps_known();
	for (uint32_t id = 1; id < n; id++)
		if (atomic_load_explicit(&heap_tab[id].state,
		                         memory_order_seq_cst) ==
		    HEAP_REGISTERED)
			publish_one(s, id);
}

/* The interval at which s's session profiles heap id; 0: it does not. */
static uint64_t heap_interval(const struct client_slot *s, uint32_t id)
{
	const struct hp_region *r = &s->region;
	if (id >= r->heaps_cap)
		return 0;
	const struct hp_heap_v1 *e = &r->heaps[id];
	if (atomic_load_explicit(&e->ready, memory_order_acquire) != 1)
		return 0;
	return e->interval;
}

/* ---- callbacks -------------------------------------------------------- */

static pthread_mutex_t cb_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t cb_wake; /* futex word: bumped to wake the thread */
static _Atomic bool cb_wanted;   /* a registered heap has callbacks */
static _Atomic bool cb_running;  /* the thread runs in this process */
static _Atomic int cb_starting;  /* one thread starts it */
static _Atomic bool cb_failed;   /* it could not start: no retries */
/* The thread running callbacks (its thread pointer; under cb_lock), 0
 * when none runs. */
static _Atomic uintptr_t cb_thread;

void heaps_session_changed(void)
{
	if (!atomic_load_explicit(&cb_running, memory_order_acquire))
		return;
	int saved = errno;
	atomic_fetch_add_explicit(&cb_wake, 1, memory_order_release);
	syscall(SYS_futex, &cb_wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = saved;
}

/* Tells each heap with callbacks what the session now does with it.
 * Caller holds cb_lock. */
static void dispatch(void)
{
	int gen = atomic_load_explicit(&hp_active, memory_order_acquire);
	struct client_slot *s = gen ? client_cur() : NULL;
	if (s && s->gen != (uint32_t)gen)
		s = NULL;
	uint32_t n = heaps_known();
	for (uint32_t id = 1; id < n; id++) {
		struct AHeapInfo *h = &heap_tab[id];
		if (atomic_load_explicit(&h->state, memory_order_acquire) !=
		            HEAP_REGISTERED ||
		    (!h->on_enable && !h->on_disable))
			continue;
		uint64_t iv = s ? heap_interval(s, id) : 0;
		int want_gen = iv ? gen : 0;
		if (iv == h->told_interval && want_gen == h->told_gen)
			continue;
		atomic_store_explicit(&cb_thread, thread_pointer(),
		                      memory_order_relaxed);
		if (h->told_interval && h->on_disable) {
			struct AHeapProfileDisableCallbackInfo di = {0};
			h->on_disable(h->disable_data, &di);
		}
		h->told_interval = 0;
		h->told_gen = 0;
		if (iv && h->on_enable) {
			struct AHeapProfileEnableCallbackInfo ei = {iv};
			h->on_enable(h->enable_data, &ei);
		}
		h->told_interval = iv;
		h->told_gen = want_gen;
		atomic_store_explicit(&cb_thread, 0, memory_order_relaxed);
	}
}

static void dispatch_locked(void)
{
	pthread_mutex_lock(&cb_lock);
	dispatch();
	pthread_mutex_unlock(&cb_lock);
}

static void *cb_main(void *arg)
{
	(void)arg;
	for (;;) {
		/* A wake-up comes at once; the timeouts are for what it cannot
		 * say: a session that ended without telling us. */
		uint32_t seen =
		        atomic_load_explicit(&cb_wake, memory_order_acquire);
		int ms = atomic_load_explicit(&hp_active, memory_order_relaxed)
		                 ? CHECK_MS
		                 : IDLE_CHECK_MS;
		struct timespec ts = {.tv_sec = ms / 1000,
		                      .tv_nsec = (long)(ms % 1000) * 1000000L};
		syscall(SYS_futex, &cb_wake, FUTEX_WAIT_PRIVATE, seen, &ts,
		        NULL, 0);
		client_check_session();
		dispatch_locked();
	}
	return NULL;
}

/* Starts the callback thread if this process wants one and has none.
 * Normal context only (pthread_create). */
static void cb_start(void)
{
	if (!atomic_load_explicit(&cb_wanted, memory_order_relaxed) ||
	    atomic_load_explicit(&cb_running, memory_order_acquire) ||
	    atomic_load_explicit(&cb_failed, memory_order_relaxed))
		return;
	int zero = 0;
	if (!atomic_compare_exchange_strong_explicit(&cb_starting, &zero, 1,
	                                             memory_order_acquire,
	                                             memory_order_relaxed))
		return;
	if (atomic_load_explicit(&cb_running, memory_order_acquire))
		goto out;
	/* The thread takes none of the program's signals. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	int rc = pthread_create(&t, &a, cb_main, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		atomic_store_explicit(&cb_failed, true, memory_order_relaxed);
		complain(4,
		         "cannot start the heap callback thread; enable and "
		         "disable callbacks only run from registerHeap",
		         strerror(rc));
		goto out;
	}
	pthread_setname_np(t, "heapprof-cb");
	atomic_store_explicit(&cb_running, true, memory_order_release);
out:
	atomic_store_explicit(&cb_starting, 0, memory_order_release);
}

void heaps_after_fork_child(void)
{
	/* The thread belongs to the parent.  The child starts
	 * afresh, as a process nothing was told yet: a child the session
	 * follows gets its enable callbacks from its own thread, started at
	 * its next registration or report; one it does not follow gets no
	 * callback at all. */
	atomic_store_explicit(&cb_running, false, memory_order_relaxed);
	atomic_store_explicit(&cb_starting, 0, memory_order_relaxed);
	atomic_store_explicit(&cb_failed, false, memory_order_relaxed);
	pthread_mutex_init(&cb_lock, NULL);
	atomic_store_explicit(&cb_thread, 0, memory_order_relaxed);
	for (uint32_t id = 1; id < HP_MAX_HEAPS; id++) {
		heap_tab[id].told_interval = 0;
		heap_tab[id].told_gen = 0;
	}
}

/* ---- the API: describing and registering heaps ------------------------ */

HP_EXPORT uint64_t AHeapProfileEnableCallbackInfo_getSamplingInterval(
        const AHeapProfileEnableCallbackInfo *session_info)
{
	return session_info ? session_info->interval : 0;
}

HP_EXPORT AHeapInfo *AHeapInfo_create(const char *heap_name)
{
	int saved = errno;
	AHeapInfo *info = NULL;
	size_t len = 0;
	if (!heap_name) {
		complain(1, "AHeapInfo_create: the heap name is NULL", NULL);
		goto out;
	}
	while (len < HP_HEAP_NAME_MAX && heap_name[len])
		len++;
	if (len == 0 || len >= HP_HEAP_NAME_MAX) {
		complain(1,
		         "AHeapInfo_create: heap names are 1 to 63 bytes; "
		         "not created",
		         len ? "name too long" : "empty name");
		goto out;
	}
	if (!strcmp(heap_name, "libc.malloc")) {
		complain(1,
		         "AHeapInfo_create: \"libc.malloc\" is malloc's heap; "
		         "not created",
		         NULL);
		goto out;
	}
	uint32_t id = atomic_load_explicit(&heap_next, memory_order_relaxed);
	do {
		if (id >= HP_MAX_HEAPS) {
			complain(2,
			         "AHeapInfo_create: at most 63 heaps per "
			         "process; not created",
			         heap_name);
			goto out;
		}
	} while (!atomic_compare_exchange_weak_explicit(&heap_next, &id, id + 1,
	                                                memory_order_acq_rel,
	                                                memory_order_relaxed));
	info = &heap_tab[id];
	memcpy(info->name, heap_name, len);
	info->name[len] = '\0';
	atomic_store_explicit(&info->state, HEAP_CREATED, memory_order_release);
out:
	errno = saved;
	return info;
}

/* info's heap id if it is a record of ours in state `state`, else 0. */
static uint32_t info_id(const AHeapInfo *info, uint32_t state)
{
	uintptr_t p = (uintptr_t)info, b = (uintptr_t)&heap_tab[1];
	if (p < b || p >= (uintptr_t)&heap_tab[HP_MAX_HEAPS] ||
	    (p - b) % sizeof(heap_tab[0]))
		return 0;
	uint32_t id = (uint32_t)((p - b) / sizeof(heap_tab[0])) + 1;
	if (atomic_load_explicit(&heap_tab[id].state, memory_order_acquire) !=
	    state)
		return 0;
	return id;
}

HP_EXPORT AHeapInfo *AHeapInfo_setEnabledCallback(
        AHeapInfo *info,
        void (*callback)(void *, const AHeapProfileEnableCallbackInfo *),
        void *data)
{
	if (info_id(info, HEAP_CREATED)) {
		info->on_enable = callback;
		info->enable_data = data;
	}
	return info;
}

HP_EXPORT AHeapInfo *AHeapInfo_setDisabledCallback(
        AHeapInfo *info,
        void (*callback)(void *, const AHeapProfileDisableCallbackInfo *),
        void *data)
{
	if (info_id(info, HEAP_CREATED)) {
		info->on_disable = callback;
		info->disable_data = data;
	}
	return info;
}

HP_EXPORT uint32_t AHeapProfile_registerHeap(AHeapInfo *info)
{
	int saved = errno;
	uint32_t id = info_id(info, HEAP_CREATED);
	if (!id) {
		id = info_id(info, HEAP_REGISTERED); /* twice: same id */
		errno = saved;
		return id;
	}
	bool callbacks = info->on_enable || info->on_disable;
	if (callbacks)
		atomic_store_explicit(&cb_wanted, true, memory_order_relaxed);
	uint32_t want = HEAP_CREATED;
	if (!atomic_compare_exchange_strong_explicit(
	            &info->state, &want, HEAP_REGISTERED, memory_order_seq_cst,
	            memory_order_relaxed)) {
		errno = saved;
		return want == HEAP_REGISTERED ? id : 0;
	}
	/* Into the region of a session that runs now (an attach that
	 * publishes meanwhile sees HEAP_REGISTERED: see client.c). */
	if (atomic_load_explicit(&hp_active, memory_order_seq_cst)) {
		struct client_slot *s = client_cur();
		if (s)
			publish_one(s, id);
	}
	if (callbacks) {
		cb_start();
		/* Profiled already: the enable callback has run when we
		 * return.  From inside a callback, the thread does it. */
		if (atomic_load_explicit(&cb_thread, memory_order_relaxed) !=
		            thread_pointer() &&
		    atomic_load_explicit(&hp_active, memory_order_acquire))
			dispatch_locked();
		else
			heaps_session_changed();
	}
	errno = saved;
	return id;
}

/* ---- the API: reports --------------------------------------------------- */

/* A custom heap's live-table key: a bijection of alloc_id for each heap
 * (xor with a per-heap constant, then splitmix64's finalizer, itself a
 * bijection), so blocks of one heap never collide. */
static uint64_t heap_key(uint32_t id, uint64_t alloc_id)
{
	return hp_mix64(alloc_id ^ ((uint64_t)id * 0x9e3779b97f4a7c15ull));
}

static __attribute__((noinline)) bool heap_report(uint32_t heap_id,
                                                  uint64_t alloc_id,
                                                  uint64_t size, bool sampled,
                                                  uintptr_t caller)
{
	int saved = errno;
	bool done = false;
	if (heap_id == 0 || heap_id >= HP_MAX_HEAPS)
		goto out;
	if (HP_UNLIKELY(
	            !atomic_load_explicit(&cb_running, memory_order_relaxed)) &&
	    atomic_load_explicit(&cb_wanted, memory_order_relaxed))
		cb_start(); /* a fork child that is profiled */
	int gen = atomic_load_explicit(&hp_active, memory_order_acquire);
	struct client_slot *s = client_cur();
	if (!gen || !s)
		goto out;
	uint64_t iv = heap_interval(s, heap_id);
	if (!iv)
		goto out;
	uint64_t charged, objs = HP_OBJ_FP_ONE;
	if (sampled || iv == 1 || size >= iv) {
		charged = size; /* exact, or the caller's own estimate */
	} else {
		struct client_thread *th = client_thread();
		struct client_sampler local, *sm = sampler_of(th, &local);
		struct heap_gaps *g = th ? thread_heap_gaps(th) : NULL;
		int64_t left = 0;
		if (HP_LIKELY(g != NULL)) {
			if (g->gen != gen) {
				/* First report of this thread in this
				 * session: no gap drawn. */
				memset(g->left, 0, sizeof(g->left));
				g->gen = gen;
			}
			left = g->left[heap_id];
		}
		if (!left)
			left = sampler_gap(sm, iv);
		left -= (int64_t)size;
		charged = 0;
		while (left <= 0) {
			charged += iv;
			left += sampler_gap(sm, iv);
		}
		if (g)
			g->left[heap_id] = left;
		if (!charged)
			goto out;
		objs = recorder_objects_fp(size, false, iv);
	}
	done = recorder_record(heap_id, heap_key(heap_id, alloc_id), size,
	                       charged, objs, caller);
out:
	errno = saved;
	return done;
}

HP_EXPORT bool AHeapProfile_reportAllocation(uint32_t heap_id,
                                             uint64_t alloc_id, uint64_t size)
{
	if (HP_LIKELY(!atomic_load_explicit(&hp_active, memory_order_relaxed)))
		return false;
	return heap_report(heap_id, alloc_id, size, false, CALLER());
}

HP_EXPORT bool AHeapProfile_reportSample(uint32_t heap_id, uint64_t alloc_id,
                                         uint64_t size)
{
	if (HP_LIKELY(!atomic_load_explicit(&hp_active, memory_order_relaxed)))
		return false;
	return heap_report(heap_id, alloc_id, size, true, CALLER());
}

static __attribute__((noinline)) void heap_free(uint32_t heap_id,
                                                uint64_t alloc_id)
{
	if (heap_id == 0 || heap_id >= HP_MAX_HEAPS)
		return;
	struct client_slot *s = client_cur();
	if (!s || !heap_interval(s, heap_id))
		return;
	int saved = errno;
	recorder_forget(heap_key(heap_id, alloc_id));
	errno = saved;
}

HP_EXPORT void AHeapProfile_reportFree(uint32_t heap_id, uint64_t alloc_id)
{
	if (HP_LIKELY(!atomic_load_explicit(&hp_active, memory_order_relaxed)))
		return;
	heap_free(heap_id, alloc_id);
}
