/*
 * The profile writer (writer.c): process rows.  A process's rows in
 * process and heapprof_process, written when the collector begins it and
 * completed when it ends, each in a transaction of its own; the writer's
 * state of the process (proc_state) lives from its first row to close.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/writer_int.h"
#include "util/err.h"

struct proc_state *wr_proc_find(struct profile *p, int64_t upid)
{
	for (size_t i = 0; i < p->nprocs; i++)
		if (p->procs[i].upid == upid)
			return &p->procs[i];
	return NULL;
}

static int insert_process(struct profile *p, const struct prof_process *info,
                          int64_t *upid)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	        p->db,
	        "INSERT INTO process(pid, name, cmdline,"
	        " start_ts, end_ts, upid) VALUES(?, ?, ?, ?, NULL, ?)",
	        -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int(st, 1, info->pid);
		sqlite3_bind_text(st, 2, info->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, info->cmdline, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, i64(info->start_ts_ns));
		/* NULL: the next rowid. */
		if (info->upid > 0)
			sqlite3_bind_int64(st, 5, info->upid);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK)
		return wr_sql_err(p, rc, "adding process");
	*upid = sqlite3_last_insert_rowid(p->db);

	rc = sqlite3_prepare_v2(
	        p->db,
	        "INSERT INTO heapprof_process(upid,"
	        " sampling_interval, unwind, max_frames,"
	        " shmem_size, from_startup, rejected_concurrent,"
	        " disconnected, how, ppid, session_id, note)"
	        " VALUES(?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)",
	        -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, *upid);
		sqlite3_bind_int64(st, 2, i64(info->sampling_interval));
		sqlite3_bind_text(st, 3, info->unwind, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, info->max_frames);
		sqlite3_bind_int64(st, 5, i64(info->shmem_size));
		sqlite3_bind_int(st, 6, info->from_startup ? 1 : 0);
		sqlite3_bind_int(st, 7, info->rejected_concurrent);
		sqlite3_bind_text(st, 8, info->how ? info->how : "command", -1,
		                  SQLITE_STATIC);
		/* Unknown (0) is stored as NULL. */
		if (info->ppid > 0)
			sqlite3_bind_int(st, 9, info->ppid);
		if (info->session_id)
			sqlite3_bind_int64(st, 10, i64(info->session_id));
		if (info->note)
			sqlite3_bind_text(st, 11, info->note, -1,
			                  SQLITE_STATIC);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK ? 0 : wr_sql_err(p, rc, "adding process");
}

int profile_begin_process(struct profile *p, const struct prof_process *info,
                          int64_t *upid_out)
{
	struct proc_state *procs =
	        realloc(p->procs, (p->nprocs + 1) * sizeof(*procs));
	int64_t upid = 0;

	if (!procs) {
		hp_log(SUBSYS "out of memory\n");
		return -ENOMEM;
	}
	p->procs = procs;
	int err = exec(p, "BEGIN", "adding process");
	if (!err)
		err = insert_process(p, info, &upid);
	if (!err)
		err = wr_commit(p, "adding process");
	if (err) {
		sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
		return err;
	}
	struct proc_state *ps = &p->procs[p->nprocs++];
	memset(ps, 0, sizeof(*ps));
	ps->upid = upid;
	ps->events_kept = -1;
	ps->interval = info->sampling_interval;
	pairmap_init(&ps->prev);
	pairmap_init(&ps->tstacks);
	pairmap_init(&ps->stack_leaf);
	*upid_out = upid;
	return 0;
}

int profile_end_process(struct profile *p, int64_t upid,
                        const struct prof_process_end *e)
{
	struct proc_state *ps = wr_proc_find(p, upid);
	int ferr = ps ? wr_flush_events(p, ps) : 0;
	if (ferr)
		wr_err(p, ferr, "writing events");
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	        p->db, "UPDATE process SET end_ts = ?1 WHERE upid = ?2;", -1,
	        &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, i64(e->end_ts_ns));
		sqlite3_bind_int64(st, 2, upid);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(p->db,
		                        "UPDATE heapprof_process SET"
		                        " exit_status = ?1, disconnected = ?2,"
		                        " rejected_concurrent ="
		                        " max(coalesce(rejected_concurrent, 0),"
		                        " ?3) WHERE upid = ?4",
		                        -1, &st, NULL);
	if (rc == SQLITE_OK) {
		/* -1 (unknown) is stored as NULL. */
		if (e->exit_status >= 0)
			sqlite3_bind_int(st, 1, e->exit_status);
		sqlite3_bind_int(st, 2, e->disconnected ? 1 : 0);
		sqlite3_bind_int(st, 3, e->rejected_concurrent);
		sqlite3_bind_int64(st, 4, upid);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc == SQLITE_OK &&
	    (e->exec_not_followed || e->children_not_followed > 0)) {
		rc = sqlite3_prepare_v2(
		        p->db,
		        "UPDATE heapprof_process SET"
		        " exec_not_followed = ?1,"
		        " children_not_followed = ?2 WHERE upid = ?3",
		        -1, &st, NULL);
		if (rc == SQLITE_OK) {
			if (e->exec_not_followed)
				sqlite3_bind_text(st, 1, e->exec_not_followed,
				                  -1, SQLITE_STATIC);
			if (e->children_not_followed > 0)
				sqlite3_bind_int(st, 2,
				                 e->children_not_followed);
			sqlite3_bind_int64(st, 3, upid);
			rc = sqlite3_step(st);
			rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		}
		sqlite3_finalize(st);
	}
	return rc == SQLITE_OK ? 0 : wr_sql_err(p, rc, "ending process");
}
