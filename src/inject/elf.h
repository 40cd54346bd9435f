/*
 * The on-disk ELF facts the injector needs (src/inject/inject.c): an
 * executable's class, machine and loader; a library's .dynsym (values,
 * sizes, versions) and bytes of its code.  The file is read whole with
 * mmap; nothing is cached.
 */
#ifndef HEAPPROF_INJECT_ELF_H
#define HEAPPROF_INJECT_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ielf {
	const uint8_t *map;
	size_t size;
	int cls;           /* ELFCLASS32 or ELFCLASS64 */
	int machine;       /* e_machine */
	int type;          /* e_type: ET_EXEC, ET_DYN */
	bool has_interp;   /* a PT_INTERP program header */
	uint64_t load_min; /* the first PT_LOAD's p_vaddr, page aligned */
	/* 64-bit files only: */
	const void *dynsym; /* Elf64_Sym[nsym] */
	size_t nsym;
	const char *dynstr;
	size_t strsz;
	const uint16_t *versym; /* [nsym] or NULL */
	const void *verdef;     /* SHT_GNU_verdef or NULL */
	size_t verdef_size, verdef_num;
};

/* Maps path and reads its headers.  -1 with why (len bytes) if it cannot
 * be opened or is no ELF file. */
int ielf_open(const char *path, struct ielf *e, char *why, size_t len);
void ielf_close(struct ielf *e);

/* The defined symbol name of the default version (or the only one):
 * its value (an address relative to the load bias), size and type
 * (STT_FUNC, STT_GNU_IFUNC: the value is then its resolver's); size and
 * type may be NULL.  -1 if there is none. */
int ielf_sym(const struct ielf *e, const char *name, uint64_t *value,
             uint64_t *size, int *type);
/* Every defined symbol called name, whatever its version: fn(ctx, value,
 * size) for each.  Returns how many. */
int ielf_sym_each(const struct ielf *e, const char *name,
                  void (*fn)(void *ctx, uint64_t value, uint64_t size),
                  void *ctx);
/* Whether the file defines the version name (e.g. "GLIBC_2.34"). */
bool ielf_has_version(const struct ielf *e, const char *name);
/* The first occurrence of bytes in an executable PT_LOAD segment, as a
 * virtual address (relative to the load bias); -1 if none. */
int ielf_find_code(const struct ielf *e, const void *bytes, size_t len,
                   uint64_t *vaddr);

#endif
