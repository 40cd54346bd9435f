/*
 * The region: layout sizes, format/bind and the checks bind makes, the
 * stack table (interning, dedup, overflow) and the live table (insert,
 * remove, bucket fill), single- and multi-threaded, and the collector's
 * snapshot of a region; layout v2's seqlocked live entries and event
 * trace, and a v1 region still read.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collector/collector.h"
#include "layout/region.h"
#include "unit.h"

static void *new_region(uint64_t size, uint64_t interval, struct hp_region *r)
{
	void *base = calloc(1, size);
	struct hp_config cfg = {.sampling_interval = interval,
	                        .max_frames = 64};
	CHECK(region_format(base, size, &cfg) == 0);
	CHECK(region_bind(r, base, size) == 0);
	return base;
}

static void test_format_bind(void)
{
	struct hp_region r;
	void *base = new_region(8 << 20, 4096, &r);
	CHECK(r.hdr->version == HP_LAYOUT_VERSION);
	CHECK(r.stacks_cap >= 1024);
	CHECK(r.live_cap >= 1024);
	/* Tables do not overlap and fit. */
	const struct hp_table_desc *t = r.hdr->tables;
	for (int i = 0; i <= HP_TAB_LIVE_FILTER; i++)
		for (int j = 0; j <= HP_TAB_LIVE_FILTER; j++) {
			if (i == j)
				continue;
			uint64_t ie =
			        t[i].offset + t[i].capacity * t[i].entry_size;
			uint64_t je =
			        t[j].offset + t[j].capacity * t[j].entry_size;
			CHECK(ie <= t[j].offset || je <= t[i].offset);
			CHECK(ie <= (8 << 20));
		}
	CHECK(strcmp(r.heaps[0].name, "libc.malloc") == 0);
	CHECK(r.stacks[0].flags & HP_STACK_OVERFLOW);
	/* No session options: no STACK_MAX table, options off. */
	CHECK(r.stack_max == NULL);
	CHECK_EQ_U64(t[HP_TAB_STACK_MAX].capacity, 0);
	CHECK_EQ_U64(r.hdr->config_flags, 0);
	CHECK_EQ_U64(atomic_load(&r.hdr->max_epoch), 1);
	free(base);
}

/* Session options land in the header; TRACK_MAX adds STACK_MAX, parallel
 * to the stacks, inside the same budget. */
static void test_format_options(void)
{
	uint64_t size = 8 << 20;
	void *base = calloc(1, size);
	struct hp_config cfg = {.sampling_interval = 4096,
	                        .max_frames = 64,
	                        .config_flags = HP_CFG_TRACK_MAX |
	                                        HP_CFG_ADAPTIVE |
	                                        HP_CFG_BLOCK_CLIENT,
	                        .adaptive_threshold_pct = 75,
	                        .block_timeout_ms = 250};
	CHECK(region_format(base, size, &cfg) == 0);
	struct hp_region r;
	CHECK(region_bind(&r, base, size) == 0);
	struct hp_header_v1 *h = base;
	CHECK_EQ_U64(h->config_flags,
	             HP_CFG_TRACK_MAX | HP_CFG_ADAPTIVE | HP_CFG_BLOCK_CLIENT);
	CHECK_EQ_U64(h->adaptive_threshold_pct, 75);
	CHECK_EQ_U64(h->adaptive_max_interval, 64 * 4096); /* default */
	CHECK_EQ_U64(h->block_timeout_ms, 250);
	CHECK_EQ_U64(atomic_load(&h->max_epoch), 1);
	CHECK_EQ_U64(atomic_load(&h->current_interval), 0);
	CHECK(r.stack_max != NULL);
	CHECK_EQ_U64(h->tables[HP_TAB_STACK_MAX].capacity, r.stacks_cap);
	CHECK_EQ_U64(h->tables[HP_TAB_STACK_MAX].entry_size, 64);
	const struct hp_table_desc *t = h->tables;
	for (int i = 0; i <= HP_TAB_STACK_MAX; i++) {
		uint64_t ie = t[i].offset + t[i].capacity * t[i].entry_size;
		CHECK(ie <= size);
		for (int j = 0; j <= HP_TAB_STACK_MAX; j++) {
			uint64_t je =
			        t[j].offset + t[j].capacity * t[j].entry_size;
			if (i != j)
				CHECK(ie <= t[j].offset || je <= t[i].offset);
		}
	}
	/* Explicit max interval kept; threshold over 100 refused. */
	cfg.adaptive_max_interval = 1 << 20;
	CHECK(region_format(base, size, &cfg) == 0);
	CHECK_EQ_U64(h->adaptive_max_interval, 1 << 20);
	cfg.adaptive_threshold_pct = 101;
	CHECK(region_format(base, size, &cfg) == -EINVAL);

	/* Bind checks STACK_MAX: capacity 0 or exactly the stacks'. */
	cfg.adaptive_threshold_pct = 90;
	CHECK(region_format(base, size, &cfg) == 0);
	h->tables[HP_TAB_STACK_MAX].capacity--;
	CHECK(region_bind(&r, base, size) == -EINVAL);
	h->tables[HP_TAB_STACK_MAX].capacity++;
	h->tables[HP_TAB_STACK_MAX].entry_size = 32;
	CHECK(region_bind(&r, base, size) == -EINVAL);
	h->tables[HP_TAB_STACK_MAX].entry_size = 64;
	h->tables[HP_TAB_STACK_MAX].offset = size - 64;
	CHECK(region_bind(&r, base, size) == -EINVAL);
	memset(&h->tables[HP_TAB_STACK_MAX], 0, sizeof(struct hp_table_desc));
	CHECK(region_bind(&r, base, size) == 0);
	CHECK(r.stack_max == NULL);

	/* A v1 header from before the options (zeros there) still binds. */
	h->config_flags = 0;
	h->adaptive_threshold_pct = 0;
	h->adaptive_max_interval = 0;
	h->block_timeout_ms = 0;
	atomic_store(&h->max_epoch, 0);
	CHECK(region_bind(&r, base, size) == 0);
	free(base);
}

/* Drives the peak-tracking protocol the way the client does (touch before
 * a change, alloc/free after) and reads it back the way the collector
 * does: the state at the peak must be exact. */
static void charge(struct hp_region *r, uint32_t id, uint64_t bytes)
{
	stackmax_touch(r, id);
	atomic_fetch_add(&r->stacks[id].alloc_count, 1);
	atomic_fetch_add(&r->stacks[id].alloc_bytes, bytes);
	atomic_fetch_add(&r->stacks[id].alloc_objects_fp, HP_OBJ_FP_ONE);
	stackmax_alloc(r, bytes);
}

static void discharge(struct hp_region *r, uint32_t id, uint64_t bytes)
{
	stackmax_touch(r, id);
	atomic_fetch_add(&r->stacks[id].free_count, 1);
	atomic_fetch_add(&r->stacks[id].free_bytes, bytes);
	atomic_fetch_add(&r->stacks[id].free_objects_fp, HP_OBJ_FP_ONE);
	stackmax_free(r, bytes);
}

