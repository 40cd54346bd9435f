/*
 * Offline symbolization of a profile (`heapprof symbolize`,
 * docs/SYMBOLIZE.md).  For every module with frames in the profile, find a
 * file with the recorded GNU build ID (locate.h), and write the source
 * file, line and inline chain of each of its frames into
 * stack_profile_symbol (innermost inlined function first), pointing
 * stack_profile_frame.symbol_set_id at them, and name the frames recorded
 * without a name.
 *
 * Everything happens in one transaction: on any error the profile is left
 * as it was.  Frames of a module found with DWARF get their previous
 * symbols replaced, so running it again gives the same rows; frames of
 * modules not found (or without DWARF) keep theirs.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/symbols.h"
#include "symbolize/locate.h"
#include "symbolize/offline.h"
#include "symbolize/symbolize.h"
#include "util/err.h"
#include "util/hmap.h"

#define SUBSYS "symbolize"

/* Longest recorded build ID we take (the client keeps 32 bytes). */
#define MAX_BUILD_ID 64

enum mod_state {
	MOD_SKIP,    /* not a file: "[vdso]", "[heapprof]", "" */
	MOD_MISSING, /* no file with its build ID */
	MOD_FOUND,
};

/* A module: the mappings with one (path, build ID). */
struct module {
	char *path;
	char *hex; /* lowercase; NULL if none recorded (or not hex) */
	uint8_t id[MAX_BUILD_ID];
	int id_len;
	enum mod_state state;
	char *file; /* the file used */
	int has_dwarf;
	size_t nframes;
};

struct frame {
	int64_t id;
	size_t mod; /* index into modules */
	int64_t rel_pc;
	int unnamed; /* name IS NULL */
};

struct run {
	struct symstore st;
	const char *path;
	struct sym_locator *loc;
	struct symbolizer *sym;
	struct module *mods;
	size_t nmods;
	struct hmap mod_index;  /* path NUL hex -> index into mods */
	struct hmap map_to_mod; /* mapping id -> index into mods */
	struct frame *frames;
	size_t nframes, frames_cap;
	int verbose;
	/* Totals for the summary. */
	size_t real_frames, symbolized, symbols, named;
	size_t real_mods, found_mods;
};

/* Lowercase hex build ID of a mapping, or NULL if none or not hex. */
static char *clean_hex(char *hex, uint8_t *id, int *id_len)
{
	*id_len = 0;
	if (!hex)
		return NULL;
	for (char *c = hex; *c; c++)
		if (*c >= 'A' && *c <= 'F')
			*c = (char)(*c - 'A' + 'a');
	int n = locate_hex_bytes(hex, id, MAX_BUILD_ID);
	if (n <= 0) {
		free(hex);
		return NULL;
	}
	*id_len = n;
	return hex;
}

/* The module of a mapping row, added on first sight.  0 or -ENOMEM. */
static int add_mapping(struct run *r, int64_t map_id, char *path, char *hex)
{
	uint8_t id[MAX_BUILD_ID];
	int id_len = 0;
	int err = -ENOMEM;

	if (!path)
		path = strdup("");
	hex = clean_hex(hex, id, &id_len);
	if (!path)
		goto out;
	size_t plen = strlen(path), hlen = hex ? strlen(hex) : 0;
	char *key = malloc(plen + 1 + hlen + 1);
	if (!key)
		goto out;
	memcpy(key, path, plen + 1);
	if (hex)
		memcpy(key + plen + 1, hex, hlen);
	int64_t *found = hmap_find(&r->mod_index, key, plen + 1 + hlen);
	if (found) {
		err = hmap_put(&r->map_to_mod, &map_id, sizeof(map_id), *found);
		free(key);
		goto out;
	}
	struct module *mods =
	        realloc(r->mods, (r->nmods + 1) * sizeof(*r->mods));
	if (!mods) {
		free(key);
		goto out;
	}
	r->mods = mods;
	int64_t idx = (int64_t)r->nmods;
	err = hmap_put(&r->mod_index, key, plen + 1 + hlen, idx);
	if (!err)
		err = hmap_put(&r->map_to_mod, &map_id, sizeof(map_id), idx);
	free(key);
	if (err)
		goto out;
	struct module *m = &r->mods[r->nmods++];
	memset(m, 0, sizeof(*m));
	m->path = path;
	m->hex = hex;
	memcpy(m->id, id, sizeof(id));
	m->id_len = id_len;
	/* Pseudo mappings name no file. */
	m->state = path[0] && path[0] != '[' ? MOD_MISSING : MOD_SKIP;
	return 0;
out:
	free(path);
	free(hex);
	return err;
}

