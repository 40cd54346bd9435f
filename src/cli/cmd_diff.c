/*
 * `heapprof diff A B`: which call stacks grew or shrank from profile A to
 * profile B, where A and B are two files or two dumps of one file
 * (docs/PPROF.md):
 *
 *   heapprof diff OLD.db NEW.db          last dump of each
 *   heapprof diff FILE@1 FILE@3          dumps 1 and 3 of FILE
 *   heapprof diff FILE --dumps 1,3       the same
 *
 * Stacks of two files have different ids, so stacks are matched by what
 * they mean: per frame, the module's file name and the function name (the
 * frame's address in its module when the name is unknown).  Stacks that
 * differ only in call sites inside the same functions are one stack here
 * (analysis/aggregate.h, which also loads each side's dump).
 *
 * The text report shows the totals and the stacks and functions that grew
 * and shrank most in one view; -o writes a pprof file following pprof's
 * -diff_base convention (B's samples, plus A's negated and labelled
 * pprof::base=true), so `go tool pprof -top OUT` shows B - A.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/procid.h"
#include "export/pprof_file.h"
#include "analysis/aggregate.h"
#include "store/reader.h"
#include "util/err.h"

#define SUBSYS "diff"

#define PATH_FRAMES 4 /* callers shown under each stack */

static const char *const view_help[RD_NVIEWS] = {
        "bytes allocated and not freed at the dump",
        "bytes allocated since the start, freed or not",
        "objects allocated and not freed at the dump",
        "objects allocated since the start, freed or not",
};

/* One side of the comparison: what the options chose, and what it is. */
struct side {
	struct dump_ref dump;
	int have_pid;
	struct procsel pid;
	struct ag_side x; /* the file, then what was loaded of it */
};

struct diff_opts {
	struct side side[2]; /* A, B */
	const char *out;
	const char *heap;
	enum rd_view view;
	long top;
	/* --dumps A,B: the value, split at its comma; the dump refs of
	 * the sides point into it. */
	char dumps_buf[2 * HP_SNAPSHOT_NAME_MAX + 2];
};

/* ---- arguments ---------------------------------------------------------- */

static void diff_usage(FILE *f)
{
	fputs("usage: heapprof diff A B [options]\n"
	      "       heapprof diff FILE --dumps N,M [options]\n"
	      "\n"
	      "What grew and shrank from A to B.  A and B are profile files,"
	      " or FILE@N\n"
	      "for the N-th dump of FILE (1 = first, -1 = last; default:"
	      " the last)\n"
	      "or FILE@NAME for its snapshot named NAME"
	      " (heapprof_take_named_snapshot).\n"
	      "\n"
	      "  --dumps N,M   dump N of A and dump M of B (with one FILE:"
	      " both in it);\n"
	      "                a dump or a snapshot's name each\n"
	      "  --view VIEW   space (default), alloc_space, objects or"
	      " alloc_objects\n"
	      "  --top N       show the N largest changes (default 10)\n"
	      "  --heap H      heap H (default libc.malloc)\n"
	      "  --pid P[,Q]   process P in A (and Q in B; default: P), each a"
	      " pid or PID.N;"
	      " needed when a\n"
	      "                file holds several processes\n"
	      "  -o OUT.pb.gz  also write the difference as a pprof profile"
	      " (B plus A\n"
	      "                negated, labelled pprof::base=true)\n",
	      f);
}

struct raw_args {
	const char *operand[2];
	size_t noperands;
	int have_dumps;
	struct dump_ref dumps[2];
	int have_pid;
	struct procsel pids[2];
};

/* One option at argv[*i]: 0 handled, 1 not an option, -1 error. */
struct diff_parse {
	struct diff_opts *o;
	struct raw_args *r;
};

