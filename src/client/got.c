/*
 * Routing by relocation slots (got.h).  A client that the collector
 * injected into a running process (dlopen, RTLD_LOCAL) preempts nothing:
 * every object keeps calling the malloc its relocations were bound to.
 * So for each object dl_iterate_phdr lists, but ld.so, the vdso and the
 * library this file is in, we read its dynamic section (nothing is
 * opened: the symbol count comes from DT_GNU_HASH or DT_HASH) and look at
 *
 *   DT_JMPREL  R_X86_64_JUMP_SLOT  calls through the PLT
 *   DT_RELA    R_X86_64_GLOB_DAT   calls through the GOT (-fno-plt, and
 *                                  glibc's own malloc and free), and
 *                                  taken addresses in PIC code
 *              R_X86_64_64         function pointers in data, addend 0
 *
 * whose symbol is one of the table's names.  A slot is patched only if it
 * holds the symbol's definition as the loader's global lookup finds it
 * (dlsym(RTLD_DEFAULT), asked before any slot is written) or, for a
 * JUMP_SLOT, the object's own lazy PLT entry for that slot, not bound yet
 * (recognised by its code: `push $index`), when that binds to the same
 * definition: the only one in the process, or the object's own (with
 * two, an object loaded RTLD_DEEPBIND may bind to the other).  Anything
 * else belongs to someone else (an allocator of its own in a library
 * loaded RTLD_DEEPBIND, another interposer, a program's own pointer) and
 * is counted, not touched.  The hook's "real" function is that
 * definition, never a slot's value: a slot may hold a PLT address that
 * leads back into a patched slot.
 *
 * Writing: an aligned 8-byte compare-and-swap (a thread calling through
 * the slot meanwhile reads the old or the new value, both valid; a store
 * of the loader's or the program's meanwhile is not overwritten); a page
 * the loader made read-only (PT_GNU_RELRO, as ld.so rounds it) or in a
 * read-only segment is made writable for it and given its protection
 * back.  Only objects the loader is done with (_dl_find_object knows
 * them), and only from a dl_iterate_phdr callback for the object (it is
 * not unmapped meanwhile).  Every patched slot is kept (address, old
 * value) in a static table, for got_verify (lazy binding in another
 * thread may store the definition over a fresh patch: _dl_fixup had read
 * the slot before) and got_restore.  Objects are kept by identity (load
 * address, program headers); those the loader no longer lists are
 * forgotten with their slots.
 *
 * No allocation: dlsym is asked only for a name some object other than
 * ours defines (a failing dlsym allocates its error message).  No
 * descriptor.  Locks: the loader's, taken by dl_iterate_phdr and dlsym
 * as for any caller, and a flag of our own for the entry points ("One
 * entry point at a time" below).
 *
 * Not caught (docs/ATTACH.md): a pointer to free or malloc the program
 * copied into memory of its own before the attach (R_X86_64_64 slots are
 * patched, values copied out of them are not); ld.so's own allocations
 * (through __rtld_malloc, a pointer, not a relocation); calls bound
 * inside an object (-Bsymbolic, a static libc); a name defined only after
 * an object was patched is routed only in objects loaded from then on.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "client/got.h"

#if defined(__x86_64__)

/* ---- state -------------------------------------------------------------- */

struct got_obj {
	uintptr_t base;
	const void *phdr;
};

struct got_slot {
	_Atomic uintptr_t *addr;
	uintptr_t old;
	uint16_t entry;
	uint16_t obj;
	int prot; /* the page's protection */
};

static const struct got_entry *tab;
static size_t ntab;
static uintptr_t defs[GOT_MAX_ENTRIES]; /* 0: none found */
/* The objects but ours that define each name: with more than one, a
 * lazy slot may bind to another than the global definition (an object
 * loaded RTLD_DEEPBIND next to an allocator of its own). */
static uint32_t ndefs[GOT_MAX_ENTRIES];
/* A canonical PLT entry standing for the definition (is_def), or 0. */
static uintptr_t aliases[GOT_MAX_ENTRIES];
static struct got_obj objs[GOT_MAX_OBJECTS];
static uint32_t nobjs;
static struct got_slot slots[GOT_MAX_SLOTS];
static uint32_t nslots;
/* The loader's counters at the last patch pass, and when forget_gone
 * last looked for objects gone. */
