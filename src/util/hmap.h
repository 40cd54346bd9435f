/*
 * A small open-addressing hash map from byte-string keys to int64 values,
 * used by the profile writer, the reader and the symbolizer to intern
 * mappings, frames, callsites and modules.  Keys are copied.  Not
 * thread-safe.
 */
#ifndef HEAPPROF_UTIL_HMAP_H
#define HEAPPROF_UTIL_HMAP_H

#include <stddef.h>
#include <stdint.h>

#define HMAP_INLINE_KEY 16 /* keys up to this size are stored in the slot */
#define HMAP_DEAD       INT64_MIN /* reserved value: entry dropped */

struct hmap_slot {
	uint64_t hash;
	uint32_t klen;
	uint32_t used;
	int64_t val;
	union {
		uint8_t inl[HMAP_INLINE_KEY];
		uint8_t *ptr;
	} key;
};

struct hmap {
	struct hmap_slot *slots;
	size_t cap; /* power of two, or 0 */
	size_t len;
};

void hmap_init(struct hmap *m);
void hmap_free(struct hmap *m);
/* Pointer to the value stored for key, or NULL.  Valid until the next put. */
int64_t *hmap_find(const struct hmap *m, const void *key, size_t klen);
/* Insert or replace; val must not be HMAP_DEAD.  0 or -ENOMEM. */
int hmap_put(struct hmap *m, const void *key, size_t klen, int64_t val);
/* Drop every entry for which keep(val, arg) returns 0. */
void hmap_retain(struct hmap *m, int (*keep)(int64_t val, void *arg),
                 void *arg);

#endif
