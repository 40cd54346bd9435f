/*
 * Open-addressing hash map with linear probing (see hmap.h).  The profile
 * writer interns every frame of every stack of every dump through it, so
 * short keys live inline in the slot to avoid one malloc per frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hmap.h"

static uint64_t hash_bytes(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a final mix */

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static const uint8_t *slot_key(const struct hmap_slot *s)
{
	return s->klen <= HMAP_INLINE_KEY ? s->key.inl : s->key.ptr;
}

static void slot_release(struct hmap_slot *s)
{
	if (s->used && s->klen > HMAP_INLINE_KEY)
		free(s->key.ptr);
	s->used = 0;
}

void hmap_init(struct hmap *m)
{
	m->slots = NULL;
	m->cap = 0;
	m->len = 0;
}

void hmap_free(struct hmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		slot_release(&m->slots[i]);
	free(m->slots);
	hmap_init(m);
}

static struct hmap_slot *probe(const struct hmap *m, uint64_t h,
                               const void *key, size_t klen)
{
	size_t mask = m->cap - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct hmap_slot *s = &m->slots[i];
		if (!s->used)
			return s;
		if (s->hash == h && s->klen == klen &&
		    !memcmp(slot_key(s), key, klen))
			return s;
	}
}

int64_t *hmap_find(const struct hmap *m, const void *key, size_t klen)
{
	if (!m->cap)
		return NULL;
	struct hmap_slot *s = probe(m, hash_bytes(key, klen), key, klen);
	return s->used && s->val != HMAP_DEAD ? &s->val : NULL;
}

/* Move a used slot into a table that is known to have room. */
static void move_in(struct hmap *m, struct hmap_slot *from)
{
	size_t mask = m->cap - 1;
	size_t i = from->hash & mask;

	while (m->slots[i].used)
		i = (i + 1) & mask;
	m->slots[i] = *from;
	m->len++;
}

static int rehash(struct hmap *m, size_t cap, int (*keep)(int64_t, void *),
                  void *arg)
{
	struct hmap_slot *old = m->slots;
	size_t old_cap = m->cap;
	struct hmap_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	m->slots = slots;
	m->cap = cap;
	m->len = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i].used)
			continue;
		if (old[i].val == HMAP_DEAD || (keep && !keep(old[i].val, arg)))
			slot_release(&old[i]);
		else
			move_in(m, &old[i]);
	}
	free(old);
	return 0;
}

int hmap_put(struct hmap *m, const void *key, size_t klen, int64_t val)
{
	/* Keep the load factor under 1/2: probes stay short. */
	if ((m->len + 1) * 2 > m->cap) {
		int err = rehash(m, m->cap ? m->cap * 2 : 64, NULL, NULL);
		if (err)
			return err;
	}
	uint64_t h = hash_bytes(key, klen);
	struct hmap_slot *s = probe(m, h, key, klen);
	if (s->used) {
		s->val = val;
		return 0;
	}
	if (klen > HMAP_INLINE_KEY) {
		s->key.ptr = malloc(klen);
		if (!s->key.ptr)
			return -ENOMEM;
		memcpy(s->key.ptr, key, klen);
	} else {
		memcpy(s->key.inl, key, klen);
	}
	s->hash = h;
	s->klen = (uint32_t)klen;
	s->val = val;
	s->used = 1;
	m->len++;
	return 0;
}

void hmap_retain(struct hmap *m, int (*keep)(int64_t val, void *arg), void *arg)
{
	if (!m->cap)
		return;
	/* Rehash in place of deleting: linear probing has no tombstones. */
	if (rehash(m, m->cap, keep, arg) == 0)
		return;
	/*
	 * Out of memory: mark dropped entries dead in place.  They keep their
	 * slot (so probe chains stay intact) and hmap_find() skips them.
	 */
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].used && !keep(m->slots[i].val, arg))
			m->slots[i].val = HMAP_DEAD;
}