static unsigned long long pass_adds, pass_subs, gone_subs;
/* The last pass met an object a dlopen was still loading. */
static bool unfinished;
static uintptr_t page_size;

/*
 * One entry point at a time.  got_patch_all and got_restore wait for the
 * one running (attach and detach: no loader lock held).  got_patch_new
 * never waits: it may run in a dlopen nested in a library constructor,
 * with the loader's lock held, while the pass running waits for that lock
 * in dlsym; it leaves its work to that pass (`rerun`), which does it
 * before it lets go.  got_verify skips a turn.
 */
static atomic_flag busy = ATOMIC_FLAG_INIT;
static _Atomic int rerun;

static bool try_enter(void)
{
	if (atomic_flag_test_and_set(&busy))
		return false;
	if (!page_size) {
		page_size = getauxval(AT_PAGESZ);
		if (!page_size)
			page_size = 4096;
	}
	return true;
}

static void enter(void)
{
	while (!try_enter())
		sched_yield();
}

static void new_pass(struct got_stats *st);

static void leave(void)
{
	for (;;) {
		if (atomic_exchange(&rerun, 0)) {
			struct got_stats st;
			memset(&st, 0, sizeof(st));
			new_pass(&st);
			continue;
		}
		atomic_flag_clear(&busy);
		if (!atomic_load(&rerun) || !try_enter())
			return;
	}
}

/* ---- one object's dynamic section --------------------------------------- */

struct obj_view {
	const struct dl_phdr_info *info;
	uintptr_t base;
	const Elf64_Sym *sym;
	const char *str;
	size_t strsz;
	uint32_t nsyms; /* UINT32_MAX: unknown */
	const uint16_t *versym;
	const uint32_t *gnu_hash;
	const uint32_t *sysv_hash;
	const Elf64_Rela *jmprel;
	size_t jmprelsz;
	const Elf64_Rela *rela;
	size_t relasz;
	uintptr_t relro_lo, relro_hi; /* read-only pages, as ld.so made them */
};

/* Whether a is inside one of the object's PT_LOAD segments (any, or with
 * flag `want`); *flags gets that segment's p_flags. */
static bool in_load(const struct dl_phdr_info *info, uintptr_t a, uint32_t want,
                    uint32_t *flags)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD || (want && !(p->p_flags & want)))
			continue;
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;
		if (a >= lo && a - lo < p->p_memsz) {
			if (flags)
				*flags = p->p_flags;
			return true;
		}
	}
	return false;
}

