/*
 * The collector's regions and client connections.  Each accepted process
 * gets a fresh memfd, sized, formatted and sealed against shrinking and
 * growing (a client that truncated it could otherwise crash us with
 * SIGBUS), mapped by us and passed to the client with SCM_RIGHTS.  The
 * embedded control socket lives in a private 0700 directory and answers
 * peers of our own uid only.
 *
 * Nothing here may block the session's poll loop: connections are accepted
 * non-blocking and their hellos read as they arrive (bounded by
 * COLLECTOR_HELLO_MS), clients' messages are read without waiting,
 * welcomes are sent with MSG_DONTWAIT (a client that does not read its
 * socket loses its answer, not our time), and while the session runs the
 * profile is written by a thread of its own (util/jobq.h): a dump reads the
 * regions here and queues the writing.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "collector/collector.h"
#include "inject/elf.h"
#include "util/human.h"
#include "util/memcg.h"
#include "util/proc.h"
#include "util/err.h"

uint64_t boottime_ns(void)
{
	return hp_clock_ns(CLOCK_BOOTTIME);
}

uint64_t collector_default_shmem(uint64_t interval)
{
	/* Pages are only committed when touched; with interval 1 every live
	 * block needs a slot, so reserve more address space. */
	return interval == 1 ? 512ull << 20 : 64ull << 20;
}

int collector_open(struct collector *c, const struct collector_opts *o,
                   bool listen_sock)
{
	memset(c, 0, sizeof(*c));
	c->listen_fd = -1;
	c->opts = *o;
	jobq_init(&c->wq, JOBQ_NOTIFY, COLLECTOR_QUEUE_MAX_BYTES);
	if (!c->opts.shmem_size) {
		c->opts.shmem_size =
		        collector_default_shmem(hp_heap_select_min_interval(
		                o->heap_select, o->nheap_select, o->interval));
		/* The region's whole size counts against the program's
		 * address-space limit (ulimit -v), touched or not: under one,
		 * take a sixteenth of it at most, so the program can still
		 * have what it could bare (its commands inherit our limit). */
		struct rlimit rl;
		if (getrlimit(RLIMIT_AS, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY) {
			uint64_t cap = (uint64_t)rl.rlim_cur / 16;
			if (cap < HP_REGION_MIN_SIZE)
				cap = HP_REGION_MIN_SIZE;
			if (c->opts.shmem_size > cap)
				c->opts.shmem_size = cap & ~(uint64_t)4095;
		}
	}
	if (!listen_sock)
		return 0;
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp || strlen(tmp) > 40)
		tmp = "/tmp";
	snprintf(c->dir, sizeof(c->dir), "%s/heapprof-XXXXXX", tmp);
	if (!mkdtemp(c->dir)) {
		int e = errno;
		hp_log("heapprof: collector: cannot create %s: %s\n", c->dir,
		       strerror(e));
		c->dir[0] = '\0';
		return -e;
	}
	snprintf(c->path, sizeof(c->path), "%s/ctl", c->dir);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, c->path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 64) != 0) {
		int e = errno;
		hp_log("heapprof: collector: cannot listen on %s: %s\n",
		       c->path, strerror(e));
		close(fd);
		return -e;
	}
	c->listen_fd = fd;
	return 0;
}

/* ---- writes to the profile (util/jobq.h) ------------------------------ */

static int send_welcome(int fd, uint32_t answer_to, uint32_t status,
                        uint32_t layout_version, uint64_t size, int region_fd);

void collector_writer_start(struct collector *c)
{
	jobq_start(&c->wq);
}

unsigned collector_writer_stop(struct collector *c)
{
	unsigned failed = 0;
	jobq_stop(&c->wq, &failed);
	return failed;
}

bool collector_periodic_pending(struct collector *c)
{
	return jobq_marked(&c->wq);
}

static void free_job(void *arg, int rc)
{
	(void)rc;
	free(arg);
}

/* A process row (and, for a row with nothing recorded, its end). */
struct row_job {
	struct profile *p;
	struct prof_process info;
	bool end;
	struct prof_process_end e;
	char strs[]; /* name, cmdline, how, note */
};

static int row_run(void *arg)
{
	struct row_job *j = arg;
	int64_t upid;
	int rc = profile_begin_process(j->p, &j->info, &upid);
	if (!rc && j->end)
		rc = profile_end_process(j->p, upid, &j->e);
	return rc;
}

static char *put_str(char **at, const char *s)
{
	char *d = *at;
	size_t n = strlen(s) + 1;
	memcpy(d, s, n);
	*at += n;
	return d;
}

/*
 * A process whose executable defines malloc itself (and exports it, as a
 * linker does for a symbol the C library's own calls then bind to): every
 * call of the program and of its libraries goes to that allocator, which
 * neither the preloaded hooks nor the routed slots of an attach see; the
 * profile would hold only what reaches the C library, often nothing.
 * Said (one line) and kept as the process's note for the report.  Returns
 * note, or NULL if the executable has no malloc of its own.
 */
static const char *own_malloc_note(pid_t pid, char *note, size_t len)
{
	char exe[PATH_MAX], path[64], why[128];
	if (proc_exe(pid, exe, sizeof(exe)) != 0)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	struct ielf e;
	if (ielf_open(path, &e, why, sizeof(why)) != 0)
		return NULL;
	uint64_t v;
	int type = 0;
	bool own = ielf_sym(&e, "malloc", &v, NULL, &type) == 0 &&
	           (type == STT_FUNC || type == STT_GNU_IFUNC);
	ielf_close(&e);
	if (!own)
		return NULL;
	snprintf(note, len,
	         "its executable %s defines malloc itself: heapprof sees only "
	         "what reaches the C library's allocator; report that "
	         "allocator's blocks with the custom allocator API "
	         "(heapprof/heap_profile.h, docs/HEAPS.md)",
	         exe);
	return note;
}

/* Numbers the row (info->upid), queues it; e: its end at once, or NULL. */
static int add_row(struct collector *c, const struct prof_process *info,
                   const struct prof_process_end *e, int64_t *upid)
{
	const char *name = info->name ? info->name : "";
	const char *cmd = info->cmdline ? info->cmdline : "";
	const char *how = info->how ? info->how : "command";
	size_t len = strlen(name) + strlen(cmd) + strlen(how) + 3 +
	             (info->note ? strlen(info->note) + 1 : 0);
	struct row_job *j = malloc(sizeof(*j) + len);
	if (!j) {
		hp_log("heapprof: collector: out of memory\n");
		return -ENOMEM;
	}
	j->p = c->profile;
	j->info = *info;
	j->info.upid = *upid = ++c->last_upid;
	char *at = j->strs;
	j->info.name = put_str(&at, name);
	j->info.cmdline = put_str(&at, cmd);
	j->info.how = put_str(&at, how);
	j->info.note = info->note ? put_str(&at, info->note) : NULL;
	j->end = e != NULL;
	if (e)
		j->e = *e;
	return jobq_submit(&c->wq, row_run, free_job, NULL, j, 0, 0);
}

struct end_job {
	struct profile *p;
	int64_t upid;
	struct prof_process_end e;
	char exec_not_followed[256]; /* e.exec_not_followed points here */
};

static int end_run(void *arg)
{
	struct end_job *j = arg;
	return profile_end_process(j->p, j->upid, &j->e);
}

/*
 * A dump, read and written by the writer: the regions the process had
 * when the dump was asked for (their descriptors; a region is unmapped
 * only after the jobs queued before its retirement, see
 * collector_retire), read when the writer gets to it.  A traced target's
 * trace counts go first; of the events handed over, those the writer
 * could not write (tr->lost) are known to it, which has made every
 * earlier write when it gets to this one.
 */
