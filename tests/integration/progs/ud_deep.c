/*
 * ud_deep: recursion deeper than the default --max-frames (64), allocating
 * at every level (test_unwind_diff.sh; also run with --max-frames 200,
 * where no stack is cut).  50 rounds of:
 *   ud_rec60   60 levels; each level malloc(200 + level) itself (freed on
 *              the way back up unless level % 4 == 0) and through ud_leaf60
 *              (malloc(24), freed)
 *   ud_rec100  the same 100 levels deep: malloc(300 + level) (freed unless
 *              level % 5 == 0) and ud_leaf100 (malloc(40), freed)
 * Exits 34.
 */
#include "ud_common.h"

static struct sc_count c_rec60 = {"ud_rec60"}, c_leaf60 = {"ud_leaf60"},
                       c_rec100 = {"ud_rec100"}, c_leaf100 = {"ud_leaf100"};

NOINLINE void ud_leaf60(void)
{
	void *p = malloc(24);
	sc_touch(p, 24);
	sc_alloc(&c_leaf60, p, 24);
	free(p);
	sc_free(&c_leaf60, 24);
}

NOINLINE void ud_rec60(int level)
{
	size_t n = 200 + (size_t)level;
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_rec60, p, n);
	ud_leaf60();
	if (level < 59)
		ud_rec60(level + 1);
	if (level % 4 != 0) {
		free(p);
		sc_free(&c_rec60, n);
	}
}

NOINLINE void ud_leaf100(void)
{
	void *p = malloc(40);
	sc_touch(p, 40);
	sc_alloc(&c_leaf100, p, 40);
	free(p);
	sc_free(&c_leaf100, 40);
}

NOINLINE void ud_rec100(int level)
{
	size_t n = 300 + (size_t)level;
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_rec100, p, n);
	ud_leaf100();
	if (level < 99)
		ud_rec100(level + 1);
	if (level % 5 != 0) {
		free(p);
		sc_free(&c_rec100, n);
	}
}

int main(void)
{
	for (int round = 0; round < 50; round++) {
		ud_rec60(0);
		ud_rec100(0);
	}
	printf("ud_deep: done\n");
	struct sc_count *const cs[] = {&c_rec60, &c_leaf60, &c_rec100,
	                               &c_leaf100};
	ud_print_counts(stdout, cs, UD_N(cs));
	ud_caller("ud_leaf60", "ud_rec60");
	ud_caller("ud_leaf100", "ud_rec100");
	return 34;
}
