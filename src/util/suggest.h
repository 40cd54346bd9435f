/* "Did you mean": see suggest.c. */
#ifndef HEAPPROF_UTIL_SUGGEST_H
#define HEAPPROF_UTIL_SUGGEST_H

#include <stddef.h>

/*
 * The candidate closest to word, for "did you mean '...'?": within a
 * Damerau-Levenshtein distance of 2 (1 for words of up to 4 characters),
 * or one that word is a prefix of (at least 2 characters); ties go to the
 * first.  NULL when none is close.  Leading dashes are ignored on both
 * sides, so "--shmem-sise" finds "--shmem-size" as well as "shmem-size".
 */
const char *hp_suggest(const char *word, const char *const *cands, size_t n);

#endif
