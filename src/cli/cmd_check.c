/*
 * `heapprof check FILE [--baseline OLD.db] RULE... [-f RULES]`: a memory
 * gate for CI.  Each rule (profile/check.h, docs/CHECK.md) is measured on
 * one heap (libc.malloc unless --heap) summed over the processes of the
 * profile (or those of --pid), each at its chosen dump (the last unless
 * --dump), from the same per-callsite state every command reads
 * (reader_load_samples); leaks from the blocks live at the final dump, as
 * `heapprof report` finds them (tr_leaks).  A sampled value is an
 * estimate: a rule fails only when the whole confidence interval breaks
 * it.  One verdict line per rule, a summary line, JUnit XML on request.
 *
 * Exit status: 0 every rule holds, 1 one fails, 2 a bad rule, option or
 * file (one line saying which).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/procid.h"
#include "profile/check.h"
#include "profile/trace_read.h"
#include "util/err.h"
#include "util/human.h"
#include "util/textfile.h"

#define SUBSYS "check"
/* A rule file is a few lines; the bound keeps a wrong file (a log, a
 * binary) from being read into memory. */
#define RULES_FILE_MAX (1u << 20)

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
	      "                 default: the last)\n"
	      "  --pid P        only the processes of pid P; P.N: the N-th of"
	      " them\n"
	      "  --heap H       the heap to measure (default libc.malloc)\n"
	      "\n"
	      "Exit status: 0 all rules hold, 1 a rule fails, 2 a bad rule,"
	      " option or file.\n",
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

/* ---- rules -------------------------------------------------------------- */

struct ruleset {
	struct ck_rule *r;
	size_t n, cap;
};

static void ruleset_free(struct ruleset *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		ck_rule_free(&rs->r[i]);
	free(rs->r);
}

/* "bad rule 'TEXT': WHY" with where before it, the rule's control bytes
 * escaped (\x01): a rule may come from any file.  (ck_parse never sees
 * one, so why quotes none.) */
static void bad_rule(const char *where, const char *text, const char *why)
{
	char t[512];
	hp_err(SUBSYS, "%sbad rule '%s': %s", where ? where : "",
	       hp_text_escape(t, sizeof(t), text, strlen(text)), why);
}

/* Parse text as the next rule.  0, or -1 (one line naming it). */
static int add_rule(struct ruleset *rs, const char *text, const char *where)
{
	char why[256];

	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? 2 * rs->cap : 8;
		struct ck_rule *r = realloc(rs->r, cap * sizeof(*r));
		if (!r) {
			hp_err(SUBSYS, "out of memory");
			return -1;
		}
		rs->r = r;
		rs->cap = cap;
	}
	/* A tab is a blank; any other control byte is no part of a rule
	 * (a file that is not text, or a paste gone wrong). */
	const char *c = hp_text_control(text, strlen(text), "\t");
	if (c) {
		snprintf(why, sizeof(why), "a control byte (\\x%02x)",
		         (unsigned char)*c);
		bad_rule(where, text, why);
		return -1;
	}
	struct ck_rule *r = &rs->r[rs->n++];
	if (ck_parse(text, r, why, sizeof(why)) < 0) {
		bad_rule(where, r->text ? r->text : text, why);
		return -1;
	}
	return 0;
}

/* The rules of a -f file: one a line, '#' to the end of a line a
 * comment, blank lines ignored.  A regular file of at most
 * RULES_FILE_MAX bytes; a line with a NUL byte is refused (it would
 * otherwise end the rule there, silently).  0 or -1 (message printed). */
static int read_rule_file(struct ruleset *rs, const char *path)
{
	char *buf, why[HP_TEXT_WHY_MAX], where[512];
	size_t len;
	long lineno = 0;
	int err = 0;

	if (hp_text_read(path, RULES_FILE_MAX, 0, &buf, &len, why) < 0) {
		hp_err(SUBSYS, "%s: %s", path, why);
		return -1;
	}
	for (char *p = buf, *end = buf + len; !err && p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char *line = p;
		lineno++;
		p += n + 1;
		if (memchr(line, '\0', n)) {
			hp_err(SUBSYS,
			       "%s:%ld: a NUL byte in the line: not a rule"
			       " file",
			       path, lineno);
			err = -1;
			break;
		}
		if (n && line[n - 1] == '\r')
			n--;    /* a CRLF file */
		line[n] = '\0'; /* the '\n', or buf's own NUL at the end */
		line[strcspn(line, "#")] = '\0';
		if (!line[strspn(line, " \t")])
			continue;
		snprintf(where, sizeof(where), "%s:%ld: ", path, lineno);
		err = add_rule(rs, line, where);
	}
	free(buf);
	return err;
}

