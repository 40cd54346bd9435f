/*
 * dwfl_module_addrinfo by binary search (see symtab.h).
 *
 * What libdwfl does for an address (elfutils 0.158 and later,
 * dwfl_module_addrsym.c), and so what this file must reproduce exactly:
 * it considers each symbol whose value is at or below the address, that
 * has a name, is defined and is not a section, file or TLS symbol.  It
 * looks at the global symbols first (table order), and at the local ones
 * (table order) only if no global symbol with a size contains the address
 * and no global symbol without a size sits exactly at it.
 *
 * - Of the symbols with a size containing the address, in the order met,
 *   one replaces the one kept if it starts later, or binds more strongly
 *   (global > weak > local), or starts at the same place with the same
 *   binding and is smaller.  The one kept is the answer.  This relation is
 *   not transitive, so the order matters and is kept here.
 * - Else a symbol without a size (an assembly label) may be the answer,
 *   but only one in the same section as the address and with no symbol
 *   looked at ending past it: it must start at M, the highest end
 *   (value + size) of every symbol looked at.  Of several there, the last
 *   one met wins.  "The same section" is libdwfl's: both addresses fall in
 *   the same SHF_ALLOC section of the main file (a section's end counts as
 *   inside it unless the next one starts there), or in none; for an
 *   absolute symbol, the address is exactly its value.
 *
 * Each symbol is stored with its place in libdwfl's order, sorted by
 * value, with the running maximum of the ends: the symbols containing an
 * address are found by walking down from it until that maximum falls to
 * the address, and M is the maximum at the address.
 */
#include <gelf.h>
#include <stdlib.h>

#include "symbolize/symtab.h"

struct st_sym {
	GElf_Addr value, size;
	const char *name;
	GElf_Word shndx;     /* section index (SHN_ABS etc. too) */
	int order;           /* place in libdwfl's order: globals first */
	unsigned char bind;  /* global 3 > weak 2 > local 1 > other 0 */
	unsigned char local; /* looked at in the second pass only */
};

/* An SHF_ALLOC section of the main file, [start, end] in the module. */
struct st_sec {
	GElf_Addr start, end;
	size_t ndx;
};

struct symtab_index {
	struct st_sym *syms; /* by value, then order */
	GElf_Addr *max_end;  /* max_end[i]: highest end of syms[0..i] */
	size_t n;
	int two_pass; /* the table has locals, looked at after the globals */
	struct st_sec *secs;
	size_t nsecs;
	int secs_bad; /* libdwfl could not read them: no address has one */
	/* Scratch: the symbols containing one address (at most depth). */
	const struct st_sym **hits;
	size_t depth;
};

static int sym_cmp(const void *a, const void *b)
{
	const struct st_sym *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	return x->order - y->order;
}

static int sec_cmp(const void *a, const void *b)
{
	const struct st_sec *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	/* libdwfl sorts by start only, with a stable sort of the sections
	 * in file order. */
	return x->ndx < y->ndx ? -1 : x->ndx > y->ndx;
}

static GElf_Addr sym_end(const struct st_sym *s)
{
	GElf_Addr end = s->value + s->size;
	return end < s->value ? (GElf_Addr)-1 : end;
}

static unsigned char bind_value(int bind)
{
	return bind == STB_GLOBAL  ? 3
	       : bind == STB_WEAK  ? 2
	       : bind == STB_LOCAL ? 1
	                           : 0;
}

/* The sections libdwfl finds addresses in.  0, or -1 out of memory. */
static int read_sections(struct symtab_index *x, Elf *elf, GElf_Addr bias)
{
	size_t shstrndx, n = 0;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0) {
		x->secs_bad = 1;
		return 0;
	}
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn;
	     scn = elf_nextscn(elf, scn))
		n++;
	x->secs = malloc((n ? n : 1) * sizeof(*x->secs));
	if (!x->secs)
		return -1;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn;
	     scn = elf_nextscn(elf, scn)) {
		GElf_Shdr mem;
		GElf_Shdr *sh = gelf_getshdr(scn, &mem);
		if (!sh || ((sh->sh_flags & SHF_ALLOC) &&
		            !elf_strptr(elf, shstrndx, sh->sh_name))) {
			x->secs_bad = 1;
			x->nsecs = 0;
			return 0;
		}
		if (!(sh->sh_flags & SHF_ALLOC))
			continue;
		GElf_Addr start = sh->sh_addr + bias;
		x->secs[x->nsecs++] = (struct st_sec){
		        .start = start,
		        .end = start + sh->sh_size,
		        .ndx = elf_ndxscn(scn),
		};
	}
	qsort(x->secs, x->nsecs, sizeof(*x->secs), sec_cmp);
	return 0;
}

