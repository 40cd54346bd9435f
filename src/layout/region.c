/*
 * The region's geometry (layout v2; v1 for clients that speak only v1) and
 * its lock-free tables.  This file is compiled
 * into both the client library and the collector, so it uses no libc
 * function that could allocate or lock.
 */
#include "layout/region.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <time.h>

#define ALIGN64(x) (((x) + 63u) & ~(uint64_t)63u)

static uint64_t pow2_floor(uint64_t x)
{
	uint64_t p = 1;
	while (p * 2 <= x)
		p *= 2;
	return p;
}

uint64_t hp_mix64(uint64_t x)
{
	/* splitmix64 finalizer: cheap and spreads low-entropy keys. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static bool heap_name_eq(const char *a, const char *b)
{
	for (size_t i = 0; i < HP_HEAP_NAME_MAX; i++) {
		/* Stops at b's NUL: a shorter literal is never read past its
		 * end, which cppcheck does not see. */
		// cppcheck-suppress arrayIndexOutOfBounds
		if (a[i] != b[i])
			return false;
		if (!a[i])
			return true;
	}
	return true;
}

uint64_t hp_heap_select_interval(const struct hp_heap_select_v1 *sel,
                                 uint64_t n, bool all, uint64_t dflt,
                                 const char *name)
{
	const struct hp_heap_select_v1 *hit = NULL;
	bool listed = false;
	for (uint64_t i = 0; i < n && i < HP_MAX_HEAPS; i++) {
		if (!(sel[i].flags & HP_HEAPSEL_EXCLUDE))
			listed = true;
		if (!hit && heap_name_eq(sel[i].name, name))
			hit = &sel[i];
	}
	if (all) {
		if (hit && (hit->flags & HP_HEAPSEL_EXCLUDE))
			return 0;
	} else if (listed) {
		if (!hit || (hit->flags & HP_HEAPSEL_EXCLUDE))
			return 0;
	} else if (!heap_name_eq(name, "libc.malloc")) {
		return 0;
	}
	return hit && hit->interval ? hit->interval : dflt;
}

uint64_t hp_heap_select_min_interval(const struct hp_heap_select_v1 *sel,
                                     uint64_t n, uint64_t dflt)
{
	uint64_t iv = dflt;
	for (uint64_t i = 0; i < n && i < HP_MAX_HEAPS; i++)
		if (sel[i].interval && sel[i].interval < iv &&
		    !(sel[i].flags & HP_HEAPSEL_EXCLUDE))
			iv = sel[i].interval;
	return iv;
}

uint64_t region_heap_interval(const struct hp_region *r, const char *name)
{
	return hp_heap_select_interval(r->heap_select, r->heap_select_cap,
	                               r->hdr->config_flags & HP_CFG_ALL_HEAPS,
	                               r->hdr->sampling_interval, name);
}

int region_format(void *base, uint64_t size, const struct hp_config *cfg)
{
	if (!base || size < HP_REGION_MIN_SIZE || !cfg ||
	    cfg->sampling_interval == 0 || cfg->max_frames == 0 ||
	    cfg->max_frames > HP_MAX_FRAMES ||
	    cfg->adaptive_threshold_pct > 100 ||
	    cfg->nheap_select > HP_MAX_HEAPS ||
	    (cfg->nheap_select && !cfg->heap_select))
		return -EINVAL;
	uint32_t version =
	        cfg->layout_version ? cfg->layout_version : HP_LAYOUT_VERSION;
	if (version < HP_LAYOUT_MIN_VERSION || version > HP_LAYOUT_VERSION ||
	    cfg->trace_mode > HP_TRACE_LOG)
		return -EINVAL;
	bool v2 = version >= 2;
	bool traced =
	        v2 && cfg->trace_mode != HP_TRACE_OFF && cfg->region_index == 0;
	bool track_max = cfg->config_flags & HP_CFG_TRACK_MAX;
	bool all_heaps = cfg->config_flags & HP_CFG_ALL_HEAPS;
	uint64_t malloc_interval = hp_heap_select_interval(
	        cfg->heap_select, cfg->nheap_select, all_heaps,
	        cfg->sampling_interval, "libc.malloc");
	/* Interval 1 anywhere: every live block of that heap needs a slot. */
	bool every_block =
	        hp_heap_select_min_interval(cfg->heap_select, cfg->nheap_select,
	                                    cfg->sampling_interval) == 1;

	struct hp_header_v1 *h = base;
	uint64_t hsize = v2 ? HP_HEADER_V2_SIZE : sizeof(*h);
	memset(h, 0, hsize);
	h->magic = HP_MAGIC;
	h->version = version;
	h->header_size = (uint32_t)hsize;
	h->region_size = size;
	h->sampling_interval = cfg->sampling_interval;
	h->unwind_mode = cfg->unwind_mode;
	h->max_frames = cfg->max_frames;
	h->session_id = cfg->session_id;
	h->heap_enable_mask = malloc_interval ? 1 : 0;
	h->config_flags = cfg->config_flags;
	h->adaptive_threshold_pct = cfg->adaptive_threshold_pct;
	h->adaptive_max_interval = cfg->adaptive_max_interval;
	if (cfg->config_flags & HP_CFG_ADAPTIVE) {
		if (!h->adaptive_threshold_pct)
			h->adaptive_threshold_pct = 90;
		if (!h->adaptive_max_interval)
			h->adaptive_max_interval = 64 * cfg->sampling_interval;
		if (h->adaptive_max_interval < cfg->sampling_interval)
			h->adaptive_max_interval = cfg->sampling_interval;
	}
	h->block_timeout_ms = cfg->block_timeout_ms;
	/* Peak epochs start at 1 so that a zeroed STACK_MAX entry (epoch 0)
	 * never matches: "unchanged since the peak". */
	atomic_store_explicit(&h->max_epoch, 1, memory_order_relaxed);

	/*
	 * Budget: fixed small tables first, then the rest split between the
	 * live table and the stack tables.  With interval 1 every live block
	 * needs a slot, so the live table gets the larger share; when
	 * sampling, live slots are rarely used and stacks get more.
	 */
	uint64_t off = ALIGN64(hsize);
	struct hp_table_desc *t = h->tables;

	if (v2) {
		struct hp_header_ext_v2 *x =
		        (struct hp_header_ext_v2 *)((uint8_t *)base +
		                                    sizeof(*h));
		x->region_index = cfg->region_index;
		x->trace_mode = traced ? cfg->trace_mode : HP_TRACE_OFF;
		x->trace_block_ms = cfg->trace_block_ms;
		/* live_levels and live_level0 below, with the live table. */
	}
	if (traced) {
		uint64_t nev = pow2_floor(cfg->trace_bytes /
		                          sizeof(struct hp_event_v2));
		if (cfg->trace_bytes < sizeof(struct hp_event_v2) ||
		    nev * sizeof(struct hp_event_v2) >= size - off)
			return -EINVAL;
		t[HP_TAB_TRACE] = (struct hp_table_desc){
		        off, nev, sizeof(struct hp_event_v2), 0};
		off = ALIGN64(off + nev * sizeof(struct hp_event_v2));
	}

	t[HP_TAB_HEAPS] = (struct hp_table_desc){off, HP_MAX_HEAPS,
	                                         sizeof(struct hp_heap_v1), 0};
	off = ALIGN64(off + HP_MAX_HEAPS * sizeof(struct hp_heap_v1));

	if (cfg->nheap_select) {
		uint64_t n = cfg->nheap_select;
		t[HP_TAB_HEAP_SELECT] = (struct hp_table_desc){
		        off, n, sizeof(struct hp_heap_select_v1), 0};
		struct hp_heap_select_v1 *sel =
		        (struct hp_heap_select_v1 *)((uint8_t *)base + off);
		for (uint64_t i = 0; i < n; i++) {
			sel[i] = cfg->heap_select[i];
			sel[i].name[HP_HEAP_NAME_MAX - 1] = '\0';
		}
		off = ALIGN64(off + n * sizeof(struct hp_heap_select_v1));
	}

	uint64_t nmod = 1024;
	t[HP_TAB_MODULES] = (struct hp_table_desc){
	        off, nmod, sizeof(struct hp_module_v1), 0};
	off = ALIGN64(off + nmod * sizeof(struct hp_module_v1));

	uint64_t nstr = 256 * 1024;
	t[HP_TAB_STRINGS] = (struct hp_table_desc){off, nstr, 1, 0};
	off = ALIGN64(off + nstr);

	if (off >= size)
		return -EINVAL;
	uint64_t rest = size - off;
	uint64_t live_share = every_block ? rest / 2 : rest / 8;
	uint64_t live_size =
	        v2 ? sizeof(struct hp_live_v2) : sizeof(struct hp_live_v1);
	uint64_t per_live = sizeof(uint64_t) + live_size;
	uint64_t live_cap = pow2_floor(live_share / per_live);
	if (live_cap < HP_LIVE_BUCKET * 2)
		return -EINVAL;
	t[HP_TAB_LIVE_KEYS] =
	        (struct hp_table_desc){off, live_cap, sizeof(uint64_t), 0};
	off = ALIGN64(off + live_cap * sizeof(uint64_t));
	t[HP_TAB_LIVE_VALUES] =
	        (struct hp_table_desc){off, live_cap, (uint32_t)live_size, 0};
	off = ALIGN64(off + live_cap * live_size);
	t[HP_TAB_LIVE_FILL] =
	        (struct hp_table_desc){off, live_cap / HP_LIVE_BUCKET, 1, 0};
	off = ALIGN64(off + live_cap / HP_LIVE_BUCKET);
	if (v2) {
		/* Levels: a first one sized for what a program usually
		 * holds (a few thousand sampled blocks; every block at
		 * interval 1), each next one twice the size of all before
		 * it.  The collector allocates a level's pages before the
		 * client needs it (collector_tend). */
		uint64_t l0 = every_block ? HP_LIVE_LEVEL0_EXACT
		                          : HP_LIVE_LEVEL0_SAMPLED;
		if (l0 > live_cap)
			l0 = live_cap;
		uint32_t levels = 1;
		while ((l0 << (levels - 1)) < live_cap)
			levels++;
		struct hp_header_ext_v2 *x =
		        (struct hp_header_ext_v2 *)((uint8_t *)base +
		                                    sizeof(*h));
		x->live_level0 = l0;
		x->live_levels = levels;
	}
	if (v2 && cfg->sampling_interval > 1) {
		t[HP_TAB_LIVE_FILTER] =
		        (struct hp_table_desc){off, live_cap, 1, 0};
		off = ALIGN64(off + live_cap);
	}

	/* Stack budget: index slots (2 per stack), records, and ~16 frames
	 * per stack on average; with peak tracking a STACK_MAX entry too. */
	rest = size - off;
	uint64_t per_stack = 2 * sizeof(uint64_t) + sizeof(struct hp_stack_v1) +
	                     16 * sizeof(uint64_t);
	if (track_max)
		per_stack += sizeof(struct hp_stack_max_v1);
	uint64_t nstack = pow2_floor(rest / per_stack);
	if (nstack < 16)
		return -EINVAL;
	t[HP_TAB_STACK_INDEX] =
	        (struct hp_table_desc){off, nstack * 2, sizeof(uint64_t), 0};
	off = ALIGN64(off + nstack * 2 * sizeof(uint64_t));
	t[HP_TAB_STACKS] = (struct hp_table_desc){
	        off, nstack, sizeof(struct hp_stack_v1), 0};
	off = ALIGN64(off + nstack * sizeof(struct hp_stack_v1));
	if (track_max) {
		t[HP_TAB_STACK_MAX] = (struct hp_table_desc){
		        off, nstack, sizeof(struct hp_stack_max_v1), 0};
		off = ALIGN64(off + nstack * sizeof(struct hp_stack_max_v1));
	}
	if (off >= size)
		return -EINVAL;
	uint64_t nframes = (size - off) / sizeof(uint64_t);
	t[HP_TAB_FRAMES] =
	        (struct hp_table_desc){off, nframes, sizeof(uint64_t), 0};

	/* Stack 0 stands for samples whose stack did not fit. */
	struct hp_stack_v1 *s0 =
	        (struct hp_stack_v1 *)((uint8_t *)base +
	                               t[HP_TAB_STACKS].offset);
	memset(s0, 0, sizeof(*s0));
	s0->flags = HP_STACK_OVERFLOW;
	atomic_store_explicit(&s0->ready, 1, memory_order_relaxed);
	atomic_store_explicit(&h->stacks_used, 1, memory_order_relaxed);

	/* Heap 0 is the default malloc heap. */
	struct hp_heap_v1 *hp0 =
	        (struct hp_heap_v1 *)((uint8_t *)base + t[HP_TAB_HEAPS].offset);
	memset(hp0, 0, sizeof(*hp0));
	memcpy(hp0->name, "libc.malloc", sizeof("libc.malloc"));
	hp0->interval = malloc_interval;
	hp0->flags = malloc_interval ? HP_HEAP_ENABLED : 0;
	atomic_store_explicit(&hp0->ready, 1, memory_order_relaxed);
	atomic_store_explicit(&h->heaps_used, 1, memory_order_release);
	return 0;
}