struct dump_job {
	struct profile *p;
	const struct collector *c; /* opts: read only while the loop runs */
	int64_t upid;
	pid_t pid;
	bool alive;         /* connected when asked: /proc has its memory */
	char cwd[PATH_MAX]; /* the target's (struct target) */
	struct hp_region regs[TARGET_MAX_REGIONS];
	int nreg;
	bool blocks;            /* every live block (snapshot_take_live) */
	uint64_t ts;            /* when it was asked for */
	struct target *peak_of; /* opts.peak_dumps: the peak first, if new */
	const char *reason;
	bool traced;
	struct prof_trace pt;
	const struct target_trace *tr;
	struct dump_group *group; /* counted in, or NULL */
	struct target *answer;    /* a named snapshot: answered after */
	char name[HP_SNAPSHOT_NAME_MAX];
	bool named;
	/* Its memory cgroup at the dump (target.mw, session/memwatch.c). */
	int cg_version;
	uint64_t cg_limit, cg_usage, cg_peak;
	/* The regions' pages heapprof allocated (tend.c), and the regions'
	 * memfds (ours, closed after this job: collector_retire). */
	uint64_t tables_ours;
	int fds[TARGET_MAX_REGIONS];
};

static int select_heaps(const struct collector *c, struct snapshot *s);

/* A job's copy of a process's regions, read (every live block too with
 * blocks) and cut to the heaps the session profiles, its relative module
 * paths made absolute (pid, alive, cwd: snapshot_resolve_paths); *s is
 * freed on failure. */
static int read_regions(const struct collector *c, const struct hp_region *reg,
                        int nreg, bool blocks, bool at_peak, pid_t pid,
                        bool alive, const char *cwd, struct snapshot *s)
{
	const struct hp_region *regs[TARGET_MAX_REGIONS];
	for (int i = 0; i < nreg; i++)
		regs[i] = &reg[i];
	int rc = blocks ? snapshot_take_live(regs, nreg, at_peak, s)
	                : snapshot_take_regions(regs, nreg, at_peak, s);
	if (rc)
		return rc;
	rc = snapshot_resolve_paths(s, pid, alive, cwd);
	if (!rc)
		rc = select_heaps(c, s);
	if (rc)
		snapshot_free(s);
	return rc;
}

/*
 * The peak's own dump (reason "peak", at_max), written before the dump
 * of job j when the process reached a new peak of live bytes since its
 * last dump looked (a new max_epoch: not a time, for the collector's log
 * may be applied after a dump read the table, with each allocation's own
 * time, older than that dump's).  Its stacks as they were at the peak;
 * its time the peak's, kept after the process's last dump and before
 * j's, so its dumps stay in the order of their times (each one's
 * cumulative counters at least the one's before).  The last one written
 * is the session's peak: peaks only rise.
 */
static int peak_dump(struct dump_job *j)
{
	const struct hp_region *r0 = &j->regs[0];
	struct target *t = j->peak_of;
	if (!r0->stack_max)
		return 0;
	uint64_t e =
	        atomic_load_explicit(&r0->hdr->max_epoch, memory_order_acquire);
	if (e == t->peak_epoch)
		return 0;
	uint64_t max = atomic_load_explicit(&r0->hdr->max_live_bytes,
	                                    memory_order_acquire);
	uint64_t ts =
	        atomic_load_explicit(&r0->hdr->max_ts_ns, memory_order_relaxed);
	uint64_t lo = t->last_dump_ts + 1, hi = j->ts - 1;
	if (max == 0 || lo > hi)
		return 0; /* no room between two dumps: j holds it */
	t->peak_epoch = e;
	uint64_t started = hp_clock_ns(CLOCK_MONOTONIC);
	struct snapshot s;
	int rc = read_regions(j->c, j->regs, j->nreg, false, true, j->pid,
	                      j->alive, j->cwd, &s);
	if (rc)
		return rc;
	/* Rows are found by their dump's time. */
	s.dump.ts_ns = ts < lo ? lo : ts > hi ? hi : ts;
	s.dump.started_ns = started;
	s.dump.reason = "peak";
	rc = profile_write_dump(j->p, j->upid, &s.dump);
	if (!rc)
		t->last_dump_ts = s.dump.ts_ns;
	snapshot_free(&s);
	return rc;
}

static int dump_run(void *arg)
{
	struct dump_job *j = arg;
	int prc = 0;
	if (j->peak_of && !j->traced)
		prc = peak_dump(j);
	/* The dump's write_ms counts from here: reading the regions is part
	 * of the cost of a dump. */
	uint64_t started = hp_clock_ns(CLOCK_MONOTONIC);
	struct snapshot s;
	int rc = read_regions(j->c, j->regs, j->nreg, j->blocks,
	                      j->c->opts.dump_at_max, j->pid, j->alive, j->cwd,
	                      &s);
	if (rc)
		return rc;
	s.dump.ts_ns = j->ts;
	s.dump.started_ns = started;
	s.dump.reason = j->reason;
	s.dump.name = j->named ? j->name : NULL;
	s.dump.blocks_in_flight = s.blocks_in_flight;
	/* The process's memory beside the profile: the exit reading lives in
	 * the first region's header. */
	snapshot_memory(&j->regs[0], j->pid, j->alive, &s.dump.memory);
	s.dump.memory.cg_version = j->cg_version;
	s.dump.memory.cg_limit = j->cg_limit;
	s.dump.memory.cg_usage = j->cg_usage;
	s.dump.memory.cg_peak = j->cg_peak;
	/* heapprof's own memory: the regions in memory, and what of it we
	 * allocated (the rest the process did). */
	uint64_t tables = 0;
	for (int i = 0; i < j->nreg; i++)
		tables += region_resident(j->fds[i], j->regs[i].base,
		                          j->regs[i].size);
	if (tables) {
		s.dump.memory.have_tables = 1;
		s.dump.memory.tables = tables;
		s.dump.memory.tables_ours =
		        j->tables_ours < tables ? j->tables_ours : tables;
	}
	if (j->traced) {
		/* Before the dump: it marks the process traced in the
		 * writer, so the dump maps its stacks for the events. */
		uint64_t lost = atomic_load_explicit(&j->tr->lost,
		                                     memory_order_relaxed);
		j->pt.events = j->pt.events > lost ? j->pt.events - lost : 0;
		rc = profile_set_trace(j->p, j->upid, &j->pt);
		/* The peak after: its stacks are mapped for the events too. */
		if (j->peak_of && !rc)
			rc = peak_dump(j);
	}
	/* The dump all the same: a write error of the trace's row is the
	 * writer's to count with the dump it cost (a full disk). */
	int drc = profile_write_dump(j->p, j->upid, &s.dump);
	if (j->peak_of && !drc)
		j->peak_of->last_dump_ts = j->ts;
	if (!rc)
		rc = prc ? prc : drc;
	snapshot_free(&s);
	return rc;
}

static void snapshot_answer(struct target *t, const char *name, int rc)
{
	if (!rc)
		t->snapshots++;
	else
		hp_log("heapprof: collector: pid %d: snapshot \"%s\" not "
		       "written: %s\n",
		       (int)t->pid, name, strerror(-rc));
	/* (Closed meanwhile: the program is gone or stopped waiting.) */
	if (t->fd >= 0)
		send_welcome(t->fd, HP_CMSG_SNAPSHOT,
		             rc ? HP_WELCOME_ERROR : HP_WELCOME_ACCEPT,
		             t->layout_version, 0, -1);
}

static void dump_fin(void *arg, int rc)
{
	struct dump_job *j = arg;
	if (j->group) {
		if (rc)
			j->group->errors++;
		else
			j->group->dumps++;
	}
	if (j->answer)
		snapshot_answer(j->answer, j->name, rc);
	free(j);
}

/* The end of a dump_group: after its dumps in the queue. */
static int group_run(void *arg)
{
	(void)arg;
	return 0;
}

static void group_fin(void *arg, int rc)
{
	(void)rc;
	struct dump_group *g = arg;
	g->done(g);
}

/* ---- regions ------------------------------------------------------- */

/*
 * Whether the live table of an attach's first region is kept by the
 * collector from a log (HP_TRACE_LOG, docs/LAYOUT.md, "The live table's
 * log"): when the session records every block (interval 1), nothing
 * else needs the client to keep it (adaptive sampling and --block-client
 * do; the peak the collector follows as it applies the log, trace.c),
 * and HEAPPROF_LIVE_LOG is not 0 (a switch for measuring one against
 * the other).
 */
