/*
 * One pprof file of a profile, with the comments that say what it holds
 * (`pprof -comments`): a heap at a dump, a heap in a window of the trace
 * (--from/--to), or the difference of two dumps in pprof's -diff_base
 * convention.  Built with pprof.h, for `heapprof pprof` and `heapprof
 * diff` (docs/PPROF.md).
 *
 * Each function returns 0 or a negative errno with one message
 * "heapprof: <subsys>: ..." printed; the command says what was written.
 */
#ifndef HEAPPROF_EXPORT_PPROF_FILE_H
#define HEAPPROF_EXPORT_PPROF_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/aggregate.h"
#include "store/reader.h"

/* A dump of a process in a profile file. */
struct ppf_dump {
	const char *file; /* the profile, as the comments name it */
	sqlite3 *db;
	const struct rd_stacks *s;
	const struct rd_process *proc;
	const struct rd_dump *dump;
	size_t index, ndumps; /* index 1-based */
};

/* Heap `heap` at dump x to path; *nsamples gets the samples written. */
int ppf_write_dump(const struct ppf_dump *x, const char *heap, const char *path,
                   const char *subsys, size_t *nsamples);

/* What ppf_write_window wrote. */
struct ppf_window {
	double from, to; /* seconds since the process started */
	int incomplete;  /* the trace left events out */
	size_t nsamples;
};

/*
 * Heap `heap` of process p in the window w of its trace to path: the
 * allocations made in the window (alloc_*) and those of them still live at
 * its end (space, objects).  file names the profile in the comments.
 */
int ppf_write_window(sqlite3 *db, const struct rd_stacks *s, const char *file,
                     const struct rd_process *p, const char *heap,
                     const struct ag_window *w, const char *path,
                     const char *subsys, struct ppf_window *out);

/* B - A of heap `heap` to path: B's samples, plus A's negated and
 * labelled pprof::base=true, so `go tool pprof -top OUT` shows B - A. */
int ppf_write_diff(const struct ppf_dump *a, const struct ppf_dump *b,
                   const char *heap, const char *path, const char *subsys);

/* ---- several files: what each holds and its name ----------------------- */

/* One file to write: process, heap and dump (1-based index; 0 for the
 * --from/--to window). */
struct ppf_job {
	size_t proc;
	char *heap;
	size_t dump, ndumps;
	char id[48]; /* the process's id (store/procid.h), for messages */
};

void ppf_jobs_free(struct ppf_job *j, size_t n);
/* Append a job (heap copied).  0 or -ENOMEM. */
int ppf_job_add(struct ppf_job **j, size_t *n, size_t proc, const char *heap,
                size_t dump, size_t ndumps);

/* The path all output names start with (a file or a prefix), from the
 * profile FILE and -o out (NULL if none); malloc'ed, NULL if out of
 * memory. */
char *ppf_out_stem(const char *file, const char *out);

/*
 * Output path of job k of jobs[0..njobs), ids filled.  With several
 * files: STEM.ID[.HEAP][.dumpN].pb.gz, or STEM.ID[.HEAP].window.pb.gz: ID
 * the process's id (procid.h: "8681", or "8681.2" for the second process
 * of pid 8681, e.g. its image after an exec), the heap only when the files
 * are of several heaps, the dump only when of several dumps.  A STEM from
 * -o loses its ".pb.gz" (-o one.pb.gz: one.8681.pb.gz).  Not checked for
 * uniqueness (the command does).  Malloc'ed; NULL if out of memory.
 */
char *ppf_out_path(const char *out, const char *stem,
                   const struct ppf_job *jobs, size_t njobs, size_t k);

#endif
