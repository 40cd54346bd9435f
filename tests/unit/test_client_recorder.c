/*
 * The recorder with the session options, driven in place (recorder.c and
 * sampler.c compiled into this test, the unwinder and module scan
 * stubbed): peak tracking exact at interval 1 (--dump-at-max), adaptive
 * sampling doubling the interval at the documented fills and never past
 * its max, --block-client's switch to a grown region with frees matched
 * in the retired one, the thread and time of live entries, and the event
 * trace (events of allocations, frees and reallocs in each mode, exact
 * drops, streaming waits with --block-client).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

/* The stub unwinder below stands in for unwind.c. */
#define RECORDER_CAPTURE unwind_capture
#include "../../src/client/recorder.c"
#include "../../src/client/sampler.c"
#include "../../src/client/thread.c"

struct client_state hp_client;
__thread struct client_tls hp_tls;
_Atomic int hp_active;
/* client.c's fork guard: this is the process that attached. */
static const int fork_guard_one = 1;
const volatile int *hp_fork_guard = &fork_guard_one;
struct client_slot *client_forked_unseen(void)
{
	return NULL;
}

/* The "stack" the stub unwinder returns: one synthetic PC per callsite
 * (per thread: test_threads_at_once's threads each set their own). */
static __thread uint64_t cur_pc = 0x401000;

#include "unwind_stub.h"
uint32_t unwind_capture(struct capture_ctx *c, uint32_t max, uint32_t mode,
                        uintptr_t caller, uint32_t *flags)
{
	uint64_t *pcs = c->frames;
	pcs[0] = cur_pc;
	pcs[1] = 0x400100;
	*flags = 0;
	return 2;
}
uint32_t unwind_thread_id(void)
{
	return (uint32_t)syscall(SYS_gettid);
}
void modules_check(struct hp_region *r, const uint64_t *pcs, uint32_t n)
{
}
static int stops;
void client_stop(struct client_slot *s, uint32_t reason)
{
	stops++;
}

/* client_grow stub: hands out `grow_to` once, as client.c would after
 * the collector's ACCEPT (prev chain, current interval, publish). */
static struct client_slot *grow_to;
static uint32_t grow_table = ~0u;
static int grows;
struct client_slot *client_grow(struct client_slot *s, uint32_t table)
{
	grows++;
	grow_table = table;
	struct client_slot *ns = grow_to;
	if (!ns)
		return NULL;
	grow_to = NULL;
	recorder_slot_chain(ns, s);
	atomic_store(&hp_client.cur, ns);
	return ns;
}

static struct client_slot slots[3];

static struct client_slot *make_slot(int i, uint64_t size,
                                     const struct hp_config *cfg)
{
	struct client_slot *s = &slots[i];
	memset(s, 0, sizeof(*s));
	void *base = calloc(1, size);
	CHECK(region_format(base, size, cfg) == 0);
	CHECK(region_bind(&s->region, base, size) == 0);
	recorder_slot_setup(s, 1);
	return s;
}

static void use_slot(struct client_slot *s)
{
	atomic_store(&hp_client.cur, s);
	uint64_t iv = s->base_interval;
	hp_client.interval = iv;
	hp_client.exact_from = iv == 1 ? 0 : iv;
	hp_active = 1;
	hp_tls = (struct client_tls){.th = client_thread()};
	grows = 0;
	stops = 0;
	grow_to = NULL;
}

static void free_slot(struct client_slot *s)
{
	free(s->region.base);
	memset(s, 0, sizeof(*s));
}

/* What a collector computes per callsite from stackmax_read. */
static uint64_t peak_live_of(const struct hp_region *r, uint64_t pc)
{
	uint64_t used = atomic_load(&r->hdr->stacks_used);
	uint64_t live = 0;
	for (uint64_t id = 1; id < used && id < r->stacks_cap; id++) {
		if (r->stacks[id].nframes == 0 ||
		    r->frames[r->stacks[id].frames_off] != pc)
			continue;
		struct hp_stack_counts c;
		stackmax_read(r, id, &c);
		live += c.alloc_bytes - c.free_bytes;
	}
	return live;
}

/*
 * --dump-at-max, exact at interval 1: a single-threaded program's random
 * walk of mallocs and frees from 5 callsites (with reallocs in between);
 * at every step the at-peak view read back from the region must equal the
 * state recorded at the true peak of live bytes.
 */
static void test_peak_exact(void)
{
	struct hp_config cfg = {.sampling_interval = 1,
	                        .max_frames = 64,
	                        .config_flags = HP_CFG_TRACK_MAX};
	struct client_slot *s = make_slot(0, 8 << 20, &cfg);
	CHECK(s->track_max);
	use_slot(s);
	enum { NSITE = 5, NB = 200 };
	struct {
		void *p;
		uint64_t size;
		int site;
	} blocks[NB];
	int nb = 0;
	uint64_t live_by_site[NSITE] = {0}, peak_by_site[NSITE] = {0};
	uint64_t live = 0, peak = 0;
	uint64_t rng = 99;
	char arena[1]; /* addresses only, never dereferenced */
	uintptr_t next_addr = (uintptr_t)arena + 0x100000;
	for (int step = 0; step < 20000; step++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t d = (uint32_t)(rng >> 33);
		if (nb == 0 || (nb < NB && d % 100 < 55)) {
			int site = (int)(d % NSITE);
			uint64_t size = 1 + (d >> 7) % 3000;
			cur_pc = 0x401000 + 0x100 * (uint64_t)site;
			void *p = (void *)(next_addr += 64);
			recorder_sample(p, size, size, true, 0);
			blocks[nb].p = p;
			blocks[nb].size = size;
			blocks[nb].site = site;
			nb++;
			live += size;
			live_by_site[site] += size;
		} else {
			int k = (int)((d >> 3) % (uint32_t)nb);
			recorder_free(blocks[k].p);
			live -= blocks[k].size;
			live_by_site[blocks[k].site] -= blocks[k].size;
			blocks[k] = blocks[--nb];
		}
		if (live > peak) {
			peak = live;
			memcpy(peak_by_site, live_by_site,
			       sizeof(peak_by_site));
		}
		if (step % 251 == 0 || step == 19999) {
			CHECK_EQ_U64(atomic_load(&s->region.hdr->live_bytes),
			             live);
			CHECK_EQ_U64(
			        atomic_load(&s->region.hdr->max_live_bytes),
			        peak);
			int bad = 0;
			for (int i = 0; i < NSITE; i++) {
				uint64_t got = peak_live_of(
				        &s->region, 0x401000 + 0x100 * i);
				if (got != peak_by_site[i])
					bad++;
				CHECK_EQ_U64(got, peak_by_site[i]);
			}
			if (bad)
				break;
		}
	}
	CHECK_EQ_U64(atomic_load(&s->region.hdr->counters[HP_CTR_LIVE_FULL]),
	             0);
	free_slot(s);
}

