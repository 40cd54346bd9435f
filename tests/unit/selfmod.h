/*
 * Test helper: find the loaded module holding an address (path, load base,
 * GNU build ID read from its notes in memory), as the client records it.
 */
#ifndef HEAPPROF_TEST_SELFMOD_H
#define HEAPPROF_TEST_SELFMOD_H

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct selfmod {
	uintptr_t addr; /* in */
	char path[4096];
	uint64_t base, start, end; /* end/start: the PT_LOAD holding addr */
	uint8_t build_id[64];
	size_t build_id_len;
	int ok;
};

static void selfmod_build_id(struct dl_phdr_info *info, struct selfmod *f)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p =
		        (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const uint8_t *name = p + sizeof(*n);
			const uint8_t *desc = name + ((n->n_namesz + 3) & ~3u);
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4) && n->n_descsz <= 64) {
				memcpy(f->build_id, desc, n->n_descsz);
				f->build_id_len = n->n_descsz;
				return;
			}
			p = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
}

static int selfmod_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct selfmod *f = arg;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type != PT_LOAD || f->addr < lo ||
		    f->addr >= lo + ph->p_memsz)
			continue;
		f->base = info->dlpi_addr;
		f->start = lo;
		f->end = lo + ph->p_memsz;
		if (info->dlpi_name && info->dlpi_name[0]) {
			snprintf(f->path, sizeof(f->path), "%s",
			         info->dlpi_name);
		} else {
			ssize_t n = readlink("/proc/self/exe", f->path,
			                     sizeof(f->path) - 1);
			f->path[n > 0 ? n : 0] = '\0';
		}
		selfmod_build_id(info, f);
		f->ok = 1;
		return 1;
	}
	return 0;
}

static inline struct selfmod selfmod_find(const void *addr)
{
	struct selfmod f;

	memset(&f, 0, sizeof(f));
	f.addr = (uintptr_t)addr;
	dl_iterate_phdr(selfmod_cb, &f);
	return f;
}

#endif
