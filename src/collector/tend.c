/*
 * The regions' memory, allocated by the collector ahead of the client.
 *
 * A region is a memfd: a page of it is allocated, and charged to a memory
 * cgroup, by whoever touches it first.  A page the profiled program
 * touches first is charged to the program's cgroup (a redis in a 64 MiB
 * cgroup was OOM-killed by its live table that way); a page the collector
 * touches first, here, is charged to the collector's, and the program only
 * maps it.  So the collector allocates what the client is about to use:
 *
 *   - at creation (collector_prepare_region): the fixed tables, the trace
 *     (a ring, all of it used), the first megabyte of the live table's
 *     log (the rest ahead of its writers: collector_prepare_log), the
 *     first stack records, frames and index slots, and level 0 of the
 *     live table (and its filter);
 *   - while the program runs (collector_tend, from the session's loop):
 *     the live table's next level once the one inserts go to is 60% full
 *     (livetab_advance; inserts move on at HP_LIVE_FIRST_FULL_PCT), and
 *     stack records, STACK_MAX entries and frames ahead of their bump
 *     allocators.  It looks every TEND_MIN_MS while the table's fill
 *     moves, and backs off to TEND_MAX_MS while it does not: a look
 *     reads 128 lines of keys spread over a level, 1-8 ms on this VM for
 *     a level of a million slots the program hardly touched (measured),
 *     so an idle program with a large table cost the collector 11% of a
 *     core at one look each 10 ms (with the RSS look's mincore, now an
 *     fstat of the memfd); 1% now.
 *
 * A client that outruns the collector allocates the pages itself (and
 * counts the level: HP_CTR_LIVE_UNPREPARED), as it did before; nothing
 * waits.  The collector never writes a byte of the client's tables here:
 * fallocate allocates without clearing (shmem clears a page at its first
 * touch, so on the client's core for the pages it uses); without our
 * descriptor, MADV_POPULATE_WRITE on our mapping, or a read of each page
 * (shmem allocates on a read fault too).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/collector.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define TEND_MIN_MS 10
#define TEND_MAX_MS 640
/* Stack records and frames kept allocated ahead of the client's use. */
#define TEND_STACKS_AHEAD 4096
#define TEND_FRAMES_AHEAD (64 * 1024)
/* Stacks past which the stack index's outer part is used (region.c probes
 * its first 32768 slots first; a stack takes about two). */
#define TEND_INDEX_AT 8192

static uint64_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	return ps > 0 ? (uint64_t)ps : 4096;
}

/* Allocates [off, off + len) of the region, whole pages, charged to us. */
static void prepare(struct target_region *tr, uint64_t off, uint64_t len)
{
	uint64_t page = page_size();
	uint64_t start = off & ~(page - 1);
	uint64_t end = (off + len + page - 1) & ~(page - 1);
	if (end > tr->size)
		end = tr->size;
	if (end <= start)
		return;
	/* fallocate: the pages are allocated (charged to us) but not
	 * cleared: shmem clears a page when it is first touched, so the
	 * client's first touch warms its own cache, as when it allocated
	 * the page itself.  Without the descriptor (or on a kernel without
	 * shmem fallocate) through our mapping.  What we allocated is the
	 * region's growth meanwhile: pages the client had touched already
	 * are not ours. */
	uint64_t before = region_resident(tr->fd, tr->base, tr->size);
	if (tr->fd < 0 ||
	    fallocate(tr->fd, 0, (off_t)start, (off_t)(end - start)) != 0) {
		volatile uint8_t *p = (uint8_t *)tr->base + start;
		if (madvise((void *)p, end - start, MADV_POPULATE_WRITE) != 0) {
			for (uint64_t o = 0; o < end - start; o += page)
				(void)p[o];
		}
	}
	uint64_t after = region_resident(tr->fd, tr->base, tr->size);
	if (after > before)
		tr->prepared_bytes += after - before;
}

static uint64_t table_off(const struct hp_region *r, const void *p)
{
	return (uint64_t)((const uint8_t *)p - r->base);
}

