/*
 * GET and POST /debug/pprof/symbol of `heapprof serve` (serve_int.h).
 *
 * Go's net/http/pprof symbol handler, which go tool pprof asks for the
 * names of the addresses of a profile's mappings that lack some: the
 * query (GET) or body (POST) is addresses joined by '+' ("0x4a1b2c+
 * 0x4a1d00"); the answer "num_symbols: 1" (there are symbols), then
 * "0xADDR NAME" for each address known.  Known here: the named locations
 * of the profiles served last (pp_symtab), newest first, each address
 * answered once per request.  A word that is no address is skipped, as
 * Go skips it.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/serve_int.h"
#include "export/pprof.h"

int serve_symbol_open(struct serve_server *s, struct symbol_ask *k)
{
	memset(k, 0, sizeof(*k));
	k->id = ++s->symbol_requests;
	k->out = open_memstream(&k->body, &k->len);
	if (!k->out)
		return -1;
	fputs("num_symbols: 1\n", k->out);
	return 0;
}

void serve_symbol_close(struct symbol_ask *k)
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
void serve_symbol_feed(struct serve_server *s, struct symbol_ask *k,
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
	serve_symbol_feed(s, k, key, strlen(key));
	if (value) { /* "k=v": one word, as Go reads the raw query */
		serve_symbol_feed(s, k, "=", 1);
		serve_symbol_feed(s, k, value, strlen(value));
	}
	symbol_word_end(s, k);
	return MHD_YES;
}

/* The answer to k, whose words are all in. */
enum MHD_Result serve_symbol_reply(struct serve_server *s,
                                   struct MHD_Connection *conn,
                                   struct symbol_ask *k)
{
	symbol_word_end(s, k);
	if (fclose(k->out) != 0) {
		k->out = NULL;
		serve_symbol_close(k);
		return serve_reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                        "out of memory\n");
	}
	k->out = NULL;
	struct MHD_Response *r = MHD_create_response_from_buffer(
	        k->len, k->body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		serve_symbol_close(k);
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
enum MHD_Result serve_symbol_get(struct serve_server *s,
                                 struct MHD_Connection *conn)
{
	struct symbol_ask k;
	if (serve_symbol_open(s, &k) < 0)
		return serve_reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                        "out of memory\n");
	void *c[2] = {s, &k};
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, symbol_query_key,
	                          c);
	return serve_symbol_reply(s, conn, &k);
}

/* Keep t (taken) as the newest symbol table, the oldest dropped. */
void serve_symbol_keep(struct serve_server *s, struct pp_symtab *t)
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
