/*
 * `heapprof pprof FILE`: export a profile as gzipped pprof files
 * (profile.proto), one per process, heap and dump, for `go tool pprof`,
 * speedscope and other pprof readers.  The encoding and the files are in
 * src/export/ (pprof.c, pprof_file.c); this file picks what to export and
 * how the files are named (docs/PPROF.md):
 *
 *   one file results        -o PATH is that file (default: FILE without
 *                           ".db", plus ".pb.gz")
 *   several files result    -o PATH is a prefix (default: FILE without
 *                           ".db"; PATH without ".pb.gz"), each file
 *                           PREFIX.<id>[.<heap>][.dump<N>].pb.gz
 *                           (ppf_out_path)
 *
 * and an -o naming an existing directory (or ending in '/') puts the files
 * there under the default names.
 *
 * --from/--to export a time window of a trace (record --trace) instead of
 * a dump: one file per process and heap, named PREFIX.<id>[.<heap>].window
 * .pb.gz when several result, with the allocations made in the window
 * (alloc_*) and those of them still live at its end (space, objects).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/progress.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/procid.h"
#include "export/pprof_file.h"
#include "store/reader.h"
#include "store/trace_read.h"
#include "util/err.h"

#define SUBSYS "pprof"

struct pprof_opts {
	const char *file;
	const char *out;
	struct dump_ref dump;
	int all_dumps;
	int have_pid;
	struct procsel pid; /* --pid PID or PID.N (cli/procid.h) */
	const char *heap;   /* NULL: libc.malloc */
	int all_heaps;
	struct ag_window win; /* --from/--to */
};

struct proc_dumps {
	struct rd_dump *d;
	size_t n;
};

static void pprof_usage(FILE *f)
{
	fputs("usage: heapprof pprof FILE [-o PATH] [--dump N | --all]"
	      " [--pid P]\n"
	      "                     [--heap H | --all-heaps]"
	      " [--from TIME] [--to TIME]\n"
	      "\n"
	      "Write gzipped pprof profiles (for go tool pprof, speedscope,"
	      " ...).\n"
	      "\n"
	      "  -o, --output PATH  the file when one profile results, else a"
	      " prefix:\n"
	      "                     PATH.<id>[.<heap>][.dump<N>].pb.gz, heap"
	      " and dump\n"
	      "                     when several (PATH without .pb.gz; an"
	      " existing\n"
	      "                     directory: files inside it); default: FILE"
	      " without\n"
	      "                     .db.  <id>: the pid, or PID.N for the"
	      " N-th process\n"
	      "                     of a pid with several (an exec'd image)\n"
	      "  --dump N           the N-th dump of each process (1 = first,"
	      " -1 = last;\n"
	      "                     peak, end, or a snapshot's name;"
	      " default: the last)\n"
	      "  --all              every dump\n"
	      "  --pid P            only the processes of pid P; P.N: the"
	      " N-th of them\n"
	      "  --heap H           heap H (default libc.malloc)\n"
	      "  --all-heaps        every heap\n"
	      "  --from, --to TIME  from a trace (record --trace): the"
	      " allocations made\n"
	      "                     in [from, to), and those of them still"
	      " live at `to`;\n"
	      "                     TIME is since the process started, as in"
	      " 1.5s, 500ms\n"
	      "                     (-2ms: before its recorded start)\n"
	      "                     (defaults: its start, the end of the"
	      " trace)\n",
	      f);
}