static bool live_log_wanted(const struct collector *c, uint32_t version,
                            uint32_t index)
{
	const struct collector_opts *o = &c->opts;
	if (version < 2 || index != 0)
		return false;
	if (o->config_flags & (HP_CFG_ADAPTIVE | HP_CFG_BLOCK_CLIENT))
		return false;
	/* Interval 1 for the session: no live filter (when sampling, a
	 * free the filter calls unsampled is not logged, and the filter is
	 * the collector's to update: too late for that). */
	if (o->interval != 1)
		return false;
	const char *e = getenv("HEAPPROF_LIVE_LOG");
	return !(e && !strcmp(e, "0"));
}

/*
 * Creates, formats and maps a region into *tr: `size` bytes for the
 * tables, plus the trace's bytes in region 0 of a v2 attach when the
 * session traces (or the live table's log when it has one).  Returns the memfd
 * (for the welcome) or a negative errno.
 */
static int make_region(struct collector *c, uint64_t size, uint32_t version,
                       uint32_t index, struct target_region *tr)
{
	const struct collector_opts *o = &c->opts;
	bool traced = version >= 2 && index == 0 && o->trace_mode;
	bool logged = !traced && live_log_wanted(c, version, index);
	uint64_t tbytes = 0;
	if (traced)
		tbytes = o->trace_bytes ? o->trace_bytes
		                        : HP_TRACE_DEFAULT_BYTES;
	else if (logged && size >= 8 * HP_LOG_BYTES)
		tbytes = HP_LOG_BYTES;
	else
		logged = false;
	/* A trace the user asked for comes on top of the tables; the log
	 * comes out of them, so that the region stays within the share of
	 * the program's address space it was sized to (a region too small
	 * to spare an eighth for it has none: the program keeps its
	 * table). */
	if (!logged)
		size += tbytes;
	int fd = memfd_create("heapprof-region",
	                      MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* A memfd is made 0777; only descriptors reach it, but a link in
	 * /proc/PID/fd opened by a process that may ptrace-read the target
	 * gets the inode's mode: ours only. */
	if (fchmod(fd, 0600) != 0)
		goto fail;
	if (ftruncate(fd, (off_t)size) != 0)
		goto fail;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
	    0)
		goto fail;
	void *base =
	        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		goto fail;
	struct hp_config cfg = {
	        .sampling_interval = o->interval,
	        .unwind_mode = o->unwind_mode,
	        .max_frames = o->max_frames,
	        /* Non-zero in a region; 0 in the profile means "no daemon
	         * session" (record -- CMD). */
	        .session_id = o->session_id ? o->session_id : 1,
	        .heap_select = o->heap_select,
	        .nheap_select = o->nheap_select,
	        .config_flags = o->config_flags,
	        .adaptive_threshold_pct = o->adaptive_threshold_pct,
	        .adaptive_max_interval = o->adaptive_max_interval,
	        .block_timeout_ms = o->block_timeout_ms,
	        .layout_version = version,
	        .region_index = index,
	        .trace_mode = traced   ? o->trace_mode
	                      : logged ? HP_TRACE_LOG
	                               : HP_TRACE_OFF,
	        .trace_block_ms = traced ? o->trace_block_ms : 0,
	        .trace_bytes = tbytes,
	};
	int rc = region_format(base, size, &cfg);
	if (!rc)
		rc = region_bind(&tr->region, base, size);
	if (rc) {
		munmap(base, size);
		close(fd);
		return rc;
	}
	tr->base = base;
	tr->size = size;
	tr->trace_bytes = tbytes;
	/* Ours, to allocate its pages as the client needs them (tend.c);
	 * without it they are populated through our mapping. */
	tr->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	/* Its first pages charged to us, not to the program (tend.c). */
	collector_prepare_region(tr);
	return fd;
fail:;
	int e = -errno;
	close(fd);
	return e;
}

/*
 * A memfd is a file: growing it past the file size limit (`ulimit -f`)
 * fails with EFBIG (record ignores SIGXFSZ).  Says so, and what helps.
 */
static const char *fsize_hint(int err, char *buf, size_t len)
{
	struct rlimit rl;
	if (err != EFBIG || getrlimit(RLIMIT_FSIZE, &rl) != 0 ||
	    rl.rlim_cur == RLIM_INFINITY)
		return "";
	char b[HP_FMT_BYTES_MAX];
	snprintf(buf, len,
	         " (the file size limit, ulimit -f, is %s: raise it, or make "
	         "regions smaller with --shmem-size, at least 1048576)",
	         hp_fmt_bytes_short(b, sizeof(b),
	                            rl.rlim_cur > INT64_MAX
	                                    ? INT64_MAX
	                                    : (int64_t)rl.rlim_cur));
	return buf;
}

