/*
 * Finding module files by build ID for offline symbolization (see
 * locate.h).  Build IDs are read with libelf/libdwelf; debuginfod is asked
 * through libdebuginfod, loaded when first needed.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/locate.h"
#include "symbolize/symbolize.h"
#include "util/err.h"
#include "util/hmap.h"

#define SUBSYS "symbolize"

/* One indexed file: the best file seen for a build ID. */
struct index_entry {
	char *path;
	int quality; /* 2: has DWARF, 1: has .symtab, 0: neither */
};

struct sym_locator {
	char **dirs; /* absolute */
	size_t ndirs;
	int index_mode;
	int debuginfod;
	debuginfod_client *dbgd;
	int dbgd_failed;
	/* Index mode, built on first use. */
	int indexed;
	struct hmap index; /* build ID hex -> index into entries */
	struct index_entry *entries;
	size_t nentries, capentries;
	struct hmap visited; /* (dev, ino) of directories walked */
	size_t examined;
	int index_truncated;
};

/*
 * libdebuginfod, loaded the first time a lookup asks debuginfod.  Linked,
 * it brought about 30 more libraries (curl, TLS, Kerberos, LDAP) into the
 * start of every heapprof command, record included: 4 of the 7 ms that
 * `heapprof --version` took.  NULL when it cannot be loaded.
 */
struct dbgd_api {
	debuginfod_client *(*begin)(void);
	void (*end)(debuginfod_client *);
	int (*find_executable)(debuginfod_client *, const unsigned char *, int,
	                       char **);
	int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int,
	                      char **);
};

static const struct dbgd_api *dbgd_api(void)
{
	static struct dbgd_api api;
	static int state; /* 0: not tried, 1: loaded, -1: not there */
	if (state == 0) {
		void *h = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
		state = -1;
		if (h) {
			*(void **)&api.begin = dlsym(h, "debuginfod_begin");
			*(void **)&api.end = dlsym(h, "debuginfod_end");
			*(void **)&api.find_executable =
			        dlsym(h, "debuginfod_find_executable");
			*(void **)&api.find_debuginfo =
			        dlsym(h, "debuginfod_find_debuginfo");
			if (api.begin && api.end && api.find_executable &&
			    api.find_debuginfo)
				state = 1;
		}
	}
	return state > 0 ? &api : NULL;
}

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a);
	/* "dir/" + "/x" and "dir" + "x" both give "dir/x". */
	while (la > 1 && a[la - 1] == '/')
		la--;
	while (*b == '/')
		b++;
	size_t lb = strlen(b);
	char *out = malloc(la + 1 + lb + 1);
	if (!out)
		return NULL;
	memcpy(out, a, la);
	out[la] = '/';
	memcpy(out + la + 1, b, lb + 1);
	return out;
}

/* Absolute form of a directory; a copy of dir if it cannot be resolved. */
static char *absolute_dir(const char *dir)
{
	char *r = realpath(dir, NULL);
	if (r || errno == ENOMEM)
		return r;
	if (dir[0] == '/')
		return strdup(dir);
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd)))
		return strdup(dir);
	return join(cwd, dir);
}

struct sym_locator *locator_new(const char *binary_path, int index,
                                int debuginfod)
{
	struct sym_locator *l = calloc(1, sizeof(*l));

	if (!l)
		goto oom;
	hmap_init(&l->index);
	hmap_init(&l->visited);
	l->index_mode = index;
	l->debuginfod = debuginfod;
	elf_version(EV_CURRENT);
	const char *p = binary_path ? binary_path : "";
	while (*p) {
		const char *end = strchrnul(p, ':');
		if (end > p) {
			char *dir = strndup(p, (size_t)(end - p));
			char **dirs = realloc(l->dirs,
			                      (l->ndirs + 1) * sizeof(*dirs));
			char *abs = dir ? absolute_dir(dir) : NULL;
			free(dir);
			if (dirs)
				l->dirs = dirs;
			if (!dirs || !abs) {
				free(abs);
				locator_free(l);
				goto oom;
			}
			l->dirs[l->ndirs++] = abs;
		}
		p = *end ? end + 1 : end;
	}
	return l;
oom:
	hp_err(SUBSYS, "out of memory");
	return NULL;
}