/* Stack records (and STACK_MAX entries) up to n, frames up to nf. */
static void prepare_stacks(struct target_region *tr, uint64_t n, uint64_t nf)
{
	const struct hp_region *r = &tr->region;
	if (n > r->stacks_cap)
		n = r->stacks_cap;
	if (nf > r->frames_cap)
		nf = r->frames_cap;
	if (n > tr->stacks_ready) {
		uint64_t from = tr->stacks_ready;
		prepare(tr, table_off(r, &r->stacks[from]),
		        (n - from) * sizeof(*r->stacks));
		if (r->stack_max)
			prepare(tr, table_off(r, &r->stack_max[from]),
			        (n - from) * sizeof(*r->stack_max));
		tr->stacks_ready = n;
	}
	if (nf > tr->frames_ready) {
		prepare(tr, table_off(r, &r->frames[tr->frames_ready]),
		        (nf - tr->frames_ready) * sizeof(uint64_t));
		tr->frames_ready = nf;
	}
}

/* Level j of the live table; then tells the client. */
static void prepare_level(struct target_region *tr, uint32_t j)
{
	const struct hp_region *r = &tr->region;
	struct hp_range rg[3];
	int n = livetab_level_ranges(r, j, rg);
	for (int i = 0; i < n; i++)
		prepare(tr, rg[i].off, rg[i].len);
	tr->levels_ready = j + 1;
	if (r->live_ready)
		atomic_store_explicit(r->live_ready, j + 1,
		                      memory_order_release);
}

/* The live table's log: its first LOG_FIRST bytes at creation, then up
 * to LOG_AHEAD past the writers' head (collector_prepare_log, at each read
 * of it, every few milliseconds while it moves), in steps of LOG_STEP,
 * until all of it is: a process that makes a few allocations costs the
 * collector a page of log, not 16 MiB, and its start does not wait for
 * them (a memfd fallocate of 16 MiB took 1.1-1.8 ms here; a followed
 * shell script's every process has one). */
#define LOG_FIRST (1ull << 20)
#define LOG_AHEAD (4ull << 20)
#define LOG_STEP  (1ull << 20)

void collector_prepare_region(struct target_region *tr)
{
	const struct hp_region *r = &tr->region;
	/* Header, trace, heaps, modules, strings: everything before the
	 * live keys (region_format's order); of the live table's log, its
	 * start. */
	uint64_t keys = table_off(r, r->live_keys);
	if (r->trace_mode == HP_TRACE_LOG && r->trace_cap) {
		uint64_t t0 = table_off(r, r->trace);
		uint64_t tn = r->trace_cap * sizeof(*r->trace);
		prepare(tr, 0, t0);
		tr->log_ready = tn < LOG_FIRST ? tn : LOG_FIRST;
		prepare(tr, t0, tr->log_ready);
		if (keys > t0 + tn)
			prepare(tr, t0 + tn, keys - (t0 + tn));
	} else {
		prepare(tr, 0, keys);
	}
	if (r->live_filter)
		prepare(tr, table_off(r, r->live_filter),
		        r->live_filter_mask + 1);
	uint64_t idx = r->stack_index_cap < 32768 ? r->stack_index_cap : 32768;
	prepare(tr, table_off(r, r->stack_index), idx * sizeof(uint64_t));
	tr->index_ready = idx == r->stack_index_cap;
	prepare_stacks(tr, TEND_STACKS_AHEAD, TEND_FRAMES_AHEAD);
	if (r->live_levels > 1 && r->live_values)
		prepare_level(tr, 0);
}

