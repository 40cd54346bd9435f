/*
 * heapprof's in-program API: named snapshots of the live heap.
 *
 *     #include <heapprof/heapprof.h>
 *
 *     load_config();
 *     heapprof_take_named_snapshot("after-load");
 *     run_phase();
 *     heapprof_take_named_snapshot("after-phase");
 *
 * Each call stores, in the profile being recorded, every block the
 * process has live at that moment (address, size, call stack, thread,
 * time) under the name; `heapprof snapshot --list PROFILE` lists them,
 * `heapprof snapshot --name NAME PROFILE` writes one as pprof and
 * `heapprof diff PROFILE --dumps after-load,after-phase` compares two.
 * With `heapprof record -i 1` the snapshot holds every block; when
 * sampling, the sampled ones (each standing for its estimated bytes).
 *
 * Link with `pkg-config --cflags --libs heapprof` (-lheapprof).  In a
 * program nobody profiles the call returns -ENOTCONN at once.
 */
#ifndef HEAPPROF_HEAPPROF_H
#define HEAPPROF_HEAPPROF_H

#ifdef __cplusplus
extern "C" {
#endif

/* Longest name, in bytes without the terminating NUL. */
#define HEAPPROF_SNAPSHOT_NAME_MAX 127

/*
 * Asks the collector recording this process to store a snapshot of the
 * live heap under `name` (1..HEAPPROF_SNAPSHOT_NAME_MAX bytes, no control
 * characters; names need not be unique: each call stores one more
 * snapshot), and waits until it is stored.  The calling thread is blocked
 * meanwhile (at most 30 s); the process's other threads run on, so a block
 * they allocate or free during it may or may not be in the snapshot.
 *
 * Returns 0 when the snapshot is in the profile, else a negative errno
 * value (errno itself is left alone):
 *   -EINVAL     name is NULL, empty, too long or has control characters;
 *   -ENOTCONN   this process is not being profiled (or its collector
 *               went away before answering);
 *   -EBUSY      another thread's snapshot (or a table-growth request) is
 *               in progress and did not end within the wait;
 *   -ETIMEDOUT  the collector did not answer within 30 s;
 *   -EIO        the collector could not write it.
 * Thread-safe; not async-signal-safe (do not call it from a signal
 * handler).  Never allocates; a block a signal handler allocates on the
 * calling thread while it waits is not recorded.
 */
int heapprof_take_named_snapshot(const char *name);

#ifdef __cplusplus
}
#endif

#endif
