/*
 * `heapprof serve`'s HTTP server (serve.h, docs/FLEET.md "Design").
 *
 * libmicrohttpd runs one internal polling thread: every handler (the
 * routes here, the endpoints in serve_metrics.c, serve_heap.c and
 * serve_symbol.c) runs on it, one request at a time, so the reader cache
 * and the symbol tables need no lock.  Connections are bounded
 * (MHD_OPTION_CONNECTION_LIMIT, per IP too) and timed out
 * (MHD_OPTION_CONNECTION_TIMEOUT); a request body is refused, but for
 * the addresses a POST to /debug/pprof/symbol asks about, read as they
 * come (never held whole) up to SYMBOL_BODY_MAX.
 */

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agent/serve_int.h"
#include "inspect/top_read.h"
#include "util/clock.h"
#include "util/err.h"

#define SUBSYS "serve"
/* The addresses of one symbol request (go tool pprof sends each one
 * "0x7f3a2b1c4d5e+", 15 bytes): a million. */
#define SYMBOL_BODY_MAX (16u << 20)

/* A request's headers must be in within this many idle timeouts of the
 * connection's opening (or its last response); its answer within
 * ANSWER_MAX_MS. */
#define HEADERS_TIMEOUTS 3
#define ANSWER_MAX_MS    300000u

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

/* ---- responses ----------------------------------------------------------- */

enum MHD_Result serve_reply(struct MHD_Connection *conn, unsigned status,
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

enum MHD_Result serve_reply_text(struct MHD_Connection *conn, unsigned status,
                                 const char *fmt, ...)
{
	char *body = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (n < 0)
		return MHD_NO;
	return serve_reply(conn, status, "text/plain; charset=utf-8", body,
	                   (size_t)n);
}

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

/* GET /: what this agent serves, for whoever opens its address. */
static enum MHD_Result index_page(struct MHD_Connection *conn)
{
	return serve_reply_text(
	        conn, MHD_HTTP_OK,
	        "heapprof serve: the heaps of the processes it profiles\n"
	        "\n"
	        "GET /metrics\n"
	        "    Prometheus text: each process's live heap, its top"
	        " functions, the agent's own state\n"
	        "GET /debug/pprof/heap?pid=PID | ?name=NAME"
	        " [&heap=H] [&save=1]\n"
	        "    a pprof heap profile of a process, read now"
	        " (go tool pprof http://HOST:PORT/debug/pprof/heap?pid=PID)\n"
	        "GET /debug/pprof/heap\n"
	        "    the processes served, one a line\n"
	        "GET, POST " SYMBOL_PATH "\n"
	        "    function names of the addresses of the profiles served"
	        " (pprof asks it)\n"
	        "\n"
	        "docs/FLEET.md tells the rest.\n");
}

static enum MHD_Result route(struct serve_server *s,
                             struct MHD_Connection *conn, const char *url)
{
	if (!strcmp(url, "/"))
		return index_page(conn);
	if (!strcmp(url, "/metrics"))
		return serve_metrics_answer(s, conn);
	if (!strcmp(url, SYMBOL_PATH))
		return serve_symbol_get(s, conn);
	if (strcmp(url, "/debug/pprof/heap")) {
		/* also a path with a control byte (%00 and the like): it
		 * names nothing */
		s->bad_requests++;
		return serve_reply_text(
		        conn, MHD_HTTP_NOT_FOUND,
		        "not found: /, /metrics, /debug/pprof/heap "
		        "and " SYMBOL_PATH " are served\n");
	}
	return serve_heap_answer(s, conn);
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
	w->since_ms = hp_mono_ms();
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
			if (serve_symbol_open(s, &q->k) < 0)
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
			serve_symbol_feed(s, &q->k, upload_data, n);
		return q->body <= (q->symbol ? SYMBOL_BODY_MAX : MAX_BODY_BYTES)
		               ? MHD_YES
		               : MHD_NO;
	}
	s->requests++;
	if (q->symbol)
		return serve_symbol_reply(s, conn, &q->k);
	/* (a POST to it that is still here lacks the token: 401 below) */
	bool symbol_post = !strcmp(method, "POST") && !strcmp(url, SYMBOL_PATH);
	if (!symbol_post &&
	    (q->body || (strcmp(method, "GET") && strcmp(method, "HEAD")))) {
		s->bad_requests++;
		return serve_reply_text(
		        conn, MHD_HTTP_METHOD_NOT_ALLOWED,
		        "only GET and HEAD (and POST to " SYMBOL_PATH ")\n");
	}
	if (!token_ok(s, conn)) {
		s->bad_requests++;
		return serve_reply_text(conn, MHD_HTTP_UNAUTHORIZED,
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
		serve_symbol_close(&q->k);
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
			                            .since_ms = hp_mono_ms()};
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
	uint64_t now = hp_mono_ms();
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
