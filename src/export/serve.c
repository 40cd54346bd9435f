/*
 * `heapprof serve`'s HTTP server (serve.h, docs/FLEET.md "Design").
 *
 * libmicrohttpd runs one internal polling thread: every handler below
 * runs on it, one request at a time, so the reader cache and the symbol
 * tables need no lock.  Connections are bounded
 * (MHD_OPTION_CONNECTION_LIMIT, per IP too) and timed out
 * (MHD_OPTION_CONNECTION_TIMEOUT); a request body is refused, but for
 * the addresses a POST to /debug/pprof/symbol asks about, read as they
 * come (never held whole) up to SYMBOL_BODY_MAX.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/live_snapshot.h"
#include "collector/top_read.h"
#include "export/serve.h"
#include "export/snapshot_pprof.h"
#include "util/err.h"
#include "util/proc.h"
#include "util/textfile.h"

#define SUBSYS "serve"
/* A pprof response is read whole into memory: no more than this. */
#define MAX_PPROF_BYTES (256u << 20)
/* The symbols of this many profiles served last are kept for
 * /debug/pprof/symbol: go tool pprof asks right after its fetch, so the
 * newest is the one it means; a few more cover scrapers interleaved. */
#define SYMTABS     4
#define SYMBOL_PATH "/debug/pprof/symbol"
/* The addresses of one symbol request (go tool pprof sends each one
 * "0x7f3a2b1c4d5e+", 15 bytes): a million. */
#define SYMBOL_BODY_MAX (16u << 20)
/* A pid above the kernel's PID_MAX_LIMIT is no pid. */
#define PID_MAX_LIMIT 4194304

/* A reader kept across requests for its names: of one process, known by
 * its pid and start time (a pid reused is another process). */
struct reader_slot {
	pid_t pid;
	uint64_t start;
	struct top_reader *r;
};

/* A connection watched for the time a request may take (serve_tick):
 * since it opened or its last response, until its next request's headers
 * are in; then until that request is answered. */
struct conn_watch {
	bool used, busy; /* busy: a request being answered */
	int fd;
	uint64_t since_ms; /* CLOCK_MONOTONIC */
};

/* A request's headers must be in within this many idle timeouts of the
 * connection's opening (or its last response); its answer within
 * ANSWER_MAX_MS. */
#define HEADERS_TIMEOUTS 3
#define ANSWER_MAX_MS    300000u

struct serve_server {
	struct serve_config c;
	struct MHD_Daemon *d;
	unsigned port;
	/* the reader of each process read before (names cached by it) */
	struct reader_slot slots[SERVE_MAX_TARGETS];
	size_t nslots;
	uint64_t requests, bad_requests, seq;
	/* the connections (libmicrohttpd's thread adds and removes them,
	 * serve_tick cuts those too slow), under mu */
	pthread_mutex_t mu;
	struct conn_watch *watch;
	size_t nwatch;
	uint64_t cut; /* connections cut */
	/* the symbols of the profiles served last, newest first; asked[i]:
	 * the symbol request that last answered syms[i] (each address is
	 * answered once per request) */
	struct served_syms {
		struct pp_symtab t;
		uint64_t *asked;
	} syms[SYMTABS];
	uint64_t symbol_requests;
};

/* ---- which processes ----------------------------------------------------- */

static bool servable(const struct serve_config *c, pid_t pid)
{
	uid_t uid;
	if (!proc_alive(pid) || proc_owner(pid, &uid) < 0)
		return false;
	return c->all_users || uid == geteuid();
}

static size_t add_pid(const struct serve_config *c, pid_t *out, size_t n,
                      pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (out[i] == pid)
			return n;
	if (n < SERVE_MAX_TARGETS && servable(c, pid))
		out[n++] = pid;
	return n;
}

size_t serve_targets(const struct serve_config *c, pid_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < c->npids; i++)
		n = add_pid(c, out, n, c->pids[i]);
	for (size_t i = 0; i < c->nnames; i++) {
		pid_t found[SERVE_MAX_TARGETS];
		int k = proc_find_by_name(c->names[i], found,
		                          SERVE_MAX_TARGETS);
		for (int j = 0; j < k && j < SERVE_MAX_TARGETS; j++)
			n = add_pid(c, out, n, found[j]);
	}
	return n;
}

