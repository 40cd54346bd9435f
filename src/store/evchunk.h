/*
 * The event trace's storage: a chunk of events of one process, encoded
 * column by column and compressed (docs/TRACE.md, "Storage").  A chunk is
 * one heapprof_event_chunk row; it decodes on its own, without the chunks
 * before it.
 *
 * Encoding, per event in order (the order the events were written):
 *   tag      one byte: free, "a free of an allocation of this chunk" (a
 *            reference: its address, size, charge, stack, heap and
 *            alloc_ts are that allocation's), and which of the columns
 *            below it has a value in;
 *   ts       zigzag varint of the difference to the event before (times
 *            of several threads are not in order);
 *   ref      a reference: how many events back its allocation is;
 *   tid      when it is not the event before's: its index in the chunk's
 *            thread table;
 *   address  zigzag varint of the difference to the last address stored;
 *   size     varint; charged only when it is not size;
 *   stack    index in the chunk's table of stack keys;
 *   heap     when it is not the last stored: the heap name's id;
 *   alloc_ts when not NULL (0): zigzag varint of ts - alloc_ts.
 * The header holds the count, the thread and stack tables and the length
 * of each column; the whole is then compressed with zstd.  Every value
 * decodes back exactly (64-bit values wrap as in SQLite's integers).
 *
 * Not thread-safe: one encoder or decoder per thread.  Functions return 0
 * or a negative errno (-ENOMEM; -EINVAL for a blob that is not a whole
 * chunk); nothing is printed.
 */
#ifndef HEAPPROF_STORE_EVCHUNK_H
#define HEAPPROF_STORE_EVCHUNK_H

#include <stddef.h>
#include <stdint.h>

/* One event as a chunk keeps it (heapprof_event's columns but upid). */
struct evc_event {
	int64_t ts;
	int64_t address, size, charged;
	int64_t stack_key;
	int64_t alloc_ts; /* 0: NULL */
	uint32_t tid;
	uint32_t heap; /* the process's heap name (heapprof_event_heap.id) */
	uint32_t free; /* 0: an allocation, 1: a free */
};

/* Events in a chunk at most (a decoder refuses more). */
#define EVC_MAX_EVENTS (1u << 20)

struct evc_enc;
struct evc_enc *evc_enc_new(void);
void evc_enc_free(struct evc_enc *e);
/*
 * Encodes ev[0..n) (1 <= n <= EVC_MAX_EVENTS) with zstd at `level`; *out
 * and *len the blob, in e until the next call.
 */
int evc_encode(struct evc_enc *e, const struct evc_event *ev, size_t n,
               int level, const void **out, size_t *len);

struct evc_dec;
struct evc_dec *evc_dec_new(void);
void evc_dec_free(struct evc_dec *d);
/* Decodes a blob evc_encode made: *ev (in d until the next call), *n. */
int evc_decode(struct evc_dec *d, const void *blob, size_t len,
               const struct evc_event **ev, size_t *n);

#endif
