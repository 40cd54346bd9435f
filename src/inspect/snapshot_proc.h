/*
 * What the snapshot code reads from /proc, in one place: a process's
 * descriptors that lead to heapprof regions, whether it has libheapprof
 * mapped, the file mapped at an address, its memory from status, and the
 * processes of a name, through util/proc.h (which the rest of the
 * snapshot code also calls for a process's name and command line).
 */
#ifndef HEAPPROF_INSPECT_SNAPSHOT_PROC_H
#define HEAPPROF_INSPECT_SNAPSHOT_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/profile.h"

/*
 * Every descriptor of pid that names a heapprof region, opened again
 * through /proc/PID/fd (a new open file of the same memfd, read-only) and
 * given to take(ctx, fd), which closes it.  *denied gets the errno of a
 * descriptor we were refused (EACCES, EPERM); others that fail were
 * closed meanwhile.  0, or -ESRCH (no such process) / -EACCES (its
 * descriptors are not ours to read) / another negative errno.
 */
int snapshot_proc_region_fds(pid_t pid, void (*take)(void *ctx, int fd),
                             void *ctx, int *denied);

/* Whether pid has libheapprof mapped (/proc/PID/maps). */
bool snapshot_proc_has_lib(pid_t pid);

/* The pids found by snapshot_proc_by_name. */
#define SNAPSHOT_PROC_BY_NAME_MAX 16

/*
 * The processes of ours (every one, for root) other than this one whose
 * command name is name (as /proc/PID/comm keeps it: its first 15 bytes)
 * and which have a heapprof region: the first SNAPSHOT_PROC_BY_NAME_MAX
 * pids in found[], how many in all in *n; *lib says whether one of that
 * name without a region has libheapprof mapped.  0, or a negative errno
 * when /proc cannot be read.
 */
int snapshot_proc_by_name(const char *name,
                          pid_t found[SNAPSHOT_PROC_BY_NAME_MAX], int *n,
                          bool *lib);

/* The absolute path of the file /proc/PID/maps shows mapped at addr, into
 * out (size PATH_MAX); false if none. */
bool snapshot_proc_mapped_path(pid_t pid, uint64_t addr, char *out);

/* VmRSS, RssAnon, RssFile, RssShmem and VmHWM from /proc/PID/status into
 * m (rss_source "proc").  0, or -1 when the process is gone (a zombie has
 * no VmRSS). */
int snapshot_proc_memory(pid_t pid, struct prof_memory *m);

#endif
