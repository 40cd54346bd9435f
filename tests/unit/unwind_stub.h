/*
 * The capture-context part of unwind.c (and early.c's hand-off),
 * stubbed for unit tests that
 * compile recorder.c in (test_client_recorder, test_sampler): one context
 * per thread, and no stack to measure.  Each test defines its own
 * unwind_capture and unwind_thread_id.
 */
#ifndef HEAPPROF_UNWIND_STUB_H
#define HEAPPROF_UNWIND_STUB_H

static __thread struct capture_ctx stub_ctx;
struct capture_ctx *unwind_ctx_claim(uint32_t level)
{
	return &stub_ctx;
}
void unwind_ctx_release(struct capture_ctx *c)
{
}
void unwind_ctx_drop(uint32_t level)
{
}
bool unwind_stack_room(uintptr_t *room)
{
	*room = UINTPTR_MAX;
	return false;
}
/* early.c: no allocation here comes before an attach that matters. */
void early_record(uint64_t ptr, size_t size)
{
}
void early_free(uint64_t ptr)
{
}
/* One stack: a mark at or below the current frame is gone. */
bool unwind_frame_gone(uintptr_t mark, uintptr_t ra, uintptr_t here)
{
	return here >= mark;
}

#endif
