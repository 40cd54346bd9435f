/*
 * The rule set of one `heapprof check` (check.h): rules from the command
 * line and from -f files, and each rule's verdict as the line check
 * prints.  Messages go through hp_err as "check".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/check.h"
#include "util/err.h"
#include "util/grow.h"
#include "util/human.h"
#include "util/textfile.h"

#define SUBSYS "check"
/* A rule file is a few lines; the bound keeps a wrong file (a log, a
 * binary) from being read into memory. */
#define RULES_FILE_MAX (1u << 20)

void ck_set_free(struct ck_set *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		ck_rule_free(&rs->r[i]);
	free(rs->r);
}

void ck_bad_rule(const char *where, const char *text, const char *why)
{
	char t[512];
	hp_err(SUBSYS, "%sbad rule '%s': %s", where ? where : "",
	       hp_text_escape(t, sizeof(t), text, strlen(text)), why);
}

int ck_set_add(struct ck_set *rs, const char *text, const char *where)
{
	char why[256];

	struct ck_rule *grown = hp_grow(rs->r, &rs->cap, rs->n, sizeof(*grown));
	if (!grown) {
		hp_err(SUBSYS, "out of memory");
		return -1;
	}
	rs->r = grown;
	/* A tab is a blank; any other control byte is no part of a rule
	 * (a file that is not text, or a paste gone wrong). */
	const char *c = hp_text_control(text, strlen(text), "\t");
	if (c) {
		snprintf(why, sizeof(why), "a control byte (\\x%02x)",
		         (unsigned char)*c);
		ck_bad_rule(where, text, why);
		return -1;
	}
	struct ck_rule *r = &rs->r[rs->n++];
	if (ck_parse(text, r, why, sizeof(why)) < 0) {
		ck_bad_rule(where, r->text ? r->text : text, why);
		return -1;
	}
	return 0;
}

int ck_set_read(struct ck_set *rs, const char *path)
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
		err = ck_set_add(rs, line, where);
	}
	free(buf);
	return err;
}

static int is_bytes(const struct ck_rule *r)
{
	return r->v == RD_SPACE || r->v == RD_ALLOC_SPACE;
}

const char *ck_fmt_amount(char *buf, size_t len, const struct ck_rule *r,
                          double x)
{
	if (is_bytes(r))
		return hp_fmt_bytes(buf, len, (int64_t)llround(x));
	snprintf(buf, len, "%.0f", x);
	return buf;
}

int ck_verdict_line(const struct ck_rule *r, const struct ck_est *e,
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
		         ck_fmt_amount(u, sizeof(u), r, z * sigma), c * 100, z);
	else
		snprintf(unc, sizeof(unc), " (exact)");
	if (r->pct)
		snprintf(lim, sizeof(lim), "%g%%", r->limit);
	else
		ck_fmt_amount(lim, sizeof(lim), r, r->limit);
	if (!r->grows) {
		snprintf(buf, len, "%s: %s%s, limit %s", r->text,
		         ck_fmt_amount(a, sizeof(a), r, e->v), unc, lim);
	} else {
		double g = e->v - base->v;
		char pct[48] = "";
		if (base->v > 0)
			snprintf(pct, sizeof(pct), " (%+.2f%%)",
			         100 * g / base->v);
		snprintf(buf, len, "%s: %s%s%s from %s to %s, limit %s",
		         r->text, g >= 0 ? "+" : "",
		         ck_fmt_amount(a, sizeof(a), r, g), pct,
		         ck_fmt_amount(b, sizeof(b), r, base->v),
		         ck_fmt_amount(u, sizeof(u), r, e->v), lim);
		/* The uncertainty is the growth's. */
		size_t l = strlen(buf);
		snprintf(buf + l, len - l, ";%s", unc);
	}
	return d.fail;
}
