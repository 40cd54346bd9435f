/*
 * ELF reading for the injector: see inject/elf.h.  Bounds are checked
 * against the file's size everywhere: the file is the target's, not
 * trusted.
 */
#include "inject/elf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static bool in_file(const struct ielf *e, uint64_t off, uint64_t len)
{
	return off <= e->size && len <= e->size - off;
}

static void read_sections(struct ielf *e)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e->map;
	if (!eh->e_shoff || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_file(e, eh->e_shoff,
	             (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
		return;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(e->map + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *s = &sh[i];
		if (!in_file(e, s->sh_offset, s->sh_size))
			continue;
		if (s->sh_type == SHT_DYNSYM && s->sh_link < eh->e_shnum &&
		    in_file(e, sh[s->sh_link].sh_offset,
		            sh[s->sh_link].sh_size)) {
			e->dynsym = e->map + s->sh_offset;
			e->nsym = s->sh_size / sizeof(Elf64_Sym);
			e->dynstr =
			        (const char *)e->map + sh[s->sh_link].sh_offset;
			e->strsz = sh[s->sh_link].sh_size;
		} else if (s->sh_type == SHT_GNU_versym) {
			e->versym = (const uint16_t *)(e->map + s->sh_offset);
		} else if (s->sh_type == SHT_GNU_verdef) {
			e->verdef = e->map + s->sh_offset;
			e->verdef_size = s->sh_size;
			e->verdef_num = s->sh_info;
		}
	}
}

int ielf_open(const char *path, struct ielf *e, char *why, size_t len)
{
	memset(e, 0, sizeof(*e));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, len, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	struct stat sb;
	if (fstat(fd, &sb) < 0 || sb.st_size < (off_t)sizeof(Elf32_Ehdr)) {
		snprintf(why, len, "%s is no ELF file (too short)", path);
		close(fd);
		return -1;
	}
	void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		snprintf(why, len, "cannot map %s: %s", path, strerror(errno));
		return -1;
	}
	e->map = m;
	e->size = (size_t)sb.st_size;
	const unsigned char *id = e->map;
	if (memcmp(id, ELFMAG, SELFMAG) != 0) {
		snprintf(why, len, "%s is no ELF file", path);
		ielf_close(e);
		return -1;
	}
	e->cls = id[EI_CLASS];
	if (e->cls == ELFCLASS32) {
		const Elf32_Ehdr *eh = (const Elf32_Ehdr *)e->map;
		e->machine = eh->e_machine;
		e->type = eh->e_type;
		return 0;
	}
	if (e->cls != ELFCLASS64 || e->size < sizeof(Elf64_Ehdr)) {
		snprintf(why, len, "%s: unknown ELF class %d", path, e->cls);
		ielf_close(e);
		return -1;
	}
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e->map;
	e->machine = eh->e_machine;
	e->type = eh->e_type;
	bool first = true;
	if (eh->e_phentsize == sizeof(Elf64_Phdr) &&
	    in_file(e, eh->e_phoff,
	            (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr))) {
		const Elf64_Phdr *ph =
		        (const Elf64_Phdr *)(e->map + eh->e_phoff);
		for (unsigned i = 0; i < eh->e_phnum; i++) {
			if (ph[i].p_type == PT_INTERP)
				e->has_interp = true;
			if (ph[i].p_type == PT_LOAD && first) {
				e->load_min = ph[i].p_vaddr & ~(uint64_t)4095;
				first = false;
			}
		}
	}
	read_sections(e);
	return 0;
}

void ielf_close(struct ielf *e)
{
	if (e->map)
		munmap((void *)e->map, e->size);
	memset(e, 0, sizeof(*e));
}

static const char *sym_name(const struct ielf *e, const Elf64_Sym *s)
{
	if (s->st_name >= e->strsz)
		return "";
	/* NUL-terminated within the table: the last byte of a string table
	 * is a NUL; a file without it gives no match past its end. */
	if (!memchr(e->dynstr + s->st_name, '\0', e->strsz - s->st_name))
		return "";
	return e->dynstr + s->st_name;
}

static bool defined(const Elf64_Sym *s)
{
	return s->st_shndx != SHN_UNDEF && s->st_value != 0;
}

int ielf_sym(const struct ielf *e, const char *name, uint64_t *value,
             uint64_t *size, int *type)
{
	const Elf64_Sym *syms = e->dynsym;
	int found = -1;
	for (size_t i = 0; i < e->nsym; i++) {
		if (!defined(&syms[i]) || strcmp(sym_name(e, &syms[i]), name))
			continue;
		/* The hidden bit marks a version that is not the default
		 * (name@VERSION rather than name@@VERSION). */
		bool hidden = e->versym && (e->versym[i] & 0x8000);
		if (found < 0 || !hidden) {
			*value = syms[i].st_value;
			if (size)
				*size = syms[i].st_size;
			if (type)
				*type = ELF64_ST_TYPE(syms[i].st_info);
			found = 0;
			if (!hidden)
				break;
		}
	}
	return found;
}

int ielf_sym_each(const struct ielf *e, const char *name,
                  void (*fn)(void *ctx, uint64_t value, uint64_t size),
                  void *ctx)
{
	const Elf64_Sym *syms = e->dynsym;
	int n = 0;
	for (size_t i = 0; i < e->nsym; i++) {
		if (!defined(&syms[i]) || strcmp(sym_name(e, &syms[i]), name))
			continue;
		fn(ctx, syms[i].st_value, syms[i].st_size);
		n++;
	}
	return n;
}

bool ielf_has_version(const struct ielf *e, const char *name)
{
	const uint8_t *base = e->verdef;
	size_t off = 0;
	for (size_t i = 0; base && i < e->verdef_num; i++) {
		if (off > e->verdef_size ||
		    e->verdef_size - off < sizeof(Elf64_Verdef))
			return false;
		const Elf64_Verdef *vd = (const Elf64_Verdef *)(base + off);
		size_t aoff = off + vd->vd_aux;
		if (aoff <= e->verdef_size &&
		    e->verdef_size - aoff >= sizeof(Elf64_Verdaux)) {
			const Elf64_Verdaux *va =
			        (const Elf64_Verdaux *)(base + aoff);
			if (va->vda_name < e->strsz &&
			    !strncmp(e->dynstr + va->vda_name, name,
			             e->strsz - va->vda_name))
				return true;
		}
		if (!vd->vd_next)
			break;
		off += vd->vd_next;
	}
	return false;
}

int ielf_find_code(const struct ielf *e, const void *bytes, size_t len,
                   uint64_t *vaddr)
{
	if (e->cls != ELFCLASS64)
		return -1;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e->map;
	if (eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    !in_file(e, eh->e_phoff,
	             (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
		return -1;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(e->map + eh->e_phoff);
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) ||
		    !in_file(e, ph[i].p_offset, ph[i].p_filesz))
			continue;
		const uint8_t *seg = e->map + ph[i].p_offset;
		const uint8_t *hit = memmem(seg, ph[i].p_filesz, bytes, len);
		if (hit) {
			*vaddr = ph[i].p_vaddr + (uint64_t)(hit - seg);
			return 0;
		}
	}
	return -1;
}
