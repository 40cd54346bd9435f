/*
 * ud_exc: C++ exceptions thrown through allocating frames
 * (test_unwind_diff.sh).  200 rounds of ue_round:
 *   ue_leaf          ue_level recurses 30 deep; each level gets
 *                    new char[64 + level] from ue_leaf into a Holder, whose
 *                    destructor frees it while the exception unwinds
 *   ue_cleanup       ~Holder allocates too (malloc(32 + level), freed): an
 *                    allocation from a landing pad, in phase 2 of unwinding
 *   ue_rethrow_alloc levels 5, 10, .. 25 catch (...), allocate
 *                    (malloc(48), freed) and rethrow
 *   ue_after_catch   ue_round's catch block: malloc(24), every 4th kept
 *   ue_after_try     right after the try statement: malloc(16), freed
 * The bottom level throws a std::runtime_error (its object comes from
 * __cxa_allocate_exception: not counted).  Exits 30.
 */
#include <stdexcept>

#include "ud_common.h"

static struct sc_count c_leaf = {"ue_leaf"}, c_cleanup = {"ue_cleanup"},
                       c_rethrow = {"ue_rethrow_alloc"},
                       c_after_catch = {"ue_after_catch"},
                       c_after_try = {"ue_after_try"};

#define DEPTH 30

extern "C" NOINLINE void ue_cleanup(int level)
{
	size_t n = 32 + (size_t)level;
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_cleanup, p, n);
	free(p);
	sc_free(&c_cleanup, n);
}

struct Holder {
	char *p;
	size_t n;
	int level;
	Holder(char *q, size_t m, int l) : p(q), n(m), level(l)
	{
	}
	NOINLINE ~Holder()
	{
		ue_cleanup(level);
		delete[] p;
		sc_free(&c_leaf, n);
	}
};

extern "C" NOINLINE char *ue_leaf(int level)
{
	size_t n = 64 + (size_t)level;
	char *p = new char[n];
	sc_touch(p, n);
	sc_alloc(&c_leaf, p, n);
	return p;
}

extern "C" NOINLINE void ue_rethrow_alloc(void)
{
	void *p = malloc(48);
	sc_touch(p, 48);
	sc_alloc(&c_rethrow, p, 48);
	free(p);
	sc_free(&c_rethrow, 48);
}

extern "C" NOINLINE void ue_level(int level)
{
	Holder h(ue_leaf(level), 64 + (size_t)level, level);
	if (level == DEPTH - 1)
		throw std::runtime_error("bottom");
	if (level > 0 && level % 5 == 0) {
		try {
			ue_level(level + 1);
		} catch (...) {
			ue_rethrow_alloc();
			throw;
		}
	} else {
		ue_level(level + 1);
	}
}

static void *kept[64];
static int nkept;

extern "C" NOINLINE void ue_after_catch(int round)
{
	void *p = malloc(24);
	sc_touch(p, 24);
	sc_alloc(&c_after_catch, p, 24);
	if (round % 4 == 0 && nkept < 64) {
		kept[nkept++] = p;
		return;
	}
	free(p);
	sc_free(&c_after_catch, 24);
}

extern "C" NOINLINE void ue_after_try(void)
{
	void *p = malloc(16);
	sc_touch(p, 16);
	sc_alloc(&c_after_try, p, 16);
	free(p);
	sc_free(&c_after_try, 16);
}

extern "C" NOINLINE int ue_round(int round)
{
	int caught = 0;
	try {
		ue_level(0);
	} catch (const std::runtime_error &e) {
		ue_after_catch(round);
		caught = 1;
	}
	ue_after_try();
	return caught;
}

int main()
{
	int caught = 0;
	for (int round = 0; round < 200; round++)
		caught += ue_round(round);
	printf("ud_exc: %d exceptions caught\n", caught);
	struct sc_count *const cs[] = {&c_leaf, &c_cleanup, &c_rethrow,
	                               &c_after_catch, &c_after_try};
	ud_print_counts(stdout, cs, UD_N(cs));
	ud_caller("ue_leaf", "ue_level");
	ud_caller("ue_cleanup", "Holder::~Holder()");
	ud_caller("ue_rethrow_alloc", "ue_level");
	ud_caller("ue_after_catch", "ue_round");
	ud_caller("ue_after_try", "ue_round");
	return 30;
}
