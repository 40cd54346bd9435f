/*
 * The profile database schema, shared by the writer (which creates it) and
 * the reader (which checks a file has it before reading).
 */
#ifndef HEAPPROF_STORE_SCHEMA_H
#define HEAPPROF_STORE_SCHEMA_H

#define PROFILE_FORMAT_VERSION 1

/* heapprof_meta key of a live snapshot's database: CLOCK_REALTIME -
 * CLOCK_BOOTTIME (ns) when the snapshot was taken, so a pprof of it gets
 * its exact wall time. */
#define PROFILE_META_CLOCK_OFFSET "realtime_minus_boottime_ns"

/* heapprof_process.rejected_concurrent: why a process has a row and no
 * profile.  0: it has one. */
enum prof_not_profiled {
	PROF_NOT_PROFILED_CONCURRENT = 1, /* another session profiles it */
	/* The session wanted it (a child to follow, an image exec'd) but
	 * it stopped waiting for the collector's answer (100 ms unless
	 * record launched it) and ran unprofiled. */
	PROF_NOT_PROFILED_GAVE_UP = 2,
};

/* SQL creating every table and index (several statements). */
extern const char profile_schema_sql[];

/* SQL creating the large secondary indexes, run when the profile closes. */
extern const char profile_index_sql[];

/* Tables every heapprof profile has; NULL-terminated. */
extern const char *const profile_required_tables[];

#endif