static void test_stackmax_protocol(void)
{
	uint64_t size = 4 << 20;
	void *base = calloc(1, size);
	struct hp_config cfg = {.sampling_interval = 1,
	                        .max_frames = 64,
	                        .config_flags = HP_CFG_TRACK_MAX};
	CHECK(region_format(base, size, &cfg) == 0);
	struct hp_region r;
	CHECK(region_bind(&r, base, size) == 0);
	/* 3 stacks; a random walk of allocs/frees; the model keeps the
	 * true counters and the copy at the highest live total so far. */
	enum { NS = 4 };
	struct hp_stack_counts truth[NS] = {0}, atmax[NS] = {0};
	uint64_t live = 0, maxlive = 0;
	uint64_t blocks[64][2]; /* stack, bytes */
	int nblocks = 0;
	uint64_t rng = 12345;
	for (int step = 0; step < 5000; step++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t dice = (uint32_t)(rng >> 33);
		bool do_alloc =
		        nblocks == 0 || (nblocks < 64 && dice % 100 < 52);
		if (do_alloc) {
			uint32_t id = 1 + dice % (NS - 1);
			uint64_t bytes = 16 + (dice >> 8) % 5000;
			charge(&r, id, bytes);
			truth[id].alloc_count++;
			truth[id].alloc_bytes += bytes;
			truth[id].alloc_objects_fp += HP_OBJ_FP_ONE;
			blocks[nblocks][0] = id;
			blocks[nblocks][1] = bytes;
			nblocks++;
			live += bytes;
		} else {
			int k = (int)((dice >> 4) % (uint32_t)nblocks);
			uint32_t id = (uint32_t)blocks[k][0];
			uint64_t bytes = blocks[k][1];
			blocks[k][0] = blocks[nblocks - 1][0];
			blocks[k][1] = blocks[nblocks - 1][1];
			nblocks--;
			discharge(&r, id, bytes);
			truth[id].free_count++;
			truth[id].free_bytes += bytes;
			truth[id].free_objects_fp += HP_OBJ_FP_ONE;
			live -= bytes;
		}
		if (live > maxlive) {
			maxlive = live;
			memcpy(atmax, truth, sizeof(truth));
		}
		CHECK_EQ_U64(atomic_load(&r.hdr->live_bytes), live);
		CHECK_EQ_U64(atomic_load(&r.hdr->max_live_bytes), maxlive);
		/* Every 97 steps (and at the end) read it as a dump would. */
		if (step % 97 == 0 || step == 4999) {
			for (uint32_t id = 0; id < NS; id++) {
				struct hp_stack_counts c;
				stackmax_read(&r, id, &c);
				CHECK(memcmp(&c, &atmax[id], sizeof(c)) == 0);
				if (memcmp(&c, &atmax[id], sizeof(c)) != 0) {
					fprintf(stderr,
					        "step %d stack %u: bytes %llu "
					        "vs %llu\n",
					        step, id,
					        (unsigned long long)
					                c.alloc_bytes,
					        (unsigned long long)atmax[id]
					                .alloc_bytes);
					step = 5000;
				}
			}
		}
	}
	CHECK(atomic_load(&r.hdr->max_epoch) > 10);
	CHECK(atomic_load(&r.hdr->max_ts_ns) > 0);
	free(base);
}

/* The sequence from the brief: A, B, free A, C smaller than A: the peak
 * is A+B and the at-peak view shows A and B live, C not yet allocated. */
static void test_stackmax_sequence(void)
{
	uint64_t size = 4 << 20;
	void *base = calloc(1, size);
	struct hp_config cfg = {.sampling_interval = 1,
	                        .max_frames = 64,
	                        .config_flags = HP_CFG_TRACK_MAX};
	CHECK(region_format(base, size, &cfg) == 0);
	struct hp_region r;
	CHECK(region_bind(&r, base, size) == 0);
	charge(&r, 1, 1000);    /* A */
	charge(&r, 2, 500);     /* B: peak 1500 */
	discharge(&r, 1, 1000); /* free A */
	charge(&r, 3, 800);     /* C: 1300 < 1500 */
	struct hp_stack_counts c;
	stackmax_read(&r, 1, &c);
	CHECK_EQ_U64(c.alloc_bytes, 1000);
	CHECK_EQ_U64(c.free_bytes, 0);
	stackmax_read(&r, 2, &c);
	CHECK_EQ_U64(c.alloc_bytes, 500);
	stackmax_read(&r, 3, &c);
	CHECK_EQ_U64(c.alloc_count, 0);
	CHECK_EQ_U64(atomic_load(&r.hdr->max_live_bytes), 1500);
	CHECK_EQ_U64(atomic_load(&r.hdr->live_bytes), 1300);
	charge(&r, 3, 300); /* 1600: a new peak, everything current */
	for (uint32_t id = 1; id <= 3; id++) {
		struct hp_stack_counts cur;
		stackmax_read(&r, id, &c);
		stack_counts(&r, id, &cur);
		CHECK(memcmp(&c, &cur, sizeof(c)) == 0);
	}
	/* Out of range ids read as zero. */
	stackmax_read(&r, r.stacks_cap, &c);
	CHECK_EQ_U64(c.alloc_count, 0);
	free(base);
}

static void test_bind_rejects(void)
{
	struct hp_region r;
	void *base = new_region(4 << 20, 4096, &r);
	struct hp_header_v1 *h = base;
	CHECK(region_bind(&r, base, 2 << 20) == -EINVAL); /* size mismatch */
	h->version = HP_LAYOUT_VERSION + 1;
	CHECK(region_bind(&r, base, 4 << 20) == -EPROTO);
	h->version = HP_LAYOUT_V1; /* a v1 header is 768 bytes, not 1024 */
	CHECK(region_bind(&r, base, 4 << 20) == -EPROTO);
	h->version = HP_LAYOUT_VERSION;
	h->tables[HP_TAB_FRAMES].capacity = 1ull << 40; /* out of bounds */
	CHECK(region_bind(&r, base, 4 << 20) == -EINVAL);
	h->tables[HP_TAB_FRAMES].capacity = 16;
	h->tables[HP_TAB_LIVE_KEYS].capacity = 1000; /* not a power of 2 */
	CHECK(region_bind(&r, base, 4 << 20) == -EINVAL);
	h->magic = 0;
	CHECK(region_bind(&r, base, 4 << 20) == -EPROTO);
	struct hp_config bad = {.sampling_interval = 0, .max_frames = 64};
	CHECK(region_format(base, 4 << 20, &bad) == -EINVAL);
	bad.sampling_interval = 1;
	bad.max_frames = HP_MAX_FRAMES + 1;
	CHECK(region_format(base, 4 << 20, &bad) == -EINVAL);
	CHECK(region_format(base, 1024, &bad) == -EINVAL);
	free(base);
}

static struct hp_heap_select_v1 sel(const char *name, uint64_t interval,
                                    uint32_t flags)
{
	struct hp_heap_select_v1 e;
	memset(&e, 0, sizeof(e));
	strcpy(e.name, name);
	e.interval = interval;
	e.flags = flags;
	return e;
}

