/*
 * `heapprof snapshot`: every live block of a running process, read from the
 * outside, and the named snapshots stored in a profile (docs/SNAPSHOT.md).
 *
 *   snapshot -p PID | -n NAME   reads the process's region directly: the
 *                               client keeps its memfd open (at a high fd),
 *                               so /proc/PID/fd leads to it; we map it
 *                               read-only and copy it with
 *                               snapshot_take_live.  Neither the process
 *                               (it may be stopped) nor its collector does
 *                               anything.  Writes a profile database and a
 *                               gzipped pprof; --contents-dir also copies
 *                               each block's bytes (process_vm_readv).
 *   snapshot --list FILE        the named snapshots of a profile
 *   snapshot --name NAME FILE   one of them as pprof
 *
 * Here: the options and what is said.  The work: src/collector/
 * live_snapshot.c (the regions found, copied and written as a database),
 * contents.c (--contents-dir), src/export/snapshot_pprof.c (the pprof)
 * and src/store/snapshots.c (--list, --name).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "collector/collector.h"
#include "inspect/contents.h"
#include "inspect/live_snapshot.h"
#include "export/snapshot_pprof.h"
#include "store/reader.h"
#include "store/snapshots.h"
#include "util/err.h"
#include "util/args.h"
#include "util/human.h"
#include "util/proc.h"

#define SUBSYS "snapshot"

struct snap_opts {
	long pid;              /* -p */
	const char *proc_name; /* -n */
	const char *out;       /* -o */
	const char *db;        /* --db */
	const char *contents;  /* --contents-dir */
	const char *heap;      /* --heap; NULL: libc.malloc */
	int with_tags;
	int list;              /* --list */
	const char *snap_name; /* --name */
	int have_pid_filter;   /* --pid (with --list, --name) */
	long pid_filter;
	const char *file; /* PROFILE */
	int argc;         /* for the profile's record_cmdline */
	char **argv;
};

static void usage(FILE *f)
{
	fputs("usage: heapprof snapshot -p PID | -n NAME [-o FILE] [--db FILE]"
	      "\n"
	      "                        [--contents-dir DIR] [--with-tags]"
	      " [--heap H]\n"
	      "       heapprof snapshot --list FILE [--pid P]\n"
	      "       heapprof snapshot --name NAME FILE [-o FILE]"
	      " [--with-tags] [--pid P]\n"
	      "                        [--heap H]\n"
	      "\n"
	      "Every live block of a process that heapprof profiles (under"
	      " 'heapprof record',\n"
	      "exact with -i 1), read from the outside: the process may even"
	      " be stopped.\n"
	      "\n"
	      "  -p PID             the process\n"
	      "  -n NAME            your process whose command name is NAME\n"
	      "  -o, --output FILE  the gzipped pprof (default:"
	      " heapprof.snapshot.PID.pb.gz;\n"
	      "                     with --name: FILE without .db, then"
	      " .NAME.pb.gz)\n"
	      "  --db FILE          the profile database (default:"
	      " heapprof.snapshot.PID.db)\n"
	      "  --contents-dir DIR write each block's bytes to DIR/0xADDRESS"
	      " (needs ptrace\n"
	      "                     rights over the process)\n"
	      "  --with-tags        one pprof sample per block, labelled with"
	      " its address,\n"
	      "                     timestamp and thread\n"
	      "  --heap H           the heap in the pprof (default"
	      " libc.malloc)\n"
	      "  --list FILE        the named snapshots of profile FILE\n"
	      "  --name NAME FILE   write snapshot NAME of profile FILE as"
	      " pprof\n"
	      "  --pid P            with --list or --name: only process P\n",
	      f);
}