/* Without the flag nothing of the peak protocol is touched. */
static void test_peak_off(void)
{
	struct hp_config cfg = {.sampling_interval = 1, .max_frames = 64};
	struct client_slot *s = make_slot(0, 4 << 20, &cfg);
	CHECK(!s->track_max);
	use_slot(s);
	recorder_sample((void *)0x100040, 100, 100, true, 0);
	CHECK_EQ_U64(atomic_load(&s->region.hdr->live_bytes), 0);
	CHECK_EQ_U64(atomic_load(&s->region.hdr->max_epoch), 1);
	free_slot(s);
}

/*
 * Adaptive sampling: each new stack that takes the stack table past the
 * k-th trigger (threshold, then halfway to full, ...) doubles the
 * interval, in the header, in heap 0, and for the sampler; never past the
 * max.
 */
static void test_adaptive_stacks(void)
{
	struct hp_config cfg = {.sampling_interval = 4096,
	                        .max_frames = 64,
	                        .config_flags = HP_CFG_ADAPTIVE,
	                        .adaptive_threshold_pct = 50,
	                        .adaptive_max_interval = 4096 * 8};
	struct client_slot *s = make_slot(0, 1 << 20, &cfg);
	CHECK(s->adaptive);
	use_slot(s);
	struct hp_region *r = &s->region;
	uint64_t cap = r->stacks_cap, fcap = r->frames_cap;
	int doublings = 0;
	bool early = false, late = false;
	for (uint64_t i = 0; i < cap + 10; i++) {
		cur_pc = 0x500000 + i * 16;
		uint64_t before = atomic_load(&hp_client.interval);
		unsigned k = (unsigned)doublings;
		uint64_t ts = adapt_trigger(cap, 50, k);
		uint64_t tf = adapt_trigger(fcap, 50, k);
		recorder_sample((void *)(0x200000 + i * 64), 5000, 5000, true,
		                0);
		/* Freed at once: only the stack tables fill. */
		recorder_free((void *)(0x200000 + i * 64));
		uint64_t after = atomic_load(&hp_client.interval);
		uint64_t su = atomic_load(&r->hdr->stacks_used);
		uint64_t fu = atomic_load(&r->hdr->frames_used);
		bool crossed = su >= ts || fu >= tf;
		if (after != before) {
			doublings++;
			CHECK_EQ_U64(after, before * 2);
			early |= !crossed;
		} else if (crossed && doublings < 3 && su < cap) {
			late = true; /* crossed without doubling */
		}
	}
	/* 4096 -> 8192 -> 16384 -> 32768 (the max): three doublings, each
	 * at the first sample that took a table past its trigger (50%, 75%,
	 * 87.5% of its capacity), never before. */
	CHECK_EQ_U64(doublings, 3);
	CHECK(!early);
	CHECK(!late);
	CHECK_EQ_U64(adapt_trigger(1000, 50, 0), 500);
	CHECK_EQ_U64(adapt_trigger(1000, 50, 1), 750);
	CHECK_EQ_U64(adapt_trigger(1000, 90, 1), 950);
	CHECK_EQ_U64(adapt_trigger(1000, 100, 0), 1000);
	CHECK_EQ_U64(atomic_load(&r->hdr->current_interval), 32768);
	CHECK_EQ_U64(r->heaps[0].interval, 32768);
	CHECK_EQ_U64(r->hdr->sampling_interval, 4096); /* the original */
	CHECK_EQ_U64(atomic_load(&hp_client.interval), 32768);
	CHECK_EQ_U64(atomic_load(&hp_client.exact_from), 32768);
	/* A racing thread that saw an older interval does not double. */
	CHECK(!recorder_adapt(s, 16384));
	free_slot(s);
}

/* Live table pressure doubles too; without the flag nothing changes. */
static void test_adaptive_live(void)
{
	for (int on = 0; on < 2; on++) {
		struct hp_config cfg = {.sampling_interval = 64,
		                        .max_frames = 64,
		                        .config_flags =
		                                on ? HP_CFG_ADAPTIVE : 0,
		                        .adaptive_threshold_pct = 90};
		struct client_slot *s = make_slot(0, 1 << 20, &cfg);
		use_slot(s);
		struct hp_region *r = &s->region;
		cur_pc = 0x600000;
		uint64_t live_at_double = 0;
		for (uint64_t i = 0; i < r->live_cap * 2; i++) {
			recorder_sample((void *)(0x300000 + i * 48), 100, 64,
			                false, 0);
			if (!live_at_double &&
			    atomic_load(&r->hdr->current_interval))
				live_at_double =
				        i + 1 -
				        atomic_load(
				                &r->hdr->counters
				                         [HP_CTR_LIVE_FULL]);
		}
		if (on) {
			/* Doubled near the threshold (90%): the signal is an
			 * estimate from 64 buckets, not before 80%. */
			CHECK(live_at_double >= r->live_cap * 80 / 100);
			CHECK(live_at_double <= r->live_cap);
			CHECK_EQ_U64(atomic_load(&r->hdr->current_interval),
			             64 * 64); /* default max: 64x */
		} else {
			CHECK_EQ_U64(atomic_load(&r->hdr->current_interval), 0);
			CHECK_EQ_U64(atomic_load(&hp_client.interval), 64);
		}
		free_slot(s);
	}
}

