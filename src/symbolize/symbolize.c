/*
 * Symbolization with elfutils' libdwfl in offline mode (see symbolize.h).
 * Each module file gets its own Dwfl, reported at load base 0 so that
 * module addresses are the file's ELF virtual addresses: exactly the
 * rel_pc the profile stores.  Files are verified by GNU build ID before
 * any name is taken from them.  Names come from the symbol table; source
 * lines and inline chains (symbolizer_lookup_source) from DWARF through
 * libdw.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/symbolize.h"
#include "symbolize/symtab.h"
#include "util/hmap.h"

/* libiberty's demangler (Debian's libiberty-dev, linked statically:
 * cp-demangle.c and rust-demangle.c, whose licence lets them be linked
 * into any program): the one binutils and GDB use, for C++ and both Rust
 * manglings.  cplus_demangle_v3 and rust_demangle, not cplus_demangle,
 * which would bring libiberty's xmalloc (exit on out of memory). */
#include <libiberty/demangle.h>

/* Open Dwfl handles kept at once; each holds a file descriptor. */
#define SYM_MAX_OPEN 256
/* Client records keep this many build-ID bytes; longer IDs are truncated. */
#define SYM_BUILD_ID_KEPT 32

enum sym_state {
	SYM_UNTRIED = 0, /* not opened yet, or closed to save descriptors */
	SYM_OPEN,        /* dwfl/mod valid, build ID verified */
	SYM_FAILED, /* missing, unreadable or wrong build ID: never retried */
};

struct sym_module {
	char *path;
	uint8_t *build_id;
	size_t build_id_len;
	enum sym_state state;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	uint64_t last_use;
	/* Function symbols sorted by address, names owned by dwfl: built once
	 * per open, because dwfl_module_addrinfo scans the whole symbol table
	 * on every call (seconds for a binary like cc1). */
	struct sym_entry *syms;
	size_t nsyms;
	/* For the addresses no function symbol covers: what
	 * dwfl_module_addrinfo would say, without its linear scan; built on
	 * the first such address (stx_tried), NULL if that failed. */
	struct symtab_index *stx;
	int stx_tried;
};

struct sym_entry {
	GElf_Addr start, size;
	const char *name;
	int rank; /* binding preference: global > weak > local */
};

struct symbolizer {
	struct hmap index; /* path NUL build-id -> index into mods */
	struct sym_module *mods;
	size_t nmods, cap;
	size_t nopen;
	uint64_t clock;
	/* Every Dwfl of this symbolizer points here; debuginfo_path at
	 * debug_path (NULL: libdwfl's default). */
	Dwfl_Callbacks callbacks;
	char *debug_path;
};

struct symbolizer *symbolizer_new(void)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	hmap_init(&s->index);
	s->callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
	s->callbacks.section_address = dwfl_offline_section_address;
	return s;
}

int symbolizer_set_debuginfo_path(struct symbolizer *s, const char *path)
{
	char *copy = path ? strdup(path) : NULL;

	if (path && !copy)
		return -ENOMEM;
	free(s->debug_path);
	s->debug_path = copy;
	s->callbacks.debuginfo_path = copy ? &s->debug_path : NULL;
	return 0;
}

static void module_close(struct symbolizer *s, struct sym_module *m)
{
	if (m->dwfl) {
		dwfl_end(m->dwfl);
		s->nopen--;
	}
	m->dwfl = NULL;
	m->mod = NULL;
	free(m->syms);
	m->syms = NULL;
	m->nsyms = 0;
	symtab_index_free(m->stx);
	m->stx = NULL;
	m->stx_tried = 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym_entry *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->rank - y->rank; /* preferred alias last */
}

/* Builds m->syms; on failure lookups fall back to dwfl_module_addrinfo. */
static void module_index(struct sym_module *m)
{
	int n = dwfl_module_getsymtab(m->mod);
	if (n <= 0)
		return;
	m->syms = malloc((size_t)n * sizeof(*m->syms));
	if (!m->syms)
		return;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(
		        m->mod, i, &sym, &addr, NULL, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);
		if (!name || !name[0] || addr == 0 ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		int bind = GELF_ST_BIND(sym.st_info);
		m->syms[m->nsyms++] =
		        (struct sym_entry){.start = addr,
		                           .size = sym.st_size,
		                           .name = name,
		                           .rank = bind == STB_GLOBAL ? 2
		                                   : bind == STB_WEAK ? 1
		                                                      : 0};
	}
	qsort(m->syms, m->nsyms, sizeof(*m->syms), sym_cmp);
}

