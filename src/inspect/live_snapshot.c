/*
 * A snapshot of a running process from the outside (live_snapshot.h):
 * its regions found through its descriptors, the active attach's picked,
 * copied, and written as a profile database.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inspect/live_snapshot.h"
#include "inspect/snapshot_proc.h"
#include "store/schema.h"
#include "util/proc.h"

/* The most heapprof regions of one process we look at (several attaches,
 * GROW regions). */
#define MAX_CANDIDATES 32

/* ---- the process's regions ---------------------------------------------- */

struct live_candidate {
	void *base;
	uint64_t size;
	struct hp_region r;
	dev_t dev;
	ino_t ino;
	uint64_t session, attach_ts;
	uint32_t index; /* ext->region_index; 0 in v1 */
	uint32_t state, stop_reason;
	bool stop_asked; /* its session set control = STOP */
	int pid;         /* the header's */
};

struct live_scan {
	struct live_candidate c[MAX_CANDIDATES];
	int n;
	int links;   /* fds naming a heapprof region */
	int corrupt; /* of them, failing region_bind */
	int bind_err;
	int denied;  /* errno of a refused open, 0 if none */
	int map_err; /* errno of a failed mmap, 0 if none */
};

static void scan_free(struct live_scan *s)
{
	for (int i = 0; i < s->n; i++)
		munmap(s->c[i].base, s->c[i].size);
	s->n = 0;
}

static bool seen(const struct live_scan *s, dev_t dev, ino_t ino)
{
	for (int i = 0; i < s->n; i++)
		if (s->c[i].dev == dev && s->c[i].ino == ino)
			return true;
	return false;
}

/* Maps and binds the region open at fd (snapshot_proc_region_fds), and
 * closes fd. */
static void take_fd(void *ctx, int fd)
{
	struct live_scan *s = ctx;
	struct stat sb;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
	    seen(s, sb.st_dev, sb.st_ino) || s->n == MAX_CANDIDATES) {
		close(fd);
		return;
	}
	s->links++;
	uint64_t size = (uint64_t)sb.st_size;
	/* The collector seals its regions against shrinking: a file that
	 * could shrink under our mapping (SIGBUS) is not one of them. */
	int seals = fcntl(fd, F_GET_SEALS);
	void *base = MAP_FAILED;
	int rc = -EINVAL;
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		rc = -EPERM;
	} else if (size >= sizeof(struct hp_header_v1)) {
		base = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (base == MAP_FAILED)
			s->map_err = errno;
	}
	close(fd);
	struct live_candidate *c = &s->c[s->n];
	memset(c, 0, sizeof(*c));
	if (base != MAP_FAILED)
		rc = region_bind(&c->r, base, size);
	else if (s->map_err)
		return; /* not corrupt: we could not map it */
	if (rc) {
		if (base != MAP_FAILED)
			munmap(base, size);
		s->corrupt++;
		s->bind_err = rc;
		return;
	}
	c->base = base;
	c->size = size;
	c->dev = sb.st_dev;
	c->ino = sb.st_ino;
	struct hp_header_v1 *h = c->r.hdr;
	c->session = h->session_id;
	c->attach_ts = atomic_load(&h->attach_time_ns);
	c->index = c->r.ext ? c->r.ext->region_index : 0;
	c->state = atomic_load(&h->client_state);
	c->stop_reason = atomic_load(&h->stop_reason);
	c->stop_asked = atomic_load(&h->control) == HP_CONTROL_STOP;
	c->pid = h->pid;
	s->n++;
}

/*
 * Every heapprof region among pid's descriptors.  0, or -ESRCH (no such
 * process) / -EACCES (its descriptors are not ours to read), messages
 * left to the caller.
 */
static int scan_fds(pid_t pid, struct live_scan *s)
{
	memset(s, 0, sizeof(*s));
	return snapshot_proc_region_fds(pid, take_fd, s, &s->denied);
}