/*
 * --block-client: when the stack table is full the recorder asks to grow
 * (client_grow) and records the sample in the new region; frees of
 * blocks sampled before find them in the retired region.  When growing
 * fails the sample is dropped as without the option (overflow stack).
 */
static void test_block_client_grow(void)
{
	struct hp_config small = {.sampling_interval = 1,
	                          .max_frames = 64,
	                          .config_flags = HP_CFG_BLOCK_CLIENT,
	                          .block_timeout_ms = 100};
	struct client_slot *s1 = make_slot(0, 1 << 20, &small);
	struct client_slot *s2 = make_slot(1, 4 << 20, &small);
	use_slot(s1);
	uint64_t cap = s1->region.stacks_cap;
	/* Fill s1's stack table: cap - 1 stacks fit (id 0 is overflow). */
	uint64_t n = cap + 20;
	for (uint64_t i = 0; i < n; i++) {
		cur_pc = 0x700000 + i * 16;
		if (i == cap - 1)
			grow_to = s2; /* the collector will have room */
		recorder_sample((void *)(0x400000 + i * 64), 10, 10, true, 0);
	}
	CHECK_EQ_U64(grows, 1);
	CHECK_EQ_U64(grow_table, HP_TAB_STACKS);
	CHECK(atomic_load(&hp_client.cur) == s2);
	CHECK(s2->prev == s1);
	CHECK_EQ_U64(atomic_load(&s1->region.hdr->counters[HP_CTR_STACK_FULL]),
	             0);
	uint64_t in1 = 0, in2 = 0;
	for (uint64_t id = 1; id < s1->region.stacks_cap; id++)
		in1 += atomic_load(&s1->region.stacks[id].alloc_count);
	for (uint64_t id = 1; id < s2->region.stacks_cap; id++)
		in2 += atomic_load(&s2->region.stacks[id].alloc_count);
	CHECK_EQ_U64(in1 + in2, n);
	CHECK_EQ_U64(in2, n - (cap - 1));
	/* Frees: every block leaves whichever region holds it. */
	for (uint64_t i = 0; i < n; i++)
		recorder_free((void *)(0x400000 + i * 64));
	uint64_t f1 = 0, f2 = 0;
	for (uint64_t id = 1; id < s1->region.stacks_cap; id++)
		f1 += atomic_load(&s1->region.stacks[id].free_count);
	for (uint64_t id = 1; id < s2->region.stacks_cap; id++)
		f2 += atomic_load(&s2->region.stacks[id].free_count);
	CHECK_EQ_U64(f1, in1);
	CHECK_EQ_U64(f2, in2);
	/* A realloc of an old block takes it out of the old region. */
	recorder_sample((void *)0x9990000, 10, 10, true, 0);
	struct hp_live_v2 v;
	CHECK(recorder_take((void *)0x4000000, &v) == NULL);
	free_slot(s1);
	free_slot(s2);

	/* Growing refused: the sample goes to the overflow stack. */
	s1 = make_slot(0, 1 << 20, &small);
	use_slot(s1);
	cap = s1->region.stacks_cap;
	for (uint64_t i = 0; i < cap + 5; i++) {
		cur_pc = 0x800000 + i * 16;
		recorder_sample((void *)(0x500000 + i * 64), 10, 10, true, 0);
	}
	CHECK(grows >= 1);
	CHECK(atomic_load(&hp_client.cur) == s1);
	CHECK_EQ_U64(atomic_load(&s1->region.hdr->counters[HP_CTR_STACK_FULL]),
	             (uint64_t)grows);
	free_slot(s1);
}

/*
 * --dump-at-max with --block-client: the peak spans regions.  Live bytes
 * and the peak are kept in the first region; a new peak is copied into
 * the later ones, so stackmax_read on each region (its own header's
 * epoch) gives the state at the true peak.
 */
static void test_peak_across_grow(void)
{
	struct hp_config cfg = {.sampling_interval = 1,
	                        .max_frames = 64,
	                        .config_flags =
	                                HP_CFG_TRACK_MAX | HP_CFG_BLOCK_CLIENT};
	struct client_slot *s1 = make_slot(0, 1 << 20, &cfg);
	struct client_slot *s2 = make_slot(1, 4 << 20, &cfg);
	use_slot(s1);
	uint64_t cap = s1->region.stacks_cap;
	/* Sites 0..cap+9: one block each of 100 bytes; then free the first
	 * half (in s1), allocate 3 blocks of 50 at a new site (in s2). */
	grow_to = s2;
	uint64_t n = cap + 10;
	for (uint64_t i = 0; i < n; i++) {
		cur_pc = 0xa00000 + i * 16;
		recorder_sample((void *)(0x600000 + i * 64), 100, 100, true, 0);
	}
	CHECK(atomic_load(&hp_client.cur) == s2);
	uint64_t peak = n * 100;
	for (uint64_t i = 0; i < n / 2; i++)
		recorder_free((void *)(0x600000 + i * 64));
	cur_pc = 0xb00000;
	for (uint64_t i = 0; i < 3; i++)
		recorder_sample((void *)(0x900000 + i * 64), 50, 50, true, 0);
	struct hp_header_v1 *h1 = s1->region.hdr, *h2 = s2->region.hdr;
	CHECK_EQ_U64(atomic_load(&h1->max_live_bytes), peak);
	CHECK_EQ_U64(atomic_load(&h1->live_bytes), peak - (n / 2) * 100 + 150);
	CHECK_EQ_U64(atomic_load(&h2->max_epoch), atomic_load(&h1->max_epoch));
	CHECK_EQ_U64(atomic_load(&h2->max_live_bytes), peak);
	/* The at-peak view over both regions: every site live once, the
	 * new site absent. */
	uint64_t live = 0;
	struct client_slot *both[2] = {s1, s2};
	for (int k = 0; k < 2; k++) {
		struct hp_region *r = &both[k]->region;
		for (uint64_t id = 1; id < r->stacks_cap; id++) {
			struct hp_stack_counts c;
			stackmax_read(r, id, &c);
			live += c.alloc_bytes - c.free_bytes;
		}
	}
	CHECK_EQ_U64(live, peak);
	free_slot(s1);
	free_slot(s2);
}

