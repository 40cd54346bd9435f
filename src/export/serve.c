/*
 * `heapprof serve`'s HTTP server (serve.h, docs/FLEET.md "Design").
 *
 * libmicrohttpd runs one internal polling thread: every handler below
 * runs on it, one request at a time, so the reader cache needs no lock.
 * Connections are bounded (MHD_OPTION_CONNECTION_LIMIT, per IP too) and
 * timed out (MHD_OPTION_CONNECTION_TIMEOUT); a request body is refused.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/live_snapshot.h"
#include "collector/top_read.h"
#include "export/serve.h"
#include "export/snapshot_pprof.h"
#include "util/err.h"
#include "util/proc.h"

#define SUBSYS     "serve"
#define HEAP_LABEL "libc.malloc"
/* A pprof response is read whole into memory: no more than this. */
#define MAX_PPROF_BYTES (256u << 20)

struct reader_slot {
	pid_t pid;
	struct top_reader *r;
};

struct serve_server {
	struct serve_config c;
	struct MHD_Daemon *d;
	unsigned port;
	/* the reader of each process read before (names cached by it) */
	struct reader_slot slots[SERVE_MAX_TARGETS];
	size_t nslots;
	uint64_t requests, bad_requests, seq;
};

/* ---- which processes ----------------------------------------------------- */

static bool ours(pid_t pid)
{
	uid_t uid;
	return proc_owner(pid, &uid) == 0 && uid == geteuid();
}

static size_t add_pid(pid_t *out, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (out[i] == pid)
			return n;
	if (n < SERVE_MAX_TARGETS && proc_alive(pid) && ours(pid))
		out[n++] = pid;
	return n;
}

/* The processes asked for that run now and are ours, into out (at most
 * SERVE_MAX_TARGETS); how many. */
static size_t targets(const struct serve_server *s, pid_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < s->c.npids; i++)
		n = add_pid(out, n, s->c.pids[i]);
	for (size_t i = 0; i < s->c.nnames; i++) {
		pid_t found[SERVE_MAX_TARGETS];
		int k = proc_find_by_name(s->c.names[i], found,
		                          SERVE_MAX_TARGETS);
		for (int j = 0; j < k && j < SERVE_MAX_TARGETS; j++)
			n = add_pid(out, n, found[j]);
	}
	return n;
}

static bool is_target(const struct serve_server *s, pid_t pid)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = targets(s, t);
	for (size_t i = 0; i < n; i++)
		if (t[i] == pid)
			return true;
	return false;
}

/* The reader of pid, kept for the next request (its name cache); the
 * readers of processes no longer targets are freed first. */
static struct top_reader *reader_of(struct serve_server *s, pid_t pid,
                                    const pid_t *live, size_t nlive)
{
	for (size_t i = 0; i < s->nslots;) {
		bool keep = false;
		for (size_t j = 0; j < nlive; j++)
			keep |= live[j] == s->slots[i].pid;
		if (keep) {
			i++;
			continue;
		}
		top_reader_free(s->slots[i].r);
		s->slots[i] = s->slots[--s->nslots];
	}
	for (size_t i = 0; i < s->nslots; i++)
		if (s->slots[i].pid == pid)
			return s->slots[i].r;
	if (s->nslots == SERVE_MAX_TARGETS)
		return NULL;
	struct top_reader *r = top_reader_new(pid);
	if (r)
		s->slots[s->nslots++] = (struct reader_slot){pid, r};
	return r;
}

