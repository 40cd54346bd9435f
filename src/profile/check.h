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
#ifndef HEAPPROF_PROFILE_CHECK_H
#define HEAPPROF_PROFILE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "profile/reader.h"

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
};

/* The largest limit (bytes or a count): 2^53, the last whole number a
 * double holds exactly. */
#define CK_LIMIT_MAX (1ull << 53)

/* Parse text into r.  0, or -1 with the reason in why (len bytes; 128
 * enough) and r left empty.  Free with ck_rule_free either way. */
int ck_parse(const char *text, struct ck_rule *r, char *why, size_t len);
void ck_rule_free(struct ck_rule *r);

/* Whether the stack of leaf callsite cs matches r's pattern (always, for
 * no pattern). */
int ck_matches(const struct ck_rule *r, const struct rd_stacks *s, int64_t cs);

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

#endif