/* A STOP request seen at a sample stops the client; nothing recorded. */
/*
 * recorder_record for a custom heap: the stack belongs to that heap (the
 * same pcs in malloc's heap are another callsite), the live entry carries
 * its id and its free finds it by key (heaps.c mixes ids into keys that
 * do not meet malloc's addresses); a key that is 0 or 1 (the live
 * table's empty and busy marks) is recorded, then counted as untracked,
 * its charge given back at once.
 */
static void test_heap_keys(void)
{
	struct hp_config cfg = {.sampling_interval = 1, .max_frames = 64};
	struct client_slot *s = make_slot(0, 8 << 20, &cfg);
	use_slot(s);
	struct hp_region *r = &s->region;
	cur_pc = 0x402000;
	CHECK(recorder_record(0, 0x10000, 48, 48, HP_OBJ_FP_ONE, 0));
	CHECK(recorder_record(3, 0x20000, 32, 32, HP_OBJ_FP_ONE, 0));
	CHECK_EQ_U64(atomic_load(&r->hdr->stacks_used), 3); /* two stacks */
	CHECK_EQ_U64(r->stacks[1].heap_id, 0);
	CHECK_EQ_U64(r->stacks[2].heap_id, 3);
	struct hp_live_v2 v;
	recorder_forget(0x20000);
	CHECK(!livetab_remove(r, 0x20000, &v));
	CHECK_EQ_U64(atomic_load(&r->stacks[2].free_bytes), 32);
	CHECK_EQ_U64(atomic_load(&r->stacks[1].free_bytes), 0);
	CHECK(livetab_remove(r, 0x10000, &v) && v.heap_id == 0);
	for (uint64_t key = 0; key <= HP_LIVE_BUSY; key++)
		CHECK(recorder_record(3, key, 16, 16, HP_OBJ_FP_ONE, 0));
	CHECK_EQ_U64(atomic_load(&r->stacks[2].alloc_bytes), 32 + 2 * 16);
	CHECK_EQ_U64(atomic_load(&r->stacks[2].free_bytes), 32 + 2 * 16);
	CHECK_EQ_U64(atomic_load(&r->hdr->counters[HP_CTR_LIVE_FULL]), 2);
	free_slot(s);
}

static void test_stop(void)
{
	struct hp_config cfg = {.sampling_interval = 1, .max_frames = 64};
	struct client_slot *s = make_slot(0, 4 << 20, &cfg);
	use_slot(s);
	atomic_store(&s->region.hdr->control, HP_CONTROL_STOP);
	recorder_sample((void *)0x100040, 100, 100, true, 0);
	CHECK_EQ_U64(stops, 1);
	CHECK_EQ_U64(atomic_load(&s->region.hdr->stacks_used), 1);
	free_slot(s);
}

/* ---- thread and time of live entries --------------------------------- */

static uint64_t boot_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t my_gettid(void)
{
	return (uint32_t)syscall(SYS_gettid);
}

struct tid_job {
	uint64_t key;
	uint32_t heap_id;
	uint64_t before, after;
	uint32_t tid;
};

static void *tid_worker(void *arg)
{
	struct tid_job *j = arg;
	j->tid = my_gettid();
	j->before = boot_ns();
	CHECK(recorder_record(j->heap_id, j->key, 64, 64, HP_OBJ_FP_ONE, 0));
	j->after = boot_ns();
	return NULL;
}

/* Each live entry carries the thread that allocated it (malloc's heap and
 * a custom heap, from two threads) and a CLOCK_BOOTTIME time taken while
 * it was recorded, to the kernel's tick (recorder.c's alloc_ts: about
 * one tick early at most, never late; two ticks allowed here, for a timer
 * interrupt that came late on a loaded machine, as under TSan). */
static void test_live_tid_ts(void)
{
	struct hp_config cfg = {.sampling_interval = 1, .max_frames = 64};
	struct client_slot *s = make_slot(0, 4 << 20, &cfg);
	use_slot(s);
	struct hp_region *r = &s->region;
	struct tid_job jobs[3] = {{.key = 0x7000, .heap_id = 0},
	                          {.key = 0x7040, .heap_id = 2},
	                          {.key = 0x7080, .heap_id = 0}};
	tid_worker(&jobs[0]);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, tid_worker, &jobs[1]) == 0);
	pthread_join(th, NULL);
	CHECK(pthread_create(&th, NULL, tid_worker, &jobs[2]) == 0);
	pthread_join(th, NULL);
	CHECK(jobs[0].tid != jobs[1].tid && jobs[1].tid != jobs[2].tid);
	CHECK_EQ_U64(jobs[0].tid, getpid());
	struct timespec res;
	CHECK(clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0);
	uint64_t tick =
	        (uint64_t)res.tv_sec * 1000000000ull + (uint64_t)res.tv_nsec;
	CHECK(tick > 0 && tick <= 10000000); /* 1-10 ms */
	for (int i = 0; i < 3; i++) {
		struct hp_live_v2 v;
		CHECK(livetab_remove(r, jobs[i].key, &v));
		CHECK_EQ_U64(v.tid, jobs[i].tid);
		CHECK_EQ_U64(v.heap_id, jobs[i].heap_id);
		CHECK(v.ts_ns + 2 * tick >= jobs[i].before &&
		      v.ts_ns <= jobs[i].after);
	}
	/* The cached id is this thread's: a second sample, same tid. */
	uint64_t b = boot_ns();
	recorder_sample((void *)0x70c0, 10, 10, true, 0);
	uint64_t key;
	struct hp_live_v2 v;
	int seen = 0;
	for (uint64_t i = 0; i < r->live_cap; i++)
		if (livetab_read(r, i, &key, &v) == HP_LIVE_READ_OK &&
		    key == 0x70c0) {
			seen++;
			CHECK_EQ_U64(v.tid, jobs[0].tid);
			CHECK(v.ts_ns + 2 * tick >= b && v.ts_ns <= boot_ns());
			CHECK_EQ_U64(v.size, 10);
		}
	CHECK_EQ_U64(seen, 1);
	free_slot(s);
}

/* ---- several threads at once ------------------------------------------ */

enum { AT_ONCE_THREADS = 4, AT_ONCE_ALLOCS = 4000 };