/* libdwfl's section index for a module address (a binary search in which
 * a section's end is inside it unless the next one starts there), or
 * SHN_UNDEF for none. */
static size_t section_of(const struct symtab_index *x, GElf_Addr addr)
{
	size_t l = 0, u = x->nsecs;

	while (l < u) {
		size_t i = (l + u) / 2;
		if (addr < x->secs[i].start) {
			u = i;
		} else if (addr > x->secs[i].end) {
			l = i + 1;
		} else {
			if (addr == x->secs[i].end && i + 1 < x->nsecs &&
			    addr == x->secs[i + 1].start)
				i++;
			return x->secs[i].ndx;
		}
	}
	return SHN_UNDEF;
}

/* The most symbols with a size that contain one address. */
static size_t max_depth(const struct symtab_index *x)
{
	/* Walk the starts in order, keeping the ends of the open symbols in
	 * a min-heap: its largest size is the depth. */
	GElf_Addr *heap = malloc((x->n ? x->n : 1) * sizeof(*heap));
	size_t len = 0, depth = 0;

	if (!heap)
		return 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct st_sym *s = &x->syms[i];
		if (!s->size)
			continue;
		while (len && heap[0] <= s->value) {
			/* pop */
			heap[0] = heap[--len];
			for (size_t k = 0;;) {
				size_t c = 2 * k + 1, m = k;
				if (c < len && heap[c] < heap[m])
					m = c;
				if (c + 1 < len && heap[c + 1] < heap[m])
					m = c + 1;
				if (m == k)
					break;
				GElf_Addr t = heap[k];
				heap[k] = heap[m];
				heap[m] = t;
				k = m;
			}
		}
		/* push */
		size_t k = len++;
		heap[k] = sym_end(s);
		while (k && heap[(k - 1) / 2] > heap[k]) {
			GElf_Addr t = heap[k];
			heap[k] = heap[(k - 1) / 2];
			heap[(k - 1) / 2] = t;
			k = (k - 1) / 2;
		}
		depth = len > depth ? len : depth;
	}
	free(heap);
	return depth ? depth : 1;
}

/*
 * Can sym (from elf, section shndx) name code?  A function (STT_FUNC,
 * STT_GNU_IFUNC) or an assembly label (STT_NOTYPE), in a section that is
 * loaded and executable (an absolute one: a function at a nonzero address).
 * Not data: rustc's Rust dylibs hold rust_metadata_<crate>_<hash>, an
 * STT_OBJECT of a few MiB at address 0 in .rustc, which is not loaded,
 * and covers the whole .text of libstd, so libdwfl named with it every
 * std function that .dynsym does not export.
 */
static int names_code(const GElf_Sym *sym, Elf *elf, GElf_Word shndx)
{
	int type = GELF_ST_TYPE(sym->st_info);
	if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
		return 0;
	if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE)
		return type != STT_NOTYPE && sym->st_value != 0;
	GElf_Shdr mem;
	Elf_Scn *scn = elf ? elf_getscn(elf, shndx) : NULL;
	GElf_Shdr *sh = scn ? gelf_getshdr(scn, &mem) : NULL;
	/* A separate debug file's sections are SHT_NOBITS, with the flags of
	 * the original. */
	return sh && (sh->sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) ==
	                     (SHF_ALLOC | SHF_EXECINSTR);
}

struct symtab_index *symtab_index_new(Dwfl_Module *mod, int code_only)
{
	struct symtab_index *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;

	int n = dwfl_module_getsymtab(mod);
	int first_global = n > 0 ? dwfl_module_getsymtab_first_global(mod) : -1;
	if (n <= 0 || first_global < 0)
		return x; /* libdwfl names nothing either */

	GElf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	GElf_Ehdr ehmem;
	GElf_Ehdr *eh = elf ? gelf_getehdr(elf, &ehmem) : NULL;
	/* Relocatable files get section addresses assigned, and PPC64's
	 * function descriptors are matched twice: left to libdwfl. */
	if (!eh || eh->e_type == ET_REL || eh->e_machine == EM_PPC64)
		goto fail;