void serve_addr_str(const struct sockaddr_storage *addr, unsigned port,
                    char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	if (addr->ss_family == AF_INET6) {
		inet_ntop(AF_INET6,
		          &((const struct sockaddr_in6 *)addr)->sin6_addr, a,
		          sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, port);
		return;
	}
	inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, a,
	          sizeof(a));
	snprintf(buf, len, "%s:%u", a, port);
}

/* Why pid is not served ("" when it is): not asked for, or another
 * user's. */
static const char *not_served(const struct serve_server *s, pid_t pid)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = serve_targets(&s->c, t);
	for (size_t i = 0; i < n; i++)
		if (t[i] == pid)
			return "";
	uid_t uid;
	if (!s->c.all_users && proc_owner(pid, &uid) == 0 && uid != geteuid())
		return "another user's process (the agent serves its own "
		       "user's; as root, --all-users serves every user's)";
	return "not a process this agent profiles";
}

static uint64_t start_time(pid_t pid)
{
	struct proc_stat st;
	return proc_stat(pid, &st) == 0 ? st.start_time : 0;
}

/* The reader of pid, kept for the next request (its name cache); the
 * readers of processes no longer targets (or whose pid now names
 * another process) are freed first. */
static struct top_reader *reader_of(struct serve_server *s, pid_t pid,
                                    const pid_t *live, size_t nlive)
{
	for (size_t i = 0; i < s->nslots;) {
		bool keep = false;
		for (size_t j = 0; j < nlive; j++)
			keep |= live[j] == s->slots[i].pid;
		if (keep && start_time(s->slots[i].pid) == s->slots[i].start) {
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
	if (!r)
		return NULL;
	top_reader_all_heaps(r);
	s->slots[s->nslots++] = (struct reader_slot){
	        .pid = pid, .start = start_time(pid), .r = r};
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

/* The length of the valid UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_len(const unsigned char *p)
{
	size_t n = p[0] < 0x80                             ? 1
	           : (p[0] & 0xe0) == 0xc0 && p[0] >= 0xc2 ? 2
	           : (p[0] & 0xf0) == 0xe0                 ? 3
	           : (p[0] & 0xf8) == 0xf0 && p[0] <= 0xf4 ? 4
	                                                   : 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3 &&
	    ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
		return 0; /* overlong, or a surrogate */
	if (n == 4 &&
	    ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)))
		return 0; /* overlong, or past U+10FFFF */
	return n;
}

/* A label value as the exposition format quotes it.  Prometheus refuses
 * a whole scrape over one label that is not UTF-8 (a command name cut at
 * 15 bytes in the middle of a character): such bytes become U+FFFD. */