/* The selection rules of struct hp_heap_select_v1, one by one. */
static void test_heap_select(void)
{
	/* No entries: libc.malloc only, at the default interval. */
	CHECK_EQ_U64(
	        hp_heap_select_interval(NULL, 0, false, 4096, "libc.malloc"),
	        4096);
	CHECK_EQ_U64(hp_heap_select_interval(NULL, 0, false, 4096, "pool"), 0);
	/* A list: exactly those, each at its interval (0 = default). */
	struct hp_heap_select_v1 l[] = {sel("pool", 1, 0), sel("gpu", 0, 0)};
	CHECK_EQ_U64(hp_heap_select_interval(l, 2, false, 4096, "pool"), 1);
	CHECK_EQ_U64(hp_heap_select_interval(l, 2, false, 4096, "gpu"), 4096);
	CHECK_EQ_U64(hp_heap_select_interval(l, 2, false, 4096, "libc.malloc"),
	             0);
	CHECK_EQ_U64(hp_heap_select_interval(l, 2, false, 4096, "poo"), 0);
	CHECK_EQ_U64(hp_heap_select_interval(l, 2, false, 4096, "pool2"), 0);
	/* All heaps: everything but the excluded, at the default. */
	struct hp_heap_select_v1 x[] = {sel("gpu", 0, HP_HEAPSEL_EXCLUDE)};
	CHECK_EQ_U64(hp_heap_select_interval(x, 1, true, 512, "pool"), 512);
	CHECK_EQ_U64(hp_heap_select_interval(x, 1, true, 512, "libc.malloc"),
	             512);
	CHECK_EQ_U64(hp_heap_select_interval(x, 1, true, 512, "gpu"), 0);
	CHECK_EQ_U64(hp_heap_select_interval(NULL, 0, true, 512, "any"), 512);
	/* Only exclusions without all: nothing listed, so malloc only. */
	CHECK_EQ_U64(hp_heap_select_interval(x, 1, false, 512, "libc.malloc"),
	             512);
	CHECK_EQ_U64(hp_heap_select_interval(x, 1, false, 512, "pool"), 0);
	/* A name read from shared memory without its NUL still compares
	 * within HP_HEAP_NAME_MAX bytes. */
	struct hp_heap_select_v1 full = sel("", 7, 0);
	memset(full.name, 'a', sizeof(full.name));
	char name[HP_HEAP_NAME_MAX + 1];
	memset(name, 'a', HP_HEAP_NAME_MAX);
	name[HP_HEAP_NAME_MAX] = '\0';
	CHECK_EQ_U64(hp_heap_select_interval(&full, 1, false, 1, name), 7);
}

/* The selection travels in the region: format copies it, bind finds it,
 * heap 0 says whether malloc is on, and interval 1 on any heap sizes the
 * live table for every block. */
static void test_format_heaps(void)
{
	uint64_t size = 8 << 20;
	struct hp_heap_select_v1 l[] = {sel("pool", 1, 0)};
	struct hp_config cfg = {.sampling_interval = 4096,
	                        .max_frames = 64,
	                        .heap_select = l,
	                        .nheap_select = 1};
	void *base = calloc(1, size);
	CHECK(region_format(base, size, &cfg) == 0);
	struct hp_region r;
	CHECK(region_bind(&r, base, size) == 0);
	CHECK_EQ_U64(r.heap_select_cap, 1);
	CHECK(r.heap_select && !strcmp(r.heap_select[0].name, "pool"));
	CHECK_EQ_U64(region_heap_interval(&r, "pool"), 1);
	CHECK_EQ_U64(region_heap_interval(&r, "libc.malloc"), 0);
	CHECK_EQ_U64(r.heaps[0].interval, 0);
	CHECK_EQ_U64(r.heaps[0].flags & HP_HEAP_ENABLED, 0);
	CHECK_EQ_U64(r.hdr->heap_enable_mask, 0);
	uint64_t live_with_pool_at_1 = r.live_cap;

	/* The default (no selection): malloc on, no HEAP_SELECT table. */
	struct hp_region d;
	void *dbase = new_region(size, 4096, &d);
	CHECK(d.heap_select == NULL);
	CHECK_EQ_U64(d.hdr->tables[HP_TAB_HEAP_SELECT].capacity, 0);
	CHECK_EQ_U64(d.heaps[0].interval, 4096);
	CHECK(d.heaps[0].flags & HP_HEAP_ENABLED);
	CHECK_EQ_U64(region_heap_interval(&d, "libc.malloc"), 4096);
	CHECK(live_with_pool_at_1 > d.live_cap);
	free(dbase);

	/* Bind refuses a selection table larger than HP_MAX_HEAPS. */
	r.hdr->tables[HP_TAB_HEAP_SELECT].capacity = HP_MAX_HEAPS + 1;
	CHECK(region_bind(&r, base, size) == -EINVAL);
	/* ... and format one with too many entries. */
	cfg.nheap_select = HP_MAX_HEAPS + 1;
	CHECK(region_format(base, size, &cfg) == -EINVAL);
	free(base);
}

static void test_stack_intern(void)
{
	struct hp_region r;
	void *base = new_region(4 << 20, 4096, &r);
	uint64_t a[] = {0x1000, 0x2000, 0x3000};
	uint64_t b[] = {0x1000, 0x2000, 0x3001};
	bool is_new;
	uint32_t ia = stacktab_intern(&r, 0, a, 3, 0, &is_new);
	CHECK(ia != 0 && is_new);
	CHECK_EQ_U64(stacktab_intern(&r, 0, a, 3, 0, &is_new), ia);
	CHECK(!is_new);
	uint32_t ib = stacktab_intern(&r, 0, b, 3, 0, &is_new);
	CHECK(ib != 0 && ib != ia && is_new);
	uint32_t ih = stacktab_intern(&r, 1, a, 3, 0, &is_new);
	CHECK(ih != ia); /* heap is part of the identity */
	uint32_t i2 = stacktab_intern(&r, 0, a, 2, 0, &is_new);
	CHECK(i2 != ia); /* so is the depth */
	CHECK_EQ_U64(r.stacks[ia].nframes, 3);
	CHECK(memcmp(&r.frames[r.stacks[ia].frames_off], a, sizeof(a)) == 0);
	free(base);
}

/* 100000 distinct stacks shaped like a binary tree of call sites (two
 * stacks differ from their first different level down, as manystacks'
 * do): every one gets its own record, and a second intern finds it, also
 * past the near part of the index. */
static void test_stack_intern_many(void)
{
	struct hp_region r;
	void *base = new_region(64 << 20, 1, &r);
	enum { N = 100000, D = 17 };
	uint32_t *ids = calloc(N, sizeof(*ids));
	uint8_t *seen = calloc(r.stacks_cap, 1);
	bool is_new;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < N; i++) {
			uint64_t pcs[D + 3];
			uint32_t n = 0;
			for (int l = D - 1; l >= 0; l--)
				pcs[n++] = 0x555555555000ull +
				           ((i >> l) & 1 ? 0x100 : 0x200) +
				           (uint64_t)l * 0x10;
			pcs[n++] = 0x5555555551a3ull;
			pcs[n++] = 0x7ffff7c2724aull;
			pcs[n++] = 0x7ffff7c27305ull;
			uint32_t id =
			        stacktab_intern(&r, 0, pcs, n, 0, &is_new);
			CHECK(id != 0);
			if (pass == 0) {
				CHECK(is_new);
				CHECK(id < r.stacks_cap && !seen[id]);
				if (id < r.stacks_cap)
					seen[id] = 1;
				ids[i] = id;
			} else {
				CHECK(!is_new);
				CHECK_EQ_U64(id, ids[i]);
			}
		}
	}
	free(seen);
	free(ids);
	free(base);
}

static void test_stack_overflow(void)
{
	struct hp_region r;
	void *base = new_region(1 << 20, 4096, &r);
	uint64_t pcs[4] = {0};
	bool is_new;
	uint64_t made = 0, overflow = 0;
	for (uint64_t i = 0; i < r.stacks_cap * 2; i++) {
		pcs[0] = 0x400000 + i * 16;
		uint32_t id = stacktab_intern(&r, 0, pcs, 4, 0, &is_new);
		if (id == 0)
			overflow++;
		else
			made++;
	}
	CHECK(overflow > 0);
	CHECK(made < r.stacks_cap);
	CHECK(atomic_load(&r.hdr->stacks_used) <= r.stacks_cap);
	free(base);
}

