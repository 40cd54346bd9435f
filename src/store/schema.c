/*
 * The profile database schema (see schema.h).  Perfetto's tables keep
 * Perfetto's names and columns so its example queries run verbatim; the
 * heapprof_* tables hold what Perfetto keeps elsewhere in its trace
 * (process config, per-process counters, dump list, file metadata).
 *
 * Columns are only ever added (the format version stays 1): a profile
 * written before a column existed lacks it, and readers treat a missing
 * column as NULL (reader.c checks PRAGMA table_info).
 *
 * `type` holds the table's name, as in Perfetto.  In the two tables that
 * grow with the program (stack_profile_callsite, heap_profile_allocation)
 * it is a generated column, computed when read instead of stored: it was
 * a third of their bytes.  Older profiles store it; both read the same.
 *
 * The event trace was a table of rows, heapprof_event, one per event; it
 * is now stored in compressed chunks, and heapprof_event is a virtual
 * table over them with the same columns (docs/TRACE.md).  Readers tell
 * the two apart by heapprof_event_chunk (trace_read.h, tr_events_form).
 */
#include <stddef.h>

#include "store/schema.h"

const char profile_schema_sql[] =
        "CREATE TABLE heapprof_meta(key TEXT PRIMARY KEY, value TEXT);\n"
        "CREATE TABLE stack_profile_mapping(id INTEGER PRIMARY KEY, type TEXT,"
        " build_id TEXT, exact_offset INT, start_offset INT, start INT,"
        " \"end\" INT, load_bias INT, name TEXT, resolved_name TEXT);\n"
        "CREATE TABLE stack_profile_frame(id INTEGER PRIMARY KEY, type TEXT,"
        " name TEXT, mapping INT, rel_pc INT, symbol_set_id INT,"
        " deobfuscated_name TEXT, system_name TEXT);\n"
        "CREATE TABLE stack_profile_callsite(id INTEGER PRIMARY KEY,"
        " type TEXT GENERATED ALWAYS AS ('stack_profile_callsite') VIRTUAL,"
        " depth INT, parent_id INT, frame_id INT);\n"
        "CREATE TABLE stack_profile_symbol(id INTEGER PRIMARY KEY, type TEXT,"
        " symbol_set_id INT, name TEXT, source_file TEXT, line_number INT);\n"
        "CREATE TABLE heap_profile_allocation(id INTEGER PRIMARY KEY,"
        " type TEXT GENERATED ALWAYS AS ('heap_profile_allocation') VIRTUAL,"
        " ts INT, upid INT, heap_name TEXT, callsite_id INT,"
        " count INT, size INT);\n"
        "CREATE TABLE process(upid INTEGER PRIMARY KEY, pid INT, name TEXT,"
        " cmdline TEXT, start_ts INT, end_ts INT);\n"
        "CREATE TABLE heapprof_process(upid INTEGER PRIMARY KEY,"
        " sampling_interval INT, unwind TEXT, max_frames INT, shmem_size INT,"
        " from_startup INT, rejected_concurrent INT, disconnected INT,"
        " exit_status INT, client_state INT, stop_reason INT, how TEXT,"
        " ppid INT, session_id INT, note TEXT, interval_used INT,"
        " max_live_bytes INT, max_ts INT, exec_not_followed TEXT,"
        " children_not_followed INT);\n"
        "CREATE TABLE heapprof_process_stats(upid INT, name TEXT, value INT);\n"
        "CREATE TABLE heapprof_heap(upid INT, heap_id INT, name TEXT,"
        " sampling_interval INT, PRIMARY KEY(upid, heap_id));\n"
        "CREATE TABLE heapprof_dump(id INTEGER PRIMARY KEY, ts INT, upid INT,"
        " reason TEXT, at_max INT, max_ts INT, max_live_bytes INT,"
        " interval_used INT, name TEXT, blocks_in_flight INT,"
        " write_ms REAL);\n"
        /* A snapshot dump's live blocks (prof_block). */
        "CREATE TABLE heapprof_block(dump_id INT, upid INT, address INT,"
        " size INT, charged INT, objects_fp INT, heap_name TEXT,"
        " callsite_id INT, tid INT, ts INT);\n"
        /* The event trace (prof_event): chunks of events of a process,
         * compressed (evchunk.h); their heap names by id; and
         * heapprof_event, the events as rows (kind is 'alloc' or
         * 'free'), a virtual table over the chunks (event_vtab.c).
         * Profiles written before chunks hold heapprof_event as a table
         * of rows with the same columns. */
        "CREATE TABLE heapprof_event_chunk(id INTEGER PRIMARY KEY,"
        " upid INT, events INT, allocs INT, min_ts INT, max_ts INT,"
        " data BLOB);\n"
        "CREATE TABLE heapprof_event_heap(upid INT, id INT, name TEXT,"
        " PRIMARY KEY(upid, id));\n"
        "CREATE VIRTUAL TABLE heapprof_event USING heapprof_events;\n"
        "CREATE TABLE heapprof_trace_stack(upid INT, stack_key INT,"
        " callsite_id INT, PRIMARY KEY(upid, stack_key));\n"
        "CREATE TABLE heapprof_trace(upid INTEGER PRIMARY KEY, mode TEXT,"
        " buffer_bytes INT, events INT, dropped_allocs INT,"
        " dropped_frees INT, dropped_alloc_bytes INT,"
        " dropped_free_bytes INT, overwritten INT, incomplete INT,"
        " full_ts INT, waits INT, wait_ns INT);\n"
        "CREATE VIEW heapprof_event_callsite AS SELECT e.*, s.callsite_id"
        " FROM heapprof_event e LEFT JOIN heapprof_trace_stack s"
        " ON s.upid = e.upid AND s.stack_key = e.stack_key;\n"
        "CREATE TABLE heapprof_dump_memory(upid INT, ts INT, name TEXT,"
        " value INT, source TEXT);\n"
        /* Memory over time (writer_counters.c), as Perfetto keeps a
         * process's counters. */
        "CREATE TABLE process_counter_track(id INTEGER PRIMARY KEY,"
        " type TEXT GENERATED ALWAYS AS ('process_counter_track') VIRTUAL,"
        " name TEXT, upid INT, unit TEXT, description TEXT);\n"
        "CREATE TABLE counter(id INTEGER PRIMARY KEY,"
        " type TEXT GENERATED ALWAYS AS ('counter') VIRTUAL,"
        " ts INT, track_id INT, value DOUBLE);\n"
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
        " ON stack_profile_callsite(parent_id);\n"
        "CREATE INDEX IF NOT EXISTS heapprof_block_dump"
        " ON heapprof_block(dump_id);\n";

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
