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

/* 1 while this process records; the hooks test it first, once per call. */
extern HP_HIDDEN _Atomic int hp_active;

/* Profiling state, valid while hp_active (set before it becomes 1). */
struct client_state {
	struct hp_region region;
	uint64_t interval;    /* sampling interval, bytes */
	uint64_t exact_from;  /* sizes >= this are recorded exactly */
	uint32_t unwind_mode; /* enum hp_unwind_mode */
	uint32_t max_frames;
	int sock_fd; /* connection to the collector, -1 if none */
};
extern HP_HIDDEN struct client_state hp_client;

/* Per-thread state: the sampler and the re-entrancy guard. */
struct client_tls {
	int64_t bytes_left; /* bytes until the next sample point */
	uint64_t rng;
	uint8_t seeded;
	uint8_t in_hook;
	uintptr_t stack_lo, stack_hi; /* for frame-pointer walks; 0 = unknown */
};
extern HP_HIDDEN __thread struct client_tls hp_tls
        __attribute__((tls_model("initial-exec")));

/* recorder.c: accounting of one allocation / free / realloc. */
HP_HIDDEN void recorder_sample(void *ptr, size_t size, uint64_t charged,
                               bool exact, uintptr_t caller);
HP_HIDDEN void recorder_free(void *ptr);
HP_HIDDEN bool recorder_take(void *ptr, struct hp_live_v1 *out);
HP_HIDDEN void recorder_apply_free(const struct hp_live_v1 *v);
HP_HIDDEN void recorder_put_back(void *ptr, const struct hp_live_v1 *v);
HP_HIDDEN uint64_t recorder_objects_fp(size_t size, bool exact);

/* sampler.c: the slow path of the Poisson sampler. */
HP_HIDDEN uint64_t sampler_slow(struct client_tls *t, size_t size);

/*
 * Called by every allocating hook after the real allocator returned p != 0,
 * only while hp_active.  The common case is one thread-local subtraction.
 */
static inline void client_on_alloc(void *p, size_t size, uintptr_t caller)
{
	if (size >= hp_client.exact_from) {
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

/* unwind.c */
HP_HIDDEN void unwind_init(void);
/* Fills pcs (leaf first, the program's frames only); returns the count
 * and sets *truncated when the stack was deeper than max. */
HP_HIDDEN uint32_t unwind_capture(uint64_t *pcs, uint32_t max, uint32_t mode,
                                  bool *truncated);

/* modules.c */
HP_HIDDEN void modules_init(void);
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

/* client.c */
HP_HIDDEN void client_stop(uint32_t reason);

#endif
