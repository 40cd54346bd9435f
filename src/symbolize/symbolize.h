/*
 * Symbolization: function names from the ELF symbol tables (.symtab, else
 * .dynsym, or a separate debug file found by build ID) of the modules a
 * profiled process had loaded, demangled for C++ (online, at dump time);
 * and source files, lines and inlined functions from DWARF (offline, for
 * `heapprof symbolize`, see symbolize_source and locate.h).
 *
 * A module file is used only if its GNU build ID equals the one the client
 * recorded, so a library rebuilt or upgraded since the recording never
 * yields a wrong name: the name is left unknown instead.  Each module file
 * is opened at most once per symbolizer.
 */
#ifndef HEAPPROF_SYMBOLIZE_H
#define HEAPPROF_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

struct symbolizer; /* opaque; owns one Dwfl per module file */

/* A resolved symbol.  Both strings are malloc'd; sym_result_fini frees. */
struct sym_result {
	char *name; /* demangled (or the plain C name); NULL if unknown */
	char *system_name; /* as in the symbol table (mangled); NULL if unknown
	                    */
};

/* New symbolizer, or NULL if out of memory. */
struct symbolizer *symbolizer_new(void);
void symbolizer_free(struct symbolizer *s);

/*
 * Look up the function containing the return address rel_pc of the module
 * at path (rel_pc is an ELF virtual address: pc - load base).  The
 * instruction at rel_pc - 1 is looked up, since a return address may be the
 * first byte of the next function.
 *
 * build_id/build_id_len: as recorded by the client (len 0: none recorded;
 * then the file must have none either).  Missing or mismatching files,
 * non-absolute paths ("[vdso]", "") and addresses with no symbol leave both
 * names NULL and return 0.  Returns -ENOMEM on allocation failure.
 */
int symbolizer_lookup(struct symbolizer *s, const char *path,
                      const uint8_t *build_id, size_t build_id_len,
                      uint64_t rel_pc, struct sym_result *out);

void sym_result_fini(struct sym_result *r);

/*
 * Where separate debug files are looked for, in libdwfl's debuginfo_path
 * syntax (see dwfl_standard_find_debuginfo: "-:.debug:/usr/lib/debug" is
 * the default): .gnu_debuglink names and .build-id/xx/yyyy.debug under
 * every absolute directory.  Applies to modules opened afterwards.
 * 0 or -ENOMEM.
 */
int symbolizer_set_debuginfo_path(struct symbolizer *s, const char *path);

/* One source-level function at an address. */
struct sym_source {
	char *name;        /* demangled; NULL if unknown */
	char *source_file; /* NULL if unknown */
	int64_t line;      /* 0 if unknown */
};

/*
 * Whether the module file at path (build ID as for symbolizer_lookup) has
 * DWARF, its own or from a separate debug file: 1 yes, 0 no, -1 if the file
 * is missing, unreadable or has another build ID.
 */
int symbolizer_has_dwarf(struct symbolizer *s, const char *path,
                         const uint8_t *build_id, size_t build_id_len);

/*
 * The source-level functions at return address rel_pc (looked up at
 * rel_pc - 1) of the module file at path, from its DWARF: the innermost
 * inlined function first, each with the file and line being executed in
 * it (for an inlined function's caller: the call site, DW_AT_call_file and
 * DW_AT_call_line), and the function it was all inlined into last.
 * *out gets a malloc'd array of *n entries (free with sym_source_free);
 * NULL and 0 when the file, its build ID or its DWARF does not cover the
 * address.  Returns 0 or -ENOMEM.
 */
int symbolizer_lookup_source(struct symbolizer *s, const char *path,
                             const uint8_t *build_id, size_t build_id_len,
                             uint64_t rel_pc, struct sym_source **out,
                             size_t *n);

void sym_source_free(struct sym_source *v, size_t n);

/*
 * Demangle a C++ (Itanium ABI) symbol name.  Returns a malloc'd string, or
 * NULL if name is not a mangled name (or out of memory).
 */
char *symbolize_demangle(const char *name);

/* Lowercase hex of a build ID into buf (2*len+1 bytes).  Returns buf. */
char *symbolize_hex(char *buf, const uint8_t *id, size_t len);

#endif