/*
 * Recording now: the client says so, and its session has not asked it to
 * stop (a client notices that at its next allocation, so an idle program
 * still says active; its table is no longer kept up to date).
 */
static bool active(const struct live_candidate *c, pid_t pid)
{
	return c->pid == pid && c->state == HP_STATE_ACTIVE && !c->stop_asked;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct live_candidate *x =
	        *(const struct live_candidate *const *)a;
	const struct live_candidate *y =
	        *(const struct live_candidate *const *)b;
	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	/* The same index twice: the newer attach first. */
	if (x->attach_ts != y->attach_ts)
		return x->attach_ts > y->attach_ts ? -1 : 1;
	return 0;
}

/* ---- why not ------------------------------------------------------------ */

static const char *state_str(uint32_t st)
{
	switch (st) {
	case HP_STATE_OFFERED:
		return "not started";
	case HP_STATE_ACTIVE:
		return "active";
	case HP_STATE_STOPPED:
		return "stopped";
	}
	return "unknown";
}

static const char *stop_str(uint32_t r)
{
	switch (r) {
	case HP_STOP_REQUESTED:
		return "its session stopped it";
	case HP_STOP_EXEC:
		return "it ran exec";
	case HP_STOP_INTERNAL:
		return "internal error";
	case HP_STOP_EXIT:
		return "it is exiting";
	case HP_STOP_COLLECTOR_GONE:
		return "its collector went away";
	}
	return "no reason given";
}

#define HINT                                                                   \
	"profile it with 'heapprof record -i 1 -p PID' or 'heapprof record "   \
	"-i 1 -- CMD'"

/* The hint for a running process that no session profiles now. */
static const char *attach_hint(pid_t pid, const char *comm, char *buf,
                               size_t len)
{
	if (!snapshot_proc_has_lib(pid))
		return HINT;
	snprintf(buf, len,
	         "it has libheapprof loaded: profile it with 'heapprof "
	         "record -i 1 -p %d' (or -n %s) and take the snapshot while "
	         "that session runs",
	         (int)pid, comm);
	return buf;
}

/* Says why in ls->why; -1. */
__attribute__((format(printf, 2, 3))) static int fail(struct live_snapshot *ls,
                                                      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ls->why, sizeof(ls->why), fmt, ap);
	va_end(ap);
	return -1;
}

int live_snapshot_find(const char *name, pid_t *pid, char *why, size_t len)
{
	pid_t found[SNAPSHOT_PROC_BY_NAME_MAX];
	int n = 0;
	bool lib = false; /* one of that name has libheapprof loaded */
	int err = snapshot_proc_by_name(name, found, &n, &lib);

	if (err) {
		snprintf(why, len, "/proc: %s", strerror(-err));
		return -1;
	}
	if (n == 0 && lib)
		snprintf(why, len,
		         "no process of yours named '%s' is profiled by "
		         "heapprof (it has libheapprof loaded: profile it with "
		         "'heapprof record -i 1 -n %s' and take the snapshot "
		         "while that session runs)",
		         name, name);
	else if (n == 0)
		snprintf(why, len,
		         "no process of yours named '%s' is profiled by "
		         "heapprof (%s)",
		         name, HINT);
	if (n == 0)
		return -1;
	if (n > 1) {
		char list[256] = "";
		size_t used = 0;
		int shown = n < SNAPSHOT_PROC_BY_NAME_MAX
		                    ? n
		                    : SNAPSHOT_PROC_BY_NAME_MAX;
		for (int i = 0; i < shown && used < sizeof(list); i++)
			used += (size_t)snprintf(list + used,
			                         sizeof(list) - used, "%s%d",
			                         i ? ", " : "", (int)found[i]);
		snprintf(why, len,
		         "%d processes named '%s' are profiled (pids %s%s): "
		         "choose one with -p",
		         n, name, list, n > shown ? ", ..." : "");
		return -1;
	}
	*pid = found[0];
	return 0;
}

