/*
 * `heapprof flamegraph FILE [-o OUT.html]`: one self-contained HTML page
 * with an interactive flame graph of a profile (docs/FLAMEGRAPH.md).  The
 * page is written by src/flamegraph/page.c; this file reads the options and
 * writes the file: next to OUT under a temporary name, renamed at the end,
 * so a failure never leaves a partial page.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/progress.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/procid.h"
#include "flamegraph/page.h"
#include "store/reader.h"
#include "store/trace_read.h"
#include "util/err.h"

#define SUBSYS "flamegraph"

struct fg_opts {
	const char *out;
	struct fg_page_opts page; /* the profile FILE, --view, --from/--to */
	bool have_dump;           /* --dump */
	struct dump_ref dump;
};

/* ---- arguments and output file ------------------------------------------ */

static void fg_usage(FILE *f)
{
	fputs("usage: heapprof flamegraph FILE [-o OUT.html] [--view VIEW]\n"
	      "                          [--dump N] [--from TIME] [--to "
	      "TIME]\n"
	      "\n"
	      "Writes one self-contained HTML page (no network access) with "
	      "an\n"
	      "interactive flame graph of every process, heap and dump of the\n"
	      "profile FILE, switchable between the four views, a chart of "
	      "memory\n"
	      "over time (heap and RSS, the dumps marked) and a table of the "
	      "top\n"
	      "functions.  Each process opens on its peak's dump (or its "
	      "last).\n"
	      "\n"
	      "  -o, --output OUT  the page (default: FILE with .db replaced\n"
	      "                    by .html; - for standard output)\n"
	      "  --view VIEW       the view shown first: space (default),\n"
	      "                    alloc_space, objects or alloc_objects\n"
	      "  --dump N          the dump shown first: 1 the first, -1 the "
	      "last,\n"
	      "                    peak, end, or a snapshot's name\n"
	      "  --from, --to TIME from a trace (record --trace): the graph"
	      " of the\n"
	      "                    allocations made in [from, to) instead of"
	      " the dumps\n"
	      "                    (space: those still live at `to`); TIME is"
	      " since the\n"
	      "                    process started, as in 1.5s or 500ms\n"
	      "\n"
	      "With a trace, the page also charts the live bytes over time.\n",
	      f);
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, struct fg_opts *o)
{
	struct fg_page_opts *pg = &o->page;

	memset(o, 0, sizeof(*o));
	pg->view = RD_SPACE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;
		int is_out = 0, is_view = 0, is_from = 0, is_to = 0;
		int is_dump = 0;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fg_usage(stdout);
			return 1;
		}
		if (!strcmp(a, "-o") || !strcmp(a, "--output"))
			is_out = 1;
		else if (!strncmp(a, "--output=", 9))
			is_out = 1, val = a + 9;
		else if (!strncmp(a, "-o", 2) && a[2])
			is_out = 1, val = a + 2;
		else if (!strcmp(a, "--view"))
			is_view = 1;
		else if (!strncmp(a, "--view=", 7))
			is_view = 1, val = a + 7;
		else if (!strcmp(a, "--dump"))
			is_dump = 1;
		else if (!strncmp(a, "--dump=", 7))
			is_dump = 1, val = a + 7;
		else if (!strcmp(a, "--from"))
			is_from = 1;
		else if (!strncmp(a, "--from=", 7))
			is_from = 1, val = a + 7;
		else if (!strcmp(a, "--to"))
			is_to = 1;
		else if (!strncmp(a, "--to=", 5))
			is_to = 1, val = a + 5;
		if ((is_out || is_view || is_from || is_to || is_dump) &&
		    !val) {
			if (i + 1 >= argc) {
				hp_err(SUBSYS, "option '%s' needs a value", a);
				return 2;
			}
			val = argv[++i];
		}
		if (is_out) {
			if (!*val) {
				hp_err(SUBSYS, "empty output file name");
				return 2;
			}
			o->out = val;
		} else if (is_view) {
			if (opt_parse_view(SUBSYS, val, &pg->view) < 0)
				return 2;
		} else if (is_dump) {
			if (opt_parse_dump(SUBSYS, val, &o->dump) < 0)
				return 2;
			o->have_dump = true;
		} else if (is_from || is_to) {
			pg->win.window = 1;
			*(is_from ? &pg->win.have_from : &pg->win.have_to) = 1;
			if (opt_parse_offset(SUBSYS,
			                     is_from ? "--from" : "--to", val,
			                     is_from ? &pg->win.from_ns
			                             : &pg->win.to_ns) < 0)
				return 2;
		} else if (a[0] == '-' && a[1]) {
			char hint[128];
			hp_err(SUBSYS, "unknown option '%s'%s", a,
			       opt_hint(a, fg_usage, hint, sizeof(hint)));
			return 2;
		} else if (pg->file) {
			hp_err(SUBSYS, "unexpected argument '%s'", a);
			return 2;
		} else {
			pg->file = a;
		}
	}
	if (!pg->file) {
		hp_err(SUBSYS, "missing FILE (usage: heapprof flamegraph FILE "
		               "[-o OUT.html])");
		return 2;
	}
	if (o->have_dump && pg->win.window) {
		hp_err(SUBSYS, "--dump and --from/--to: not both (a window is "
		               "its own dump)");
		return 2;
	}
	if (pg->win.have_from && pg->win.have_to &&
	    pg->win.from_ns >= pg->win.to_ns) {
		char a[32], b[32];
		hp_err(SUBSYS, "--from %s is not before --to %s",
		       opt_duration_str(pg->win.from_ns, a, sizeof(a)),
		       opt_duration_str(pg->win.to_ns, b, sizeof(b)));
		return 2;
	}
	return 0;
}

