/*
 * Reading a snapshot's live blocks back (heapprof_block rows, written for a
 * dump that holds every live block: `heapprof snapshot`, named snapshots).
 * A profile written before snapshots existed has no heapprof_block table:
 * it reads as having no blocks.
 *
 * Errors: functions print one line "heapprof: <subsys>: ..." to stderr and
 * return a negative errno.
 */
#ifndef HEAPPROF_STORE_BLOCKS_H
#define HEAPPROF_STORE_BLOCKS_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/* One live block of a dump (struct prof_block as stored). */
struct rd_block {
	uint64_t address; /* malloc's pointer; a custom heap's id */
	int64_t size;     /* requested bytes */
	int64_t charged;  /* bytes charged (sampled: the estimate) */
	int64_t objects_fp;
	int64_t callsite; /* leaf callsite */
	int64_t tid;      /* 0: unknown (layout v1) */
	int64_t ts;       /* CLOCK_BOOTTIME of the allocation; 0: unknown */
};

/* What a dump kept of its live blocks. */
struct rd_block_summary {
	int64_t nblocks, bytes; /* every heap; bytes = sum of sizes */
	int64_t charged;        /* sum of charged bytes */
	/* heapprof_dump.blocks_in_flight; -1 if the file does not say */
	int64_t in_flight;
};

/*
 * The blocks of dump dump_id (heapprof_dump.id) in heap `heap` (NULL:
 * every heap), by callsite then address.  *out is NULL and *n 0 when there
 * are none.  0 or a negative errno (message printed).
 */
int blocks_load(sqlite3 *db, const char *subsys, int64_t dump_id,
                const char *heap, struct rd_block **out, size_t *n);

/* Counts and sums of dump dump_id's blocks.  0 or a negative errno. */
int blocks_summary(sqlite3 *db, const char *subsys, int64_t dump_id,
                   struct rd_block_summary *out);

/*
 * fn(arg, dump_id, heap, size, charged, objects_fp) for every block kept
 * by the dumps of process upid, grouped by dump (heap NULL when the row
 * has none).  fn's non-zero result stops the walk and is returned
 * (-ENOMEM said); else 0 or a negative errno (message printed).
 */
int blocks_each(sqlite3 *db, const char *subsys, int64_t upid,
                int (*fn)(void *arg, int64_t dump_id, const char *heap,
                          int64_t size, int64_t charged, int64_t objects_fp),
                void *arg);

/* Objects of fixed-point objects_fp (16.16), rounded to the nearest. */
int64_t blocks_objects(int64_t objects_fp);

#endif