/* ---- responses ----------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status,
                             const char *type, void *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	        len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
		                        "Bearer");
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status,
                                  const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status,
                                  const char *fmt, ...)
{
	char *body = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (n < 0)
		return MHD_NO;
	return reply(conn, status, "text/plain; charset=utf-8", body,
	             (size_t)n);
}

/* A label value as the exposition format quotes it. */
static void put_label(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

/* ---- /metrics -------------------------------------------------------- */

struct reading {
	pid_t pid;
	char comm[64];
	struct top_reader *r;
	struct top_reading t;
	bool ok;
};

static void labels(FILE *f, const struct reading *g)
{
	fprintf(f, "{pid=\"%d\",comm=\"", (int)g->pid);
	put_label(f, g->comm);
	fputs("\",heap=\"" HEAP_LABEL "\"}", f);
}

enum metric_src {
	M_LIVE_BYTES,
	M_LIVE_OBJS,
	M_ALLOC_BYTES,
	M_FREED_BYTES,
	M_ALLOC_OBJS,
	M_FREED_OBJS,
	M_RSS,
	M_RSS_PEAK,
	M_LIMIT,
	M_INTERVAL,
};

static const struct metric {
	const char *name, *type, *help;
	enum metric_src src;
} metrics[] = {
        {"heapprof_live_bytes", "gauge",
         "Bytes of the heap live now (estimated for sampled heaps).",
         M_LIVE_BYTES},
        {"heapprof_live_objects", "gauge",
         "Objects of the heap live now (estimated for sampled heaps).",
         M_LIVE_OBJS},
        {"heapprof_allocated_bytes_total", "counter",
         "Bytes allocated since the session attached.", M_ALLOC_BYTES},
        {"heapprof_freed_bytes_total", "counter",
         "Bytes freed since the session attached.", M_FREED_BYTES},
        {"heapprof_allocated_objects_total", "counter",
         "Objects allocated since the session attached.", M_ALLOC_OBJS},
        {"heapprof_freed_objects_total", "counter",
         "Objects freed since the session attached.", M_FREED_OBJS},
        {"heapprof_resident_bytes", "gauge",
         "Resident set size of the process.", M_RSS},
        {"heapprof_resident_peak_bytes", "gauge",
         "Peak resident set size of the process.", M_RSS_PEAK},
        {"heapprof_memory_limit_bytes", "gauge",
         "Memory limit of the process's cgroup (absent: none).", M_LIMIT},
        {"heapprof_sampling_interval_bytes", "gauge",
         "Mean bytes between samples (1: every allocation).", M_INTERVAL},
};

/* The value of metric m in g; false when it has none. */
static bool metric_value(const struct reading *g, enum metric_src m, int64_t *v)
{
	const struct top_counts *c = &g->t.total;
	switch (m) {
	case M_LIVE_BYTES:
		*v = top_value(c, TOP_SPACE);
		return true;
	case M_LIVE_OBJS:
		*v = top_value(c, TOP_OBJECTS);
		return true;
	case M_ALLOC_BYTES:
		*v = (int64_t)c->alloc_bytes;
		return true;
	case M_FREED_BYTES:
		*v = (int64_t)c->free_bytes;
		return true;
	case M_ALLOC_OBJS:
		*v = top_value(c, TOP_ALLOC_OBJECTS);
		return true;
	case M_FREED_OBJS:
		*v = top_value(c, TOP_ALLOC_OBJECTS) -
		     top_value(c, TOP_OBJECTS);
		return true;
	case M_RSS:
		*v = (int64_t)g->t.rss;
		return g->t.have_rss;
	case M_RSS_PEAK:
		*v = (int64_t)g->t.rss_peak;
		return g->t.have_rss;
	case M_LIMIT:
		*v = (int64_t)g->t.limit;
		return g->t.limit != 0;
	case M_INTERVAL:
		*v = (int64_t)g->t.interval;
		return true;
	}
	return false;
}

static int by_live_desc(const void *a, const void *b)
{
	int64_t x = top_value(&((const struct top_func *)a)->c, TOP_SPACE);
	int64_t y = top_value(&((const struct top_func *)b)->c, TOP_SPACE);
	return x < y ? 1 : x > y ? -1 : 0;
}

static void put_metrics(FILE *f, struct serve_server *s, struct reading *g,
                        size_t n)
{
	size_t nok = 0;
	for (size_t i = 0; i < n; i++)
		nok += g[i].ok;
	fputs("# HELP heapprof_targets Processes asked for that run now.\n"
	      "# TYPE heapprof_targets gauge\n",
	      f);
	fprintf(f, "heapprof_targets %zu\n", n);
	fputs("# HELP heapprof_profiled Processes whose heap could be read.\n"
	      "# TYPE heapprof_profiled gauge\n",
	      f);
	fprintf(f, "heapprof_profiled %zu\n", nok);
	fputs("# HELP heapprof_http_requests_total Requests served.\n"
	      "# TYPE heapprof_http_requests_total counter\n",
	      f);
	fprintf(f, "heapprof_http_requests_total %" PRIu64 "\n", s->requests);
	fputs("# HELP heapprof_http_bad_requests_total Requests answered 4xx.\n"
	      "# TYPE heapprof_http_bad_requests_total counter\n",
	      f);
	fprintf(f, "heapprof_http_bad_requests_total %" PRIu64 "\n",
	        s->bad_requests);
	for (size_t m = 0; m < sizeof(metrics) / sizeof(metrics[0]); m++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", metrics[m].name,
		        metrics[m].help, metrics[m].name, metrics[m].type);
		for (size_t i = 0; i < n; i++) {
			int64_t v;
			if (!g[i].ok ||
			    !metric_value(&g[i], metrics[m].src, &v))
				continue;
			fputs(metrics[m].name, f);
			labels(f, &g[i]);
			fprintf(f, " %" PRId64 "\n", v);
		}
	}
	fputs("# HELP heapprof_function_live_bytes Live bytes allocated by the"
	      " function (the allocator's caller), top N per process.\n"
	      "# TYPE heapprof_function_live_bytes gauge\n",
	      f);
	for (size_t i = 0; i < n; i++) {
		if (!g[i].ok || !g[i].t.nfuncs)
			continue;
		struct top_func *fs = malloc(g[i].t.nfuncs * sizeof(*fs));
		if (!fs)
			continue;
		memcpy(fs, g[i].t.funcs, g[i].t.nfuncs * sizeof(*fs));
		qsort(fs, g[i].t.nfuncs, sizeof(*fs), by_live_desc);
		for (size_t k = 0; k < g[i].t.nfuncs && k < (size_t)s->c.top_n;
		     k++) {
			int64_t v = top_value(&fs[k].c, TOP_SPACE);
			if (v <= 0)
				break;
			fprintf(f,
			        "heapprof_function_live_bytes{pid=\"%d\",comm="
			        "\"",
			        (int)g[i].pid);
			put_label(f, g[i].comm);
			fputs("\",heap=\"" HEAP_LABEL "\",function=\"", f);
			put_label(f, top_name(g[i].r, fs[k].name));
			fprintf(f, "\"} %" PRId64 "\n", v);
		}
		free(fs);
	}
}

