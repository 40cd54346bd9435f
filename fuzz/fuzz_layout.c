/*
 * The shared-layout reader: what the collector does with a region a
 * hostile or buggy client wrote.
 *
 * The input is a small program.  Byte 0 picks the session (v1 or v2
 * layout, peak tracking, a trace and its mode), byte 1 the interval; the
 * harness formats a region as the collector does (make_region) and keeps
 * that binding as the trusted geometry.  The rest are operations: the
 * client's own (intern a stack, insert and remove live blocks, put trace
 * events, peak accounting) and raw writes anywhere in any table or the
 * header, which is everything a client can do to shared memory.  Then the
 * collector's read side runs: snapshot_take_live (modules, stacks, heaps,
 * every live slot), stackmax_read, trace_get over the trace, and
 * snapshot_memory; and, like `heapprof snapshot`, region_bind on the
 * (possibly rewritten) header and a snapshot through that binding.  With
 * bit 6 of byte 0 the collector's whole dump path runs too, into a real
 * profile (in /dev/shm): the trace read (collector_trace_poll and _final,
 * whose positions come from the client's head), a dump with every live
 * block and the final dump, written by the profile writer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/collector.h"
#include "fuzz_common.h"
#include "layout/region.h"

#define REGION_SIZE (HP_REGION_MIN_SIZE + (64u << 10))
#define TRACE_BYTES (64u << 10)

struct in {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct in *in, size_t bytes)
{
	uint64_t v = 0;
	for (size_t i = 0; i < bytes && in->n; i++, in->p++, in->n--)
		v |= (uint64_t)*in->p << (8 * i);
	return v;
}

static void *region_mem;

/* Where raw write selector sel points: a table of the trusted binding
 * (or the header), and its size in bytes. */
static uint8_t *table_at(const struct hp_region *r, unsigned sel, size_t *len)
{
	switch (sel % 10) {
	case 0:
		*len = r->version >= 2 ? HP_HEADER_V2_SIZE
		                       : sizeof(struct hp_header_v1);
		return (uint8_t *)r->hdr;
	case 1:
		*len = r->stacks_cap * sizeof(*r->stacks);
		return (uint8_t *)r->stacks;
	case 2:
		*len = r->frames_cap * sizeof(uint64_t);
		return (uint8_t *)r->frames;
	case 3:
		*len = r->live_cap * sizeof(uint64_t);
		return (uint8_t *)r->live_keys;
	case 4:
		*len = r->live_cap * (r->live_values
		                              ? sizeof(struct hp_live_v2)
		                              : sizeof(struct hp_live_v1));
		return r->live_values ? (uint8_t *)r->live_values
		                      : (uint8_t *)r->live_v1;
	case 5:
		*len = r->modules_cap * sizeof(*r->modules);
		return (uint8_t *)r->modules;
	case 6:
		*len = r->strings_cap;
		return (uint8_t *)r->strings;
	case 7:
		*len = r->heaps_cap * sizeof(*r->heaps);
		return (uint8_t *)r->heaps;
	case 8:
		*len = r->stack_max ? r->stacks_cap * sizeof(*r->stack_max) : 0;
		return (uint8_t *)r->stack_max;
	default:
		*len = r->trace_cap * sizeof(*r->trace);
		return (uint8_t *)r->trace;
	}
}

