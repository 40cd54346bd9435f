/*
 * The data side of `heapprof top` (docs/TOP.md): a running process's heap
 * read from its shared regions, as `heapprof snapshot -p` finds them
 * (live_snapshot.h), summed per function.  Nothing is asked of the
 * process or of its session: each reading maps the regions read-only,
 * copies the per-stack counters (not the live blocks: a refresh a second
 * must stay cheap) and unmaps them.
 *
 *   top_reader_new    a reader of one process (of libc.malloc; of every
 *                     heap after top_reader_all_heaps)
 *   top_read          one reading: totals, memory, per-function values
 *   top_reader_free   frees it (and its name cache)
 *
 * Each reading is made the heap model of the process (model/live.h) and
 * summed per function as `heapprof report` sums a profile (model/funcs.h):
 * the same functions, named as the profile writer names frames (the ELF
 * symbol tables, through symbolize.h), two functions of one name told
 * apart by their modules.
 */
#ifndef HEAPPROF_INSPECT_TOP_READ_H
#define HEAPPROF_INSPECT_TOP_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "layout/layout_v2.h"

/* The four views, in `heapprof report --view` order. */
enum top_view {
	TOP_SPACE,
	TOP_OBJECTS,
	TOP_ALLOC_SPACE,
	TOP_ALLOC_OBJECTS,
	TOP_NVIEWS
};

/* Cumulative counters since the process attached (sampled: estimates). */
struct top_counts {
	uint64_t alloc_bytes, free_bytes;
	uint64_t alloc_objs_fp, free_objs_fp; /* 16.16 fixed */
};

/* The callers kept per function. */
#define TOP_CALLERS 4

/* One function of one heap: one that called the allocator (self), or
 * only a caller of one (its self counts zero; inclusive ones not). */
struct top_func {
	uint32_t heap;          /* its heap id (top_reading.heaps[].id) */
	uint32_t name;          /* index into top_reader's names (top_name) */
	struct top_counts c;    /* self: as the allocator's caller */
	struct top_counts incl; /* inclusive: on the stack, once a stack */
	/* The stack of this function holding the most live bytes, as names
	 * of its callers, nearest first: up to TOP_CALLERS of them. */
	uint32_t callers[TOP_CALLERS];
	uint32_t ncallers;
	int64_t best_live; /* that stack's live bytes */
};

/* A heap read: its totals (sampled: estimates). */
struct top_heap {
	uint32_t id;
	char name[64];
	uint64_t interval; /* its sampling interval (1: every allocation) */
	struct top_counts total;
};

struct top_reading {
	uint64_t ts; /* CLOCK_BOOTTIME */
	/* When the client began counting (CLOCK_BOOTTIME at its attach, as
	 * its region says: shown, never computed with); 0: unknown. */
	uint64_t since;
	uint64_t interval; /* sampling interval in use (1: every allocation) */
	struct top_counts total; /* libc.malloc's */
	/* The heaps read, by id: libc.malloc first, then those of the
	 * process's stacks (top_reader_all_heaps). */
	struct top_heap *heaps;
	size_t nheaps;
	/* The client's counters (HP_CTR_*: samples not recorded, unwind
	 * errors, ...), from its region header. */
	uint64_t counters[HP_CTR_ALL];
	bool have_rss;
	uint64_t rss, rss_peak;
	/* heapprof's shared tables in memory (the regions of the active
	 * attach), whoever allocated them. */
	uint64_t tables;
	/* The memory limit of the process's cgroup; 0: none. */
	uint64_t limit;
	const char *limit_src;  /* which file said so; NULL if none found */
	struct top_func *funcs; /* sorted by heap, then name */
	size_t nfuncs;
};

struct top_reader;

/* A reader of pid, or NULL when out of memory. */
struct top_reader *top_reader_new(pid_t pid);

/* r reads every heap of the process, not only libc.malloc. */
void top_reader_all_heaps(struct top_reader *r);

/*
 * One reading of the process's heap (libc.malloc) into *out, which
 * top_reading_free frees.  0; -1 with why (len bytes) saying why not (as
 * live_snapshot_open says it: not profiled, gone, ...); -ENOMEM.
 */
int top_read(struct top_reader *r, struct top_reading *out, char *why,
             size_t len);

void top_reading_free(struct top_reading *t);

/* The name of a function index (top_func.name, callers). */
const char *top_name(const struct top_reader *r, uint32_t name);

/* The value of view v in counts c: bytes, or objects rounded. */
int64_t top_value(const struct top_counts *c, enum top_view v);

/* The function named name of libc.malloc in t, or NULL. */
const struct top_func *top_find(const struct top_reading *t, uint32_t name);

void top_reader_free(struct top_reader *r);

#endif
