/*
 * The flame graph page (page.c): the template of assets.h with a
 * profile's data in it, as `heapprof flamegraph` writes it.
 */
#ifndef HEAPPROF_FLAMEGRAPH_PAGE_H
#define HEAPPROF_FLAMEGRAPH_PAGE_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

#include "profile/aggregate.h"
#include "profile/reader.h"

struct fg_page_opts {
	const char *file;     /* the profile, named on the page */
	enum rd_view view;    /* shown first */
	struct ag_window win; /* --from/--to */
};

/*
 * The page of the profile db (stacks s) to f, through a buffer of its own.
 * 0, or negative errno (message printed); *werr gets the errno of the
 * first write that failed, or 0.
 */
int fg_page_write(FILE *f, sqlite3 *db, const struct rd_stacks *s,
                  const struct fg_page_opts *o, int *werr);

#endif