static enum MHD_Result do_metrics(struct serve_server *s,
                                  struct MHD_Connection *conn)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = targets(s, t);
	struct reading *g = calloc(n ? n : 1, sizeof(*g));
	char *body = NULL;
	size_t len = 0;
	FILE *f = g ? open_memstream(&body, &len) : NULL;

	if (!f) {
		free(g);
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                  "out of memory\n");
	}
	for (size_t i = 0; i < n; i++) {
		char why[256];
		g[i].pid = t[i];
		proc_comm(t[i], g[i].comm, sizeof(g[i].comm));
		g[i].r = reader_of(s, t[i], t, n);
		g[i].ok = g[i].r &&
		          top_read(g[i].r, &g[i].t, why, sizeof(why)) == 0;
	}
	put_metrics(f, s, g, n);
	for (size_t i = 0; i < n; i++)
		if (g[i].ok)
			top_reading_free(&g[i].t);
	free(g);
	if (fclose(f) != 0) {
		free(body);
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                  "out of memory\n");
	}
	return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4", body, len);
}

/* ---- /debug/pprof/heap ------------------------------------------------ */

static enum MHD_Result do_list(struct serve_server *s,
                               struct MHD_Connection *conn)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = targets(s, t);
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	if (!f)
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                  "out of memory\n");
	fprintf(f,
	        "# heapprof serve: %zu process(es); "
	        "GET /debug/pprof/heap?pid=PID for a heap profile\n",
	        n);
	for (size_t i = 0; i < n; i++) {
		char comm[64];
		proc_comm(t[i], comm, sizeof(comm));
		fprintf(f, "%d\t%s\t/debug/pprof/heap?pid=%d\n", (int)t[i],
		        comm, (int)t[i]);
	}
	if (fclose(f) != 0) {
		free(body);
		return MHD_NO;
	}
	return reply(conn, MHD_HTTP_OK, "text/plain; charset=utf-8", body, len);
}