static int mapping_row(void *arg, int64_t id, char *path, char *hex)
{
	return add_mapping(arg, id, path, hex);
}

static int frame_row(void *arg, int64_t id, int64_t map_id, int64_t rel_pc,
                     bool unnamed)
{
	struct run *r = arg;
	int64_t *mod = hmap_find(&r->map_to_mod, &map_id, sizeof(map_id));
	if (!mod || r->mods[*mod].state == MOD_SKIP)
		return 0; /* dangling mapping id, or no file */
	if (r->nframes == r->frames_cap) {
		size_t ncap = r->frames_cap ? 2 * r->frames_cap : 1024;
		struct frame *a = realloc(r->frames, ncap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		r->frames = a;
		r->frames_cap = ncap;
	}
	r->frames[r->nframes++] = (struct frame){
	        .id = id,
	        .mod = (size_t)*mod,
	        .rel_pc = rel_pc,
	        .unnamed = unnamed,
	};
	r->mods[*mod].nframes++;
	return 0;
}

/* Find a file for every module; print the ones not found.  0 or -ENOMEM. */
static int resolve_modules(struct run *r)
{
	for (size_t i = 0; i < r->nmods; i++) {
		struct module *m = &r->mods[i];
		if (m->state == MOD_SKIP || !m->nframes)
			continue;
		r->real_mods++;
		if (!m->hex) {
			hp_log("Could not find %s (no Build ID recorded).\n",
			       m->path);
			continue;
		}
		struct locate_result lr;
		int err = locator_find(r->loc, m->path, m->hex, &lr);
		if (err)
			return err;
		if (lr.file) {
			int d = symbolizer_has_dwarf(r->sym, lr.file, m->id,
			                             (size_t)m->id_len);
			if (d >= 0) {
				m->state = MOD_FOUND;
				m->has_dwarf = d;
				m->file = lr.file;
				lr.file = NULL;
				r->found_mods++;
				if (r->verbose)
					printf("%s: using %s (%s)\n", m->path,
					       m->file, lr.how);
				if (!d)
					hp_err(SUBSYS,
					       "%s: no DWARF in %s (or a "
					       "debug file for it): names "
					       "only",
					       m->path, m->file);
				locate_result_fini(&lr);
				continue;
			}
			hp_err(SUBSYS, "%s: cannot read %s", m->path, lr.file);
		}
		hp_log("Could not find %s (Build ID: %s).\n", m->path, m->hex);
		if (lr.other)
			hp_err(SUBSYS, "%s has Build ID %s, not %s", lr.other,
			       lr.other_build_id ? lr.other_build_id : "(none)",
			       m->hex);
		locate_result_fini(&lr);
	}
	return 0;
}

/* Drop the earlier symbols of the frames about to be symbolized again
 * (those of modules found with DWARF). */
static int clear_old(struct run *r)
{
	int64_t *ids = malloc((r->nframes ? r->nframes : 1) * sizeof(*ids));
	size_t n = 0;
	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < r->nframes; i++) {
		const struct module *m = &r->mods[r->frames[i].mod];
		if (m->state == MOD_FOUND && m->has_dwarf)
			ids[n++] = r->frames[i].id;
	}
	int err = symstore_clear(&r->st, ids, n);
	free(ids);
	return err;
}

/* Symbolize one frame of a found module. */
static int do_frame(struct run *r, const struct frame *f)
{
	const struct module *m = &r->mods[f->mod];
	struct sym_source *src = NULL;
	size_t n = 0;
	int err = 0;

	if (f->rel_pc <= 0)
		return 0;
	if (m->has_dwarf)
		err = symbolizer_lookup_source(r->sym, m->file, m->id,
		                               (size_t)m->id_len,
		                               (uint64_t)f->rel_pc, &src, &n);
	if (err)
		return err;
	if (n) {
		int64_t set = symstore_new_set(&r->st);
		for (size_t k = 0; !err && k < n; k++)
			err = symstore_add_symbol(&r->st, set, src[k].name,
			                          src[k].source_file,
			                          src[k].line);
		if (!err)
			err = symstore_set_frame(&r->st, f->id, set);
		if (!err) {
			r->symbolized++;
			r->symbols += n;
		}
	}
	if (!err && f->unnamed) {
		struct sym_result res;
		err = symbolizer_lookup(r->sym, m->file, m->id,
		                        (size_t)m->id_len, (uint64_t)f->rel_pc,
		                        &res);
		/* No symbol table entry: the function DWARF says it is in. */
		const char *name = res.name;
		if (!err && !name && n)
			name = src[n - 1].name;
		if (!err && name) {
			err = symstore_name_frame(&r->st, f->id, name,
			                          res.system_name);
			if (!err)
				r->named++;
		}
		sym_result_fini(&res);
	}
	sym_source_free(src, n);
	return err;
}