static void test_live_table(void)
{
	struct hp_region r;
	void *base = new_region(4 << 20, 4096, &r);
	struct hp_live_v2 v = {.stack_id = 7, .size = 100, .charged = 4096};
	uint32_t pressure = 99;
	CHECK(livetab_insert_p(&r, 0x10000, &v, &pressure) == 0);
	CHECK_EQ_U64(pressure, 1);
	CHECK_EQ_U64(livetab_load_pct(&r, 0x10000), 0); /* 1 of 512 */
	struct hp_live_v2 out;
	CHECK(!livetab_remove(&r, 0x20000, &out));
	CHECK(livetab_remove(&r, 0x10000, &out));
	CHECK_EQ_U64(out.stack_id, 7);
	CHECK_EQ_U64(out.charged, 4096);
	CHECK(!livetab_remove(&r, 0x10000, &out)); /* only once */
	/* Fill until both buckets of some address are full: insert fails
	 * with -ENOSPC, and every inserted address comes back exactly once. */
	uint64_t n = r.live_cap * 2, ok = 0, full = 0;
	uint64_t high = 0;
	for (uint64_t i = 0; i < n; i++) {
		v.stack_id = (uint32_t)i;
		if (livetab_insert_p(&r, 0x100000 + i * 16, &v, &pressure) ==
		    0) {
			ok++;
			/* The emptier bucket is tried first: a success
			 * never finds it full. */
			CHECK(pressure >= 1 && pressure <= 8);
			high += pressure == 8;
		} else {
			full++;
			CHECK_EQ_U64(pressure, 16);
		}
	}
	CHECK(high > 0);
	CHECK(full > 0);
	/* Two choices, the emptier first, keep it well filled. */
	CHECK(ok > r.live_cap * 85 / 100);
	uint64_t back = 0;
	for (uint64_t i = 0; i < n; i++)
		if (livetab_remove(&r, 0x100000 + i * 16, &out)) {
			CHECK_EQ_U64(out.stack_id, i);
			back++;
		}
	CHECK_EQ_U64(back, ok);
	for (uint64_t b = 0; b < r.live_cap / HP_LIVE_BUCKET; b++)
		CHECK(atomic_load(&r.live_fill[b]) == 0);
	free(base);

	/* A large table: a few thousand sampled blocks (at random
	 * addresses of a 1 GiB heap) stay in level 0, the level the
	 * collector allocates first; nothing is read beyond it. */
	base = new_region(64 << 20, 4096, &r);
	uint64_t near = livetab_level_slots(&r, 0);
	CHECK(r.live_levels > 2);
	CHECK_EQ_U64(near, HP_LIVE_LEVEL0_SAMPLED);
	uint64_t keys[3000], x = 12345;
	for (uint64_t i = 0; i < 3000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		keys[i] = 0x7f1200000000ull + ((x >> 34) << 4);
		CHECK(livetab_insert(&r, keys[i], &v) == 0);
	}
	CHECK_EQ_U64(livetab_open_level(&r), 0);
	CHECK_EQ_U64(livetab_used_slots(&r), near);
	uint64_t in_near = 0, beyond = 0;
	for (uint64_t i = 0; i < r.live_cap; i++) {
		uint64_t key;
		if (livetab_read(&r, i, &key, &out) == HP_LIVE_READ_OK) {
			if (i < near)
				in_near++;
			else
				beyond++;
		}
	}
	CHECK_EQ_U64(in_near, 3000);
	CHECK_EQ_U64(beyond, 0);
	for (uint64_t i = 0; i < 3000; i++)
		CHECK(livetab_remove(&r, keys[i], &out));
	free(base);
}

/*
 * Levels at interval 1: a heap's worth of blocks (glibc's 48-byte chunks,
 * one after the other, in two runs) fills level 0, then level 1, each to
 * HP_LIVE_FIRST_FULL_PCT before the collector (livetab_advance, here every 1000
 * inserts) sends inserts to the next; a block the first level cannot take goes
 * to the one above it (opened for it).  Every block comes back exactly once,
 * from whichever level holds it, and a reader looks at the opened levels
 * only.
 */
static void test_live_levels(void)
{
	uint32_t pct_read;
	struct hp_region r;
	void *base = new_region(128 << 20, 1, &r);
	CHECK(r.live_levels >= 4);
	CHECK_EQ_U64(r.live_level0, HP_LIVE_LEVEL0_EXACT);
	CHECK_EQ_U64(r.live_level0 << (r.live_levels - 1), r.live_cap);
	CHECK_EQ_U64(livetab_advance(&r, &pct_read),
	             1); /* level 0 only, empty */
	uint64_t total = livetab_level_slots(&r, 0) +
	                 livetab_level_slots(&r, 1) +
	                 livetab_level_slots(&r, 2);
	uint64_t n = total * (HP_LIVE_FIRST_FULL_PCT - 5) / 100;
	struct hp_live_v2 v = {.size = 32, .charged = 32};
	struct hp_live_v2 out;
	uint64_t moved_at[8] = {0};
	uint32_t first = 0, want = 1;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t a = i % 2 ? 0x7f0000010000ull + (i / 2) * 48
		                   : 0x555500001000ull + (i / 2) * 48;
		v.stack_id = (uint32_t)i;
		CHECK(livetab_insert(&r, a, &v) == 0);
		if (i % 1000 == 0) { /* the collector, every 10 ms */
			uint32_t w = livetab_advance(&r, &pct_read);
			CHECK(w >= want); /* prepared levels only grow */
			want = w;
		}
		uint32_t f = livetab_first_level(&r);
		if (f != first && f < 8) {
			moved_at[f] = i;
			first = f;
		}
	}
	/* Inserts moved on with each level HP_LIVE_FIRST_FULL_PCT full
	 * (+1000: the period; +-2%: the estimate from 1024 keys). */
	uint64_t l0 = livetab_level_slots(&r, 0),
	         l1 = livetab_level_slots(&r, 1);
	const uint64_t pct = HP_LIVE_FIRST_FULL_PCT;
	CHECK(moved_at[1] >= l0 * (pct - 2) / 100 &&
	      moved_at[1] <= l0 * (pct + 2) / 100 + 1000);
	CHECK(moved_at[2] >= (l0 + l1) * (pct - 2) / 100);
	CHECK_EQ_U64(livetab_first_level(&r), 2);
	CHECK(livetab_level_load_pct(&r, 0, 1024) >= pct - 5);
	CHECK(livetab_level_load_pct(&r, 1, 1024) >= pct - 5);
	/* Opened: the level filled now, at most one above it. */
	CHECK(livetab_open_level(&r) >= 2 && livetab_open_level(&r) <= 3);
	CHECK_EQ_U64(livetab_used_slots(&r),
	             livetab_level_start(&r, livetab_open_level(&r)) +
	                     livetab_level_slots(&r, livetab_open_level(&r)));
	/* The collector prepared every opened level and the next. */
	CHECK(want >= livetab_open_level(&r) + 1);
	/* Every other block freed, from every level. */
	for (uint64_t i = 0; i < n; i += 2) {
		uint64_t a = 0x555500001000ull + (i / 2) * 48;
		CHECK(livetab_remove(&r, a, &out));
		CHECK_EQ_U64(out.stack_id, i);
	}
	uint64_t live = 0;
	for (uint64_t i = 0; i < livetab_used_slots(&r); i++) {
		uint64_t key;
		if (livetab_read(&r, i, &key, &out) == HP_LIVE_READ_OK) {
			CHECK(key >= 0x7f0000010000ull);
			live++;
		}
	}
	CHECK_EQ_U64(live, n / 2);
	for (uint64_t i = 1; i < n; i += 2)
		CHECK(livetab_remove(&r, 0x7f0000010000ull + (i / 2) * 48,
		                     &out));
	CHECK(!livetab_remove(&r, 0x7f0000010000ull, &out));
	CHECK_EQ_U64(livetab_level_load_pct(&r, 1, 1024), 0);
	free(base);
}

