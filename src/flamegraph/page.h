/*
 * The flame graph page (page.c): the template of assets.h with a
 * profile's data in it, as `heapprof flamegraph` writes it.
 */
#ifndef HEAPPROF_FLAMEGRAPH_PAGE_H
#define HEAPPROF_FLAMEGRAPH_PAGE_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

#include "analysis/aggregate.h"
#include "store/reader.h"

/* The dump a process opens on (--dump), by its upid: 0-based. */
struct fg_open_dump {
	int64_t upid;
	long index;
};

struct fg_page_opts {
	const char *file;     /* the profile, named on the page */
	enum rd_view view;    /* shown first */
	struct ag_window win; /* --from/--to */
	/* --dump: the dump each process opens on (else its peak's, or its
	 * last); n of them. */
	const struct fg_open_dump *open;
	size_t nopen;
};

/*
 * The page of the profile db (stacks s) to f, through a buffer of its own.
 * 0, or negative errno (message printed); *werr gets the errno of the
 * first write that failed, or 0.
 */
int fg_page_write(FILE *f, sqlite3 *db, const struct rd_stacks *s,
                  const struct fg_page_opts *o, int *werr);

#endif
