/*
 * The HTTP side of `heapprof serve` (serve.h), shared by its files:
 *
 *   serve.c          the server: libmicrohttpd, connections and their
 *                    time limits, the token, the routes, the replies
 *   serve_metrics.c  GET /metrics: each process read (top_read), written
 *                    by export/prometheus.c
 *   serve_heap.c     GET /debug/pprof/heap: its query, the process list,
 *                    a live snapshot as a gzipped pprof
 *   serve_symbol.c   GET, POST /debug/pprof/symbol: Go's symbol protocol
 *                    over the profiles served last
 *
 * libmicrohttpd runs every handler on its one internal thread, one
 * request at a time: nothing here but the connection watch needs a lock.
 */
#ifndef HEAPPROF_AGENT_SERVE_INT_H
#define HEAPPROF_AGENT_SERVE_INT_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "agent/serve.h"
#include "export/pprof.h"

/* The symbols of this many profiles served last are kept for
 * /debug/pprof/symbol: go tool pprof asks right after its fetch, so the
 * newest is the one it means; a few more cover scrapers interleaved. */
#define SYMTABS     4
#define SYMBOL_PATH "/debug/pprof/symbol"

struct top_reader;

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

/* ---- serve.c: replies ---------------------------------------------------- */

/* body (malloc'd, taken) as the response with status and Content-Type. */
enum MHD_Result serve_reply(struct MHD_Connection *conn, unsigned status,
                            const char *type, void *body, size_t len);
/* A text/plain response. */
enum MHD_Result serve_reply_text(struct MHD_Connection *conn, unsigned status,
                                 const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* ---- the endpoints ------------------------------------------------------- */

/* GET /metrics (serve_metrics.c). */
enum MHD_Result serve_metrics_answer(struct serve_server *s,
                                     struct MHD_Connection *conn);

/* GET /debug/pprof/heap, with its query (serve_heap.c). */
enum MHD_Result serve_heap_answer(struct serve_server *s,
                                  struct MHD_Connection *conn);

/* /debug/pprof/symbol (serve_symbol.c): the addresses asked, as they come
 * (a GET's query, a POST's body), and the answer so far. */
struct symbol_ask {
	uint64_t id; /* which request: symtab's asked marks */
	FILE *out;   /* the answer so far */
	char *body;  /* out's buffer (open_memstream) */
	size_t len;
	char word[24]; /* the word being read */
	size_t wlen;
	bool wlong; /* longer than any address: skipped */
};

/* A new request's k.  0 or -1 (out of memory). */
int serve_symbol_open(struct serve_server *s, struct symbol_ask *k);
void serve_symbol_close(struct symbol_ask *k);
/* Bytes of the addresses (a POST's body as it comes). */
void serve_symbol_feed(struct serve_server *s, struct symbol_ask *k,
                       const char *p, size_t n);
/* The answer to k, whose words are all in. */
enum MHD_Result serve_symbol_reply(struct serve_server *s,
                                   struct MHD_Connection *conn,
                                   struct symbol_ask *k);
/* GET /debug/pprof/symbol[?ADDR+ADDR...] */
enum MHD_Result serve_symbol_get(struct serve_server *s,
                                 struct MHD_Connection *conn);
/* Keep t (taken) as the newest symbol table, the oldest dropped. */
void serve_symbol_keep(struct serve_server *s, struct pp_symtab *t);

#endif