/* answer_to: the client message answered (HP_CMSG_*), 0 for a hello. */
static int send_welcome(int fd, uint32_t answer_to, uint32_t status,
                        uint32_t layout_version, uint64_t size, int region_fd)
{
	struct hp_welcome w = {.magic = HP_WIRE_MAGIC,
	                       .version = HP_WIRE_VERSION,
	                       .status = status,
	                       .layout_version = layout_version,
	                       .region_size = size,
	                       .answer_to = answer_to};
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (region_fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &region_fd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(w) ? 0 : -EPIPE;
}

void collector_refuse(int fd, uint32_t status)
{
	send_welcome(fd, 0, status, HP_LAYOUT_VERSION, 0, -1);
	close(fd);
}

static struct target *new_target(struct collector *c)
{
	if (c->ntargets == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct target **t = realloc(c->targets, cap * sizeof(*t));
		if (!t)
			return NULL;
		c->targets = t;
		c->cap = cap;
	}
	struct target *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->fd = -1;
	for (int i = 0; i < TARGET_MAX_REGIONS; i++)
		t->reg[i].fd = -1;
	return t;
}

/* t->cwd from /proc/PID/cwd, before the welcome: the process waits for
 * it, so it is there (after it, it may have run to its end); "" if
 * unreadable. */
static void target_cwd(struct target *t, pid_t pid)
{
	if (proc_cwd(pid, t->cwd, sizeof(t->cwd)) || t->cwd[0] != '/')
		t->cwd[0] = '\0';
}

/*
 * The region's size for pid: the session's, but at most a sixteenth of
 * what the process's own address-space limit (ulimit -v, RLIMIT_AS) has
 * left: every byte of the mapping counts against that limit, touched or
 * not, and the program must still get what it would bare.  0 when that
 * share is under the smallest region (*head: what the limit leaves).
 */
static uint64_t target_region_size(const struct collector *c, pid_t pid,
                                   uint64_t *head)
{
	uint64_t size = c->opts.shmem_size;
	*head = UINT64_MAX;
	struct rlimit rl;
	if (prlimit(pid, RLIMIT_AS, NULL, &rl) != 0 ||
	    rl.rlim_cur == RLIM_INFINITY)
		return size;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	FILE *f = fopen(path, "re");
	unsigned long long pages = 0;
	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t vm = pages * (uint64_t)(ps > 0 ? ps : 4096);
	*head = (uint64_t)rl.rlim_cur > vm ? (uint64_t)rl.rlim_cur - vm : 0;
	uint64_t cap = (*head / 16) & ~(uint64_t)4095;
	if (size > cap)
		size = cap;
	return size < HP_REGION_MIN_SIZE ? 0 : size;
}

/*
 * When the collector is in pid's memory cgroup (or below it), the pages it
 * allocates for pid's tables count against pid's limit too: the live
 * table is held to the levels that fit in an eighth of the room the
 * cgroup has left now (*levels; 0: no such limit).  -1 when not even
 * level 0 fits (*room: the room).
 */
static int shared_cgroup_levels(pid_t pid, struct hp_region *r,
                                uint32_t *levels, uint64_t *room)
{
	*levels = 0;
	*room = 0;
	struct memcg them, us;
	if (r->live_levels < 2 || memcg_find(pid, NULL, &them) != 0 ||
	    !them.version || !them.limit ||
	    memcg_find(getpid(), NULL, &us) != 0 || us.version != them.version)
		return 0;
	size_t n = strlen(them.path);
	bool inside = !strcmp(us.path, them.path) ||
	              (!strncmp(us.path, them.path, n) &&
	               (us.path[n] == '/' || them.path[n - 1] == '/'));
	struct memcg_stat st;
	if (!inside || memcg_read(&them, &st) != 0)
		return 0;
	*room = them.limit > st.usage ? them.limit - st.usage : 0;
	uint64_t budget = *room / 8;
	if (livetab_levels_bytes(r, 1) > budget)
		return -1;
	uint32_t j = 1;
	while (j < r->live_levels && livetab_levels_bytes(r, j + 1) <= budget)
		j++;
	if (j < r->live_levels)
		*levels = j;
	return 0;
}

int collector_answer(struct collector *c, int fd, const struct target_info *ti,
                     struct target **out)
{
	if (out)
		*out = NULL;
	struct target *t = new_target(c);
	if (!t) {
		collector_refuse(fd, HP_WELCOME_ERROR);
		return -ENOMEM;
	}
	/* The newest layout the client speaks, up to ours (the hello says
	 * the highest it speaks; 0 here is "ours"). */
	uint32_t version = ti->layout_version && ti->layout_version < 2
	                           ? HP_LAYOUT_V1
	                           : HP_LAYOUT_VERSION;
	uint64_t head;
	uint64_t rsize = target_region_size(c, ti->pid, &head);
	if (!rsize) {
		char b[HP_FMT_BYTES_MAX];
		hp_log("heapprof: collector: pid %d: its address-space limit "
		       "(ulimit -v) leaves it %s: a sixteenth of that is less "
		       "than the smallest region (1 MiB); it runs "
		       "unprofiled\n",
		       (int)ti->pid,
		       hp_fmt_bytes_short(b, sizeof(b),
		                          head > INT64_MAX ? INT64_MAX
		                                           : (int64_t)head));
		c->region_errors++;
		collector_refuse(fd, HP_WELCOME_ERROR);
		free(t);
		return -ENOMEM;
	}
	int region_fd = make_region(c, rsize, version, 0, &t->reg[0]);
	if (region_fd < 0) {
		char hint[160];
		hp_log("heapprof: collector: cannot create a %llu-byte region "
		       "for pid %d: %s%s; it runs unprofiled\n",
		       (unsigned long long)rsize, (int)ti->pid,
		       strerror(-region_fd),
		       fsize_hint(-region_fd, hint, sizeof(hint)));
		c->region_errors++;
		collector_refuse(fd, HP_WELCOME_ERROR);
		free(t);
		return region_fd;
	}
	uint32_t levels;
	uint64_t room;
	struct hp_region *r0 = &t->reg[0].region;
	int refused = shared_cgroup_levels(ti->pid, r0, &levels, &room);
	if (refused || levels) {
		char rb[HP_FMT_BYTES_MAX], lb[HP_FMT_BYTES_MAX];
		hp_log("heapprof: collector: pid %d shares heapprof's memory "
		       "cgroup, which has %s left: %s%s%s\n",
		       (int)ti->pid,
		       hp_fmt_bytes_short(rb, sizeof(rb), (int64_t)room),
		       refused ? "an eighth of that cannot hold the first "
		                 "level of its live table ("
		               : "its live table is held to ",
		       hp_fmt_bytes_short(lb, sizeof(lb),
		                          (int64_t)livetab_levels_bytes(
		                                  r0, refused ? 1 : levels)),
		       refused ? "); it runs unprofiled"
		               : " (an eighth of that); blocks past it are "
		                 "counted as live_table_full");
	}
	if (refused) {
		c->region_errors++;
		collector_refuse(fd, HP_WELCOME_ERROR);
		collector_region_drop(&t->reg[0]);
		close(region_fd);
		free(t);
		return -ENOMEM;
	}
	if (levels) {
		livetab_limit(r0, levels);
		region_count(r0, HP_CTR_LIVE_LIMIT,
		             livetab_levels_bytes(r0, levels));
	}
	target_cwd(t, ti->pid);
	/* Its name, command line and executable before the welcome: the
	 * process waits for it, so they are the image that said hello (a
	 * forked child may exec as soon as it has the answer, and would be
	 * named after its new image). */
	char comm[64];
	char *cmd = NULL;
	if (!ti->name)
		proc_comm(ti->pid, comm, sizeof(comm));
	if (!ti->cmdline)
		cmd = proc_cmdline(ti->pid);
	proc_exe(ti->pid, t->exe, sizeof(t->exe));
	proc_comm(ti->pid, t->comm, sizeof(t->comm));
	/* Read while the process waits for the welcome (a short one is
	 * gone right after); said once it is a target. */
	char note[PATH_MAX + 256], who[64] = "";
	const char *own_malloc = NULL;
	if (!ti->how || strcmp(ti->how, "fork") != 0)
		own_malloc = own_malloc_note(ti->pid, note, sizeof(note));
	if (own_malloc)
		proc_comm(ti->pid, who, sizeof(who));
	/* The process may allocate as soon as it has the welcome: its
	 * profiling starts now, not after our bookkeeping. */
	uint64_t start_ts = boottime_ns();
	int rc = send_welcome(fd, 0, HP_WELCOME_ACCEPT, version, t->reg[0].size,
	                      region_fd);
	close(region_fd);
	if (rc) {
		collector_region_drop(&t->reg[0]);
		close(fd);
		free(t);
		free(cmd);
		return rc;
	}
	t->nreg = 1;
	t->shmem_total = t->reg[0].size;
	t->layout_version = version;
	if (r0->trace_cap) {
		t->tr.mode = r0->trace_mode;
		t->tr.cap = r0->trace_cap;
		t->tr.bytes = r0->trace_cap * sizeof(struct hp_event_v2);
	} else if (c->opts.trace_mode) {
		hp_log("heapprof: collector: pid %d: its heapprof library is "
		       "older (layout v1): no event trace for it; its profile "
		       "is recorded\n",
		       (int)ti->pid);
	}
	t->pid = ti->pid;
	t->ppid = ti->ppid;
	t->fd = fd;
	t->start_ts = start_ts;
	t->from_startup = ti->from_startup;
	snprintf(t->how, sizeof(t->how), "%s", ti->how ? ti->how : "command");
	c->targets[c->ntargets++] = t;
	if (out)
		*out = t;

	struct prof_process info = {
	        .pid = ti->pid,
	        .name = ti->name ? ti->name : comm,
	        .cmdline = ti->cmdline ? ti->cmdline : (cmd ? cmd : ""),
	        .sampling_interval = c->opts.interval,
	        .unwind = c->opts.unwind_mode == HP_UNWIND_FP ? "fp" : "dwarf",
	        .max_frames = c->opts.max_frames,
	        .shmem_size = t->reg[0].size,
	        .from_startup = ti->from_startup,
	        .start_ts_ns = t->start_ts,
	        .how = t->how,
	        .ppid = ti->ppid > 0 ? ti->ppid : 0,
	        .session_id = c->opts.session_id,
	};
	/* A fork child runs its parent's image, said for the parent. */
	if (own_malloc) {
		info.note = own_malloc;
		hp_log("heapprof: collector: pid %d (%s): %s\n", (int)ti->pid,
		       who[0] ? who : "?", own_malloc);
	}
	rc = add_row(c, &info, NULL, &t->upid);
	free(cmd);
	return rc;
}

int collector_grow(struct collector *c, struct target *t)
{
	/* The tables double; the trace (region 0) is not in the budget. */
	uint64_t last =
	        t->reg[t->nreg - 1].size - t->reg[t->nreg - 1].trace_bytes;
	uint64_t size = last * 2;
	uint64_t budget = c->opts.shmem_size * TARGET_SHMEM_FACTOR;
	uint64_t used = t->shmem_total - t->reg[0].trace_bytes;
	uint32_t v = t->layout_version;
	if (t->retired || t->nreg >= TARGET_MAX_REGIONS ||
	    used + size > budget) {
		send_welcome(t->fd, HP_CMSG_GROW, HP_WELCOME_ERROR, v, 0, -1);
		return -ENOSPC;
	}
	struct target_region *tr = &t->reg[t->nreg];
	int region_fd = make_region(c, size, v, (uint32_t)t->nreg, tr);
	if (region_fd < 0) {
		send_welcome(t->fd, HP_CMSG_GROW, HP_WELCOME_ERROR, v, 0, -1);
		return region_fd;
	}
	int rc = send_welcome(t->fd, HP_CMSG_GROW, HP_WELCOME_ACCEPT, v, size,
	                      region_fd);
	close(region_fd);
	if (rc) {
		collector_region_drop(tr);
		return rc;
	}
	t->nreg++;
	t->shmem_total += size;
	t->grows++;
	return 0;
}

void collector_note_exec(const struct collector *c, struct target *t)
{
	if (c->opts.follow_exec || t->exec_followed ||
	    t->exec_not_followed[0] || (!t->exe[0] && !t->comm[0]))
		return;
	char exe[sizeof(t->exe)], comm[sizeof(t->comm)];
	proc_exe(t->pid, exe, sizeof(exe));
	if (exe[0] && t->exe[0] && strcmp(exe, t->exe) != 0) {
		snprintf(t->exec_not_followed, sizeof(t->exec_not_followed),
		         "%s", exe);
		return;
	}
	if (exe[0])
		return; /* the same image: it closed our descriptor */
	/* Gone or a zombie (the new image may have run and exited before
	 * we looked): only its name is left.  A new name is an exec only
	 * when it names a program in PATH (an exec names the process after
	 * the file it ran, 15 bytes at most; a process that renamed itself
	 * with prctl, then exited, did not exec). */
	proc_comm(t->pid, comm, sizeof(comm));
	size_t n = strlen(comm);
	if (!n || n >= 15 || !t->comm[0] || !strcmp(comm, t->comm) ||
	    strchr(comm, '/'))
		return;
	const char *path = getenv("PATH");
	while (path && *path) {
		size_t dl = strcspn(path, ":");
		char cand[sizeof(t->exec_not_followed)];
		int w = snprintf(cand, sizeof(cand), "%.*s/%s", (int)dl, path,
		                 comm);
		if (dl && w > 0 && (size_t)w < sizeof(cand) &&
		    access(cand, X_OK) == 0) {
			snprintf(t->exec_not_followed,
			         sizeof(t->exec_not_followed), "%s", cand);
			return;
		}
		path += dl + (path[dl] == ':');
	}
}

static void mark_disconnected(const struct collector *c, struct target *t)
{
	collector_note_exec(c, t);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	if (!t->disconnected) {
		t->disconnected = true;
		t->disconnect_ts = boottime_ns();
	}
}

static void protocol_error(struct target *t)
{
	hp_log("heapprof: collector: pid %d sent a malformed message; "
	       "ignoring what it sends from now on (its profile is kept)\n",
	       (int)t->pid);
	t->proto_error = true;
	t->snap_len = 0;
}

static void grow_request(struct collector *c, struct target *t)
{
	int rc = collector_grow(c, t);
	if (!rc || t->said_full)
		return;
	t->said_full = true;
	if (rc == -ENOSPC)
		hp_log("heapprof: collector: pid %d: tables full and no more "
		       "room (%d regions, %llu bytes); further samples are "
		       "counted as dropped\n",
		       (int)t->pid, t->nreg,
		       (unsigned long long)t->shmem_total);
	else {
		char hint[160];
		hp_log("heapprof: collector: pid %d: cannot grow its region: "
		       "%s%s\n",
		       (int)t->pid, strerror(-rc),
		       fsize_hint(-rc, hint, sizeof(hint)));
	}
}

static int dump_target(struct collector *c, struct target *t,
                       const char *reason, const char *name, uint64_t ts,
                       bool blocks, struct dump_group *g, bool answer);

/* A named snapshot the program asked for: the dump with every live
 * block, then the answer (without fd) that it is in the profile, once it
 * is written (snapshot_answer). */
static void snapshot_request(struct collector *c, struct target *t)
{
	t->snap_name[t->snap_len] = '\0';
	t->snap_len = t->snap_got = 0;
	dump_target(c, t, "snapshot", t->snap_name, 0, true, NULL, true);
}

/* What maps_inode looks for: the mapping that starts at base, or (with
 * want_ino) any mapping of that inode whose path names a heapprof
 * region. */
struct inode_find {
	const void *base;
	unsigned long want_ino;
	unsigned long found;
};

static int inode_found(void *ctx, const struct proc_map *m)
{
	struct inode_find *f = ctx;
	if (f->want_ino ? m->inode == f->want_ino && strstr(m->path, "heapprof")
	                : m->start == (uint64_t)(uintptr_t)f->base)
		f->found = m->inode;
	return f->found != 0;
}

/* The inode of the mapping that starts at base in pid's maps, or 0; with
 * want_ino, whether any mapping of that inode whose path names a
 * heapprof region is there. */
static unsigned long maps_inode(pid_t pid, const void *base,
                                unsigned long want_ino)
{
	struct inode_find f = {.base = base, .want_ino = want_ino};
	proc_maps(pid, inode_found, &f);
	return f.found;
}

bool collector_target_maps_region(const struct target *t)
{
	if (t->nreg < 1 || !t->reg[0].base)
		return false;
	unsigned long ino = maps_inode(getpid(), t->reg[0].base, 0);
	if (!ino)
		return false;
	return maps_inode(t->pid, NULL, ino) != 0;
}

void collector_poll_client(struct collector *c, struct target *t)
{
	/* A bounded amount per call: a client that floods us gets read in
	 * turns with everything else. */
	for (int round = 0; round < 16 && t->fd >= 0; round++) {
		uint8_t buf[256];
		uint8_t *dst;
		size_t want;
		if (t->proto_error) {
			dst = buf;
			want = sizeof(buf);
		} else if (t->snap_len) { /* the name after SNAPSHOT */
			dst = (uint8_t *)t->snap_name + t->snap_got;
			want = t->snap_len - t->snap_got;
		} else {
			dst = t->msg + t->msg_len;
			want = sizeof(t->msg) - t->msg_len;
		}
		ssize_t n = recv(t->fd, dst, want, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			/* Exit or exec closed the connection; the regions
			 * stay readable in our mappings. */
			mark_disconnected(c, t);
			return;
		}
		if (t->proto_error)
			continue; /* discarded */
		if (t->snap_len) {
			t->snap_got += (uint32_t)n;
			if (t->snap_got < t->snap_len)
				continue;
			if (memchr(t->snap_name, '\0', t->snap_len))
				protocol_error(t);
			else
				snapshot_request(c, t);
			continue;
		}
		t->msg_len += (size_t)n;
		if (t->msg_len < sizeof(t->msg))
			continue;
		struct hp_client_msg m;
		memcpy(&m, t->msg, sizeof(m));
		t->msg_len = 0;
		if (m.magic == HP_WIRE_MAGIC && m.type == HP_CMSG_GROW) {
			grow_request(c, t);
		} else if (m.magic == HP_WIRE_MAGIC &&
		           m.type == HP_CMSG_SNAPSHOT && m.arg >= 1 &&
		           m.arg < HP_SNAPSHOT_NAME_MAX) {
			t->snap_len = (uint32_t)m.arg;
			t->snap_got = 0;
		} else {
			protocol_error(t);
		}
	}
}

/* ---- the embedded socket ------------------------------------------- */

static void accept_pending(struct collector *c)
{
	for (;;) {
		int fd = accept4(c->listen_fd, NULL, NULL,
		                 SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return; /* EAGAIN, or a connection that went away */
		struct ucred cred;
		socklen_t len = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
		    cred.uid != getuid() ||
		    c->npending == COLLECTOR_MAX_PENDING) {
			close(fd);
			continue;
		}
		struct pending_conn *p = &c->pending[c->npending++];
		memset(p, 0, sizeof(*p));
		p->fd = fd;
		p->pid = cred.pid;
		p->deadline_ns =
		        boottime_ns() + COLLECTOR_HELLO_MS * 1000000ull;
	}
}

static void drop_pending(struct collector *c, size_t i, bool close_fd)
{
	if (close_fd)
		close(c->pending[i].fd);
	c->pending[i] = c->pending[--c->npending];
}

/*
 * A process the session wanted that hung up before its answer: listed
 * once per pid (a forked child that gives up says hello again from the
 * image it execs), for a row at the end.
 */
static void note_unprofiled(struct collector *c, const struct target_info *ti)
{
	for (size_t i = 0; i < c->nunprofiled; i++)
		if (c->unprofiled[i].pid == ti->pid)
			return;
	if (c->nunprofiled == COLLECTOR_MAX_UNPROFILED) {
		c->unprofiled_more++;
		return;
	}
	struct collector_unprofiled *u = &c->unprofiled[c->nunprofiled++];
	memset(u, 0, sizeof(*u));
	u->pid = ti->pid;
	u->ppid = ti->ppid;
	u->how = ti->how ? ti->how : "fork";
	u->ts = boottime_ns();
	proc_comm(ti->pid, u->comm, sizeof(u->comm));
}

/* The pid is profiled after all (an image it exec'd): no such row. */
static void forget_unprofiled(struct collector *c, pid_t pid)
{
	for (size_t i = 0; i < c->nunprofiled; i++)
		if (c->unprofiled[i].pid == pid) {
			c->unprofiled[i] = c->unprofiled[--c->nunprofiled];
			return;
		}
}

/* Reads what pending connection i sent; answers a complete hello. */
static void read_pending(struct collector *c, size_t i, collector_want_fn want,
                         void *ctx)
{
	struct pending_conn *p = &c->pending[i];
	ssize_t n = recv(p->fd, p->buf + p->got, sizeof(p->buf) - p->got,
	                 MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		drop_pending(c, i, true);
		return;
	}
	p->got += (size_t)n;
	if (p->got < sizeof(p->buf))
		return;
	struct hp_hello h;
	memcpy(&h, p->buf, sizeof(h));
	int fd = p->fd;
	pid_t pid = p->pid;
	drop_pending(c, i, false);
	if (h.magic != HP_WIRE_MAGIC || h.version != HP_WIRE_VERSION) {
		close(fd);
		return;
	}
	/* Hung up before its answer: a client sends nothing after its hello
	 * and waits for the answer, so it stopped waiting (100 ms unless
	 * record launched it) and runs unprofiled, or it died. */
	char peek;
	struct target_info ti = {
	        .pid = pid,
	        .gone = recv(fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 0};
	uint32_t st = HP_WELCOME_NOT_TARGET;
	if (h.layout_version >= HP_LAYOUT_MIN_VERSION &&
	    !(h.flags & HP_HELLO_BUSY))
		st = want(ctx, pid, &h, &ti);
	if (st != HP_WELCOME_ACCEPT) {
		collector_refuse(fd, st);
		return;
	}
	ti.pid = pid; /* SO_PEERCRED, whatever the callback wrote */
	ti.layout_version = h.layout_version;
	if (ti.gone) {
		close(fd);
		note_unprofiled(c, &ti);
		return;
	}
	struct target *t;
	if (collector_answer(c, fd, &ti, &t) == -EPIPE && !t)
		note_unprofiled(c, &ti); /* it hung up in between */
	else if (t)
		forget_unprofiled(c, pid);
}

int collector_timeout_ms(const struct collector *c)
{
	if (!c->npending)
		return -1;
	uint64_t now = boottime_ns(), first = UINT64_MAX;
	for (size_t i = 0; i < c->npending; i++)
		if (c->pending[i].deadline_ns < first)
			first = c->pending[i].deadline_ns;
	return first <= now ? 0 : (int)((first - now) / 1000000 + 1);
}

void collector_stop_listening(struct collector *c)
{
	for (size_t i = 0; i < c->npending; i++)
		close(c->pending[i].fd);
	c->npending = 0;
	if (c->listen_fd >= 0)
		close(c->listen_fd);
	c->listen_fd = -1;
	if (c->path[0])
		unlink(c->path);
	c->path[0] = '\0';
}

void collector_expire(struct collector *c)
{
	uint64_t now = boottime_ns();
	for (size_t i = 0; i < c->npending;) {
		if (c->pending[i].deadline_ns <= now)
			drop_pending(c, i, true);
		else
			i++;
	}
}

/*
 * Poll entries carry a tag in the order they were added, so handle() can
 * tell them apart: [socket][writer][pending...][targets...].  The pending and
 * target lists can change while handling, so each entry is matched by fd.
 */
size_t collector_pollfds(struct collector *c, struct pollfd *fds, size_t max)
{
	size_t n = 0;
	if (c->listen_fd >= 0 && n < max)
		fds[n++] =
		        (struct pollfd){.fd = c->listen_fd, .events = POLLIN};
	if (jobq_fd(&c->wq) >= 0 && n < max)
		fds[n++] = (struct pollfd){.fd = jobq_fd(&c->wq),
		                           .events = POLLIN};
	for (size_t i = 0; i < c->npending && n < max; i++)
		fds[n++] = (struct pollfd){.fd = c->pending[i].fd,
		                           .events = POLLIN};
	for (size_t i = 0; i < c->ntargets && n < max; i++) {
		struct target *t = c->targets[i];
		if (t->fd < 0)
			continue;
		/* After a protocol error only the hang-up matters. */
		fds[n++] = (struct pollfd){
		        .fd = t->fd,
		        .events = (short)(t->proto_error ? POLLRDHUP
		                                         : POLLIN | POLLRDHUP)};
	}
	return n;
}

void collector_handle(struct collector *c, const struct pollfd *fds, size_t n,
                      collector_want_fn want, void *ctx)
{
	for (size_t k = 0; k < n; k++) {
		if (!fds[k].revents)
			continue;
		int fd = fds[k].fd;
		if (fd == c->listen_fd) {
			accept_pending(c);
			continue;
		}
		if (fd == jobq_fd(&c->wq)) {
			jobq_poll(&c->wq);
			continue;
		}
		bool done = false;
		for (size_t i = 0; i < c->npending && !done; i++)
			if (c->pending[i].fd == fd) {
				read_pending(c, i, want, ctx);
				done = true;
			}
		for (size_t i = 0; i < c->ntargets && !done; i++) {
			struct target *t = c->targets[i];
			if (t->fd != fd)
				continue;
			done = true;
			if (t->proto_error)
				mark_disconnected(c, t);
			else
				collector_poll_client(c, t);
		}
	}
}

/* ---- targets ------------------------------------------------------- */

struct target *collector_find(struct collector *c, pid_t pid)
{
	for (size_t i = c->ntargets; i-- > 0;)
		if (c->targets[i]->pid == pid && !c->targets[i]->retired)
			return c->targets[i];
	return NULL;
}

bool collector_had_pid(const struct collector *c, pid_t pid)
{
	for (size_t i = 0; i < c->ntargets; i++)
		if (c->targets[i]->pid == pid)
			return true;
	return false;
}

/*
 * Heap selection is the session's promise: stacks of heaps it did not
 * select stay out of the profile whatever the client sampled (the client
 * applies the same selection, from the region).  A heap is known by the
 * name the client gave its id.  Blocks follow their stacks.
 */
static int select_heaps(const struct collector *c, struct snapshot *s)
{
	bool all = c->opts.config_flags & HP_CFG_ALL_HEAPS;
	uint32_t *remap = NULL;
	if (s->dump.nblocks) {
		remap = malloc(s->dump.nstacks * sizeof(*remap) + 1);
		if (!remap)
			return -ENOMEM;
	}
	size_t k = 0;
	for (size_t i = 0; i < s->dump.nstacks; i++) {
		uint32_t h = s->stacks[i].heap_id;
		const char *name =
		        h < s->dump.nheaps ? s->dump.heaps[h].name : NULL;
		bool keep = name && name[0] &&
		            hp_heap_select_interval(c->opts.heap_select,
		                                    c->opts.nheap_select, all,
		                                    c->opts.interval, name);
		if (remap)
			remap[i] = keep ? (uint32_t)k : UINT32_MAX;
		if (keep)
			s->stacks[k++] = s->stacks[i];
	}
	s->dump.nstacks = k;
	if (remap) {
		size_t nb = 0;
		for (size_t i = 0; i < s->dump.nblocks; i++) {
			uint32_t to = remap[s->blocks[i].stack];
			if (to == UINT32_MAX)
				continue;
			s->blocks[nb] = s->blocks[i];
			s->blocks[nb++].stack = to;
		}
		s->dump.nblocks = nb;
		free(remap);
	}
	return 0;
}

/*
 * Queues a dump of t (dump_job).  g: the dump counts in that group;
 * answer: a named snapshot, answered once written.  0, or the dump's
 * result when it is made inline (-ENOMEM: not queued, said).
 */
static int dump_target(struct collector *c, struct target *t,
                       const char *reason, const char *name, uint64_t ts,
                       bool blocks, struct dump_group *g, bool answer)
{
	if (t->retired || !t->nreg)
		return 0;
	int werr = 0;
	if (t->tr.mode) {
		/* The events up to now first: a dump of a traced process
		 * is a point in its trace too. */
		int rc = collector_trace_poll(c, t);
		if (rc < 0)
			werr = rc;
	}
	struct dump_job *j = calloc(1, sizeof(*j));
	if (!j) {
		hp_log("heapprof: collector: out of memory\n");
		if (g)
			g->errors++;
		if (answer)
			snapshot_answer(t, name, -ENOMEM);
		return -ENOMEM;
	}
	j->p = c->profile;
	j->c = c;
	j->upid = t->upid;
	j->pid = t->pid;
	j->alive = !t->disconnected;
	memcpy(j->cwd, t->cwd, sizeof(j->cwd));
	for (int i = 0; i < t->nreg; i++) {
		j->regs[i] = t->reg[i].region;
		j->fds[i] = t->reg[i].fd;
	}
	j->nreg = t->nreg;
	j->blocks = blocks;
	if (c->opts.peak_dumps)
		j->peak_of = t;
	/* Stamped when asked for: a process's dumps are in the order of
	 * their times, before its row's end, and periodic ones on their
	 * ticks; what they hold is read when the writer gets to them. */
	j->ts = ts ? ts : boottime_ns();
	j->reason = reason; /* a literal */
	j->tables_ours = collector_prepared_bytes(t);
	if (t->mw.checked && t->mw.cg.version) {
		j->cg_version = t->mw.cg.version;
		j->cg_limit = t->mw.cg.limit;
		j->cg_usage = t->mw.last.usage;
		j->cg_peak = t->mw.last.peak;
	}
	if (name) {
		snprintf(j->name, sizeof(j->name), "%s", name);
		j->named = true;
	}
	if (t->tr.mode && t->tr.mode != HP_TRACE_LOG) {
		j->traced = true;
		collector_trace_stats(t, &j->pt);
		j->pt.events = t->tr.events; /* handed over; see dump_run */
		j->tr = &t->tr;
	}
	j->group = g;
	j->answer = answer ? t : NULL;
	bool periodic = !strcmp(reason, "periodic");
	int rc = jobq_submit(&c->wq, dump_run, dump_fin, NULL, j, 0,
	                     periodic ? JOBQ_MARK : 0);
	return rc ? rc : werr;
}

int collector_dump(struct collector *c, struct target *t, const char *reason,
                   uint64_t ts)
{
	return dump_target(c, t, reason, NULL, ts, false, NULL, false);
}

int collector_dump_blocks(struct collector *c, struct target *t,
                          const char *reason, const char *name, uint64_t ts)
{
	return dump_target(c, t, reason, name, ts, true, NULL, false);
}

int collector_dump_final(struct collector *c, struct target *t,
                         const char *reason, uint64_t ts)
{
	if (t->retired || !t->nreg)
		return 0;
	int terr = t->tr.mode ? collector_trace_final(c, t) : 0;
	/* The curve's last point: the heap as the final dump finds it
	 * (its RSS is gone with it, or said by that dump). */
	collector_curve(c, t, ts ? ts : boottime_ns(), 0, false);
	bool traced = t->tr.mode && t->tr.mode != HP_TRACE_LOG;
	int rc = dump_target(c, t, reason, NULL, ts, traced, NULL, false);
	return rc ? rc : terr;
}

static int dump_pid(struct collector *c, pid_t pid, const char *reason,
                    int *errors, struct dump_group *g)
{
	int dumped = 0;
	uint64_t ts = boottime_ns();
	for (size_t i = 0; i < c->ntargets; i++) {
		struct target *t = c->targets[i];
		if (t->retired || (pid && t->pid != pid))
			continue;
		if (dump_target(c, t, reason, NULL, ts, false, g, false) != 0) {
			if (errors)
				(*errors)++;
		} else {
			dumped++;
		}
	}
	return dumped;
}

int collector_dump_pid(struct collector *c, pid_t pid, const char *reason,
                       int *errors)
{
	return dump_pid(c, pid, reason, errors, NULL);
}

void collector_dump_group(struct collector *c, pid_t pid, const char *reason,
                          struct dump_group *g)
{
	g->dumps = g->errors = 0;
	dump_pid(c, pid, reason, NULL, g);
	/* Its fin runs after every fin of the dumps before it. */
	jobq_submit(&c->wq, group_run, group_fin, NULL, g, 0, 0);
}

int collector_dump_all(struct collector *c, const char *reason)
{
	int errors = 0;
	collector_dump_pid(c, 0, reason, &errors);
	return errors ? -EIO : 0;
}

void collector_stop(struct target *t)
{
	for (int i = 0; i < t->nreg; i++)
		if (t->reg[i].region.hdr)
			atomic_store_explicit(&t->reg[i].region.hdr->control,
			                      HP_CONTROL_STOP,
			                      memory_order_release);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

struct unmap_job {
	int n;
	void *base[TARGET_MAX_REGIONS];
	uint64_t size[TARGET_MAX_REGIONS];
	int fd[TARGET_MAX_REGIONS];
};

void collector_region_drop(struct target_region *tr)
{
	if (tr->base)
		munmap(tr->base, tr->size);
	if (tr->fd >= 0)
		close(tr->fd);
	memset(tr, 0, sizeof(*tr));
	tr->fd = -1;
}

/*
 * The session is over for the target: its tables' pages are freed (a
 * hole punched in the memfd: the pages leave the program's page tables
 * too), so a program that runs on gets its memory back at once, whatever
 * it does with its mapping and descriptor.  The header's first page
 * stays: the client reads `control` (STOP) and writes its state there.  A
 * hook that still touches a table (it had not yet seen STOP) faults in a
 * page of zeros, no more.
 */
static int unmap_run(void *arg)
{
	struct unmap_job *j = arg;
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t page = ps > 0 ? (uint64_t)ps : 4096;
	for (int i = 0; i < j->n; i++) {
		if (j->size[i] > page)
			(void)madvise((uint8_t *)j->base[i] + page,
			              j->size[i] - page, MADV_REMOVE);
		munmap(j->base[i], j->size[i]);
		if (j->fd[i] >= 0)
			close(j->fd[i]);
	}
	return 0;
}

/* ---- interning ahead (collector_intern_ahead) ---------------------- */

/*
 * The first a moment after the writer starts (a program's libraries are
 * named while it runs, however short), then every INTERN_EVERY_MS or ten
 * times as long as the last one took, whichever is longer: reading the
 * regions and interning costs the writer at most a tenth of a core.  One
 * job at a time; a target only when its stack table grew.
 */
#define INTERN_FIRST_MS 30
#define INTERN_EVERY_MS 250

struct intern_job {
	struct profile *p;
	const struct collector *c; /* opts: read only while the loop runs */
	struct collector *owner;   /* its counters, on the loop's thread */
	int64_t upid;
	pid_t pid;
	bool alive;
	char cwd[PATH_MAX]; /* the target's (struct target) */
	struct hp_region regs[TARGET_MAX_REGIONS];
	int nreg;
	uint64_t took_ns;
};

static int intern_run(void *arg)
{
	struct intern_job *j = arg;
	uint64_t t0 = hp_clock_ns(CLOCK_MONOTONIC);
	struct snapshot s;
	int rc = read_regions(j->c, j->regs, j->nreg, false, false, j->pid,
	                      j->alive, j->cwd, &s);
	if (rc)
		return rc;
	rc = profile_intern_stacks(j->p, j->upid, &s.dump);
	snapshot_free(&s);
	j->took_ns = hp_clock_ns(CLOCK_MONOTONIC) - t0;
	return rc;
}

/* A failed interning is no failure of the session: the dump that needs
 * those stacks interns them itself (and says so if it fails too). */
static void intern_fin(void *arg, int rc)
{
	(void)rc;
	struct intern_job *j = arg;
	j->owner->interns_queued--;
	j->owner->intern_took_ns = j->took_ns;
	free(j);
}

static uint64_t target_stacks(const struct target *t)
{
	uint64_t n = 0;
	for (int i = 0; i < t->nreg; i++)
		if (t->reg[i].region.hdr)
			n += atomic_load_explicit(
			        &t->reg[i].region.hdr->stacks_used,
			        memory_order_relaxed);
	return n;
}

int collector_intern_ahead(struct collector *c)
{
	if (!c->wq.threaded || !c->profile)
		return -1;
	uint64_t now = hp_clock_ns(CLOCK_MONOTONIC);
	if (!c->intern_at_ns)
		c->intern_at_ns = now + INTERN_FIRST_MS * 1000000ull;
	if (now < c->intern_at_ns)
		return (int)((c->intern_at_ns - now + 999999) / 1000000);
	uint64_t every = INTERN_EVERY_MS * 1000000ull;
	if (c->intern_took_ns * 10 > every)
		every = c->intern_took_ns * 10;
	c->intern_at_ns = now + every;
	for (size_t i = 0; i < c->ntargets && !c->interns_queued; i++) {
		struct target *t = c->targets[i];
		uint64_t n = t->retired || !t->nreg ? 0 : target_stacks(t);
		if (n <= t->interned)
			continue;
		struct intern_job *j = calloc(1, sizeof(*j));
		if (!j)
			break; /* the dumps intern them */
		j->p = c->profile;
		j->c = c;
		j->owner = c;
		j->upid = t->upid;
		j->pid = t->pid;
		j->alive = !t->disconnected;
		memcpy(j->cwd, t->cwd, sizeof(j->cwd));
		for (int r = 0; r < t->nreg; r++)
			j->regs[r] = t->reg[r].region;
		j->nreg = t->nreg;
		t->interned = n;
		c->interns_queued++;
		jobq_submit(&c->wq, intern_run, intern_fin, NULL, j, 0, 0);
	}
	return (int)((every + 999999) / 1000000);
}

void collector_retire(struct collector *c, struct target *t)
{
	/* Unmapped after the dumps queued before, which read them (out of
	 * memory for the job: left mapped, never unmapped under them). */
	struct unmap_job *j = calloc(1, sizeof(*j));
	for (int i = 0; i < t->nreg; i++) {
		if (t->reg[i].base && j) {
			j->base[j->n] = t->reg[i].base;
			j->size[j->n] = t->reg[i].size;
			j->fd[j->n++] = t->reg[i].fd;
		} else if (t->reg[i].fd >= 0) {
			close(t->reg[i].fd);
		}
		memset(&t->reg[i], 0, sizeof(t->reg[i]));
		t->reg[i].fd = -1;
	}
	if (j)
		jobq_submit(&c->wq, unmap_run, free_job, NULL, j, 0, 0);
	t->nreg = 0;
	t->retired = true;
	free(t->tr.acc.d);
	free(t->tr.acc.touched);
	memset(&t->tr.acc, 0, sizeof(t->tr.acc));
	free(t->tr.peak_sh);
	t->tr.peak_sh = NULL;
	t->tr.peak_cap = 0;
}

int collector_end_row(struct collector *c, struct target *t, uint64_t end_ts,
                      int exit_status, bool disconnected)
{
	if (t->row_ended)
		return 0;
	t->row_ended = true;
	struct end_job *j = malloc(sizeof(*j));
	if (!j) {
		hp_log("heapprof: collector: out of memory\n");
		return -ENOMEM;
	}
	*j = (struct end_job){
	        .p = c->profile,
	        .upid = t->upid,
	        .e = {.end_ts_ns = end_ts,
	              .exit_status = exit_status,
	              .disconnected = disconnected,
	              .children_not_followed = t->children_not_followed}};
	/* The job outlives nothing it points to: its own copy. */
	snprintf(j->exec_not_followed, sizeof(j->exec_not_followed), "%s",
	         t->exec_not_followed);
	if (j->exec_not_followed[0])
		j->e.exec_not_followed = j->exec_not_followed;
	return jobq_submit(&c->wq, end_run, free_job, NULL, j, 0, 0);
}

/* A row for a process with nothing recorded (no dumps), started and
 * ended at ts: why is enum prof_not_profiled. */
static int add_unrecorded_row(struct collector *c, pid_t pid, pid_t ppid,
                              const char *how, const char *name,
                              const char *cmdline, const char *note, int why,
                              uint64_t ts)
{
	struct prof_process info = {
	        .pid = pid,
	        .name = name ? name : "",
	        .cmdline = cmdline ? cmdline : "",
	        .sampling_interval = c->opts.interval,
	        .unwind = c->opts.unwind_mode == HP_UNWIND_FP ? "fp" : "dwarf",
	        .max_frames = c->opts.max_frames,
	        .start_ts_ns = ts,
	        .how = how,
	        .ppid = ppid > 0 ? ppid : 0,
	        .session_id = c->opts.session_id,
	        .rejected_concurrent = why,
	        .note = note,
	};
	struct prof_process_end e = {
	        .end_ts_ns = ts, .exit_status = -1, .rejected_concurrent = why};
	int64_t upid;
	return add_row(c, &info, &e, &upid);
}

int collector_add_rejected(struct collector *c, pid_t pid, const char *how,
                           const char *name, const char *note)
{
	char *cmd = proc_cmdline(pid);
	int rc =
	        add_unrecorded_row(c, pid, 0, how, name, cmd, note,
	                           PROF_NOT_PROFILED_CONCURRENT, boottime_ns());
	free(cmd);
	return rc;
}

unsigned collector_add_unprofiled(struct collector *c, pid_t *pids, size_t max)
{
	for (size_t i = 0; i < c->nunprofiled; i++) {
		const struct collector_unprofiled *u = &c->unprofiled[i];
		add_unrecorded_row(c, u->pid, u->ppid, u->how, u->comm, NULL,
		                   NULL, PROF_NOT_PROFILED_GAVE_UP, u->ts);
		if (i < max)
			pids[i] = u->pid;
	}
	unsigned n = (unsigned)c->nunprofiled + c->unprofiled_more;
	c->nunprofiled = 0;
	c->unprofiled_more = 0;
	return n;
}

void collector_close(struct collector *c)
{
	/* Queued writes may name targets (snapshot answers, trace counts). */
	jobq_stop(&c->wq, NULL);
	for (size_t i = 0; i < c->ntargets; i++) {
		struct target *t = c->targets[i];
		if (t->fd >= 0)
			close(t->fd);
		collector_retire(c, t);
		free(t);
	}
	free(c->targets);
	c->targets = NULL;
	collector_trace_free(c);
	c->ntargets = c->cap = 0;
	for (size_t i = 0; i < c->npending; i++)
		close(c->pending[i].fd);
	c->npending = 0;
	if (c->listen_fd >= 0)
		close(c->listen_fd);
	c->listen_fd = -1;
	if (c->path[0])
		unlink(c->path);
	if (c->dir[0])
		rmdir(c->dir);
	c->path[0] = c->dir[0] = '\0';
}
