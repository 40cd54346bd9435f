/*
 * ud_jmp: leaving deep allocating code with longjmp and siglongjmp, and
 * allocating right after (test_unwind_diff.sh).  100 rounds of uj_round:
 *   uj_leaf          uj_deep recurses 50 deep, each level malloc(100 +
 *                    level) in uj_leaf; the bottom longjmps to uj_round,
 *                    which frees the odd levels' blocks
 *   uj_after_jmp     right after setjmp returned 1: malloc(40), freed
 *   uj_sleaf         uj_sdeep recurses 45 deep, each level malloc(50 +
 *                    level) in uj_sleaf, all freed after the jump; the
 *                    bottom raises SIGUSR1
 *   uj_handler_alloc the SIGUSR1 handler allocates (malloc(72), freed on
 *                    the next round) and siglongjmps out of itself and
 *                    the 45 frames
 *   uj_after_sigjmp  right after sigsetjmp returned 1: malloc(56), freed
 *   uj_mleaf         uj_mdeep recurses 20 deep (malloc(30), freed after
 *                    the jump) and siglongjmps without a signal
 *   uj_after_mjmp    right after: malloc(20), freed
 * Exits 31.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>

#include "ud_common.h"

static struct sc_count c_leaf = {"uj_leaf"}, c_after = {"uj_after_jmp"},
                       c_sleaf = {"uj_sleaf"}, c_handler = {"uj_handler_alloc"},
                       c_after_sig = {"uj_after_sigjmp"},
                       c_mleaf = {"uj_mleaf"}, c_after_m = {"uj_after_mjmp"};

#define DEEP  50
#define SDEEP 45
#define MDEEP 20

static jmp_buf top;
static sigjmp_buf sigtop, mtop;
static void *blocks[DEEP], *sblocks[SDEEP], *mblocks[MDEEP];
static void *handler_block;

NOINLINE void *uj_leaf(int level)
{
	size_t n = 100 + (size_t)level;
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_leaf, p, n);
	return p;
}

NOINLINE void uj_deep(int level)
{
	blocks[level] = uj_leaf(level);
	if (level == DEEP - 1)
		longjmp(top, 1);
	uj_deep(level + 1);
}

NOINLINE void uj_after_jmp(void)
{
	void *p = malloc(40);
	sc_touch(p, 40);
	sc_alloc(&c_after, p, 40);
	free(p);
	sc_free(&c_after, 40);
}

NOINLINE void *uj_sleaf(int level)
{
	size_t n = 50 + (size_t)level;
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_sleaf, p, n);
	return p;
}

NOINLINE void uj_handler_alloc(void)
{
	if (handler_block) {
		free(handler_block);
		sc_free(&c_handler, 72);
	}
	handler_block = malloc(72);
	sc_touch(handler_block, 72);
	sc_alloc(&c_handler, handler_block, 72);
}

NOINLINE void uj_on_usr1(int sig)
{
	(void)sig;
	uj_handler_alloc();
	siglongjmp(sigtop, 1);
}

NOINLINE void uj_sdeep(int level)
{
	sblocks[level] = uj_sleaf(level);
	if (level == SDEEP - 1)
		raise(SIGUSR1);
	uj_sdeep(level + 1);
}

NOINLINE void uj_after_sigjmp(void)
{
	void *p = malloc(56);
	sc_touch(p, 56);
	sc_alloc(&c_after_sig, p, 56);
	free(p);
	sc_free(&c_after_sig, 56);
}

NOINLINE void *uj_mleaf(void)
{
	void *p = malloc(30);
	sc_touch(p, 30);
	sc_alloc(&c_mleaf, p, 30);
	return p;
}

NOINLINE void uj_mdeep(int level)
{
	mblocks[level] = uj_mleaf();
	if (level == MDEEP - 1)
		siglongjmp(mtop, 1);
	uj_mdeep(level + 1);
}

NOINLINE void uj_after_mjmp(void)
{
	void *p = malloc(20);
	sc_touch(p, 20);
	sc_alloc(&c_after_m, p, 20);
	free(p);
	sc_free(&c_after_m, 20);
}

NOINLINE int uj_round(void)
{
	int jumps = 0;
	if (setjmp(top) == 0) {
		uj_deep(0);
	} else {
		uj_after_jmp();
		jumps++;
	}
	for (int l = 1; l < DEEP; l += 2) {
		free(blocks[l]);
		sc_free(&c_leaf, 100 + (size_t)l);
	}
	if (sigsetjmp(sigtop, 1) == 0) {
		uj_sdeep(0);
	} else {
		uj_after_sigjmp();
		jumps++;
	}
	for (int l = 0; l < SDEEP; l++) {
		free(sblocks[l]);
		sc_free(&c_sleaf, 50 + (size_t)l);
	}
	if (sigsetjmp(mtop, 0) == 0) {
		uj_mdeep(0);
	} else {
		uj_after_mjmp();
		jumps++;
	}
	for (int l = 0; l < MDEEP; l++) {
		free(mblocks[l]);
		sc_free(&c_mleaf, 30);
	}
	return jumps;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = uj_on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	int jumps = 0;
	for (int round = 0; round < 100; round++)
		jumps += uj_round();
	printf("ud_jmp: %d jumps\n", jumps);
	struct sc_count *const cs[] = {&c_leaf,    &c_after,     &c_sleaf,
	                               &c_handler, &c_after_sig, &c_mleaf,
	                               &c_after_m};
	ud_print_counts(stdout, cs, UD_N(cs));
	ud_caller("uj_leaf", "uj_deep");
	ud_caller("uj_after_jmp", "uj_round");
	ud_caller("uj_sleaf", "uj_sdeep");
	ud_caller("uj_handler_alloc", "uj_on_usr1");
	ud_caller("uj_after_sigjmp", "uj_round");
	ud_caller("uj_mleaf", "uj_mdeep");
	ud_caller("uj_after_mjmp", "uj_round");
	return 31;
}