static void run_ops(struct hp_region *r, struct in *in)
{
	int budget = 512;
	while (in->n && budget-- > 0) {
		unsigned op = (unsigned)take(in, 1) % 8;
		switch (op) {
		case 0: { /* intern a stack */
			uint64_t pcs[HP_MAX_FRAMES];
			uint32_t n = (uint32_t)take(in, 1) % 24 + 1;
			uint32_t heap = (uint32_t)take(in, 1) % 4;
			for (uint32_t i = 0; i < n; i++)
				pcs[i] = 0x400000 + take(in, 2);
			bool is_new;
			uint32_t id =
			        stacktab_intern(r, heap, pcs, n, 0, &is_new);
			if (id < r->stacks_cap) {
				stackmax_touch(r, id);
				atomic_fetch_add(&r->stacks[id].alloc_count, 1);
				atomic_fetch_add(&r->stacks[id].alloc_bytes,
				                 64);
				stackmax_alloc(r, 64);
			}
			break;
		}
		case 1: { /* a live block (v2: the client's table) */
			if (!r->live_values)
				break;
			struct hp_live_v2 v = {0};
			uint64_t addr = take(in, 4) << 4;
			v.stack_id = (uint32_t)take(in, 1);
			v.size = take(in, 2);
			v.charged = v.size;
			v.objects_fp = HP_OBJ_FP_ONE;
			if (addr > HP_LIVE_BUSY)
				livetab_insert(r, addr, &v);
			break;
		}
		case 2: {
			if (!r->live_values)
				break;
			struct hp_live_v2 v;
			livetab_remove(r, take(in, 4) << 4, &v);
			break;
		}
		case 3: { /* a trace event */
			struct hp_event_v2 ev = {0};
			ev.kind = (uint8_t)(take(in, 1) % 3);
			ev.addr = take(in, 4);
			ev.size = take(in, 2);
			ev.stack_id = (uint32_t)take(in, 1);
			trace_put(r, &ev);
			break;
		}
		case 4: { /* a module path and entry, as modules.c writes */
			char path[32];
			size_t len = (size_t)take(in, 1) % sizeof(path);
			for (size_t i = 0; i < len; i++)
				path[i] = (char)('a' + take(in, 1) % 26);
			uint64_t off = strtab_append(r, path, len);
			uint64_t m = atomic_load(&r->hdr->modules_used);
			if (off != UINT64_MAX && m < r->modules_cap) {
				struct hp_module_v1 *mod = &r->modules[m];
				mod->path_off = off;
				mod->start = 0x400000 + (m << 20);
				mod->end = mod->start + 0x10000;
				mod->build_id_len = (uint32_t)take(in, 1);
				atomic_store(&mod->ready, 1);
				atomic_store(&r->hdr->modules_used, m + 1);
			}
			break;
		}
		case 5: /* free accounting at the peak */
			stackmax_free(r, take(in, 1));
			break;
		case 6:
		case 7: { /* a raw write: what a hostile client can do */
			size_t len;
			uint8_t *t = table_at(r, (unsigned)take(in, 1), &len);
			uint64_t off = take(in, 3);
			size_t n = (size_t)take(in, 1) % 65;
			if (!t || !len)
				break;
			off %= len;
			if (n > len - off)
				n = len - off;
			for (size_t i = 0; i < n; i++)
				t[off + i] = (uint8_t)take(in, 1);
			break;
		}
		}
	}
}

static void read_side(const struct hp_region *r)
{
	const struct hp_region *rs[1] = {r};
	struct snapshot s;
	/* Every live block with the stacks at the peak (a region that
	 * tracks it), then the stacks now. */
	if (snapshot_take_live(rs, 1, true, &s) == 0)
		snapshot_free(&s);
	if (snapshot_take(r, &s) == 0)
		snapshot_free(&s);
	for (uint64_t i = 0; i < r->stacks_cap && i < 256; i++) {
		struct hp_stack_counts c;
		stackmax_read(r, i, &c);
	}
	if (r->trace && r->ext) {
		uint64_t head = atomic_load(&r->ext->trace_head);
		uint64_t from =
		        head > 2 * r->trace_cap ? head - 2 * r->trace_cap : 0;
		for (uint64_t p = from, k = 0; p < head && k < 4096; p++, k++) {
			struct hp_event_v2 ev;
			trace_get(r, p, &ev);
		}
	}
	struct prof_memory mem;
	snapshot_memory(r, 0, false, &mem);
}

