/*
 * GET /debug/pprof/heap of `heapprof serve` (serve_int.h, docs/FLEET.md):
 * its query checked (a malformed one is 400), then either the processes
 * served, one line each, or the heap of one read now (live_snapshot.h),
 * made the heap model of the process (model/live.h) and encoded in memory
 * as a gzipped pprof with Go's heap sample type names: no file, unless
 * save=1 keeps the reading as a database in the agent's directory.  Its
 * named locations are kept for /debug/pprof/symbol.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/serve_int.h"
#include "agent/targets.h"
#include "inspect/live_snapshot.h"
#include "export/pprof.h"
#include "model/live.h"
#include "symbolize/symbolize.h"
#include "layout/region.h"
#include "util/err.h"
#include "util/proc.h"
#include "util/textfile.h"

#define SUBSYS "serve"
/* A pid above the kernel's PID_MAX_LIMIT is no pid. */
#define PID_MAX_LIMIT 4194304

/* Why pid is not served ("" when it is): not asked for, or another
 * user's. */
static const char *not_served(const struct serve_server *s, pid_t pid)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = targets_list(&s->c, t);
	for (size_t i = 0; i < n; i++)
		if (t[i] == pid)
			return "";
	uid_t uid;
	if (!s->c.all_users && proc_owner(pid, &uid) == 0 && uid != geteuid())
		return "another user's process (the agent serves its own "
		       "user's; as root, --all-users serves every user's)";
	return "not a process this agent profiles";
}

static enum MHD_Result do_list(struct serve_server *s,
                               struct MHD_Connection *conn)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = targets_list(&s->c, t);
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	if (!f)
		return serve_reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                        "out of memory\n");
	fprintf(f,
	        "# heapprof serve: %zu process(es); "
	        "GET /debug/pprof/heap?pid=PID for a heap profile\n",
	        n);
	for (size_t i = 0; i < n; i++) {
		char comm[64];
		struct live_snapshot ls;
		proc_comm(t[i], comm, sizeof(comm));
		int rc = live_snapshot_open(t[i], &ls);
		fprintf(f, "%d\t%s\t/debug/pprof/heap?pid=%d\t%s\n", (int)t[i],
		        comm, (int)t[i],
		        rc == 0    ? "profiled"
		        : rc == -1 ? ls.why
		                   : "out of memory");
		live_snapshot_close(&ls);
	}
	if (fclose(f) != 0) {
		free(body);
		return MHD_NO;
	}
	return serve_reply(conn, MHD_HTTP_OK, "text/plain; charset=utf-8", body,
	                   len);
}

static bool has_heap(const struct live_snapshot *ls, const char *heap)
{
	for (size_t i = 0; i < ls->snap.dump.nheaps; i++)
		if (ls->snap.dump.heaps[i].name &&
		    !strcmp(ls->snap.dump.heaps[i].name, heap))
			return true;
	return false;
}

/* What a pprof request asks for. */
struct pprof_ask {
	pid_t pid;
	const char *heap; /* NULL: libc.malloc */
	bool save;
};

/* The snapshot database kept for ?save=1: DIR/COMM.PID.snapshot.TIME.db,
 * a sequence number added when that exists (two in one second). */
static int saved_path(const struct serve_server *s, pid_t pid, char *buf,
                      size_t len)
{
	char comm[64], when[32];
	time_t now = time(NULL);
	struct tm tm;
	proc_comm(pid, comm, sizeof(comm));
	for (char *c = comm; *c; c++)
		if (*c == '/' || *c == ' ')
			*c = '_';
	strftime(when, sizeof(when), "%Y%m%dT%H%M%S",
	         gmtime_r(&now, &tm) ? &tm : &(struct tm){0});
	for (int k = 0; k < 100; k++) {
		int n = k ? snprintf(buf, len, "%s/%s.%d.snapshot.%s-%d.db",
		                     s->c.dir, comm, (int)pid, when, k)
		          : snprintf(buf, len, "%s/%s.%d.snapshot.%s.db",
		                     s->c.dir, comm, (int)pid, when);
		if (n < 0 || (size_t)n >= len)
			return -1;
		if (access(buf, F_OK) != 0)
			return 0;
	}
	return -1;
}