void locator_free(struct sym_locator *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->ndirs; i++)
		free(l->dirs[i]);
	free(l->dirs);
	for (size_t i = 0; i < l->nentries; i++)
		free(l->entries[i].path);
	free(l->entries);
	hmap_free(&l->index);
	hmap_free(&l->visited);
	if (l->dbgd)
		dbgd_api()->end(l->dbgd); /* made by it */
	free(l);
}

size_t locator_ndirs(const struct sym_locator *l)
{
	/* Its caller (symbolize/offline.c) checks for NULL first; cppcheck's
	 * whole-program pass misses that. */
	// cppcheck-suppress ctunullpointer
	return l->ndirs;
}

const char *locator_dir(const struct sym_locator *l, size_t i)
{
	return i < l->ndirs ? l->dirs[i] : NULL;
}

void locate_result_fini(struct locate_result *r)
{
	free(r->file);
	free(r->other);
	free(r->other_build_id);
	memset(r, 0, sizeof(*r));
}

/* ---- candidates --------------------------------------------------------- */

#define APK_PREFIX "base.apk!"

/* s with the first "base.apk!" in its last component removed; NULL if
 * there is none (or out of memory: *oom set). */
static char *without_apk(const char *s, int *oom)
{
	const char *base = strrchr(s, '/');
	base = base ? base + 1 : s;
	const char *at = strstr(base, APK_PREFIX);
	if (!at)
		return NULL;
	size_t before = (size_t)(at - s), plen = strlen(APK_PREFIX);
	size_t after = strlen(at + plen);
	char *out = malloc(before + after + 1);
	if (!out) {
		*oom = 1;
		return NULL;
	}
	memcpy(out, s, before);
	memcpy(out + before, at + plen, after + 1);
	return out;
}

static int add_candidate(char *out[], int *n, char *c)
{
	if (!c)
		return -ENOMEM;
	for (int i = 0; i < *n; i++) {
		if (!strcmp(out[i], c)) {
			free(c);
			return 0;
		}
	}
	out[(*n)++] = c;
	return 0;
}

int locate_candidates(const char *dir, const char *path, const char *hex,
                      char *out[LOCATE_MAX_CANDIDATES])
{
	int n = 0, oom = 0, err = 0;
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;

	char *noapk = without_apk(path, &oom);
	char *base_noapk = without_apk(base, &oom);
	if (oom)
		err = -ENOMEM;
	if (!err && path[0])
		err = add_candidate(out, &n, join(dir, path));
	if (!err && noapk)
		err = add_candidate(out, &n, join(dir, noapk));
	if (!err && base[0])
		err = add_candidate(out, &n, join(dir, base));
	if (!err && base_noapk && base_noapk[0])
		err = add_candidate(out, &n, join(dir, base_noapk));
	if (!err && hex && strlen(hex) > 2) {
		char *rel = malloc(strlen(hex) + 32);
		if (rel)
			sprintf(rel, ".build-id/%.2s/%s.debug", hex, hex + 2);
		err = add_candidate(out, &n, rel ? join(dir, rel) : NULL);
		free(rel);
	}
	free(noapk);
	free(base_noapk);
	if (err) {
		for (int i = 0; i < n; i++)
			free(out[i]);
		return err;
	}
	return n;
}

/* ---- build IDs ---------------------------------------------------------- */

int locate_build_id_matches(const char *want, const char *file)
{
	if (!want || !file || !want[0])
		return 0;
	if (!strcmp(want, file))
		return 1;
	size_t lw = strlen(want);
	return lw == 64 && strlen(file) > lw && !strncmp(want, file, lw);
}

int locate_hex_bytes(const char *hex, uint8_t *out, size_t max)
{
	size_t len = strlen(hex);
	if (len % 2 || len / 2 > max)
		return -1;
	for (size_t i = 0; i < len / 2; i++) {
		unsigned v = 0;
		for (int k = 0; k < 2; k++) {
			char c = hex[2 * i + (size_t)k];
			unsigned d;
			if (c >= '0' && c <= '9')
				d = (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'f')
				d = (unsigned)(c - 'a' + 10);
			else if (c >= 'A' && c <= 'F')
				d = (unsigned)(c - 'A' + 10);
			else
				return -1;
			v = v * 16 + d;
		}
		out[i] = (uint8_t)v;
	}
	return (int)(len / 2);
}

