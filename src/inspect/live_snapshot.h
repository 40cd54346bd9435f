/*
 * A snapshot of a running process taken from the outside (`heapprof
 * snapshot -p PID`, docs/SNAPSHOT.md): neither the process (it may be
 * stopped) nor its collector does anything.  The client keeps each
 * region's memfd open at a high descriptor (>= 512, client.c), so /proc/PID/fd
 * leads to it: we map every region read-only, bind it like the collector
 * (nothing in it is trusted), keep the regions of the process's active attach
 * and copy them with snapshot_take_live.
 *
 *   live_snapshot_find    the one profiled process of a name (-n NAME)
 *   live_snapshot_open    finds and maps the regions (or says why not)
 *   live_snapshot_take    copies them: every live block, stacks, modules
 *   live_snapshot_write_db  writes the copy as a profile database
 *   live_snapshot_close   unmaps and frees
 *
 * These functions print nothing: what went wrong is the caller's to say
 * (why the process cannot be read comes as text, as hp_err takes it).
 */
#ifndef HEAPPROF_INSPECT_LIVE_SNAPSHOT_H
#define HEAPPROF_INSPECT_LIVE_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "collector/collector.h"

struct live_scan;
struct live_candidate;

struct live_snapshot {
	pid_t pid;
	/* live_snapshot_open: why there is nothing to read, for the caller
	 * to print (hp_err's size) */
	char why[1024];
	/* The regions of the active attach, in region_index order. */
	const struct hp_region *rs[TARGET_MAX_REGIONS];
	int nr;
	/* live_snapshot_take */
	struct snapshot snap;
	uint64_t ts, wall; /* CLOCK_BOOTTIME, CLOCK_REALTIME */
	/* private */
	struct live_scan *scan;
	const struct live_candidate *first; /* region index 0 (or the lowest) */
};

/*
 * The one process of ours named name (its first 15 bytes, as
 * /proc/PID/comm keeps it) that has a heapprof region, into *pid.  0, or
 * -1 with why (len bytes) saying why not: none, or several.
 */
int live_snapshot_find(const char *name, pid_t *pid, char *why, size_t len);

/*
 * Finds pid's regions and keeps those of its active attach (the newest
 * active region's session) in ls->rs.  0; -1 with ls->why saying why
 * not (no such process, not ours to read, not profiled, its session
 * ended: with a hint how to profile it); -ENOMEM.  live_snapshot_close
 * ls in every case.
 */
int live_snapshot_open(pid_t pid, struct live_snapshot *ls);

/* Copies the regions into ls->snap (blocks, stacks, modules; module paths
 * made absolute) at ls->ts.  0 or a negative errno. */
int live_snapshot_take(struct live_snapshot *ls);

/* The sampling interval in use: the configured one, or the one adaptive
 * sampling raised it to. */
uint64_t live_snapshot_interval(const struct live_snapshot *ls);

/*
 * ls->snap as a profile database at path (replaced): one process (how
 * "snapshot"), one dump named "snapshot" with every block, and
 * PROFILE_META_CLOCK_OFFSET (store/schema.h).  record_cmdline: the
 * command that took it.  0 or a negative errno, with ls->why saying why ("PATH:
 * No space left on device"): nothing is printed, and no file is left.
 */
int live_snapshot_write_db(struct live_snapshot *ls, const char *path,
                           const char *record_cmdline);

void live_snapshot_close(struct live_snapshot *ls);

#endif