static bool table_ok(const struct hp_table_desc *t, uint64_t size,
                     uint32_t entry_size)
{
	if (t->entry_size != entry_size || t->offset % 64 != 0)
		return false;
	if (t->offset > size || t->capacity > (size - t->offset) / entry_size)
		return false;
	return true;
}

int region_bind(struct hp_region *r, void *base, uint64_t size)
{
	memset(r, 0, sizeof(*r));
	if (!base || size < sizeof(struct hp_header_v1))
		return -EINVAL;
	struct hp_header_v1 *h = base;
	if (h->magic != HP_MAGIC || h->version < HP_LAYOUT_MIN_VERSION ||
	    h->version > HP_LAYOUT_VERSION)
		return -EPROTO;
	bool v2 = h->version >= 2;
	if (h->header_size != (v2 ? HP_HEADER_V2_SIZE : sizeof(*h)))
		return -EPROTO;
	if (h->region_size != size || size < h->header_size)
		return -EINVAL;
	uint32_t esz[HP_TAB_COUNT] = {
	        [HP_TAB_STACK_INDEX] = sizeof(uint64_t),
	        [HP_TAB_STACKS] = sizeof(struct hp_stack_v1),
	        [HP_TAB_FRAMES] = sizeof(uint64_t),
	        [HP_TAB_LIVE_KEYS] = sizeof(uint64_t),
	        [HP_TAB_LIVE_VALUES] = v2 ? sizeof(struct hp_live_v2)
	                                  : sizeof(struct hp_live_v1),
	        [HP_TAB_MODULES] = sizeof(struct hp_module_v1),
	        [HP_TAB_STRINGS] = 1,
	        [HP_TAB_HEAPS] = sizeof(struct hp_heap_v1),
	        [HP_TAB_LIVE_FILL] = 1,
	};
	for (int i = 0; i <= HP_TAB_LIVE_FILL; i++)
		if (!table_ok(&h->tables[i], size, esz[i]))
			return -EINVAL;
	const struct hp_table_desc *t = h->tables;
	uint64_t icap = t[HP_TAB_STACK_INDEX].capacity;
	uint64_t lcap = t[HP_TAB_LIVE_KEYS].capacity;
	if (icap == 0 || (icap & (icap - 1)) || lcap < HP_LIVE_BUCKET ||
	    (lcap & (lcap - 1)) || t[HP_TAB_LIVE_VALUES].capacity != lcap ||
	    t[HP_TAB_LIVE_FILL].capacity != lcap / HP_LIVE_BUCKET ||
	    t[HP_TAB_STACKS].capacity == 0 || t[HP_TAB_HEAPS].capacity == 0 ||
	    h->max_frames == 0 || h->max_frames > HP_MAX_FRAMES ||
	    h->sampling_interval == 0)
		return -EINVAL;

	/* HEAP_SELECT: absent when the session takes the default heaps. */
	const struct hp_table_desc *hs = &t[HP_TAB_HEAP_SELECT];
	if (hs->capacity != 0 &&
	    (!table_ok(hs, size, sizeof(struct hp_heap_select_v1)) ||
	     hs->capacity > HP_MAX_HEAPS))
		return -EINVAL;

	/* STACK_MAX: absent in regions without peak tracking (and in v1
	 * headers that predate it: all zeros). */
	const struct hp_table_desc *sm = &t[HP_TAB_STACK_MAX];
	if (sm->capacity != 0 &&
	    (!table_ok(sm, size, sizeof(struct hp_stack_max_v1)) ||
	     sm->capacity != t[HP_TAB_STACKS].capacity))
		return -EINVAL;

	/* TRACE (v2): absent without --trace and in GROW regions. */
	const struct hp_table_desc *tt = &t[HP_TAB_TRACE];
	uint64_t tcap = v2 ? tt->capacity : 0;
	if (tcap != 0 && (!table_ok(tt, size, sizeof(struct hp_event_v2)) ||
	                  (tcap & (tcap - 1))))
		return -EINVAL;

	uint8_t *b = base;
	struct hp_header_ext_v2 *x =
	        v2 ? (struct hp_header_ext_v2 *)(b + sizeof(*h)) : NULL;
	/* LIVE_FILTER (v2): only in regions that sample. */
	const struct hp_table_desc *lf = &t[HP_TAB_LIVE_FILTER];
	uint64_t fcap = v2 ? lf->capacity : 0;
	if (fcap != 0 && (!table_ok(lf, size, 1) || fcap != lcap))
		return -EINVAL;
	uint32_t tmode = x ? x->trace_mode : HP_TRACE_OFF;
	if (tcap != 0 && (tmode == HP_TRACE_OFF || tmode > HP_TRACE_LOG))
		return -EINVAL;
	r->base = b;
	r->size = size;
	r->hdr = h;
	r->version = h->version;
	r->ext = x;
	if (tcap) {
		r->trace = (struct hp_event_v2 *)(b + tt->offset);
		r->trace_cap = tcap;
		r->trace_mode = tmode;
	}
	r->stack_index = (_Atomic uint64_t *)(b + t[HP_TAB_STACK_INDEX].offset);
	r->stack_index_cap = icap;
	r->stacks = (struct hp_stack_v1 *)(b + t[HP_TAB_STACKS].offset);
	r->stacks_cap = t[HP_TAB_STACKS].capacity;
	r->frames = (uint64_t *)(b + t[HP_TAB_FRAMES].offset);
	r->frames_cap = t[HP_TAB_FRAMES].capacity;
	r->live_keys = (_Atomic uint64_t *)(b + t[HP_TAB_LIVE_KEYS].offset);
	if (v2)
		r->live_values =
		        (struct hp_live_v2 *)(b + t[HP_TAB_LIVE_VALUES].offset);
	else
		r->live_v1 =
		        (const struct hp_live_v1 *)(b + t[HP_TAB_LIVE_VALUES]
		                                                .offset);
	r->live_cap = lcap;
	r->live_level0 = lcap;
	r->live_levels = 1;
	if (x && x->live_levels) {
		uint64_t l0 = x->live_level0;
		if (x->live_levels > 40 || l0 < HP_LIVE_BUCKET ||
		    (l0 & (l0 - 1)) || (l0 << (x->live_levels - 1)) != lcap)
			return -EINVAL;
		r->live_level0 = l0;
		r->live_levels = x->live_levels;
	}
	r->live_usable = r->live_levels;
	if (x && x->live_limit && x->live_limit < r->live_levels)
		r->live_usable = x->live_limit;
	if (x) {
		r->live_open = &x->live_open;
		r->live_ready = &x->live_ready;
		r->live_first = &x->live_first;
	}
	r->live_fill = (_Atomic uint8_t *)(b + t[HP_TAB_LIVE_FILL].offset);
	r->use_fill = h->sampling_interval > 1;
	if (fcap && r->use_fill) {
		r->live_filter = (_Atomic uint8_t *)(b + lf->offset);
		r->live_filter_mask = fcap - 1;
	}
	r->modules = (struct hp_module_v1 *)(b + t[HP_TAB_MODULES].offset);
	r->modules_cap = t[HP_TAB_MODULES].capacity;
	r->strings = (char *)(b + t[HP_TAB_STRINGS].offset);
	r->strings_cap = t[HP_TAB_STRINGS].capacity;
	r->heaps = (struct hp_heap_v1 *)(b + t[HP_TAB_HEAPS].offset);
	r->heaps_cap = t[HP_TAB_HEAPS].capacity;
	if (sm->capacity)
		r->stack_max = (struct hp_stack_max_v1 *)(b + sm->offset);
	if (hs->capacity) {
		r->heap_select =
		        (const struct hp_heap_select_v1 *)(b + hs->offset);
		r->heap_select_cap = hs->capacity;
	}
	return 0;
}

