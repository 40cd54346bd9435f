/*
 * The profile database schema (see schema.h).  Perfetto's tables keep
 * Perfetto's names and columns so its example queries run verbatim; the
 * heapprof_* tables hold what Perfetto keeps elsewhere in its trace
 * (process config, per-process counters, dump list, file metadata).
 *
 * Columns are only ever added (the format version stays 1): a profile
 * written before a column existed lacks it, and readers treat a missing
 * column as NULL (reader.c checks PRAGMA table_info).
 */
#include <stddef.h>

#include "profile/schema.h"

const char profile_schema_sql[] =
        "CREATE TABLE heapprof_meta(key TEXT PRIMARY KEY, value TEXT);\n"
        "CREATE TABLE stack_profile_mapping(id INTEGER PRIMARY KEY, type TEXT,"
        " build_id TEXT, exact_offset INT, start_offset INT, start INT,"
        " \"end\" INT, load_bias INT, name TEXT);\n"
        "CREATE TABLE stack_profile_frame(id INTEGER PRIMARY KEY, type TEXT,"
        " name TEXT, mapping INT, rel_pc INT, symbol_set_id INT,"
        " deobfuscated_name TEXT, system_name TEXT);\n"
        "CREATE TABLE stack_profile_callsite(id INTEGER PRIMARY KEY, type TEXT,"
        " depth INT, parent_id INT, frame_id INT);\n"
        "CREATE TABLE stack_profile_symbol(id INTEGER PRIMARY KEY, type TEXT,"
        " symbol_set_id INT, name TEXT, source_file TEXT, line_number INT);\n"
        "CREATE TABLE heap_profile_allocation(id INTEGER PRIMARY KEY,"
        " type TEXT, ts INT, upid INT, heap_name TEXT, callsite_id INT,"
        " count INT, size INT);\n"
        "CREATE TABLE process(upid INTEGER PRIMARY KEY, pid INT, name TEXT,"
        " cmdline TEXT, start_ts INT, end_ts INT);\n"
        "CREATE TABLE heapprof_process(upid INTEGER PRIMARY KEY,"
        " sampling_interval INT, unwind TEXT, max_frames INT, shmem_size INT,"
        " from_startup INT, rejected_concurrent INT, disconnected INT,"
        " exit_status INT, client_state INT, stop_reason INT, how TEXT,"
        " ppid INT, session_id INT, note TEXT, interval_used INT,"
        " max_live_bytes INT, max_ts INT);\n"
        "CREATE TABLE heapprof_process_stats(upid INT, name TEXT, value INT);\n"
        "CREATE TABLE heapprof_heap(upid INT, heap_id INT, name TEXT,"
        " sampling_interval INT, PRIMARY KEY(upid, heap_id));\n"
        "CREATE TABLE heapprof_dump(id INTEGER PRIMARY KEY, ts INT, upid INT,"
        " reason TEXT, at_max INT, max_ts INT, max_live_bytes INT,"
        " interval_used INT);\n"
        "CREATE TABLE heapprof_dump_memory(upid INT, ts INT, name TEXT,"
        " value INT, source TEXT);\n"
        "CREATE INDEX heapprof_process_stats_upid"
        " ON heapprof_process_stats(upid, name);\n"
        "CREATE INDEX heapprof_dump_upid_ts ON heapprof_dump(upid, ts);\n";

/*
 * Built once at close: maintaining them row by row would double the cost
 * of writing a dump.  A profile left by a crash lacks them; every query
 * still works, only slower.
 */
const char profile_index_sql[] =
        "CREATE INDEX IF NOT EXISTS heap_profile_allocation_upid_ts"
        " ON heap_profile_allocation(upid, ts);\n"
        "CREATE INDEX IF NOT EXISTS heap_profile_allocation_callsite"
        " ON heap_profile_allocation(callsite_id);\n"
        "CREATE INDEX IF NOT EXISTS stack_profile_callsite_parent"
        " ON stack_profile_callsite(parent_id);\n";

const char *const profile_required_tables[] = {
        "heapprof_meta",
        "stack_profile_mapping",
        "stack_profile_frame",
        "stack_profile_callsite",
        "stack_profile_symbol",
        "heap_profile_allocation",
        "process",
        "heapprof_process",
        "heapprof_process_stats",
        "heapprof_dump",
        NULL,
};