struct at_once_job {
	int t;
	pthread_barrier_t *go;
};

static void *at_once_worker(void *arg)
{
	struct at_once_job *j = arg;
	/* Two threads per callsite: both intern the same stack at once. */
	cur_pc = 0x402000 + 0x100 * (uint64_t)(j->t % 2);
	uintptr_t base = 0x10000000 + (uintptr_t)j->t * 0x1000000;
	pthread_barrier_wait(j->go);
	for (int i = 0; i < AT_ONCE_ALLOCS; i++) {
		recorder_sample((void *)(base + 64 * (uintptr_t)i), 100, 100,
		                true, 0);
		/* Every other block is freed again, one step behind. */
		if (i % 2 == 1)
			recorder_free((void *)(base + 64 * (uintptr_t)(i - 1)));
	}
	return NULL;
}

/* The recorder from several threads at the same time (exact, interval 1):
 * the shared stack, live and counter tables end up with exactly what the
 * threads left, and nothing is lost.  Under SAN=tsan this is where the
 * client's own lock-free code meets TSan (docs/safety/sanitizers.md). */
static void test_threads_at_once(void)
{
	/* TRACK_MAX: the running live_bytes and peak too. */
	struct hp_config cfg = {.sampling_interval = 1,
	                        .max_frames = 64,
	                        .config_flags = HP_CFG_TRACK_MAX};
	struct client_slot *s = make_slot(0, 16 << 20, &cfg);
	use_slot(s);
	struct hp_region *r = &s->region;
	pthread_barrier_t go;
	CHECK(pthread_barrier_init(&go, NULL, AT_ONCE_THREADS) == 0);
	pthread_t th[AT_ONCE_THREADS];
	struct at_once_job jobs[AT_ONCE_THREADS];
	for (int t = 0; t < AT_ONCE_THREADS; t++) {
		jobs[t] = (struct at_once_job){.t = t, .go = &go};
		CHECK(pthread_create(&th[t], NULL, at_once_worker, &jobs[t]) ==
		      0);
	}
	for (int t = 0; t < AT_ONCE_THREADS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&go);

	uint64_t kept = (uint64_t)AT_ONCE_THREADS * AT_ONCE_ALLOCS / 2;
	CHECK_EQ_U64(atomic_load(&r->hdr->live_bytes), kept * 100);
	CHECK(atomic_load(&r->hdr->max_live_bytes) >= kept * 100);
	uint64_t key, live = 0;
	struct hp_live_v2 v;
	for (uint64_t i = 0; i < r->live_cap; i++)
		if (livetab_read(r, i, &key, &v) == HP_LIVE_READ_OK)
			live++;
	CHECK_EQ_U64(live, kept);
	/* One record per callsite, each with both threads' counts. */
	uint64_t used = atomic_load(&r->hdr->stacks_used), sites = 0;
	for (uint64_t id = 1; id < used && id < r->stacks_cap; id++) {
		struct hp_stack_counts c;
		stack_counts(r, id, &c);
		if (!c.alloc_count)
			continue;
		sites++;
		CHECK_EQ_U64(c.alloc_count, 2 * AT_ONCE_ALLOCS);
		CHECK_EQ_U64(c.free_count, AT_ONCE_ALLOCS);
		CHECK_EQ_U64(c.alloc_bytes - c.free_bytes,
		             (uint64_t)AT_ONCE_ALLOCS * 100);
	}
	CHECK_EQ_U64(sites, 2);
	CHECK_EQ_U64(atomic_load(&r->hdr->counters[HP_CTR_LIVE_FULL]), 0);
	free_slot(s);
}

/* ---- the event trace -------------------------------------------------- */

static struct client_slot *make_traced(int i, uint32_t mode, uint64_t events,
                                       uint32_t flags, uint32_t block_ms)
{
	struct hp_config cfg = {.sampling_interval = 1,
	                        .max_frames = 64,
	                        .config_flags = flags,
	                        .block_timeout_ms = 100,
	                        .trace_mode = mode,
	                        .trace_block_ms = block_ms,
	                        .trace_bytes =
	                                events * sizeof(struct hp_event_v2)};
	uint64_t size = (4 << 20) + cfg.trace_bytes;
	struct client_slot *s = make_slot(i, size, &cfg);
	CHECK(s->traced);
	CHECK_EQ_U64(s->region.trace_cap, events);
	return s;
}

/* The events a reader sees: [tail, head) streaming, [0, min(head, cap))
 * oneshot, the newest cap positions in a ring. */
static uint64_t read_events(const struct hp_region *r, struct hp_event_v2 *out,
                            uint64_t max)
{
	uint64_t head = atomic_load(&r->ext->trace_head);
	uint64_t from = 0, to = head;
	if (r->trace_mode == HP_TRACE_STREAMING)
		from = atomic_load(&r->ext->trace_tail);
	else if (r->trace_mode == HP_TRACE_ONESHOT)
		to = head < r->trace_cap ? head : r->trace_cap;
	else if (head > r->trace_cap)
		from = head - r->trace_cap;
	uint64_t n = 0;
	for (uint64_t p = from; p < to && n < max; p++) {
		CHECK(trace_get(r, p, &out[n]) == HP_EV_READ_OK);
		n++;
	}
	return n;
}

static void check_event(const struct hp_event_v2 *e, uint8_t kind,
                        uint64_t addr, uint64_t size, uint32_t stack,
                        uint16_t heap, uint32_t tid, uint8_t region)
{
	CHECK_EQ_U64(e->kind, kind);
	CHECK_EQ_U64(e->addr, addr);
	CHECK_EQ_U64(e->size, size);
	CHECK_EQ_U64(e->charged, size);
	CHECK_EQ_U64(e->stack_id, stack);
	CHECK_EQ_U64(e->heap_id, heap);
	CHECK_EQ_U64(e->tid, tid);
	CHECK_EQ_U64(e->region, region);
}

/* What hooks.c's realloc does around the real call. */
static void realloc_like(void *old, void *new_p, size_t n, bool fails)
{
	struct hp_live_v2 v;
	struct client_slot *had = recorder_take(old, &v);
	if (fails) {
		if (had)
			recorder_put_back(had, old, &v);
		return;
	}
	if (had)
		recorder_apply_free(had, (uintptr_t)old, &v);
	recorder_sample(new_p, n, n, true, 0);
}

