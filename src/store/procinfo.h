/*
 * What `heapprof report` shows of a process besides its stacks: its
 * counters (heapprof_process_stats), its heaps and their totals at a dump,
 * their sampling intervals, the memory of the process beside the profile
 * (heapprof_dump_memory), and where it sits in the tree of the profile's
 * processes.  Read from a profile opened with reader.h.
 */
#ifndef HEAPPROF_STORE_PROCINFO_H
#define HEAPPROF_STORE_PROCINFO_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/reader.h"

/* Counter `name` of process upid (heapprof_process_stats); 0 if absent. */
int64_t pi_stat(sqlite3 *db, int64_t upid, const char *name);

/* A heap's sampling interval from heapprof_heap (-1: not known, e.g. a
 * profile written before that table). */
int64_t pi_heap_interval(sqlite3 *db, int64_t upid, const char *heap);

/* Heaps the program registered that the session did not select, by
 * heap_id ("?" for a NULL name; none when the table is absent).  0 or
 * -ENOMEM. */
int pi_unselected_heaps(sqlite3 *db, int64_t upid, char ***out, size_t *n);
void pi_free_names(char **names, size_t n);

/* 1 when most of the process's stacks (callsites with allocations) are
 * under 2 frames deep, with *avg their average depth; else 0. */
int pi_short_stacks(sqlite3 *db, int64_t upid, double *avg);

/* ---- the memory of the process beside the profile ----------------------- */

struct pi_memory {
	int64_t rss, rss_anon, rss_peak, m_system, m_in_use, m_free;
	unsigned have_rss : 1, have_peak : 1, have_malloc : 1, at_exit : 1;
	unsigned malloc_foreign : 1;
	/* Its memory cgroup at the dump ("cgroup v1" or "cgroup v2" in
	 * cg_source; "" when none was recorded), limit 0: none. */
	int64_t cg_limit, cg_usage, cg_peak;
	char cg_source[16];
	/* heapprof's shared tables in memory, and of them what heapprof
	 * allocated itself (charged to its own cgroup); have_tables 0 in
	 * profiles before they were recorded. */
	int64_t tables, tables_ours;
	unsigned have_tables : 1;
};

/* The memory rows of one dump (profiles before this table have none).  0,
 * or -1 ("heapprof: <subsys>: reading process memory: ..." printed). */
int pi_load_memory(sqlite3 *db, const char *subsys, int64_t upid, int64_t ts,
                   struct pi_memory *m);

/*
 * The memory rows of process upid at the dump at ts as they are stored
 * (heapprof_dump_memory: name, value), by name: row(ctx, name, value) for
 * each.  Nothing in profiles that predate the table.
 */
void pi_dump_memory_rows(sqlite3 *db, int64_t upid, int64_t ts,
                         void (*row)(void *ctx, const char *name,
                                     int64_t value),
                         void *ctx);

/*
 * The wall-clock time (ns since the Unix epoch) of the boot-time timestamp
 * ts of profile db, or 0 if the file does not tell.  The file records when
 * it was created (to the second) just before its first process started, so
 * this is that time plus ts - the earliest process start: right to about a
 * second.
 */
int64_t pi_wall_time(sqlite3 *db, int64_t ts);
/* The same, exact when the file says how its clocks relate (a snapshot's
 * PROFILE_META_CLOCK_OFFSET). */
int64_t pi_wall_time_exact(sqlite3 *db, int64_t ts);

/* ---- the processes as a tree -------------------------------------------- */

/*
 * The processes of a profile as a tree: procs[par[i]] is the parent of
 * procs[i], or par[i] = -1 for a root.  An exec'd image (how = exec) is
 * the child of the image it replaced (the row of the same pid before it);
 * any other process the child of the row of its parent pid that was
 * running when it started (the newest of them that started before it).
 * order[] gets the processes parent first, children by start time
 * (upid on ties), depth[] their depth.
 */
void pi_tree(const struct rd_process *procs, size_t n, long *par, size_t *order,
             int *depth);

#endif
