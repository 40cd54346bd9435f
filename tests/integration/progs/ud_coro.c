/*
 * ud_coro: swapcontext coroutines allocating on their own stacks
 * (test_unwind_diff.sh).  8 coroutines with 64 KiB stacks, 4 from malloc
 * (uc_stack_malloc: malloc(65536), freed at the end) and 4 from mmap; a
 * round-robin scheduler switches to each in turn until all are done.
 * Coroutine k (0..7) runs uc_body: 300 steps, each
 *   uc_work(k, i, depth = 1 + (i + k) % 6) recursing to uc_leaf, which
 *   allocates malloc(32 + 8 * k + i % 16) into a ring of 8 (the slot's
 *   previous block freed) and switches back to the scheduler; so every
 *   switch lands in the middle of a different-depth stack
 * and at the end frees its ring.  Between two switches the scheduler
 * allocates itself (uc_sched_alloc: malloc(24), freed).  Exits 32.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <ucontext.h>

#include "ud_common.h"

#define NCO   8
#define STEPS 300
#define STACK (64 * 1024)

static struct sc_count c_leaf = {"uc_leaf"}, c_sched = {"uc_sched_alloc"},
                       c_stack = {"uc_stack_malloc"};

static ucontext_t sched_ctx, co_ctx[NCO];
static int co_done[NCO];
static void *rings[NCO][8];
static size_t ring_n[NCO][8];

NOINLINE void uc_leaf(int k, int i)
{
	size_t n = 32 + 8 * (size_t)k + (size_t)(i % 16);
	int slot = i % 8;
	if (rings[k][slot]) {
		free(rings[k][slot]);
		sc_free(&c_leaf, ring_n[k][slot]);
	}
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_leaf, p, n);
	rings[k][slot] = p;
	ring_n[k][slot] = n;
	swapcontext(&co_ctx[k], &sched_ctx);
}

NOINLINE void uc_work(int k, int i, int depth)
{
	volatile char pad[40 + 8 * 6];
	pad[depth] = (char)i;
	if (depth <= 1)
		uc_leaf(k, i);
	else
		uc_work(k, i, depth - 1);
	sc_sink += (unsigned char)pad[depth];
}

NOINLINE void uc_body(int k)
{
	for (int i = 0; i < STEPS; i++)
		uc_work(k, i, 1 + (i + k) % 6);
	for (int s = 0; s < 8; s++)
		if (rings[k][s]) {
			free(rings[k][s]);
			sc_free(&c_leaf, ring_n[k][s]);
			rings[k][s] = NULL;
		}
}

static void uc_entry(int k)
{
	uc_body(k);
	co_done[k] = 1;
	/* returns to uc_link: the scheduler */
}

NOINLINE void uc_sched_alloc(void)
{
	void *p = malloc(24);
	sc_touch(p, 24);
	sc_alloc(&c_sched, p, 24);
	free(p);
	sc_free(&c_sched, 24);
}

NOINLINE void *uc_stack_malloc(void)
{
	void *p = malloc(STACK);
	sc_touch(p, STACK);
	sc_alloc(&c_stack, p, STACK);
	return p;
}

NOINLINE long uc_schedule(void)
{
	long switches = 0;
	int live = NCO;
	while (live > 0) {
		live = 0;
		for (int k = 0; k < NCO; k++) {
			if (co_done[k])
				continue;
			uc_sched_alloc();
			swapcontext(&sched_ctx, &co_ctx[k]);
			switches++;
			if (!co_done[k])
				live++;
		}
	}
	return switches;
}

int main(void)
{
	void *stacks[NCO];
	for (int k = 0; k < NCO; k++) {
		if (k % 2 == 0) {
			stacks[k] = uc_stack_malloc();
		} else {
			stacks[k] = mmap(NULL, STACK, PROT_READ | PROT_WRITE,
			                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (stacks[k] == MAP_FAILED) {
				perror("mmap");
				return 1;
			}
		}
		if (getcontext(&co_ctx[k]) != 0) {
			perror("getcontext");
			return 1;
		}
		co_ctx[k].uc_stack.ss_sp = stacks[k];
		co_ctx[k].uc_stack.ss_size = STACK;
		co_ctx[k].uc_link = &sched_ctx;
		makecontext(&co_ctx[k], (void (*)(void))uc_entry, 1, k);
	}
	long switches = uc_schedule();
	for (int k = 0; k < NCO; k++) {
		if (k % 2 == 0) {
			free(stacks[k]);
			sc_free(&c_stack, STACK);
		} else {
			munmap(stacks[k], STACK);
		}
	}
	printf("ud_coro: %d coroutines, %ld switches\n", NCO, switches);
	struct sc_count *const cs[] = {&c_leaf, &c_sched, &c_stack};
	ud_print_counts(stdout, cs, UD_N(cs));
	ud_caller("uc_leaf", "uc_work");
	ud_caller("uc_sched_alloc", "uc_schedule");
	ud_caller("uc_stack_malloc", "main");
	return 32;
}