static void tend_region(struct target_region *tr)
{
	const struct hp_region *r = &tr->region;
	if (!tr->base)
		return;
	/* Counts the client wrote: clamped (it may be hostile). */
	uint64_t ns = atomic_load_explicit(&r->hdr->stacks_used,
	                                   memory_order_relaxed);
	uint64_t nf = atomic_load_explicit(&r->hdr->frames_used,
	                                   memory_order_relaxed);
	if (ns + TEND_STACKS_AHEAD / 2 > tr->stacks_ready ||
	    nf + TEND_FRAMES_AHEAD / 2 > tr->frames_ready)
		prepare_stacks(tr, ns + TEND_STACKS_AHEAD,
		               nf + TEND_FRAMES_AHEAD);
	if (!tr->index_ready && ns >= TEND_INDEX_AT) {
		prepare(tr, table_off(r, r->stack_index),
		        r->stack_index_cap * sizeof(uint64_t));
		tr->index_ready = true;
	}
	if (r->live_levels < 2 || !r->live_ready || !r->live_values)
		return;
	/* Our count of prepared levels is our own (levels_ready): a client
	 * cannot make us skip one. */
	uint32_t load;
	uint32_t want = livetab_advance(&tr->region, &load);
	while (tr->levels_ready < want)
		prepare_level(tr, tr->levels_ready);
	/* Moving (or a level moved on): look again soon; else less often. */
	uint32_t d = load > tr->tend_load ? load - tr->tend_load
	                                  : tr->tend_load - load;
	if (d >= 2)
		tr->tend_gap_ms = TEND_MIN_MS;
	else if (tr->tend_gap_ms < TEND_MAX_MS)
		tr->tend_gap_ms =
		        tr->tend_gap_ms ? tr->tend_gap_ms * 2 : TEND_MIN_MS;
	tr->tend_load = load;
}

void collector_prepare_log(struct target_region *tr, uint64_t head)
{
	const struct hp_region *r = &tr->region;
	if (!tr->base || r->trace_mode != HP_TRACE_LOG || !r->trace_cap)
		return;
	uint64_t tn = r->trace_cap * sizeof(*r->trace);
	if (tr->log_ready >= tn)
		return;
	/* head is the client's word: past a lap, the whole log. */
	uint64_t want = head >= r->trace_cap
	                        ? tn
	                        : head * sizeof(*r->trace) + LOG_AHEAD;
	if (want > tn)
		want = tn;
	if (want < tr->log_ready + LOG_STEP && want < tn)
		return;
	if (want <= tr->log_ready)
		return;
	prepare(tr, table_off(r, r->trace) + tr->log_ready,
	        want - tr->log_ready);
	tr->log_ready = want;
}

int collector_tend(struct collector *c)
{
	uint64_t now = hp_clock_ns(CLOCK_MONOTONIC), next = UINT64_MAX;
	for (size_t i = 0; i < c->ntargets; i++) {
		struct target *t = c->targets[i];
		if (t->retired)
			continue;
		for (int k = 0; k < t->nreg; k++) {
			struct target_region *tr = &t->reg[k];
			if (now >= tr->tend_at_ns) {
				tend_region(tr);
				uint32_t gap = tr->tend_gap_ms ? tr->tend_gap_ms
				                               : TEND_MIN_MS;
				tr->tend_at_ns = now + gap * 1000000ull;
			}
			if (tr->tend_at_ns < next)
				next = tr->tend_at_ns;
		}
	}
	if (next == UINT64_MAX)
		return -1;
	return next > now ? (int)((next - now + 999999) / 1000000) : 0;
}

uint64_t collector_prepared_bytes(const struct target *t)
{
	uint64_t n = 0;
	for (int k = 0; k < t->nreg; k++)
		n += t->reg[k].prepared_bytes;
	return n;
}

uint64_t region_resident(int fd, const void *base, uint64_t size)
{
	/* The memfd's allocated blocks: one call, whatever the size. */
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0) {
		uint64_t b = (uint64_t)st.st_blocks * 512;
		return b < size ? b : size;
	}
	uint64_t page = page_size();
	uint64_t n = (size + page - 1) / page;
	unsigned char *vec = malloc(n ? n : 1);
	if (!vec || mincore((void *)base, size, vec) != 0) {
		free(vec);
		return 0;
	}
	uint64_t in = 0;
	for (uint64_t i = 0; i < n; i++)
		in += vec[i] & 1;
	free(vec);
	return in * page;
}