/*
 * In each mode, a known sequence gives exactly its events: ALLOC with the
 * live entry's time, thread, stack and heap; FREE with the entry's stack,
 * size and time (alloc_ts_ns) and the freeing thread; a failed realloc
 * nothing; a moved one FREE(old) + ALLOC(new); an allocation the live
 * table cannot hold (keys 0 and 1 of a custom heap) ALLOC + FREE.
 */
static void test_trace_events(void)
{
	static const uint32_t modes[] = {HP_TRACE_STREAMING, HP_TRACE_ONESHOT,
	                                 HP_TRACE_RING};
	for (int m = 0; m < 3; m++) {
		struct client_slot *s = make_traced(0, modes[m], 1024, 0, 0);
		use_slot(s);
		struct hp_region *r = &s->region;
		uint32_t tid = my_gettid();
		uint64_t t0 = boot_ns();
		cur_pc = 0x410000;
		recorder_sample((void *)0x10000, 100, 100, true, 0); /* st 1 */
		cur_pc = 0x420000;
		CHECK(recorder_record(3, 0xabc000, 50, 50, HP_OBJ_FP_ONE,
		                      0)); /* stack 2, heap 3 */
		recorder_free((void *)0x10000);
		realloc_like((void *)0xabc000, NULL, 0, true); /* not ours */
		cur_pc = 0x430000;
		recorder_sample((void *)0x20000, 30, 30, true, 0); /* st 3 */
		realloc_like((void *)0x20000, (void *)0x20000, 40, true);
		realloc_like((void *)0x20000, (void *)0x30000, 70, false);
		recorder_forget(0xabc000);
		cur_pc = 0x440000;
		CHECK(recorder_record(3, 1, 20, 20, HP_OBJ_FP_ONE,
		                      0));      /* untracked: stack 4 */
		recorder_free((void *)0x55550); /* unknown: no event */
		uint64_t t1 = boot_ns();

		struct hp_event_v2 ev[32];
		uint64_t n = read_events(r, ev, 32);
		CHECK_EQ_U64(n, 9);
		if (n != 9) {
			free_slot(s);
			continue;
		}
		check_event(&ev[0], HP_EV_ALLOC, 0x10000, 100, 1, 0, tid, 0);
		check_event(&ev[1], HP_EV_ALLOC, 0xabc000, 50, 2, 3, tid, 0);
		check_event(&ev[2], HP_EV_FREE, 0x10000, 100, 1, 0, tid, 0);
		CHECK_EQ_U64(ev[2].alloc_ts_ns, ev[0].ts_ns);
		check_event(&ev[3], HP_EV_ALLOC, 0x20000, 30, 3, 0, tid, 0);
		/* the failed realloc: nothing; the moved one: */
		check_event(&ev[4], HP_EV_FREE, 0x20000, 30, 3, 0, tid, 0);
		CHECK_EQ_U64(ev[4].alloc_ts_ns, ev[3].ts_ns);
		check_event(&ev[5], HP_EV_ALLOC, 0x30000, 70, 3, 0, tid, 0);
		check_event(&ev[6], HP_EV_FREE, 0xabc000, 50, 2, 3, tid, 0);
		CHECK_EQ_U64(ev[6].alloc_ts_ns, ev[1].ts_ns);
		check_event(&ev[7], HP_EV_ALLOC, 1, 20, 4, 3, tid, 0);
		check_event(&ev[8], HP_EV_FREE, 1, 20, 4, 3, tid, 0);
		CHECK_EQ_U64(ev[8].alloc_ts_ns, ev[7].ts_ns);
		for (uint64_t i = 0; i < n; i++) {
			CHECK_EQ_U64(ev[i].seq, i + 1);
			CHECK(ev[i].ts_ns >= t0 && ev[i].ts_ns <= t1);
			if (i)
				CHECK(ev[i].ts_ns >= ev[i - 1].ts_ns);
			if (ev[i].kind == HP_EV_ALLOC)
				CHECK_EQ_U64(ev[i].alloc_ts_ns, 0);
		}
		/* The live entries agree: only 0x30000 is left. */
		struct hp_live_v2 v;
		CHECK(livetab_remove(r, 0x30000, &v));
		CHECK_EQ_U64(v.ts_ns, ev[5].ts_ns);
		CHECK_EQ_U64(atomic_load(&r->hdr->counters[HP_CTR_LIVE_FULL]),
		             1);
		for (int d = 0; d < HP_TDROP_COUNT; d++)
			CHECK_EQ_U64(atomic_load(&r->ext->trace_dropped[d]), 0);
		CHECK_EQ_U64(atomic_load(&r->ext->trace_waits), 0);
		free_slot(s);
	}

	/* Without a trace nothing is written anywhere. */
	struct hp_config cfg = {.sampling_interval = 1, .max_frames = 64};
	struct client_slot *s = make_slot(0, 4 << 20, &cfg);
	CHECK(!s->traced);
	use_slot(s);
	recorder_sample((void *)0x10000, 100, 100, true, 0);
	recorder_free((void *)0x10000);
	CHECK_EQ_U64(atomic_load(&s->region.ext->trace_head), 0);
	free_slot(s);
}

/* Full buffers: oneshot keeps the first events and counts the rest (and
 * when it filled), a ring keeps the newest and drops none. */