static int parse_opt(int argc, char **argv, int *i, void *ctx)
{
	struct diff_opts *o = ((struct diff_parse *)ctx)->o;
	struct raw_args *r = ((struct diff_parse *)ctx)->r;
	int missing = 0;
	const char *v;

	if ((v = opt_value(argc, argv, i, "--view", &missing)))
		return opt_parse_view(SUBSYS, v, &o->view);
	if ((v = opt_value(argc, argv, i, "--top", &missing)))
		return opt_parse_top(SUBSYS, v, &o->top);
	if ((v = opt_value(argc, argv, i, "--heap", &missing))) {
		o->heap = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "-o", &missing)) ||
	    (v = opt_value(argc, argv, i, "--output", &missing)))
		return opt_nonempty(SUBSYS, v, "empty output path", &o->out);
	if ((v = opt_value(argc, argv, i, "--dumps", &missing))) {
		const char *comma = strchr(v, ',');
		char *buf = o->dumps_buf;
		if (!comma || strlen(v) >= sizeof(o->dumps_buf)) {
			hp_err(SUBSYS,
			       "invalid --dumps '%s' (want N,M: 1 = first "
			       "dump, -1 = last, or two snapshot names)",
			       v);
			return -1;
		}
		snprintf(buf, sizeof(o->dumps_buf), "%s", v);
		char *second = buf + (comma - v);
		*second++ = '\0';
		if (opt_parse_dump(SUBSYS, buf, &r->dumps[0]) < 0 ||
		    opt_parse_dump(SUBSYS, second, &r->dumps[1]) < 0)
			return -1;
		r->have_dumps = 1;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "--pid", &missing))) {
		/* P or P,Q, each a pid or PID.N (cli/procid.h). */
		char buf[64];
		const char *comma = strchr(v, ',');
		size_t n = comma ? (size_t)(comma - v) : strlen(v);
		if (n >= sizeof(buf) || (comma && strchr(comma + 1, ','))) {
			hp_err(SUBSYS, "invalid --pid '%s' (want P or P,Q)", v);
			return -1;
		}
		memcpy(buf, v, n);
		buf[n] = '\0';
		if (procsel_parse(SUBSYS, buf, &r->pids[0]) < 0 ||
		    (comma &&
		     procsel_parse(SUBSYS, comma + 1, &r->pids[1]) < 0))
			return -1;
		if (!comma)
			r->pids[1] = r->pids[0];
		r->have_pid = 1;
		return 0;
	}
	if (missing) {
		hp_err(SUBSYS, "option '%s' needs a value", argv[*i]);
		return -1;
	}
	return 1;
}

/*
 * Split "FILE@N" into file and dump, unless the whole operand names an
 * existing file.  *file is the operand itself or a malloc'ed copy (*own).
 */
static int split_operand(const char *op, const char **file,
                         struct dump_ref *dump, char **own)
{
	struct stat sb;
	const char *at = strrchr(op, '@');

	*file = op;
	*own = NULL;
	long n;
	if (stat(op, &sb) == 0 || !at || at == op)
		return 0;
	if (!at[1] || (opt_parse_long(at + 1, &n) == 0 && n == 0)) {
		hp_err(SUBSYS,
		       "invalid dump in '%s' (want @1 for the first dump, "
		       "@-1 for the last, or @NAME for a snapshot)",
		       op);
		return -1;
	}
	if (opt_parse_dump(SUBSYS, at + 1, dump) < 0)
		return -1;
	*own = strndup(op, (size_t)(at - op));
	if (!*own) {
		hp_err(SUBSYS, "out of memory");
		return -1;
	}
	*file = *own;
	return 0;
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, struct diff_opts *o,
                      char *owned[2])
{
	struct raw_args r;

	memset(o, 0, sizeof(*o));
	memset(&r, 0, sizeof(r));
	o->view = RD_SPACE;
	o->top = 10;
	o->heap = "libc.malloc";
	struct diff_parse dp = {o, &r};
	int rc = opt_walk(SUBSYS, argc, argv, parse_opt, &dp, diff_usage,
	                  r.operand, 2, &r.noperands);
	if (rc)
		return rc;
	if (r.noperands == 0 || (r.noperands == 1 && !r.have_dumps)) {
		hp_err(SUBSYS, "need two profiles (A B, FILE@N FILE@M) or "
		               "FILE --dumps N,M (see heapprof diff --help)");
		return 2;
	}
	for (int k = 0; k < 2; k++) {
		struct side *sd = &o->side[k];
		const char *op = r.operand[r.noperands == 2 ? k : 0];
		if (split_operand(op, &sd->x.file, &sd->dump, &owned[k]) < 0)
			return 2;
		if (r.have_dumps && r.noperands == 2 &&
		    (sd->dump.index || sd->dump.name)) {
			hp_err(SUBSYS,
			       "'%s': a dump given both with @ and "
			       "--dumps",
			       op);
			return 2;
		}
		if (r.have_dumps)
			sd->dump = r.dumps[k];
		sd->have_pid = r.have_pid;
		sd->pid = r.pids[k];
	}
	return 0;
}

/* ---- loading ------------------------------------------------------------ */

static int pick_process(struct side *sd)
{
	long i = procid_pick_one(SUBSYS, sd->x.file,
	                         sd->have_pid ? &sd->pid : NULL, sd->x.procs,
	                         sd->x.nprocs);
	sd->x.proc = i >= 0 ? &sd->x.procs[i] : NULL;
	return sd->x.proc ? 0 : -1;
}