/* ---- stack table ---------------------------------------------------- */

/*
 * The fold of the frames (region.h), then the heap, the length and one
 * full mix: this runs on every recorded allocation, and a chain of full
 * mixes per frame cost about 12 cycles a frame.  The index compares the
 * frames of a candidate anyway, so the hash only needs to spread distinct
 * stacks, which the final mix does.
 */
static uint64_t stack_hash(uint32_t heap_id, uint64_t fold, uint32_t n)
{
	return hp_mix64(fold ^ ((uint64_t)heap_id << 32) ^ n) | 1; /* never 0 */
}

/*
 * Whether record id holds this stack.  Told by the record alone: its
 * 64-bit hash, length, heap and leaf pc, not by its frames, which are a
 * third cache miss (at -i 1 the frames compare was a tenth of the
 * program's time).  Two different stacks of one heap and length with the
 * same leaf would have to agree on all 64 bits of the hash.
 */
static bool stack_equal(const struct hp_region *r, uint64_t id,
                        uint32_t heap_id, uint64_t hash, const uint64_t *pcs,
                        uint32_t n)
{
	const struct hp_stack_v1 *s = &r->stacks[id];
	if (!atomic_load_explicit(&s->ready, memory_order_acquire))
		return false;
	return s->hash == hash && s->heap_id == heap_id && s->nframes == n &&
	       (n == 0 || s->leaf_pc == pcs[0]);
}

/* Reserves and fills a record; returns its id or 0 when a table is full. */
static uint64_t stack_new(struct hp_region *r, uint64_t hash, uint32_t heap_id,
                          const uint64_t *pcs, uint32_t n, uint32_t flags)
{
	struct hp_header_v1 *h = r->hdr;
	uint64_t id = atomic_fetch_add_explicit(&h->stacks_used, 1,
	                                        memory_order_relaxed);
	if (id >= r->stacks_cap) {
		atomic_store_explicit(&h->stacks_used, r->stacks_cap,
		                      memory_order_relaxed);
		return 0;
	}
	uint64_t off = atomic_fetch_add_explicit(&h->frames_used, n,
	                                         memory_order_relaxed);
	if (off > r->frames_cap || n > r->frames_cap - off) {
		/* Frames full: leave the record unready, it is never used. */
		atomic_store_explicit(&h->frames_used, r->frames_cap,
		                      memory_order_relaxed);
		return 0;
	}
	memcpy(&r->frames[off], pcs, n * sizeof(*pcs));
	struct hp_stack_v1 *s = &r->stacks[id];
	s->heap_id = heap_id;
	s->nframes = n;
	s->flags = flags;
	s->frames_off = off;
	s->hash = hash;
	s->leaf_pc = n ? pcs[0] : 0;
	atomic_store_explicit(&s->ready, 1, memory_order_release);
	return id;
}

#define STACK_MAX_PROBE 64u
/* The index's first STACK_NEAR_SLOTS slots (256 KiB) are probed first, in
 * a window of STACK_NEAR_PROBE: most programs' stacks fit there, and a
 * lookup then touches a table that stays in the cache and the TLB instead
 * of one slot of a sparse table of many megabytes (at -i 1, 16 MiB: every
 * lookup was a TLB and a cache miss).  A stack whose window is full goes
 * to the rest of the index.  Slots are never emptied, so a lookup that
 * takes the same path as the insert finds it. */
#define STACK_NEAR_SLOTS 32768u
#define STACK_NEAR_PROBE 16u

/* Probes `probes` slots of the index part [first, first + size) from
 * first + start, wrapping within the part. */
static uint32_t index_probe(struct hp_region *r, uint32_t heap_id,
                            const uint64_t *pcs, uint32_t n, uint32_t flags,
                            uint64_t hash, uint64_t first, uint64_t size,
                            uint64_t start, uint32_t probes, uint64_t *mine,
                            bool *is_new, bool *full)
{
	uint64_t tag = hash >> 32;
	uint64_t i = start;
	for (uint32_t probe = 0; probe < probes; probe++, i++) {
		if (i >= size)
			i -= size;
		_Atomic uint64_t *slot = &r->stack_index[first + i];
		uint64_t v = atomic_load_explicit(slot, memory_order_acquire);
		while (v == 0) {
			if (!*mine) {
				*mine = stack_new(r, hash, heap_id, pcs, n,
				                  flags);
				if (!*mine) {
					*full = true;
					return 0;
				}
			}
			uint64_t want = (tag << 32) | (*mine + 1);
			if (atomic_compare_exchange_strong_explicit(
			            slot, &v, want, memory_order_acq_rel,
			            memory_order_acquire)) {
				*is_new = true;
				return (uint32_t)*mine;
			}
			/* Lost the race: v now holds the winner; check it. */
		}
		uint64_t id = (v & 0xffffffffu) - 1;
		if ((v >> 32) == tag && id < r->stacks_cap &&
		    stack_equal(r, id, heap_id, hash, pcs, n))
			return (uint32_t)id;
	}
	return 0;
}

uint32_t stacktab_intern(struct hp_region *r, uint32_t heap_id,
                         const uint64_t *pcs, uint32_t n, uint32_t flags,
                         bool *is_new)
{
	return stacktab_intern_folded(r, heap_id, pcs, n,
	                              hp_stack_fold_all(pcs, n), flags, is_new);
}

uint32_t stacktab_intern_folded(struct hp_region *r, uint32_t heap_id,
                                const uint64_t *pcs, uint32_t n, uint64_t fold,
                                uint32_t flags, bool *is_new)
{
	uint64_t hash = stack_hash(heap_id, fold, n);
	uint64_t cap = r->stack_index_cap;
	uint64_t mine = 0; /* record we made, if any */
	bool full = false;
	*is_new = false;
	if (cap < 4 * STACK_NEAR_SLOTS)
		return index_probe(r, heap_id, pcs, n, flags, hash, 0, cap,
		                   hash & (cap - 1), STACK_MAX_PROBE, &mine,
		                   is_new, &full);
	/* The near part is probed by other bits of the hash than the far
	 * part's; a record made in one part stays in it (its hash is the
	 * one that part compares). */
	uint64_t nh = hash >> 17 | hash << 47;
	uint32_t id = index_probe(r, heap_id, pcs, n, flags, nh, 0,
	                          STACK_NEAR_SLOTS, nh & (STACK_NEAR_SLOTS - 1),
	                          STACK_NEAR_PROBE, &mine, is_new, &full);
	if (id || full)
		return id;
	if (mine)
		return 0; /* made for the near part, lost every race there */
	/* The far part: the rest of the index, entered at a point spread
	 * over it by one multiply (no power of two to mask by).  Probe
	 * limit reached: the index is too full; charge overflow.  A record
	 * we made stays unreferenced and has zero counters. */
	uint64_t far = cap - STACK_NEAR_SLOTS;
	return index_probe(r, heap_id, pcs, n, flags, hash, STACK_NEAR_SLOTS,
	                   far, ((hash >> 32) * far) >> 32, STACK_MAX_PROBE,
	                   &mine, is_new, &full);
}

/* ---- the hot parts, faulted in at once ------------------------------ */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Populates [p, p + len) of the mapping, whole pages around it. */
static void populate(const struct hp_region *r, const void *p, uint64_t len,
                     uint64_t page)
{
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)(page - 1);
	uintptr_t end =
	        ((uintptr_t)p + len + page - 1) & ~(uintptr_t)(page - 1);
	uintptr_t lim = (uintptr_t)r->base + r->size;
	if (end > lim)
		end = lim;
	if (end > start)
		(void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
}

