/*
 * `heapprof symbolize FILE`: offline symbolization (docs/SYMBOLIZE.md).
 * This file reads the command line and the environment (where module
 * files are looked for), opens the profile read-write and prints the
 * summary; the work is symbolize/offline.h.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "store/reader.h"
#include "symbolize/offline.h"
#include "util/err.h"

#define SUBSYS "symbolize"

static void symbolize_usage(FILE *f)
{
	fputs("usage: heapprof symbolize [-v] FILE\n"
	      "\n"
	      "Add source files, line numbers and inlined functions from\n"
	      "DWARF to the profile FILE (table stack_profile_symbol, "
	      "innermost\n"
	      "inlined function first), and function names to the frames\n"
	      "recorded without one.  A module file is used only if its GNU\n"
	      "build ID matches the one recorded.  Running it again replaces\n"
	      "the earlier results.\n"
	      "\n"
	      "  -v, --verbose   print the file used for each module\n"
	      "\n"
	      "Environment:\n"
	      "  HEAPPROF_BINARY_PATH      colon-separated directories with "
	      "the modules,\n"
	      "                            looked up as DIR/PATH, DIR/BASENAME,"
	      "\n"
	      "                            DIR/.build-id/xx/rest.debug\n"
	      "  HEAPPROF_SYMBOLIZER_MODE  'index': search those directories\n"
	      "                            recursively for the build IDs "
	      "instead\n"
	      "  DEBUGINFOD_URLS           without HEAPPROF_BINARY_PATH: "
	      "debuginfod\n"
	      "                            servers asked for modules not on "
	      "this machine\n"
	      "\n"
	      "See docs/SYMBOLIZE.md.\n",
	      f);
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, const char **file, int *verbose)
{
	int no_more_opts = 0;

	*file = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!no_more_opts && !strcmp(a, "--")) {
			no_more_opts = 1;
		} else if (!no_more_opts &&
		           (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
			symbolize_usage(stdout);
			return 1;
		} else if (!no_more_opts &&
		           (!strcmp(a, "-v") || !strcmp(a, "--verbose"))) {
			*verbose = 1;
		} else if (!no_more_opts && a[0] == '-' && a[1]) {
			char hint[128];
			hp_err(SUBSYS, "unknown option '%s' (see --help)%s", a,
			       opt_hint(a, symbolize_usage, hint,
			                sizeof(hint)));
			return 2;
		} else if (*file) {
			hp_err(SUBSYS,
			       "one profile at a time (got '%s' and "
			       "'%s')",
			       *file, a);
			return 2;
		} else {
			*file = a;
		}
	}
	if (!*file) {
		hp_err(SUBSYS, "no profile given (usage: heapprof symbolize "
		               "FILE)");
		return 2;
	}
	return 0;
}

int cmd_symbolize(int argc, char **argv)
{
	const char *file;
	int verbose = 0;
	int rc = parse_args(argc, argv, &file, &verbose);
	if (rc)
		return rc == 1 ? 0 : 2;

	const char *bin = getenv("HEAPPROF_BINARY_PATH");
	const char *mode = getenv("HEAPPROF_SYMBOLIZER_MODE");
	const char *urls = getenv("DEBUGINFOD_URLS");
	int index = 0;
	if (bin && !bin[0])
		bin = NULL;
	if (mode && mode[0]) {
		if (strcmp(mode, "index")) {
			hp_err(SUBSYS,
			       "HEAPPROF_SYMBOLIZER_MODE=%s: unknown mode "
			       "(only "
			       "'index')",
			       mode);
			return 2;
		}
		if (!bin) {
			hp_err(SUBSYS, "HEAPPROF_SYMBOLIZER_MODE=index needs "
			               "HEAPPROF_BINARY_PATH");
			return 2;
		}
		index = 1;
	}

	struct symbolize_where w = {
	        .binary_path = bin,
	        .index = index,
	        .debuginfod = !bin && urls && urls[0],
	        .verbose = verbose,
	};
	struct symbolize_totals t;
	sqlite3 *db = rd_open_rw(file, SUBSYS);
	if (!db)
		return 1;
	int err = symbolize_profile(db, file, &w, &t);
	if (sqlite3_close(db) != SQLITE_OK && !err) {
		hp_err(SUBSYS, "%s: closing: %s", file, sqlite3_errmsg(db));
		err = -EIO;
	}
	if (!err) {
		printf("%s: %zu of %zu frames symbolized (%zu source "
		       "locations), %zu frame names added; %zu of %zu modules "
		       "found\n",
		       file, t.symbolized, t.real_frames, t.symbols, t.named,
		       t.found_mods, t.real_mods);
		if (t.real_mods && !t.found_mods) {
			hp_err(SUBSYS,
			       "%s: no module found (set HEAPPROF_BINARY_PATH, "
			       "see --help)",
			       file);
			err = -ENOENT;
		}
	}
	return err ? 1 : 0;
}