/* ---- measuring a profile ------------------------------------------------ */

/* The interval the samples of heap of process p at dump d were taken at:
 * the heap's own (heapprof_heap), and for libc.malloc the highest that
 * adaptive sampling reached by then (the most variance it can carry). */
static int heap_interval(sqlite3 *db, const struct rd_process *p,
                         const struct rd_dump *d, const char *heap,
                         int64_t *out)
{
	int64_t iv = p->interval;
	if (rd_has_table(db, "heapprof_heap")) {
		sqlite3_stmt *st =
		        rd_prepare(db, SUBSYS,
		                   "SELECT sampling_interval FROM heapprof_heap"
		                   " WHERE upid = ? AND name = ? AND "
		                   "sampling_interval > 0");
		if (!st)
			return -1;
		sqlite3_bind_int64(st, 1, p->upid);
		sqlite3_bind_text(st, 2, heap, -1, SQLITE_STATIC);
		int rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			iv = sqlite3_column_int64(st, 0);
		if (rd_finish(db, SUBSYS, st,
		              rc == SQLITE_ROW ? SQLITE_DONE : rc))
			return -1;
	}
	if (!strcmp(heap, "libc.malloc")) {
		if (d && d->interval_used > iv)
			iv = d->interval_used;
		if (p->interval_used > iv)
			iv = p->interval_used;
	}
	*out = iv;
	return 0;
}

/* Add the samples x[0..n) of the rules that `leaks` selects to est. */
static void add_samples(const struct ruleset *rs, int leaks,
                        const struct rd_stacks *s, const struct rd_sample *x,
                        size_t n, int64_t iv, struct ck_est *est)
{
	for (size_t k = 0; k < rs->n; k++) {
		const struct ck_rule *r = &rs->r[k];
		if (r->leaks != leaks)
			continue;
		if (iv > est[k].iv)
			est[k].iv = iv;
		for (size_t i = 0; i < n; i++)
			if (ck_matches(r, s, x[i].callsite))
				ck_est_add(&est[k], &x[i], r->v, iv);
	}
}

static int measure_process(sqlite3 *db, const struct rd_stacks *s,
                           const char *file, const struct rd_process *p,
                           const struct check_opts *o, const struct ruleset *rs,
                           int need_leaks, struct ck_est *est)
{
	struct rd_dump *dumps = NULL;
	struct rd_sample *x = NULL;
	size_t nd = 0, nx = 0;
	int64_t iv;
	int err = 0;

	if (reader_load_dumps(db, SUBSYS, p->upid, &dumps, &nd) < 0)
		return -1;
	if (nd) {
		long k = procid_pick_dump(SUBSYS, file, p, dumps, nd, &o->dump);
		err = k < 0 ? -1
		            : heap_interval(db, p, &dumps[k], o->heap, &iv);
		if (!err)
			err = reader_load_samples(db, SUBSYS, p->upid, o->heap,
			                          dumps[k].ts, &x, &nx) < 0
			              ? -1
			              : 0;
		if (!err)
			add_samples(rs, 0, s, x, nx, iv, est);
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
		} else if (tr_leaks(db, SUBSYS, p->upid, &leaks, &src) < 0) {
			err = -1;
		} else {
			const struct tr_heap *h = tr_set_find(&leaks, o->heap);
			err = heap_interval(db, p, nd ? &dumps[nd - 1] : NULL,
			                    o->heap, &iv);
			if (!err && h)
				add_samples(rs, 1, s, h->s, h->n, iv, est);
			tr_set_free(&leaks);
		}
	}
	reader_free_dumps(dumps, nd);
	return err;
}

/* The rules' values in file (the processes of --pid when use_pid).  0 or
 * -1 (message printed). */