static int pick_dump(struct side *sd)
{
	struct ag_side *x = &sd->x;

	if (rd_load_dumps(x->db, SUBSYS, x->proc->upid, &x->dumps, &x->ndumps) <
	    0)
		return -1;
	long idx = procid_pick_dump(SUBSYS, x->file, x->proc, x->dumps,
	                            x->ndumps, &sd->dump);
	if (idx < 0)
		return -1;
	x->dump_index = (size_t)idx + 1;
	return 0;
}

/* Open and load side k (sharing the file of side 0 when it is the same). */
static int load_side(struct diff_opts *o, int k)
{
	struct side *sd = &o->side[k];

	if (ag_side_open(&sd->x, k ? &o->side[0].x : NULL, SUBSYS) < 0 ||
	    pick_process(sd) < 0 || pick_dump(sd) < 0)
		return -1;
	return 0;
}

static int load_samples(struct diff_opts *o)
{
	int found[2];

	for (int k = 0; k < 2; k++) {
		found[k] = ag_side_has_heap(&o->side[k].x, o->heap, SUBSYS);
		if (found[k] < 0)
			return -1;
	}
	/* libc.malloc is there even when nothing was allocated. */
	if (!found[0] && !found[1] && strcmp(o->heap, "libc.malloc") != 0) {
		hp_err(SUBSYS, "no heap '%s' in either profile", o->heap);
		return -1;
	}
	for (int k = 0; k < 2; k++)
		if (ag_side_load(&o->side[k].x, o->heap, SUBSYS) < 0)
			return -1;
	return 0;
}

/* ---- printing ----------------------------------------------------------- */

static void fmt_rel(char *buf, size_t len, int64_t a, int64_t b)
{
	if (a == b)
		snprintf(buf, len, "0.0%%");
	else if (a == 0)
		snprintf(buf, len, "new");
	else if (b == 0)
		snprintf(buf, len, "gone");
	else
		snprintf(buf, len, "%+.1f%%",
		         100.0 * ((double)b - (double)a) / (double)a);
}

/* A function of the tree: its name ("0x<rel_pc>" if it has none) and its
 * module's (and source file's) name. */
static void print_func(const struct tree *g, int32_t node)
{
	int32_t f = g->top.func.v[node];
	const char *file = tree_func_file(g, f);
	char pc[32];

	printf("%s (%s", tree_func_short(g, f, pc, sizeof(pc)),
	       ag_basename(tree_func_module(g, f)));
	if (file)
		printf(" %s", ag_basename(file));
	printf(")\n");
}

/* The leaf of e's stack on the first line, then up to PATH_FRAMES callers
 * (the nodes of the heap model's tree). */
static void print_stack(const struct diff_opts *o, const struct ag_entry *e,
                        int callers)
{
	struct tree *g = o->side[e->rep_side].x.tree;
	int32_t node = tree_leaf_node(g, e->rep_callsite);
	int depth = 0, shown = 0;

	if (node < 0) {
		printf("?\n");
		return;
	}
	print_func(g, node);
	for (node = g->top.parent.v[node]; callers && node >= 0;
	     node = g->top.parent.v[node], depth++) {
		if (shown < PATH_FRAMES) {
			printf("%*s<- ", 61, "");
			print_func(g, node);
			shown++;
		}
	}
	if (depth > shown)
		printf("%*s<- ... %d more frame%s\n", 61, "", depth - shown,
		       depth - shown == 1 ? "" : "s");
}

static void print_changes(const struct diff_opts *o, const struct ag_table *t,
                          const char *what, int grow)
{
	enum rd_view v = o->view;
	size_t n = 0, shown = 0;
	size_t *order = ag_diff_order(t, v, grow, &n);
	char rel[32];

	if (!order) {
		hp_err(SUBSYS, "out of memory");
		return;
	}
	printf("\n  Top %ld %s %s by %s:\n", o->top,
	       grow ? "growing" : "shrinking", what, rd_view_names[v]);
	if (n == 0) {
		printf("    (none)\n");
		free(order);
		return;
	}
	printf("    %3s  %12s  %8s  %12s  %12s  %s\n", "#", "change",
	       "relative", "A", "B", "leaf first");
	for (size_t i = 0; i < n && shown < (size_t)o->top; i++, shown++) {
		const struct ag_entry *e = &t->e[order[i]];
		fmt_rel(rel, sizeof(rel), e->v[0][v], e->v[1][v]);
		printf("    %3zu  %+12" PRId64 "  %8s  %12" PRId64
		       "  %12" PRId64 "  ",
		       i + 1, ag_delta(e, v), rel, e->v[0][v], e->v[1][v]);
		print_stack(o, e, !strcmp(what, "stacks"));
	}
	if (n > shown)
		printf("    ... %zu more\n", n - shown);
	free(order);
}