static int read_whole(const char *path, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0 ||
	    (uint64_t)st.st_size > MAX_PPROF_BYTES) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	char *b = malloc((size_t)st.st_size);
	size_t got = 0;
	while (b && got < (size_t)st.st_size) {
		ssize_t k = read(fd, b + got, (size_t)st.st_size - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	if (!b || got != (size_t)st.st_size) {
		free(b);
		return -1;
	}
	*out = b;
	*len = got;
	return 0;
}

/* The pprof of the snapshot database db (its one process and dump). */
static int pprof_of_db(const char *db_path, const char *out, uint64_t wall)
{
	sqlite3 *db = reader_open(db_path, SUBSYS);
	struct rd_stacks st;
	struct rd_process *procs = NULL;
	struct rd_dump *d = NULL;
	size_t np = 0, nd = 0;
	int err = db ? 0 : -1;

	memset(&st, 0, sizeof(st));
	if (!err)
		err = reader_load_stacks(db, SUBSYS, &st);
	if (!err)
		err = reader_load_processes(db, SUBSYS, &procs, &np);
	if (!err && np == 1)
		err = reader_load_dumps(db, SUBSYS, procs[0].upid, &d, &nd);
	if (!err && (np != 1 || nd != 1))
		err = -1;
	if (!err) {
		struct snapshot_pprof_job j = {
		        .db = db,
		        .s = &st,
		        .p = &procs[0],
		        .d = &d[0],
		        .dump_index = 1,
		        .ndumps = 1,
		        .file = "heapprof serve",
		        .wall_ns = (int64_t)wall,
		        .path = out,
		        .go_names = 1,
		};
		err = snapshot_pprof_write(&j, SUBSYS);
	}
	reader_free_dumps(d, nd);
	reader_free_processes(procs, np);
	reader_free_stacks(&st);
	if (db)
		sqlite3_close(db);
	return err ? -1 : 0;
}

static enum MHD_Result do_pprof(struct serve_server *s,
                                struct MHD_Connection *conn, pid_t pid)
{
	struct live_snapshot ls;
	char db[512], out[512];
	char *body = NULL;
	size_t len = 0;

	if (!is_target(s, pid)) {
		s->bad_requests++;
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
		                  "pid %d: not a process this agent profiles\n",
		                  (int)pid);
	}
	int rc = live_snapshot_open(pid, &ls);
	if (rc == 0)
		rc = live_snapshot_take(&ls);
	else if (rc == -1) {
		enum MHD_Result r =
		        reply_text(conn, MHD_HTTP_NOT_FOUND, "%s\n", ls.why);
		live_snapshot_close(&ls);
		return r;
	}
	snprintf(db, sizeof(db), "%s/serve-%d-%" PRIu64 ".db", s->c.tmpdir,
	         (int)getpid(), ++s->seq);
	snprintf(out, sizeof(out), "%s/serve-%d-%" PRIu64 ".pb.gz", s->c.tmpdir,
	         (int)getpid(), s->seq);
	if (rc == 0)
		rc = live_snapshot_write_db(&ls, db, "heapprof serve");
	uint64_t wall = ls.wall;
	live_snapshot_close(&ls);
	if (rc == 0)
		rc = pprof_of_db(db, out, wall);
	if (rc == 0)
		rc = read_whole(out, &body, &len);
	unlink(db);
	unlink(out);
	if (rc != 0)
		return reply_text(
		        conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		        "pid %d: the heap profile could not be made\n",
		        (int)pid);
	return reply(conn, MHD_HTTP_OK, "application/octet-stream", body, len);
}

/* ---- requests ---------------------------------------------------------- */

static bool token_ok(const struct serve_server *s, struct MHD_Connection *conn)
{
	if (!s->c.token)
		return true;
	const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	                                            "Authorization");
	if (!h || strncmp(h, "Bearer ", 7))
		return false;
	h += 7;
	size_t a = strlen(h), b = strlen(s->c.token);
	unsigned char diff = a != b;
	for (size_t i = 0; i < a && i < b; i++)
		diff |= (unsigned char)(h[i] ^ s->c.token[i]);
	return !diff;
}

