/*
 * The v1 region: layout sizes, format/bind and the checks bind makes, the
 * stack table (interning, dedup, overflow) and the live table (insert,
 * remove, bucket fill), single- and multi-threaded, and the collector's
 * snapshot of a region.
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
	                        .max_frames = 64,
	                        .heap_enable_mask = 1};
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
	for (int i = 0; i <= HP_TAB_LIVE_FILL; i++)
		for (int j = 0; j <= HP_TAB_LIVE_FILL; j++) {
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
	free(base);
}

static void test_bind_rejects(void)
{
	struct hp_region r;
	void *base = new_region(4 << 20, 4096, &r);
	struct hp_header_v1 *h = base;
	CHECK(region_bind(&r, base, 2 << 20) == -EINVAL); /* size mismatch */
	h->version = 2;
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
	struct hp_live_v1 v = {.stack_id = 7, .size = 100, .charged = 4096};
	CHECK(livetab_insert(&r, 0x10000, &v) == 0);
	struct hp_live_v1 out;
	CHECK(!livetab_remove(&r, 0x20000, &out));
	CHECK(livetab_remove(&r, 0x10000, &out));
	CHECK_EQ_U64(out.stack_id, 7);
	CHECK_EQ_U64(out.charged, 4096);
	CHECK(!livetab_remove(&r, 0x10000, &out)); /* only once */
	/* Fill until both buckets of some address are full: insert fails
	 * with -ENOSPC, and every inserted address comes back exactly once. */
	uint64_t n = r.live_cap * 2, ok = 0, full = 0;
	for (uint64_t i = 0; i < n; i++) {
		v.stack_id = (uint32_t)i;
		if (livetab_insert(&r, 0x100000 + i * 16, &v) == 0)
			ok++;
		else
			full++;
	}
	CHECK(full > 0);
	CHECK(ok > r.live_cap / 2); /* two choices keep it well filled */
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
		struct hp_live_v1 v = {.stack_id = id, .charged = 1};
		if (livetab_insert(w->r, addr, &v) == 0)
			w->inserted++;
		if (i % 2 == 0) {
			struct hp_live_v1 out;
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

int main(void)
{
	static const struct unit_test tests[] = {
	        {"format_bind", test_format_bind},
	        {"bind_rejects", test_bind_rejects},
	        {"stack_intern", test_stack_intern},
	        {"stack_overflow", test_stack_overflow},
	        {"live_table", test_live_table},
	        {"threads", test_threads},
	        {"snapshot_clamps", test_snapshot_clamps},
	        {NULL, NULL},
	};
	return unit_main("region", tests);
}
