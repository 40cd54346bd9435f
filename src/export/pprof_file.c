/*
 * One pprof file of a profile (see pprof_file.h): a dump, a window of the
 * trace, or the difference of two dumps, with its comments.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "export/pprof.h"
#include "export/pprof_file.h"
#include "store/procinfo.h"
#include "store/trace_read.h"
#include "util/err.h"

int ppf_write_dump(const struct ppf_dump *x, const char *heap, const char *path,
                   const char *subsys, size_t *nsamples)
{
	const struct rd_process *p = x->proc;
	const struct rd_dump *d = x->dump;
	struct pp_profile *pp = pp_new(p->interval);
	char *c1 = NULL, *c2 = NULL;
	int err = pp ? 0 : -ENOMEM;

	*nsamples = 0;

	if (!err && asprintf(&c1,
	                     "heapprof profile %s: process %" PRId64
	                     " (%s), heap %s, dump %zu of %zu (%s)",
	                     x->file, p->pid, p->name, heap, x->index,
	                     x->ndumps, d->reason) < 0) {
		c1 = NULL;
		err = -ENOMEM;
	}
	if (!err && asprintf(&c2, "command line: %s", p->cmdline) < 0) {
		c2 = NULL;
		err = -ENOMEM;
	}
	if (!err)
		err = pp_add_comment(pp, c1);
	if (!err)
		err = pp_add_comment(pp, c2);
	if (err)
		hp_err(subsys, "out of memory");
	if (!err) {
		pp_set_time(pp, pi_wall_time(x->db, d->ts),
		            d->ts - p->start_ts);
		err = pp_add_dump(pp, x->db, x->s, p->upid, heap, d->ts, 0,
		                  nsamples, subsys);
	}
	if (!err)
		err = pp_write_gz(pp, path, subsys);
	free(c1);
	free(c2);
	pp_free(pp);
	return err;
}

/* ---- a window of the trace ---------------------------------------------- */

/* What a window's numbers are worth: comments for pprof -comments. */
static char *trace_comment(const struct rd_process *p, const struct tr_info *t,
                           int64_t from, int64_t to)
{
	char *r = NULL;
	int64_t left = tr_left_out(t);
	int ring_short = t->overwritten && t->first_ts > from;

	if (!left) {
		if (asprintf(&r,
		             "trace: %s, complete (every allocation and"
		             " free of the window is in it)",
		             t->mode[0] ? t->mode : "?") < 0)
			r = NULL;
		return r;
	}
	if (asprintf(&r,
	             "trace: %s, INCOMPLETE: %" PRId64 " events left out"
	             " (%" PRId64 " allocations and %" PRId64
	             " frees dropped, %" PRId64 " overwritten, %" PRId64
	             " never finished)%s%+.3f s; values may miss allocations"
	             " and frees",
	             t->mode[0] ? t->mode : "?", left, t->dropped_allocs,
	             t->dropped_frees, t->overwritten, t->incomplete,
	             ring_short ? "; the events kept start at "
	             : t->full_ts && t->full_ts < to ? "; the buffer filled at "
	                                             : "; the trace ends at ",
	             (double)((ring_short                      ? t->first_ts
	                       : t->full_ts && t->full_ts < to ? t->full_ts
	                                                       : t->last_ts) -
	                      p->start_ts) /
	                     1e9) < 0)
		r = NULL;
	return r;
}

int ppf_write_window(sqlite3 *db, const struct rd_stacks *s, const char *file,
                     const struct rd_process *p, const char *heap,
                     const struct ag_window *win, const char *path,
                     const char *subsys, struct ppf_window *out)
{
	struct tr_info t;
	struct tr_heap w;
	int64_t begin, end, from, to;
	char *c[4] = {NULL, NULL, NULL, NULL};
	struct pp_profile *pp = NULL;
	int err;

	memset(out, 0, sizeof(*out));
	if (tr_load_info(db, subsys, p->upid, &t) < 0)
		return -EIO;
	ag_window_bounds(p, &t, win, &begin, &end, &from, &to);
	if ((err = tr_window(db, subsys, p->upid, heap, from, to, &w)) < 0)
		return err;
	double f = (double)(from - p->start_ts) / 1e9;
	double e = (double)(to - p->start_ts) / 1e9;
	if (asprintf(&c[0],
	             "heapprof profile %s: process %" PRId64 " (%s), heap %s,"
	             " window %+.6f s to %+.6f s since the process started",
	             file, p->pid, p->name, heap, f, e) < 0)
		c[0] = NULL;
	if (asprintf(&c[1], "alloc_space, alloc_objects: allocations made in"
	                    " the window; space, objects: those of them still"
	                    " live at its end (no free before it)") < 0)
		c[1] = NULL;
	c[2] = trace_comment(p, &t, from, to);
	if (asprintf(&c[3], "command line: %s", p->cmdline) < 0)
		c[3] = NULL;
	pp = pp_new(p->interval);
	err = pp && c[0] && c[1] && c[2] && c[3] ? 0 : -ENOMEM;
	for (int k = 0; !err && k < 4; k++)
		err = pp_add_comment(pp, c[k]);
	if (!err) {
		pp_set_time(pp, pi_wall_time(db, from), to - from);
		for (size_t i = 0; !err && i < w.n; i++)
			err = pp_add_sample(pp, s, w.s[i].callsite, w.s[i].v,
			                    NULL, NULL);
	}
	if (err)
		hp_err(subsys, "out of memory");
	if (!err)
		err = pp_write_gz(pp, path, subsys);
	if (!err)
		*out = (struct ppf_window){.from = f,
		                           .to = e,
		                           .incomplete = tr_left_out(&t) != 0,
		                           .nsamples = pp_nsamples(pp)};
	for (int k = 0; k < 4; k++)
		free(c[k]);
	pp_free(pp);
	tr_heap_free(&w);
	return err;
}