static void put_label(FILE *f, const char *v)
{
	const unsigned char *p = (const unsigned char *)v;
	while (*p) {
		size_t n = utf8_len(p);
		if (!n) {
			fputs("\xef\xbf\xbd", f);
			p++;
		} else if (*p == '\\' || *p == '"') {
			fputc('\\', f);
			fputc(*p++, f);
		} else if (*p == '\n') {
			fputs("\\n", f);
			p++;
		} else {
			fwrite(p, 1, n, f);
			p += n;
		}
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

/* {pid="..",comm=".."[,heap=".."] and no closing brace. */
static void labels_open(FILE *f, const struct reading *g, const char *heap)
{
	fprintf(f, "{pid=\"%d\",comm=\"", (int)g->pid);
	put_label(f, g->comm);
	fputc('"', f);
	if (heap) {
		fputs(",heap=\"", f);
		put_label(f, heap);
		fputc('"', f);
	}
}

static void series(FILE *f, const char *name, const struct reading *g,
                   const char *heap, const char *extra_key,
                   const char *extra_val, int64_t v)
{
	fputs(name, f);
	labels_open(f, g, heap);
	if (extra_key) {
		fprintf(f, ",%s=\"", extra_key);
		put_label(f, extra_val);
		fputc('"', f);
	}
	fprintf(f, "} %" PRId64 "\n", v);
}

static void help(FILE *f, const char *name, const char *type, const char *text)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

/* Per heap: the value of a heap's totals. */
enum heap_metric {
	HM_LIVE_BYTES,
	HM_LIVE_OBJS,
	HM_ALLOC_BYTES,
	HM_FREED_BYTES,
	HM_ALLOC_OBJS,
	HM_FREED_OBJS,
	HM_INTERVAL,
};

static const struct metric {
	const char *name, *type, *help;
	enum heap_metric m;
} heap_metrics[] = {
        {"heapprof_live_bytes", "gauge",
         "Bytes of the heap live now (estimated for sampled heaps).",
         HM_LIVE_BYTES},
        {"heapprof_live_objects", "gauge",
         "Objects of the heap live now (estimated for sampled heaps).",
         HM_LIVE_OBJS},
        {"heapprof_allocated_bytes_total", "counter",
         "Bytes allocated since the session attached.", HM_ALLOC_BYTES},
        {"heapprof_freed_bytes_total", "counter",
         "Bytes freed since the session attached.", HM_FREED_BYTES},
        {"heapprof_allocated_objects_total", "counter",
         "Objects allocated since the session attached.", HM_ALLOC_OBJS},
        {"heapprof_freed_objects_total", "counter",
         "Objects freed since the session attached.", HM_FREED_OBJS},
        {"heapprof_sampling_interval_bytes", "gauge",
         "Mean bytes between samples (1: every allocation).", HM_INTERVAL},
};

static int64_t heap_value(const struct top_heap *h, enum heap_metric m)
{
	const struct top_counts *c = &h->total;
	switch (m) {
	case HM_LIVE_BYTES:
		return top_value(c, TOP_SPACE);
	case HM_LIVE_OBJS:
		return top_value(c, TOP_OBJECTS);
	case HM_ALLOC_BYTES:
		return (int64_t)c->alloc_bytes;
	case HM_FREED_BYTES:
		return (int64_t)c->free_bytes;
	case HM_ALLOC_OBJS:
		return top_value(c, TOP_ALLOC_OBJECTS);
	case HM_FREED_OBJS:
		return top_value(c, TOP_ALLOC_OBJECTS) -
		       top_value(c, TOP_OBJECTS);
	case HM_INTERVAL:
		return (int64_t)h->interval;
	}
	return 0;
}

/* The client's counters, by what they mean to a scraper: samples the
 * profile lacks (dropped), and what went wrong recording the others. */
static const struct counter_series {
	int ctr;
	const char *label;
} dropped[] =
        {
                {HP_CTR_REENTRANT, "reentrant"},
                {HP_CTR_STACK_LOW, "stack_low"},
                {HP_CTR_STARTUP_MISSED, "startup_missed"},
                {HP_CTR_LIVE_FULL, "live_table_full"},
},
  errors[] = {
          {HP_CTR_UNWIND_ERRORS, "unwind_failed"},
          {HP_CTR_UNWIND_STOPPED, "unwind_stopped"},
          {HP_CTR_TRUNCATED_STACKS, "stack_truncated"},
          {HP_CTR_STACK_FULL, "stack_table_full"},
          {HP_CTR_MODULE_FULL, "module_table_full"},
          {HP_CTR_CONTROL_LOST, "control_lost"},
};

static void put_counters(FILE *f, const struct reading *g, size_t n,
                         const char *name, const char *key,
                         const struct counter_series *cs, size_t ncs)
{
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; g[i].ok && k < ncs; k++)
			series(f, name, &g[i], NULL, key, cs[k].label,
			       (int64_t)g[i].t.counters[cs[k].ctr]);
}

/* The process metrics (no heap label): RSS, its peak, the limit. */
static const struct process_metric {
	const char *name, *help;
	size_t at;   /* offsetof the value in struct top_reading */
	bool by_rss; /* there when have_rss; else when not 0 */
} process_metrics[] = {
        {"heapprof_resident_bytes", "Resident set size of the process.",
         offsetof(struct top_reading, rss), true},
        {"heapprof_resident_peak_bytes",
         "Peak resident set size of the process.",
         offsetof(struct top_reading, rss_peak), true},
        {"heapprof_memory_limit_bytes",
         "Memory limit of the process's cgroup (absent: none).",
         offsetof(struct top_reading, limit), false},
        {"heapprof_tables_bytes",
         "heapprof's own shared tables of the process, in memory (mapped "
         "in it, part of its resident set).",
         offsetof(struct top_reading, tables), false},
};

static void put_process(FILE *f, const struct reading *g, size_t n)
{
	for (size_t m = 0;
	     m < sizeof(process_metrics) / sizeof(process_metrics[0]); m++) {
		const struct process_metric *pm = &process_metrics[m];
		help(f, pm->name, "gauge", pm->help);
		for (size_t i = 0; i < n; i++) {
			uint64_t v;
			memcpy(&v, (const char *)&g[i].t + pm->at, sizeof(v));
			if (g[i].ok && (pm->by_rss ? g[i].t.have_rss : v != 0))
				series(f, pm->name, &g[i], NULL, NULL, NULL,
				       (int64_t)v);
		}
	}
	help(f, "heapprof_samples_dropped_total", "counter",
	     "Samples the profile lacks, by reason (live_table_full: "
	     "recorded, their free not tracked).");
	put_counters(f, g, n, "heapprof_samples_dropped_total", "reason",
	             dropped, sizeof(dropped) / sizeof(dropped[0]));
	help(f, "heapprof_client_errors_total", "counter",
	     "Samples recorded with a stack cut short or charged to an "
	     "overflow entry, and other client errors, by error.");
	put_counters(f, g, n, "heapprof_client_errors_total", "error", errors,
	             sizeof(errors) / sizeof(errors[0]));
}

static int by_heap_live_desc(const void *a, const void *b)
{
	const struct top_func *x = a, *y = b;
	if (x->heap != y->heap)
		return x->heap < y->heap ? -1 : 1;
	int64_t lx = top_value(&x->c, TOP_SPACE);
	int64_t ly = top_value(&y->c, TOP_SPACE);
	return lx < ly ? 1 : lx > ly ? -1 : 0;
}

static const char *heap_name(const struct top_reading *t, uint32_t id)
{
	for (size_t i = 0; i < t->nheaps; i++)
		if (t->heaps[i].id == id)
			return t->heaps[i].name;
	return "?";
}

/* The top_n functions of each heap of g by live bytes. */
static void put_functions(FILE *f, const struct reading *g, long top_n)
{
	if (!g->ok || !g->t.nfuncs)
		return;
	struct top_func *fs = malloc(g->t.nfuncs * sizeof(*fs));
	if (!fs)
		return;
	memcpy(fs, g->t.funcs, g->t.nfuncs * sizeof(*fs));
	qsort(fs, g->t.nfuncs, sizeof(*fs), by_heap_live_desc);
	long k = 0;
	for (size_t i = 0; i < g->t.nfuncs; i++) {
		k = i && fs[i].heap != fs[i - 1].heap ? 0 : k;
		int64_t v = top_value(&fs[i].c, TOP_SPACE);
		if (k >= top_n || v <= 0)
			continue;
		k++;
		series(f, "heapprof_function_live_bytes", g,
		       heap_name(&g->t, fs[i].heap), "function",
		       top_name(g->r, fs[i].name), v);
	}
	free(fs);
}

static void put_metrics(FILE *f, struct serve_server *s, struct reading *g,
                        size_t n)
{
	size_t nok = 0;
	for (size_t i = 0; i < n; i++)
		nok += g[i].ok;
	help(f, "heapprof_targets", "gauge",
	     "Processes asked for that run now.");
	fprintf(f, "heapprof_targets %zu\n", n);
	help(f, "heapprof_profiled", "gauge",
	     "Processes whose heap could be read.");
	fprintf(f, "heapprof_profiled %zu\n", nok);
	help(f, "heapprof_http_requests_total", "counter", "Requests served.");
	fprintf(f, "heapprof_http_requests_total %" PRIu64 "\n", s->requests);
	help(f, "heapprof_http_bad_requests_total", "counter",
	     "Requests answered 4xx.");
	fprintf(f, "heapprof_http_bad_requests_total %" PRIu64 "\n",
	        s->bad_requests);
	pthread_mutex_lock(&s->mu);
	uint64_t cut = s->cut;
	pthread_mutex_unlock(&s->mu);
	help(f, "heapprof_http_connections_cut_total", "counter",
	     "Connections closed for taking too long to send a request.");
	fprintf(f, "heapprof_http_connections_cut_total %" PRIu64 "\n", cut);
	for (size_t m = 0; m < sizeof(heap_metrics) / sizeof(heap_metrics[0]);
	     m++) {
		help(f, heap_metrics[m].name, heap_metrics[m].type,
		     heap_metrics[m].help);
		for (size_t i = 0; i < n; i++)
			for (size_t h = 0; g[i].ok && h < g[i].t.nheaps; h++)
				series(f, heap_metrics[m].name, &g[i],
				       g[i].t.heaps[h].name, NULL, NULL,
				       heap_value(&g[i].t.heaps[h],
				                  heap_metrics[m].m));
	}
	put_process(f, g, n);
	help(f, "heapprof_function_live_bytes", "gauge",
	     "Live bytes allocated by the function (the allocator's caller), "
	     "the top N of each process and heap.");
	for (size_t i = 0; i < n; i++)
		put_functions(f, &g[i], s->c.top_n);
}

static enum MHD_Result do_metrics(struct serve_server *s,
                                  struct MHD_Connection *conn)
{
	pid_t t[SERVE_MAX_TARGETS];
	size_t n = serve_targets(&s->c, t);
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
	size_t n = serve_targets(&s->c, t);
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

/* Keep t (taken) as the newest symbol table, the oldest dropped. */
static void keep_symbols(struct serve_server *s, struct pp_symtab *t)
{
	uint64_t *asked = calloc(t->n ? t->n : 1, sizeof(*asked));
	if (!asked) {
		pp_symtab_free(t);
		return;
	}
	struct served_syms *last = &s->syms[SYMTABS - 1];
	pp_symtab_free(&last->t);
	free(last->asked);
	memmove(&s->syms[1], &s->syms[0], (SYMTABS - 1) * sizeof(s->syms[0]));
	s->syms[0] = (struct served_syms){.t = *t, .asked = asked};
}

static enum MHD_Result do_pprof(struct serve_server *s,
                                struct MHD_Connection *conn,
                                const struct pprof_ask *a)
{
	struct live_snapshot ls;
	struct pp_symtab syms;
	char db[PATH_MAX], out[PATH_MAX], saved[PATH_MAX] = "";
	char *body = NULL;
	size_t len = 0, nsamples = 0;

	const char *why = not_served(s, a->pid);
	if (why[0]) {
		s->bad_requests++;
		return reply_text(conn,
		                  strncmp(why, "another", 7)
		                          ? MHD_HTTP_NOT_FOUND
		                          : MHD_HTTP_FORBIDDEN,
		                  "pid %d: %s\n", (int)a->pid, why);
	}
	int rc = live_snapshot_open(a->pid, &ls);
	if (rc == -1) {
		s->bad_requests++;
		enum MHD_Result r =
		        reply_text(conn, MHD_HTTP_NOT_FOUND, "%s\n", ls.why);
		live_snapshot_close(&ls);
		return r;
	}
	if (rc == 0)
		rc = live_snapshot_take(&ls);
	if (rc == 0 && a->heap && !has_heap(&ls, a->heap)) {
		s->bad_requests++;
		live_snapshot_close(&ls);
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
		                  "pid %d has no heap named '%s'\n",
		                  (int)a->pid, a->heap);
	}
	s->seq++;
	snprintf(db, sizeof(db), "%s/request-%" PRIu64 ".db", s->c.dir, s->seq);
	snprintf(out, sizeof(out), "%s/request-%" PRIu64 ".pb.gz", s->c.dir,
	         s->seq);
	if (rc == 0 &&
	    (rc = live_snapshot_write_db(&ls, db, "heapprof serve")) != 0)
		hp_err(SUBSYS, "pid %d: %s", (int)a->pid, ls.why);
	uint64_t wall = ls.wall;
	live_snapshot_close(&ls);
	if (rc == 0)
		rc = snapshot_pprof_of_db(db, out, a->heap,
		                          SNAPSHOT_PPROF_GO_NAMES, wall,
		                          &nsamples, &syms, SUBSYS);
	if (rc == 0 && read_whole(out, &body, &len) != 0) {
		pp_symtab_free(&syms);
		rc = -1;
	}
	if (rc == 0)
		keep_symbols(s, &syms);
	if (rc == 0 && a->save &&
	    (saved_path(s, a->pid, saved, sizeof(saved)) ||
	     rename(db, saved) != 0)) {
		hp_err(SUBSYS, "keeping the snapshot of pid %d: %s",
		       (int)a->pid, strerror(errno));
		saved[0] = '\0';
	}
	unlink(db);
	unlink(out);
	if (rc != 0)
		return reply_text(
		        conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		        "pid %d: the heap profile could not be made\n",
		        (int)a->pid);
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

/* ---- /debug/pprof/symbol ---------------------------------------------- */

/*
 * Go's net/http/pprof symbol handler, which go tool pprof asks for the
 * names of the addresses of a profile's mappings that lack some: the
 * query (GET) or body (POST) is addresses joined by '+' ("0x4a1b2c+
 * 0x4a1d00"); the answer "num_symbols: 1" (there are symbols), then
 * "0xADDR NAME" for each address known.  Known here: the named locations
 * of the profiles served last (pp_symtab), newest first, each address
 * answered once per request.  A word that is no address is skipped, as
 * Go skips it.
 */
struct symbol_ask {
	uint64_t id; /* which request: symtab's asked marks */
	FILE *out;   /* the answer so far */
	char *body;  /* out's buffer (open_memstream) */
	size_t len;
	char word[24]; /* the word being read */
	size_t wlen;
	bool wlong; /* longer than any address: skipped */
};

static int symbol_ask_open(struct serve_server *s, struct symbol_ask *k)
{
	memset(k, 0, sizeof(*k));
	k->id = ++s->symbol_requests;
	k->out = open_memstream(&k->body, &k->len);
	if (!k->out)
		return -1;
	fputs("num_symbols: 1\n", k->out);
	return 0;
}

static void symbol_ask_close(struct symbol_ask *k)
{
	if (k->out)
		fclose(k->out);
	free(k->body);
	memset(k, 0, sizeof(*k));
}

/* A word as Go's strconv.ParseUint(word, 0, 64) mostly reads it: "0x"
 * and hex digits (what go tool pprof sends), or decimal.  0: none. */
static uint64_t word_address(const char *w, size_t n)
{
	unsigned base = 10;
	uint64_t v = 0;
	if (n > 2 && w[0] == '0' && (w[1] == 'x' || w[1] == 'X')) {
		base = 16;
		w += 2;
		n -= 2;
	}
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned d;
		char c = w[i];
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			return 0;
		if (v > (UINT64_MAX - d) / base)
			return 0; /* does not fit: no address */
		v = v * base + d;
	}
	return v;
}

static void symbol_word_end(struct serve_server *s, struct symbol_ask *k)
{
	uint64_t addr = k->wlong ? 0 : word_address(k->word, k->wlen);
	k->wlen = 0;
	k->wlong = false;
	if (!addr)
		return;
	for (size_t t = 0; t < SYMTABS; t++) {
		struct served_syms *ss = &s->syms[t];
		const struct pp_sym *y = pp_symtab_find(&ss->t, addr);
		if (!y)
			continue;
		size_t i = (size_t)(y - ss->t.syms);
		if (ss->asked[i] != k->id) {
			ss->asked[i] = k->id;
			fprintf(k->out, "%#" PRIx64 " %s\n", addr, y->name);
		}
		return;
	}
}

/* Bytes of the addresses: words end at '+' (and at a blank, what a
 * query's '+' became in libmicrohttpd's hands). */
static void symbol_feed(struct serve_server *s, struct symbol_ask *k,
                        const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '+' || p[i] == ' ') {
			symbol_word_end(s, k);
		} else if (k->wlen < sizeof(k->word)) {
			k->word[k->wlen++] = p[i];
		} else {
			k->wlong = true;
		}
	}
}