/* A dynamic-section pointer: ld.so relocated it in place where the section
 * is writable (x86-64), not where it is read-only. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, uintptr_t v)
{
	if (info->dlpi_addr && !in_load(info, v, 0, NULL))
		return v + info->dlpi_addr;
	return v;
}

static uint32_t gnu_count(const uint32_t *h)
{
	uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
	const uint32_t *buckets = h + 4 + (size_t)bloom * 2;
	const uint32_t *chain = buckets + nbuckets;
	uint32_t last = 0;
	for (uint32_t i = 0; i < nbuckets; i++)
		if (buckets[i] > last)
			last = buckets[i];
	if (last < symoffset)
		return symoffset;
	while (!(chain[last - symoffset] & 1))
		last++;
	return last + 1;
}

static bool view_of(const struct dl_phdr_info *info, struct obj_view *v)
{
	memset(v, 0, sizeof(*v));
	v->info = info;
	v->base = info->dlpi_addr;
	v->nsyms = UINT32_MAX;
	const Elf64_Dyn *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(info->dlpi_addr + p->p_vaddr);
		if (p->p_type == PT_GNU_RELRO) {
			uintptr_t lo = info->dlpi_addr + p->p_vaddr;
			v->relro_lo = lo & ~(page_size - 1);
			v->relro_hi = (lo + p->p_memsz) & ~(page_size - 1);
		}
	}
	if (!dyn)
		return false;
	uint64_t pltrel = DT_RELA;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t val = dyn->d_un.d_ptr;
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			v->sym = (const Elf64_Sym *)dyn_ptr(info, val);
			break;
		case DT_STRTAB:
			v->str = (const char *)dyn_ptr(info, val);
			break;
		case DT_STRSZ:
			v->strsz = dyn->d_un.d_val;
			break;
		case DT_VERSYM:
			v->versym = (const uint16_t *)dyn_ptr(info, val);
			break;
		case DT_GNU_HASH:
			v->gnu_hash = (const uint32_t *)dyn_ptr(info, val);
			break;
		case DT_HASH:
			v->sysv_hash = (const uint32_t *)dyn_ptr(info, val);
			break;
		case DT_JMPREL:
			v->jmprel = (const Elf64_Rela *)dyn_ptr(info, val);
			break;
		case DT_PLTRELSZ:
			v->jmprelsz = dyn->d_un.d_val;
			break;
		case DT_PLTREL:
			pltrel = dyn->d_un.d_val;
			break;
		case DT_RELA:
			v->rela = (const Elf64_Rela *)dyn_ptr(info, val);
			break;
		case DT_RELASZ:
			v->relasz = dyn->d_un.d_val;
			break;
		}
	}
	if (pltrel != DT_RELA)
		v->jmprel = NULL;
	if (!v->sym || !v->str)
		return false;
	if (v->gnu_hash)
		v->nsyms = gnu_count(v->gnu_hash);
	else if (v->sysv_hash)
		v->nsyms = v->sysv_hash[1];
	return true;
}

static const char *sym_name(const struct obj_view *v, uint32_t i)
{
	if (i == 0 || i >= v->nsyms)
		return NULL;
	uint32_t off = v->sym[i].st_name;
	if (v->strsz && off >= v->strsz)
		return NULL;
	return v->str + off;
}

/* Whether symbol i is a definition the loader's lookup can return. */
static bool exported_def(const struct obj_view *v, uint32_t i)
{
	const Elf64_Sym *s = &v->sym[i];
	int bind = ELF64_ST_BIND(s->st_info), type = ELF64_ST_TYPE(s->st_info);
	if (s->st_shndx == SHN_UNDEF || s->st_value == 0)
		return false;
	if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)
		return false;
	if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
		return false;
	if (ELF64_ST_VISIBILITY(s->st_other) == STV_HIDDEN ||
	    ELF64_ST_VISIBILITY(s->st_other) == STV_INTERNAL)
		return false;
	return !v->versym || !(v->versym[i] & 0x8000);
}

/* The index of the object's exported definition of `name`, or 0 (its
 * hash table: only defined symbols are in a GNU one). */
static uint32_t lookup(const struct obj_view *v, const char *name)
{
	if (v->gnu_hash) {
		const uint32_t *h = v->gnu_hash;
		uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
		const uint32_t *buckets = h + 4 + (size_t)bloom * 2;
		const uint32_t *chain = buckets + nbuckets;
		if (!nbuckets)
			return 0;
		uint32_t hash = 5381;
		for (const unsigned char *c = (const unsigned char *)name; *c;
		     c++)
			hash = hash * 33 + *c;
		for (uint32_t i = buckets[hash % nbuckets]; i >= symoffset;
		     i++) {
			uint32_t ch = chain[i - symoffset];
			const char *s = sym_name(v, i);
			if ((ch | 1) == (hash | 1) && s && !strcmp(s, name) &&
			    exported_def(v, i))
				return i;
			if (ch & 1)
				break;
		}
		return 0;
	}
	if (v->sysv_hash) {
		uint32_t nbucket = v->sysv_hash[0];
		const uint32_t *bucket = v->sysv_hash + 2;
		const uint32_t *chain = bucket + nbucket;
		if (!nbucket)
			return 0;
		uint32_t hash = 0;
		for (const unsigned char *c = (const unsigned char *)name; *c;
		     c++) {
			hash = (hash << 4) + *c;
			uint32_t g = hash & 0xf0000000u;
			if (g)
				hash ^= g >> 24;
			hash &= ~g;
		}
		for (uint32_t i = bucket[hash % nbucket]; i && i < v->nsyms;
		     i = chain[i]) {
			const char *s = sym_name(v, i);
			if (s && !strcmp(s, name) && exported_def(v, i))
				return i;
		}
	}
	return 0;
}

/* ---- which objects ------------------------------------------------------ */

static bool is_self(const struct dl_phdr_info *info)
{
	return in_load(info, (uintptr_t)&got_patch_all, 0, NULL);
}

