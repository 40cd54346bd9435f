/*
 * What `heapprof report` shows of a process besides its stacks (see
 * procinfo.h): counters, heaps and their totals at a dump, the memory of
 * the process, and the tree of the processes of a profile.
 */
#include <errno.h>
#include <stdbool.h>
#include <time.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "store/procinfo.h"
#include "store/reader.h"
#include "store/schema.h"
#include "util/err.h"

int64_t pi_stat(sqlite3 *db, int64_t upid, const char *name)
{
	sqlite3_stmt *st = NULL;
	int64_t v = 0;

	if (sqlite3_prepare_v2(db,
	                       "SELECT value FROM heapprof_process_stats"
	                       " WHERE upid = ? AND name = ?",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return v;
}

int64_t pi_heap_interval(sqlite3 *db, int64_t upid, const char *heap)
{
	sqlite3_stmt *st = NULL;
	int64_t iv = -1;
	if (sqlite3_prepare_v2(
	            db,
	            "SELECT max(sampling_interval) FROM heapprof_heap"
	            " WHERE upid = ? AND name = ?",
	            -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_type(st, 0) != SQLITE_NULL)
			iv = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	return iv;
}

int pi_unselected_heaps(sqlite3 *db, int64_t upid, char ***out, size_t *n)
{
	sqlite3_stmt *st = NULL;
	char **names = NULL;

	*out = NULL;
	*n = 0;
	if (sqlite3_prepare_v2(db,
	                       "SELECT name FROM heapprof_heap WHERE upid = ?"
	                       " AND sampling_interval = 0 ORDER BY heap_id",
	                       -1, &st, NULL) != SQLITE_OK) {
		sqlite3_finalize(st);
		return 0;
	}
	sqlite3_bind_int64(st, 1, upid);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const unsigned char *name = sqlite3_column_text(st, 0);
		char **a = realloc(names, (*n + 1) * sizeof(*a));
		if (!a || !(a[*n] = strdup(name ? (const char *)name : "?"))) {
			names = a ? a : names;
			pi_free_names(names, *n);
			*n = 0;
			sqlite3_finalize(st);
			return -ENOMEM;
		}
		names = a;
		++*n;
	}
	sqlite3_finalize(st);
	*out = names;
	return 0;
}

void pi_free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int pi_short_stacks(sqlite3 *db, int64_t upid, double *avg)
{
	sqlite3_stmt *st = NULL;
	int most = 0;

	if (sqlite3_prepare_v2(db,
	                       "SELECT count(*), sum(c.depth < 2),"
	                       " avg(c.depth + 1) FROM stack_profile_callsite c"
	                       " WHERE c.id IN (SELECT callsite_id FROM"
	                       " heap_profile_allocation WHERE upid = ?)",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_int64(st, 0) > 0 &&
		    2 * sqlite3_column_int64(st, 1) >
		            sqlite3_column_int64(st, 0)) {
			most = 1;
			*avg = sqlite3_column_double(st, 2);
		}
	}
	sqlite3_finalize(st);
	return most;
}

/* ---- the memory of the process beside the profile ----------------------- */

int pi_load_memory(sqlite3 *db, const char *subsys, int64_t upid, int64_t ts,
                   struct pi_memory *m)
{
	sqlite3_stmt *st = NULL;

	memset(m, 0, sizeof(*m));
	if (!rd_has_table(db, "heapprof_dump_memory"))
		return 0;
	if (sqlite3_prepare_v2(
	            db,
	            "SELECT name, value, source FROM"
	            " heapprof_dump_memory WHERE upid = ? AND ts = ?",
	            -1, &st, NULL) != SQLITE_OK) {
		hp_err(subsys, "reading process memory: %s",
		       sqlite3_errmsg(db));
		return -1;
	}
	sqlite3_bind_int64(st, 1, upid);
	sqlite3_bind_int64(st, 2, ts);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *n = (const char *)sqlite3_column_text(st, 0);
		const char *src = (const char *)sqlite3_column_text(st, 2);
		int64_t v = sqlite3_column_int64(st, 1);
		if (!n)
			continue;
		if (!strcmp(n, "rss")) {
			m->rss = v;
			m->have_rss = 1;
			m->at_exit = src && !strcmp(src, "exit");
		} else if (!strcmp(n, "rss_anon")) {
			m->rss_anon = v;
		} else if (!strcmp(n, "rss_peak")) {
			m->rss_peak = v;
			m->have_peak = 1;
		} else if (!strcmp(n, "malloc_system")) {
			m->m_system = v;
			m->have_malloc = 1;
		} else if (!strcmp(n, "malloc_foreign")) {
			m->malloc_foreign = v != 0;
		} else if (!strcmp(n, "malloc_in_use")) {
			m->m_in_use = v;
		} else if (!strcmp(n, "malloc_free")) {
			m->m_free = v;
		} else if (!strcmp(n, "heapprof_tables")) {
			m->tables = v;
			m->have_tables = 1;
		} else if (!strcmp(n, "heapprof_tables_ours")) {
			m->tables_ours = v;
		} else if (!strcmp(n, "memory_limit") ||
		           !strcmp(n, "cgroup_usage") ||
		           !strcmp(n, "cgroup_peak")) {
			*(n[0] == 'm'   ? &m->cg_limit
			  : n[7] == 'u' ? &m->cg_usage
			                : &m->cg_peak) = v;
			snprintf(m->cg_source, sizeof(m->cg_source), "%s",
			         src ? src : "cgroup");
		}
	}
	sqlite3_finalize(st);
	return 0;
}

void pi_dump_memory_rows(sqlite3 *db, int64_t upid, int64_t ts,
                         void (*row)(void *ctx, const char *name,
                                     int64_t value),
                         void *ctx)
{
	sqlite3_stmt *st = NULL;

	/* Absent in profiles written before it existed: then nothing. */
	if (sqlite3_prepare_v2(db,
	                       "SELECT name, value FROM heapprof_dump_memory"
	                       " WHERE upid = ? AND ts = ? ORDER BY name",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_int64(st, 2, ts);
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *name =
			        (const char *)sqlite3_column_text(st, 0);
			if (name)
				row(ctx, name, sqlite3_column_int64(st, 1));
		}
	}
	sqlite3_finalize(st);
}

int64_t pi_wall_time(sqlite3 *db, int64_t ts)
{
	sqlite3_stmt *st = NULL;
	int64_t t = 0;
	struct tm tm;

	/* One row: created_at and the earliest process start. */
	if (sqlite3_prepare_v2(db,
	                       "SELECT (SELECT value FROM heapprof_meta"
	                       " WHERE key = 'created_at'),"
	                       " (SELECT min(start_ts) FROM process)",
	                       -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW ||
	    sqlite3_column_type(st, 1) == SQLITE_NULL)
		goto out;
	const char *created = (const char *)sqlite3_column_text(st, 0);
	int64_t start = sqlite3_column_int64(st, 1);
	memset(&tm, 0, sizeof(tm));
	const char *end =
	        created ? strptime(created, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
	if (!end || *end || ts < start)
		goto out;
	time_t secs = timegm(&tm);
	if (secs <= 0)
		goto out;
	t = (int64_t)secs * 1000000000 + (ts - start);
out:
	sqlite3_finalize(st);
	return t;
}

int64_t pi_wall_time_exact(sqlite3 *db, int64_t ts)
{
	sqlite3_stmt *st = NULL;
	int64_t t = 0;

	if (sqlite3_prepare_v2(db,
	                       "SELECT value FROM heapprof_meta WHERE key = ?",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, PROFILE_META_CLOCK_OFFSET, -1,
		                  SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW) {
			const char *v =
			        (const char *)sqlite3_column_text(st, 0);
			long long off = v ? strtoll(v, NULL, 10) : 0;
			if (off > 0)
				t = ts + off;
		}
	}
	sqlite3_finalize(st);
	return t ? t : pi_wall_time(db, ts);
}

/* ---- the processes as a tree -------------------------------------------- */

void pi_tree(const struct rd_process *procs, size_t n, long *par, size_t *order,
             int *depth)
{
	for (size_t i = 0; i < n; i++) {
		par[i] = -1;
		bool exec = !strcmp(procs[i].how, "exec");
		for (size_t k = 0; k < n; k++) {
			if (k == i)
				continue;
			if (exec ? (procs[k].pid != procs[i].pid || k > i)
			         : (procs[i].ppid <= 0 ||
			            procs[k].pid != procs[i].ppid ||
			            (procs[k].start_ts > procs[i].start_ts &&
			             procs[i].start_ts > 0)))
				continue;
			if (par[i] < 0 ||
			    procs[k].start_ts >= procs[par[i]].start_ts)
				par[i] = (long)k;
		}
	}
	/* Depth-first from the roots; siblings by start time.  A cycle
	 * (not possible from a recording, but the file is input) never
	 * reaches a root: its members are appended as roots. */
	size_t m = 0;
	bool *done = calloc(n ? n : 1, sizeof(*done));
	for (int pass = 0; pass < 2 && done; pass++)
		for (;;) {
			/* The next root: the earliest not done. */
			long r = -1;
			for (size_t i = 0; i < n; i++)
				if (!done[i] && (pass || par[i] < 0) &&
				    (r < 0 ||
				     procs[i].start_ts < procs[r].start_ts))
					r = (long)i;
			if (r < 0)
				break;
			/* Preorder: the root, then each time the earliest
			 * child not done of the deepest node that has one. */
			size_t first = m;
			done[r] = true;
			order[m] = (size_t)r;
			depth[m++] = 0;
			for (size_t at = first; at < m;) {
				long c = -1;
				size_t p = order[at];
				for (size_t i = 0; i < n; i++)
					if (!done[i] && par[i] == (long)p &&
					    (c < 0 ||
					     procs[i].start_ts <
					             procs[c].start_ts))
						c = (long)i;
				if (c < 0) {
					/* Back up to the parent's entry. */
					long up = par[p];
					size_t k = at;
					while (k > first &&
					       (long)order[k] != up)
						k--;
					if ((long)order[k] != up)
						break;
					at = k;
					continue;
				}
				/* Insert c right after p's subtree so far. */
				size_t ins = at + 1;
				while (ins < m && depth[ins] > depth[at])
					ins++;
				memmove(order + ins + 1, order + ins,
				        (m - ins) * sizeof(*order));
				memmove(depth + ins + 1, depth + ins,
				        (m - ins) * sizeof(*depth));
				order[ins] = (size_t)c;
				depth[ins] = depth[at] + 1;
				done[c] = true;
				m++;
				at = ins;
			}
		}
	for (size_t i = 0; done && i < n; i++)
		if (!done[i]) {
			order[m] = i;
			depth[m++] = 0;
		}
	if (!done)
		for (size_t i = 0; i < n; i++) {
			order[i] = i;
			depth[i] = 0;
		}
	free(done);
}
