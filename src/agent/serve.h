/*
 * The HTTP side of `heapprof serve` (docs/FLEET.md): libmicrohttpd with
 * one internal polling thread, a bounded number of connections and a time
 * limit per connection (serve_int.h lists its files).  Every request reads
 * the profiled processes' shared regions from the outside (top_read.h,
 * live_snapshot.h): the sessions that profile them never wait on a
 * request.
 *
 *   GET /metrics                    Prometheus text exposition format
 *   GET /debug/pprof/heap?pid=N     a dump taken now, gzipped pprof with
 *   GET /debug/pprof/heap?name=N    Go's heap sample types (&heap=H: a
 *                                   heap other than libc.malloc; &save=1:
 *                                   its database kept in the agent's
 *                                   directory)
 *   GET /debug/pprof/heap           the profiled processes, as text
 *   GET, POST /debug/pprof/symbol   Go's symbol protocol: the names of
 *                                   the addresses of the profiles served
 *                                   last (GET alone: "num_symbols: 1")
 *
 * A malformed query is 400, a path served by nothing (one holding a
 * control byte too) 404.
 *
 * Errors: serve_start prints one line "heapprof: serve: ..." and returns
 * NULL.
 */
#ifndef HEAPPROF_AGENT_SERVE_H
#define HEAPPROF_AGENT_SERVE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SERVE_MAX_TARGETS 64

struct serve_config {
	struct sockaddr_storage addr; /* where to listen: IPv4 or IPv6 */
	/* which processes: these pids and every process of these names */
	const pid_t *pids;
	size_t npids;
	const char *const *names;
	size_t nnames;
	bool all_users;           /* every user's (root only), not only ours */
	long top_n;               /* functions per process and heap */
	const char *token;        /* bearer token; NULL: none asked */
	unsigned max_connections; /* at once, all clients */
	unsigned timeout_s;       /* per connection, idle */
	/* The agent's directory: the sessions' databases, a request's
	 * files, the snapshots saved (?save=1) when kept (-o DIR). */
	const char *dir;
	bool keep;
};

/* addr as "HOST:PORT" ("[::1]:PORT" for IPv6) into buf. */
void serve_addr_str(const struct sockaddr_storage *addr, unsigned port,
                    char *buf, size_t len);

struct serve_server;

struct serve_server *serve_start(const struct serve_config *c);

/* Once a second, from another thread: cuts the connections whose
 * request's headers took more than 3 timeouts (a client trickling bytes
 * slower than it could), or whose answer more than 5 minutes. */
void serve_tick(struct serve_server *s);

/* The port listened on (the one the kernel chose for port 0). */
unsigned serve_port(const struct serve_server *s);

void serve_stop(struct serve_server *s);

#endif