/* --from/--to: 0 if some process has a trace, else -1 (message printed). */
static int check_traced(sqlite3 *db, const struct fg_page_opts *pg)
{
	struct rd_process *procs = NULL;
	size_t n = 0;
	int traced = 0;

	if (rd_load_processes(db, SUBSYS, &procs, &n) < 0)
		return -1;
	for (size_t i = 0; !traced && i < n; i++) {
		struct tr_info t;
		if (tr_load_info(db, SUBSYS, procs[i].upid, &t) < 0) {
			rd_free_processes(procs, n);
			return -1;
		}
		traced = t.present;
	}
	rd_free_processes(procs, n);
	if (!traced)
		hp_err(SUBSYS,
		       "%s: --from/--to need an event trace (heapprof record"
		       " --trace), and this profile has none",
		       pg->file);
	return traced ? 0 : -1;
}

/* --dump: the dump each process opens on (procid_pick_dump: a process
 * without it is an error, as in report).  0 or -1 (message printed). */
static int pick_open(sqlite3 *db, struct fg_opts *o, struct fg_open_dump **out)
{
	struct rd_process *procs = NULL;
	size_t n = 0;
	*out = NULL;
	if (rd_load_processes(db, SUBSYS, &procs, &n) < 0)
		return -1;
	struct fg_open_dump *a = calloc(n ? n : 1, sizeof(*a));
	int err = a ? 0 : -1;
	if (!a)
		hp_err(SUBSYS, "out of memory");
	for (size_t i = 0; !err && i < n; i++) {
		struct rd_dump *d = NULL;
		size_t nd = 0;
		if (rd_load_dumps(db, SUBSYS, procs[i].upid, &d, &nd) < 0) {
			err = -1;
			break;
		}
		long k = nd ? procid_pick_dump(SUBSYS, o->page.file, &procs[i],
		                               d, nd, &o->dump)
		            : 0;
		rd_free_dumps(d, nd);
		if (k < 0)
			err = -1;
		a[i] = (struct fg_open_dump){procs[i].upid, k};
	}
	rd_free_processes(procs, n);
	if (err) {
		free(a);
		return -1;
	}
	*out = a;
	o->page.open = a;
	o->page.nopen = n;
	return 0;
}

/* FILE with ".db" replaced by ".html", or ".html" appended. */
static char *default_output(const char *file)
{
	size_t n = strlen(file);
	char *out = malloc(n + 6);

	if (!out)
		return NULL;
	if (n > 3 && !strcmp(file + n - 3, ".db"))
		n -= 3;
	memcpy(out, file, n);
	memcpy(out + n, ".html", 6);
	return out;
}

