/*
 * A minimal unit-test harness: CHECK() records a failure and goes on,
 * unit_main() runs the registered tests and prints "N passed, N failed".
 */
#ifndef HEAPPROF_UNIT_H
#define HEAPPROF_UNIT_H

#include <stdio.h>
#include <string.h>

static int unit_failed_checks;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
			        __LINE__, #cond);                              \
			unit_failed_checks++;                                  \
		}                                                              \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                     \
	do {                                                                   \
		unsigned long long a_ = (unsigned long long)(a);               \
		unsigned long long b_ = (unsigned long long)(b);               \
		if (a_ != b_) {                                                \
			fprintf(stderr,                                        \
			        "%s:%d: CHECK failed: %s == %s (%llu != "      \
			        "%llu)\n",                                     \
			        __FILE__, __LINE__, #a, #b, a_, b_);           \
			unit_failed_checks++;                                  \
		}                                                              \
	} while (0)

struct unit_test {
	const char *name;
	void (*fn)(void);
};

static inline int unit_main(const char *suite, const struct unit_test *t)
{
	int passed = 0, failed = 0;
	for (; t->name; t++) {
		int before = unit_failed_checks;
		t->fn();
		if (unit_failed_checks == before) {
			passed++;
			printf("ok   %s.%s\n", suite, t->name);
		} else {
			failed++;
			printf("FAIL %s.%s\n", suite, t->name);
		}
	}
	printf("%s: %d passed, %d failed\n", suite, passed, failed);
	return failed ? 1 : 0;
}

#endif
