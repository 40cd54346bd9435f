/*
 * The profile database schema, shared by the writer (which creates it) and
 * the reader (which checks a file has it before reading).
 */
#ifndef HEAPPROF_PROFILE_SCHEMA_H
#define HEAPPROF_PROFILE_SCHEMA_H

#define PROFILE_FORMAT_VERSION 1

/* SQL creating every table and index (several statements). */
extern const char profile_schema_sql[];

/* SQL creating the large secondary indexes, run when the profile closes. */
extern const char profile_index_sql[];

/* Tables every heapprof profile has; NULL-terminated. */
extern const char *const profile_required_tables[];

#endif