/* The function containing addr: the last entry starting at or before it
 * whose size covers it (a few entries back, for nested or aliased
 * symbols).  NULL when the index has no answer. */
static const char *module_find(const struct sym_module *m, GElf_Addr addr)
{
	size_t lo = 0, hi = m->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->syms[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = 0; k < 8 && lo > 0; k++, lo--) {
		const struct sym_entry *e = &m->syms[lo - 1];
		if (addr < e->start + (e->size ? e->size : 1))
			return e->name;
	}
	return NULL;
}

/* What dwfl_module_addrinfo names at addr, from the index (symtab.h);
 * from libdwfl itself if the index could not be built. */
static const char *module_addrinfo(struct sym_module *m, GElf_Addr addr)
{
	if (!m->stx_tried) {
		m->stx = symtab_index_new(m->mod, 1);
		m->stx_tried = 1;
	}
	if (m->stx)
		return symtab_index_lookup(m->stx, addr);
	GElf_Off off;
	GElf_Sym sym;
	const char *name = dwfl_module_addrinfo(m->mod, addr, &off, &sym, NULL,
	                                        NULL, NULL);
	int type = GELF_ST_TYPE(sym.st_info);
	/* Only code names a frame (see symtab_index_new's code_only). */
	return name && (type == STT_FUNC || type == STT_GNU_IFUNC) ? name
	                                                           : NULL;
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmods; i++) {
		module_close(s, &s->mods[i]);
		free(s->mods[i].path);
		free(s->mods[i].build_id);
	}
	free(s->mods);
	hmap_free(&s->index);
	free(s->debug_path);
	free(s);
}

void sym_result_fini(struct sym_result *r)
{
	free(r->name);
	free(r->system_name);
	r->name = NULL;
	r->system_name = NULL;
}

/* The length of name without a suffix LLVM's ThinLTO adds to a local
 * symbol it promotes (".llvm.4963390113123587637"): not part of the name. */
static size_t without_llvm_suffix(const char *name)
{
	size_t len = strlen(name);
	const char *dot = strstr(name, ".llvm.");
	if (!dot || !dot[6])
		return len;
	for (const char *p = dot + 6; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
		      (*p >= 'A' && *p <= 'F')))
			return len;
	return (size_t)(dot - name);
}

char *symbolize_demangle(const char *name)
{
	if (!name || (strncmp(name, "_Z", 2) != 0 && strncmp(name, "_R", 2)))
		return NULL;
	char *sym = strndup(name, without_llvm_suffix(name));
	if (!sym)
		return NULL;
	/*
	 * Rust first: a legacy Rust name (_ZN...17h<16 hex digits>E) is a
	 * valid C++ name too, which the C++ demangler would end with the
	 * hash ("std::rt::lang_start::h1c2e..."); rust_demangle without
	 * DMGL_VERBOSE drops it, and reads v0 names (_R...).  It refuses a
	 * C++ name (no hash), which the C++ demangler then reads, with
	 * parameters and qualifiers as __cxa_demangle writes them.
	 */
	char *out = rust_demangle(sym, DMGL_PARAMS | DMGL_ANSI);
	if (!out && sym[1] == 'Z')
		out = cplus_demangle_v3(sym, DMGL_PARAMS | DMGL_ANSI);
	free(sym);
	return out;
}

char *symbolize_hex(char *buf, const uint8_t *id, size_t len)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		buf[2 * i] = digits[id[i] >> 4];
		buf[2 * i + 1] = digits[id[i] & 15];
	}
	buf[2 * len] = '\0';
	return buf;
}

static int build_id_matches(const struct sym_module *m, const uint8_t *bits,
                            int len)
{
	if (len < 0)
		return 0;
	size_t flen = (size_t)len;
	if (flen == m->build_id_len)
		return flen == 0 || !memcmp(bits, m->build_id, flen);
	/* The client keeps only a prefix of very long build IDs. */
	if (m->build_id_len == SYM_BUILD_ID_KEPT && flen > SYM_BUILD_ID_KEPT)
		return !memcmp(bits, m->build_id, SYM_BUILD_ID_KEPT);
	return 0;
}

/* Close the least recently used open module, to bound open descriptors. */
static void evict_one(struct symbolizer *s)
{
	struct sym_module *lru = NULL;

	for (size_t i = 0; i < s->nmods; i++) {
		struct sym_module *m = &s->mods[i];
		if (m->state == SYM_OPEN &&
		    (!lru || m->last_use < lru->last_use))
			lru = m;
	}
	if (lru) {
		module_close(s, lru);
		lru->state = SYM_UNTRIED;
	}
}

