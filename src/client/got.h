/*
 * Routing a running process's calls to the hooks by its relocation slots
 * (issue 21: a client loaded by the injector, not preloaded, preempts no
 * symbol).  got.c rewrites the GOT/PLT slots that hold the definition of
 * a hooked function in every loaded object but ld.so, the vdso and the
 * library got.c is in; see got.c for what it patches and what it cannot
 * catch.
 *
 * Runs at attach, after a dlopen and at a dump, never on the allocation
 * path: no allocation, no descriptor; the entry points exclude each other
 * with a flag of their own (got.c, "One entry point at a time").
 */
#ifndef HEAPPROF_CLIENT_GOT_H
#define HEAPPROF_CLIENT_GOT_H

#include <stddef.h>
#include <stdint.h>

/* One function to route: its slots get `hook`; its definition (what the
 * slots held, as the loader's global lookup finds it) is stored in *real
 * before the first slot is patched. */
struct got_entry {
	const char *name; /* unversioned, as in .dynsym */
	void *hook;
	void **real; /* NULL: not stored */
};

/* What one call did (each call zeroes it first). */
struct got_stats {
	uint32_t objects;    /* objects walked */
	uint32_t patched;    /* slots set to a hook */
	uint32_t lazy;       /* of those, unbound lazy PLT slots */
	uint32_t already;    /* slots that held the hook already */
	uint32_t foreign;    /* skipped: held another function */
	uint32_t failed;     /* could not be written (mprotect, alignment) */
	uint32_t unrecorded; /* patched past the slot table: not verified,
	                        not restored */
	uint32_t undefined;  /* entries with no definition: not routed */
	uint32_t repatched;  /* got_verify: rebound by the loader, patched */
	uint32_t changed;    /* got_verify: another value now, left alone */
	uint32_t restored;   /* got_restore: given their old value back */
};

/* Slots and objects remembered (static tables; a test makes the first
 * small). */
#ifndef GOT_MAX_SLOTS
#define GOT_MAX_SLOTS 4096u
#endif
#define GOT_MAX_OBJECTS 1024u
#define GOT_MAX_ENTRIES 64u

/*
 * Patches every loaded object (but ld.so, the vdso and ours).  `tab` must
 * stay valid: got_patch_new and got_verify use it.  0, or -1 (nothing
 * done) if n is larger than GOT_MAX_ENTRIES or slots patched from another
 * table were not restored.
 */
int got_patch_all(const struct got_entry *tab, size_t n, struct got_stats *st);
/* The objects loaded since the last pass only (a dlopen hook calls it
 * after the real dlopen returned), all if one was unloaded since: 0 (at
 * once when the loader's counters did not move); -1 before
 * got_patch_all; 1 if another entry point was running: that one does it
 * before it returns, st says nothing. */
int got_patch_new(struct got_stats *st);
/* Re-reads every patched slot of an object still loaded; patches again
 * those the loader's lazy binding overwrote (st->repatched).  0, or 1 if
 * another entry point was running (nothing done). */
int got_verify(struct got_stats *st);
/* Gives every slot that still holds its hook its old value back and
 * forgets them all (got_patch_all may start again).  The reals stay
 * set: a thread may still be in a hook.  Returns the slots restored. */
size_t got_restore(void);

#endif