void region_populate_hot(const struct hp_region *r)
{
	/* Maps the pages a hook touches first.  The collector allocated
	 * them (collector_prepare), so this only fills the program's page
	 * tables; from an older collector it allocates them as before. */
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t page = ps > 0 ? (uint64_t)ps : 4096;
	populate(r, r->hdr, sizeof(*r->hdr), page);
	if (r->ext)
		populate(r, r->ext, sizeof(*r->ext), page);
	uint64_t near_index = r->stack_index_cap < 4 * STACK_NEAR_SLOTS
	                              ? r->stack_index_cap
	                              : STACK_NEAR_SLOTS;
	populate(r, r->stack_index, near_index * sizeof(uint64_t), page);
	uint64_t ns = r->stacks_cap < 1024 ? r->stacks_cap : 1024;
	populate(r, r->stacks, ns * sizeof(*r->stacks), page);
	uint64_t nf = r->frames_cap < 8192 ? r->frames_cap : 8192;
	populate(r, r->frames, nf * sizeof(uint64_t), page);
	if (!r->live_values || r->live_levels < 2 || !r->use_fill)
		return; /* one level, or interval 1 (level 0 is 7 MiB: clearing
		         * it at attach would delay the program's start) */
	uint64_t n0 = r->live_level0;
	populate(r, r->live_keys, n0 * sizeof(uint64_t), page);
	populate(r, r->live_values, n0 * sizeof(*r->live_values), page);
	populate(r, r->live_fill, n0 / HP_LIVE_BUCKET, page);
	if (r->live_filter)
		populate(r, r->live_filter, r->live_filter_mask + 1, page);
}

/* ---- live table ----------------------------------------------------- */

/*
 * Levels.  The table is a series of levels (live_levels, live_level0),
 * each twice the size of all before it, so that its memory follows what
 * it holds: new blocks go to the open level (live_open) only; when an
 * insert finds every bucket it may use there full, the client opens the
 * next level (one compare-and-swap) and never goes back.  A free looks in
 * the open level first and then in the older ones, down to level 0: most
 * frees are of recent blocks, and an older level only loses blocks.  The
 * collector allocates a level's pages (fallocate on the memfd, charged to
 * its own memory cgroup) when the level before it is 60% full
 * (collector_tend), ahead of the client.
 *
 * Buckets of a key in a level: when sampling, two hashed ones (two
 * choices balance the load), the emptier first.  At interval 1 every
 * block is in the table, so the first bucket keeps the heap's locality:
 * the 4 KiB page of the address picks a group of 32 buckets (hashed) and
 * the address's 128-byte line in the page picks one of them, so blocks
 * allocated one after the other share cache lines and pages of the table;
 * three hashed buckets take what a dense group cannot, from the last slot
 * down.  A level is full for an insert when all its buckets for the key
 * are: at interval 1 that is with the level about 95% full.
 */
#define HP_LIVE_CHOICES_EXACT 4
/* At interval 1 the first bucket takes keys in its first HP_LIVE_LOCAL
 * slots only, so that the hashed buckets, filled from the last slot down,
 * have room of their own in buckets a dense run of the heap filled. */
#define HP_LIVE_LOCAL (HP_LIVE_BUCKET - 2)
static inline int live_choices(const struct hp_region *r)
{
	return r->use_fill ? 2 : HP_LIVE_CHOICES_EXACT;
}
static inline uint64_t live_bucket(const struct hp_region *r, uint64_t addr,
                                   uint32_t level, int which)
{
	uint64_t nb = livetab_level_slots(r, level) / HP_LIVE_BUCKET;
	int bits = __builtin_ctzll(nb | (1ull << 63));
	uint64_t b;
	if (which == 0 && !r->use_fill) {
		/* The heap's own order: 128 bytes of address space a bucket,
		 * consecutive lines of the heap in consecutive buckets,
		 * wrapping around the level, with an offset per 64 MiB window
		 * (arenas at aligned addresses would share buckets). */
		b = ((addr >> 7) +
		     (((addr >> 26) * 0x9e3779b97f4a7c15ull) >> 40)) &
		    (nb - 1);
	} else {
		/* The high bits of a full mix: the choices of one key, and
		 * of keys next to each other, are independent. */
		uint64_t h = hp_mix64((addr >> 4) +
		                      (uint64_t)which * 0x9e3779b97f4a7c15ull);
		b = bits ? h >> (64 - bits) : 0;
	}
	return livetab_level_start(r, level) + b * HP_LIVE_BUCKET;
}

static void filter_add(const struct hp_region *r, uint64_t addr, int d)
{
	_Atomic uint8_t *c = livetab_filter_cell(r, addr);
	uint8_t v = atomic_load_explicit(c, memory_order_relaxed);
	do {
		if (v == 255 || (d < 0 && v == 0))
			return;
	} while (!atomic_compare_exchange_weak_explicit(c, &v, (uint8_t)(v + d),
	                                                memory_order_acq_rel,
	                                                memory_order_relaxed));
}

/*
 * The fields of a v2 entry, as relaxed atomic accesses: the entry is a
 * seqlock (struct hp_live_v2), so a reader may copy it while its owner
 * writes; it throws such a copy away.
 */
static void live_store(struct hp_live_v2 *e, const struct hp_live_v2 *v)
{
	__atomic_store_n(&e->stack_id, v->stack_id, __ATOMIC_RELAXED);
	__atomic_store_n(&e->heap_id, v->heap_id, __ATOMIC_RELAXED);
	__atomic_store_n(&e->tid, v->tid, __ATOMIC_RELAXED);
	__atomic_store_n(&e->size, v->size, __ATOMIC_RELAXED);
	__atomic_store_n(&e->charged, v->charged, __ATOMIC_RELAXED);
	__atomic_store_n(&e->objects_fp, v->objects_fp, __ATOMIC_RELAXED);
	__atomic_store_n(&e->ts_ns, v->ts_ns, __ATOMIC_RELAXED);
}

static void live_load(const struct hp_live_v2 *e, struct hp_live_v2 *out)
{
	out->stack_id = __atomic_load_n(&e->stack_id, __ATOMIC_RELAXED);
	out->heap_id = __atomic_load_n(&e->heap_id, __ATOMIC_RELAXED);
	out->tid = __atomic_load_n(&e->tid, __ATOMIC_RELAXED);
	out->size = __atomic_load_n(&e->size, __ATOMIC_RELAXED);
	out->charged = __atomic_load_n(&e->charged, __ATOMIC_RELAXED);
	out->objects_fp = __atomic_load_n(&e->objects_fp, __ATOMIC_RELAXED);
	out->ts_ns = __atomic_load_n(&e->ts_ns, __ATOMIC_RELAXED);
}