static bool is_skipped(const struct dl_phdr_info *info)
{
	uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
	if (vdso && (uintptr_t)info->dlpi_phdr >= vdso &&
	    (uintptr_t)info->dlpi_phdr - vdso < page_size)
		return true;
	uintptr_t ldso = getauxval(AT_BASE);
	if (ldso && info->dlpi_addr == ldso)
		return true;
	const char *n = info->dlpi_name;
	if (n && (strstr(n, "/ld-linux") || !strncmp(n, "ld-linux", 8)))
		return true;
	return is_self(info);
}

/*
 * Whether the loader is done with the object: dl_iterate_phdr lists an
 * object as soon as a dlopen in another thread has mapped it, before it
 * is relocated and its RELRO made read-only (a page we made read-only
 * again under the loader's feet would fault its next relocation);
 * _dl_find_object (lock-free) knows it only once it is.
 */
static bool loaded(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD)
			continue;
		struct dl_find_object fo;
		if (_dl_find_object((void *)(info->dlpi_addr + p->p_vaddr),
		                    &fo) != 0)
			return false;
		return fo.dlfo_link_map &&
		       fo.dlfo_link_map->l_addr == info->dlpi_addr;
	}
	return false;
}

static int obj_find(const struct dl_phdr_info *info)
{
	for (uint32_t i = 0; i < nobjs; i++)
		if (objs[i].base == info->dlpi_addr &&
		    objs[i].phdr == (const void *)info->dlpi_phdr)
			return (int)i;
	return -1;
}

static bool has_counters(size_t size)
{
	return size >= offsetof(struct dl_phdr_info, dlpi_subs) +
	                       sizeof(((struct dl_phdr_info *)0)->dlpi_subs);
}

/* ---- definitions -------------------------------------------------------- */

struct def_walk {
	uint32_t found[GOT_MAX_ENTRIES];
	/* The first definition in load order (0: none, or an IFUNC's). */
	uintptr_t first[GOT_MAX_ENTRIES];
	/* is_def: the address to look for, and whether an object defines
	 * the name there. */
	const char *name;
	uintptr_t at;
	bool there;
};

/* Our own span: from the lowest to the highest PT_LOAD. */
static uintptr_t self_lo, self_hi;

static void note_self(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD)
			continue;
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;
		if (!self_lo || lo < self_lo)
			self_lo = lo;
		if (lo + p->p_memsz > self_hi)
			self_hi = lo + p->p_memsz;
	}
}

static int def_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct def_walk *w = arg;
	struct obj_view v;
	if (is_self(info)) {
		note_self(info);
		return 0;
	}
	if (!view_of(info, &v))
		return 0;
	for (size_t i = 0; i < ntab; i++) {
		uint32_t k = lookup(&v, tab[i].name);
		if (!k)
			continue;
		if (!w->found[i]++ &&
		    ELF64_ST_TYPE(v.sym[k].st_info) != STT_GNU_IFUNC)
			w->first[i] = v.base + v.sym[k].st_value;
	}
	return 0;
}

static int is_def_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct def_walk *w = arg;
	struct obj_view v;
	if (is_self(info) || !in_load(info, w->at, 0, NULL) ||
	    !view_of(info, &v))
		return 0;
	uint32_t k = lookup(&v, w->name);
	w->there = k && v.base + v.sym[k].st_value == w->at;
	return 1;
}

/*
 * What dlsym(RTLD_DEFAULT) returned, `d`, when it is not the first
 * definition in load order: the definition of an object earlier in the
 * global scope (kept), or the PLT entry of a non-PIE executable that
 * takes the function's address in its code (a "canonical PLT": every
 * GLOB_DAT of the name holds it, the executable's own JUMP_SLOT holds the
 * function).  Calling that entry from a hook would jump through the
 * executable's slot, patched, back into the hook: the real function is
 * then the first definition, and slots holding either are patched.
 */
static bool is_def(struct def_walk *w, const char *name, uintptr_t d)
{
	w->name = name;
	w->at = d;
	w->there = false;
	dl_iterate_phdr(is_def_cb, w);
	return w->there;
}

/* The definitions not known yet; their reals stored (before any slot is
 * patched: a thread may call a hook as soon as one is). */