/* A collector's limit (livetab_limit): inserts stop at the last level
 * allowed, whatever the collector says later; -ENOSPC past it. */
static void test_live_limit(void)
{
	uint32_t pct_read;
	struct hp_region r;
	void *base = new_region(128 << 20, 1, &r);
	CHECK(r.live_levels >= 4);
	CHECK_EQ_U64(livetab_limit(&r, 2), 2);
	CHECK_EQ_U64(livetab_levels_bytes(&r, 2),
	             2 * r.live_level0 * (8 + sizeof(struct hp_live_v2)));
	/* A client binds the region after the limit was set. */
	struct hp_region c;
	CHECK(region_bind(&c, base, 128 << 20) == 0);
	CHECK_EQ_U64(c.live_usable, 2);
	struct hp_live_v2 v = {.size = 32, .charged = 32};
	uint64_t cap = 2 * r.live_level0, ok = 0, full = 0;
	for (uint64_t i = 0; i < cap; i++) {
		if (livetab_insert(&c, 0x555500001000ull + i * 48, &v) == 0)
			ok++;
		else
			full++;
		if (i % 1000 == 0)
			CHECK(livetab_advance(&r, &pct_read) <= 2);
	}
	CHECK(full > 0);
	CHECK(ok > cap * 80 / 100);
	CHECK(livetab_open_level(&c) <= 1);
	CHECK(livetab_first_level(&c) <= 1);
	free(base);
}

struct worker {
	struct hp_region *r;
	int id;
	uint64_t inserted, removed;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	uint64_t pcs[3] = {0x1000, 0x2000, 0};
	for (int i = 0; i < 20000; i++) {
		pcs[2] = 0x3000 + (i % 50) * 8; /* 50 stacks shared by all */
		bool is_new;
		uint32_t id = stacktab_intern(w->r, 0, pcs, 3, 0, &is_new);
		atomic_fetch_add(&w->r->stacks[id].alloc_count, 1);
		uint64_t addr = ((uint64_t)w->id << 32) | ((uint64_t)i << 4);
		struct hp_live_v2 v = {.stack_id = id, .charged = 1};
		if (livetab_insert(w->r, addr, &v) == 0)
			w->inserted++;
		if (i % 2 == 0) {
			struct hp_live_v2 out;
			if (livetab_remove(w->r, addr, &out))
				w->removed++;
		}
	}
	return NULL;
}

static void test_threads(void)
{
	struct hp_region r;
	void *base = new_region(64 << 20, 1, &r);
	struct worker w[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){.r = &r, .id = i + 1};
		pthread_create(&th[i], NULL, worker_run, &w[i]);
	}
	uint64_t inserted = 0, removed = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		inserted += w[i].inserted;
		removed += w[i].removed;
	}
	CHECK_EQ_U64(inserted, 80000);
	CHECK_EQ_U64(removed, 40000);
	/* Exactly 50 distinct stacks with counts summing to 80000, whatever
	 * races happened while interning. */
	struct snapshot s;
	CHECK(snapshot_take(&r, &s) == 0);
	uint64_t total = 0;
	for (size_t i = 0; i < s.dump.nstacks; i++)
		total += s.dump.stacks[i].alloc_count;
	CHECK_EQ_U64(s.dump.nstacks, 50);
	CHECK_EQ_U64(total, 80000);
	/* Live entries left: 40000, each readable. */
	uint64_t live = 0;
	for (uint64_t i = 0; i < r.live_cap; i++)
		live += atomic_load(&r.live_keys[i]) > HP_LIVE_BUSY;
	CHECK_EQ_U64(live, 40000);
	snapshot_free(&s);
	free(base);
}

static void test_snapshot_clamps(void)
{
	struct hp_region r;
	void *base = new_region(4 << 20, 4096, &r);
	uint64_t pcs[2] = {0x1000, 0x2000};
	bool is_new;
	uint32_t id = stacktab_intern(&r, 0, pcs, 2, 0, &is_new);
	r.stacks[id].alloc_count = 1;
	/* A hostile client scribbles over counts and offsets. */
	atomic_store(&r.hdr->stacks_used, ~0ull);
	atomic_store(&r.hdr->modules_used, ~0ull);
	atomic_store(&r.hdr->strings_used, ~0ull);
	r.stacks[id].frames_off = ~0ull;
	r.stacks[id].heap_id = 1000;
	struct snapshot s;
	CHECK(snapshot_take(&r, &s) == 0);
	CHECK_EQ_U64(s.dump.nstacks, 1);
	CHECK_EQ_U64(s.dump.stacks[0].nframes, 0); /* bad frames dropped */
	CHECK_EQ_U64(s.dump.stacks[0].heap_id, 0);
	snapshot_free(&s);
	free(base);
}

/* A v1 region (an older client's): formatted as v1, written the way a v1
 * client writes (32-byte values, key published after the value), read
 * whole by livetab_read with no thread or time. */
static void test_v1_region(void)
{
	uint64_t size = 4 << 20;
	void *base = calloc(1, size);
	struct hp_config cfg = {.sampling_interval = 1,
	                        .max_frames = 64,
	                        .layout_version = HP_LAYOUT_V1,
	                        .trace_mode = HP_TRACE_RING,
	                        .trace_bytes = 1 << 20};
	CHECK(region_format(base, size, &cfg) == 0);
	struct hp_region r;
	CHECK(region_bind(&r, base, size) == 0);
	CHECK_EQ_U64(r.version, 1);
	CHECK_EQ_U64(r.hdr->header_size, 768);
	CHECK(r.ext == NULL && r.live_values == NULL && r.live_v1 != NULL);
	CHECK(r.trace == NULL && r.trace_cap == 0); /* no trace in v1 */
	CHECK_EQ_U64(r.hdr->tables[HP_TAB_LIVE_VALUES].entry_size, 32);
	uint64_t pcs[1] = {0x1234};
	bool is_new;
	uint32_t id = stacktab_intern(&r, 0, pcs, 1, 0, &is_new);
	struct hp_live_v1 *vals = (struct hp_live_v1 *)r.live_v1;
	vals[5] = (struct hp_live_v1){.stack_id = id,
	                              .size = 100,
	                              .charged = 100,
	                              .objects_fp = HP_OBJ_FP_ONE};
	atomic_store(&r.live_keys[5], 0xabc0);
	atomic_store(&r.live_keys[6], HP_LIVE_BUSY);
	uint64_t key = 0, n = 0;
	struct hp_live_v2 v;
	for (uint64_t i = 0; i < r.live_cap; i++)
		if (livetab_read(&r, i, &key, &v) == HP_LIVE_READ_OK) {
			n++;
			CHECK_EQ_U64(key, 0xabc0);
			CHECK_EQ_U64(v.stack_id, id);
			CHECK_EQ_U64(v.size, 100);
			CHECK_EQ_U64(v.tid, 0);
			CHECK_EQ_U64(v.ts_ns, 0);
		}
	CHECK_EQ_U64(n, 1);
	CHECK(livetab_read(&r, 6, &key, &v) == HP_LIVE_READ_BUSY);
	/* The collector's reading of stacks is the same for both. */
	r.stacks[id].alloc_count = 1;
	struct snapshot s;
	CHECK(snapshot_take(&r, &s) == 0);
	CHECK_EQ_U64(s.dump.nstacks, 1);
	CHECK_EQ_U64(s.dump.stacks[0].pcs[0], 0x1234);
	snapshot_free(&s);
	free(base);
}