/* The slot's owner (its key is HP_LIVE_BUSY) writes the entry. */
static void live_write(struct hp_live_v2 *e, const struct hp_live_v2 *v)
{
	uint32_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
	atomic_store_explicit(&e->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	live_store(e, v);
	atomic_store_explicit(&e->seq, seq + 2, memory_order_release);
}

/* Takes one of the first `slots` free slots of bucket b (from its last
 * slot down with from_end): its index, or -1. */
static int64_t bucket_take(struct hp_region *r, uint64_t b, uint32_t slots,
                           bool from_end)
{
	for (uint32_t j = 0; j < slots; j++) {
		uint32_t i = from_end ? HP_LIVE_BUCKET - 1 - j : j;
		_Atomic uint64_t *k = &r->live_keys[b + i];
		uint64_t cur = atomic_load_explicit(k, memory_order_relaxed);
		if (cur != HP_LIVE_EMPTY)
			continue;
		if (atomic_compare_exchange_strong_explicit(
		            k, &cur, HP_LIVE_BUSY, memory_order_acquire,
		            memory_order_relaxed))
			return (int64_t)(b + i);
	}
	return -1;
}

/* Inserts into level `level`: 0, or -ENOSPC when every bucket of the key
 * there is full. */
static int level_insert(struct hp_region *r, uint32_t level, uint64_t addr,
                        const struct hp_live_v2 *v, uint32_t *pressure,
                        _Atomic uint64_t *q, int64_t *slot)
{
	/* With bucket fill (when sampling) the emptier bucket is tried
	 * first: two choices balance the load far better than first-fit.
	 * The second bucket's fill is only read when the first is half full
	 * or more: below that the emptier of the two is below half full
	 * too, so taking the first changes no pressure the adaptive sampler
	 * sees, and the insert touches one bucket's lines.  At interval 1
	 * there is no fill to compare; first-fit. */
	int order = 0;
	if (r->use_fill) {
		uint8_t f0 = atomic_load_explicit(
		        &r->live_fill[live_bucket(r, addr, level, 0) /
		                      HP_LIVE_BUCKET],
		        memory_order_relaxed);
		if (f0 >= HP_LIVE_BUCKET / 2 &&
		    atomic_load_explicit(
		            &r->live_fill[live_bucket(r, addr, level, 1) /
		                          HP_LIVE_BUCKET],
		            memory_order_relaxed) < f0)
			order = 1;
	}
	int choices = live_choices(r);
	for (int which = 0; which < choices; which++) {
		uint64_t b = live_bucket(r, addr, level, which ^ order);
		bool local = !r->use_fill;
		int64_t i = bucket_take(r, b,
		                        local && which == 0 ? HP_LIVE_LOCAL
		                                            : HP_LIVE_BUCKET,
		                        local && which > 0);
		if (i < 0)
			continue;
		if (q) {
			/* The log's collector: the slot is named before it
			 * is written, so that a client taking the table
			 * over leaves it alone (or refuses it: TAKEN). */
			uint64_t none = 0;
			if (!atomic_compare_exchange_strong_explicit(
			            q, &none,
			            ((uint64_t)i << 3) | HP_LOGQ_ALLOC,
			            memory_order_seq_cst,
			            memory_order_seq_cst)) {
				atomic_store_explicit(&r->live_keys[i],
				                      HP_LIVE_EMPTY,
				                      memory_order_release);
				return -EAGAIN;
			}
			*slot = i;
		}
		uint32_t fill = 0;
		if (r->use_fill)
			fill = atomic_fetch_add_explicit(
			               &r->live_fill[b / HP_LIVE_BUCKET], 1,
			               memory_order_relaxed) +
			       1u;
		if (pressure)
			*pressure = r->use_fill ? fill + (which ? HP_LIVE_BUCKET
			                                        : 0)
			                        : 0;
		live_write(&r->live_values[i], v);
		if (r->live_filter)
			filter_add(r, addr, 1);
		atomic_store_explicit(&r->live_keys[i], addr,
		                      memory_order_release);
		return 0;
	}
	return -ENOSPC;
}

/* Makes level j one a free looks in, before a block is put there. */
static void raise_open(struct hp_region *r, uint32_t j)
{
	uint32_t cur = atomic_load_explicit(r->live_open, memory_order_relaxed);
	while (cur < j) {
		if (atomic_compare_exchange_weak_explicit(
		            r->live_open, &cur, j, memory_order_release,
		            memory_order_relaxed)) {
			if (atomic_load_explicit(r->live_ready,
			                         memory_order_relaxed) <= j)
				region_count(r, HP_CTR_LIVE_UNPREPARED, 1);
			return;
		}
	}
}

static int insert_q(struct hp_region *r, uint64_t addr,
                    const struct hp_live_v2 *v, uint32_t *pressure,
                    _Atomic uint64_t *q, int64_t *slot)
{
	/* From the level the collector says to fill (live_first) up; a
	 * level past the open one is opened before a block goes there. */
	uint32_t open = livetab_open_level(r);
	for (uint32_t level = livetab_first_level(r); level < r->live_usable;
	     level++) {
		if (level > open) {
			raise_open(r, level);
			open = level;
		}
		int rc = level_insert(r, level, addr, v, pressure, q, slot);
		if (rc != -ENOSPC)
			return rc;
	}
	if (pressure)
		*pressure = 2 * HP_LIVE_BUCKET;
	return -ENOSPC;
}

int livetab_insert_p(struct hp_region *r, uint64_t addr,
                     const struct hp_live_v2 *v, uint32_t *pressure)
{
	return insert_q(r, addr, v, pressure, NULL, NULL);
}

void livetab_prefetch(const struct hp_region *r, uint64_t addr)
{
	/* The first bucket of the open level only: an insert reads the
	 * second only when the first is half full, a free most often finds
	 * its block there. */
	uint64_t b = live_bucket(r, addr, livetab_first_level(r), 0);
	__builtin_prefetch(&r->live_keys[b], 1, 3);
	/* Every line of the bucket's values: which slot the insert takes
	 * depends on the keys, not read yet.  A level's lines are cold the
	 * first time (the collector allocated its pages, on its own core). */
	const char *v = (const char *)&r->live_values[b];
	for (size_t o = 0; o < HP_LIVE_BUCKET * sizeof(*r->live_values);
	     o += 64)
		__builtin_prefetch(v + o, 1, 3);
	if (r->use_fill)
		__builtin_prefetch(&r->live_fill[b / HP_LIVE_BUCKET], 1, 3);
	if (r->live_filter)
		__builtin_prefetch(livetab_filter_cell(r, addr), 1, 3);
}

int livetab_insert(struct hp_region *r, uint64_t addr,
                   const struct hp_live_v2 *v)
{
	return livetab_insert_p(r, addr, v, NULL);
}

uint32_t livetab_load_pct(const struct hp_region *r, uint64_t addr)
{
	if (!r->use_fill)
		return 0;
	/* Before the last level there is room to grow into. */
	uint32_t level = livetab_open_level(r);
	if (level + 1 < r->live_usable)
		return 0;
	uint64_t nb = livetab_level_slots(r, level) / HP_LIVE_BUCKET;
	uint64_t n = nb < 64 ? nb : 64;
	if (!n)
		return 0; /* a table smaller than one bucket: nothing to load */
	uint64_t start = livetab_level_start(r, level) / HP_LIVE_BUCKET;
	uint64_t first =
	        ((live_bucket(r, addr, level, 1) / HP_LIVE_BUCKET - start) &
	         ~63ull);
	if (first + n > nb)
		first = nb - n;
	uint64_t sum = 0;
	for (uint64_t i = 0; i < n; i++)
		sum += atomic_load_explicit(&r->live_fill[start + first + i],
		                            memory_order_relaxed);
	return (uint32_t)(sum * 100 / (n * HP_LIVE_BUCKET));
}

/* addr's entry in bucket b taken out into *out: 1; 0 not there; -1 there
 * but another free took it first. */
static int bucket_remove(struct hp_region *r, uint64_t b, uint64_t addr,
                         struct hp_live_v2 *out, uint64_t skip,
                         _Atomic uint64_t *q)
{
	if (r->use_fill &&
	    atomic_load_explicit(&r->live_fill[b / HP_LIVE_BUCKET],
	                         memory_order_relaxed) == 0)
		return 0;
	for (uint32_t i = 0; i < HP_LIVE_BUCKET; i++) {
		_Atomic uint64_t *k = &r->live_keys[b + i];
		if (atomic_load_explicit(k, memory_order_relaxed) != addr ||
		    b + i == skip)
			continue;
		if (q) {
			/* The log's collector names the slot first (see
			 * level_insert); TAKEN: the client took over. */
			uint64_t none = 0;
			if (!atomic_compare_exchange_strong_explicit(
			            q, &none, ((b + i) << 3) | HP_LOGQ_FREE,
			            memory_order_seq_cst, memory_order_seq_cst))
				return -2;
		}
		uint64_t want = addr;
		atomic_thread_fence(memory_order_acquire);
		live_load(&r->live_values[b + i], out);
		/* CAS, not store: two racing frees of one pointer (a program
		 * bug) must not both take it back. */
		/* With log_q named, the slot stays busy until the name is
		 * gone: a client that passed over it must not fill it and
		 * then pass over its own entry. */
		if (!atomic_compare_exchange_strong_explicit(
		            k, &want, q ? HP_LIVE_BUSY : HP_LIVE_EMPTY,
		            memory_order_acq_rel, memory_order_relaxed)) {
			if (q)
				atomic_store_explicit(q, 0,
				                      memory_order_seq_cst);
			return -1;
		}
		if (q) {
			atomic_store_explicit(q, 0, memory_order_seq_cst);
			atomic_store_explicit(k, HP_LIVE_EMPTY,
			                      memory_order_release);
		}
		if (r->use_fill)
			atomic_fetch_sub_explicit(
			        &r->live_fill[b / HP_LIVE_BUCKET], 1,
			        memory_order_relaxed);
		if (r->live_filter)
			filter_add(r, addr, -1);
		return 1;
	}
	return 0;
}

/* The slot a client of a log-kept table must not look at: the one the
 * collector named for the event it was stopped in (HP_LOGQ_*); else
 * UINT64_MAX. */
static uint64_t logq_skip(const struct hp_region *r)
{
	if (r->trace_mode != HP_TRACE_LOG || !r->ext)
		return UINT64_MAX;
	uint64_t v = atomic_load_explicit(&r->ext->log_q, memory_order_seq_cst);
	uint64_t kind = v & 7;
	return kind >= HP_LOGQ_ALLOC && kind <= HP_LOGQ_CANCELLED ? v >> 3
	                                                          : UINT64_MAX;
}

static int remove_q(struct hp_region *r, uint64_t addr, struct hp_live_v2 *out,
                    _Atomic uint64_t *q)
{
	if (!livetab_maybe_live(r, addr))
		return 0;
	uint64_t skip = q ? UINT64_MAX : logq_skip(r);
	int choices = live_choices(r);
	/* The block was inserted before this free, in a level up to the
	 * open one: the level inserts go to first (most frees are of recent
	 * blocks), then the ones above it, then the older ones; in each,
	 * the key's first bucket before the others (nearly every key is in
	 * its first bucket), so that a block of an older level costs one
	 * bucket per newer level, not one per bucket it could be in. */
	uint32_t open = livetab_open_level(r), first = livetab_first_level(r);
	if (first > open)
		first = open;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t n = 0; n <= open; n++) {
			uint32_t level =
			        first + n <= open ? first + n : open - n;
			int from = pass ? 1 : 0, to = pass ? choices : 1;
			for (int w = from; w < to; w++) {
				int rc = bucket_remove(
				        r, live_bucket(r, addr, level, w), addr,
				        out, skip, q);
				if (rc)
					return rc;
			}
		}
	}
	return 0;
}

bool livetab_remove(struct hp_region *r, uint64_t addr, struct hp_live_v2 *out)
{
	return remove_q(r, addr, out, NULL) > 0;
}

/* livetab_advance: keys read to estimate a level's fill; the fill at
 * which inserts move to the next level, and the one at which the next
 * level is prepared. */
#define LIVE_TEND_SAMPLES   1024
#define LIVE_FIRST_FULL_PCT HP_LIVE_FIRST_FULL_PCT
#define LIVE_PREPARE_PCT    60