static int measure(const char *file, int use_pid, const struct check_opts *o,
                   const struct ruleset *rs, struct ck_est *est)
{
	struct rd_stacks s;
	struct rd_process *procs = NULL;
	size_t n = 0, nsel = 0;
	int need_leaks = 0, err;

	for (size_t k = 0; k < rs->n; k++)
		need_leaks |= rs->r[k].leaks;
	sqlite3 *db = reader_open(file, SUBSYS);
	if (!db)
		return -1;
	err = reader_load_stacks(db, SUBSYS, &s) < 0 ? -1 : 0;
	if (!err && reader_load_processes(db, SUBSYS, &procs, &n) < 0) {
		reader_free_stacks(&s);
		err = -1;
	}
	if (err) {
		sqlite3_close(db);
		return -1;
	}
	for (size_t i = 0; !err && i < n; i++) {
		if (use_pid && !procsel_match(&o->pid, procs, n, i))
			continue;
		nsel++;
		if (!procs[i].rejected_concurrent)
			err = measure_process(db, &s, file, &procs[i], o, rs,
			                      need_leaks, est);
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
	reader_free_processes(procs, n);
	reader_free_stacks(&s);
	sqlite3_close(db);
	return err;
}

/* ---- verdicts ----------------------------------------------------------- */

static int is_bytes(const struct ck_rule *r)
{
	return r->v == RD_SPACE || r->v == RD_ALLOC_SPACE;
}

static const char *fmt_amount(char *buf, size_t len, const struct ck_rule *r,
                              double x)
{
	if (is_bytes(r))
		return hp_fmt_bytes(buf, len, (int64_t)llround(x));
	snprintf(buf, len, "%.0f", x);
	return buf;
}

/* The verdict of rule r on est (and base for grows) as one line in buf,
 * without PASS/FAIL; whether it failed. */
static int judge(const struct ck_rule *r, const struct ck_est *e,
                 const struct ck_est *base, double c, char *buf, size_t len)
{
	char a[HP_FMT_BYTES_MAX], b[HP_FMT_BYTES_MAX], u[HP_FMT_BYTES_MAX];
	char lim[HP_FMT_BYTES_MAX + 8], unc[HP_FMT_BYTES_MAX + 48];
	struct ck_verdict d;
	double sigma,
	        z = ck_z(r->op == CK_EQ || r->op == CK_NE ? (1 + c) / 2 : c);

	if (!r->grows) {
		sigma = sqrt(e->var);
		/* A sampled block is a block that exists: at least one. */
		d = ck_judge(r->op, e->v, sigma, e->v > 0 ? 1 : 0, 0,
		             ck_unseen(e, r->v, z), r->limit, c);
	} else {
		/* new - k * base against 0 (k = 1 + pct / 100) or the size:
		 * linear in both estimates, so their variances add. */
		double k = r->pct ? 1 + r->limit / 100 : 1;
		sigma = sqrt(e->var + k * k * base->var);
		/* Missed in the baseline lowers the growth; in FILE raises. */
		d = ck_judge(r->op, e->v - k * base->v, sigma, -INFINITY,
		             k * ck_unseen(base, r->v, z),
		             ck_unseen(e, r->v, z), r->pct ? 0 : r->limit, c);
	}
	if (!r->grows && e->iv > 1 && e->v <= 0)
		/* Nothing sampled: no sigma, only ck_unseen's bound. */
		snprintf(unc, sizeof(unc), ", nothing sampled at %g%% (z %.2f)",
		         c * 100, z);
	else if (e->iv > 1 || (r->grows && base->iv > 1))
		snprintf(unc, sizeof(unc), " +- %s at %g%% (z %.2f)",
		         fmt_amount(u, sizeof(u), r, z * sigma), c * 100, z);
	else
		snprintf(unc, sizeof(unc), " (exact)");
	if (r->pct)
		snprintf(lim, sizeof(lim), "%g%%", r->limit);
	else
		fmt_amount(lim, sizeof(lim), r, r->limit);
	if (!r->grows) {
		snprintf(buf, len, "%s: %s%s, limit %s", r->text,
		         fmt_amount(a, sizeof(a), r, e->v), unc, lim);
	} else {
		double g = e->v - base->v;
		char pct[48] = "";
		if (base->v > 0)
			snprintf(pct, sizeof(pct), " (%+.2f%%)",
			         100 * g / base->v);
		snprintf(buf, len, "%s: %s%s%s from %s to %s, limit %s",
		         r->text, g >= 0 ? "+" : "",
		         fmt_amount(a, sizeof(a), r, g), pct,
		         fmt_amount(b, sizeof(b), r, base->v),
		         fmt_amount(u, sizeof(u), r, e->v), lim);
		/* The uncertainty is the growth's. */
		size_t l = strlen(buf);
		snprintf(buf + l, len - l, ";%s", unc);
	}
	return d.fail;
}

static void xml_put(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '&')
			fputs("&amp;", f);
		else if (ch == '<')
			fputs("&lt;", f);
		else if (ch == '>')
			fputs("&gt;", f);
		else if (ch == '"')
			fputs("&quot;", f);
		else if (ch < 0x20 && ch != '\t')
			fputc('?', f); /* not allowed in XML 1.0 */
		else
			fputc(ch, f);
	}
}