/* Does the ELF have DWARF (2) or a symbol table (1)? */
static int elf_quality(Elf *elf)
{
	size_t shstrndx;
	int q = 0;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return 0;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn;
	     scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (!strcmp(name, ".debug_info") ||
		    !strcmp(name, ".zdebug_info"))
			return 2;
		if (sh.sh_type == SHT_SYMTAB)
			q = 1;
	}
	return q;
}

/* Build ID and quality of an ELF file; see locate_file_build_id. */
static int file_build_id(const char *path, char **hex, int *quality)
{
	*hex = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -ENOEXEC;
	struct stat sb;
	unsigned char magic[4];
	int err = 0;
	if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		close(fd); /* a directory is no file: as if missing */
		return -ENOENT;
	}
	if (!S_ISREG(sb.st_mode) || pread(fd, magic, 4, 0) != 4 ||
	    memcmp(magic, ELFMAG, SELFMAG)) {
		close(fd);
		return -ENOEXEC;
	}
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
	} else {
		const void *id = NULL;
		ssize_t len = dwelf_elf_gnu_build_id(elf, &id);
		if (len > 0) {
			*hex = malloc(2 * (size_t)len + 1);
			if (*hex)
				symbolize_hex(*hex, id, (size_t)len);
			else
				err = -ENOMEM;
		}
		if (quality)
			*quality = elf_quality(elf);
	}
	elf_end(elf);
	close(fd);
	return err;
}

int locate_file_build_id(const char *path, char **hex)
{
	return file_build_id(path, hex, NULL);
}

/* ---- index mode --------------------------------------------------------- */

static int index_add(struct sym_locator *l, const char *path, const char *hex,
                     int quality)
{
	int64_t *found = hmap_find(&l->index, hex, strlen(hex));
	if (found) {
		struct index_entry *e = &l->entries[*found];
		if (quality <= e->quality)
			return 0;
		char *p = strdup(path);
		if (!p)
			return -ENOMEM;
		free(e->path);
		e->path = p;
		e->quality = quality;
		return 0;
	}
	if (l->nentries == l->capentries) {
		size_t cap = l->capentries ? 2 * l->capentries : 64;
		struct index_entry *a = realloc(l->entries, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		l->entries = a;
		l->capentries = cap;
	}
	char *p = strdup(path);
	if (!p ||
	    hmap_put(&l->index, hex, strlen(hex), (int64_t)l->nentries) < 0) {
		free(p);
		return -ENOMEM;
	}
	l->entries[l->nentries].path = p;
	l->entries[l->nentries].quality = quality;
	l->nentries++;
	return 0;
}

/*
 * Index the ELF files below dir (depth: how deep dir is).  Symbolic links
 * are followed, but each directory (device, inode) is walked only once,
 * so links cannot loop.  0 or -ENOMEM.
 */
static int index_walk(struct sym_locator *l, const char *dir, int depth)
{
	struct stat sb;
	if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return 0;
	uint64_t key[2] = {(uint64_t)sb.st_dev, (uint64_t)sb.st_ino};
	if (hmap_find(&l->visited, key, sizeof(key)))
		return 0;
	if (hmap_put(&l->visited, key, sizeof(key), 1) < 0)
		return -ENOMEM;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int err = 0;
	struct dirent *de;
	while (!err && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++l->examined > LOCATE_INDEX_MAX_ENTRIES) {
			l->index_truncated = 1;
			break;
		}
		char *path = join(dir, de->d_name);
		if (!path) {
			err = -ENOMEM;
			break;
		}
		if (stat(path, &sb) == 0) {
			if (S_ISDIR(sb.st_mode)) {
				if (depth < LOCATE_INDEX_MAX_DEPTH)
					err = index_walk(l, path, depth + 1);
				else
					l->index_truncated = 1;
			} else if (S_ISREG(sb.st_mode) &&
			           sb.st_size >= (off_t)sizeof(Elf32_Ehdr)) {
				char *hex = NULL;
				int q = 0;
				int rc = file_build_id(path, &hex, &q);
				if (rc == -ENOMEM)
					err = rc;
				else if (hex)
					err = index_add(l, path, hex, q);
				free(hex);
			}
		}
		free(path);
	}
	closedir(d);
	return err;
}