static void test_trace_full_oneshot_ring(void)
{
	struct client_slot *s = make_traced(0, HP_TRACE_ONESHOT, 16, 0, 0);
	use_slot(s);
	struct hp_region *r = &s->region;
	cur_pc = 0x450000;
	for (uint64_t i = 0; i < 20; i++)
		recorder_sample((void *)(0x100000 + i * 64), 10 + i, 10 + i,
		                true, 0);
	for (uint64_t i = 0; i < 3; i++)
		recorder_free((void *)(0x100000 + i * 64));
	struct hp_event_v2 ev[32];
	CHECK_EQ_U64(read_events(r, ev, 32), 16);
	CHECK_EQ_U64(ev[15].addr, 0x100000 + 15 * 64);
	CHECK(atomic_load(&r->ext->trace_full_ts) != 0);
	CHECK_EQ_U64(atomic_load(&r->ext->trace_dropped[HP_TDROP_ALLOCS]), 4);
	CHECK_EQ_U64(atomic_load(&r->ext->trace_dropped[HP_TDROP_ALLOC_BYTES]),
	             26 + 27 + 28 + 29);
	CHECK_EQ_U64(atomic_load(&r->ext->trace_dropped[HP_TDROP_FREES]), 3);
	CHECK_EQ_U64(atomic_load(&r->ext->trace_dropped[HP_TDROP_FREE_BYTES]),
	             10 + 11 + 12);
	free_slot(s);

	s = make_traced(0, HP_TRACE_RING, 16, 0, 0);
	use_slot(s);
	r = &s->region;
	for (uint64_t i = 0; i < 20; i++)
		recorder_sample((void *)(0x100000 + i * 64), 10, 10, true, 0);
	for (uint64_t i = 0; i < 3; i++)
		recorder_free((void *)(0x100000 + i * 64));
	CHECK_EQ_U64(read_events(r, ev, 32), 16);
	CHECK_EQ_U64(ev[0].addr, 0x100000 + 7 * 64); /* positions 7..22 */
	CHECK_EQ_U64(ev[12].kind, HP_EV_ALLOC);
	CHECK_EQ_U64(ev[13].kind, HP_EV_FREE);
	CHECK_EQ_U64(ev[15].addr, 0x100000 + 2 * 64);
	for (int d = 0; d < HP_TDROP_COUNT; d++)
		CHECK_EQ_U64(atomic_load(&r->ext->trace_dropped[d]), 0);
	free_slot(s);
}

/* Streaming without --block-client: what finds no room is dropped at
 * once and counted exactly; consumed room is used again. */
static void test_trace_streaming_drop(void)
{
	struct client_slot *s = make_traced(0, HP_TRACE_STREAMING, 16, 0, 0);
	use_slot(s);
	struct hp_region *r = &s->region;
	cur_pc = 0x460000;
	for (uint64_t i = 0; i < 26; i++)
		recorder_sample((void *)(0x200000 + i * 64), 100 + i, 100 + i,
		                true, 0);
	for (uint64_t i = 20; i < 25; i++)
		recorder_free((void *)(0x200000 + i * 64));
	_Atomic uint64_t *d = r->ext->trace_dropped;
	CHECK_EQ_U64(atomic_load(&r->ext->trace_head), 16);
	CHECK_EQ_U64(atomic_load(&d[HP_TDROP_ALLOCS]), 10);
	uint64_t bytes = 0;
	for (uint64_t i = 16; i < 26; i++)
		bytes += 100 + i;
	CHECK_EQ_U64(atomic_load(&d[HP_TDROP_ALLOC_BYTES]), bytes);
	CHECK_EQ_U64(atomic_load(&d[HP_TDROP_FREES]), 5);
	CHECK_EQ_U64(atomic_load(&d[HP_TDROP_FREE_BYTES]),
	             120 + 121 + 122 + 123 + 124);
	CHECK_EQ_U64(atomic_load(&r->ext->trace_waits), 0);
	/* The collector consumed 4: the next 4 events go in. */
	atomic_store(&r->ext->trace_tail, 4);
	for (uint64_t i = 0; i < 5; i++)
		recorder_free((void *)(0x200000 + i * 64));
	CHECK_EQ_U64(atomic_load(&r->ext->trace_head), 20);
	CHECK_EQ_U64(atomic_load(&d[HP_TDROP_FREES]), 6);
	struct hp_event_v2 ev[32];
	CHECK_EQ_U64(read_events(r, ev, 32), 16);
	CHECK_EQ_U64(ev[15].kind, HP_EV_FREE);
	CHECK_EQ_U64(ev[15].addr, 0x200000 + 3 * 64);
	free_slot(s);
}

/* The consumer for test_trace_streaming_block: once the writer sleeps
 * (waiting for room), it consumes everything. */
struct consumer {
	struct hp_region *r;
	pid_t writer;
	_Atomic int go;
	bool saw_sleep;
};

static char task_state(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;
	while (!atomic_load(&c->go))
		sched_yield();
	/* Bounded: the writer waits at most 10 s. */
	for (int i = 0; i < 20000 && !c->saw_sleep; i++) {
		if (task_state(c->writer) == 'S')
			c->saw_sleep = true;
		else
			sched_yield();
	}
	atomic_store(&c->r->ext->trace_tail,
	             atomic_load(&c->r->ext->trace_head));
	return NULL;
}

/*
 * Streaming with --block-client: a writer without room waits (counted in
 * trace_waits / trace_wait_ns) and drops after trace_block_ms; then, for
 * a second, nobody waits.  A writer whose collector makes room while it
 * waits writes its event.
 */
