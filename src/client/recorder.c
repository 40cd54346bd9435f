/*
 * Accounting of sampled allocations into the shared region: capture the
 * stack, intern it, remember the block in the live table and add to the
 * stack's counters; on free, take back exactly what was charged.  Every
 * step is lock-free; the re-entrancy guard keeps allocations made by the
 * unwinder itself (or by a signal handler that interrupts us) out.
 */
#include <math.h>
#include <stdatomic.h>

#include "client/client.h"

uint64_t recorder_objects_fp(size_t size, bool exact)
{
	if (exact)
		return HP_OBJ_FP_ONE;
	/* A block of `size` bytes is sampled with probability
	 * p = 1 - exp(-size / interval); counting it 1/p times makes the
	 * object count unbiased. */
	double p = -expm1(-(double)size / (double)hp_client.interval);
	if (!(p > 0.0))
		return HP_OBJ_FP_ONE;
	return (uint64_t)((double)HP_OBJ_FP_ONE / p + 0.5);
}

static void charge(struct hp_stack_v1 *s, uint64_t bytes, uint64_t objs)
{
	atomic_fetch_add_explicit(&s->alloc_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->alloc_bytes, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->alloc_objects_fp, objs,
	                          memory_order_relaxed);
}

static void discharge(struct hp_stack_v1 *s, uint64_t bytes, uint64_t objs)
{
	atomic_fetch_add_explicit(&s->free_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->free_bytes, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->free_objects_fp, objs,
	                          memory_order_relaxed);
}

void recorder_sample(void *ptr, size_t size, uint64_t charged, bool exact,
                     uintptr_t caller)
{
	struct client_tls *t = &hp_tls;
	struct hp_region *r = &hp_client.region;
	if (t->in_hook) {
		region_count(r, HP_CTR_REENTRANT, 1);
		return;
	}
	t->in_hook = 1;

	if (HP_UNLIKELY(atomic_load_explicit(&r->hdr->control,
	                                     memory_order_relaxed) ==
	                HP_CONTROL_STOP)) {
		client_stop(HP_STOP_REQUESTED);
		t->in_hook = 0;
		return;
	}

	uint64_t pcs[HP_MAX_FRAMES];
	bool truncated = false;
	uint32_t n = unwind_capture(pcs, hp_client.max_frames,
	                            hp_client.unwind_mode, &truncated);
	if (n == 0) {
		/* Keep at least the caller of the hook. */
		region_count(r, HP_CTR_UNWIND_ERRORS, 1);
		pcs[0] = caller;
		n = 1;
	}
	if (truncated)
		region_count(r, HP_CTR_TRUNCATED_STACKS, 1);

	bool is_new;
	uint32_t id = stacktab_intern(
	        r, 0, pcs, n, truncated ? HP_STACK_TRUNCATED : 0, &is_new);
	if (id == 0) {
		region_count(r, HP_CTR_STACK_FULL, 1);
		region_count(r, HP_CTR_STACK_FULL_BYTES, charged);
	} else if (is_new) {
		modules_check(r, pcs, n);
	}

	uint64_t objs = recorder_objects_fp(size, exact);
	struct hp_stack_v1 *s = &r->stacks[id];
	charge(s, charged, objs);
	struct hp_live_v1 v = {.stack_id = id,
	                       .heap_id = 0,
	                       .size = size,
	                       .charged = charged,
	                       .objects_fp = objs};
	if (livetab_insert(r, (uintptr_t)ptr, &v) != 0) {
		/* Its free could never be matched: count it as freed now so
		 * the space view is not inflated, and say so. */
		discharge(s, charged, objs);
		region_count(r, HP_CTR_LIVE_FULL, 1);
		region_count(r, HP_CTR_LIVE_FULL_BYTES, charged);
	}
	t->in_hook = 0;
}

bool recorder_take(void *ptr, struct hp_live_v1 *out)
{
	return livetab_remove(&hp_client.region, (uintptr_t)ptr, out);
}

void recorder_apply_free(const struct hp_live_v1 *v)
{
	struct hp_region *r = &hp_client.region;
	if (v->stack_id >= r->stacks_cap)
		return;
	discharge(&r->stacks[v->stack_id], v->charged, v->objects_fp);
}

void recorder_put_back(void *ptr, const struct hp_live_v1 *v)
{
	struct hp_region *r = &hp_client.region;
	if (livetab_insert(r, (uintptr_t)ptr, v) != 0) {
		recorder_apply_free(v);
		region_count(r, HP_CTR_LIVE_FULL, 1);
		region_count(r, HP_CTR_LIVE_FULL_BYTES, v->charged);
	}
}

void recorder_free(void *ptr)
{
	/* No re-entrancy guard: removal never allocates, and a block freed
	 * inside a hook must still leave the table or its address could be
	 * matched to a stale record later. */
	struct hp_live_v1 v;
	if (livetab_remove(&hp_client.region, (uintptr_t)ptr, &v))
		recorder_apply_free(&v);
}