/* ---- the active attach's regions ---------------------------------------- */

int live_snapshot_open(pid_t pid, struct live_snapshot *ls)
{
	char comm[64], hint[256];

	memset(ls, 0, sizeof(*ls));
	ls->pid = pid;
	struct live_scan *s = ls->scan = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	int rc = scan_fds(pid, s);

	if (rc == -ESRCH)
		return fail(ls, "no process with pid %d", (int)pid);
	proc_comm(pid, comm, sizeof(comm));
	if (rc == -EACCES || (s->links == 0 && s->denied))
		return fail(ls,
		            "cannot read the descriptors of pid %d (%s): "
		            "permission denied (run as the same user as the "
		            "process, or with CAP_SYS_PTRACE and "
		            "CAP_DAC_READ_SEARCH)",
		            (int)pid, comm);
	if (rc < 0)
		return fail(ls, "pid %d: reading /proc/%d/fd: %s", (int)pid,
		            (int)pid, strerror(-rc));
	if (s->links == 0)
		return fail(ls,
		            "pid %d (%s) is not profiled by heapprof: it has "
		            "no heapprof region (%s)",
		            (int)pid, comm,
		            attach_hint(pid, comm, hint, sizeof(hint)));
	if (s->n == 0 && s->map_err)
		return fail(ls,
		            "pid %d (%s): cannot map its heapprof region: %s",
		            (int)pid, comm, strerror(s->map_err));
	if (s->n == 0)
		return fail(ls,
		            "pid %d (%s): its heapprof region is corrupt (%s); "
		            "cannot read it",
		            (int)pid, comm,
		            s->bind_err == -EPROTO
		                    ? "bad magic or layout version"
		            : s->bind_err == -EINVAL
		                    ? "bad table geometry"
		                    : "not sealed against shrinking");
	/* The active attach: the newest active region's session. */
	const struct live_candidate *newest = NULL;
	const struct live_candidate *last = &s->c[0];
	for (int i = 0; i < s->n; i++) {
		const struct live_candidate *c = &s->c[i];
		if (c->attach_ts >= last->attach_ts)
			last = c;
		if (!active(c, pid))
			continue;
		if (!newest || c->attach_ts > newest->attach_ts)
			newest = c;
	}
	if (!newest && last->state == HP_STATE_ACTIVE)
		return fail(ls,
		            "pid %d (%s) is not profiled any more: its "
		            "heapprof session ended; %s",
		            (int)pid, comm,
		            attach_hint(pid, comm, hint, sizeof(hint)));
	if (!newest)
		return fail(ls,
		            "pid %d (%s) is not profiled any more: its "
		            "heapprof session ended (client %s: %s); %s",
		            (int)pid, comm, state_str(last->state),
		            stop_str(last->stop_reason),
		            attach_hint(pid, comm, hint, sizeof(hint)));
	const struct live_candidate *pick[MAX_CANDIDATES] = {NULL};
	int np = 0;
	for (int i = 0; i < s->n; i++) {
		const struct live_candidate *c = &s->c[i];
		if (active(c, pid) && c->session == newest->session)
			pick[np++] = c;
	}
	qsort(pick, (size_t)np, sizeof(pick[0]), cand_cmp);
	ls->nr = 0;
	for (int i = 0; i < np && ls->nr < TARGET_MAX_REGIONS; i++) {
		if (i > 0 && pick[i]->index == pick[i - 1]->index)
			continue;
		ls->rs[ls->nr++] = &pick[i]->r;
	}
	ls->first = pick[0];
	return 0;
}

/* ---- the snapshot ------------------------------------------------------- */