static void find_defs(struct got_stats *st)
{
	struct def_walk w;
	memset(&w, 0, sizeof(w));
	dl_iterate_phdr(def_cb, &w);
	for (size_t i = 0; i < ntab; i++) {
		ndefs[i] = w.found[i];
		if (!defs[i] && w.found[i]) {
			uintptr_t d =
			        (uintptr_t)dlsym(RTLD_DEFAULT, tab[i].name);
			/* Ours (when the global scope has none, the lookup
			 * goes on in our own) is none. */
			if (!d || (self_lo <= d && d < self_hi))
				goto next;
			aliases[i] = 0;
			if (w.first[i] && d != w.first[i] &&
			    !is_def(&w, tab[i].name, d)) {
				aliases[i] = d;
				d = w.first[i];
			}
			defs[i] = d;
			if (tab[i].real)
				__atomic_store_n(tab[i].real, (void *)d,
				                 __ATOMIC_RELEASE);
		}
	next:
		if (!defs[i])
			st->undefined++;
	}
}

/* ---- writing a slot ----------------------------------------------------- */

static int slot_prot(const struct obj_view *v, uintptr_t a, bool *ok)
{
	uint32_t f = 0;
	*ok = in_load(v->info, a, 0, &f);
	int prot = (f & PF_R ? PROT_READ : 0) | (f & PF_W ? PROT_WRITE : 0) |
	           (f & PF_X ? PROT_EXEC : 0);
	if (a >= v->relro_lo && a < v->relro_hi)
		prot &= ~PROT_WRITE;
	return prot;
}

/* The slot from *expect to val, atomically (a thread calling through it
 * reads one or the other; the loader's lazy binding or the program may
 * store meanwhile): 1, or 0 with *expect the value found, or -1 if the
 * page could not be made writable.  A page that was not is given its
 * protection back. */
static int write_slot(_Atomic uintptr_t *a, uintptr_t *expect, uintptr_t val,
                      int prot)
{
	void *page = (void *)((uintptr_t)a & ~(page_size - 1));
	if (!(prot & PROT_WRITE) &&
	    mprotect(page, page_size, prot | PROT_WRITE) != 0)
		return -1;
	bool ok = atomic_compare_exchange_strong(a, expect, val);
	if (!(prot & PROT_WRITE))
		mprotect(page, page_size, prot);
	return ok;
}

/* ---- the pass ----------------------------------------------------------- */

struct patch_walk {
	struct got_stats *st;
	bool only_new;
};

static int tab_index(const char *name)
{
	for (size_t i = 0; i < ntab; i++)
		if (name[0] == tab[i].name[0] && !strcmp(name, tab[i].name))
			return (int)i;
	return -1;
}

/*
 * Whether `a`, in the object's own code, is the lazy PLT entry of
 * relocation `index` of DT_JMPREL, not bound yet: what the loader leaves
 * in the slot is the address of the entry's `push $index` (classic PLT),
 * or of its `endbr64` just before it (IBT PLT).  A function of the
 * object's own, bound to it (an allocator of its own, -Bsymbolic), is
 * not one.
 */
static bool lazy_stub(uintptr_t a, uint64_t index)
{
	const unsigned char *c = (const unsigned char *)a;
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		c += 4;
	uint32_t imm;
	memcpy(&imm, c + 1, sizeof(imm));
	return c[0] == 0x68 && imm == index;
}

/* Whether a slot's value is entry e's definition (or what stands for it). */
static bool is_current(int e, uintptr_t v)
{
	return v == defs[e] || (aliases[e] && v == aliases[e]);
}