/* The collector's dump path on the region: a target as collector_answer
 * makes it (disconnected: no /proc reads), a profile, the dumps. */
static void collector_side(const struct hp_region *trusted, uint64_t size,
                           const struct hp_config *cfg)
{
	const char *prof_path = fuzz_scratch_file("p.db");
	struct collector_opts o = {
	        .interval = cfg->sampling_interval,
	        .max_frames = cfg->max_frames,
	        .config_flags = cfg->config_flags,
	        .trace_mode = cfg->trace_mode,
	        .trace_bytes = cfg->trace_bytes,
	};
	struct collector c;
	if (collector_open(&c, &o, false))
		abort();
	c.profile = profile_create(prof_path, "fuzz");
	if (!c.profile)
		abort();
	struct target t = {0};
	t.fd = -1;
	t.nreg = 1;
	t.reg[0].base = trusted->base;
	t.reg[0].size = size;
	t.reg[0].region = *trusted;
	t.shmem_total = size;
	t.layout_version = trusted->version;
	t.disconnected = true;
	t.pid = 4242;
	snprintf(t.how, sizeof(t.how), "command");
	if (trusted->trace_cap) {
		t.tr.mode = trusted->trace_mode;
		t.tr.cap = trusted->trace_cap;
		t.tr.bytes = trusted->trace_cap * sizeof(struct hp_event_v2);
	}
	struct prof_process info = {.pid = 4242,
	                            .name = "fuzz",
	                            .cmdline = "fuzz",
	                            .sampling_interval = o.interval,
	                            .unwind = "dwarf",
	                            .max_frames = o.max_frames,
	                            .shmem_size = size,
	                            .how = "command"};
	if (profile_begin_process(c.profile, &info, &t.upid) == 0) {
		collector_trace_poll(&c, &t);
		collector_dump_blocks(&c, &t, "snapshot", "fuzz", 1000);
		collector_dump_final(&c, &t, "exit", 2000);
		struct prof_process_end e = {.end_ts_ns = 3000,
		                             .exit_status = 0};
		profile_end_process(c.profile, t.upid, &e);
	}
	profile_close(c.profile);
	c.profile = NULL;
	collector_trace_free(&c);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* The writer's one-line errors (a hostile region can make some). */
	fuzz_quiet_stderr();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = {data, size};
	if (!region_mem && !(region_mem = aligned_alloc(4096, REGION_SIZE)))
		abort();
	unsigned mode = (unsigned)take(&in, 1);
	static const uint64_t intervals[] = {1, 4096, 512, 65536};
	struct hp_config cfg = {
	        .sampling_interval = intervals[take(&in, 1) % 4],
	        .unwind_mode = 0,
	        .max_frames = HP_DEFAULT_FRAMES,
	        .session_id = 1,
	        .layout_version = (mode & 1) ? HP_LAYOUT_V1 : 0,
	};
	if (mode & 2)
		cfg.config_flags |= HP_CFG_TRACK_MAX;
	uint64_t rsize = REGION_SIZE;
	if (!(mode & 1) && (mode & 4)) {
		cfg.trace_mode = 1 + (mode >> 3) % 3;
		cfg.trace_bytes = TRACE_BYTES;
	} else {
		rsize -= TRACE_BYTES;
	}
	memset(region_mem, 0, REGION_SIZE);
	struct hp_region r;
	if (region_format(region_mem, rsize, &cfg) ||
	    region_bind(&r, region_mem, rsize))
		abort(); /* our own format must bind */
	/* The trusted geometry: a copy taken before the client runs. */
	struct hp_region trusted = r;
	run_ops(&r, &in);
	read_side(&trusted);
	if (mode & 0x40)
		collector_side(&trusted, rsize, &cfg);
	/* heapprof snapshot: the header as it is now, not trusted. */
	struct hp_region hostile;
	if (region_bind(&hostile, region_mem, rsize) == 0)
		read_side(&hostile);
	return 0;
}