int live_snapshot_take(struct live_snapshot *ls)
{
	ls->ts = hp_clock_ns(CLOCK_BOOTTIME);
	ls->wall = hp_clock_ns(CLOCK_REALTIME);
	int err = snapshot_take_live(ls->rs, ls->nr, false, &ls->snap);
	if (!err)
		err = snapshot_resolve_paths(&ls->snap, ls->pid, true, NULL);
	return err;
}

uint64_t live_snapshot_interval(const struct live_snapshot *ls)
{
	uint64_t interval = ls->first->r.hdr->sampling_interval;
	if (ls->snap.dump.interval_used > interval)
		interval = ls->snap.dump.interval_used;
	return interval;
}

/* ---- the database ------------------------------------------------------- */

int live_snapshot_write_db(struct live_snapshot *ls, const char *path,
                           const char *record_cmdline)
{
	pid_t pid = ls->pid;
	struct snapshot *snap = &ls->snap;
	char comm[64], off[32];
	char *cmdline = proc_cmdline(pid);
	const struct hp_header_v1 *h = ls->first->r.hdr;
	uint64_t shmem = 0;
	int64_t upid = 0;
	int err = cmdline ? 0 : -ENOMEM;

	for (int i = 0; i < ls->nr; i++)
		shmem += ls->rs[i]->size;
	proc_comm(pid, comm, sizeof(comm));
	pid_t ppid = proc_ppid(pid);
	struct prof_process pi = {
	        .pid = pid,
	        .name = comm,
	        .cmdline = cmdline ? cmdline : "",
	        .sampling_interval = h->sampling_interval,
	        .unwind = h->unwind_mode == HP_UNWIND_FP ? "fp" : "dwarf",
	        .max_frames = h->max_frames,
	        .shmem_size = shmem,
	        .start_ts_ns = ls->first->attach_ts,
	        .how = "snapshot",
	        .ppid = ppid > 0 ? ppid : 0,
	        .session_id = h->session_id,
	};
	struct profile_status pst = {0};
	struct profile *prof =
	        err ? NULL : profile_open(path, record_cmdline, &pst);
	if (!err && !prof)
		err = pst.err ? pst.err : -EIO;
	if (!err)
		err = profile_begin_process(prof, &pi, &upid);
	snap->dump.ts_ns = ls->ts;
	snap->dump.reason = "snapshot";
	snap->dump.name = "snapshot";
	snap->dump.blocks_in_flight = snap->blocks_in_flight;
	snapshot_memory(ls->rs[0], pid, true, &snap->dump.memory);
	if (!err)
		err = profile_write_dump(prof, upid, &snap->dump);
	snprintf(off, sizeof(off), "%" PRId64, (int64_t)(ls->wall - ls->ts));
	if (!err)
		err = profile_set_meta(prof, PROFILE_META_CLOCK_OFFSET, off);
	bool made = prof != NULL; /* the file is ours to remove */
	if (prof) {
		struct profile_status end;
		int cerr = profile_finish(prof, &end);
		profile_free(prof);
		if (!pst.err)
			pst = end;
		if (!err)
			err = end.err ? end.err : cerr;
	}
	/* One dump: a file without all of it is no snapshot (a full disk
	 * costs it, never the process, which was only read).  A file
	 * profile_open refused or could not make is not ours, or gone. */
	if (err && made) {
		static const char *const side[] = {"", "-wal", "-shm",
		                                   "-journal"};
		char f[4096];
		for (size_t i = 0; i < sizeof(side) / sizeof(side[0]); i++)
			if (snprintf(f, sizeof(f), "%s%s", path, side[i]) <
			    (int)sizeof(f))
				unlink(f);
	}
	if (err)
		snprintf(ls->why, sizeof(ls->why), "%s: %s", path,
		         pst.err ? pst.why : strerror(-err));
	free(cmdline);
	return err;
}

void live_snapshot_close(struct live_snapshot *ls)
{
	snapshot_free(&ls->snap);
	if (ls->scan)
		scan_free(ls->scan);
	free(ls->scan);
	ls->scan = NULL;
}