/* ---- a diff of two dumps ------------------------------------------------ */

int ppf_write_diff(const struct ppf_dump *a, const struct ppf_dump *b,
                   const char *heap, const char *path, const char *subsys)
{
	struct pp_profile *p = pp_new(b->proc->interval);
	char *ca = NULL, *cb = NULL;
	int err = p ? 0 : -ENOMEM;

	if (!err &&
	    asprintf(&ca,
	             "heapprof diff base (A, negated): %s, process "
	             "%" PRId64 ", heap %s, dump %zu of %zu",
	             a->file, a->proc->pid, heap, a->index, a->ndumps) < 0) {
		ca = NULL;
		err = -ENOMEM;
	}
	if (!err &&
	    asprintf(&cb,
	             "heapprof diff B: %s, process %" PRId64
	             ", heap %s, dump %zu of %zu",
	             b->file, b->proc->pid, heap, b->index, b->ndumps) < 0) {
		cb = NULL;
		err = -ENOMEM;
	}
	if (!err)
		err = pp_add_comment(p, ca);
	if (!err)
		err = pp_add_comment(p, cb);
	if (err)
		hp_err(subsys, "out of memory");
	if (!err) {
		pp_set_time(p, pi_wall_time(b->db, b->dump->ts), 0);
		err = pp_add_dump(p, b->db, b->s, b->proc->upid, heap,
		                  b->dump->ts, 0, NULL, subsys);
	}
	if (!err)
		err = pp_add_dump(p, a->db, a->s, a->proc->upid, heap,
		                  a->dump->ts, 1, NULL, subsys);
	if (!err)
		err = pp_write_gz(p, path, subsys);
	free(ca);
	free(cb);
	pp_free(p);
	return err;
}

/* ---- several files: what each holds ------------------------------------ */

void ppf_jobs_free(struct ppf_job *j, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(j[i].heap);
	free(j);
}

int ppf_job_add(struct ppf_job **j, size_t *n, size_t proc, const char *heap,
                size_t dump, size_t ndumps)
{
	struct ppf_job *a = realloc(*j, (*n + 1) * sizeof(*a));

	if (!a)
		return -ENOMEM;
	*j = a;
	a[*n] = (struct ppf_job){.proc = proc,
	                         .heap = strdup(heap),
	                         .dump = dump,
	                         .ndumps = ndumps};
	if (!a[*n].heap)
		return -ENOMEM;
	++*n;
	return 0;
}

/* ---- several files: their names ---------------------------------------- */

static int is_dir(const char *path)
{
	struct stat sb;
	size_t n = strlen(path);

	return (n && path[n - 1] == '/') ||
	       (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
}

/* FILE without a trailing ".db"; malloc'ed. */
static char *file_base(const char *file)
{
	size_t n = strlen(file);
	char *b = strdup(file);

	if (b && n > 3 && !strcmp(file + n - 3, ".db"))
		b[n - 3] = '\0';
	return b;
}

char *ppf_out_stem(const char *file, const char *out)
{
	char *base = file_base(file), *r = NULL;

	if (!base)
		return NULL;
	if (!out) {
		r = base;
	} else if (is_dir(out)) {
		const char *slash = strrchr(base, '/');
		const char *name = slash ? slash + 1 : base;
		size_t n = strlen(out);
		int sep = out[n - 1] != '/';
		if (asprintf(&r, "%s%s%s", out, sep ? "/" : "", name) < 0)
			r = NULL;
		free(base);
	} else {
		r = strdup(out);
		free(base);
	}
	return r;
}

char *ppf_out_path(const char *out, const char *stem,
                   const struct ppf_job *jobs, size_t njobs, size_t k)
{
	const struct ppf_job *j = &jobs[k];
	char *r = NULL;

	if (njobs == 1 && out && !is_dir(out))
		return strdup(out);
	if (njobs == 1) {
		if (asprintf(&r, "%s.pb.gz", stem) < 0)
			return NULL;
		return r;
	}
	bool heaps = false, dumps = false;
	for (size_t i = 1; i < njobs; i++) {
		heaps |= strcmp(jobs[i].heap, jobs[0].heap) != 0;
		dumps |= jobs[i].dump != jobs[0].dump;
	}
	char heap[140] = "", dump[32] = "";
	if (heaps) {
		snprintf(heap, sizeof(heap), ".%s", j->heap);
		for (char *c = heap; *c; c++)
			if (*c == '/')
				*c = '_';
	}
	if (j->dump == 0)
		snprintf(dump, sizeof(dump), ".window");
	else if (dumps)
		snprintf(dump, sizeof(dump), ".dump%zu", j->dump);
	size_t n = strlen(stem);
	int keep =
	        n > 6 && !strcmp(stem + n - 6, ".pb.gz") ? (int)n - 6 : (int)n;
	if (asprintf(&r, "%.*s.%s%s%s.pb.gz", keep, stem, j->id, heap, dump) <
	    0)
		return NULL;
	return r;
}
