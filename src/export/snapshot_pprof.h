/*
 * The pprof of a snapshot (`heapprof snapshot`): of the database a live
 * snapshot just wrote, or of a named snapshot in a profile (--name).  A
 * dump that kept its blocks gives one sample per leaf callsite (the
 * blocks summed), or with_tags one per block, labelled with its address,
 * timestamp and thread; a dump without blocks gives the per-stack
 * counters at the dump, as `heapprof pprof --dump`.
 *
 * Errors: functions print one line "heapprof: <subsys>: ..." and return
 * -1.
 */
#ifndef HEAPPROF_EXPORT_SNAPSHOT_PPROF_H
#define HEAPPROF_EXPORT_SNAPSHOT_PPROF_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "export/pprof.h"
#include "store/blocks.h"
#include "store/reader.h"

struct snapshot_pprof_job {
	sqlite3 *db;
	const struct rd_stacks *s;
	const struct rd_process *p;
	const struct rd_dump *d;
	size_t dump_index, ndumps; /* 1-based, for the comment */
	const char *file;          /* the profile, for the comment */
	const char *heap;          /* NULL: libc.malloc */
	int with_tags;
	int64_t wall_ns; /* 0: from the file */
	const char *path;
	int go_names; /* Go's heap sample type names (pp_use_go_heap_names) */
	/* not NULL: filled with the profile's symbols (pp_symtab_make) */
	struct pp_symtab *symtab;
	/* results */
	size_t nsamples;
	int from_blocks;
	struct rd_block_summary sum;
};

/*
 * Writes the pprof of dump j->d to j->path: from its blocks when it kept
 * them, else from the per-stack counters at the dump (as `heapprof pprof
 * --dump`).  0 or -1 (message printed).
 */
int snapshot_pprof_write(struct snapshot_pprof_job *j, const char *subsys);

/* snapshot_pprof_of_db's flags */
#define SNAPSHOT_PPROF_TAGS     1u /* with_tags */
#define SNAPSHOT_PPROF_GO_NAMES 2u /* go_names */

/* The pprof of the snapshot database db_path just written (its one process
 * and dump), taken at wall (CLOCK_REALTIME, ns), to out; the samples
 * written in *nsamples; its symbols in *symtab unless NULL (free with
 * pp_symtab_free).  0 or -1 (message printed). */
int snapshot_pprof_of_db(const char *db_path, const char *out, const char *heap,
                         unsigned flags, uint64_t wall, size_t *nsamples,
                         struct pp_symtab *symtab, const char *subsys);

#endif
