/*
 * Offline symbolization of a profile (`heapprof symbolize`,
 * docs/SYMBOLIZE.md): source files, lines and inlined functions from
 * DWARF into stack_profile_symbol, and function names for the frames
 * recorded without one, from module files found by build ID (locate.h).
 */
#ifndef HEAPPROF_SYMBOLIZE_OFFLINE_H
#define HEAPPROF_SYMBOLIZE_OFFLINE_H

#include <sqlite3.h>
#include <stddef.h>

/* Where the module files are looked for (locator_new). */
struct symbolize_where {
	const char *binary_path; /* HEAPPROF_BINARY_PATH; NULL: none */
	int index;      /* search binary_path recursively for build IDs */
	int debuginfod; /* ask the servers of DEBUGINFOD_URLS */
	int verbose;    /* print the file used for each module */
};

/* What a run did, for the summary line. */
struct symbolize_totals {
	size_t real_frames, symbolized, symbols, named;
	size_t real_mods, found_mods;
};

/*
 * Symbolize the profile db (opened read-write; path for messages) in one
 * transaction.  Modules not found, and those found without DWARF, are
 * said on stderr as they are met.  0 with *t filled, or a negative errno
 * (its message said; the profile unchanged).
 */
int symbolize_profile(sqlite3 *db, const char *path,
                      const struct symbolize_where *w,
                      struct symbolize_totals *t);

#endif
