/*
 * The pair map (see pairmap.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "util/pairmap.h"

/*
 * Big tables (a million callsites: 8M slots, 192 MiB) are mapped on their
 * own and asked for transparent huge pages: every probe of a big table
 * misses the cache, and with 4 KiB pages the TLB too.
 */
#define BIG_TABLE (2u << 20)

static struct pairmap_slot *slots_alloc(size_t cap)
{
	size_t bytes = cap * sizeof(struct pairmap_slot);
	if (bytes < BIG_TABLE)
		return calloc(cap, sizeof(struct pairmap_slot));
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE); /* a hint: fine if refused */
	return p;
}

static void slots_free(struct pairmap_slot *slots, size_t cap)
{
	size_t bytes = cap * sizeof(struct pairmap_slot);
	if (bytes < BIG_TABLE)
		free(slots);
	else
		munmap(slots, bytes);
}

void pairmap_init(struct pairmap *m)
{
	m->slots = NULL;
	m->cap = 0;
	m->len = 0;
}

void pairmap_free(struct pairmap *m)
{
	if (m->slots)
		slots_free(m->slots, m->cap);
	pairmap_init(m);
}

/* Rebuild with cap slots, keeping the entries keep accepts (all if NULL). */
static int rebuild(struct pairmap *m, size_t cap,
                   bool (*keep)(int64_t v, void *arg), void *arg)
{
	struct pairmap_slot *slots = slots_alloc(cap);
	if (!slots)
		return -ENOMEM;
	size_t mask = cap - 1, len = 0;
	for (size_t i = 0; i < m->cap; i++) {
		const struct pairmap_slot *s = &m->slots[i];
		if (!s->v || s->v == PAIRMAP_DEAD || (keep && !keep(s->v, arg)))
			continue;
		size_t j = pairmap_hash(s->a, s->b) & mask;
		while (slots[j].v)
			j = (j + 1) & mask;
		slots[j] = *s;
		len++;
	}
	if (m->slots)
		slots_free(m->slots, m->cap);
	m->slots = slots;
	m->cap = cap;
	m->len = len;
	return 0;
}

/* At most half full: linear probes stay short (a miss probes 2.5 slots
 * on average, 8.5 at 3/4 full). */
static bool fits(size_t cap, size_t n)
{
	return n <= cap / 2;
}

int pairmap_reserve(struct pairmap *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 64;
	while (!fits(cap, n))
		cap *= 2;
	return cap == m->cap ? 0 : rebuild(m, cap, NULL, NULL);
}

struct pairmap_slot *pairmap_slot(struct pairmap *m, int64_t a, int64_t b,
                                  bool *added)
{
	if ((!m->cap || !fits(m->cap, m->len + 1)) &&
	    rebuild(m, m->cap ? m->cap * 2 : 64, NULL, NULL) < 0)
		return NULL;
	size_t mask = m->cap - 1;
	for (size_t i = pairmap_hash(a, b) & mask;; i = (i + 1) & mask) {
		struct pairmap_slot *s = &m->slots[i];
		if (!s->v) {
			s->a = a;
			s->b = b;
			m->len++;
			*added = true;
			return s;
		}
		if (s->a == a && s->b == b) {
			*added = s->v == PAIRMAP_DEAD;
			return s;
		}
	}
}

void pairmap_retain(struct pairmap *m, bool (*keep)(int64_t v, void *arg),
                    void *arg)
{
	if (!m->cap)
		return;
	/* Rebuild: linear probing has no tombstones.  Out of memory, mark
	 * the dropped entries dead in place: they keep their slots, so
	 * probe chains stay intact, and read as absent. */
	if (rebuild(m, m->cap, keep, arg) == 0)
		return;
	for (size_t i = 0; i < m->cap; i++) {
		struct pairmap_slot *s = &m->slots[i];
		if (s->v && s->v != PAIRMAP_DEAD && !keep(s->v, arg))
			s->v = PAIRMAP_DEAD;
	}
}
