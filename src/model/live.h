/*
 * The heap model of a running process: one reading of its shared regions
 * (a prof_dump of per-stack counters, collector/snapshot.h) as the stack
 * tables and heap states a profile would hold if that reading were its
 * only dump: the same mappings, frames (named by the same symbolizer),
 * callsites and, per heap, the four views per leaf callsite, with the
 * profile writer's rounding of sampled object counts.  `heapprof top`,
 * serve's /metrics and /debug/pprof/heap read a live process through it,
 * so they name functions and count as report and pprof do on a profile
 * (tree.h, funcs.h, state.h).
 */
#ifndef HEAPPROF_MODEL_LIVE_H
#define HEAPPROF_MODEL_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "util/pairmap.h"
#include "store/profile.h"
#include "store/reader.h"
#include "symbolize/symbolize.h"
#include "util/hmap.h"

/*
 * Frame names kept from one reading to the next (a reader of the same
 * process looks up the same return addresses every second): by module
 * start and address, emptied when the process's modules change.  Zeroed
 * to start; live_names_free frees it.
 */
struct live_names {
	struct hmap idx; /* (module start, rel_pc) -> entry + 1 */
	struct sym_result *e;
	size_t n, cap;
	uint64_t modules_hash;
};
void live_names_free(struct live_names *c);

/* One heap of the reading and its state. */
struct live_heap {
	uint32_t id;
	char *name;          /* "libc.malloc", a custom heap's, or "heapN" */
	struct rd_sample *x; /* per leaf callsite, by callsite id */
	size_t n, cap;
	int64_t tot[RD_NVIEWS];
};

struct live_model {
	struct rd_stacks s;
	struct live_heap *heaps; /* by id: libc.malloc first */
	size_t nheaps;
	/* building */
	size_t cap_maps, cap_frames, cap_cs;
	struct pairmap frame_idx; /* (mapping id, rel_pc) -> frame id */
	struct pairmap cs_idx;    /* (parent, frame) -> callsite id */
	int64_t *module_map;      /* module index -> mapping id; 0: none */
	int64_t unknown_map, heapprof_map;
	struct live_names *cache;
};

/*
 * The model of reading d: frames named through sym (as the profile writer
 * names them: symbolizer_lookup), through cache when not NULL, every heap
 * of d (only heap 0, libc.malloc, unless all_heaps).  0 or -ENOMEM;
 * live_model_free either way.
 */
int live_model_build(struct live_model *m, const struct prof_dump *d,
                     struct symbolizer *sym, struct live_names *cache,
                     int all_heaps);
void live_model_free(struct live_model *m);

/* The heap named name in m, or NULL. */
const struct live_heap *live_model_heap(const struct live_model *m,
                                        const char *name);

#endif
