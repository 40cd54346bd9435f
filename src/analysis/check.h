/*
 * The rules of `heapprof check` (cli/cmd_check.c, docs/CHECK.md): parsing
 * one rule, which stacks it counts, the estimate of a sampled value with
 * its variance, and the verdict.
 *
 * A rule is `TARGET [grows] OP LIMIT`:
 *   TARGET  a view (space, objects, alloc_space, alloc_objects) or leaks
 *           (live blocks at the end of a process that exited) or
 *           leaked_space (their bytes), optionally with a stack pattern in
 *           parentheses: `space(parse_*)`, `alloc_space(main>load*>parse)`.
 *   grows   the value minus the baseline's; LIMIT a size or count, or a
 *           percentage of the baseline's value (`5%`).
 *   OP      < <= == != >= >
 *   LIMIT   a count, or for the byte views a size as hp_parse_size reads
 *           it (64MiB, 512K, 5242880).
 *
 * A pattern is globs (fnmatch) separated by '>', outermost caller first; a
 * stack matches when its functions, outermost first and each frame
 * expanded into the functions inlined at it, contain a function matching
 * each glob in that order (not necessarily adjacent).  One glob is a
 * function's inclusive value: every stack it is on, counted once.
 */
#ifndef HEAPPROF_ANALYSIS_CHECK_H
#define HEAPPROF_ANALYSIS_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "model/tree.h"
#include "store/reader.h"

enum ck_op { CK_LT, CK_LE, CK_EQ, CK_NE, CK_GE, CK_GT };
extern const char *const ck_op_names[];

struct ck_rule {
	char *text;     /* as written, without surrounding blanks */
	int leaks;      /* leaks / leaked_space: the blocks live at exit */
	enum rd_view v; /* the view (leaks: objects, leaked_space: space) */
	char **pat;     /* globs, outermost first; npat 0: every stack */
	size_t npat;
	int grows; /* compared with the baseline's value */
	int pct;   /* grows: limit is a percentage of the baseline's */
	enum ck_op op;
	double limit; /* bytes, a count, or percent */
	/* Per glob: whether some function of a profile measured matches it
	 * (ck_mark_matched); NULL until then. */
	unsigned char *seen;
};

/* The largest limit (bytes or a count): 2^53, the last whole number a
 * double holds exactly. */
#define CK_LIMIT_MAX (1ull << 53)

/* Parse text into r.  0, or -1 with the reason in why (len bytes; 128
 * enough) and r left empty.  Free with ck_rule_free either way. */
int ck_parse(const char *text, struct ck_rule *r, char *why, size_t len);
void ck_rule_free(struct ck_rule *r);

/* Whether the stack of leaf callsite cs, as the functions of its nodes in
 * the heap model's call tree g, matches r's pattern (always, for no
 * pattern): 1, 0, or -1 if out of memory. */
int ck_matches(const struct ck_rule *r, struct tree *g, int64_t cs);

/*
 * Marks in r[k].seen the globs that match some function of the profile
 * whose call tree is g (every frame of its stacks, each frame's inlined
 * functions too): a glob no function matches is a typo or a renamed
 * function, and a rule with it would silently count nothing.  0, or -1
 * if out of memory.
 */
int ck_mark_matched(struct ck_rule *r, size_t nr, struct tree *g);

/* The first glob of r that no profile marked matched, or NULL. */
const char *ck_unmatched(const struct ck_rule *r);

/* An estimate and its variance (0 when exact). */
struct ck_est {
	double v, var;
	int64_t iv; /* the largest interval measured; <= 1: exact */
};

/*
 * Add view v of sample x, recorded at sampling interval iv, to e: its
 * value and the variance of the estimate (docs/CHECK.md derives it):
 * bytes I * value; objects n (1 - p) / p with p = 1 - exp(-s / I) and s
 * the sample's mean block size (its bytes over its objects in the matching
 * view).  Nothing at iv <= 1: exact.
 */
void ck_est_add(struct ck_est *e, const struct rd_sample *x, enum rd_view v,
                int64_t iv);

/* The standard normal quantile z with P(Z > z) = 1 - c, c in (0.5, 1). */
double ck_z(double c);

struct ck_verdict {
	int fail;
	double lo, hi; /* the confidence bounds of the value */
};

/*
 * Judge `x op limit` for an estimate x with standard deviation sigma: the
 * rule fails only when every value within [lo, hi] breaks it, lo = x -
 * z * sigma - below (at least floor: what a sampled block proves) and
 * hi = x + z * sigma + above, with z = ck_z(c) for one-sided operators and
 * ck_z((1 + c) / 2) for == and != (two-sided).  below and above are what
 * sampling can miss beyond the normal approximation (ck_unseen).  All 0:
 * exact.
 */
struct ck_verdict ck_judge(enum ck_op op, double x, double sigma, double floor,
                           double below, double above, double limit, double c);

/*
 * What a sampled estimate e of view v may miss above x + z * sigma: with k
 * sample points seen the Poisson upper bound is about k + z sqrt(k) + z^2
 * points, so z^2 points of weight var / x (I bytes, or the objects one
 * point stands for); with none seen, z^2 I bytes, and any number of
 * objects (small blocks are rarely sampled).  0 for an exact e.
 */
double ck_unseen(const struct ck_est *e, enum rd_view v, double z);

/* The interval the samples of heap of process p at dump d were taken at:
 * the heap's own (heapprof_heap), and for libc.malloc the highest that
 * adaptive sampling reached by then (the most variance it can carry; d
 * NULL: the process's highest).  0 or -1 (message printed as subsys). */
int ck_heap_interval(sqlite3 *db, const char *subsys,
                     const struct rd_process *p, const struct rd_dump *d,
                     const char *heap, int64_t *out);

/* ---- the rule set (check_rules.c) --------------------------------------- */

/* The rules of one check, in the order given. */
struct ck_set {
	struct ck_rule *r;
	size_t n, cap;
};
void ck_set_free(struct ck_set *rs);

/* Parse text as the next rule (where, if not NULL, goes before the
 * message: "FILE:LINE: ").  0, or -1 (one line naming the rule). */
int ck_set_add(struct ck_set *rs, const char *text, const char *where);

/* The rules of a -f file: one a line, '#' to the end of a line a comment,
 * blank lines ignored.  A regular file of at most 1 MiB; a line with a
 * NUL byte is refused (it would otherwise end the rule there, silently).
 * 0 or -1 (message printed). */
int ck_set_read(struct ck_set *rs, const char *path);

/* "bad rule 'TEXT': WHY" with where (may be NULL) before it, the rule's
 * control bytes escaped (\x01): a rule may come from any file.
 * (ck_parse never sees one, so why quotes none.) */
void ck_bad_rule(const char *where, const char *text, const char *why);

/* x in r's unit: a size for the byte views, else a count. */
const char *ck_fmt_amount(char *buf, size_t len, const struct ck_rule *r,
                          double x);

/* The verdict of rule r on estimate e (and base for grows) at confidence
 * c as one line in buf, without PASS/FAIL: the value, its uncertainty (or
 * "exact") and the limit.  Whether the rule failed. */
int ck_verdict_line(const struct ck_rule *r, const struct ck_est *e,
                    const struct ck_est *base, double c, char *buf, size_t len);

#endif
