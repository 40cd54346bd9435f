/*
 * safe_exc: C++ exceptions thrown through allocating frames
 * (test_safety.sh).  Also built with -static-libgcc -static-libstdc++ as
 * safe_static_libgcc (the Makefile), where the program's unwinder is its
 * own static copy of libgcc's.
 *   se_level   recursion 25 deep; each level malloc(80 + 8 * level) into
 *              an RAII holder that frees it while the exception unwinds;
 *              every 3rd level keeps one more block (se_keep: malloc(40),
 *              live); the bottom throws a std::runtime_error (its object
 *              comes from __cxa_allocate_exception -> malloc); 200 rounds
 *   se_catch   the catch block allocates (malloc(24), freed) and, every
 *              10th round, rethrows to an outer handler
 * Exits 25.
 */
#include <stdexcept>
#include <string>

#include "safe_common.h"

static struct sc_count c_level = {"se_level"}, c_keep = {"se_keep"},
                       c_catch = {"se_catch"};

struct Holder {
	void *p;
	size_t n;
	Holder(void *q, size_t m) : p(q), n(m)
	{
	}
	~Holder()
	{
		free(p);
		sc_free(&c_level, n);
	}
};

extern "C" NOINLINE void se_keep(void)
{
	void *p = malloc(40);
	sc_touch(p, 40);
	sc_alloc(&c_keep, p, 40);
}

extern "C" NOINLINE void se_level(int level)
{
	size_t n = 80 + 8 * (size_t)level;
	void *p = malloc(n);
	sc_touch(p, n);
	sc_alloc(&c_level, p, n);
	Holder h(p, n);
	if (level % 3 == 0)
		se_keep();
	if (level == 24)
		throw std::runtime_error("bottom of the recursion");
	se_level(level + 1);
}

extern "C" NOINLINE void se_catch(void)
{
	void *p = malloc(24);
	sc_touch(p, 24);
	sc_alloc(&c_catch, p, 24);
	free(p);
	sc_free(&c_catch, 24);
}

static int round_trip(int round)
{
	try {
		se_level(0);
	} catch (const std::runtime_error &e) {
		se_catch();
		if (round % 10 == 0)
			throw;
		return 1;
	}
	return 0;
}

int main()
{
	int caught = 0, outer = 0;
	for (int round = 0; round < 200; round++) {
		try {
			caught += round_trip(round);
		} catch (const std::exception &e) {
			outer++;
		}
	}
	printf("caught %d, rethrown %d\n", caught, outer);
	sc_print(&c_level);
	sc_print(&c_keep);
	sc_print(&c_catch);
	return 25;
}