static int index_build(struct sym_locator *l)
{
	int err = 0;

	if (l->indexed)
		return 0;
	for (size_t i = 0; !err && i < l->ndirs; i++)
		err = index_walk(l, l->dirs[i], 0);
	if (err)
		return err;
	l->indexed = 1;
	if (l->index_truncated)
		hp_err(SUBSYS,
		       "index: stopped after %d directory levels or %d "
		       "entries; some files were not indexed",
		       LOCATE_INDEX_MAX_DEPTH, LOCATE_INDEX_MAX_ENTRIES);
	return 0;
}

/* The index entry for want: exact, or a longer ID want is a prefix of. */
static const struct index_entry *index_lookup(struct sym_locator *l,
                                              const char *want)
{
	int64_t *found = hmap_find(&l->index, want, strlen(want));
	if (found)
		return &l->entries[*found];
	if (strlen(want) != 64)
		return NULL;
	for (size_t i = 0; i < l->nentries; i++) {
		char *hex = NULL;
		if (file_build_id(l->entries[i].path, &hex, NULL) == 0 &&
		    locate_build_id_matches(want, hex)) {
			free(hex);
			return &l->entries[i];
		}
		free(hex);
	}
	return NULL;
}

/* ---- lookup ------------------------------------------------------------- */

/*
 * Try one file: 1 if it has build ID want (r->file set), 0 if not (the
 * first such file is kept in r->other), -ENOMEM.
 */
static int try_file(const char *path, const char *want, const char *how,
                    struct locate_result *r)
{
	char *hex = NULL;
	int rc = locate_file_build_id(path, &hex);

	if (rc == -ENOMEM)
		return rc;
	if (rc == -ENOENT)
		return 0;
	if (rc == 0 && locate_build_id_matches(want, hex)) {
		free(hex);
		r->file = realpath(path, NULL);
		if (!r->file)
			r->file = strdup(path);
		if (!r->file)
			return -ENOMEM;
		r->how = how;
		return 1;
	}
	if (!r->other) {
		r->other = strdup(path);
		r->other_build_id = hex;
		hex = NULL;
		if (!r->other)
			return -ENOMEM;
	}
	free(hex);
	return 0;
}

static int try_debuginfod(struct sym_locator *l, const char *want,
                          struct locate_result *r)
{
	const struct dbgd_api *api = dbgd_api();
	if (!l->dbgd && !l->dbgd_failed) {
		l->dbgd = api ? api->begin() : NULL;
		l->dbgd_failed = !l->dbgd;
	}
	if (!l->dbgd)
		return 0;
	/* The executable, else its debug file (DWARF and symbols suffice). */
	for (int kind = 0; kind < 2; kind++) {
		char *path = NULL;
		/* Length 0: the build ID is given as a hex string. */
		int fd = kind == 0
		                 ? api->find_executable(
		                           l->dbgd, (const unsigned char *)want,
		                           0, &path)
		                 : api->find_debuginfo(
		                           l->dbgd, (const unsigned char *)want,
		                           0, &path);
		if (fd >= 0)
			close(fd);
		int rc = fd >= 0 && path ? try_file(path, want, "debuginfod", r)
		                         : 0;
		free(path);
		if (rc)
			return rc;
	}
	return 0;
}

int locator_find(struct sym_locator *l, const char *path, const char *hex,
                 struct locate_result *r)
{
	int rc = 0;

	memset(r, 0, sizeof(*r));
	if (!hex || !hex[0])
		return 0;
	if (l->ndirs && l->index_mode) {
		rc = index_build(l);
		if (rc)
			return rc;
		const struct index_entry *e = index_lookup(l, hex);
		if (e) {
			r->file = strdup(e->path);
			r->how = "index";
			return r->file ? 0 : -ENOMEM;
		}
		return 0;
	}
	for (size_t i = 0; rc == 0 && i < l->ndirs; i++) {
		char *cand[LOCATE_MAX_CANDIDATES];
		int n = locate_candidates(l->dirs[i], path, hex, cand);
		if (n < 0)
			return n;
		for (int k = 0; k < n; k++) {
			if (rc == 0)
				rc = try_file(cand[k], hex, "binary path", r);
			free(cand[k]);
		}
	}
	if (l->ndirs)
		return rc < 0 ? rc : 0;
	if (path[0] == '/')
		rc = try_file(path, hex, "original path", r);
	if (rc == 0 && l->debuginfod)
		rc = try_debuginfod(l, hex, r);
	return rc < 0 ? rc : 0;
}