	/* libdwfl looks at [gstart, n) (the globals), then [1, gstart). */
	int gstart = first_global == 0 ? 1 : first_global;
	x->two_pass = first_global > 1;
	x->syms = malloc((size_t)n * sizeof(*x->syms));
	x->max_end = malloc((size_t)n * sizeof(*x->max_end));
	if (!x->syms || !x->max_end || read_sections(x, elf, bias) < 0)
		goto fail;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr value;
		GElf_Word shndx = SHN_UNDEF;
		Elf *symelf = NULL;
		const char *name = dwfl_module_getsym_info(
		        mod, i, &sym, &value, &shndx, &symelf, NULL);
		int type = GELF_ST_TYPE(sym.st_info);
		if (!name || !name[0] || sym.st_shndx == SHN_UNDEF ||
		    type == STT_SECTION || type == STT_FILE || type == STT_TLS)
			continue;
		if (code_only && !names_code(&sym, symelf, shndx))
			continue;
		x->syms[x->n++] = (struct st_sym){
		        .value = value,
		        .size = sym.st_size,
		        .name = name,
		        .shndx = shndx,
		        .order = i >= gstart ? i - gstart : n + i,
		        .bind = bind_value(GELF_ST_BIND(sym.st_info)),
		        .local = i < gstart,
		};
	}
	qsort(x->syms, x->n, sizeof(*x->syms), sym_cmp);
	GElf_Addr hi = 0;
	for (size_t i = 0; i < x->n; i++) {
		GElf_Addr end = sym_end(&x->syms[i]);
		hi = end > hi ? end : hi;
		x->max_end[i] = hi;
	}
	x->depth = max_depth(x);
	x->hits = x->depth ? malloc(x->depth * sizeof(*x->hits)) : NULL;
	if (!x->hits)
		goto fail;
	return x;
fail:
	symtab_index_free(x);
	return NULL;
}

void symtab_index_free(struct symtab_index *x)
{
	if (!x)
		return;
	free(x->syms);
	free(x->max_end);
	free(x->secs);
	free(x->hits);
	free(x);
}

/* Does c, met after best (both with a size, containing the address),
 * replace it? */
static int replaces(const struct st_sym *best, const struct st_sym *c)
{
	if (best->value < c->value || best->bind < c->bind)
		return 1;
	return best->value == c->value && best->size > c->size &&
	       best->bind == c->bind;
}

/* Of the hits of one pass (locals or not), the one libdwfl keeps. */
static const struct st_sym *pick(const struct st_sym **hits, size_t n,
                                 int local)
{
	const struct st_sym *best = NULL;

	/* Met in libdwfl's order: a selection of the next by order (there
	 * are seldom more than two or three). */
	for (int last = -1;;) {
		const struct st_sym *next = NULL;
		for (size_t i = 0; i < n; i++)
			if (hits[i]->local == local && hits[i]->order > last &&
			    (!next || hits[i]->order < next->order))
				next = hits[i];
		if (!next)
			return best;
		if (!best || replaces(best, next))
			best = next;
		last = next->order;
	}
}

const char *symtab_index_lookup(struct symtab_index *x, GElf_Addr addr)
{
	/* below: how many symbols start at or below addr. */
	size_t lo = 0, hi = x->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->syms[mid].value <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t below = lo;
	if (below == 0)
		return NULL;

	/* The symbols with a size containing addr. */
	size_t nhits = 0;
	for (size_t i = below; i > 0 && x->max_end[i - 1] > addr; i--) {
		const struct st_sym *s = &x->syms[i - 1];
		if (s->size && addr - s->value < s->size && nhits < x->depth)
			x->hits[nhits++] = s;
	}
	const struct st_sym *best = pick(x->hits, nhits, 0);
	if (best)
		return best->name;

	/* A global label exactly at addr keeps libdwfl from the locals. */
	int global_at = 0;
	for (size_t i = below; i > 0 && x->syms[i - 1].value == addr; i--)
		if (!x->syms[i - 1].size && !x->syms[i - 1].local)
			global_at = 1;
	int locals = x->two_pass && !global_at;
	if (locals) {
		best = pick(x->hits, nhits, 1);
		if (best)
			return best->name;
	}

	/* A label at M, the highest end of the symbols looked at: all of
	 * them when the locals were, else the globals, whose M is addr
	 * itself (the label there).  None of them contains addr now. */
	GElf_Addr top = locals || !x->two_pass ? x->max_end[below - 1] : addr;
	size_t addr_sec = x->secs_bad ? SHN_UNDEF : section_of(x, addr);
	const struct st_sym *label = NULL;
	for (size_t i = below; i > 0 && x->syms[i - 1].value >= top; i--) {
		const struct st_sym *s = &x->syms[i - 1];
		if (s->value != top || s->size || (s->local && !locals) ||
		    (label && label->order > s->order))
			continue;
		if (s->shndx >= SHN_LORESERVE ? s->value == addr
		    : x->secs_bad             ? 1
		                  : section_of(x, s->value) == addr_sec)
			label = s;
	}
	return label ? label->name : NULL;
}
