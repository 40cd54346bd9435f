/*
 * heapprof's custom allocator API.
 *
 * A program with its own allocator (an arena, a pool, a slab cache, GPU or
 * file-backed memory) tells heapprof about the blocks it hands out, and
 * those blocks appear in the profile under the heap's name, next to
 * "libc.malloc", with the call stacks that asked for them.  The functions
 * have the names and signatures of heapprofd's custom allocator API, so
 * code written for one builds against the other.
 *
 *     #include <heapprof/heap_profile.h>
 *
 *     static uint32_t pool_heap;
 *
 *     void pool_init(void)
 *     {
 *             pool_heap = AHeapProfile_registerHeap(
 *                     AHeapInfo_create("example.pool"));
 *     }
 *     void *pool_alloc(struct pool *p, size_t n)
 *     {
 *             void *b = ...carve n bytes...;
 *             AHeapProfile_reportAllocation(pool_heap, (uintptr_t)b, n);
 *             return b;
 *     }
 *     void pool_free(struct pool *p, void *b)
 *     {
 *             AHeapProfile_reportFree(pool_heap, (uintptr_t)b);
 *             ...give b back...
 *     }
 *
 * Link with `pkg-config --cflags --libs heapprof` (-lheapprof).  A linked
 * program that nobody profiles runs normally: each report is a call that
 * reads one word and returns (docs/HEAPS.md has the measured cost).  It is
 * profiled like any other program: `heapprof record -- CMD`, or `heapprof
 * record -p PID` while it runs; custom heaps are recorded when the session
 * selects them (`--heaps NAME,...`, `--all-heaps`).
 *
 * Rules that hold for every function below:
 *  - Reports never take a lock another report could wait on, never block
 *    and preserve errno; idle (nothing profiles the process) they do
 *    nothing else.  While profiled, a recorded report unwinds the stack,
 *    as a sampled malloc does (the unwinder's first use in a process may
 *    call malloc).  Reports may come from any thread, concurrently.
 *  - Passing an invalid heap id (0, or one that registerHeap did not
 *    return) is harmless: reports return false and record nothing.
 *  - Nothing here writes to the program's stdout; a misuse that makes a
 *    function fail (a bad heap name, too many heaps) prints one line to
 *    stderr, prefixed "heapprof:", so that it is not silent.
 */
#ifndef HEAPPROF_HEAP_PROFILE_H
#define HEAPPROF_HEAP_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

/* Heap names are 1 to HEAPPROFD_HEAP_NAME_SZ - 1 bytes (the size includes
 * the terminating NUL), as in heapprofd. */
#define HEAPPROFD_HEAP_NAME_SZ 64

/* A process has at most this many custom heaps (libc.malloc is extra). */
#define HEAPPROF_MAX_CUSTOM_HEAPS 63

