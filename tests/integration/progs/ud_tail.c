/*
 * ud_tail: tail calls (test_unwind_diff.sh).  Built with -O2 (the Makefile
 * has a rule for it): a call in tail position becomes a jump, so the
 * function that made it has left the stack by the time its callee
 * allocates, and the allocation's leaf is its caller.  1000 rounds i of
 * tc_run:
 *   tc_wrap(n)      return malloc(n): a jump to malloc.  The allocation is
 *                   tc_use_wrap's: expected stack tc_use_wrap tc_run main
 *                   (malloc(48 + i % 8), freed)
 *   tc_fwd(n)       a frame of its own (it saves a register across two
 *                   calls), popped before it jumps to tc_alloc(n + 1):
 *                   expected stack
 *                   tc_alloc tc_use_fwd tc_run main, no tc_fwd
 *                   (malloc(65 + i % 4), kept every 8th round)
 *   tc_chain2(n)    jumps to tc_chain1(2 n), which jumps to tc_leaf(2 n +
 *                   1): expected stack tc_leaf tc_use_chain tc_run main
 *                   (malloc(2 (8 + i % 16) + 1), freed)
 *   tc_czero(a, b)  return calloc(b, a) (arguments swapped, then a jump):
 *                   tc_use_czero's, calloc(3, 10 + i % 5), freed
 * Exits 38.
 */
#include "ud_common.h"

#define NOIPA __attribute__((noipa))

static struct sc_count c_wrap = {"tc_use_wrap"}, c_fwd = {"tc_alloc"},
                       c_chain = {"tc_leaf"}, c_czero = {"tc_use_czero"};

NOIPA void *tc_wrap(size_t n)
{
	return malloc(n); /* jmp malloc */
}

NOIPA void *tc_alloc(size_t n)
{
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_fwd, p, n);
	return p;
}

/* 1, the compiler does not know it. */
NOIPA size_t tc_one(size_t x)
{
	return x == (size_t)-1 ? 0 : 1;
}

NOIPA void *tc_fwd(size_t n)
{
	/* n lives across two calls in a callee-saved register: a frame that
	 * saves it and aligns the stack, torn down before the jump. */
	size_t a = tc_one(n);
	size_t b = tc_one(n + a);
	return tc_alloc(n + a * b); /* pop; jmp tc_alloc */
}

NOIPA void *tc_leaf(size_t n)
{
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_chain, p, n);
	return p;
}

NOIPA void *tc_chain1(size_t n)
{
	return tc_leaf(n + 1); /* jmp */
}

NOIPA void *tc_chain2(size_t n)
{
	return tc_chain1(2 * n); /* jmp */
}

NOIPA void *tc_czero(size_t a, size_t b)
{
	return calloc(b, a); /* jmp calloc */
}

NOIPA void tc_use_wrap(int i)
{
	size_t n = 48 + (size_t)(i % 8);
	void *p = tc_wrap(n);
	sc_touch(p, n);
	sc_alloc(&c_wrap, p, n);
	free(p);
	sc_free(&c_wrap, n);
}

static void *kept[200];
static int nkept;

NOIPA void tc_use_fwd(int i)
{
	size_t n = 64 + (size_t)(i % 4);
	void *p = tc_fwd(n);
	if (i % 8 == 0 && nkept < 200) {
		kept[nkept++] = p;
		return;
	}
	free(p);
	sc_free(&c_fwd, n + 1);
}

NOIPA void tc_use_chain(int i)
{
	size_t n = 8 + (size_t)(i % 16);
	void *p = tc_chain2(n);
	free(p);
	sc_free(&c_chain, 2 * n + 1);
}

NOIPA void tc_use_czero(int i)
{
	size_t a = 10 + (size_t)(i % 5);
	void *p = tc_czero(a, 3);
	sc_touch(p, 3 * a);
	sc_alloc(&c_czero, p, 3 * a);
	free(p);
	sc_free(&c_czero, 3 * a);
}

NOIPA void tc_run(void)
{
	for (int i = 0; i < 1000; i++) {
		tc_use_wrap(i);
		tc_use_fwd(i);
		tc_use_chain(i);
		tc_use_czero(i);
	}
}

int main(void)
{
	tc_run();
	printf("ud_tail: done\n");
	struct sc_count *const cs[] = {&c_wrap, &c_fwd, &c_chain, &c_czero};
	ud_print_counts(stdout, cs, UD_N(cs));
	ud_caller("tc_use_wrap", "tc_run");
	ud_caller("tc_alloc", "tc_use_fwd");
	ud_caller("tc_leaf", "tc_use_chain");
	ud_caller("tc_use_czero", "tc_run");
	printf("stack tc_use_wrap tc_run main\n");
	printf("stack tc_alloc tc_use_fwd tc_run main\n");
	printf("stack tc_leaf tc_use_chain tc_run main\n");
	printf("stack tc_use_czero tc_run main\n");
	return 38;
}