/* One option at argv[*i]: 0 handled, 1 not an option, -1 error. */
static int parse_opt(int argc, char **argv, int *i, void *ctx)
{
	struct snap_opts *o = ctx;
	int missing = 0;
	const char *v;

	if ((v = opt_value(argc, argv, i, "-p", &missing))) {
		if (opt_parse_long(v, &o->pid) < 0 || o->pid <= 0 ||
		    o->pid > INT_MAX) {
			hp_err(SUBSYS, "invalid pid '%s'", v);
			return -1;
		}
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "-n", &missing)))
		return opt_nonempty(SUBSYS, v, "empty process name",
		                    &o->proc_name);
	if ((v = opt_value(argc, argv, i, "-o", &missing)) ||
	    (v = opt_value(argc, argv, i, "--output", &missing)))
		return opt_nonempty(SUBSYS, v, "empty output path", &o->out);
	if ((v = opt_value(argc, argv, i, "--db", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --db path", &o->db);
	if ((v = opt_value(argc, argv, i, "--contents-dir", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --contents-dir",
		                    &o->contents);
	if ((v = opt_value(argc, argv, i, "--heap", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --heap", &o->heap);
	if ((v = opt_value(argc, argv, i, "--name", &missing))) {
		if (!v[0] || strlen(v) >= HP_SNAPSHOT_NAME_MAX) {
			hp_err(SUBSYS, "invalid --name '%s' (1 to %d bytes)", v,
			       HP_SNAPSHOT_NAME_MAX - 1);
			return -1;
		}
		o->snap_name = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "--pid", &missing))) {
		o->have_pid_filter = 1;
		return opt_parse_pid(SUBSYS, v, &o->pid_filter);
	}
	if (missing) {
		hp_err(SUBSYS, "option '%s' needs a value", argv[*i]);
		return -1;
	}
	if (!strcmp(argv[*i], "--with-tags")) {
		o->with_tags = 1;
		return 0;
	}
	if (!strcmp(argv[*i], "--list")) {
		o->list = 1;
		return 0;
	}
	return 1;
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, struct snap_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->argc = argc;
	o->argv = argv;
	size_t n;
	int rc = opt_walk(SUBSYS, argc, argv, parse_opt, o, usage, &o->file, 1,
	                  &n);
	if (rc)
		return rc;
	int live = o->pid || o->proc_name;
	int stored = o->list || o->snap_name;
	const char *bad = NULL;
	if (o->pid && o->proc_name)
		bad = "-p and -n exclude each other";
	else if (o->list && o->snap_name)
		bad = "--list and --name exclude each other";
	else if (live && stored)
		bad = "-p/-n take a snapshot now; --list and --name read a "
		      "profile: not both";
	else if (!live && !stored)
		bad = "need -p PID, -n NAME, --list FILE or --name NAME FILE "
		      "(see heapprof snapshot --help)";
	else if (live && o->file)
		bad = "-p/-n take no FILE (--db names the profile written)";
	else if (live && o->have_pid_filter)
		bad = "--pid goes with --list and --name (-p names the "
		      "process)";
	else if (stored && !o->file)
		bad = "missing FILE (the profile to read)";
	else if (stored && (o->db || o->contents))
		bad = "--db and --contents-dir go with -p/-n";
	else if (o->list && (o->out || o->with_tags || o->heap))
		bad = "--list takes no -o, --with-tags or --heap";
	if (bad) {
		hp_err(SUBSYS, "%s", bad);
		return 2;
	}
	return 0;
}

/* ---- snapshot -p / -n --------------------------------------------------- */

static void print_summary(pid_t pid, const struct snapshot *snap,
                          uint64_t interval)
{
	char comm[64], hb[HP_FMT_BYTES_MAX], hc[HP_FMT_BYTES_MAX];
	uint64_t bytes = 0, charged = 0;

	for (size_t i = 0; i < snap->dump.nblocks; i++) {
		bytes += snap->dump.blocks[i].size;
		charged += snap->dump.blocks[i].charged;
	}
	proc_comm(pid, comm, sizeof(comm));
	printf("snapshot of pid %d (%s): %zu block%s, %s, %" PRIu64
	       " in flight; ",
	       (int)pid, comm, snap->dump.nblocks,
	       snap->dump.nblocks == 1 ? "" : "s",
	       hp_fmt_bytes(hb, sizeof(hb), (int64_t)bytes),
	       snap->blocks_in_flight);
	if (interval <= 1)
		printf("interval: every allocation\n");
	else
		printf("interval: sampled every %" PRIu64
		       " bytes: the blocks are the sampled ones (estimated "
		       "live: %s)\n",
		       interval,
		       hp_fmt_bytes(hc, sizeof(hc), (int64_t)charged));
}

/* Says what --contents-dir did; 0 if every block was written, else 1. */
static int report_contents(const struct contents_result *c, pid_t pid,
                           const char *dir)
{
	switch (c->status) {
	case CONTENTS_DENY:
		hp_err(SUBSYS,
		       "cannot read the memory of pid %d: ptrace access denied "
		       "(same user and kernel.yama.ptrace_scope=0, or "
		       "CAP_SYS_PTRACE); no contents written",
		       (int)pid);
		return 1;
	case CONTENTS_GONE:
		hp_err(SUBSYS,
		       "cannot read the memory of pid %d: the process is "
		       "gone; no contents written",
		       (int)pid);
		return 1;
	case CONTENTS_ERROR:
		hp_err(SUBSYS, "--contents-dir %s: %s", dir, strerror(c->err));
		return 1;
	}
	printf("wrote the contents of %zu block%s to %s/", c->written,
	       c->written == 1 ? "" : "s", dir);
	if (c->custom)
		printf("; skipped %zu block%s of custom heaps (their "
		       "addresses are ids, not memory)",
		       c->custom, c->custom == 1 ? "" : "s");
	printf("\n");
	if (c->unreadable) {
		hp_err(SUBSYS,
		       "%zu block%s could not be read (freed while the "
		       "process ran?)",
		       c->unreadable, c->unreadable == 1 ? "" : "s");
		return 1;
	}
	return 0;
}

static int run_live(const struct snap_opts *o)
{
	pid_t pid = (pid_t)o->pid;
	struct live_snapshot ls;
	char *db_path = NULL, *out = NULL, *me = NULL;
	int rc = 1;

	memset(&ls, 0, sizeof(ls));
	if (o->proc_name &&
	    live_snapshot_find(o->proc_name, &pid, ls.why, sizeof(ls.why))) {
		hp_err(SUBSYS, "%s", ls.why);
		goto out;
	}
	int err = live_snapshot_open(pid, &ls);
	if (err)
		hp_err(SUBSYS, "%s", err == -ENOMEM ? "out of memory" : ls.why);
	if (err)
		goto out;
	err = live_snapshot_take(&ls);
	if (err) {
		hp_err(SUBSYS, "pid %d: reading its region: %s", (int)pid,
		       strerror(-err));
		goto out;
	}
	/* The contents right after the table: the process may run on. */
	struct contents_result ct = {0};
	if (o->contents &&
	    contents_write(pid, ls.snap.dump.blocks, ls.snap.dump.nblocks,
	                   o->contents, &ct) < 0) {
		hp_err(SUBSYS, "out of memory");
		goto out;
	}
	/* asprintf leaves its pointer undefined on failure: each is reset
	 * on its own, and db_path freed if only out failed. */
	if (o->db ? !(db_path = strdup(o->db))
	          : asprintf(&db_path, "heapprof.snapshot.%d.db", (int)pid) < 0)
		db_path = NULL;
	else if (o->out ? !(out = strdup(o->out))
	                : asprintf(&out, "heapprof.snapshot.%d.pb.gz",
	                           (int)pid) < 0) {
		free(db_path);
		db_path = out = NULL;
	}
	if (!db_path || !(me = hp_join_args("heapprof", o->argc, o->argv))) {
		hp_err(SUBSYS, "out of memory");
		goto out;
	}
	uint64_t interval = live_snapshot_interval(&ls);
	size_t nsamples = 0;
	err = live_snapshot_write_db(&ls, db_path, me);
	if (err)
		hp_err(SUBSYS, "no snapshot written: %s", ls.why);
	if (err || snapshot_pprof_of_db(db_path, out, o->heap,
	                                o->with_tags ? SNAPSHOT_PPROF_TAGS : 0,
	                                ls.wall, &nsamples, NULL, SUBSYS) < 0)
		goto out;
	print_summary(pid, &ls.snap, interval);
	printf("wrote %s and %s (%zu sample%s)\n", db_path, out, nsamples,
	       nsamples == 1 ? "" : "s");
	rc = o->contents ? report_contents(&ct, pid, o->contents) : 0;
out:
	live_snapshot_close(&ls);
	free(db_path);
	free(out);
	free(me);
	return rc;
}

/* ---- --list / --name ----------------------------------------------------- */

/* One line of --list; the header before the first. */
static void list_row(void *ctx, const struct snapshot_row *r)
{
	size_t *shown = ctx;
	char in_flight[24] = "-";

	if (!(*shown)++)
		printf("%-8s %5s  %-24s %12s %10s %14s  %s\n", "PID", "DUMP",
		       "NAME", "TIME", "BLOCKS", "BYTES", "IN FLIGHT");
	if (r->in_flight >= 0)
		snprintf(in_flight, sizeof(in_flight), "%" PRId64,
		         r->in_flight);
	printf("%-8" PRId64 " %5zu  %-24s %10.3f s %10" PRId64 " %14" PRId64
	       "  %s\n",
	       r->p->pid, r->dump, r->d->name,
	       (double)(r->d->ts - r->p->start_ts) / 1e9, r->nblocks, r->bytes,
	       in_flight);
}

static int run_list(sqlite3 *db, const struct snap_opts *o)
{
	size_t shown = 0, nsel = 0;
	long pid = o->have_pid_filter ? o->pid_filter : 0;

	if (snapshots_list(db, SUBSYS, pid, list_row, &shown, &nsel))
		return 1;
	if (o->have_pid_filter && nsel == 0) {
		hp_err(SUBSYS, "%s: no process with pid %ld", o->file,
		       o->pid_filter);
		return 1;
	}
	if (!shown)
		printf("no named snapshots in %s\n", o->file);
	return 0;
}

/* FILE without ".db", then ".NAME.pb.gz" ('/' in NAME made '_'). */
static char *name_output(const char *file, const char *name)
{
	size_t n = strlen(file);
	char *r = NULL, *safe = strdup(name);

	if (!safe)
		return NULL;
	for (char *c = safe; *c; c++)
		if (*c == '/' || (unsigned char)*c < 0x20)
			*c = '_';
	int cut = n > 3 && !strcmp(file + n - 3, ".db") ? 3 : 0;
	if (asprintf(&r, "%.*s.%s.pb.gz", (int)(n - cut), file, safe) < 0)
		r = NULL;
	free(safe);
	return r;
}

static int run_name(sqlite3 *db, const struct snap_opts *o)
{
	struct rd_stacks s;
	struct snapshot_pick pk;
	char *out = NULL;

	memset(&s, 0, sizeof(s));
	int err = snapshots_pick(db, SUBSYS, o->snap_name,
	                         o->have_pid_filter ? o->pid_filter : 0, &pk);
	if (!err && o->have_pid_filter && pk.nsel == 0) {
		hp_err(SUBSYS, "%s: no process with pid %ld", o->file,
		       o->pid_filter);
		err = -1;
	} else if (!err && pk.nmatch == 0) {
		hp_err(SUBSYS,
		       "%s: no snapshot named '%s'%s (heapprof snapshot --list "
		       "%s shows them)",
		       o->file, o->snap_name,
		       o->have_pid_filter ? " in that process" : "", o->file);
		err = -1;
	} else if (!err && pk.nmatch > 1) {
		hp_err(SUBSYS,
		       "%s: processes %s have a snapshot named '%s': choose "
		       "one with --pid",
		       o->file, pk.pids, o->snap_name);
		err = -1;
	}
	if (!err)
		err = rd_load_stacks(db, SUBSYS, &s);
	if (!err && !(out = o->out ? strdup(o->out)
	                           : name_output(o->file, o->snap_name))) {
		hp_err(SUBSYS, "out of memory");
		err = -1;
	}
	if (!err) {
		struct snapshot_pprof_job j = {
		        .db = db,
		        .s = &s,
		        .p = pk.p,
		        .d = &pk.dumps[pk.k],
		        .dump_index = (size_t)pk.k + 1,
		        .ndumps = pk.ndumps,
		        .file = o->file,
		        .heap = o->heap,
		        .with_tags = o->with_tags,
		        .path = out,
		};
		err = snapshot_pprof_write(&j, SUBSYS);
		if (!err)
			printf("wrote %s: process %" PRId64
			       ", snapshot '%s' (dump %ld of %zu), %zu "
			       "sample%s, from %s\n",
			       out, pk.p->pid, o->snap_name, pk.k + 1,
			       pk.ndumps, j.nsamples,
			       j.nsamples == 1 ? "" : "s",
			       j.from_blocks ? "its blocks"
			                     : "per-stack counters");
	}
	free(out);
	rd_free_stacks(&s);
	snapshots_pick_free(&pk);
	return err ? 1 : 0;
}

int cmd_snapshot(int argc, char **argv)
{
	struct snap_opts o;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	if (o.pid || o.proc_name) {
		rc = run_live(&o);
	} else {
		sqlite3 *db = rd_open(o.file, SUBSYS);
		if (!db)
			return 1;
		rc = o.list ? run_list(db, &o) : run_name(db, &o);
		sqlite3_close(db);
	}
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	return rc;
}
