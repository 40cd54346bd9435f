/*
 * ud_probe: frames larger than a page, built with -fstack-clash-protection
 * (test_unwind_diff.sh; the Makefile has a rule for it).  Debian builds its
 * packages with that flag, and rustc probes large frames the same way: the
 * prologue walks the stack down a page at a time with the CFA defined on
 * r11 (DW_CFA_def_cfa r11), then moves it back to rsp
 * (DW_CFA_def_cfa_register rsp) and leaves the offset as it was.  A capture
 * that gave up on the whole FDE at r11 stopped every stack at the first
 * such frame above the allocation.  100 rounds i of pr_outer, whose frame
 * holds 40,000 bytes, calling pr_middle (24,000 bytes), which calls
 * pr_alloc: malloc(32 + i % 16), freed every other round.  Exits 39.
 */
#include "ud_common.h"

#define NOIPA __attribute__((noipa))

static struct sc_count c_alloc = {"pr_alloc"};

NOIPA void *pr_alloc(size_t n)
{
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_alloc, p, n);
	return p;
}

NOIPA size_t pr_middle(int i)
{
	volatile char buf[24000];
	memset((char *)buf, i, sizeof(buf));
	void *p = pr_alloc(32 + (size_t)(i % 16) + (size_t)(buf[i] != i));
	if (i % 2) {
		free(p);
		sc_free(&c_alloc, 32 + (size_t)(i % 16));
	}
	return (size_t)buf[100];
}

NOIPA size_t pr_outer(int i)
{
	volatile char buf[40000];
	memset((char *)buf, i, sizeof(buf));
	return pr_middle(i) + (size_t)buf[i];
}

int main(void)
{
	size_t s = 0;
	for (int i = 0; i < 100; i++)
		s += pr_outer(i);
	sc_sink += s;
	printf("ud_probe: 100 rounds\n");
	struct sc_count *const all[] = {&c_alloc};
	ud_print_counts(stdout, all, UD_N(all));
	ud_caller("pr_alloc", "pr_middle");
	printf("stack pr_alloc pr_middle pr_outer main\n");
	return 39;
}