/* plt_index: the relocation's index in DT_JMPREL, -1 for DT_RELA. */
static void patch_rela(const struct obj_view *v, const Elf64_Rela *r,
                       long plt_index, int obj, struct got_stats *st)
{
	uint32_t type = ELF64_R_TYPE(r->r_info), si = ELF64_R_SYM(r->r_info);
	if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
	    !(type == R_X86_64_64 && r->r_addend == 0))
		return;
	const char *name = sym_name(v, si);
	if (!name)
		return;
	int e = tab_index(name);
	if (e < 0 || !defs[e])
		return;
	uintptr_t a = v->base + r->r_offset;
	bool mapped;
	int prot = slot_prot(v, a, &mapped);
	if (!mapped || (a & 7)) {
		st->failed++;
		return;
	}
	_Atomic uintptr_t *slot = (_Atomic uintptr_t *)a;
	uintptr_t cur = atomic_load_explicit(slot, memory_order_acquire);
	uintptr_t hook = (uintptr_t)tab[e].hook, old = 0;
	bool lazy = false;
	int done = 0;
	/* Again if the slot changed under us (bound by the loader). */
	for (int tries = 0; !done && tries < 3; tries++) {
		if (cur == hook) {
			st->already++;
			return;
		}
		bool def = is_current(e, cur);
		/* Not bound yet: it will bind to the definition if that is
		 * the only one, or if it is this object's own. */
		lazy = !def && type == R_X86_64_JUMP_SLOT && plt_index >= 0 &&
		       in_load(v->info, cur, PF_X, NULL) &&
		       in_load(v->info, cur + 8, PF_X, NULL) &&
		       lazy_stub(cur, (uint64_t)plt_index) &&
		       (ndefs[e] == 1 || in_load(v->info, defs[e], 0, NULL));
		if (!def && !lazy)
			break;
		old = cur;
		done = write_slot(slot, &cur, hook, prot);
		if (done < 0) {
			st->failed++;
			return;
		}
	}
	if (!done) {
		st->foreign++;
		return;
	}
	st->patched++;
	if (lazy)
		st->lazy++;
	if (obj < 0 || nslots >= GOT_MAX_SLOTS) {
		st->unrecorded++;
		return;
	}
	slots[nslots++] = (struct got_slot){.addr = slot,
	                                    .old = old,
	                                    .entry = (uint16_t)e,
	                                    .obj = (uint16_t)obj,
	                                    .prot = prot};
}

static int patch_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct patch_walk *w = arg;
	if (has_counters(size)) {
		pass_adds = info->dlpi_adds;
		pass_subs = info->dlpi_subs;
	}
	if (is_skipped(info))
		return 0;
	int obj = obj_find(info);
	if (obj >= 0 && w->only_new)
		return 0;
	if (!loaded(info)) {
		unfinished = true; /* the next got_patch_new walks again */
		return 0;
	}
	struct obj_view v;
	if (!view_of(info, &v))
		return 0;
	if (obj < 0 && nobjs < GOT_MAX_OBJECTS) {
		obj = (int)nobjs++;
		objs[obj] = (struct got_obj){.base = info->dlpi_addr,
		                             .phdr = info->dlpi_phdr};
	}
	w->st->objects++;
	for (size_t i = 0; v.jmprel && i < v.jmprelsz / sizeof(Elf64_Rela); i++)
		patch_rela(&v, &v.jmprel[i], (long)i, obj, w->st);
	for (size_t i = 0; v.rela && i < v.relasz / sizeof(Elf64_Rela); i++)
		patch_rela(&v, &v.rela[i], -1, obj, w->st);
	return 0;
}

/* ---- the slots recorded, object by object ------------------------------ */

/*
 * Every slot recorded is read and written from a dl_iterate_phdr callback
 * for the object it belongs to: while it runs the loader cannot take an
 * object off its list, and it unmaps one only after that.  The objects
 * not listed any more are forgotten with their slots.
 */
struct slot_walk {
	bool live[GOT_MAX_OBJECTS];
	unsigned long long subs;
	void (*fn)(struct got_slot *s, struct slot_walk *w); /* or NULL */
	struct got_stats *st;
	size_t done;
};

static int slot_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct slot_walk *w = arg;
	if (has_counters(size))
		w->subs = info->dlpi_subs;
	int o = obj_find(info);
	if (o < 0)
		return 0;
	w->live[o] = true;
	for (uint32_t i = 0; w->fn && i < nslots; i++)
		if (slots[i].obj == o)
			w->fn(&slots[i], w);
	return 0;
}

static void for_each_slot(void (*fn)(struct got_slot *, struct slot_walk *),
                          struct slot_walk *w)
{
	memset(w->live, 0, sizeof(w->live));
	w->fn = fn;
	dl_iterate_phdr(slot_cb, w);
	/* The objects gone leave both tables. */
	uint16_t to[GOT_MAX_OBJECTS];
	uint32_t n = 0, k = 0;
	memset(to, 0xff, sizeof(to)); /* UINT16_MAX: gone */
	for (uint32_t i = 0; i < nobjs; i++) {
		if (!w->live[i])
			continue;
		to[i] = (uint16_t)n;
		objs[n++] = objs[i];
	}
	nobjs = n;
	for (uint32_t i = 0; i < nslots; i++) {
		uint16_t o = to[slots[i].obj];
		if (o == UINT16_MAX)
			continue;
		slots[k] = slots[i];
		slots[k++].obj = o;
	}
	nslots = k;
	gone_subs = w->subs;
}

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *c = arg;
	if (has_counters(size)) {
		c[0] = info->dlpi_adds;
		c[1] = info->dlpi_subs;
	}
	return 1; /* the first object is enough */
}