/* Open where the page goes; *tmp gets the temporary name, if any. */
static FILE *open_output(const char *out, const char *in, char **tmp)
{
	struct stat in_st, out_st;
	int exists = stat(out, &out_st) == 0;

	*tmp = NULL;
	if (!strcmp(out, "-"))
		return stdout;
	if (exists && S_ISDIR(out_st.st_mode)) {
		hp_err(SUBSYS, "cannot write %s: is a directory", out);
		return NULL;
	}
	if (exists && stat(in, &in_st) == 0 && in_st.st_dev == out_st.st_dev &&
	    in_st.st_ino == out_st.st_ino) {
		hp_err(SUBSYS, "%s: refusing to overwrite the profile", out);
		return NULL;
	}
	/* A pipe or a device (/dev/stdout) is written in place. */
	if (exists && !S_ISREG(out_st.st_mode)) {
		FILE *f = fopen(out, "w");
		if (!f)
			hp_err(SUBSYS, "cannot write %s: %s", out,
			       strerror(errno));
		return f;
	}
	size_t n = strlen(out) + 16;
	if (!(*tmp = malloc(n))) {
		hp_err(SUBSYS, "out of memory");
		return NULL;
	}
	snprintf(*tmp, n, "%s.tmp.XXXXXX", out);
	int fd = mkstemp(*tmp);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		hp_err(SUBSYS, "cannot write %s: %s", out, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(*tmp);
		}
		free(*tmp);
		*tmp = NULL;
		return NULL;
	}
	/* mkstemp makes it 0600: give it the mode a new file would get. */
	mode_t mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) < 0) {
		/* not fatal: the page stays private to its owner */
	}
	return f;
}

/*
 * Write the page to out: through a temporary file next to it, renamed over
 * out only when everything was written, so a failure leaves no partial
 * page (and an older page at out untouched).  "-" is standard output.
 * 0 or 1 (message printed).
 */
static int write_output(const char *out, sqlite3 *db, const struct rd_stacks *s,
                        const struct fg_opts *o)
{
	char *tmp = NULL;
	int err, werr;
	FILE *f = open_output(out, o->page.file, &tmp);

	if (!f)
		return 1;
	err = fg_page_write(f, db, s, &o->page, &werr);
	if (fflush(f) != 0 && !werr)
		werr = errno ? errno : EIO;
	if (f != stdout && fclose(f) != 0 && !werr)
		werr = errno ? errno : EIO;
	if (!err && werr) {
		hp_err(SUBSYS, "writing %s: %s", out, strerror(werr));
		err = -werr;
	}
	if (!err && tmp && rename(tmp, out) < 0) {
		hp_err(SUBSYS, "cannot write %s: %s", out, strerror(errno));
		err = -EIO;
	}
	if (err && tmp)
		unlink(tmp);
	free(tmp);
	return err ? 1 : 0;
}

int cmd_flamegraph(int argc, char **argv)
{
	struct fg_opts o;
	struct rd_stacks s;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	progress_trace("flamegraph");
	char *out = o.out ? strdup(o.out) : default_output(o.page.file);
	if (!out) {
		hp_err(SUBSYS, "out of memory");
		return 1;
	}
	sqlite3 *db = rd_open(o.page.file, SUBSYS);
	if (!db) {
		free(out);
		return 1;
	}
	rc = 1;
	struct fg_open_dump *open = NULL;
	if ((!o.page.win.window || check_traced(db, &o.page) == 0) &&
	    (!o.have_dump || pick_open(db, &o, &open) == 0) &&
	    rd_load_stacks(db, SUBSYS, &s) == 0) {
		rc = write_output(out, db, &s, &o);
		rd_free_stacks(&s);
	}
	free(open);
	sqlite3_close(db);
	if (rc == 0 && strcmp(out, "-"))
		fprintf(stderr, "heapprof: flame graph written to %s\n", out);
	free(out);
	return rc;
}