/* Writers insert and remove the same few addresses as fast as they can
 * while a reader copies entries: every copy it calls whole is one that a
 * writer wrote (size and ts agree with the key), never a mix. */
struct churn {
	struct hp_region *r;
	int id;
	_Atomic int *stop;
};

static void *churn_run(void *arg)
{
	struct churn *c = arg;
	uint64_t gen = 0;
	while (!atomic_load(c->stop)) {
		for (uint64_t a = 1; a <= 16; a++) {
			uint64_t addr = (a << 12) | ((uint64_t)c->id << 8);
			gen++;
			struct hp_live_v2 v = {.stack_id = (uint32_t)a,
			                       .tid = (uint32_t)c->id,
			                       .size = addr,
			                       .charged = gen,
			                       .objects_fp = gen,
			                       .ts_ns = addr ^ gen};
			if (livetab_insert(c->r, addr, &v) == 0) {
				struct hp_live_v2 out;
				CHECK(livetab_remove(c->r, addr, &out));
			}
		}
	}
	return NULL;
}

static void test_live_seqlock(void)
{
	struct hp_region r;
	void *base = new_region(4 << 20, 1, &r);
	_Atomic int stop = 0;
	struct churn c[2];
	pthread_t th[2];
	for (int i = 0; i < 2; i++) {
		c[i] = (struct churn){.r = &r, .id = i + 1, .stop = &stop};
		pthread_create(&th[i], NULL, churn_run, &c[i]);
	}
	uint64_t ok = 0, bad = 0;
	for (int round = 0; round < 2000 || ok < 1000; round++) {
		for (uint64_t i = 0; i < r.live_cap; i++) {
			uint64_t key;
			struct hp_live_v2 v;
			if (livetab_read(&r, i, &key, &v) != HP_LIVE_READ_OK)
				continue;
			ok++;
			if (v.size != key || v.ts_ns != (key ^ v.charged) ||
			    v.objects_fp != v.charged ||
			    v.tid != ((key >> 8) & 0xf))
				bad++;
		}
		if (round > 200000)
			break; /* bounded: the CHECK on ok says what happened */
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK(ok >= 1000);
	CHECK_EQ_U64(bad, 0);
	free(base);
}

static void *trace_region(uint64_t size, uint32_t mode, uint64_t bytes,
                          struct hp_region *r)
{
	void *base = calloc(1, size);
	struct hp_config cfg = {.sampling_interval = 1,
	                        .max_frames = 64,
	                        .trace_mode = mode,
	                        .trace_bytes = bytes};
	CHECK(region_format(base, size, &cfg) == 0);
	CHECK(region_bind(r, base, size) == 0);
	return base;
}

static struct hp_event_v2 ev_of(uint64_t i)
{
	return (struct hp_event_v2){.kind = (i & 1) ? HP_EV_FREE : HP_EV_ALLOC,
	                            .ts_ns = 1000 + i,
	                            .addr = 0x10000 + i * 16,
	                            .size = i,
	                            .stack_id = (uint32_t)i};
}

static void test_trace_modes(void)
{
	struct hp_region r;
	struct hp_event_v2 e, x;
	/* 64 KiB + a bit: 1024 events of 64 bytes. */
	void *base =
	        trace_region(4 << 20, HP_TRACE_STREAMING, 64 * 1024 + 100, &r);
	CHECK_EQ_U64(r.trace_cap, 1024);
	CHECK_EQ_U64(r.ext->region_index, 0);
	CHECK(trace_get(&r, 0, &e) == HP_EV_READ_NOT_YET);
	for (uint64_t i = 0; i < 1024; i++) {
		x = ev_of(i);
		CHECK(trace_put(&r, &x) == 0);
	}
	x = ev_of(7);
	CHECK(trace_put(&r, &x) == -EAGAIN); /* full until consumed */
	CHECK_EQ_U64(atomic_load(&r.ext->trace_dropped[HP_TDROP_FREES]), 0);
	trace_drop(&r, &x);
	CHECK_EQ_U64(atomic_load(&r.ext->trace_dropped[HP_TDROP_FREES]), 1);
	CHECK_EQ_U64(atomic_load(&r.ext->trace_dropped[HP_TDROP_FREE_BYTES]),
	             7);
	CHECK(trace_get(&r, 3, &e) == HP_EV_READ_OK);
	atomic_store(&r.ext->trace_tail, 10); /* the collector read 10 */
	for (uint64_t i = 0; i < 10; i++) {
		x = ev_of(1024 + i);
		CHECK(trace_put(&r, &x) == 0);
	}
	CHECK(trace_put(&r, &x) == -EAGAIN);
	CHECK(trace_get(&r, 3, &e) == HP_EV_READ_GONE); /* overwritten */
	CHECK(trace_get(&r, 1030, &e) == HP_EV_READ_OK);
	CHECK_EQ_U64(e.addr, 0x10000 + 1030 * 16);
	CHECK_EQ_U64(e.kind, HP_EV_ALLOC);
	CHECK_EQ_U64(e.seq, 1031);
	CHECK(trace_get(&r, 1034, &e) == HP_EV_READ_NOT_YET);
	free(base);

	/* oneshot: the first 1024 stay, the rest are counted. */
	base = trace_region(4 << 20, HP_TRACE_ONESHOT, 64 * 1024, &r);
	for (uint64_t i = 0; i < 1500; i++) {
		x = ev_of(i);
		CHECK(trace_put(&r, &x) == (i < 1024 ? 0 : -ENOSPC));
	}
	CHECK(atomic_load(&r.ext->trace_full_ts) != 0);
	CHECK_EQ_U64(atomic_load(&r.ext->trace_dropped[HP_TDROP_ALLOCS]) +
	                     atomic_load(&r.ext->trace_dropped[HP_TDROP_FREES]),
	             476);
	CHECK(trace_get(&r, 1023, &e) == HP_EV_READ_OK);
	CHECK_EQ_U64(e.size, 1023);
	CHECK(trace_get(&r, 1024, &e) == HP_EV_READ_GONE);
	free(base);

	/* ring: the newest 1024 stay. */
	base = trace_region(4 << 20, HP_TRACE_RING, 64 * 1024, &r);
	for (uint64_t i = 0; i < 3000; i++) {
		x = ev_of(i);
		CHECK(trace_put(&r, &x) == 0);
	}
	CHECK_EQ_U64(atomic_load(&r.ext->trace_head), 3000);
	CHECK(trace_get(&r, 3000 - 1025, &e) == HP_EV_READ_GONE);
	for (uint64_t p = 3000 - 1024; p < 3000; p++) {
		CHECK(trace_get(&r, p, &e) == HP_EV_READ_OK);
		CHECK_EQ_U64(e.size, p);
	}
	free(base);

	/* Only the first region of an attach has a trace. */
	base = calloc(1, 4 << 20);
	struct hp_config cfg = {.sampling_interval = 1,
	                        .max_frames = 64,
	                        .region_index = 1,
	                        .trace_mode = HP_TRACE_RING,
	                        .trace_bytes = 1 << 20};
	CHECK(region_format(base, 4 << 20, &cfg) == 0);
	CHECK(region_bind(&r, base, 4 << 20) == 0);
	CHECK(r.trace == NULL);
	CHECK_EQ_U64(r.ext->region_index, 1);
	x = ev_of(0);
	CHECK(trace_put(&r, &x) == -ENODEV);
	/* A trace bigger than the region is refused. */
	cfg.region_index = 0;
	cfg.trace_bytes = 8 << 20;
	CHECK(region_format(base, 4 << 20, &cfg) == -EINVAL);
	free(base);
}

/* The live filter: present when sampling, exact counts per cell, a free of
 * an unsampled key answered by it, and a saturated cell that stays. */
static uint64_t filter_sum(const struct hp_region *r)
{
	uint64_t s = 0;
	for (uint64_t i = 0; i <= r->live_filter_mask; i++)
		s += atomic_load(&r->live_filter[i]);
	return s;
}

static void test_live_filter(void)
{
	struct hp_region r;
	void *base = new_region(8 << 20, 1, &r);
	CHECK(r.live_filter == NULL); /* interval 1: every free looks */
	CHECK_EQ_U64(r.hdr->tables[HP_TAB_LIVE_FILTER].capacity, 0);
	free(base);

	base = new_region(8 << 20, 4096, &r);
	CHECK(r.live_filter != NULL);
	CHECK_EQ_U64(r.live_filter_mask + 1, r.live_cap);
	struct hp_live_v2 v = {.stack_id = 1, .size = 16, .charged = 16};
	uint64_t n = 0;
	for (uint64_t i = 0; i < 1000; i++)
		if (livetab_insert(&r, 0x10000 + i * 48, &v) == 0)
			n++;
	CHECK_EQ_U64(n, 1000);
	CHECK_EQ_U64(filter_sum(&r), 1000);
	struct hp_live_v2 out;
	/* Keys never inserted: not found, nothing changes. */
	for (uint64_t i = 0; i < 1000; i++)
		CHECK(!livetab_remove(&r, 0x90000000 + i * 48, &out));
	CHECK_EQ_U64(filter_sum(&r), 1000);
	for (uint64_t i = 0; i < 1000; i++)
		CHECK(livetab_remove(&r, 0x10000 + i * 48, &out));
	CHECK_EQ_U64(filter_sum(&r), 0);
	/* A second free of the same key finds nothing. */
	CHECK(!livetab_remove(&r, 0x10000, &out));

	/* Locality: the blocks of one 4 KiB page count in one 64-byte line
	 * of the filter, one cell per 64 bytes of address space. */
	for (uint64_t page = 0x7f0000000000ull; page < 0x7f0000040000ull;
	     page += 0x9000) {
		/* (offsets in the filter: this test's region is malloc'd) */
		uint64_t line = (uint64_t)(livetab_filter_cell(&r, page) -
		                           r.live_filter) &
		                ~63ull;
		for (uint64_t off = 0; off < 4096; off += 64) {
			_Atomic uint8_t *c =
			        livetab_filter_cell(&r, page + off);
			CHECK_EQ_U64((uint64_t)(c - r.live_filter) & ~63ull,
			             line);
			CHECK_EQ_U64(c - livetab_filter_cell(&r, page),
			             off / 64);
			CHECK(livetab_filter_cell(&r, page + off + 63) == c);
		}
	}
	/* Saturated: the cell stays at 255 through an insert and a remove,
	 * and the key is still found. */
	uint64_t key = 0x123450;
	_Atomic uint8_t *cell = livetab_filter_cell(&r, key);
	atomic_store(cell, 255);
	CHECK(livetab_insert(&r, key, &v) == 0);
	CHECK_EQ_U64(atomic_load(cell), 255);
	CHECK(livetab_remove(&r, key, &out));
	CHECK_EQ_U64(atomic_load(cell), 255);
	CHECK(!livetab_remove(&r, key, &out));
	free(base);
}

/*
 * The live table's log (HP_TRACE_LOG): a writer finds no room once it is
 * a capacity ahead of the collector, and room again when the collector
 * gives positions back; applied in order, the events leave the table and
 * the free counters as the same operations made directly would: a
 * block freed and its address allocated again is one live entry, a free
 * of an address never allocated changes nothing, an event held for a
 * realloc that failed (kind 0) changes nothing, and an allocation on a
 * stack id beyond the table is ignored.
 */
static void test_live_log(void)
{
	struct hp_region r;
	void *base = trace_region(16 << 20, HP_TRACE_LOG, 64 << 10, &r);
	CHECK_EQ_U64(r.trace_mode, HP_TRACE_LOG);
	CHECK_EQ_U64(r.trace_cap, 1024);
	struct livelog_acc a = {.cap = r.stacks_cap};
	a.d = calloc(a.cap, 3 * sizeof(uint64_t));
	a.touched = calloc(a.cap, sizeof(uint32_t));
	CHECK(a.d && a.touched);
	uint64_t tail = 0, pos;
	/* 1000 blocks on stacks 1..10, every other one freed, then 200
	 * reallocated at the freed addresses, on stack 11. */
	struct hp_event_v2 want[2000];
	size_t n = 0;
	for (uint64_t i = 0; i < 1000; i++)
		want[n++] =
		        (struct hp_event_v2){.kind = HP_EV_ALLOC,
		                             .addr = 0x7f0000001000ull + i * 32,
		                             .size = 24,
		                             .charged = 24,
		                             .alloc_ts_ns = HP_OBJ_FP_ONE,
		                             .stack_id = 1 + (uint32_t)(i % 10),
		                             .tid = 7,
		                             .ts_ns = 5000 + i};
	for (uint64_t i = 0; i < 1000; i += 2)
		want[n++] = (struct hp_event_v2){
		        .kind = HP_EV_FREE, .addr = 0x7f0000001000ull + i * 32};
	for (uint64_t i = 0; i < 400; i += 2)
		want[n++] =
		        (struct hp_event_v2){.kind = HP_EV_ALLOC,
		                             .addr = 0x7f0000001000ull + i * 32,
		                             .size = 40,
		                             .charged = 40,
		                             .alloc_ts_ns = HP_OBJ_FP_ONE,
		                             .stack_id = 11};
	/* Noise: a free of what was never allocated, a held position given
	 * nothing, a stack id out of range. */
	want[n++] = (struct hp_event_v2){.kind = HP_EV_FREE, .addr = 0x1234560};
	want[n++] = (struct hp_event_v2){.kind = 0, .addr = 0x7f0000001020ull};
	want[n++] = (struct hp_event_v2){.kind = HP_EV_ALLOC,
	                                 .addr = 0x7f00000f0000ull,
	                                 .size = 8,
	                                 .charged = 8,
	                                 .stack_id = 0xfffffff0u};
	size_t put = 0, applied = 0;
	while (applied < n) {
		/* The writer runs ahead until the log is full... */
		while (put < n) {
			bool gone;
			uint64_t was;
			struct hp_event_v2 *e =
			        livelog_reserve(&r, &pos, &was, &gone);
			CHECK(!gone);
			if (!e) {
				CHECK_EQ_U64(put - tail, 1024);
				break;
			}
			CHECK_EQ_U64(pos, put);
			CHECK(livelog_publish(e, &want[put++], pos, was));
		}
		/* ... and the collector takes up to 300 at a time. */
		for (int k = 0; k < 300 && applied < put; k++) {
			struct hp_event_v2 ev;
			CHECK(livelog_take(&r, applied, &ev) ==
			      HP_LOGGRAB_TAKEN);
			CHECK(livelog_apply(&r, &ev, &a) >= 0);
			atomic_store(&r.ext->log_done, applied + 1);
			applied++;
		}
		livelog_flush(&r, &a);
		tail = applied;
		atomic_store(&r.ext->trace_tail, tail);
	}
	CHECK_EQ_U64(a.ntouched, 0);
	/* 500 of the first blocks and 200 of the second: 700 live. */
	CHECK_EQ_U64(livetab_used_slots(&r) >= 700, 1);
	uint64_t live = 0, bytes = 0, on11 = 0;
	for (uint64_t i = 0; i < r.live_cap; i++) {
		uint64_t key;
		struct hp_live_v2 v;
		if (livetab_read(&r, i, &key, &v) != HP_LIVE_READ_OK)
			continue;
		live++;
		bytes += v.charged;
		on11 += v.stack_id == 11;
		CHECK(key != 0x7f00000f0000ull);
		if (v.stack_id != 11) {
			CHECK_EQ_U64(v.tid, 7);
			CHECK_EQ_U64(v.objects_fp, HP_OBJ_FP_ONE);
			CHECK_EQ_U64(v.ts_ns,
			             5000 + (key - 0x7f0000001000ull) / 32);
		}
	}
	CHECK_EQ_U64(live, 700);
	CHECK_EQ_U64(on11, 200);
	CHECK_EQ_U64(bytes, 500 * 24 + 200 * 40);
	/* The frees went to the stacks' counters: stack 1 had blocks
	 * 0, 10, 20 ...: all even, all freed (100 of them). */
	CHECK_EQ_U64(atomic_load(&r.stacks[1].free_count), 100);
	CHECK_EQ_U64(atomic_load(&r.stacks[1].free_bytes), 100 * 24);
	CHECK_EQ_U64(atomic_load(&r.stacks[1].free_objects_fp),
	             100 * HP_OBJ_FP_ONE);
	CHECK_EQ_U64(atomic_load(&r.stacks[2].free_count), 0);
	CHECK_EQ_U64(atomic_load(&r.stacks[11].free_count), 0);
	/* The block whose stack id was out of range did not go in (no
	 * client makes one: nothing to count it against). */
	CHECK_EQ_U64(atomic_load(region_counter(&r, HP_CTR_LIVE_FULL)), 0);
	free(a.d);
	free(a.touched);
	free(base);
}

/*
 * Taking the live table back from its log: a position a writer reserved
 * and never made whole is given up on only when asked (and its writer's
 * publish then fails: it applies its event itself); a position no writer
 * reached yet can be given up on too (the writer that reaches it is told);
 * a position the collector took is left to it; and the slot the collector
 * named in log_q for the event it was stopped in is one a client's free
 * does not touch.
 */
static void test_live_log_takeover(void)
{
	struct hp_region r;
	void *base = trace_region(16 << 20, HP_TRACE_LOG, 64 << 10, &r);
	struct hp_event_v2 ev = {.kind = HP_EV_ALLOC,
	                         .addr = 0x7f0000002000ull,
	                         .size = 32,
	                         .charged = 32,
	                         .alloc_ts_ns = HP_OBJ_FP_ONE,
	                         .stack_id = 1},
	                   out;
	uint64_t pos, was0, was;
	bool gone;
	/* Position 0: reserved, never published. */
	struct hp_event_v2 *e0 = livelog_reserve(&r, &pos, &was0, &gone);
	CHECK(e0 && !gone);
	CHECK_EQ_U64(pos, 0);
	CHECK_EQ_U64(livelog_steal(&r, 0, &out, false), HP_LOGGRAB_NOT_YET);
	CHECK_EQ_U64(livelog_take(&r, 0, &out), HP_LOGGRAB_NOT_YET);
	CHECK_EQ_U64(livelog_steal(&r, 0, &out, true), HP_LOGGRAB_ABANDONED);
	CHECK(!livelog_publish(e0, &ev, 0, was0));
	CHECK_EQ_U64(livelog_take(&r, 0, &out), HP_LOGGRAB_CLIENT);
	/* Position 1: given up on before its writer got there. */
	CHECK_EQ_U64(livelog_steal(&r, 1, &out, true), HP_LOGGRAB_ABANDONED);
	CHECK(livelog_reserve(&r, &pos, &was, &gone) == NULL);
	CHECK(gone);
	CHECK_EQ_U64(pos, 1);
	/* Position 2: published, taken by the collector. */
	struct hp_event_v2 *e2 = livelog_reserve(&r, &pos, &was, &gone);
	CHECK(e2 && !gone && pos == 2);
	CHECK(livelog_publish(e2, &ev, 2, was));
	CHECK_EQ_U64(livelog_take(&r, 2, &out), HP_LOGGRAB_TAKEN);
	CHECK_EQ_U64(out.addr, ev.addr);
	CHECK_EQ_U64(livelog_steal(&r, 2, &out, true), HP_LOGGRAB_COLLECTOR);
	/* Position 3: published, taken by the client. */
	struct hp_event_v2 *e3 = livelog_reserve(&r, &pos, &was, &gone);
	CHECK(e3 && pos == 3 && livelog_publish(e3, &ev, 3, was));
	CHECK_EQ_U64(livelog_steal(&r, 3, &out, false), HP_LOGGRAB_TAKEN);
	CHECK_EQ_U64(livelog_take(&r, 3, &out), HP_LOGGRAB_CLIENT);
	/* The collector applies position 2: the entry is in, log_q clear. */
	struct livelog_acc a = {.cap = r.stacks_cap};
	a.d = calloc(a.cap, 3 * sizeof(uint64_t));
	a.touched = calloc(a.cap, sizeof(uint32_t));
	CHECK_EQ_U64(livelog_apply(&r, &ev, &a), 1);
	CHECK_EQ_U64(atomic_load(&r.ext->log_q), 0);
	/* Stopped while emptying its slot: a client's free skips it. */
	uint64_t slot = UINT64_MAX;
	for (uint64_t i = 0; i < r.live_cap; i++)
		if (atomic_load(&r.live_keys[i]) == ev.addr)
			slot = i;
	CHECK(slot != UINT64_MAX);
	atomic_store(&r.ext->log_q, (slot << 3) | HP_LOGQ_FREE);
	struct hp_live_v2 v;
	CHECK(!livetab_remove(&r, ev.addr, &v));
	/* A collector that finds log_q taken applies nothing. */
	atomic_store(&r.ext->log_q, HP_LOGQ_TAKEN);
	struct hp_event_v2 fr = {.kind = HP_EV_FREE, .addr = ev.addr};
	CHECK_EQ_U64(livelog_apply(&r, &fr, &a), -1);
	CHECK_EQ_U64(livelog_apply(&r, &ev, &a), -1);
	atomic_store(&r.ext->log_q, 0);
	CHECK(livetab_remove(&r, ev.addr, &v));
	CHECK_EQ_U64(v.stack_id, 1);
	free(a.d);
	free(a.touched);
	free(base);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"format_bind", test_format_bind},
	        {"bind_rejects", test_bind_rejects},
	        {"format_options", test_format_options},
	        {"heap_select", test_heap_select},
	        {"format_heaps", test_format_heaps},
	        {"stackmax_protocol", test_stackmax_protocol},
	        {"stackmax_sequence", test_stackmax_sequence},
	        {"stack_intern", test_stack_intern},
	        {"stack_intern_many", test_stack_intern_many},
	        {"stack_overflow", test_stack_overflow},
	        {"live_table", test_live_table},
	        {"live_levels", test_live_levels},
	        {"live_limit", test_live_limit},
	        {"threads", test_threads},
	        {"snapshot_clamps", test_snapshot_clamps},
	        {"v1_region", test_v1_region},
	        {"live_seqlock", test_live_seqlock},
	        {"trace_modes", test_trace_modes},
	        {"live_filter", test_live_filter},
	        {"live_log", test_live_log},
	        {"live_log_takeover", test_live_log_takeover},
	        {NULL, NULL},
	};
	return unit_main("region", tests);
}