static enum MHD_Result symbol_query_key(void *cls, enum MHD_ValueKind kind,
                                        const char *key, const char *value)
{
	void **c = cls;
	struct serve_server *s = c[0];
	struct symbol_ask *k = c[1];
	(void)kind;
	symbol_feed(s, k, key, strlen(key));
	if (value) { /* "k=v": one word, as Go reads the raw query */
		symbol_feed(s, k, "=", 1);
		symbol_feed(s, k, value, strlen(value));
	}
	symbol_word_end(s, k);
	return MHD_YES;
}

/* The answer to k, whose words are all in. */
static enum MHD_Result symbol_reply(struct serve_server *s,
                                    struct MHD_Connection *conn,
                                    struct symbol_ask *k)
{
	symbol_word_end(s, k);
	if (fclose(k->out) != 0) {
		k->out = NULL;
		symbol_ask_close(k);
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                  "out of memory\n");
	}
	k->out = NULL;
	struct MHD_Response *r = MHD_create_response_from_buffer(
	        k->len, k->body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		symbol_ask_close(k);
		return MHD_NO;
	}
	k->body = NULL; /* the response's now */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	                        "text/plain; charset=utf-8");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* GET /debug/pprof/symbol[?ADDR+ADDR...] */
static enum MHD_Result do_symbol_get(struct serve_server *s,
                                     struct MHD_Connection *conn)
{
	struct symbol_ask k;
	if (symbol_ask_open(s, &k) < 0)
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                  "out of memory\n");
	void *c[2] = {s, &k};
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, symbol_query_key,
	                          c);
	return symbol_reply(s, conn, &k);
}