static enum MHD_Result route(struct serve_server *s,
                             struct MHD_Connection *conn, const char *url)
{
	if (!strcmp(url, "/metrics"))
		return do_metrics(s, conn);
	if (strcmp(url, "/debug/pprof/heap")) {
		s->bad_requests++;
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
		                  "not found: /metrics and /debug/pprof/heap "
		                  "are served\n");
	}
	const char *p =
	        MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "pid");
	const char *name = MHD_lookup_connection_value(
	        conn, MHD_GET_ARGUMENT_KIND, "name");
	if (p && name) {
		s->bad_requests++;
		return reply_text(conn, MHD_HTTP_BAD_REQUEST,
		                  "pid and name exclude each other\n");
	}
	if (name) {
		pid_t pid;
		char why[1024];
		if (!name[0] ||
		    live_snapshot_find(name, &pid, why, sizeof(why))) {
			s->bad_requests++;
			return reply_text(conn, MHD_HTTP_NOT_FOUND, "%s\n",
			                  name[0] ? why : "empty name");
		}
		return do_pprof(s, conn, pid);
	}
	if (p) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (!p[0] || *end || errno || v <= 0 || v > INT32_MAX) {
			s->bad_requests++;
			return reply_text(conn, MHD_HTTP_BAD_REQUEST,
			                  "invalid pid\n");
		}
		return do_pprof(s, conn, (pid_t)v);
	}
	return do_list(s, conn);
}

/* A request's state between libmicrohttpd's calls. */
struct req {
	size_t body; /* bytes of a request body seen (refused) */
};

/* A body is read and dropped up to this much, then the connection
 * closed. */
#define MAX_BODY_BYTES (64u << 10)

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
	struct serve_server *s = cls;
	struct req *q = *con_cls;
	(void)version;
	(void)upload_data;

	if (!q) { /* headers only so far */
		q = calloc(1, sizeof(*q));
		*con_cls = q;
		return q ? MHD_YES : MHD_NO;
	}
	if (*upload_data_size) { /* a body: read, dropped, refused */
		q->body += *upload_data_size;
		*upload_data_size = 0;
		return q->body <= MAX_BODY_BYTES ? MHD_YES : MHD_NO;
	}
	s->requests++;
	if (q->body || (strcmp(method, "GET") && strcmp(method, "HEAD"))) {
		s->bad_requests++;
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
		                  "only GET\n");
	}
	if (!token_ok(s, conn)) {
		s->bad_requests++;
		return reply_text(conn, MHD_HTTP_UNAUTHORIZED,
		                  "a bearer token is needed\n");
	}
	return route(s, conn, url);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
	(void)cls;
	(void)conn;
	(void)why;
	free(*con_cls);
	*con_cls = NULL;
}

struct serve_server *serve_start(const struct serve_config *c)
{
	struct serve_server *s = calloc(1, sizeof(*s));
	if (!s) {
		hp_err(SUBSYS, "out of memory");
		return NULL;
	}
	s->c = *c;
	s->d = MHD_start_daemon(
	        MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD |
	                MHD_USE_ERROR_LOG,
	        0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
	        (const struct sockaddr *)&s->c.addr,
	        MHD_OPTION_CONNECTION_LIMIT, c->max_connections,
	        MHD_OPTION_PER_IP_CONNECTION_LIMIT, c->max_connections,
	        MHD_OPTION_CONNECTION_TIMEOUT, c->timeout_s,
	        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 << 10),
	        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
	        MHD_OPTION_END);
	if (!s->d) {
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &c->addr.sin_addr, a, sizeof(a));
		hp_err(SUBSYS,
		       "cannot listen on %s:%u (in use, or not an "
		       "address of this machine?)",
		       a, ntohs(c->addr.sin_port));
		free(s);
		return NULL;
	}
	const union MHD_DaemonInfo *i =
	        MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = i ? i->port : ntohs(c->addr.sin_port);
	return s;
}

unsigned serve_port(const struct serve_server *s)
{
	return s->port;
}

void serve_stop(struct serve_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->d);
	for (size_t i = 0; i < s->nslots; i++)
		top_reader_free(s->slots[i].r);
	free(s);
}