static void test_trace_streaming_block(void)
{
	struct client_slot *s =
	        make_traced(0, HP_TRACE_STREAMING, 16, HP_CFG_BLOCK_CLIENT, 50);
	CHECK(s->trace_block);
	CHECK_EQ_U64(s->trace_block_ms, 50);
	use_slot(s);
	struct hp_region *r = &s->region;
	struct hp_header_ext_v2 *x = r->ext;
	cur_pc = 0x470000;
	for (uint64_t i = 0; i < 16; i++)
		recorder_sample((void *)(0x300000 + i * 64), 8, 8, true, 0);
	CHECK_EQ_U64(atomic_load(&x->trace_waits), 0);
	recorder_sample((void *)0x310000, 9, 9, true, 0);
	CHECK_EQ_U64(atomic_load(&x->trace_waits), 1);
	CHECK(atomic_load(&x->trace_wait_ns) >= 50 * 1000000ull);
	CHECK_EQ_U64(atomic_load(&x->trace_dropped[HP_TDROP_ALLOCS]), 1);
	CHECK_EQ_U64(atomic_load(&x->trace_dropped[HP_TDROP_ALLOC_BYTES]), 9);
	/* Stalled: the next ones drop without waiting. */
	uint64_t waited = atomic_load(&x->trace_wait_ns);
	recorder_sample((void *)0x310040, 9, 9, true, 0);
	recorder_free((void *)0x300000);
	CHECK_EQ_U64(atomic_load(&x->trace_waits), 1);
	CHECK_EQ_U64(atomic_load(&x->trace_wait_ns), waited);
	CHECK_EQ_U64(atomic_load(&x->trace_dropped[HP_TDROP_ALLOCS]), 2);
	CHECK_EQ_U64(atomic_load(&x->trace_dropped[HP_TDROP_FREES]), 1);
	CHECK_EQ_U64(atomic_load(&x->trace_head), 16);
	/* A free inside a hook never waits (the stall cleared first). */
	atomic_store(&s->trace_stall_ns, 0);
	int held = recorder_hold(UINTPTR_MAX - 15, 0, false);
	CHECK_EQ_U64(held, 0);
	recorder_free((void *)(0x300000 + 64));
	recorder_unhold(held);
	CHECK_EQ_U64(atomic_load(&x->trace_waits), 1);
	CHECK_EQ_U64(atomic_load(&x->trace_dropped[HP_TDROP_FREES]), 2);

	/* Room made while waiting: the event is written. */
	free_slot(s);
	s = make_traced(0, HP_TRACE_STREAMING, 16, HP_CFG_BLOCK_CLIENT, 10000);
	use_slot(s);
	r = &s->region;
	x = r->ext;
	for (uint64_t i = 0; i < 16; i++)
		recorder_sample((void *)(0x300000 + i * 64), 8, 8, true, 0);
	struct consumer c = {.r = r, .writer = (pid_t)my_gettid()};
	pthread_t th;
	CHECK(pthread_create(&th, NULL, consumer_main, &c) == 0);
	atomic_store(&c.go, 1);
	recorder_sample((void *)0x320000, 11, 11, true, 0);
	pthread_join(th, NULL);
	CHECK(c.saw_sleep);
	CHECK_EQ_U64(atomic_load(&x->trace_waits), 1);
	CHECK(atomic_load(&x->trace_wait_ns) > 0);
	CHECK_EQ_U64(atomic_load(&x->trace_head), 17);
	for (int d = 0; d < HP_TDROP_COUNT; d++)
		CHECK_EQ_U64(atomic_load(&x->trace_dropped[d]), 0);
	struct hp_event_v2 e;
	CHECK(trace_get(r, 16, &e) == HP_EV_READ_OK);
	CHECK_EQ_U64(e.addr, 0x320000);
	CHECK_EQ_U64(e.size, 11);
	free_slot(s);

	/* Without --block-client the header's trace_block_ms means
	 * nothing: no waits. */
	s = make_traced(0, HP_TRACE_STREAMING, 16, 0, 50);
	CHECK(!s->trace_block);
	free_slot(s);
	/* trace_block_ms 0: block_timeout_ms; clamped to 60 s. */
	s = make_traced(0, HP_TRACE_STREAMING, 16, HP_CFG_BLOCK_CLIENT, 0);
	CHECK_EQ_U64(s->trace_block_ms, 100);
	free_slot(s);
	s = make_traced(0, HP_TRACE_STREAMING, 16, HP_CFG_BLOCK_CLIENT,
	                3600000);
	CHECK_EQ_U64(s->trace_block_ms, 60000);
	free_slot(s);
}

/* GROW: events of a later region go to the first region's trace and
 * name their region; a free found in the first region names region 0. */
static void test_trace_grow(void)
{
	struct client_slot *s1 = make_traced(0, HP_TRACE_STREAMING, 1024,
	                                     HP_CFG_BLOCK_CLIENT, 0);
	struct hp_config c2 = {.sampling_interval = 1,
	                       .max_frames = 64,
	                       .config_flags = HP_CFG_BLOCK_CLIENT,
	                       .region_index = 1,
	                       .trace_mode = HP_TRACE_STREAMING,
	                       .trace_bytes = 1 << 16};
	struct client_slot *s2 = make_slot(1, 4 << 20, &c2);
	CHECK(!s2->traced); /* no table of its own */
	CHECK_EQ_U64(s2->region_index, 1);
	use_slot(s1);
	cur_pc = 0x480000;
	recorder_sample((void *)0x400000, 5, 5, true, 0);
	recorder_slot_chain(s2, s1);
	CHECK(s2->traced);
	atomic_store(&hp_client.cur, s2);
	cur_pc = 0x490000;
	recorder_sample((void *)0x400040, 6, 6, true, 0);
	recorder_free((void *)0x400000);
	recorder_free((void *)0x400040);
	struct hp_event_v2 ev[8];
	uint32_t tid = my_gettid();
	CHECK_EQ_U64(read_events(&s1->region, ev, 8), 4);
	check_event(&ev[0], HP_EV_ALLOC, 0x400000, 5, 1, 0, tid, 0);
	check_event(&ev[1], HP_EV_ALLOC, 0x400040, 6, 1, 0, tid, 1);
	check_event(&ev[2], HP_EV_FREE, 0x400000, 5, 1, 0, tid, 0);
	check_event(&ev[3], HP_EV_FREE, 0x400040, 6, 1, 0, tid, 1);
	free_slot(s1);
	free_slot(s2);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"peak_exact", test_peak_exact},
	        {"peak_off", test_peak_off},
	        {"adaptive_stacks", test_adaptive_stacks},
	        {"adaptive_live", test_adaptive_live},
	        {"block_client_grow", test_block_client_grow},
	        {"peak_across_grow", test_peak_across_grow},
	        {"heap_keys", test_heap_keys},
	        {"stop", test_stop},
	        {"live_tid_ts", test_live_tid_ts},
	        {"threads_at_once", test_threads_at_once},
	        {"trace_events", test_trace_events},
	        {"trace_full_oneshot_ring", test_trace_full_oneshot_ring},
	        {"trace_streaming_drop", test_trace_streaming_drop},
	        {"trace_streaming_block", test_trace_streaming_block},
	        {"trace_grow", test_trace_grow},
	        {NULL, NULL},
	};
	return unit_main("client_recorder", tests);
}
