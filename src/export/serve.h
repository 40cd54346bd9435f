/*
 * The HTTP side of `heapprof serve` (docs/FLEET.md): libmicrohttpd with
 * one internal polling thread, a bounded number of connections and a time
 * limit per connection.  Every request reads the profiled processes'
 * shared regions from the outside (top_read.h, live_snapshot.h): the
 * sessions that profile them never wait on a request.
 *
 *   GET /metrics                    Prometheus text exposition format
 *   GET /debug/pprof/heap?pid=N     a dump taken now, gzipped pprof with
 *   GET /debug/pprof/heap?name=N    Go's heap sample types
 *   GET /debug/pprof/heap           the profiled processes, as text
 *
 * Errors: serve_start prints one line "heapprof: serve: ..." and returns
 * NULL.
 */
#ifndef HEAPPROF_EXPORT_SERVE_H
#define HEAPPROF_EXPORT_SERVE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SERVE_MAX_TARGETS 64

struct serve_config {
	struct sockaddr_in addr; /* where to listen */
	/* which processes: these pids and every process of these names */
	const pid_t *pids;
	size_t npids;
	const char *const *names;
	size_t nnames;
	long top_n;               /* functions per process in /metrics */
	const char *token;        /* bearer token; NULL: none asked */
	unsigned max_connections; /* at once, all clients */
	unsigned timeout_s;       /* per connection, idle */
	uint64_t interval;        /* the sessions' -i; 0: record's default */
	const char *tmpdir;       /* where the pprof of a request is built */
};

struct serve_server;

struct serve_server *serve_start(const struct serve_config *c);

/* The port listened on (the one the kernel chose for port 0). */
unsigned serve_port(const struct serve_server *s);

void serve_stop(struct serve_server *s);

#endif