#ifdef __cplusplus
extern "C" {
#endif

/* The description of a heap before it is registered (opaque). */
typedef struct AHeapInfo AHeapInfo;
/* What a session tells a heap when it starts profiling it (opaque). */
typedef struct AHeapProfileEnableCallbackInfo AHeapProfileEnableCallbackInfo;
/* What a session tells a heap when it stops profiling it (opaque). */
typedef struct AHeapProfileDisableCallbackInfo AHeapProfileDisableCallbackInfo;

/*
 * The sampling interval, in bytes, the session uses for this heap: 1 means
 * every allocation is recorded; N means one sample point every N bytes on
 * average (Poisson sampling per byte, docs/SAMPLING.md).  An allocator that
 * samples itself (AHeapProfile_reportSample) should sample at this rate.
 * Valid only during the enable callback that received session_info.
 */
uint64_t AHeapProfileEnableCallbackInfo_getSamplingInterval(
        const AHeapProfileEnableCallbackInfo *session_info);

/*
 * Describes a new heap called heap_name.  The name is copied.  Names
 * should be unique in the process (e.g. "com.example.pool"): two heaps of
 * one name are merged in the profile.
 *
 * Returns NULL, and prints why, when heap_name is NULL, empty, longer than
 * HEAPPROFD_HEAP_NAME_SZ - 1 bytes or "libc.malloc" (reserved for malloc),
 * or when HEAPPROF_MAX_CUSTOM_HEAPS heaps were created already.  Every
 * non-NULL result should be passed to AHeapProfile_registerHeap, which
 * takes it over; an AHeapInfo is never freed (there are at most 63).
 * Thread-safe.
 */
AHeapInfo *AHeapInfo_create(const char *heap_name);

/*
 * Sets the function called when a session starts profiling this heap, and
 * the pointer passed to it as its first argument.  The callback gets the
 * heap's sampling interval through
 * AHeapProfileEnableCallbackInfo_getSamplingInterval.
 *
 * It is called once per session that selects the heap: from
 * AHeapProfile_registerHeap itself when a session is already profiling the
 * process, otherwise later from a thread heapprof starts for callbacks
 * (named "heapprof-cb", all signals blocked), never from a signal handler
 * and never while one of the program's own allocation calls is under way
 * on that thread.  Callbacks of one process never run concurrently.  A
 * callback may call every function of this API.
 *
 * Only before AHeapProfile_registerHeap: afterwards the call changes
 * nothing.  Returns info (NULL if info is NULL; a NULL callback removes
 * it).  Not thread-safe for one info.
 */
AHeapInfo *AHeapInfo_setEnabledCallback(
        AHeapInfo *info,
        void (*callback)(void *data,
                         const AHeapProfileEnableCallbackInfo *session_info),
        void *data);

/*
 * Sets the function called when the session that profiled this heap
 * stops: it ended (its duration passed, `heapprof record` was stopped),
 * or its collector went away.  Called on the "heapprof-cb" thread, after
 * the enable callback of that session, at most once per enable; never at
 * process exit (the profile simply ends there).  The same rules as the
 * enable callback apply otherwise.  Returns info.
 *
 * A forked child starts afresh: if the session follows it (--follow-fork)
 * its enable callbacks run again, in the child, once it reports or
 * registers a heap; otherwise no callback runs in it (and its reports
 * record nothing).
 */
AHeapInfo *AHeapInfo_setDisabledCallback(
        AHeapInfo *info,
        void (*callback)(void *data,
                         const AHeapProfileDisableCallbackInfo *disable_info),
        void *data);

/*
 * Registers the heap described by info and returns its id (1 to 63), to
 * pass to the report functions.  Takes ownership of info: do not use it
 * afterwards.  Registering the same info twice returns the same id.
 * Returns 0 (an id every report ignores) when info is NULL or did not come
 * from AHeapInfo_create.  If a session already profiles the process and
 * selects this heap, the enable callback has run when this returns.
 * Thread-safe.
 */
uint32_t AHeapProfile_registerHeap(AHeapInfo *info);

/*
 * Reports that the allocator handed out a block of `size` bytes named
 * alloc_id (usually its address; any 64-bit value unique among the heap's
 * live blocks).  While a session profiles this heap, heapprof samples the
 * allocation at the heap's interval and, when sampled, records it with the
 * current call stack; with interval 1 every allocation is recorded.
 *
 * Returns true if the allocation was recorded; false when no session
 * profiles this heap, it was not sampled, or heap_id is invalid.
 * Reporting an alloc_id that is live already replaces nothing: report the
 * free first.
 */
bool AHeapProfile_reportAllocation(uint32_t heap_id, uint64_t alloc_id,
                                   uint64_t size);

/*
 * For allocators that sample themselves (at the interval the enable
 * callback gave them): records one sample, with the current call stack,
 * that stands for `size` bytes, unconditionally.  The profile counts it as
 * one allocation of `size` bytes, so an allocator that picks one block in
 * N should report N times the block's size.  Prefer
 * AHeapProfile_reportAllocation, which samples without bias for you.
 *
 * Returns true if recorded, false when no session profiles this heap or
 * heap_id is invalid.
 */
bool AHeapProfile_reportSample(uint32_t heap_id, uint64_t alloc_id,
                               uint64_t size);

/*
 * Reports that block alloc_id of the heap was freed.  If it was recorded,
 * its bytes leave the heap's live total in the profile; otherwise (not
 * sampled, never reported, reported before the session started) nothing
 * changes.  Safe to call for every free.
 */
void AHeapProfile_reportFree(uint32_t heap_id, uint64_t alloc_id);

#ifdef __cplusplus
}
#endif

#endif
