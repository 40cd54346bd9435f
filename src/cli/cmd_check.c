/*
 * `heapprof check FILE [--baseline OLD.db] RULE... [-f RULES]`: a memory
 * gate for CI.  Each rule (analysis/check.h, docs/CHECK.md) is measured on
 * one heap (libc.malloc unless --heap) summed over the processes of the
 * profile (or those of --pid), each at its chosen dump (the last unless
 * --dump), from the same per-callsite state every command reads
 * (state_at_dump, model/state.h); leaks from the blocks live at the final dump,
 * as `heapprof report` finds them (state_leaks).  A sampled value is an
 * estimate: a rule fails only when the whole confidence interval breaks it. One
 * verdict line per rule, a summary line, JUnit XML on request.
 *
 * Exit status: 0 every rule holds, 1 one fails, 2 a bad rule, option or
 * file (one line saying which).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/procid.h"
#include "model/state.h"
#include "model/tree.h"
#include "analysis/check.h"
#include "export/junit.h"
#include "store/trace_read.h"
#include "util/err.h"
#include "util/human.h"

#define SUBSYS "check"

struct check_opts {
	const char *file, *baseline, *junit, *heap;
	double confidence; /* a fraction, (0.5, 1) */
	struct dump_ref dump;
	int have_pid;
	struct procsel pid;
	const char **rules, **rule_files;
	size_t nrules, nfiles;
};

static void check_usage(FILE *f)
{
	fputs("usage: heapprof check FILE [--baseline OLD.db] RULE..."
	      " [-f RULES] [options]\n"
	      "\n"
	      "  RULE           e.g. 'space <= 64MiB', 'space(parse_*) <="
	      " 10MiB',\n"
	      "                 'objects(main>cache_*) < 1000', 'leaks == 0',\n"
	      "                 'alloc_space grows <= 5%' (docs/CHECK.md)\n"
	      "  -f RULES       read rules from a file, one per line (# starts"
	      " a comment)\n"
	      "  --baseline OLD.db\n"
	      "                 the profile grows rules compare with\n"
	      "  --confidence C a failure must hold at C percent confidence"
	      " (default 99.9)\n"
	      "  --junit OUT.xml\n"
	      "                 also write the verdicts as JUnit XML\n"
	      "  --dump N       use the N-th dump of each process (1 = first,"
	      " -1 = last;\n"
	      "                 peak, end, or a snapshot's name; default:"
	      " the last)\n"
	      "  --pid P        only the processes of pid P; P.N: the N-th of"
	      " them\n"
	      "  --heap H       the heap to measure (default libc.malloc)\n"
	      "\n"
	      "A failing rule prints its 3 largest stacks and the heapprof"
	      " diff to run.\n"
	      "Exit status: 0 all rules hold, 1 a rule fails, 2 a bad rule"
	      " (one whose pattern\n"
	      "matches no function in the profile too), option or file.\n",
	      f);
}

static int parse_confidence(const char *v, double *out)
{
	char *end;
	double c = strtod(v, &end);
	if (end != v && *end == '%')
		end++;
	if (end == v || *end || !(c > 50 && c < 100)) {
		hp_err(SUBSYS,
		       "invalid --confidence '%s' (want a percentage above 50"
		       " and below 100, such as 99.9)",
		       v);
		return -1;
	}
	*out = c / 100;
	return 0;
}

