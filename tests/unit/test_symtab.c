/*
 * Unit tests of the symbol-table index (symbolize/symtab.h): it must name
 * every address exactly as dwfl_module_addrinfo does.  Compared on every
 * byte of a region of this binary laid out with awkward symbols (a local
 * function inside a global one, a weak one too, assembly labels without a
 * size, global and local, an object in .text, a gap), with exact expected
 * names there; and at every symbol's start, end and middle plus a stride
 * of the sections of this binary, libstdc++ and libc (whose symbols may
 * come from a separate debug file).  Then symbolizer_lookup on the region:
 * the names the profile gets.
 */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize/symbolize.h"
#include "symbolize/symtab.h"
#include "selfmod.h"
#include "unit.h"

/*
 * The region: bytes in .text, never executed, with symbols at fixed
 * offsets from symtab_t_outer (see the expectations in test_region).
 * Directives only, so that any GNU assembler target takes it.
 */
__asm__(".pushsection .text.symtab_test, \"ax\"\n"
        ".balign 64\n"
        /* 0x00: a global function, 0x30 bytes */
        ".globl symtab_t_outer\n"
        ".type symtab_t_outer, STT_FUNC\n"
        "symtab_t_outer:\n"
        ".skip 8\n"
        /* 0x08: a local function inside it, 8 bytes */
        ".type symtab_t_inner, STT_FUNC\n"
        "symtab_t_inner:\n"
        ".skip 8\n"
        ".size symtab_t_inner, 8\n"
        ".skip 8\n"
        /* 0x18: a weak function inside it, 8 bytes */
        ".weak symtab_t_weak\n"
        ".type symtab_t_weak, STT_FUNC\n"
        "symtab_t_weak:\n"
        ".skip 8\n"
        ".size symtab_t_weak, 8\n"
        ".skip 16\n"
        ".size symtab_t_outer, 0x30\n"
        /* 0x30: a global label without a size */
        ".globl symtab_t_label\n"
        "symtab_t_label:\n"
        ".skip 16\n"
        /* 0x40: a local object of 16 bytes in .text */
        ".type symtab_t_obj, STT_OBJECT\n"
        "symtab_t_obj:\n"
        ".skip 16\n"
        ".size symtab_t_obj, 16\n"
        /* 0x50: a local label, 0x58: a global label */
        "symtab_t_llabel:\n"
        ".skip 8\n"
        ".globl symtab_t_glabel\n"
        "symtab_t_glabel:\n"
        ".skip 8\n"
        /* 0x60: a global function of 16 bytes, 0x70: a local one of 8 */
        ".globl symtab_t_after\n"
        ".type symtab_t_after, STT_FUNC\n"
        "symtab_t_after:\n"
        ".skip 16\n"
        ".size symtab_t_after, 16\n"
        ".type symtab_t_tail, STT_FUNC\n"
        "symtab_t_tail:\n"
        ".skip 8\n"
        ".size symtab_t_tail, 8\n"
        /* 0x78: 8 bytes no symbol covers */
        ".skip 8\n"
        ".popsection\n");

extern const char symtab_t_outer[];

#define REGION_LEN 0x80

static const Dwfl_Callbacks callbacks = {
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
};

/* A Dwfl for the module file at path, as the symbolizer reports it. */
static Dwfl_Module *open_module(const char *path, Dwfl **dwfl)
{
	*dwfl = dwfl_begin(&callbacks);
	if (!*dwfl)
		return NULL;
	Dwfl_Module *m = dwfl_report_elf(*dwfl, path, path, -1, 0, true);
	dwfl_report_end(*dwfl, NULL, NULL);
	return m;
}

static long mismatches;