/* Open m's file and check its build ID; sets m->state. */
static void module_open(struct symbolizer *s, struct sym_module *m)
{
	const unsigned char *bits = NULL;
	GElf_Addr vaddr;

	if (s->nopen >= SYM_MAX_OPEN)
		evict_one(s);
	m->dwfl = dwfl_begin(&s->callbacks);
	if (!m->dwfl) {
		m->state = SYM_FAILED;
		return;
	}
	s->nopen++;
	/* Base 0 plus p_vaddr: module addresses are the file's vaddrs. */
	m->mod = dwfl_report_elf(m->dwfl, m->path, m->path, -1, 0, true);
	dwfl_report_end(m->dwfl, NULL, NULL);
	/* The build ID is read before bits is passed on: the order in which
	 * one call's arguments are evaluated is unspecified. */
	int idlen = m->mod ? dwfl_module_build_id(m->mod, &bits, &vaddr) : -1;
	if (!m->mod || !build_id_matches(m, bits, idlen)) {
		module_close(s, m);
		m->state = SYM_FAILED;
		return;
	}
	m->state = SYM_OPEN;
	module_index(m);
}

/* Find or add the module record for (path, build ID); NULL if no memory. */
static struct sym_module *module_get(struct symbolizer *s, const char *path,
                                     const uint8_t *id, size_t id_len)
{
	size_t plen = strlen(path);
	size_t klen = plen + 1 + id_len;
	uint8_t *key = malloc(klen);
	struct sym_module *m = NULL;

	if (!key)
		return NULL;
	memcpy(key, path, plen + 1);
	if (id_len)
		memcpy(key + plen + 1, id, id_len);
	int64_t *idx = hmap_find(&s->index, key, klen);
	if (idx) {
		m = &s->mods[*idx];
		goto out;
	}
	if (s->nmods == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct sym_module *mods = realloc(s->mods, cap * sizeof(*mods));
		if (!mods)
			goto out;
		s->mods = mods;
		s->cap = cap;
	}
	m = &s->mods[s->nmods];
	memset(m, 0, sizeof(*m));
	m->path = strdup(path);
	m->build_id = id_len ? malloc(id_len) : NULL;
	if (!m->path || (id_len && !m->build_id) ||
	    hmap_put(&s->index, key, klen, (int64_t)s->nmods) < 0) {
		free(m->path);
		free(m->build_id);
		m = NULL;
		goto out;
	}
	if (id_len)
		memcpy(m->build_id, id, id_len);
	m->build_id_len = id_len;
	s->nmods++;
out:
	free(key);
	return m;
}

static int fill_result(const char *sym, struct sym_result *out)
{
	/* Drop a symbol version ("memcpy@@GLIBC_2.14"): not part of a name. */
	const char *at = strchr(sym, '@');

	out->system_name = at ? strndup(sym, (size_t)(at - sym)) : strdup(sym);
	if (!out->system_name)
		return -ENOMEM;
	sym = out->system_name;
	out->name = symbolize_demangle(sym);
	if (!out->name)
		out->name = strdup(sym);
	if (!out->name || !out->system_name) {
		sym_result_fini(out);
		return -ENOMEM;
	}
	return 0;
}

/*
 * The open, verified module for (path, build ID); NULL with *err 0 if the
 * file cannot be used, NULL with *err -ENOMEM if out of memory.
 */
static struct sym_module *module_ready(struct symbolizer *s, const char *path,
                                       const uint8_t *build_id,
                                       size_t build_id_len, int *err)
{
	*err = 0;
	/* Only real files: not "", "[vdso]", "[heapprof]"... */
	if (!path || path[0] != '/')
		return NULL;
	struct sym_module *m = module_get(s, path, build_id, build_id_len);
	if (!m) {
		*err = -ENOMEM;
		return NULL;
	}
	if (m->state == SYM_UNTRIED)
		module_open(s, m);
	if (m->state != SYM_OPEN)
		return NULL;
	m->last_use = ++s->clock;
	return m;
}

int symbolizer_lookup(struct symbolizer *s, const char *path,
                      const uint8_t *build_id, size_t build_id_len,
                      uint64_t rel_pc, struct sym_result *out)
{
	int err = 0;

	out->name = NULL;
	out->system_name = NULL;
	if (rel_pc == 0)
		return 0;
	struct sym_module *m =
	        module_ready(s, path, build_id, build_id_len, &err);
	if (!m)
		return err;

	/* A return address: the call instruction ends just before it. */
	const char *name = module_find(m, rel_pc - 1);
	if (!name)
		name = module_addrinfo(m, rel_pc - 1);
	if (!name || !name[0])
		return 0;
	return fill_result(name, out);
}