static int write_symbols(struct run *r)
{
	int err = clear_old(r);
	for (size_t i = 0; !err && i < r->nframes; i++) {
		const struct frame *f = &r->frames[i];
		r->real_frames++;
		if (r->mods[f->mod].state == MOD_FOUND)
			err = do_frame(r, f);
	}
	return err;
}

/* Refuse files we may not write (root may write anything). */
static int check_writable(sqlite3 *db, const char *path)
{
	struct stat sb;

	if (stat(path, &sb) == 0 &&
	    (access(path, W_OK) < 0 ||
	     !(sb.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) ||
	     symstore_readonly(db))) {
		hp_err(SUBSYS, "%s: read-only file (symbolize writes into it)",
		       path);
		return -EACCES;
	}
	return 0;
}

static char *debuginfo_path(const struct sym_locator *l)
{
	/* Next to the file, its .debug/, the binary path, /usr/lib/debug. */
	size_t len = sizeof(":.debug:/usr/lib/debug");
	for (size_t i = 0; i < locator_ndirs(l); i++)
		len += strlen(locator_dir(l, i)) + 1;
	char *s = malloc(len);
	if (!s)
		return NULL;
	strcpy(s, ":.debug");
	for (size_t i = 0; i < locator_ndirs(l); i++) {
		strcat(s, ":");
		strcat(s, locator_dir(l, i));
	}
	strcat(s, ":/usr/lib/debug");
	return s;
}

static void run_free(struct run *r)
{
	for (size_t i = 0; i < r->nmods; i++) {
		free(r->mods[i].path);
		free(r->mods[i].hex);
		free(r->mods[i].file);
	}
	free(r->mods);
	free(r->frames);
	hmap_free(&r->mod_index);
	hmap_free(&r->map_to_mod);
	symbolizer_free(r->sym);
	locator_free(r->loc);
}

static int symbolize(struct run *r, sqlite3 *db)
{
	int err = symstore_begin(&r->st, db, r->path);
	if (err)
		return err;
	err = symstore_mappings(&r->st, mapping_row, r);
	if (!err)
		err = symstore_frames(&r->st, frame_row, r);
	if (!err)
		err = resolve_modules(r);
	if (!err)
		err = write_symbols(r);
	int end = symstore_end(&r->st, !err);
	if (!err)
		err = end;
	if (err) {
		if (err == -ENOMEM)
			hp_err(SUBSYS, "%s: out of memory; profile unchanged",
			       r->path);
	}
	return err;
}

int symbolize_profile(sqlite3 *db, const char *path,
                      const struct symbolize_where *w,
                      struct symbolize_totals *t)
{
	struct run r = {.path = path, .verbose = w->verbose};
	hmap_init(&r.mod_index);
	hmap_init(&r.map_to_mod);
	int err = check_writable(db, path);
	if (!err) {
		r.loc = locator_new(w->binary_path, w->index, w->debuginfod);
		r.sym = symbolizer_new();
		char *dp = r.loc ? debuginfo_path(r.loc) : NULL;
		if (!r.loc || !r.sym || !dp ||
		    symbolizer_set_debuginfo_path(r.sym, dp) < 0) {
			hp_err(SUBSYS, "out of memory");
			err = -ENOMEM;
		}
		free(dp);
	}
	if (!err)
		err = symbolize(&r, db);
	*t = (struct symbolize_totals){
	        .real_frames = r.real_frames,
	        .symbolized = r.symbolized,
	        .symbols = r.symbols,
	        .named = r.named,
	        .real_mods = r.real_mods,
	        .found_mods = r.found_mods,
	};
	run_free(&r);
	return err;
}