uint32_t livetab_level_load_pct(const struct hp_region *r, uint32_t j,
                                uint32_t samples)
{
	if (j >= r->live_levels || !samples)
		return 0;
	/* Whole buckets (one line of keys each) spread over the level: a
	 * reader's first look at a page costs a fault, and the collector
	 * looks every few milliseconds, so the fewer pages the better. */
	uint64_t nb = livetab_level_slots(r, j) / HP_LIVE_BUCKET;
	uint64_t first = livetab_level_start(r, j) / HP_LIVE_BUCKET;
	uint64_t want = (samples + HP_LIVE_BUCKET - 1) / HP_LIVE_BUCKET;
	if (want > nb)
		want = nb;
	if (!want)
		return 0;
	uint64_t step = nb / want, used = 0;
	for (uint64_t i = 0; i < want; i++) {
		const _Atomic uint64_t *k =
		        &r->live_keys[(first + i * step) * HP_LIVE_BUCKET];
		for (uint32_t x = 0; x < HP_LIVE_BUCKET; x++)
			used += atomic_load_explicit(&k[x],
			                             memory_order_relaxed) !=
			        HP_LIVE_EMPTY;
	}
	return (uint32_t)(used * 100 / (want * HP_LIVE_BUCKET));
}

uint32_t livetab_advance(struct hp_region *r, uint32_t *load_pct)
{
	*load_pct = 0;
	if (r->live_levels < 2 || !r->live_first)
		return 1;
	uint32_t open = livetab_open_level(r), first = livetab_first_level(r);
	uint32_t load = livetab_level_load_pct(r, first, LIVE_TEND_SAMPLES);
	if (load >= LIVE_FIRST_FULL_PCT && first + 1 < r->live_usable) {
		first++;
		atomic_store_explicit(r->live_first, first,
		                      memory_order_relaxed);
		load = livetab_level_load_pct(r, first, LIVE_TEND_SAMPLES);
	}
	/* Every level opened, the one inserts fill, and the one after it
	 * once that is LIVE_PREPARE_PCT full. */
	uint32_t want = (open > first ? open : first) + 1;
	if (load >= LIVE_PREPARE_PCT && want < first + 2)
		want = first + 2;
	*load_pct = load;
	return want < r->live_usable ? want : r->live_usable;
}

uint32_t livetab_limit(struct hp_region *r, uint32_t levels)
{
	if (!r->ext || r->live_levels < 2)
		return r->live_levels;
	r->ext->live_limit = levels < r->live_levels ? levels : 0;
	r->live_usable = r->ext->live_limit ? levels : r->live_levels;
	return r->live_usable;
}

uint64_t livetab_levels_bytes(const struct hp_region *r, uint32_t j)
{
	if (j > r->live_levels)
		j = r->live_levels;
	uint64_t slots = j ? livetab_level_start(r, j - 1) +
	                                 livetab_level_slots(r, j - 1)
	                   : 0;
	uint64_t per =
	        sizeof(uint64_t) + (r->live_values ? sizeof(*r->live_values)
	                                           : sizeof(struct hp_live_v1));
	return slots * per + (r->use_fill ? slots / HP_LIVE_BUCKET : 0);
}

int livetab_level_ranges(const struct hp_region *r, uint32_t j,
                         struct hp_range out[3])
{
	if (j >= r->live_levels || !r->live_values)
		return 0;
	uint64_t s = livetab_level_start(r, j), n = livetab_level_slots(r, j);
	out[0] = (struct hp_range){
	        (uint64_t)((uint8_t *)&r->live_keys[s] - r->base),
	        n * sizeof(uint64_t)};
	out[1] = (struct hp_range){
	        (uint64_t)((uint8_t *)&r->live_values[s] - r->base),
	        n * sizeof(*r->live_values)};
	if (!r->use_fill)
		return 2;
	out[2] = (struct hp_range){
	        (uint64_t)((uint8_t *)&r->live_fill[s / HP_LIVE_BUCKET] -
	                   r->base),
	        n / HP_LIVE_BUCKET};
	return 3;
}

/* A seqlock read gives up after this many torn copies in a row. */
#define READ_RETRIES 64

enum hp_live_read livetab_read(const struct hp_region *r, uint64_t i,
                               uint64_t *key, struct hp_live_v2 *out)
{
	if (i >= r->live_cap)
		return HP_LIVE_READ_EMPTY;
	_Atomic uint64_t *k = &r->live_keys[i];
	memset(out, 0, sizeof(*out));
	if (!r->live_values) {
		/* v1: the key is published after the value and a removal
		 * only clears the key; a copy is whole when the key is the
		 * same before and after it. */
		for (int n = 0; n < READ_RETRIES; n++) {
			uint64_t k1 =
			        atomic_load_explicit(k, memory_order_acquire);
			if (k1 == HP_LIVE_EMPTY)
				return HP_LIVE_READ_EMPTY;
			if (k1 == HP_LIVE_BUSY)
				continue;
			const struct hp_live_v1 *e = &r->live_v1[i];
			out->stack_id =
			        __atomic_load_n(&e->stack_id, __ATOMIC_RELAXED);
			out->heap_id =
			        __atomic_load_n(&e->heap_id, __ATOMIC_RELAXED);
			out->size = __atomic_load_n(&e->size, __ATOMIC_RELAXED);
			out->charged =
			        __atomic_load_n(&e->charged, __ATOMIC_RELAXED);
			out->objects_fp = __atomic_load_n(&e->objects_fp,
			                                  __ATOMIC_RELAXED);
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load_explicit(k, memory_order_relaxed) ==
			    k1) {
				*key = k1;
				return HP_LIVE_READ_OK;
			}
		}
		return HP_LIVE_READ_BUSY;
	}
	const struct hp_live_v2 *e = &r->live_values[i];
	for (int n = 0; n < READ_RETRIES; n++) {
		uint64_t k1 = atomic_load_explicit(k, memory_order_acquire);
		if (k1 == HP_LIVE_EMPTY)
			return HP_LIVE_READ_EMPTY;
		if (k1 == HP_LIVE_BUSY)
			continue;
		uint32_t s1 =
		        atomic_load_explicit(&e->seq, memory_order_acquire);
		if (s1 & 1u)
			continue;
		live_load(e, out);
		atomic_thread_fence(memory_order_acquire);
		uint32_t s2 =
		        atomic_load_explicit(&e->seq, memory_order_relaxed);
		uint64_t k2 = atomic_load_explicit(k, memory_order_relaxed);
		if (s1 == s2 && k1 == k2) {
			*key = k1;
			return HP_LIVE_READ_OK;
		}
	}
	return HP_LIVE_READ_BUSY;
}

/* ---- event trace (v2) ------------------------------------------------ */

static void event_store(struct hp_event_v2 *e, const struct hp_event_v2 *v)
{
	__atomic_store_n(&e->ts_ns, v->ts_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&e->addr, v->addr, __ATOMIC_RELAXED);
	__atomic_store_n(&e->size, v->size, __ATOMIC_RELAXED);
	__atomic_store_n(&e->charged, v->charged, __ATOMIC_RELAXED);
	__atomic_store_n(&e->alloc_ts_ns, v->alloc_ts_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&e->stack_id, v->stack_id, __ATOMIC_RELAXED);
	__atomic_store_n(&e->tid, v->tid, __ATOMIC_RELAXED);
	__atomic_store_n(&e->kind, v->kind, __ATOMIC_RELAXED);
	__atomic_store_n(&e->region, v->region, __ATOMIC_RELAXED);
	__atomic_store_n(&e->heap_id, v->heap_id, __ATOMIC_RELAXED);
}

static void event_load(const struct hp_event_v2 *e, struct hp_event_v2 *out)
{
	out->ts_ns = __atomic_load_n(&e->ts_ns, __ATOMIC_RELAXED);
	out->addr = __atomic_load_n(&e->addr, __ATOMIC_RELAXED);
	out->size = __atomic_load_n(&e->size, __ATOMIC_RELAXED);
	out->charged = __atomic_load_n(&e->charged, __ATOMIC_RELAXED);
	out->alloc_ts_ns = __atomic_load_n(&e->alloc_ts_ns, __ATOMIC_RELAXED);
	out->stack_id = __atomic_load_n(&e->stack_id, __ATOMIC_RELAXED);
	out->tid = __atomic_load_n(&e->tid, __ATOMIC_RELAXED);
	out->kind = __atomic_load_n(&e->kind, __ATOMIC_RELAXED);
	out->region = __atomic_load_n(&e->region, __ATOMIC_RELAXED);
	out->heap_id = __atomic_load_n(&e->heap_id, __ATOMIC_RELAXED);
	out->reserved = 0;
}

void trace_drop(struct hp_region *r, const struct hp_event_v2 *ev)
{
	if (!r->ext)
		return;
	bool alloc = ev->kind == HP_EV_ALLOC;
	_Atomic uint64_t *d = r->ext->trace_dropped;
	atomic_fetch_add_explicit(&d[alloc ? HP_TDROP_ALLOCS : HP_TDROP_FREES],
	                          1, memory_order_relaxed);
	atomic_fetch_add_explicit(
	        &d[alloc ? HP_TDROP_ALLOC_BYTES : HP_TDROP_FREE_BYTES],
	        ev->size, memory_order_relaxed);
}

static void event_publish(struct hp_event_v2 *e, const struct hp_event_v2 *v,
                          uint64_t pos)
{
	event_store(e, v);
	atomic_store_explicit(&e->seq, pos + 1, memory_order_release);
}

/* Streaming and the log: the next position, taken by CAS while head -
 * tail is under the capacity; false when there is no room.  seq_cst: the
 * log's writers load log_state after it. */
static bool head_take(struct hp_region *r, uint64_t *pos)
{
	struct hp_header_ext_v2 *x = r->ext;
	uint64_t p = atomic_load_explicit(&x->trace_head, memory_order_relaxed);
	for (;;) {
		uint64_t tail = atomic_load_explicit(&x->trace_tail,
		                                     memory_order_acquire);
		if (p - tail >= r->trace_cap)
			return false;
		if (atomic_compare_exchange_weak_explicit(
		            &x->trace_head, &p, p + 1, memory_order_seq_cst,
		            memory_order_relaxed)) {
			*pos = p;
			return true;
		}
	}
}