/* One option at argv[*i]: 0 handled, 1 not an option, -1 error. */
static int parse_opt(int argc, char **argv, int *i, void *ctx)
{
	struct pprof_opts *o = ctx;
	int missing = 0;
	const char *v;

	if ((v = opt_value(argc, argv, i, "-o", &missing)) ||
	    (v = opt_value(argc, argv, i, "--output", &missing)))
		return opt_nonempty(SUBSYS, v, "empty output path", &o->out);
	if ((v = opt_value(argc, argv, i, "--dump", &missing)))
		return opt_parse_dump(SUBSYS, v, &o->dump);
	if ((v = opt_value(argc, argv, i, "--pid", &missing))) {
		o->have_pid = 1;
		return procsel_parse(SUBSYS, v, &o->pid);
	}
	if ((v = opt_value(argc, argv, i, "--from", &missing))) {
		o->win.window = o->win.have_from = 1;
		return opt_parse_offset(SUBSYS, "--from", v, &o->win.from_ns);
	}
	if ((v = opt_value(argc, argv, i, "--to", &missing))) {
		o->win.window = o->win.have_to = 1;
		return opt_parse_offset(SUBSYS, "--to", v, &o->win.to_ns);
	}
	if ((v = opt_value(argc, argv, i, "--heap", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --heap", &o->heap);
	if (missing) {
		hp_err(SUBSYS, "option '%s' needs a value", argv[*i]);
		return -1;
	}
	if (!strcmp(argv[*i], "--all")) {
		o->all_dumps = 1;
		return 0;
	}
	if (!strcmp(argv[*i], "--all-heaps")) {
		o->all_heaps = 1;
		return 0;
	}
	return 1;
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, struct pprof_opts *o)
{
	memset(o, 0, sizeof(*o));
	size_t n;
	int rc = opt_walk(SUBSYS, argc, argv, parse_opt, o, pprof_usage,
	                  &o->file, 1, &n);
	if (rc)
		return rc;
	if (!o->file) {
		hp_err(SUBSYS, "missing FILE (see heapprof pprof --help)");
		return 2;
	}
	if (o->all_dumps && (o->dump.index || o->dump.name)) {
		hp_err(SUBSYS, "--dump and --all exclude each other");
		return 2;
	}
	if (o->all_heaps && o->heap) {
		hp_err(SUBSYS, "--heap and --all-heaps exclude each other");
		return 2;
	}
	if (o->win.window && (o->all_dumps || o->dump.index || o->dump.name)) {
		hp_err(SUBSYS,
		       "--from/--to and --dump/--all exclude each other");
		return 2;
	}
	if (o->win.have_from && o->win.have_to &&
	    o->win.from_ns >= o->win.to_ns) {
		char a[32], b[32];
		hp_err(SUBSYS, "--from %s is not before --to %s",
		       opt_duration_str(o->win.from_ns, a, sizeof(a)),
		       opt_duration_str(o->win.to_ns, b, sizeof(b)));
		return 2;
	}
	return 0;
}

/* ---- what to export ----------------------------------------------------- */

/* The heaps to export of a process; *n 0 if none.  0 or -1 (printed). */
static int pick_heaps(sqlite3 *db, const struct rd_process *p,
                      const struct pprof_opts *o, char ***heaps, size_t *n,
                      int *found)
{
	char **all = NULL;
	size_t nall = 0;

	*heaps = NULL;
	*n = 0;
	if (rd_load_heaps(db, SUBSYS, p->upid, &all, &nall) < 0)
		return -1;
	if (o->all_heaps) {
		*heaps = all;
		*n = nall;
		*found |= nall > 0;
		return 0;
	}
	/* The default heap always exists: a program that allocated
	 * nothing gets an empty profile. */
	const char *want = o->heap ? o->heap : "libc.malloc";
	int have = !o->heap;
	for (size_t i = 0; i < nall; i++)
		have |= !strcmp(all[i], want);
	rd_free_heaps(all, nall);
	*found |= have && o->heap;
	if (!have)
		return 0;
	*heaps = malloc(sizeof(**heaps));
	if (!*heaps || !((*heaps)[0] = strdup(want))) {
		free(*heaps);
		*heaps = NULL;
		hp_err(SUBSYS, "out of memory");
		return -1;
	}
	*n = 1;
	return 0;
}

/* The jobs for process i.  0 or -1 (message printed). */
static int plan_process(sqlite3 *db, const struct rd_process *procs, size_t i,
                        const struct pprof_opts *o, struct proc_dumps *pd,
                        struct ppf_job **jobs, size_t *njobs, int *heap_found,
                        int *traced)
{
	const struct rd_process *p = &procs[i];
	char **heaps = NULL;
	size_t nheaps = 0;
	int err = 0;

	if (rd_load_dumps(db, SUBSYS, p->upid, &pd->d, &pd->n) < 0)
		return -1;
	if (o->win.window) {
		struct tr_info t;
		if (tr_load_info(db, SUBSYS, p->upid, &t) < 0)
			return -1;
		if (!t.present) {
			hp_err(SUBSYS,
			       "process %" PRId64
			       " has no event trace; skipped",
			       p->pid);
			return 0;
		}
		*traced = 1;
		if (pick_heaps(db, p, o, &heaps, &nheaps, heap_found) < 0)
			return -1;
		for (size_t h = 0; !err && h < nheaps; h++)
			err = ppf_job_add(jobs, njobs, i, heaps[h], 0, pd->n);
		rd_free_heaps(heaps, nheaps);
		if (err)
			hp_err(SUBSYS, "out of memory");
		return err ? -1 : 0;
	}
	if (pd->n == 0) {
		hp_err(SUBSYS, "process %" PRId64 " has no dumps; skipped",
		       p->pid);
		return 0;
	}
	long idx = 1;
	if (!o->all_dumps) {
		idx = procid_pick_dump(SUBSYS, NULL, p, pd->d, pd->n,
		                       &o->dump) +
		      1;
		if (idx == 0)
			return -1;
	}
	if (pick_heaps(db, p, o, &heaps, &nheaps, heap_found) < 0)
		return -1;
	for (size_t h = 0; !err && h < nheaps; h++) {
		size_t first = o->all_dumps ? 1 : (size_t)idx;
		size_t last = o->all_dumps ? pd->n : (size_t)idx;
		for (size_t d = first; !err && d <= last; d++)
			err = ppf_job_add(jobs, njobs, i, heaps[h], d, pd->n);
	}
	rd_free_heaps(heaps, nheaps);
	if (err)
		hp_err(SUBSYS, "out of memory");
	return err ? -1 : 0;
}

/* ---- writing ------------------------------------------------------------ */

static int write_job(sqlite3 *db, const struct rd_stacks *s,
                     const struct pprof_opts *o, const struct rd_process *p,
                     const struct proc_dumps *pd, const struct ppf_job *j,
                     const char *path)
{
	if (j->dump == 0) {
		struct ppf_window w;
		int err = ppf_write_window(db, s, o->file, p, j->heap, &o->win,
		                           path, SUBSYS, &w);
		if (!err)
			printf("wrote %s: process %s, heap %s, window %+.6f s "
			       "to"
			       " %+.6f s%s, %zu samples\n",
			       path, j->id, j->heap, w.from, w.to,
			       w.incomplete ? " (trace incomplete)" : "",
			       w.nsamples);
		return err;
	}
	struct ppf_dump x = {.file = o->file,
	                     .db = db,
	                     .s = s,
	                     .proc = p,
	                     .dump = &pd->d[j->dump - 1],
	                     .index = j->dump,
	                     .ndumps = j->ndumps};
	size_t n = 0;
	int err = ppf_write_dump(&x, j->heap, path, SUBSYS, &n);
	if (!err)
		printf("wrote %s: process %s, heap %s, dump %zu of %zu, %zu "
		       "samples\n",
		       path, j->id, j->heap, j->dump, j->ndumps, n);
	return err;
}

static int write_all_jobs(sqlite3 *db, const struct rd_stacks *s,
                          const struct pprof_opts *o,
                          const struct rd_process *procs, size_t nprocs,
                          const struct proc_dumps *pd, struct ppf_job *jobs,
                          size_t njobs)
{
	char *stem = ppf_out_stem(o->file, o->out);
	int err = stem ? 0 : -ENOMEM;

	for (size_t i = 0; i < njobs; i++)
		procid_format(procs, nprocs, jobs[i].proc, jobs[i].id,
		              sizeof(jobs[i].id));
	char **paths = calloc(njobs ? njobs : 1, sizeof(*paths));
	if (!paths)
		err = -ENOMEM;
	for (size_t i = 0; !err && i < njobs; i++) {
		paths[i] = ppf_out_path(o->out, stem, jobs, njobs, i);
		if (!paths[i]) {
			err = -ENOMEM;
			break;
		}
		/* Never two files of this run under one name: the second
		 * would replace the first. */
		for (size_t k = 0; k < i; k++)
			if (!strcmp(paths[k], paths[i])) {
				hp_err(SUBSYS,
				       "two profiles would be written to %s",
				       paths[i]);
				err = -EEXIST;
			}
	}
	for (size_t i = 0; !err && i < njobs; i++)
		err = write_job(db, s, o, &procs[jobs[i].proc],
		                &pd[jobs[i].proc], &jobs[i], paths[i]);
	for (size_t i = 0; paths && i < njobs; i++)
		free(paths[i]);
	free(paths);
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	free(stem);
	return err;
}

static int run(sqlite3 *db, const struct pprof_opts *o)
{
	struct rd_stacks s;
	struct rd_process *procs = NULL;
	struct proc_dumps *pd = NULL;
	struct ppf_job *jobs = NULL;
	size_t nprocs = 0, njobs = 0, nsel = 0;
	int heap_found = 0, traced = 0, err;

	if (rd_load_stacks(db, SUBSYS, &s) < 0)
		return -1;
	err = rd_load_processes(db, SUBSYS, &procs, &nprocs);
	if (!err && !(pd = calloc(nprocs ? nprocs : 1, sizeof(*pd)))) {
		hp_err(SUBSYS, "out of memory");
		err = -1;
	}
	/* --from/--to: refused at once (one message) when no selected process
	 * has a trace; the others are skipped with a note. */
	for (size_t i = 0; !err && o->win.window && !traced && i < nprocs;
	     i++) {
		struct tr_info t;
		if (o->have_pid && !procsel_match(&o->pid, procs, nprocs, i))
			continue;
		err = tr_load_info(db, SUBSYS, procs[i].upid, &t);
		traced = t.present;
	}
	if (!err && o->win.window && !traced) {
		hp_err(SUBSYS,
		       "%s: --from/--to need an event trace (heapprof record"
		       " --trace), and %s has none",
		       o->file, o->have_pid ? "this process" : "this profile");
		err = -1;
	}
	for (size_t i = 0; !err && i < nprocs; i++) {
		if (o->have_pid && !procsel_match(&o->pid, procs, nprocs, i))
			continue;
		nsel++;
		err = plan_process(db, procs, i, o, &pd[i], &jobs, &njobs,
		                   &heap_found, &traced);
	}
	if (!err && o->have_pid && nsel == 0) {
		char sel[48];
		procsel_format(&o->pid, sel, sizeof(sel));
		hp_err(SUBSYS, "%s: no process with pid %s", o->file, sel);
		err = -1;
	} else if (!err && o->heap && !heap_found) {
		hp_err(SUBSYS, "%s: no heap '%s' in %s", o->file, o->heap,
		       o->have_pid ? "this process" : "any process");
		err = -1;
	} else if (!err && njobs == 0) {
		hp_err(SUBSYS, "%s: nothing to export (no process with a dump)",
		       o->file);
		err = -1;
	}
	if (!err)
		err = write_all_jobs(db, &s, o, procs, nprocs, pd, jobs, njobs);
	ppf_jobs_free(jobs, njobs);
	for (size_t i = 0; pd && i < nprocs; i++)
		rd_free_dumps(pd[i].d, pd[i].n);
	free(pd);
	rd_free_processes(procs, nprocs);
	rd_free_stacks(&s);
	return err;
}

int cmd_pprof(int argc, char **argv)
{
	struct pprof_opts o;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	progress_trace("pprof");
	sqlite3 *db = rd_open(o.file, SUBSYS);
	if (!db)
		return 1;
	int err = run(db, &o);
	sqlite3_close(db);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	return err ? 1 : 0;
}