static enum MHD_Result route(struct serve_server *s,
                             struct MHD_Connection *conn, const char *url)
{
	if (!strcmp(url, "/metrics"))
		return do_metrics(s, conn);
	if (!strcmp(url, SYMBOL_PATH))
		return do_symbol_get(s, conn);
	if (strcmp(url, "/debug/pprof/heap")) {
		/* also a path with a control byte (%00 and the like): it
		 * names nothing */
		s->bad_requests++;
		return reply_text(conn, MHD_HTTP_NOT_FOUND,
		                  "not found: /metrics, /debug/pprof/heap "
		                  "and " SYMBOL_PATH " are served\n");
	}
	struct pprof_ask a;
	char why[1024];
	unsigned status = pprof_args(s, conn, &a, why, sizeof(why));
	if (status) {
		s->bad_requests++;
		return reply_text(conn, status, "%s\n", why);
	}
	return a.pid ? do_pprof(s, conn, &a) : do_list(s, conn);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* conn's watch (NULL: not watched, all slots taken) set busy or not. */
static void watch_busy(struct serve_server *s, struct MHD_Connection *conn,
                       bool busy)
{
	const union MHD_ConnectionInfo *i = MHD_get_connection_info(
	        conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn_watch *w = i ? i->socket_context : NULL;
	if (!w)
		return;
	pthread_mutex_lock(&s->mu);
	w->busy = busy;
	w->since_ms = mono_ms();
	pthread_mutex_unlock(&s->mu);
}

/* A request's state between libmicrohttpd's calls. */
struct req {
	size_t body; /* bytes of a request body seen */
	/* a POST to /debug/pprof/symbol with the token: its body read */
	bool symbol;
	struct symbol_ask k;
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

	if (!q) { /* headers only so far */
		q = calloc(1, sizeof(*q));
		*con_cls = q;
		watch_busy(s, conn, true);
		if (!q)
			return MHD_NO;
		/* Only a client with the token gets its addresses read. */
		if (!strcmp(method, "POST") && !strcmp(url, SYMBOL_PATH) &&
		    token_ok(s, conn)) {
			if (symbol_ask_open(s, &q->k) < 0)
				return MHD_NO;
			q->symbol = true;
		}
		return MHD_YES;
	}
	if (*upload_data_size) { /* a body: read (symbol), else dropped */
		size_t n = *upload_data_size;
		q->body += n;
		*upload_data_size = 0;
		if (q->symbol)
			symbol_feed(s, &q->k, upload_data, n);
		return q->body <= (q->symbol ? SYMBOL_BODY_MAX : MAX_BODY_BYTES)
		               ? MHD_YES
		               : MHD_NO;
	}
	s->requests++;
	if (q->symbol)
		return symbol_reply(s, conn, &q->k);
	/* (a POST to it that is still here lacks the token: 401 below) */
	bool symbol_post = !strcmp(method, "POST") && !strcmp(url, SYMBOL_PATH);
	if (!symbol_post &&
	    (q->body || (strcmp(method, "GET") && strcmp(method, "HEAD")))) {
		s->bad_requests++;
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
		                  "only GET and HEAD (and POST to " SYMBOL_PATH
		                  ")\n");
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
	struct req *q = *con_cls;
	(void)why;
	if (q)
		symbol_ask_close(&q->k);
	free(q);
	*con_cls = NULL;
	watch_busy(cls, conn, false);
}

/*
 * libmicrohttpd decodes %XX in the path and the query in place and hands
 * the handlers C strings: "/metrics%00.txt" would arrive as "/metrics",
 * "pid=5%00" as "5", the rest cut off unseen.  A NUL decoded here becomes
 * 0x7f (DEL), a control byte like the others: no path with one is served
 * (404), no query value with one is taken (400).
 */
static size_t unescape(void *cls, struct MHD_Connection *c, char *v)
{
	(void)cls;
	(void)c;
	size_t n = MHD_http_unescape(v);
	for (size_t i = 0; i < n; i++)
		if (!v[i])
			v[i] = 0x7f;
	return n;
}

/* libmicrohttpd calls this with CLOSED before it closes the socket, so
 * under mu a watched descriptor is still the connection's own. */
static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
	struct serve_server *s = cls;
	pthread_mutex_lock(&s->mu);
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *i = MHD_get_connection_info(
		        conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		*socket_context = NULL;
		for (size_t k = 0; i && k < s->nwatch; k++) {
			if (s->watch[k].used)
				continue;
			s->watch[k] =
			        (struct conn_watch){.used = true,
			                            .fd = i->connect_fd,
			                            .since_ms = mono_ms()};
			*socket_context = &s->watch[k];
			break;
		}
	} else if (*socket_context) {
		((struct conn_watch *)*socket_context)->used = false;
		*socket_context = NULL;
	}
	pthread_mutex_unlock(&s->mu);
}

void serve_tick(struct serve_server *s)
{
	uint64_t now = mono_ms();
	uint64_t headers_ms =
	        (uint64_t)s->c.timeout_s * 1000 * HEADERS_TIMEOUTS;
	pthread_mutex_lock(&s->mu);
	for (size_t k = 0; k < s->nwatch; k++) {
		struct conn_watch *w = &s->watch[k];
		if (!w->used ||
		    now - w->since_ms <= (w->busy ? ANSWER_MAX_MS : headers_ms))
			continue;
		/* libmicrohttpd sees the end and closes it */
		shutdown(w->fd, SHUT_RDWR);
		w->since_ms = now;
		s->cut++;
	}
	pthread_mutex_unlock(&s->mu);
}

struct serve_server *serve_start(const struct serve_config *c)
{
	struct serve_server *s = calloc(1, sizeof(*s));
	if (!s) {
		hp_err(SUBSYS, "out of memory");
		return NULL;
	}
	s->c = *c;
	s->nwatch = c->max_connections + 4;
	s->watch = calloc(s->nwatch, sizeof(*s->watch));
	if (!s->watch) {
		hp_err(SUBSYS, "out of memory");
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	bool v6 = c->addr.ss_family == AF_INET6;
	unsigned port =
	        ntohs(v6 ? ((const struct sockaddr_in6 *)&c->addr)->sin6_port
	                 : ((const struct sockaddr_in *)&c->addr)->sin_port);
	s->d = MHD_start_daemon(
	        MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD |
	                MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0),
	        0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
	        (const struct sockaddr *)&s->c.addr,
	        MHD_OPTION_CONNECTION_LIMIT, c->max_connections,
	        MHD_OPTION_PER_IP_CONNECTION_LIMIT, c->max_connections,
	        MHD_OPTION_CONNECTION_TIMEOUT, c->timeout_s,
	        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 << 10),
	        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
	        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
	        MHD_OPTION_UNESCAPE_CALLBACK, unescape, s, MHD_OPTION_END);
	if (!s->d) {
		char a[INET6_ADDRSTRLEN + 16];
		serve_addr_str(&c->addr, port, a, sizeof(a));
		hp_err(SUBSYS,
		       "cannot listen on %s (in use, or not an address of "
		       "this machine?)",
		       a);
		pthread_mutex_destroy(&s->mu);
		free(s->watch);
		free(s);
		return NULL;
	}
	const union MHD_DaemonInfo *i =
	        MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = i ? i->port : port;
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
	for (size_t i = 0; i < SYMTABS; i++) {
		pp_symtab_free(&s->syms[i].t);
		free(s->syms[i].asked);
	}
	pthread_mutex_destroy(&s->mu);
	free(s->watch);
	free(s);
}