/* Forgets the objects unloaded since it last looked, and their slots. */
static void forget_gone(void)
{
	unsigned long long c[2] = {0, gone_subs + 1};
	dl_iterate_phdr(counters_cb, c);
	if (c[1] == gone_subs)
		return;
	struct slot_walk w;
	memset(&w, 0, sizeof(w));
	for_each_slot(NULL, &w);
}

static void verify_slot(struct got_slot *s, struct slot_walk *w)
{
	uintptr_t cur = atomic_load_explicit(s->addr, memory_order_acquire);
	uintptr_t hook = (uintptr_t)tab[s->entry].hook;
	if (cur == hook)
		return;
	int done = 0;
	if (cur == s->old || is_current(s->entry, cur))
		done = write_slot(s->addr, &cur, hook, s->prot);
	if (done > 0)
		w->st->repatched++;
	else if (done < 0)
		w->st->failed++;
	else
		w->st->changed++;
}

static void restore_slot(struct got_slot *s, struct slot_walk *w)
{
	uintptr_t hook = (uintptr_t)tab[s->entry].hook;
	if (write_slot(s->addr, &hook, s->old, s->prot) > 0)
		w->done++;
}

/* ---- entry points ------------------------------------------------------- */

int got_patch_all(const struct got_entry *t, size_t n, struct got_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (n > GOT_MAX_ENTRIES)
		return -1;
	enter();
	if (t != tab || n != ntab) {
		if (nslots) {
			/* The slots recorded name the other table's hooks. */
			leave();
			return -1;
		}
		tab = t;
		ntab = n;
		memset(defs, 0, sizeof(defs));
		memset(aliases, 0, sizeof(aliases));
	}
	unfinished = false;
	forget_gone();
	find_defs(st);
	struct patch_walk w = {.st = st, .only_new = false};
	dl_iterate_phdr(patch_cb, &w);
	leave();
	return 0;
}

/* The objects new since the last pass; all of them if one was unloaded
 * since (a library loaded again at the same address is the same object
 * to obj_find). */
static void new_pass(struct got_stats *st)
{
	if (!tab)
		return;
	unsigned long long c[2] = {pass_adds + 1, pass_subs};
	dl_iterate_phdr(counters_cb, c);
	if (c[0] == pass_adds && c[1] == pass_subs && !unfinished)
		return;
	bool unloaded = c[1] != pass_subs;
	unfinished = false;
	forget_gone();
	find_defs(st);
	struct patch_walk w = {.st = st, .only_new = !unloaded};
	dl_iterate_phdr(patch_cb, &w);
}

int got_patch_new(struct got_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!try_enter()) {
		atomic_store(&rerun, 1);
		if (!try_enter())
			return 1; /* the pass running does it */
		atomic_store(&rerun, 0);
	}
	int rc = tab ? 0 : -1;
	new_pass(st);
	leave();
	return rc;
}

int got_verify(struct got_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!try_enter())
		return 1;
	struct slot_walk w;
	memset(&w, 0, sizeof(w));
	w.st = st;
	for_each_slot(verify_slot, &w);
	leave();
	return 0;
}

size_t got_restore(void)
{
	enter();
	struct slot_walk w;
	memset(&w, 0, sizeof(w));
	for_each_slot(restore_slot, &w);
	size_t done = w.done;
	/* Forgotten: got_patch_new does nothing until got_patch_all. */
	nslots = 0;
	nobjs = 0;
	tab = NULL;
	ntab = 0;
	leave();
	return done;
}

#else /* not x86-64: nothing is routed */

int got_patch_all(const struct got_entry *t, size_t n, struct got_stats *st)
{
	memset(st, 0, sizeof(*st));
	return -1;
}

int got_patch_new(struct got_stats *st)
{
	memset(st, 0, sizeof(*st));
	return -1;
}

int got_verify(struct got_stats *st)
{
	memset(st, 0, sizeof(*st));
	return -1;
}

size_t got_restore(void)
{
	return 0;
}

#endif