/*
 * The pprof of heap a->heap (libc.malloc when NULL) of the process read in
 * ls, gzipped into *body: the heap model of the reading (model/live.h),
 * the same functions and numbers as `heapprof top` and /metrics, with Go's
 * sample type names.  Its named locations go to *syms.  0 or a negative
 * errno.
 */
static int live_pprof(const struct live_snapshot *ls, pid_t pid,
                      const char *heap, uint64_t interval, uint64_t wall,
                      uint8_t **body, size_t *len, struct pp_symtab *syms)
{
	struct live_model lm;
	struct symbolizer *sym = symbolizer_new();
	struct pp_profile *pp = pp_new((int64_t)interval);
	char comm[64], *c1 = NULL, *c2 = NULL, *cmd = proc_cmdline(pid);
	int err = sym && pp && cmd ? 0 : -ENOMEM;

	memset(&lm, 0, sizeof(lm));
	memset(syms, 0, sizeof(*syms));
	heap = heap ? heap : "libc.malloc";
	proc_comm(pid, comm, sizeof(comm));
	if (!err)
		err = live_model_build(&lm, &ls->snap.dump, sym, NULL, 1);
	if (!err &&
	    (asprintf(&c1, "heapprof serve: process %d (%s), heap %s, read now",
	              (int)pid, comm, heap) < 0 ||
	     asprintf(&c2, "command line: %s", cmd) < 0)) {
		c1 = c2 = NULL;
		err = -ENOMEM;
	}
	if (!err) {
		pp_use_go_heap_names(pp);
		pp_set_time(pp, (int64_t)wall, 0);
		err = pp_add_comment(pp, c1);
	}
	if (!err)
		err = pp_add_comment(pp, c2);
	const struct live_heap *h = err ? NULL : live_model_heap(&lm, heap);
	for (size_t i = 0; h && !err && i < h->n; i++)
		err = pp_add_sample(pp, &lm.s, h->x[i].callsite, h->x[i].v,
		                    NULL, NULL);
	if (!err)
		err = pp_symtab_make(pp, syms);
	if (!err && (err = pp_encode_gz(pp, body, len)) < 0)
		pp_symtab_free(syms);
	free(c1);
	free(c2);
	free(cmd);
	pp_free(pp);
	live_model_free(&lm);
	symbolizer_free(sym);
	return err;
}

/* What the libraries said while a request was served: the first line is
 * kept for the answer, every line still goes to serve's log (stderr). */
struct said {
	char first[256];
};

static void keep_said(void *arg, const char *line)
{
	struct said *w = arg;
	if (!w->first[0]) {
		const char *m = line;
		/* "heapprof: subsys: message": the message. */
		for (int i = 0; i < 2 && strstr(m, ": "); i++)
			m = strstr(m, ": ") + 2;
		snprintf(w->first, sizeof(w->first), "%.*s",
		         (int)strcspn(m, "\n"), m);
	}
	fputs(line, stderr);
}

static enum MHD_Result do_pprof_said(struct serve_server *s,
                                     struct MHD_Connection *conn,
                                     const struct pprof_ask *a,
                                     struct said *said);

static enum MHD_Result do_pprof(struct serve_server *s,
                                struct MHD_Connection *conn,
                                const struct pprof_ask *a)
{
	struct said said = {{0}};
	hp_log_fn fn;
	void *arg;
	hp_log_hook_get(&fn, &arg);
	hp_log_hook(keep_said, &said);
	enum MHD_Result r = do_pprof_said(s, conn, a, &said);
	hp_log_hook(fn, arg);
	return r;
}

static enum MHD_Result do_pprof_said(struct serve_server *s,
                                     struct MHD_Connection *conn,
                                     const struct pprof_ask *a,
                                     struct said *said)
{
	struct live_snapshot ls;
	struct pp_symtab syms;
	char saved[PATH_MAX] = "";
	uint8_t *body = NULL;
	size_t len = 0;

