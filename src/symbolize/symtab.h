/*
 * The symbol dwfl_module_addrinfo names at an address, without its scan
 * of the whole symbol table on every call: elfutils weighs every symbol
 * of the module for each address (a stripped cc1 has 29,000 in .dynsym,
 * so each address it cannot name costs a millisecond).  An index built
 * once per module from the same symbols (dwfl_module_getsymtab and
 * dwfl_module_getsym_info: .symtab, a separate debug file's, .dynsym or
 * .gnu_debugdata, whichever libdwfl chose) gives the same answer by binary
 * search.
 *
 * "The same answer" is that of elfutils 0.158 and later, which weigh the
 * global symbols first and the local ones only if no global one fits (see
 * symtab.c); tests/unit/test_symtab.c compares the two on every address of
 * several modules.
 */
#ifndef HEAPPROF_SYMBOLIZE_SYMTAB_H
#define HEAPPROF_SYMBOLIZE_SYMTAB_H

#include <elfutils/libdwfl.h>

struct symtab_index; /* opaque */

/*
 * The index of mod's symbol table, or NULL if out of memory or a section
 * header cannot be read (then ask dwfl_module_addrinfo).  A module without
 * symbols gets an index that names nothing, as libdwfl would.
 *
 * code_only: only the symbols that can name code are weighed: functions
 * (STT_FUNC, STT_GNU_IFUNC) and labels (STT_NOTYPE) in a loaded,
 * executable section (or absolute functions), so that no data symbol
 * names a frame (the answer is then libdwfl's over those symbols alone).
 * 0: every symbol libdwfl weighs, for the exact comparison with it.
 */
struct symtab_index *symtab_index_new(Dwfl_Module *mod, int code_only);
void symtab_index_free(struct symtab_index *x);

/*
 * The name dwfl_module_addrinfo(mod, addr, ...) returns (addr: a module
 * address; with a module reported at base 0, an ELF virtual address), or
 * NULL.  The name is libdwfl's, valid while mod is.  Allocates nothing.
 */
const char *symtab_index_lookup(struct symtab_index *x, GElf_Addr addr);

#endif