static struct hp_event_v2 *trace_reserve(struct hp_region *r, uint64_t *pos_out)
{
	uint64_t pos;
	if (!head_take(r, &pos))
		return NULL;
	/* The collector consumed position pos - capacity, which it does
	 * only once that event was whole: nobody else writes this slot
	 * now. */
	struct hp_event_v2 *e = &r->trace[pos & (r->trace_cap - 1)];
	atomic_store_explicit(&e->seq, HP_EVENT_BUSY, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	*pos_out = pos;
	return e;
}

int trace_put(struct hp_region *r, const struct hp_event_v2 *ev)
{
	if (!r->trace_cap)
		return -ENODEV;
	struct hp_header_ext_v2 *x = r->ext;
	uint64_t pos;
	struct hp_event_v2 *e;

	switch (r->trace_mode) {
	case HP_TRACE_STREAMING:
		e = trace_reserve(r, &pos);
		if (!e)
			return -EAGAIN;
		event_publish(e, ev, pos);
		return 0;
	case HP_TRACE_ONESHOT:
		pos = atomic_fetch_add_explicit(&x->trace_head, 1,
		                                memory_order_relaxed);
		if (pos >= r->trace_cap) {
			if (pos == r->trace_cap) {
				uint64_t now = hp_clock_ns(CLOCK_BOOTTIME);
				atomic_store_explicit(&x->trace_full_ts,
				                      now ? now : 1,
				                      memory_order_release);
			}
			trace_drop(r, ev);
			return -ENOSPC;
		}
		e = &r->trace[pos];
		atomic_store_explicit(&e->seq, HP_EVENT_BUSY,
		                      memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
		event_publish(e, ev, pos);
		return 0;
	case HP_TRACE_RING: {
		pos = atomic_fetch_add_explicit(&x->trace_head, 1,
		                                memory_order_relaxed);
		e = &r->trace[pos & (r->trace_cap - 1)];
		uint64_t s =
		        atomic_load_explicit(&e->seq, memory_order_relaxed);
		/* Held by another writer, or already holding a newer event
		 * (this writer was slower than a whole lap): drop ours. */
		if (s == HP_EVENT_BUSY || (s != 0 && s - 1 > pos) ||
		    !atomic_compare_exchange_strong_explicit(
		            &e->seq, &s, HP_EVENT_BUSY, memory_order_relaxed,
		            memory_order_relaxed)) {
			trace_drop(r, ev);
			return -EBUSY;
		}
		atomic_thread_fence(memory_order_release);
		event_publish(e, ev, pos);
		return 0;
	}
	default:
		return -ENODEV;
	}
}

static void discharge_later(const struct hp_region *r, struct livelog_acc *a,
                            uint32_t id, uint64_t bytes, uint64_t objs)
{
	if (id >= r->stacks_cap)
		return;
	if (id >= a->cap) {
		struct hp_stack_v1 *s = &r->stacks[id];
		atomic_fetch_add_explicit(&s->free_count, 1,
		                          memory_order_relaxed);
		atomic_fetch_add_explicit(&s->free_bytes, bytes,
		                          memory_order_relaxed);
		atomic_fetch_add_explicit(&s->free_objects_fp, objs,
		                          memory_order_relaxed);
		if (id >= a->want)
			a->want = (uint64_t)id + 1;
		return;
	}
	uint64_t *x = &a->d[3 * (uint64_t)id];
	if (x[0] == 0)
		a->touched[a->ntouched++] = id;
	x[0] += 1;
	x[1] += bytes;
	x[2] += objs;
}

int livelog_apply(struct hp_region *r, const struct hp_event_v2 *ev,
                  struct livelog_acc *a)
{
	_Atomic uint64_t *q = &r->ext->log_q;
	a->last = LIVELOG_NONE;
	if (ev->kind == HP_EV_ALLOC) {
		/* A stack id no client hands out: nothing was charged to
		 * it, nothing to track. */
		if (ev->stack_id >= r->stacks_cap)
			return 0;
		a->last_id = ev->stack_id;
		a->last_bytes = ev->charged;
		a->last_objs = ev->alloc_ts_ns; /* objects, in an alloc */
		struct hp_live_v2 v = livelog_entry(ev);
		int64_t slot = -1;
		int rc = ev->addr > HP_LIVE_BUSY
		                 ? insert_q(r, ev->addr, &v, NULL, q, &slot)
		                 : -EINVAL;
		if (rc == -EAGAIN)
			return -1;
		if (rc == 0) {
			uint64_t want = ((uint64_t)slot << 3) | HP_LOGQ_ALLOC;
			a->last = LIVELOG_IN;
			if (atomic_compare_exchange_strong_explicit(
			            q, &want, 0, memory_order_seq_cst,
			            memory_order_seq_cst))
				return 1;
			/* HP_LOGQ_CANCELLED: the client took the table over
			 * and the program freed the block meanwhile (the
			 * client discharged it); the entry comes out.  For
			 * the peak it was live (the client's free of it
			 * counts it out). */
			a->last = LIVELOG_IN_GONE;
			uint64_t k = ev->addr;
			bool mine = atomic_compare_exchange_strong_explicit(
			        &r->live_keys[slot], &k, HP_LIVE_BUSY,
			        memory_order_acq_rel, memory_order_relaxed);
			atomic_store_explicit(q, 0, memory_order_seq_cst);
			if (mine)
				atomic_store_explicit(&r->live_keys[slot],
				                      HP_LIVE_EMPTY,
				                      memory_order_release);
			return 0;
		}
		discharge_later(r, a, ev->stack_id, ev->charged,
		                ev->alloc_ts_ns);
		a->last = LIVELOG_IN_OUT;
		region_count(r, HP_CTR_LIVE_FULL, 1);
		region_count(r, HP_CTR_LIVE_FULL_BYTES, ev->charged);
		return 0;
	}
	if (ev->kind == HP_EV_FREE) {
		struct hp_live_v2 v;
		int rc = remove_q(r, ev->addr, &v, q);
		if (rc == -2)
			return -1;
		if (rc <= 0)
			return 0;
		discharge_later(r, a, v.stack_id, v.charged, v.objects_fp);
		if (v.stack_id < r->stacks_cap) {
			a->last = LIVELOG_OUT;
			a->last_id = v.stack_id;
			a->last_bytes = v.charged;
			a->last_objs = v.objects_fp;
		}
		return 1;
	}
	return 0;
}

struct hp_event_v2 *livelog_reserve(struct hp_region *r, uint64_t *pos,
                                    uint64_t *was, bool *gone)
{
	*gone = false;
	uint64_t p;
	if (!head_take(r, &p))
		return NULL;
	*pos = p;
	struct hp_event_v2 *e = &r->trace[p & (r->trace_cap - 1)];
	/* No busy mark (one locked instruction less): the slot's seq still
	 * holds what the last lap left, which no reader takes for position
	 * p, and the publish is a CAS from it, which fails if a client
	 * taking the table over gave up on p meanwhile. */
	*was = atomic_load_explicit(&e->seq, memory_order_acquire);
	if (*was == HP_LOG_GONE(p)) {
		/* Given up on already: the operation is ours to apply
		 * directly. */
		*gone = true;
		return NULL;
	}
	return e;
}

bool livelog_publish(struct hp_event_v2 *e, const struct hp_event_v2 *ev,
                     uint64_t pos, uint64_t was)
{
	event_store(e, ev);
	return atomic_compare_exchange_strong_explicit(&e->seq, &was, pos + 1,
	                                               memory_order_release,
	                                               memory_order_relaxed);
}

/* The event at pos, copied once whole; then the CAS that takes it. */
static int log_grab(const struct hp_region *r, uint64_t pos,
                    struct hp_event_v2 *out, uint64_t mark, bool abandon)
{
	struct hp_event_v2 *e = &r->trace[pos & (r->trace_cap - 1)];
	uint64_t s = atomic_load_explicit(&e->seq, memory_order_acquire);
	for (;;) {
		if (s == pos + 1) {
			event_load(e, out);
			out->seq = pos + 1;
			if (atomic_compare_exchange_strong_explicit(
			            &e->seq, &s, mark, memory_order_acq_rel,
			            memory_order_acquire))
				return HP_LOGGRAB_TAKEN;
			continue;
		}
		if (s == HP_LOG_CLAIMED(pos))
			return HP_LOGGRAB_COLLECTOR;
		if (s == HP_LOG_GONE(pos))
			return HP_LOGGRAB_CLIENT;
		/* Reserved, not whole yet (or not even marked busy). */
		if (!abandon)
			return HP_LOGGRAB_NOT_YET;
		if (atomic_compare_exchange_strong_explicit(
		            &e->seq, &s, HP_LOG_GONE(pos), memory_order_acq_rel,
		            memory_order_acquire))
			return HP_LOGGRAB_ABANDONED;
	}
}

void livelog_peek(const struct hp_region *r, uint64_t pos,
                  struct hp_event_v2 *out)
{
	event_load(&r->trace[pos & (r->trace_cap - 1)], out);
}

int livelog_take(const struct hp_region *r, uint64_t pos,
                 struct hp_event_v2 *out)
{
	return log_grab(r, pos, out, HP_LOG_CLAIMED(pos), false);
}

int livelog_steal(const struct hp_region *r, uint64_t pos,
                  struct hp_event_v2 *out, bool abandon)
{
	return log_grab(r, pos, out, HP_LOG_GONE(pos), abandon);
}

void livelog_flush(struct hp_region *r, struct livelog_acc *a)
{
	for (uint64_t i = 0; i < a->ntouched; i++) {
		uint32_t id = a->touched[i];
		uint64_t *x = &a->d[3 * (uint64_t)id];
		struct hp_stack_v1 *s = &r->stacks[id];
		atomic_fetch_add_explicit(&s->free_count, x[0],
		                          memory_order_relaxed);
		atomic_fetch_add_explicit(&s->free_bytes, x[1],
		                          memory_order_relaxed);
		atomic_fetch_add_explicit(&s->free_objects_fp, x[2],
		                          memory_order_relaxed);
		x[0] = x[1] = x[2] = 0;
	}
	a->ntouched = 0;
}

enum hp_ev_read trace_get(const struct hp_region *r, uint64_t pos,
                          struct hp_event_v2 *out)
{
	if (!r->trace_cap)
		return HP_EV_READ_GONE;
	if (r->trace_mode == HP_TRACE_ONESHOT && pos >= r->trace_cap)
		return HP_EV_READ_GONE;
	const struct hp_event_v2 *e = &r->trace[pos & (r->trace_cap - 1)];
	for (int n = 0; n < READ_RETRIES; n++) {
		uint64_t s1 =
		        atomic_load_explicit(&e->seq, memory_order_acquire);
		if (s1 == HP_EVENT_BUSY)
			return HP_EV_READ_NOT_YET;
		if (s1 != pos + 1)
			return s1 > pos + 1 ? HP_EV_READ_GONE
			                    : HP_EV_READ_NOT_YET;
		event_load(e, out);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->seq, memory_order_relaxed) == s1) {
			out->seq = s1;
			return HP_EV_READ_OK;
		}
	}
	return HP_EV_READ_GONE;
}