int symbolizer_has_dwarf(struct symbolizer *s, const char *path,
                         const uint8_t *build_id, size_t build_id_len)
{
	Dwarf_Addr bias;
	int err = 0;
	struct sym_module *m =
	        module_ready(s, path, build_id, build_id_len, &err);

	if (!m)
		return -1;
	/* Finds a separate debug file through the callbacks if needed. */
	return dwfl_module_getdwarf(m->mod, &bias) != NULL;
}

void sym_source_free(struct sym_source *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].source_file);
	}
	free(v);
}

/* A string attribute of die or of the DIEs it refers to
 * (DW_AT_abstract_origin, DW_AT_specification); NULL if none. */
static const char *die_string(Dwarf_Die *die, unsigned int name)
{
	Dwarf_Attribute attr;
	return dwarf_formstring(dwarf_attr_integrate(die, name, &attr));
}

/* The DIE holding die's own DW_AT_name, following DW_AT_abstract_origin
 * and DW_AT_specification (a few hops; a bad file may loop). */
static int die_named(Dwarf_Die *die, Dwarf_Die *out)
{
	*out = *die;
	for (int hops = 0; hops < 8; hops++) {
		Dwarf_Attribute attr;
		if (dwarf_hasattr(out, DW_AT_name))
			return 1;
		Dwarf_Attribute *ref =
		        dwarf_attr(out, DW_AT_abstract_origin, &attr);
		if (!ref)
			ref = dwarf_attr(out, DW_AT_specification, &attr);
		if (!ref || !dwarf_formref_die(ref, out))
			return 0;
	}
	return 0;
}

/*
 * name qualified with the namespaces and classes around its declaration
 * (named), as "ns::detail::f"; for functions without a linkage name
 * (static C++ functions, as GCC emits them).  NULL if out of memory.
 */
static char *qualified_name(Dwarf_Die *named, const char *name)
{
	Dwarf_Die *scopes = NULL;
	int n = dwarf_getscopes_die(named, &scopes);
	size_t len = strlen(name) + 1;

	/* scopes[0] is named itself, then its parents out to the CU. */
	for (int pass = 0; pass < 2; pass++) {
		char *out = pass ? malloc(len) : NULL;
		if (pass && !out)
			break;
		if (out)
			out[0] = '\0';
		for (int i = n - 1; i >= 1; i--) {
			int tag = dwarf_tag(&scopes[i]);
			if (tag != DW_TAG_namespace &&
			    tag != DW_TAG_class_type &&
			    tag != DW_TAG_structure_type &&
			    tag != DW_TAG_union_type)
				continue;
			const char *part = dwarf_diename(&scopes[i]);
			if (!part)
				part = "(anonymous namespace)";
			if (out) {
				strcat(out, part);
				strcat(out, "::");
			} else {
				len += strlen(part) + 2;
			}
		}
		if (out) {
			strcat(out, name);
			free(scopes);
			return out;
		}
	}
	free(scopes);
	return NULL;
}

/*
 * The name of a function DIE into *out: the demangled linkage name, else
 * DW_AT_name qualified by its namespaces and classes; *out NULL if it has
 * neither.  0 or -ENOMEM.
 */
static int die_function_name(Dwarf_Die *die, char **out)
{
	const char *link = die_string(die, DW_AT_linkage_name);
	if (!link)
		link = die_string(die, DW_AT_MIPS_linkage_name);
	*out = link ? symbolize_demangle(link) : NULL;
	if (*out)
		return 0;
	Dwarf_Die named;
	const char *name = die_string(die, DW_AT_name);
	if (name && !link && die_named(die, &named))
		*out = qualified_name(&named, name);
	else if (name || link)
		*out = strdup(name ? name : link);
	else
		return 0;
	return *out ? 0 : -ENOMEM;
}

/* Where the inlined instance `die` was called from: *file (NULL if
 * unknown, points into libdw's data) and *line (0 if unknown). */
static void die_call_site(Dwarf_Die *die, const char **file, int64_t *line)
{
	Dwarf_Attribute attr;
	Dwarf_Word v;
	Dwarf_Die cu;
	Dwarf_Files *files;
	size_t nfiles;

	*file = NULL;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0)
		*line = (int64_t)v;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v) == 0 &&
	    dwarf_diecu(die, &cu, NULL, NULL) &&
	    dwarf_getsrcfiles(&cu, &files, &nfiles) == 0 && v < nfiles)
		*file = dwarf_filesrc(files, v, NULL, NULL);
}

