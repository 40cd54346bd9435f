/* The rules of `heapprof check` (check.h). */
#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/check.h"
#include "store/procinfo.h"
#include "util/size.h"

const char *const ck_op_names[] = {"<", "<=", "==", "!=", ">=", ">"};

void ck_rule_free(struct ck_rule *r)
{
	free(r->text);
	for (size_t i = 0; i < r->npat; i++)
		free(r->pat[i]);
	free(r->pat);
	free(r->seen);
	memset(r, 0, sizeof(*r));
}

static const char *skip_blanks(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* "a > b*>c" into r->pat; -1 with why. */
static int parse_pattern(const char *p, size_t n, struct ck_rule *r, char *why,
                         size_t len)
{
	size_t cap = 1;
	for (size_t i = 0; i < n; i++)
		cap += p[i] == '>';
	r->pat = calloc(cap, sizeof(*r->pat));
	if (!r->pat) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	const char *end = p + n;
	while (p <= end) {
		const char *gt = memchr(p, '>', (size_t)(end - p));
		const char *e = gt ? gt : end;
		const char *a = skip_blanks(p);
		const char *b = e;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (a == b) {
			snprintf(why, len,
			         "empty function pattern (want a glob such as"
			         " parse_*, or caller>callee)");
			return -1;
		}
		if (!(r->pat[r->npat++] = strndup(a, (size_t)(b - a)))) {
			snprintf(why, len, "out of memory");
			return -1;
		}
		p = e + 1;
	}
	return 0;
}

/* The limit: a count, a size for byte views, or a percentage for grows. */
static int parse_limit(const char *p, struct ck_rule *r, char *why, size_t len)
{
	size_t n = strlen(p);
	if (!n) {
		snprintf(why, len, "missing limit after '%s'",
		         ck_op_names[r->op]);
		return -1;
	}
	if (p[n - 1] == '%') {
		char *end = NULL;
		if (!r->grows) {
			snprintf(why, len,
			         "a percentage is a limit of a grows rule"
			         " ('space grows <= 5%%')");
			return -1;
		}
		r->limit = isdigit((unsigned char)p[0]) ? strtod(p, &end) : -1;
		if (r->limit < 0 || end != p + n - 1 || !isfinite(r->limit)) {
			snprintf(why, len, "bad percentage '%s'", p);
			return -1;
		}
		r->pct = 1;
		return 0;
	}
	uint64_t v;
	const char *bad = NULL;
	if (hp_parse_size(p, &v, &bad) < 0) {
		snprintf(why, len, "bad limit '%s': %s", p, bad);
		return -1;
	}
	/* The limit is held and printed as a double: above 2^53 it would
	 * be rounded (and past 2^63 printed as a negative size).  No heap
	 * comes near 8 PiB. */
	if (v > CK_LIMIT_MAX) {
		snprintf(why, len,
		         "bad limit '%s': too large (at most %llu, 8 PiB)", p,
		         (unsigned long long)CK_LIMIT_MAX);
		return -1;
	}
	if ((r->v == RD_OBJECTS || r->v == RD_ALLOC_OBJECTS) &&
	    !isdigit((unsigned char)p[strlen(p) - 1])) {
		snprintf(why, len, "bad limit '%s': a count takes no unit", p);
		return -1;
	}
	r->limit = (double)v;
	return 0;
}

int ck_parse(const char *text, struct ck_rule *r, char *why, size_t len)
{
	static const struct {
		const char *name;
		enum rd_view v;
		int leaks;
	} targets[] = {{"space", RD_SPACE, 0},
	               {"objects", RD_OBJECTS, 0},
	               {"alloc_space", RD_ALLOC_SPACE, 0},
	               {"alloc_objects", RD_ALLOC_OBJECTS, 0},
	               {"leaks", RD_OBJECTS, 1},
	               {"leaked_space", RD_SPACE, 1}};
	const char *p = skip_blanks(text);
	size_t tl = strlen(p);

	memset(r, 0, sizeof(*r));
	while (tl && isspace((unsigned char)p[tl - 1]))
		tl--;
	if (!(r->text = strndup(p, tl))) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	p = r->text;
	size_t wl = 0;
	while (isalnum((unsigned char)p[wl]) || p[wl] == '_')
		wl++;
	size_t t = 0, nt = sizeof(targets) / sizeof(targets[0]);
	while (t < nt && (strlen(targets[t].name) != wl ||
	                  strncmp(p, targets[t].name, wl) != 0))
		t++;
	if (t == nt) {
		snprintf(
		        why, len,
		        "want space, objects, alloc_space, alloc_objects, leaks"
		        " or leaked_space first, not '%.*s'",
		        (int)(wl ? wl : strcspn(p, " \t")), p);
		goto bad;
	}
	r->v = targets[t].v;
	r->leaks = targets[t].leaks;
	p = skip_blanks(p + wl);
	if (*p == '(') {
		/* To the matching ')': C++ names carry their own. */
		const char *q = p + 1;
		int depth = 1;
		for (; *q && depth; q++)
			depth += *q == '(' ? 1 : *q == ')' ? -1 : 0;
		if (depth) {
			snprintf(why, len, "missing ')' after the pattern");
			goto bad;
		}
		if (parse_pattern(p + 1, (size_t)(q - 1 - (p + 1)), r, why,
		                  len) < 0)
			goto bad;
		p = skip_blanks(q);
	}
	if (!strncmp(p, "grows", 5) && !isalnum((unsigned char)p[5])) {
		if (r->leaks) {
			snprintf(
			        why, len,
			        "leaks and leaked_space are not compared with a"
			        " baseline");
			goto bad;
		}
		r->grows = 1;
		p = skip_blanks(p + 5);
	}
	/* Two-character operators first. */
	static const enum ck_op ops[] = {CK_LE, CK_EQ, CK_NE,
	                                 CK_GE, CK_LT, CK_GT};
	size_t k = 0;
	for (; k < sizeof(ops) / sizeof(ops[0]); k++)
		if (!strncmp(p, ck_op_names[ops[k]],
		             strlen(ck_op_names[ops[k]])))
			break;
	if (k == sizeof(ops) / sizeof(ops[0])) {
		snprintf(why, len,
		         *p ? "want a comparison (< <= == != >= >) before '%s'"
		            : "missing comparison (< <= == != >= >)%s",
		         p);
		goto bad;
	}
	r->op = ops[k];
	p = skip_blanks(p + strlen(ck_op_names[r->op]));
	if (parse_limit(p, r, why, len) < 0)
		goto bad;
	return 0;
bad:;
	char *keep = r->text;
	r->text = NULL;
	ck_rule_free(r);
	r->text = keep;
	return -1;
}

/* Whether name matches the glob of pattern position *j, and if so moves on
 * to the next one outward. */
static void match_name(const struct ck_rule *r, const char *name, size_t *j)
{
	if (*j && name && !fnmatch(r->pat[*j - 1], name, 0))
		--*j;
}

int ck_matches(const struct ck_rule *r, struct tree *g, int64_t cs)
{
	/* Greedy from the leaf: the innermost match of the last glob leaves
	 * the most room outward for the others. */
	size_t j = r->npat;
	int32_t n = j ? tree_leaf_node(g, cs) : -1;

	if (j && n < 0)
		return -1;
	for (; j && n >= 0; n = g->top.parent.v[n])
		match_name(r, g->funcs[g->top.func.v[n]].name, &j);
	return j == 0;
}

int ck_mark_matched(struct ck_rule *r, size_t nr, struct tree *g)
{
	for (size_t k = 0; k < nr; k++) {
		if (r[k].npat && !r[k].seen &&
		    !(r[k].seen = calloc(r[k].npat, 1)))
			return -1;
		for (size_t j = 0; j < r[k].npat; j++) {
			if (r[k].seen[j])
				continue;
			int m = tree_names_match(g, r[k].pat[j]);
			if (m < 0)
				return -1;
			r[k].seen[j] = (unsigned char)m;
		}
	}
	return 0;
}

const char *ck_unmatched(const struct ck_rule *r)
{
	for (size_t j = 0; j < r->npat; j++)
		if (!r->seen || !r->seen[j])
			return r->pat[j];
	return NULL;
}

void ck_est_add(struct ck_est *e, const struct rd_sample *x, enum rd_view v,
                int64_t iv)
{
	double val = (double)x->v[v];
	e->v += val;
	if (iv <= 1 || val <= 0)
		return;
	double I = (double)iv;
	if (v == RD_SPACE || v == RD_ALLOC_SPACE) {
		e->var += I * val;
		return;
	}
	double bytes =
	        (double)x->v[v == RD_OBJECTS ? RD_SPACE : RD_ALLOC_SPACE];
	double s = bytes > 0 ? bytes / val : 1;
	double p = -expm1(-s / I);
	e->var += val * (1 - p) / p;
}

double ck_z(double c)
{
	double lo = 0, hi = 40;
	for (int i = 0; i < 200; i++) {
		double mid = (lo + hi) / 2;
		if (0.5 * erfc(mid / sqrt(2.0)) > 1 - c)
			lo = mid;
		else
			hi = mid;
	}
	return (lo + hi) / 2;
}

double ck_unseen(const struct ck_est *e, enum rd_view v, double z)
{
	if (e->iv <= 1)
		return 0;
	if (e->v > 0)
		return z * z * e->var / e->v;
	return v == RD_SPACE || v == RD_ALLOC_SPACE ? z * z * (double)e->iv
	                                            : INFINITY;
}

struct ck_verdict ck_judge(enum ck_op op, double x, double sigma, double floor,
                           double below, double above, double limit, double c)
{
	struct ck_verdict d;
	double z = ck_z(op == CK_EQ || op == CK_NE ? (1 + c) / 2 : c);
	d.lo = x - z * sigma - below;
	if (d.lo < floor)
		d.lo = floor;
	d.hi = x + z * sigma + above;
	switch (op) {
	case CK_LT:
		d.fail = d.lo >= limit;
		break;
	case CK_LE:
		d.fail = d.lo > limit;
		break;
	case CK_EQ:
		d.fail = d.lo > limit || d.hi < limit;
		break;
	case CK_NE:
		d.fail = d.lo == limit && d.hi == limit;
		break;
	case CK_GE:
		d.fail = d.hi < limit;
		break;
	default:
		d.fail = d.hi <= limit;
		break;
	}
	return d;
}

int ck_heap_interval(sqlite3 *db, const char *subsys,
                     const struct rd_process *p, const struct rd_dump *d,
                     const char *heap, int64_t *out)
{
	int64_t iv = pi_heap_interval(db, p->upid, heap);
	if (iv <= 0)
		iv = p->interval;
	if (!strcmp(heap, "libc.malloc")) {
		if (d && d->interval_used > iv)
			iv = d->interval_used;
		if (p->interval_used > iv)
			iv = p->interval_used;
	}
	*out = iv;
	return 0;
}
