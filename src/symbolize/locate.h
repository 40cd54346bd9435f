/*
 * Finding module files for offline symbolization (`heapprof symbolize`,
 * docs/SYMBOLIZE.md): given the path and GNU build ID a profile recorded
 * for a module, find a file on this machine with that build ID.
 *
 * With binary-path directories (HEAPPROF_BINARY_PATH), each directory is
 * tried in order, and in each the five paths of locate_candidates; in
 * index mode (HEAPPROF_SYMBOLIZER_MODE=index) the directories are instead
 * searched recursively once for ELF files by build ID.  Without
 * directories, the recorded path itself, then debuginfod (when enabled:
 * DEBUGINFOD_URLS set).  A file is used only if its build ID matches.
 */
#ifndef HEAPPROF_SYMBOLIZE_LOCATE_H
#define HEAPPROF_SYMBOLIZE_LOCATE_H

#include <stddef.h>
#include <stdint.h>

struct sym_locator; /* opaque */

/* Index mode: directories below a binary-path directory followed. */
#define LOCATE_INDEX_MAX_DEPTH 32
/* Index mode: directory entries examined in all, at most. */
#define LOCATE_INDEX_MAX_ENTRIES 1000000

/*
 * New locator.  binary_path: colon-separated directories (empty entries
 * ignored; NULL or "" for none); index: search them recursively instead
 * of the five paths; debuginfod: ask debuginfod servers when there are no
 * directories and the recorded path does not match.  NULL if out of
 * memory (message printed).
 */
struct sym_locator *locator_new(const char *binary_path, int index,
                                int debuginfod);
void locator_free(struct sym_locator *l);

/* The binary-path directories, made absolute (for debug-file lookup). */
size_t locator_ndirs(const struct sym_locator *l);
const char *locator_dir(const struct sym_locator *l, size_t i);

struct locate_result {
	char *file; /* absolute path of a file with the build ID; or NULL */
	const char *how; /* "binary path", "index", "original path" or
	                    "debuginfod"; NULL if not found */
	/* When not found: the first file seen at a lookup path with another
	 * build ID (other_build_id: its hex, NULL if it has none), or NULL. */
	char *other;
	char *other_build_id;
};

/*
 * Look for the module recorded as path with build ID hex (lowercase).
 * Returns 0 (r->file NULL if not found) or -ENOMEM.
 */
int locator_find(struct sym_locator *l, const char *path, const char *hex,
                 struct locate_result *r);
void locate_result_fini(struct locate_result *r);

#define LOCATE_MAX_CANDIDATES 5

/*
 * The paths tried under dir for module path with build ID hex, in order
 * (see the seed's "Symbolize your profile"), duplicates dropped:
 *   1. dir + path                      dir/system/lib/base.apk!foo.so
 *   2. the same without "base.apk!"    dir/system/lib/foo.so
 *   3. dir + basename                  dir/base.apk!foo.so
 *   4. the same without "base.apk!"    dir/foo.so
 *   5. dir/.build-id/ + first two hex digits + / + the rest + ".debug"
 * Each malloc'd into out[]; returns how many, or -ENOMEM.
 */
int locate_candidates(const char *dir, const char *path, const char *hex,
                      char *out[LOCATE_MAX_CANDIDATES]);

/*
 * The GNU build ID of the ELF file at path, as malloc'd lowercase hex in
 * *hex (NULL if the file has none).  0, or a negative errno: -ENOENT
 * missing, -ENOEXEC not a (readable) ELF file, -ENOMEM.
 */
int locate_file_build_id(const char *path, char **hex);

/*
 * Whether a file's build ID (hex) is the recorded one (want): equal, or,
 * since the client keeps only the first 32 bytes of a build ID, want is 64
 * digits long and a prefix of file.
 */
int locate_build_id_matches(const char *want, const char *file);

/* Hex digits to bytes: the byte count, or -1 if not even-length hex or
 * longer than max bytes. */
int locate_hex_bytes(const char *hex, uint8_t *out, size_t max);

#endif