static int parse_opt(int argc, char **argv, int *i, void *ctx)
{
	struct check_opts *o = ctx;
	int missing = 0;
	const char *v;

	if ((v = opt_value(argc, argv, i, "--baseline", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --baseline",
		                    &o->baseline);
	if ((v = opt_value(argc, argv, i, "--junit", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --junit", &o->junit);
	if ((v = opt_value(argc, argv, i, "--heap", &missing)))
		return opt_nonempty(SUBSYS, v, "empty --heap", &o->heap);
	if ((v = opt_value(argc, argv, i, "--confidence", &missing)))
		return parse_confidence(v, &o->confidence);
	if ((v = opt_value(argc, argv, i, "--dump", &missing)))
		return opt_parse_dump(SUBSYS, v, &o->dump);
	if ((v = opt_value(argc, argv, i, "--pid", &missing))) {
		o->have_pid = 1;
		return procsel_parse(SUBSYS, v, &o->pid);
	}
	if ((v = opt_value(argc, argv, i, "-f", &missing))) {
		o->rule_files[o->nfiles++] = v;
		return 0;
	}
	if (missing) {
		hp_err(SUBSYS, "option '%s' needs a value", argv[*i]);
		return -1;
	}
	return 1;
}

/* ---- measuring a profile ------------------------------------------------ */

/* The stacks a failing rule shows: its three largest in the rule's view,
 * as samples while measuring, then as text once the file's stacks are
 * known. */
#define TOP_STACKS 3

struct top_stacks {
	int64_t cs[TOP_STACKS];
	double v[TOP_STACKS];
	size_t n;
	char *text[TOP_STACKS]; /* "func < caller < ..." */
};

static void top_add(struct top_stacks *t, int64_t cs, double v)
{
	if (v <= 0)
		return;
	/* The same callsite in another process: one stack, added up. */
	for (size_t i = 0; i < t->n; i++)
		if (t->cs[i] == cs) {
			t->v[i] += v;
			v = -1;
		}
	if (v > 0 && t->n < TOP_STACKS) {
		t->cs[t->n] = cs;
		t->v[t->n++] = v;
	} else if (v > 0 && v > t->v[t->n - 1]) {
		t->cs[t->n - 1] = cs;
		t->v[t->n - 1] = v;
	}
	for (size_t i = 1; i < t->n; i++) /* largest first */
		for (size_t j = i; j > 0 && t->v[j] > t->v[j - 1]; j--) {
			double tv = t->v[j];
			int64_t tc = t->cs[j];
			t->v[j] = t->v[j - 1];
			t->cs[j] = t->cs[j - 1];
			t->v[j - 1] = tv;
			t->cs[j - 1] = tc;
		}
}

/* The stacks of t as text, innermost function first ("f < caller < ...",
 * cut at 400 bytes).  0 or -1 (out of memory). */
static int top_format(struct top_stacks *t, struct tree *g)
{
	for (size_t i = 0; i < t->n; i++) {
		char buf[400];
		size_t len = 0;
		int32_t n = tree_leaf_node(g, t->cs[i]);
		if (n < 0)
			return -1;
		buf[0] = '\0';
		for (; n >= 0 && len + 4 < sizeof(buf);
		     n = g->top.parent.v[n]) {
			int w = snprintf(buf + len, sizeof(buf) - len, "%s%s",
			                 len ? " < " : "",
			                 g->funcs[g->top.func.v[n]].name);
			len += w > 0 ? (size_t)w : 0;
		}
		if (len >= sizeof(buf) - 1)
			memcpy(buf + sizeof(buf) - 4, "...", 4);
		free(t->text[i]);
		if (!(t->text[i] = strdup(buf)))
			return -1;
	}
	return 0;
}

static void top_free(struct top_stacks *t, size_t n)
{
	for (size_t k = 0; t && k < n; k++)
		for (size_t i = 0; i < TOP_STACKS; i++)
			free(t[k].text[i]);
	free(t);
}

/* Add the samples x[0..n) of the rules that `leaks` selects to est.  0 or
 * -1 (message printed). */
static int add_samples(const struct ck_set *rs, int leaks, struct tree *g,
                       const struct rd_sample *x, size_t n, int64_t iv,
                       struct ck_est *est, struct top_stacks *top)
{
	for (size_t k = 0; k < rs->n; k++) {
		const struct ck_rule *r = &rs->r[k];
		if (r->leaks != leaks)
			continue;
		if (iv > est[k].iv)
			est[k].iv = iv;
		for (size_t i = 0; i < n; i++) {
			int m = ck_matches(r, g, x[i].callsite);
			if (m < 0) {
				hp_err(SUBSYS, "out of memory");
				return -1;
			}
			if (m)
				ck_est_add(&est[k], &x[i], r->v, iv);
			if (m && top)
				top_add(&top[k], x[i].callsite,
				        (double)x[i].v[r->v]);
		}
	}
	return 0;
}

static int measure_process(sqlite3 *db, struct tree *g, const char *file,
                           const struct rd_process *p,
                           const struct check_opts *o, const struct ck_set *rs,
                           int need_leaks, struct ck_est *est,
                           struct top_stacks *top)
{
	struct rd_dump *dumps = NULL;
	struct rd_sample *x = NULL;
	size_t nd = 0, nx = 0;
	int64_t iv;
	int err = 0;

	if (rd_load_dumps(db, SUBSYS, p->upid, &dumps, &nd) < 0)
		return -1;
	if (nd) {
		long k = procid_pick_dump(SUBSYS, file, p, dumps, nd, &o->dump);
		err = k < 0 ? -1
		            : ck_heap_interval(db, SUBSYS, p, &dumps[k],
		                               o->heap, &iv);
		if (!err)
			err = state_at_dump(db, SUBSYS, p->upid, o->heap,
			                    dumps[k].ts, &x, &nx) < 0
			              ? -1
			              : 0;
		if (!err)
			err = add_samples(rs, 0, g, x, nx, iv, est, top);
		free(x);
	}
	if (!err && need_leaks) {
		struct tr_set leaks;
		struct tr_leak_src src;
		if (!p->has_exit) {
			hp_err(SUBSYS,
			       "%s: process %lld did not exit while profiled:"
			       " it has no leaks to check",
			       file, (long long)p->pid);
			err = -1;
		} else if (state_leaks(db, SUBSYS, p->upid, &leaks, &src) < 0) {
			err = -1;
		} else {
			const struct tr_heap *h = tr_set_find(&leaks, o->heap);
			err = ck_heap_interval(db, SUBSYS, p,
			                       nd ? &dumps[nd - 1] : NULL,
			                       o->heap, &iv);
			if (!err && h)
				err = add_samples(rs, 1, g, h->s, h->n, iv, est,
				                  top);
			tr_set_free(&leaks);
		}
	}
	rd_free_dumps(dumps, nd);
	return err;
}

/* The rules' values in file (the processes of --pid when use_pid).  0 or
 * -1 (message printed). */
static int measure(const char *file, int use_pid, const struct check_opts *o,
                   struct ck_set *rs, struct ck_est *est,
                   struct top_stacks *top)
{
	struct rd_stacks s;
	struct tree g;
	struct rd_process *procs = NULL;
	size_t n = 0, nsel = 0;
	int need_leaks = 0, err;

	for (size_t k = 0; k < rs->n; k++)
		need_leaks |= rs->r[k].leaks;
	sqlite3 *db = rd_open(file, SUBSYS);
	if (!db)
		return -1;
	err = rd_load_stacks(db, SUBSYS, &s) < 0 ? -1 : 0;
	if (!err && rd_load_processes(db, SUBSYS, &procs, &n) < 0) {
		rd_free_stacks(&s);
		err = -1;
	}
	if (err) {
		sqlite3_close(db);
		return -1;
	}
	if (tree_init(&g, &s) < 0 || ck_mark_matched(rs->r, rs->n, &g) < 0) {
		hp_err(SUBSYS, "out of memory");
		err = -1;
	}
	for (size_t i = 0; !err && i < n; i++) {
		if (use_pid && !procsel_match(&o->pid, procs, n, i))
			continue;
		nsel++;
		if (!procs[i].rejected_concurrent)
			err = measure_process(db, &g, file, &procs[i], o, rs,
			                      need_leaks, est, top);
	}
	if (!err && !nsel) {
		char sel[48];
		if (use_pid)
			procsel_format(&o->pid, sel, sizeof(sel));
		hp_err(SUBSYS,
		       use_pid ? "%s: no process with pid %s"
		               : "%s: no processes in this profile%s",
		       file, use_pid ? sel : "");
		err = -1;
	}
	for (size_t k = 0; !err && top && k < rs->n; k++)
		if (top_format(&top[k], &g) < 0) {
			hp_err(SUBSYS, "out of memory");
			err = -1;
		}
	tree_free(&g);
	rd_free_processes(procs, n);
	rd_free_stacks(&s);
	sqlite3_close(db);
	return err;
}

/* One testcase a rule, with what was measured: the verdict line in
 * system-out (a failure's message too), and the numbers as properties
 * (value, its uncertainty at the confidence, the limit; for grows the
 * baseline's value too), so that a CI can chart them. */
static int write_junit(const struct check_opts *o, const struct ck_set *rs,
                       char **lines, const int *fail, const struct ck_est *est,
                       const struct ck_est *base)
{
	struct junit_case *c = rs->n ? calloc(rs->n, sizeof(*c)) : NULL;
	if (!c) { /* (run refuses an empty rule set before) */
		hp_err(SUBSYS, "out of memory");
		return -1;
	}
	for (size_t k = 0; k < rs->n; k++) {
		const struct ck_rule *r = &rs->r[k];
		size_t i = 0;
		c[k].name = r->text;
		c[k].out = lines[k];
		c[k].fail = fail[k];
		c[k].prop[i].name = "value";
		c[k].prop[i++].v = r->grows ? est[k].v - base[k].v : est[k].v;
		c[k].prop[i].name = "sigma";
		c[k].prop[i++].v =
		        sqrt(est[k].var + (r->grows ? base[k].var : 0));
		c[k].prop[i].name = "confidence";
		c[k].prop[i++].v = o->confidence;
		c[k].prop[i].name = "limit";
		c[k].prop[i++].v = r->limit;
		if (r->grows) {
			c[k].prop[i].name = "baseline";
			c[k].prop[i++].v = base[k].v;
		}
		c[k].nprop = i;
	}
	int err = junit_write(o->junit, "heapprof check", "heapprof.check", c,
	                      rs->n, SUBSYS);
	free(c);
	return err;
}

/* After a FAIL line: where the value is (its largest stacks in FILE) and
 * how to see what changed. */
static void print_failure(const struct check_opts *o, const struct ck_rule *r,
                          const struct top_stacks *t)
{
	for (size_t i = 0; i < t->n; i++) {
		char a[HP_FMT_BYTES_MAX];
		printf("  %s%-24s %s\n", i ? "            " : "top stacks: ",
		       ck_fmt_amount(a, sizeof(a), r, t->v[i]),
		       t->text[i] ? t->text[i] : "?");
	}
	if (r->leaks)
		printf("  see: heapprof report --view %s %s\n",
		       r->v == RD_SPACE ? "space" : "objects", o->file);
	else
		printf("  see: heapprof diff %s %s\n",
		       o->baseline ? o->baseline : "PASSING.db", o->file);
}

static int run(const struct check_opts *o, struct ck_set *rs)
{
	int grows = 0;
	for (size_t k = 0; k < rs->n; k++)
		grows |= rs->r[k].grows;
	if (grows && !o->baseline) {
		for (size_t k = 0; k < rs->n; k++)
			if (rs->r[k].grows) {
				hp_err(SUBSYS,
				       "bad rule '%s': grows needs --baseline"
				       " OLD.db",
				       rs->r[k].text);
				break;
			}
		return 2;
	}
	struct ck_est *est = calloc(rs->n, sizeof(*est));
	struct ck_est *base = calloc(rs->n, sizeof(*base));
	char **lines = calloc(rs->n, sizeof(*lines));
	int *fail = calloc(rs->n, sizeof(*fail));
	struct top_stacks *top = calloc(rs->n, sizeof(*top));
	int rc = 2;
	size_t nfail = 0;

	if (!est || !base || !lines || !fail || !top) {
		hp_err(SUBSYS, "out of memory");
		goto out;
	}
	if (measure(o->file, o->have_pid, o, rs, est, top) < 0)
		goto out;
	if (grows && measure(o->baseline, 0, o, rs, base, NULL) < 0)
		goto out;
	/* A pattern that names no function (in FILE, or in the baseline
	 * too for grows) measures nothing: a typo or a renamed function
	 * would switch the gate off unseen. */
	for (size_t k = 0; k < rs->n; k++) {
		const char *glob = ck_unmatched(&rs->r[k]);
		if (glob) {
			char why[512];
			snprintf(why, sizeof(why),
			         "'%s' matches no function in %s%s", glob,
			         o->file,
			         rs->r[k].grows ? " or the baseline" : "");
			ck_bad_rule(NULL, rs->r[k].text, why);
			goto out;
		}
	}
	for (size_t k = 0; k < rs->n; k++) {
		char line[2048];
		fail[k] = ck_verdict_line(&rs->r[k], &est[k], &base[k],
		                          o->confidence, line, sizeof(line));
		nfail += fail[k] != 0;
		if (!(lines[k] = strdup(line))) {
			hp_err(SUBSYS, "out of memory");
			goto out;
		}
		printf("%s %s\n", fail[k] ? "FAIL" : "PASS", line);
		if (fail[k])
			print_failure(o, &rs->r[k], &top[k]);
	}
	if (nfail)
		printf("FAIL %zu of %zu rules failed\n", nfail, rs->n);
	else
		printf("PASS all %zu rules hold\n", rs->n);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		goto out;
	}
	if (o->junit && write_junit(o, rs, lines, fail, est, base) < 0)
		goto out;
	rc = nfail ? 1 : 0;
out:
	for (size_t k = 0; lines && k < rs->n; k++)
		free(lines[k]);
	free(lines);
	free(fail);
	free(est);
	free(base);
	top_free(top, rs->n);
	return rc;
}

int cmd_check(int argc, char **argv)
{
	struct check_opts o;
	struct ck_set rs = {0};
	const char **operands = calloc((size_t)argc + 1, sizeof(*operands));
	const char **files = calloc((size_t)argc + 1, sizeof(*files));
	size_t n = 0;
	int rc = 2;

	memset(&o, 0, sizeof(o));
	o.confidence = 0.999;
	o.heap = "libc.malloc";
	o.rule_files = files;
	if (!operands || !files) {
		hp_err(SUBSYS, "out of memory");
		goto out;
	}
	rc = opt_walk(SUBSYS, argc, argv, parse_opt, &o, check_usage, operands,
	              (size_t)argc, &n);
	if (rc) {
		rc = rc == 1 ? 0 : 2;
		goto out;
	}
	rc = 2;
	if (!n) {
		hp_err(SUBSYS, "missing FILE (see heapprof check --help)");
		goto out;
	}
	o.file = operands[0];
	for (size_t i = 1; i < n; i++)
		if (ck_set_add(&rs, operands[i], NULL) < 0)
			goto out;
	for (size_t i = 0; i < o.nfiles; i++)
		if (ck_set_read(&rs, o.rule_files[i]) < 0)
			goto out;
	if (!rs.n) {
		hp_err(SUBSYS, "no rules (give them as arguments or with -f"
		               " RULES)");
		goto out;
	}
	rc = run(&o, &rs);
out:
	ck_set_free(&rs);
	free(operands);
	free(files);
	return rc;
}