static int push_source(struct sym_source **v, size_t *n, size_t *cap,
                       char *name, const char *file, int64_t line)
{
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 4;
		struct sym_source *a = realloc(*v, ncap * sizeof(*a));
		if (!a)
			goto oom;
		*v = a;
		*cap = ncap;
	}
	struct sym_source *e = &(*v)[*n];
	e->name = name;
	e->source_file = file ? strdup(file) : NULL;
	e->line = line > 0 ? line : 0;
	if (file && !e->source_file)
		goto oom;
	(*n)++;
	return 0;
oom:
	free(name);
	return -ENOMEM;
}

/*
 * The innermost function, inlined instance or block at pc among the
 * descendants of parent, into *out; false if none.  dwarf_getscopes does
 * not look inside a DIE that has no addresses of its own, and rustc puts
 * every function inside the DW_TAG_namespace of its module (and methods
 * inside their type's): it found nothing for a Rust function.  Namespaces
 * and types are walked, functions and blocks entered only when they hold
 * pc.
 */
static bool innermost_at(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *out,
                         int depth)
{
	Dwarf_Die child, next;
	if (depth > 64 || dwarf_child(parent, &child) != 0)
		return false;
	for (;;) {
		switch (dwarf_tag(&child)) {
		case DW_TAG_namespace:
		case DW_TAG_module:
		case DW_TAG_structure_type:
		case DW_TAG_class_type:
		case DW_TAG_union_type:
		case DW_TAG_enumeration_type:
			if (innermost_at(&child, pc, out, depth + 1))
				return true;
			break;
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
		case DW_TAG_lexical_block:
			if (dwarf_haspc(&child, pc) > 0) {
				*out = child;
				(void)innermost_at(&child, pc, out, depth + 1);
				return true;
			}
			break;
		default:
			break;
		}
		if (dwarf_siblingof(&child, &next) != 0)
			return false;
		child = next;
	}
}

int symbolizer_lookup_source(struct symbolizer *s, const char *path,
                             const uint8_t *build_id, size_t build_id_len,
                             uint64_t rel_pc, struct sym_source **out,
                             size_t *n)
{
	struct sym_source *v = NULL;
	size_t nv = 0, cap = 0;
	int err = 0;

	*out = NULL;
	*n = 0;
	if (rel_pc == 0)
		return 0;
	struct sym_module *m =
	        module_ready(s, path, build_id, build_id_len, &err);
	if (!m)
		return err;

	/* A return address: the call instruction ends just before it. */
	Dwarf_Addr pc = rel_pc - 1, bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(m->mod, pc, &bias);
	if (!cu)
		return 0;

	/* The line being executed in the innermost function. */
	const char *file = NULL;
	int line = 0;
	Dwfl_Line *dl = dwfl_module_getsrc(m->mod, pc);
	if (dl)
		file = dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL);
	int64_t cur_line = line;

	/*
	 * dwarf_getscopes gives the innermost DIE at pc (its outer entries
	 * follow an inlined function's abstract origin, not the code);
	 * dwarf_getscopes_die gives that DIE's concrete chain of parents:
	 * lexical blocks, inlined instances, the enclosing subprogram, ...
	 */
	Dwarf_Die *scopes = NULL, *chain = NULL;
	Dwarf_Die inner;
	int nscopes = dwarf_getscopes(cu, pc - bias, &scopes);
	int nchain = 0;
	if (nscopes > 0)
		inner = scopes[0];
	free(scopes);
	if (nscopes > 0 || innermost_at(cu, pc - bias, &inner, 0))
		nchain = dwarf_getscopes_die(&inner, &chain);
	for (int i = 0; !err && i < nchain; i++) {
		int tag = dwarf_tag(&chain[i]);
		if (tag != DW_TAG_subprogram &&
		    tag != DW_TAG_inlined_subroutine)
			continue;
		char *name = NULL;
		err = die_function_name(&chain[i], &name);
		if (!err)
			err = push_source(&v, &nv, &cap, name, file, cur_line);
		if (tag == DW_TAG_subprogram)
			break; /* the function it was all inlined into */
		/* The caller executes the call site of this instance. */
		die_call_site(&chain[i], &file, &cur_line);
	}
	free(chain);
	/* Line info but no function DIE: still a location. */
	if (!err && nv == 0 && (file || cur_line > 0))
		err = push_source(&v, &nv, &cap, NULL, file, cur_line);
	if (err) {
		sym_source_free(v, nv);
		return err;
	}
	*out = v;
	*n = nv;
	return 0;
}
