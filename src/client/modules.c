/*
 * Loaded modules, recorded into the region so the collector can map every
 * PC to a file and build ID without asking the target, even after it has
 * exited.  One record per executable PT_LOAD segment.  A full scan runs at
 * attach; a new stack that holds a PC outside every known module (a
 * library was loaded since) adds the object holding it, found without the
 * loader's lock (add_object_of).  Writers are serialized by a trylock: a
 * thread that finds another one adding simply goes on.
 *
 * A region attached late (from the attach signal's handler, where
 * dl_iterate_phdr may not run) or after fork starts with an empty module
 * table: its first new stack finds no module for its PCs and scans.  The
 * load counter is remembered per region, so a new region is always
 * scanned in full.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "client/client.h"

/* An atomic flag, not a mutex: a forked child can reset it (a scan that
 * another thread of the parent was running is gone with that thread). */
static _Atomic int scanning;
static unsigned long long last_adds = ~0ull;
static const void *last_base; /* region the last scan went into */
static uint64_t scan_generation;
static char exe_path[1024];
static size_t exe_path_len;

/*
 * The main program's name as it was started: the path execve was given
 * (AT_EXECFN), made absolute with the current directory, when it is the
 * same file as /proc/self/exe.  /proc/self/exe and the loader name the
 * file a symbolic link resolves to: Debian's redis-server is a link to
 * redis-check-rdb, and its frames were named after that.  (The collector
 * keeps the resolved path too: stack_profile_mapping.resolved_name.)  A
 * name that no longer is that file (the program changed directory before
 * a late attach, or renamed itself), or a name under /proc or /dev/fd,
 * leaves exe_path as it is.
 */
static void exe_started_as(void)
{
	const char *fn = (const char *)getauxval(AT_EXECFN);
	char buf[sizeof(exe_path)];
	size_t len = 0;
	if (!fn || !fn[0])
		return;
	if (fn[0] != '/') {
		/* The raw system call: the length with its NUL, or < 0. */
		long n = syscall(SYS_getcwd, buf, sizeof(buf));
		if (n <= 1 || buf[0] != '/')
			return;
		len = (size_t)n - 1;
		while (fn[0] == '.' && fn[1] == '/') {
			fn += 2;
			while (fn[0] == '/')
				fn++;
		}
		if (len > 1)
			buf[len++] = '/';
	}
	size_t flen = strlen(fn);
	if (len + flen >= sizeof(buf))
		return;
	memcpy(buf + len, fn, flen + 1);
	/* Not a name of /proc's (a program that execs /proc/self/exe) or of
	 * a descriptor's (fexecve): it would name another file later. */
	if (strstr(buf, "/proc/") || strstr(buf, "/dev/fd/"))
		return;
	struct stat named, exe;
	if (stat(buf, &named) != 0 || stat(exe_path, &exe) != 0 ||
	    named.st_dev != exe.st_dev || named.st_ino != exe.st_ino)
		return;
	memcpy(exe_path, buf, len + flen + 1);
	exe_path_len = len + flen;
}

/* Async-signal-safe (readlink, getcwd, stat): also called when attaching
 * from the attach signal's handler. */
void modules_init(void)
{
	if (exe_path_len)
		return;
	ssize_t n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
	if (n > 0) {
		exe_path[n] = '\0';
		exe_path_len = (size_t)n;
		exe_started_as();
	}
}

void modules_reset_after_fork(void)
{
	atomic_store_explicit(&scanning, 0, memory_order_relaxed);
	last_adds = ~0ull;
	last_base = NULL;
}

static uint32_t find_build_id(const struct dl_phdr_info *info, uint8_t *out)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p =
		        (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			size_t namesz = (nh->n_namesz + 3u) & ~3u;
			size_t descsz = (nh->n_descsz + 3u) & ~3u;
			const uint8_t *name = p + sizeof(*nh);
			const uint8_t *desc = name + namesz;
			if (desc + descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID &&
			    nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
				uint32_t len = nh->n_descsz;
				if (len > HP_BUILD_ID_MAX)
					len = HP_BUILD_ID_MAX;
				memcpy(out, desc, len);
				return len;
			}
			p = desc + descsz;
		}
	}
	return 0;
}

static bool known(struct hp_region *r, uint64_t start, uint64_t base)
{
	uint64_t used = atomic_load_explicit(&r->hdr->modules_used,
	                                     memory_order_acquire);
	for (uint64_t i = 0; i < used && i < r->modules_cap; i++)
		if (r->modules[i].start == start && r->modules[i].base == base)
			return true;
	return false;
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct hp_region *r = arg;
	long page = sysconf(_SC_PAGESIZE);
	const char *path = info->dlpi_name;
	size_t path_len = strlen(path);
	if (path_len == 0) {
		path = exe_path;
		path_len = exe_path_len;
	}
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uint64_t vaddr = ph->p_vaddr & ~(uint64_t)(page - 1);
		uint64_t off = ph->p_offset & ~(uint64_t)(page - 1);
		uint64_t start = info->dlpi_addr + vaddr;
		uint64_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz +
		                page - 1) &
		               ~(uint64_t)(page - 1);
		if (known(r, start, info->dlpi_addr))
			continue;
		uint64_t idx = atomic_load_explicit(&r->hdr->modules_used,
		                                    memory_order_relaxed);
		if (idx >= r->modules_cap) {
			region_count(r, HP_CTR_MODULE_FULL, 1);
			continue;
		}
		struct hp_module_v1 *m = &r->modules[idx];
		m->path_off = strtab_append(r, path, path_len);
		m->start = start;
		m->end = end;
		m->base = info->dlpi_addr;
		m->load_bias = vaddr - off;
		m->exact_offset = off;
		m->generation = scan_generation;
		m->build_id_len = find_build_id(info, m->build_id);
		atomic_store_explicit(&m->ready, 1, memory_order_release);
		atomic_store_explicit(&r->hdr->modules_used, idx + 1,
		                      memory_order_release);
	}
	return 0;
}

