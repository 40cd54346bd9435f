/*
 * safe_longjmp: leaving allocating code by longjmp (test_safety.sh).
 *   sj_deep    recursion 40 deep, each level malloc(100 + level); the
 *              bottom longjmps to the top; 100 rounds; the top frees the
 *              even levels' blocks
 *   sj_signal  recursion 30 deep allocating in sj_deep_sig, the bottom
 *              raises SIGUSR1; the handler allocates (sj_signal: malloc(64),
 *              freed on the next round) and siglongjmps out of the handler
 *              and all 30 frames; 100 rounds
 *   sj_cb      a qsort comparator allocates (malloc(32), freed) and
 *              longjmps out of qsort after 50 comparisons; 100 rounds
 * Exits 24.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>

#include "safe_common.h"

static struct sc_count c_deep = {"sj_deep"}, c_sigd = {"sj_deep_sig"},
                       c_sig = {"sj_signal"}, c_cb = {"sj_cb"};
static jmp_buf top;
static sigjmp_buf sigtop;
static void *blocks[40];
static void *sig_blocks[30];
static void *handler_block;

NOINLINE void sj_deep(int level)
{
	blocks[level] = malloc(100 + level);
	sc_touch(blocks[level], 100 + level);
	sc_alloc(&c_deep, blocks[level], 100 + level);
	if (level == 39)
		longjmp(top, 1);
	sj_deep(level + 1);
}

NOINLINE void sj_signal(void)
{
	if (handler_block) {
		free(handler_block);
		sc_free(&c_sig, 64);
	}
	handler_block = malloc(64);
	sc_touch(handler_block, 64);
	sc_alloc(&c_sig, handler_block, 64);
}

static void on_usr1(int sig)
{
	(void)sig;
	sj_signal();
	siglongjmp(sigtop, 1);
}

NOINLINE void sj_deep_sig(int level)
{
	sig_blocks[level] = malloc(50 + level);
	sc_touch(sig_blocks[level], 50 + level);
	sc_alloc(&c_sigd, sig_blocks[level], 50 + level);
	if (level == 29)
		raise(SIGUSR1);
	sj_deep_sig(level + 1);
}

static jmp_buf cbtop;
static int compares;

NOINLINE int sj_cb(const void *a, const void *b)
{
	void *p = malloc(32);
	sc_touch(p, 32);
	sc_alloc(&c_cb, p, 32);
	free(p);
	sc_free(&c_cb, 32);
	if (++compares == 50)
		longjmp(cbtop, 1);
	return *(const int *)a - *(const int *)b;
}

int main(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	int jumps = 0;
	for (int round = 0; round < 100; round++) {
		if (setjmp(top) == 0)
			sj_deep(0);
		else
			jumps++;
		for (int l = 0; l < 40; l += 2) {
			free(blocks[l]);
			sc_free(&c_deep, 100 + l);
		}
		if (sigsetjmp(sigtop, 1) == 0)
			sj_deep_sig(0);
		else
			jumps++;
		for (int l = 0; l < 30; l++) {
			free(sig_blocks[l]);
			sc_free(&c_sigd, 50 + l);
		}
		int v[64];
		for (int i = 0; i < 64; i++)
			v[i] = (i * 37) % 64;
		compares = 0;
		if (setjmp(cbtop) == 0)
			qsort(v, 64, sizeof v[0], sj_cb);
		else
			jumps++;
	}
	printf("longjmps %d\n", jumps);
	sc_print(&c_deep);
	sc_print(&c_sigd);
	sc_print(&c_sig);
	sc_print(&c_cb);
	return 24;
}