	const char *why = not_served(s, a->pid);
	if (why[0]) {
		s->bad_requests++;
		return serve_reply_text(conn,
		                        strncmp(why, "another", 7)
		                                ? MHD_HTTP_NOT_FOUND
		                                : MHD_HTTP_FORBIDDEN,
		                        "pid %d: %s\n", (int)a->pid, why);
	}
	int rc = live_snapshot_open(a->pid, &ls);
	if (rc == -1) {
		s->bad_requests++;
		enum MHD_Result r = serve_reply_text(conn, MHD_HTTP_NOT_FOUND,
		                                     "%s\n", ls.why);
		live_snapshot_close(&ls);
		return r;
	}
	/* The live blocks only for a database kept with save=1; the
	 * profile needs the per-stack counters alone. */
	if (rc == 0 && a->save) {
		rc = live_snapshot_take(&ls);
	} else if (rc == 0) {
		ls.wall = (uint64_t)hp_clock_ns(CLOCK_REALTIME);
		rc = snapshot_take_regions(ls.rs, ls.nr, false, &ls.snap);
		if (!rc)
			rc = snapshot_resolve_paths(&ls.snap, a->pid, true,
			                            NULL);
	}
	if (rc == 0 && a->heap && !has_heap(&ls, a->heap)) {
		s->bad_requests++;
		live_snapshot_close(&ls);
		return serve_reply_text(conn, MHD_HTTP_NOT_FOUND,
		                        "pid %d has no heap named '%s'\n",
		                        (int)a->pid, a->heap);
	}
	if (rc == 0)
		rc = live_pprof(&ls, a->pid, a->heap,
		                live_snapshot_interval(&ls), ls.wall, &body,
		                &len, &syms);
	if (rc == 0)
		serve_symbol_keep(s, &syms);
	if (rc == 0 && a->save &&
	    (saved_path(s, a->pid, saved, sizeof(saved)) ||
	     live_snapshot_write_db(&ls, saved, "heapprof serve") != 0)) {
		hp_err(SUBSYS, "keeping the snapshot of pid %d: %s",
		       (int)a->pid, saved[0] ? ls.why : strerror(errno));
		saved[0] = '\0';
	}
	live_snapshot_close(&ls);
	if (rc != 0) {
		free(body);
		return serve_reply_text(
		        conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		        "pid %d: the heap profile could not be made%s%s\n",
		        (int)a->pid, said->first[0] || rc < 0 ? ": " : "",
		        said->first[0] ? said->first
		                       : (rc < 0 ? strerror(-rc) : ""));
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(
	        len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	                        "application/octet-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_DISPOSITION,
	                        "attachment; filename=\"heap.pb.gz\"");
	if (saved[0])
		MHD_add_response_header(r, "X-Heapprof-Saved", saved);
	else if (a->save)
		MHD_add_response_header(r, "X-Heapprof-Saved", "failed");
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static const char *arg(struct MHD_Connection *conn, const char *key)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

/* A boolean argument: absent, "0"/"false" or "1"/"true"; -1 otherwise. */
static int bool_arg(const char *v)
{
	if (!v || !strcmp(v, "0") || !strcmp(v, "false"))
		return 0;
	if (!strcmp(v, "1") || !strcmp(v, "true"))
		return 1;
	return -1;
}

/* The keys of /debug/pprof/heap's query. */
static const char *const pprof_keys[] = {"pid",  "name",  "heap",
                                         "save", "debug", "seconds"};
#define NPPROF_KEYS (sizeof(pprof_keys) / sizeof(pprof_keys[0]))

/* What a walk over a query found wrong first (why[0]: nothing). */
struct query_check {
	unsigned seen[NPPROF_KEYS];
	char why[256];
};

static bool has_control(const char *v)
{
	for (; v && *v; v++)
		if ((unsigned char)*v < 0x20 || *v == 0x7f)
			return true;
	return false;
}

/* One argument of /debug/pprof/heap's query: no control byte in it (a
 * NUL decoded from %00 arrives as 0x7f, unescape below), a key of ours
 * at most once and with a value.  Keys of others are let be: scrapers
 * add their own. */
static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind,
                                 const char *key, const char *value)
{
	struct query_check *q = cls;
	char k[64];
	(void)kind;
	if (q->why[0])
		return MHD_NO;
	if (has_control(key) || has_control(value)) {
		snprintf(q->why, sizeof(q->why),
		         "a control byte in the query ('%s')",
		         hp_text_escape(k, sizeof(k), key, strlen(key)));
		return MHD_NO;
	}
	for (size_t i = 0; i < NPPROF_KEYS; i++) {
		if (strcmp(key, pprof_keys[i]))
			continue;
		if (++q->seen[i] > 1)
			snprintf(q->why, sizeof(q->why), "%s given twice", key);
		else if (!value)
			snprintf(q->why, sizeof(q->why), "%s needs a value",
			         key);
	}
	return q->why[0] ? MHD_NO : MHD_YES;
}

/* A pid as a query gives it: decimal digits only (no sign, no blank, no
 * "0x": what strtol would also take), 1 .. PID_MAX_LIMIT.  0 or -1. */
static int parse_pid(const char *p, pid_t *out)
{
	long v = 0;
	if (!p[0] || strlen(p) > 7)
		return -1;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	if (v <= 0 || v > PID_MAX_LIMIT)
		return -1;
	*out = (pid_t)v;
	return 0;
}

/* The arguments of /debug/pprof/heap into *a (pid 0: none asked): 0, or
 * the status to answer with why (len bytes) its text: 400 for a malformed
 * query, 404 for a name no process has. */
static unsigned pprof_args(struct serve_server *s, struct MHD_Connection *conn,
                           struct pprof_ask *a, char *why, size_t len)
{
	struct query_check qc;
	memset(&qc, 0, sizeof(qc));
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, check_arg, &qc);
	memset(a, 0, sizeof(*a));
	if (qc.why[0]) {
		snprintf(why, len, "%s", qc.why);
		return MHD_HTTP_BAD_REQUEST;
	}
	const char *p = arg(conn, "pid"), *name = arg(conn, "name");
	const char *debug = arg(conn, "debug");
	int save = bool_arg(arg(conn, "save"));
	const char *bad = NULL;
	a->heap = arg(conn, "heap");
	if (p && name)
		bad = "pid and name exclude each other";
	else if (arg(conn, "seconds"))
		bad = "delta profiles (seconds=) are not served: the heap "
		      "profile is of now, scrape it without seconds";
	else if (debug && strcmp(debug, "0"))
		bad = "only the binary profile is served (debug=0)";
	else if (a->heap && !a->heap[0])
		bad = "empty heap";
	else if (save < 0)
		bad = "save is 1 or 0";
	else if (save && !s->c.keep)
		bad = "save=1: this agent keeps no profiles (start it with "
		      "-o DIR)";
	else if (p && parse_pid(p, &a->pid) < 0)
		bad = "invalid pid (a process id: digits only)";
	else if (!p && name && !name[0])
		bad = "empty name";
	if (bad) {
		snprintf(why, len, "%s", bad);
		return MHD_HTTP_BAD_REQUEST;
	}
	a->save = save;
	if (!p && name && live_snapshot_find(name, &a->pid, why, len))
		return MHD_HTTP_NOT_FOUND;
	return 0;
}

enum MHD_Result serve_heap_answer(struct serve_server *s,
                                  struct MHD_Connection *conn)
{
	struct pprof_ask a;
	char why[1024];
	unsigned status = pprof_args(s, conn, &a, why, sizeof(why));
	if (status) {
		s->bad_requests++;
		return serve_reply_text(conn, status, "%s\n", why);
	}
	return a.pid ? do_pprof(s, conn, &a) : do_list(s, conn);
}