static int peek_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1; /* the first object is enough */
}

void modules_scan(struct hp_region *r)
{
	int expect = 0;
	if (!atomic_compare_exchange_strong_explicit(&scanning, &expect, 1,
	                                             memory_order_acquire,
	                                             memory_order_relaxed))
		return;
	unsigned long long adds = 0;
	dl_iterate_phdr(peek_adds, &adds);
	if (adds != last_adds || r->base != last_base) {
		last_adds = adds;
		last_base = r->base;
		scan_generation++;
		dl_iterate_phdr(scan_one, r);
	}
	atomic_store_explicit(&scanning, 0, memory_order_release);
}

/*
 * The object holding pc, added without the loader's lock: a new stack is
 * recorded inside the program's allocation, where dl_iterate_phdr (which
 * takes it) could deadlock against a thread that holds it and waits for
 * a lock the allocating thread holds.  _dl_find_object (glibc 2.35) is
 * lock-free and async-signal-safe; the object's program headers are read
 * from its first page in memory, where its ELF header is mapped.  0: added
 * (or already there), 1: pc is in no object, -1: the object's first page
 * holds no ELF header (the caller scans with the lock).  The caller holds
 * `scanning`.
 */
static int add_object_of(struct hp_region *r, uint64_t pc)
{
	struct dl_find_object fo;
	if (_dl_find_object((void *)(uintptr_t)(pc - 1), &fo) != 0 ||
	    !fo.dlfo_link_map)
		return 1;
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)fo.dlfo_map_start;
	uintptr_t lo = (uintptr_t)fo.dlfo_map_start;
	uintptr_t hi = (uintptr_t)fo.dlfo_map_end;
	/* Only the first page is read: it is mapped (the object's first
	 * segment starts there), where the mapping further on may have
	 * holes.  Linkers put the program headers right after the ELF
	 * header. */
	if (hi - lo < 4096 || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phnum == 0 ||
	    eh->e_phoff > 4096 ||
	    (uintptr_t)eh->e_phnum * sizeof(ElfW(Phdr)) > 4096 - eh->e_phoff)
		return -1;
	const struct link_map *lm = fo.dlfo_link_map;
	struct dl_phdr_info info = {
	        .dlpi_addr = lm->l_addr,
	        .dlpi_name = lm->l_name ? lm->l_name : "",
	        .dlpi_phdr = (const ElfW(Phdr) *)(lo + eh->e_phoff),
	        .dlpi_phnum = eh->e_phnum,
	};
	scan_generation++;
	scan_one(&info, sizeof(info), r);
	return 0;
}

static bool in_table(const struct hp_region *r, uint64_t pc)
{
	uint64_t used = atomic_load_explicit(&r->hdr->modules_used,
	                                     memory_order_acquire);
	if (used > r->modules_cap)
		used = r->modules_cap;
	for (uint64_t j = 0; j < used; j++)
		if (pc >= r->modules[j].start && pc < r->modules[j].end)
			return true;
	return false;
}

void modules_check(struct hp_region *r, const uint64_t *pcs, uint32_t n)
{
	bool held = false;
	for (uint32_t i = 0; i < n; i++) {
		if (in_table(r, pcs[i]))
			continue;
		if (!held) {
			int expect = 0;
			if (!atomic_compare_exchange_strong_explicit(
			            &scanning, &expect, 1, memory_order_acquire,
			            memory_order_relaxed))
				return; /* another thread is adding */
			held = true;
		}
		if (add_object_of(r, pcs[i]) < 0) {
			/* Rare: an object whose first page is no ELF
			 * header.  The scan under the loader's lock, as
			 * at attach. */
			atomic_store_explicit(&scanning, 0,
			                      memory_order_release);
			modules_scan(r);
			return;
		}
	}
	if (held)
		atomic_store_explicit(&scanning, 0, memory_order_release);
}

struct range_query {
	uintptr_t addr, lo, hi;
	bool found;
};

static int range_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct range_query *q = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		uintptr_t hi = lo + ph->p_memsz;
		if (q->addr >= lo && q->addr < hi) {
			q->lo = lo;
			q->hi = hi;
			q->found = true;
			return 1;
		}
	}
	return 0;
}

bool modules_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
	struct range_query q = {.addr = (uintptr_t)addr};
	dl_iterate_phdr(range_one, &q);
	*lo = q.found ? q.lo : 0;
	*hi = q.found ? q.hi : 0;
	return q.found;
}
