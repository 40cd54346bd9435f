/*
 * ud_common.h: shared by the progs/ud_* programs of test_unwind_diff.sh
 * (the unwind oracle's differential test), on top of safe_common.h.
 *
 * Besides the "count FUNC ao as o s" lines of safe_common.h (every counted
 * allocation is a malloc-family call or a new written directly in FUNC, so
 * FUNC is the leaf frame of its stack), a program prints
 *     caller FUNC PARENT      every stack whose leaf is FUNC has PARENT as
 *                             its second frame (PARENT may hold spaces: a
 *                             demangled C++ name)
 *     stack FUNC F1 F2 ...    the first frames of every such stack are
 *                             FUNC F1 F2 ... (tail calls: what is missing)
 *     allocations N           the counted allocations, sum of the ao
 *                             column: the oracle must have checked at
 *                             least that many captures
 * Lines whose numbers depend on timing go to stderr (a bare run's stdout
 * must be reproduced byte for byte); the test reads both.
 */
#ifndef UD_COMMON_H
#define UD_COMMON_H

#include "safe_common.h"

/* Prints the count lines of cs[0..n) to f, then "allocations N". */
static inline void ud_print_counts(FILE *f, struct sc_count *const *cs, int n)
{
	long total = 0;
	for (int i = 0; i < n; i++) {
		fprintf(f, "count %s %ld %ld %ld %ld\n", cs[i]->name, cs[i]->ao,
		        cs[i]->as, cs[i]->o, cs[i]->s);
		total += cs[i]->ao;
	}
	fprintf(f, "allocations %ld\n", total);
}

static inline void ud_caller(const char *leaf, const char *parent)
{
	printf("caller %s %s\n", leaf, parent);
}

#define UD_N(a) ((int)(sizeof(a) / sizeof((a)[0])))

#endif