/* Compare the index with libdwfl at addr; print the first differences. */
static void compare_at(struct symtab_index *x, Dwfl_Module *m, const char *path,
                       GElf_Addr addr)
{
	GElf_Off off;
	GElf_Sym sym;
	const char *want =
	        dwfl_module_addrinfo(m, addr, &off, &sym, NULL, NULL, NULL);
	const char *got = symtab_index_lookup(x, addr);

	if ((want == NULL) == (got == NULL) && (!want || !strcmp(want, got)))
		return;
	if (mismatches++ < 10)
		fprintf(stderr, "%s %#llx: index %s, libdwfl %s\n", path,
		        (unsigned long long)addr, got ? got : "(none)",
		        want ? want : "(none)");
}

/*
 * Every symbol's neighbourhood (start - 1 .. start + 1, middle, end - 1 ..
 * end + 1; every sym_stride-th symbol) and every stride-th address of the
 * allocated sections.  Returns the number of differences.
 */
static long compare_module(const char *path, int sym_stride, GElf_Addr stride)
{
	Dwfl *dwfl = NULL;
	Dwfl_Module *m = open_module(path, &dwfl);
	struct symtab_index *x = m ? symtab_index_new(m, 0) : NULL;

	mismatches = 0;
	CHECK(m != NULL);
	CHECK(x != NULL);
	if (!x) {
		dwfl_end(dwfl);
		return -1;
	}
	int n = dwfl_module_getsymtab(m);
	CHECK(n > 1);
	for (int i = 1; i < n; i += sym_stride) {
		GElf_Sym sym;
		GElf_Addr v;
		if (!dwfl_module_getsym_info(m, i, &sym, &v, NULL, NULL, NULL))
			continue;
		GElf_Addr end = v + sym.st_size;
		GElf_Addr at[] = {v - 1,   v,   v + 1,  v + sym.st_size / 2,
		                  end - 1, end, end + 1};
		for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++)
			compare_at(x, m, path, at[k]);
	}
	GElf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(m, &bias);
	for (Elf_Scn *scn = elf ? elf_nextscn(elf, NULL) : NULL; scn;
	     scn = elf_nextscn(elf, scn)) {
		GElf_Shdr mem;
		GElf_Shdr *sh = gelf_getshdr(scn, &mem);
		if (!sh || !(sh->sh_flags & SHF_ALLOC))
			continue;
		GElf_Addr lo = sh->sh_addr + bias, hi = lo + sh->sh_size;
		for (GElf_Addr a = lo; a < hi; a += stride)
			compare_at(x, m, path, a);
		compare_at(x, m, path, lo - 1);
		compare_at(x, m, path, hi);
	}
	symtab_index_free(x);
	dwfl_end(dwfl);
	return mismatches;
}

/* What the region's bytes must be named (by libdwfl's rules). */
static const char *region_name(unsigned off)
{
	if (off < 0x30)
		/* Globals first: a global containing the address keeps the
		 * nested local function out; the weak one may win or not,
		 * depending on the table order (compared, not fixed). */
		return off >= 0x18 && off < 0x20 ? "?" : "symtab_t_outer";
	if (off < 0x40)
		return "symtab_t_label"; /* nothing sized covers it */
	if (off < 0x50)
		return "symtab_t_obj"; /* no global: the locals count */
	if (off < 0x58)
		return "symtab_t_llabel";
	if (off < 0x60)
		return "symtab_t_glabel";
	if (off < 0x70)
		return "symtab_t_after";
	if (off < 0x78)
		return "symtab_t_tail";
	return NULL; /* tail's end is past every label below */
}

static void test_region(void)
{
	struct selfmod f = selfmod_find(symtab_t_outer);
	Dwfl *dwfl = NULL;

	CHECK(f.ok);
	Dwfl_Module *m = open_module(f.path, &dwfl);
	struct symtab_index *x = m ? symtab_index_new(m, 0) : NULL;
	CHECK(x != NULL);
	if (!x) {
		dwfl_end(dwfl);
		return;
	}
	GElf_Addr base = (uintptr_t)symtab_t_outer - f.base;
	mismatches = 0;
	for (unsigned off = 0; off < REGION_LEN; off++) {
		const char *got = symtab_index_lookup(x, base + off);
		const char *want = region_name(off);
		compare_at(x, m, f.path, base + off);
		if (want && !strcmp(want, "?"))
			continue;
		if ((want == NULL) != (got == NULL) ||
		    (want && strcmp(want, got))) {
			fprintf(stderr, "region +%#x: %s, want %s\n", off,
			        got ? got : "(none)", want ? want : "(none)");
			CHECK(0);
		}
	}
	CHECK_EQ_U64(mismatches, 0);
	symtab_index_free(x);
	dwfl_end(dwfl);
}