uint64_t strtab_append(struct hp_region *r, const char *s, size_t len)
{
	struct hp_header_v1 *h = r->hdr;
	uint64_t off =
	        atomic_load_explicit(&h->strings_used, memory_order_relaxed);
	if (off > r->strings_cap || len + 1 > r->strings_cap - off)
		return UINT64_MAX;
	memcpy(r->strings + off, s, len);
	r->strings[off + len] = '\0';
	atomic_store_explicit(&h->strings_used, off + len + 1,
	                      memory_order_release);
	return off;
}

/* ---- peak tracking (HP_CFG_TRACK_MAX) ------------------------------- */

void stack_counts(const struct hp_region *r, uint64_t id,
                  struct hp_stack_counts *out)
{
	if (id >= r->stacks_cap) {
		memset(out, 0, sizeof(*out));
		return;
	}
	const struct hp_stack_v1 *s = &r->stacks[id];
	out->alloc_count =
	        atomic_load_explicit(&s->alloc_count, memory_order_relaxed);
	out->alloc_bytes =
	        atomic_load_explicit(&s->alloc_bytes, memory_order_relaxed);
	out->alloc_objects_fp = atomic_load_explicit(&s->alloc_objects_fp,
	                                             memory_order_relaxed);
	out->free_count =
	        atomic_load_explicit(&s->free_count, memory_order_relaxed);
	out->free_bytes =
	        atomic_load_explicit(&s->free_bytes, memory_order_relaxed);
	out->free_objects_fp =
	        atomic_load_explicit(&s->free_objects_fp, memory_order_relaxed);
}

static void stackmax_put(struct hp_region *r, uint32_t id,
                         const struct hp_stack_counts *c, bool have);

void stackmax_touch(struct hp_region *r, uint32_t id)
{
	stackmax_put(r, id, NULL, false);
}

void stackmax_save(struct hp_region *r, uint32_t id,
                   const struct hp_stack_counts *c)
{
	stackmax_put(r, id, c, true);
}

static void stackmax_put(struct hp_region *r, uint32_t id,
                         const struct hp_stack_counts *given, bool have)
{
	if (!r->stack_max || id >= r->stacks_cap)
		return;
	struct hp_stack_max_v1 *m = &r->stack_max[id];
	_Atomic uint64_t *seen = &r->stacks[id].max_epoch_seen;
	uint64_t e =
	        atomic_load_explicit(&r->hdr->max_epoch, memory_order_acquire);
	if (atomic_load_explicit(seen, memory_order_relaxed) == e)
		return; /* already saved since the last peak */
	/* First change since the peak: save the state at the peak (the
	 * counters as they are now), then claim the epoch. */
	struct hp_stack_counts c;
	if (have)
		c = *given;
	else
		stack_counts(r, id, &c);
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	/*
	 * The copies are written once and read at a dump: non-temporal
	 * stores, the line written whole without being read first.  While
	 * the heap climbs every allocation follows a new peak and copies
	 * (mallocbench -i 1: 4,400 peaks, a copy at nearly every one of 4
	 * million operations, into a table of 28,000 stacks): a cache miss
	 * each, and the program's own lines evicted, cost it 15-60% of its
	 * time with ordinary stores.  Non-temporal stores are not ordered
	 * among themselves: the fence makes the counters visible before the
	 * epoch that says they are there.  (Two threads may both get here
	 * for one stack: the copy is then one change off, as region.h
	 * says.)
	 */
	long long *q = (long long *)(void *)m;
	__builtin_ia32_movnti64(q + 1, (long long)c.alloc_count);
	__builtin_ia32_movnti64(q + 2, (long long)c.alloc_bytes);
	__builtin_ia32_movnti64(q + 3, (long long)c.alloc_objects_fp);
	__builtin_ia32_movnti64(q + 4, (long long)c.free_count);
	__builtin_ia32_movnti64(q + 5, (long long)c.free_bytes);
	__builtin_ia32_movnti64(q + 6, (long long)c.free_objects_fp);
	__builtin_ia32_movnti64(q + 7, 0);
	__builtin_ia32_sfence();
	__builtin_ia32_movnti64(q, (long long)e);
#else
	/* Two threads may both get here for one stack (the copy is then
	 * one change off, as region.h says): relaxed atomic stores, so that
	 * is a benign race and not undefined behaviour. */
	__atomic_store_n(&m->alloc_count, c.alloc_count, __ATOMIC_RELAXED);
	__atomic_store_n(&m->alloc_bytes, c.alloc_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&m->alloc_objects_fp, c.alloc_objects_fp,
	                 __ATOMIC_RELAXED);
	__atomic_store_n(&m->free_count, c.free_count, __ATOMIC_RELAXED);
	__atomic_store_n(&m->free_bytes, c.free_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&m->free_objects_fp, c.free_objects_fp,
	                 __ATOMIC_RELAXED);
	atomic_store_explicit(&m->epoch, e, memory_order_release);
#endif
	atomic_store_explicit(seen, e, memory_order_relaxed);
}

bool stackmax_alloc(struct hp_region *r, uint64_t bytes)
{
	if (!r->stack_max)
		return false;
	return stackmax_alloc_at(r, bytes, hp_clock_ns(CLOCK_BOOTTIME));
}

bool stackmax_alloc_at(struct hp_region *r, uint64_t bytes, uint64_t ts)
{
	if (!r->stack_max)
		return false;
	struct hp_header_v1 *h = r->hdr;
	uint64_t live = atomic_fetch_add_explicit(&h->live_bytes, bytes,
	                                          memory_order_relaxed) +
	                bytes;
	/* Below zero for a moment (a free counted before its allocation:
	 * a block the collector was putting in when the client took the
	 * table over): no peak. */
	if ((int64_t)live < 0)
		return false;
	uint64_t max =
	        atomic_load_explicit(&h->max_live_bytes, memory_order_relaxed);
	while (live > max) {
		if (!atomic_compare_exchange_weak_explicit(
		            &h->max_live_bytes, &max, live,
		            memory_order_relaxed, memory_order_relaxed))
			continue;
		atomic_store_explicit(&h->max_ts_ns, ts, memory_order_relaxed);
		/* Release: a reader that sees the new epoch sees the counters
		 * that made the peak. */
		atomic_fetch_add_explicit(&h->max_epoch, 1,
		                          memory_order_release);
		return true;
	}
	return false;
}

void stackmax_free(struct hp_region *r, uint64_t bytes)
{
	if (!r->stack_max)
		return;
	atomic_fetch_sub_explicit(&r->hdr->live_bytes, bytes,
	                          memory_order_relaxed);
}

void stackmax_read(const struct hp_region *r, uint64_t id,
                   struct hp_stack_counts *out)
{
	if (id >= r->stacks_cap) {
		memset(out, 0, sizeof(*out));
		return;
	}
	if (r->stack_max) {
		const struct hp_stack_max_v1 *m = &r->stack_max[id];
		uint64_t e = atomic_load_explicit(&r->hdr->max_epoch,
		                                  memory_order_acquire);
		if (atomic_load_explicit(&m->epoch, memory_order_acquire) ==
		    e) {
			/* Relaxed atomic loads: stackmax_touch may be
			 * writing them (see there). */
			out->alloc_count = __atomic_load_n(&m->alloc_count,
			                                   __ATOMIC_RELAXED);
			out->alloc_bytes = __atomic_load_n(&m->alloc_bytes,
			                                   __ATOMIC_RELAXED);
			out->alloc_objects_fp = __atomic_load_n(
			        &m->alloc_objects_fp, __ATOMIC_RELAXED);
			out->free_count = __atomic_load_n(&m->free_count,
			                                  __ATOMIC_RELAXED);
			out->free_bytes = __atomic_load_n(&m->free_bytes,
			                                  __ATOMIC_RELAXED);
			out->free_objects_fp = __atomic_load_n(
			        &m->free_objects_fp, __ATOMIC_RELAXED);
			return;
		}
	}
	stack_counts(r, id, out);
}
