/*
 * Online symbolization with elfutils' libdwfl in offline mode (see
 * symbolize.h).  Each module file gets its own Dwfl, reported at load base
 * 0 so that module addresses are the file's ELF virtual addresses: exactly
 * the rel_pc the profile stores.  Files are verified by GNU build ID before
 * any name is taken from them.
 */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/symbolize.h"
#include "util/hmap.h"

/* From libstdc++ (linked into heapprof); declared here to stay in C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
                            int *status);

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
};

static const Dwfl_Callbacks offline_callbacks = {
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
};

struct symbolizer *symbolizer_new(void)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (s)
		hmap_init(&s->index);
	return s;
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
	free(s);
}

void sym_result_fini(struct sym_result *r)
{
	free(r->name);
	free(r->system_name);
	r->name = NULL;
	r->system_name = NULL;
}

char *symbolize_demangle(const char *name)
{
	int status = 0;

	if (!name || strncmp(name, "_Z", 2) != 0)
		return NULL;
	char *out = __cxa_demangle(name, NULL, NULL, &status);
	if (status != 0) {
		free(out);
		return NULL;
	}
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
	m->dwfl = dwfl_begin(&offline_callbacks);
	if (!m->dwfl) {
		m->state = SYM_FAILED;
		return;
	}
	s->nopen++;
	/* Base 0 plus p_vaddr: module addresses are the file's vaddrs. */
	m->mod = dwfl_report_elf(m->dwfl, m->path, m->path, -1, 0, true);
	dwfl_report_end(m->dwfl, NULL, NULL);
	if (!m->mod ||
	    !build_id_matches(m, bits,
	                      dwfl_module_build_id(m->mod, &bits, &vaddr))) {
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

int symbolizer_lookup(struct symbolizer *s, const char *path,
                      const uint8_t *build_id, size_t build_id_len,
                      uint64_t rel_pc, struct sym_result *out)
{
	out->name = NULL;
	out->system_name = NULL;
	/* Only real files: not "", "[vdso]", "[heapprof]"... */
	if (!path || path[0] != '/' || rel_pc == 0)
		return 0;
	struct sym_module *m = module_get(s, path, build_id, build_id_len);
	if (!m)
		return -ENOMEM;
	if (m->state == SYM_UNTRIED)
		module_open(s, m);
	if (m->state != SYM_OPEN)
		return 0;
	m->last_use = ++s->clock;

	GElf_Off off;
	GElf_Sym sym;
	/* A return address: the call instruction ends just before it. */
	const char *name = module_find(m, rel_pc - 1);
	if (!name)
		name = dwfl_module_addrinfo(m->mod, rel_pc - 1, &off, &sym,
		                            NULL, NULL, NULL);
	if (!name || !name[0])
		return 0;
	return fill_result(name, out);
}