/* The names a profile gets (return address = offset + 1): the function
 * index first (innermost function), then the symtab index. */
static void test_symbolizer_region(void)
{
	struct selfmod f = selfmod_find(symtab_t_outer);
	struct symbolizer *s = symbolizer_new();
	static const struct {
		unsigned off;
		const char *name;
	} want[] = {
	        {0x00, "symtab_t_outer"},
	        {0x09, "symtab_t_inner"},
	        {0x18, "symtab_t_weak"},
	        {0x2f, "symtab_t_outer"},
	        {0x30, "symtab_t_label"},
	        {0x3f, "symtab_t_label"},
	        /* No data symbol names a frame: the object in .text is
	         * passed over for the label before it. */
	        {0x40, "symtab_t_label"},
	        {0x4f, "symtab_t_label"},
	        {0x50, "symtab_t_llabel"},
	        {0x58, "symtab_t_glabel"},
	        {0x5f, "symtab_t_glabel"},
	        {0x60, "symtab_t_after"},
	        {0x77, "symtab_t_tail"},
	        {0x78, NULL},
	        {0x7f, NULL},
	};

	CHECK(f.ok);
	GElf_Addr base = (uintptr_t)symtab_t_outer - f.base;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct sym_result r;
		CHECK(symbolizer_lookup(s, f.path, f.build_id, f.build_id_len,
		                        base + want[i].off + 1, &r) == 0);
		int ok = want[i].name ? r.name && !strcmp(r.name, want[i].name)
		                      : r.name == NULL;
		if (!ok)
			fprintf(stderr, "symbolizer +%#x: %s, want %s\n",
			        want[i].off, r.name ? r.name : "(none)",
			        want[i].name ? want[i].name : "(none)");
		CHECK(ok);
		sym_result_fini(&r);
	}
	symbolizer_free(s);
}

static void test_this_binary(void)
{
	struct selfmod f = selfmod_find(symtab_t_outer);
	CHECK(f.ok);
	CHECK_EQ_U64(compare_module(f.path, 1, 251), 0);
}

static void test_shared_libraries(void)
{
	/* libstdc++ (.dynsym only on Debian) and libc (with libc6-dbg, a
	 * .symtab from its debug file: locals and labels too). */
	const char *fns[] = {"_ZSt9terminatev", "malloc"};
	for (size_t i = 0; i < 2; i++) {
		/* libc's own malloc: under ASan the default one is
		 * libasan's (docs/safety/sanitizers.md). */
		void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
		/* libstdc++ is loaded here (heapprof does not link it)
		 * and stays loaded. */
		void *cxx = i == 0 ? dlopen("libstdc++.so.6", RTLD_NOW) : NULL;
		void *fn = i == 0 ? (cxx ? dlsym(cxx, fns[i]) : NULL)
		           : libc ? dlsym(libc, fns[i])
		                  : NULL;
		if (libc)
			dlclose(libc);
		CHECK(fn != NULL);
		if (!fn)
			continue;
		struct selfmod f = selfmod_find(fn);
		CHECK(f.ok);
		CHECK_EQ_U64(compare_module(f.path, 23, 16381), 0);
	}
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"region", test_region},
	        {"symbolizer_region", test_symbolizer_region},
	        {"this_binary", test_this_binary},
	        {"shared_libraries", test_shared_libraries},
	        {NULL, NULL},
	};
	return unit_main("symtab", tests);
}
