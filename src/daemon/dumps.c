/*
 * Dump requests (`heapprof dump`, SIGUSR1 to heapprofd): asked of every
 * session concerned, answered once each has said how many processes it
 * dumped, or when DUMP_TIMEOUT_MS has passed.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "daemon/daemon_int.h"

void dump_finish(size_t i)
{
	struct dumpreq *r = D.dumps[i];
	r->res.timeouts += r->nwaiting;
	if (r->client && !r->client->dead) {
		conn_send(r->client, HP_CTL_DUMP_RESULT, &r->res,
		          sizeof(r->res), -1);
		r->client->kind = C_CLOSING;
		r->client->deadline = now_ms() + CONN_DEADLINE_MS;
	}
	if (r->client)
		r->client->dump_id = 0;
	dlog("dump %" PRIu64 ": %u sessions answered, %u processes dumped, "
	     "%u errors, %u timeouts",
	     r->id, r->res.sessions, r->res.dumps, r->res.errors,
	     r->res.timeouts);
	free(r);
	D.dumps[i] = D.dumps[--D.ndumps];
}

/* Sends DUMP_REQUEST to every session concerned; client may be NULL. */
void dump_start(struct conn *client, int pid)
{
	if (D.ndumps == MAX_DUMPS) {
		if (client)
			send_error(client, "too many dumps in progress");
		return;
	}
	struct dumpreq *r = calloc(1, sizeof(*r));
	if (!r) {
		if (client)
			send_error(client, "out of memory");
		return;
	}
	r->id = ++D.next_dump_id;
	r->client = client;
	r->deadline = now_ms() + DUMP_TIMEOUT_MS;
	struct hp_ctl_dump_request q = {.request_id = r->id, .pid = pid};
	for (size_t i = 0; i < D.nsessions; i++) {
		struct session *s = D.sessions[i];
		if (pid) {
			uint64_t st;
			if (read_stat(pid, &st, NULL))
				break;
			struct target *t = target_find(pid, st);
			if (!t || t->s != s || t->state != T_OWNED)
				continue;
		}
		if (conn_send(s->c, HP_CTL_DUMP_REQUEST, &q, sizeof(q), -1))
			continue;
		r->waiting[r->nwaiting++] = s->id;
	}
	if (client) {
		client->kind = C_WAIT;
		client->dump_id = r->id;
		client->deadline = -1;
	}
	dlog("dump %" PRIu64 " (%s, pid %d): asked %u sessions", r->id,
	     client ? "heapprof dump" : "SIGUSR1", pid, r->nwaiting);
	D.dumps[D.ndumps++] = r;
	if (!r->nwaiting)
		dump_finish(D.ndumps - 1);
}

void dump_done(struct session *s, const struct hp_ctl_dump_done *dd)
{
	for (size_t i = 0; i < D.ndumps; i++) {
		struct dumpreq *r = D.dumps[i];
		if (r->id != dd->request_id)
			continue;
		for (uint32_t k = 0; k < r->nwaiting; k++) {
			if (r->waiting[k] != s->id)
				continue;
			r->waiting[k] = r->waiting[--r->nwaiting];
			r->res.sessions++;
			r->res.dumps += dd->dumps;
			r->res.errors += dd->errors;
			if (!r->nwaiting)
				dump_finish(i);
			return;
		}
		return;
	}
}

void dump_forget_session(uint64_t sid)
{
	for (size_t i = 0; i < D.ndumps;) {
		struct dumpreq *r = D.dumps[i];
		int finished = 0;
		for (uint32_t k = 0; k < r->nwaiting; k++) {
			if (r->waiting[k] != sid)
				continue;
			r->waiting[k] = r->waiting[--r->nwaiting];
			r->res.timeouts++;
			if (!r->nwaiting) {
				dump_finish(i);
				finished = 1;
			}
			break;
		}
		if (!finished)
			i++;
	}
}