static void print_side(const char *tag, const struct ag_side *sd)
{
	const struct rd_dump *d = &sd->dumps[sd->dump_index - 1];
	char id[48];

	procid_format(sd->procs, sd->nprocs, (size_t)(sd->proc - sd->procs), id,
	              sizeof(id));
	printf("  %s  %s: process %s (%s), dump %zu of %zu (%s) at "
	       "+%.3f s\n",
	       tag, sd->file, id, ag_basename(sd->proc->name), sd->dump_index,
	       sd->ndumps, d->reason,
	       (double)(d->ts - sd->proc->start_ts) / 1e9);
}

static void print_report(const struct diff_opts *o,
                         const struct ag_table *stacks,
                         const struct ag_table *fns)
{
	const struct ag_side *a = &o->side[0].x, *b = &o->side[1].x;
	char rel[32];

	printf("Difference B - A, heap %s, view %s (%s%s)\n", o->heap,
	       rd_view_names[o->view], view_help[o->view],
	       o->view == RD_SPACE || o->view == RD_ALLOC_SPACE ? "; in bytes"
	                                                        : "");
	print_side("A", a);
	print_side("B", b);
	if (a->proc->interval != b->proc->interval)
		printf("  note: sampling intervals differ (%" PRId64
		       " and %" PRId64 " bytes)\n",
		       a->proc->interval, b->proc->interval);
	if (!a->s->nsymbols != !b->s->nsymbols)
		printf("  note: only %s was symbolized offline (heapprof"
		       " symbolize): its functions have source files and"
		       " inlined frames the other's lack, so such stacks do"
		       " not match\n",
		       a->s->nsymbols ? "A" : "B");
	printf("\n    %-14s  %12s  %12s  %12s  %8s\n", "view", "A", "B",
	       "change", "relative");
	for (int v = 0; v < RD_NVIEWS; v++) {
		fmt_rel(rel, sizeof(rel), a->total[v], b->total[v]);
		printf("    %-14s  %12" PRId64 "  %12" PRId64 "  %+12" PRId64
		       "  %8s\n",
		       rd_view_names[v], a->total[v], b->total[v],
		       b->total[v] - a->total[v], rel);
	}
	print_changes(o, stacks, "stacks", 1);
	print_changes(o, stacks, "stacks", 0);
	print_changes(o, fns, "functions (self)", 1);
	print_changes(o, fns, "functions (self)", 0);
}

/* ---- pprof output ------------------------------------------------------- */

static void side_dump(const struct ag_side *sd, struct ppf_dump *x)
{
	*x = (struct ppf_dump){.file = sd->file,
	                       .db = sd->db,
	                       .s = sd->s,
	                       .proc = sd->proc,
	                       .dump = &sd->dumps[sd->dump_index - 1],
	                       .index = sd->dump_index,
	                       .ndumps = sd->ndumps};
}

static int write_pprof(const struct diff_opts *o)
{
	struct ppf_dump a, b;

	side_dump(&o->side[0].x, &a);
	side_dump(&o->side[1].x, &b);
	int err = ppf_write_diff(&a, &b, o->heap, o->out, SUBSYS);
	if (!err)
		printf("\nwrote %s (go tool pprof -top %s)\n", o->out, o->out);
	return err;
}

int cmd_diff(int argc, char **argv)
{
	struct diff_opts o;
	struct ag_diff d;
	char *owned[2] = {NULL, NULL};
	int rc = parse_args(argc, argv, &o, owned);
	int err = 0;

	if (rc) {
		free(owned[0]);
		free(owned[1]);
		return rc == 1 ? 0 : 2;
	}
	ag_diff_init(&d);
	for (int k = 0; !err && k < 2; k++)
		err = load_side(&o, k);
	if (!err)
		err = load_samples(&o);
	for (int k = 0; !err && k < 2; k++)
		if ((err = ag_diff_add(&d, k, o.side[k].x.tree,
		                       o.side[k].x.samples,
		                       o.side[k].x.nsamples)) < 0)
			hp_err(SUBSYS, "out of memory");
	if (!err)
		print_report(&o, &d.stacks, &d.fns);
	if (!err && o.out)
		err = write_pprof(&o);
	ag_diff_free(&d);
	ag_side_free(&o.side[1].x);
	ag_side_free(&o.side[0].x);
	free(owned[0]);
	free(owned[1]);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	return err ? 1 : 0;
}