static int write_junit(const char *path, const struct ruleset *rs, char **lines,
                       const int *fail, size_t nfail)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		hp_err(SUBSYS, "%s: %s", path, strerror(errno));
		return -1;
	}
	fprintf(f,
	        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	        "<testsuites tests=\"%zu\" failures=\"%zu\">\n"
	        "  <testsuite name=\"heapprof check\" tests=\"%zu\""
	        " failures=\"%zu\" errors=\"0\">\n",
	        rs->n, nfail, rs->n, nfail);
	for (size_t k = 0; k < rs->n; k++) {
		fputs("    <testcase classname=\"heapprof.check\" name=\"", f);
		xml_put(f, rs->r[k].text);
		if (!fail[k]) {
			fputs("\"/>\n", f);
			continue;
		}
		fputs("\">\n      <failure message=\"", f);
		xml_put(f, lines[k]);
		fputs("\">", f);
		xml_put(f, lines[k]);
		fputs("</failure>\n    </testcase>\n", f);
	}
	fputs("  </testsuite>\n</testsuites>\n", f);
	if (fclose(f) != 0) {
		hp_err(SUBSYS, "%s: writing failed", path);
		return -1;
	}
	return 0;
}

static int run(const struct check_opts *o, struct ruleset *rs)
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
	int rc = 2;
	size_t nfail = 0;

	if (!est || !base || !lines || !fail) {
		hp_err(SUBSYS, "out of memory");
		goto out;
	}
	if (measure(o->file, o->have_pid, o, rs, est) < 0)
		goto out;
	if (grows && measure(o->baseline, 0, o, rs, base) < 0)
		goto out;
	for (size_t k = 0; k < rs->n; k++) {
		char line[2048];
		fail[k] = judge(&rs->r[k], &est[k], &base[k], o->confidence,
		                line, sizeof(line));
		nfail += fail[k] != 0;
		if (!(lines[k] = strdup(line))) {
			hp_err(SUBSYS, "out of memory");
			goto out;
		}
		printf("%s %s\n", fail[k] ? "FAIL" : "PASS", line);
	}
	if (nfail)
		printf("FAIL %zu of %zu rules failed\n", nfail, rs->n);
	else
		printf("PASS all %zu rules hold\n", rs->n);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		goto out;
	}
	if (o->junit && write_junit(o->junit, rs, lines, fail, nfail) < 0)
		goto out;
	rc = nfail ? 1 : 0;
out:
	for (size_t k = 0; lines && k < rs->n; k++)
		free(lines[k]);
	free(lines);
	free(fail);
	free(est);
	free(base);
	return rc;
}

int cmd_check(int argc, char **argv)
{
	struct check_opts o;
	struct ruleset rs = {0};
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
		if (add_rule(&rs, operands[i], NULL) < 0)
			goto out;
	for (size_t i = 0; i < o.nfiles; i++)
		if (read_rule_file(&rs, o.rule_files[i]) < 0)
			goto out;
	if (!rs.n) {
		hp_err(SUBSYS, "no rules (give them as arguments or with -f"
		               " RULES)");
		goto out;
	}
	rc = run(&o, &rs);
out:
	ruleset_free(&rs);
	free(operands);
	free(files);
	return rc;
}
