/*
 * A snapshot of a running process taken from the outside (`heapprof
 * snapshot -p PID`, docs/SNAPSHOT.md): neither the process (it may be
 * stopped) nor its collector does anything.  The client keeps each
 * region's memfd open at a descriptor >= 512, so /proc/PID/fd leads to
 * it: we map every region read-only, bind it like the collector (nothing
 * in it is trusted), keep the regions of the process's active attach and
 * copy them with snapshot_take_live.
 *
 *   live_snapshot_open    finds and maps the regions (or says why not)
 *   live_snapshot_take    copies them: every live block, stacks, modules
 *   live_snapshot_write_db  writes the copy as a profile database
 *   live_snapshot_close   unmaps and frees
 *
 * Messages are the caller's: these functions print nothing.
 */
#ifndef HEAPPROF_COLLECTOR_LIVE_SNAPSHOT_H
#define HEAPPROF_COLLECTOR_LIVE_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "collector/collector.h"

/* heapprof_meta key: CLOCK_REALTIME - CLOCK_BOOTTIME (ns) when the
 * snapshot was taken, so a pprof of it gets its exact wall time. */
#define LIVE_SNAPSHOT_META_CLOCK_OFFSET "realtime_minus_boottime_ns"

/* Why live_snapshot_open found no region to read. */
enum live_snapshot_why {
	LIVE_SNAPSHOT_OK = 0,
	LIVE_SNAPSHOT_NO_PROCESS,   /* no process with that pid */
	LIVE_SNAPSHOT_DENIED,       /* its descriptors are not ours to read */
	LIVE_SNAPSHOT_FD_ERROR,     /* reading /proc/PID/fd failed: err */
	LIVE_SNAPSHOT_NOT_PROFILED, /* no heapprof region */
	LIVE_SNAPSHOT_MAP_FAILED,   /* none could be mapped: err */
	LIVE_SNAPSHOT_CORRUPT,      /* none bound: err is region_bind's */
	LIVE_SNAPSHOT_ENDED,        /* none active: its session ended */
};

struct live_scan;
struct live_candidate;

struct live_snapshot {
	pid_t pid;
	/* live_snapshot_open: why not, with */
	enum live_snapshot_why why;
	int err; /* FD_ERROR, MAP_FAILED: the errno; CORRUPT: region_bind's
	          * (EPROTO: bad magic or version, EINVAL: bad geometry,
	          * EPERM: not sealed against shrinking) */
	/* ENDED: the newest region's client state and stop reason */
	uint32_t state, stop_reason;
	/* NOT_PROFILED, ENDED: it has libheapprof mapped (then `record -p`
	 * can profile it as it runs) */
	bool has_lib;
	/* The regions of the active attach, in region_index order. */
	const struct hp_region *rs[TARGET_MAX_REGIONS];
	int nr;
	/* live_snapshot_take */
	struct snapshot snap;
	uint64_t ts, wall; /* CLOCK_BOOTTIME, CLOCK_REALTIME */
	/* private */
	struct live_scan *scan;
	const struct live_candidate *first; /* of region index 0 */
};

/*
 * Finds pid's regions and keeps those of its active attach (the newest
 * active region's session) in ls->rs.  0; -1 with ls->why saying why
 * not; -ENOMEM.  live_snapshot_close ls in every case.
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
 * LIVE_SNAPSHOT_META_CLOCK_OFFSET.  record_cmdline: the command that took
 * it.  0 or a negative errno; the writer prints its own errors, -ENOMEM
 * is left to the caller.
 */
int live_snapshot_write_db(struct live_snapshot *ls, const char *path,
                           const char *record_cmdline);

void live_snapshot_close(struct live_snapshot *ls);

#endif
