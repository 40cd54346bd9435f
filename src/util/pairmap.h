/*
 * A map from a pair of 64-bit integers to a non-zero 64-bit value, for the
 * profile's hottest lookups: (parent callsite, frame) -> callsite while a
 * dump interns its stacks, (callsite, heap) -> per-stack state, pc ->
 * frame.  A dump of a million stacks does tens of millions of them, most
 * missing every cache, so a slot is 24 bytes with the key inline (no
 * length, no pointer, no memcmp) and the table stays at most half full.
 * Open addressing with linear probing; not thread-safe.
 */
#ifndef HEAPPROF_UTIL_PAIRMAP_H
#define HEAPPROF_UTIL_PAIRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pairmap_slot {
	int64_t a, b;
	int64_t v; /* 0: empty; PAIRMAP_DEAD: dropped */
};

/* A dropped entry that keeps its slot (pairmap_retain out of memory). */
#define PAIRMAP_DEAD INT64_MIN

struct pairmap {
	struct pairmap_slot *slots;
	size_t cap; /* power of two, or 0 */
	size_t len;
};

static inline uint64_t pairmap_hash(int64_t a, int64_t b)
{
	/* A multiply to mix a into b, then splitmix64's finalizer. */
	uint64_t h = (uint64_t)a * 0x9e3779b97f4a7c15ull ^ (uint64_t)b;
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h;
}

void pairmap_init(struct pairmap *m);
void pairmap_free(struct pairmap *m);
/* Room for n entries in all without growing again; 0 or -ENOMEM. */
int pairmap_reserve(struct pairmap *m, size_t n);

/* The value stored for (a, b), or 0. */
static inline int64_t pairmap_get(const struct pairmap *m, int64_t a, int64_t b)
{
	if (!m->cap)
		return 0;
	size_t mask = m->cap - 1;
	for (size_t i = pairmap_hash(a, b) & mask;; i = (i + 1) & mask) {
		const struct pairmap_slot *s = &m->slots[i];
		if (!s->v)
			return 0;
		if (s->a == a && s->b == b)
			return s->v == PAIRMAP_DEAD ? 0 : s->v;
	}
}

/*
 * The slot of (a, b): its value if present, else a new slot (*added) that
 * the caller fills with a non-zero value before the next call (a slot
 * left at 0 is empty again).  NULL when out of memory.
 */
struct pairmap_slot *pairmap_slot(struct pairmap *m, int64_t a, int64_t b,
                                  bool *added);
/* Prefetch the first slot (a, b) probes (a hint; no effect on the map). */
static inline void pairmap_prefetch(const struct pairmap *m, int64_t a,
                                    int64_t b)
{
	if (m->cap)
		__builtin_prefetch(
		        &m->slots[pairmap_hash(a, b) & (m->cap - 1)]);
}
/* Drop every entry whose value keep(v, arg) rejects. */
void pairmap_retain(struct pairmap *m, bool (*keep)(int64_t v, void *arg),
                    void *arg);

#endif
