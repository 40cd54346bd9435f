/*
 * `heapprof snapshot`: every live block of a running process, read from the
 * outside, and the named snapshots stored in a profile (docs/SNAPSHOT.md).
 *
 *   snapshot -p PID | -n NAME   reads the process's region directly: the
 *                               client keeps its memfd open (at fd >= 512),
 *                               so /proc/PID/fd leads to it; we map it
 *                               read-only and copy it with
 *                               snapshot_take_live.  Neither the process
 *                               (it may be stopped) nor its collector does
 *                               anything.  Writes a profile database and a
 *                               gzipped pprof; --contents-dir also copies
 *                               each block's bytes (process_vm_readv).
 *   snapshot --list FILE        the named snapshots of a profile
 *   snapshot --name NAME FILE   one of them as pprof
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "collector/collector.h"
#include "collector/contents.h"
#include "export/pprof.h"
#include "profile/blocks.h"
#include "profile/profile.h"
#include "profile/reader.h"
#include "util/err.h"
#include "util/human.h"

#define SUBSYS "snapshot"

/* What the client names its region's memfd (collector.c), as
 * /proc/PID/fd shows it. */
#define REGION_LINK "/memfd:heapprof-region (deleted)"
/* The most heapprof regions of one process we look at (several attaches,
 * GROW regions). */
#define MAX_CANDIDATES 32
/* heapprof_meta key: CLOCK_REALTIME - CLOCK_BOOTTIME (ns) when the
 * snapshot was taken, so --name gives the pprof its exact wall time. */
#define META_CLOCK_OFFSET "realtime_minus_boottime_ns"

struct snap_opts {
	long pid;              /* -p */
	const char *proc_name; /* -n */
	const char *out;       /* -o */
	const char *db;        /* --db */
	const char *contents;  /* --contents-dir */
	const char *heap;      /* --heap; NULL: libc.malloc */
	int with_tags;
	int list;              /* --list */
	const char *snap_name; /* --name */
	int have_pid_filter;   /* --pid (with --list, --name) */
	long pid_filter;
	const char *file; /* PROFILE */
	int argc;         /* for the profile's record_cmdline */
	char **argv;
};

static void usage(FILE *f)
{
	fputs("usage: heapprof snapshot -p PID | -n NAME [-o FILE] [--db FILE]"
	      "\n"
	      "                        [--contents-dir DIR] [--with-tags]"
	      " [--heap H]\n"
	      "       heapprof snapshot --list FILE [--pid P]\n"
	      "       heapprof snapshot --name NAME FILE [-o FILE]"
	      " [--with-tags] [--pid P]\n"
	      "                        [--heap H]\n"
	      "\n"
	      "Every live block of a process that heapprof profiles (under"
	      " 'heapprof record',\n"
	      "exact with -i 1), read from the outside: the process may even"
	      " be stopped.\n"
	      "\n"
	      "  -p PID             the process\n"
	      "  -n NAME            your process whose command name is NAME\n"
	      "  -o, --output FILE  the gzipped pprof (default:"
	      " heapprof.snapshot.PID.pb.gz;\n"
	      "                     with --name: FILE without .db, then"
	      " .NAME.pb.gz)\n"
	      "  --db FILE          the profile database (default:"
	      " heapprof.snapshot.PID.db)\n"
	      "  --contents-dir DIR write each block's bytes to DIR/0xADDRESS"
	      " (needs ptrace\n"
	      "                     rights over the process)\n"
	      "  --with-tags        one pprof sample per block, labelled with"
	      " its address,\n"
	      "                     timestamp and thread\n"
	      "  --heap H           the heap in the pprof (default"
	      " libc.malloc)\n"
	      "  --list FILE        the named snapshots of profile FILE\n"
	      "  --name NAME FILE   write snapshot NAME of profile FILE as"
	      " pprof\n"
	      "  --pid P            with --list or --name: only process P\n",
	      f);
}

/* One option at argv[*i]: 0 handled, 1 not an option, -1 error. */
static int parse_opt(int argc, char **argv, int *i, void *ctx)
{
	struct snap_opts *o = ctx;
	int missing = 0;
	const char *v;

	if ((v = opt_value(argc, argv, i, "-p", &missing))) {
		if (opt_parse_long(v, &o->pid) < 0 || o->pid <= 0 ||
		    o->pid > INT_MAX) {
			hp_err(SUBSYS, "invalid pid '%s'", v);
			return -1;
		}
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "-n", &missing))) {
		if (!v[0]) {
			hp_err(SUBSYS, "empty process name");
			return -1;
		}
		o->proc_name = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "-o", &missing)) ||
	    (v = opt_value(argc, argv, i, "--output", &missing))) {
		if (!v[0]) {
			hp_err(SUBSYS, "empty output path");
			return -1;
		}
		o->out = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "--db", &missing))) {
		if (!v[0]) {
			hp_err(SUBSYS, "empty --db path");
			return -1;
		}
		o->db = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "--contents-dir", &missing))) {
		if (!v[0]) {
			hp_err(SUBSYS, "empty --contents-dir");
			return -1;
		}
		o->contents = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "--heap", &missing))) {
		if (!v[0]) {
			hp_err(SUBSYS, "empty --heap");
			return -1;
		}
		o->heap = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "--name", &missing))) {
		if (!v[0] || strlen(v) >= HP_SNAPSHOT_NAME_MAX) {
			hp_err(SUBSYS, "invalid --name '%s' (1 to %d bytes)", v,
			       HP_SNAPSHOT_NAME_MAX - 1);
			return -1;
		}
		o->snap_name = v;
		return 0;
	}
	if ((v = opt_value(argc, argv, i, "--pid", &missing))) {
		o->have_pid_filter = 1;
		return opt_parse_pid(SUBSYS, v, &o->pid_filter);
	}
	if (missing) {
		hp_err(SUBSYS, "option '%s' needs a value", argv[*i]);
		return -1;
	}
	if (!strcmp(argv[*i], "--with-tags")) {
		o->with_tags = 1;
		return 0;
	}
	if (!strcmp(argv[*i], "--list")) {
		o->list = 1;
		return 0;
	}
	return 1;
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, struct snap_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->argc = argc;
	o->argv = argv;
	size_t n;
	int rc = opt_walk(SUBSYS, argc, argv, parse_opt, o, usage, &o->file, 1,
	                  &n);
	if (rc)
		return rc;
	int live = o->pid || o->proc_name;
	int stored = o->list || o->snap_name;
	const char *bad = NULL;
	if (o->pid && o->proc_name)
		bad = "-p and -n exclude each other";
	else if (o->list && o->snap_name)
		bad = "--list and --name exclude each other";
	else if (live && stored)
		bad = "-p/-n take a snapshot now; --list and --name read a "
		      "profile: not both";
	else if (!live && !stored)
		bad = "need -p PID, -n NAME, --list FILE or --name NAME FILE "
		      "(see heapprof snapshot --help)";
	else if (live && o->file)
		bad = "-p/-n take no FILE (--db names the profile written)";
	else if (live && o->have_pid_filter)
		bad = "--pid goes with --list and --name (-p names the "
		      "process)";
	else if (stored && !o->file)
		bad = "missing FILE (the profile to read)";
	else if (stored && (o->db || o->contents))
		bad = "--db and --contents-dir go with -p/-n";
	else if (o->list && (o->out || o->with_tags || o->heap))
		bad = "--list takes no -o, --with-tags or --heap";
	if (bad) {
		hp_err(SUBSYS, "%s", bad);
		return 2;
	}
	return 0;
}

/* ---- the process's regions ---------------------------------------------- */

struct candidate {
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

struct scan {
	struct candidate c[MAX_CANDIDATES];
	int n;
	int links;   /* fds naming a heapprof region */
	int corrupt; /* of them, failing region_bind */
	int bind_err;
	int denied;  /* errno of a refused open, 0 if none */
	int map_err; /* errno of a failed mmap, 0 if none */
};

static void scan_free(struct scan *s)
{
	for (int i = 0; i < s->n; i++)
		munmap(s->c[i].base, s->c[i].size);
	s->n = 0;
}

static bool seen(const struct scan *s, dev_t dev, ino_t ino)
{
	for (int i = 0; i < s->n; i++)
		if (s->c[i].dev == dev && s->c[i].ino == ino)
			return true;
	return false;
}

/* Maps and binds the region behind /proc/PID/fd/NAME (dfd: that
 * directory). */
static void take_fd(struct scan *s, int dfd, const char *name)
{
	struct stat sb;
	/* Through /proc: a new open file of the same memfd, read-only. */
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EACCES || errno == EPERM)
			s->denied = errno;
		return; /* closed meanwhile: not ours to count */
	}
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
	struct candidate *c = &s->c[s->n];
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
static int scan_fds(pid_t pid, struct scan *s)
{
	char path[64], link[128];

	memset(s, 0, sizeof(*s));
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d) {
		if (errno == ENOENT)
			return -ESRCH;
		return errno == EACCES || errno == EPERM ? -EACCES : -errno;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		ssize_t n =
		        readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
		if (n < 0) {
			if (errno == EACCES || errno == EPERM)
				s->denied = errno;
			continue;
		}
		link[n] = '\0';
		if (!strcmp(link, REGION_LINK))
			take_fd(s, dirfd(d), e->d_name);
	}
	closedir(d);
	return 0;
}

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

/*
 * Recording now: the client says so, and its session has not asked it to
 * stop (a client notices that at its next allocation, so an idle program
 * still says active; its table is no longer kept up to date).
 */
static bool active(const struct candidate *c, pid_t pid)
{
	return c->pid == pid && c->state == HP_STATE_ACTIVE && !c->stop_asked;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct candidate *x = *(const struct candidate *const *)a;
	const struct candidate *y = *(const struct candidate *const *)b;
	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	/* The same index twice: the newer attach first. */
	if (x->attach_ts != y->attach_ts)
		return x->attach_ts > y->attach_ts ? -1 : 1;
	return 0;
}

#define HINT "run it under 'heapprof record -i 1 -- CMD'"

/*
 * Whether pid has libheapprof mapped: then `record -p` can profile it
 * as it runs (through heapprofd), and a hint to restart it under
 * `record -- CMD` would send the user the long way round.
 */
static bool has_lib(pid_t pid)
{
	char path[64], line[512];
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		const char *slash = strrchr(line, '/');
		found = slash && !strncmp(slash + 1, "libheapprof.so", 14);
	}
	fclose(f);
	return found;
}

/* The hint for a running process that no session profiles now. */
static const char *attach_hint(pid_t pid, const char *comm, char *buf,
                               size_t len)
{
	if (!has_lib(pid))
		return HINT;
	snprintf(buf, len,
	         "it has libheapprof loaded: profile it with 'heapprof "
	         "record -i 1 -p %d' (or -n %s) and take the snapshot while "
	         "that session runs",
	         (int)pid, comm);
	return buf;
}

/*
 * The regions of pid's active attach, in region_index order, into rs[]
 * (at most TARGET_MAX_REGIONS); *first is the candidate of index 0 (or
 * the lowest).  0 or -1 with the message printed.
 */
static int pick_regions(pid_t pid, struct scan *s, const struct hp_region **rs,
                        int *nr, const struct candidate **first)
{
	char comm[64], hint[256];
	int rc = scan_fds(pid, s);

	if (rc == -ESRCH) {
		hp_err(SUBSYS, "no process with pid %d", (int)pid);
		return -1;
	}
	proc_comm(pid, comm, sizeof(comm));
	if (rc == -EACCES || (s->links == 0 && s->denied)) {
		hp_err(SUBSYS,
		       "cannot read the descriptors of pid %d (%s): permission "
		       "denied (run as the same user as the process, or with "
		       "ptrace rights over it: CAP_SYS_PTRACE)",
		       (int)pid, comm);
		return -1;
	}
	if (rc < 0) {
		hp_err(SUBSYS, "pid %d: reading /proc/%d/fd: %s", (int)pid,
		       (int)pid, strerror(-rc));
		return -1;
	}
	if (s->links == 0) {
		hp_err(SUBSYS,
		       "pid %d (%s) is not profiled by heapprof: it has no "
		       "heapprof region (%s)",
		       (int)pid, comm,
		       attach_hint(pid, comm, hint, sizeof(hint)));
		return -1;
	}
	if (s->n == 0 && s->map_err) {
		hp_err(SUBSYS,
		       "pid %d (%s): cannot map its heapprof region: %s",
		       (int)pid, comm, strerror(s->map_err));
		return -1;
	}
	if (s->n == 0) {
		hp_err(SUBSYS,
		       "pid %d (%s): its heapprof region is corrupt (%s); "
		       "cannot read it",
		       (int)pid, comm,
		       s->bind_err == -EPROTO ? "bad magic or layout version"
		       : s->bind_err == -EINVAL
		               ? "bad table geometry"
		               : "not sealed against shrinking");
		return -1;
	}
	/* The active attach: the newest active region's session. */
	const struct candidate *newest = NULL;
	const struct candidate *last = &s->c[0];
	for (int i = 0; i < s->n; i++) {
		const struct candidate *c = &s->c[i];
		if (c->attach_ts >= last->attach_ts)
			last = c;
		if (!active(c, pid))
			continue;
		if (!newest || c->attach_ts > newest->attach_ts)
			newest = c;
	}
	if (!newest) {
		if (last->state == HP_STATE_ACTIVE)
			hp_err(SUBSYS,
			       "pid %d (%s) is not profiled any more: its "
			       "heapprof session ended; %s",
			       (int)pid, comm,
			       attach_hint(pid, comm, hint, sizeof(hint)));
		else
			hp_err(SUBSYS,
			       "pid %d (%s) is not profiled any more: its "
			       "heapprof session ended (client %s: %s); %s",
			       (int)pid, comm, state_str(last->state),
			       stop_str(last->stop_reason),
			       attach_hint(pid, comm, hint, sizeof(hint)));
		return -1;
	}
	const struct candidate *pick[MAX_CANDIDATES] = {NULL};
	int np = 0;
	for (int i = 0; i < s->n; i++) {
		const struct candidate *c = &s->c[i];
		if (active(c, pid) && c->session == newest->session)
			pick[np++] = c;
	}
	qsort(pick, (size_t)np, sizeof(pick[0]), cand_cmp);
	*nr = 0;
	for (int i = 0; i < np && *nr < TARGET_MAX_REGIONS; i++) {
		if (i > 0 && pick[i]->index == pick[i - 1]->index)
			continue;
		rs[(*nr)++] = &pick[i]->r;
	}
	*first = pick[0];
	return 0;
}

/* ---- -n NAME ------------------------------------------------------------- */

/* Whether pid has a descriptor naming a heapprof region. */
static bool has_region(pid_t pid)
{
	char path[64], link[128];
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return false;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		ssize_t n =
		        readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			found = !strcmp(link, REGION_LINK);
		}
	}
	closedir(d);
	return found;
}

/* The one process of ours named name with a heapprof region.  0 or -1
 * (message printed). */
static int find_by_name(const char *name, pid_t *out)
{
	DIR *d = opendir("/proc");
	pid_t found[16];
	int n = 0;
	bool lib = false; /* one of that name has libheapprof loaded */
	uid_t me = getuid();
	/* /proc/PID/comm keeps 15 bytes of the name. */
	char want[16];

	if (!d) {
		hp_err(SUBSYS, "/proc: %s", strerror(errno));
		return -1;
	}
	snprintf(want, sizeof(want), "%s", name);
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid == getpid())
			continue;
		char path[64], comm[64];
		struct stat sb;
		snprintf(path, sizeof(path), "/proc/%ld", pid);
		if (stat(path, &sb) < 0 || (me != 0 && sb.st_uid != me))
			continue;
		proc_comm((pid_t)pid, comm, sizeof(comm));
		if (strcmp(comm, want) != 0)
			continue;
		if (!has_region((pid_t)pid)) {
			lib = lib || has_lib((pid_t)pid);
			continue;
		}
		if (n < (int)(sizeof(found) / sizeof(found[0])))
			found[n] = (pid_t)pid;
		n++;
	}
	closedir(d);
	if (n == 0 && lib)
		hp_err(SUBSYS,
		       "no process of yours named '%s' is profiled by heapprof "
		       "(it has libheapprof loaded: profile it with 'heapprof "
		       "record -i 1 -n %s' and take the snapshot while that "
		       "session runs)",
		       name, name);
	else if (n == 0)
		hp_err(SUBSYS,
		       "no process of yours named '%s' is profiled by heapprof "
		       "(%s)",
		       name, HINT);
	if (n == 0)
		return -1;
	if (n > 1) {
		char list[256] = "";
		size_t len = 0;
		int shown = n < 16 ? n : 16;
		for (int i = 0; i < shown && len < sizeof(list); i++)
			len += (size_t)snprintf(list + len, sizeof(list) - len,
			                        "%s%d", i ? ", " : "",
			                        (int)found[i]);
		hp_err(SUBSYS,
		       "%d processes named '%s' are profiled (pids %s%s): "
		       "choose one with -p",
		       n, name, list, n > shown ? ", ..." : "");
		return -1;
	}
	*out = found[0];
	return 0;
}

/* ---- the pprof of a dump ------------------------------------------------- */

static void block_name(char *buf, size_t len, uint64_t addr)
{
	snprintf(buf, len, "0x%" PRIx64, addr);
}

struct pprof_job {
	sqlite3 *db;
	const struct rd_stacks *s;
	const struct rd_process *p;
	const struct rd_dump *d;
	size_t dump_index, ndumps; /* 1-based, for the comment */
	const char *file;          /* the profile, for the comment */
	const char *heap;
	int with_tags;
	int64_t wall_ns; /* 0: from the file */
	const char *path;
	/* results */
	size_t nsamples;
	int from_blocks;
	struct rd_block_summary sum;
};

/* One sample per leaf callsite: the blocks summed. */
static int add_aggregated(struct pp_profile *pp, const struct pprof_job *j,
                          const struct rd_block *b, size_t n)
{
	int err = 0;

	for (size_t i = 0; !err && i < n;) {
		int64_t bytes = 0, objs_fp = 0;
		size_t k = i;
		for (; k < n && b[k].callsite == b[i].callsite; k++) {
			bytes += b[k].charged;
			objs_fp += b[k].objects_fp;
		}
		int64_t objs = blocks_objects(objs_fp);
		int64_t v[RD_NVIEWS] = {[RD_SPACE] = bytes,
		                        [RD_ALLOC_SPACE] = bytes,
		                        [RD_OBJECTS] = objs,
		                        [RD_ALLOC_OBJECTS] = objs};
		err = pp_add_sample(pp, j->s, b[i].callsite, v, NULL, NULL);
		i = k;
	}
	return err;
}

/* One sample per block, labelled address, timestamp and thread. */
static int add_tagged(struct pp_profile *pp, const struct pprof_job *j,
                      const struct rd_block *b, size_t n)
{
	int err = 0;

	for (size_t i = 0; !err && i < n; i++) {
		char addr[32];
		struct pp_label l[3];
		size_t nl = 0;
		block_name(addr, sizeof(addr), b[i].address);
		l[nl++] = (struct pp_label){.key = "address", .str = addr};
		/* 0: unknown (a v1 region): no label rather than a wrong
		 * one. */
		if (b[i].ts)
			l[nl++] = (struct pp_label){.key = "timestamp",
			                            .num = b[i].ts,
			                            .num_unit = "nanoseconds"};
		if (b[i].tid)
			l[nl++] = (struct pp_label){.key = "thread",
			                            .num = b[i].tid};
		int64_t objs = blocks_objects(b[i].objects_fp);
		int64_t v[RD_NVIEWS] = {[RD_SPACE] = b[i].charged,
		                        [RD_ALLOC_SPACE] = b[i].charged,
		                        [RD_OBJECTS] = objs,
		                        [RD_ALLOC_OBJECTS] = objs};
		/* A zero-byte block still counts as one object. */
		if (!b[i].charged && !objs)
			v[RD_OBJECTS] = v[RD_ALLOC_OBJECTS] = 1;
		err = pp_add_sample_labels(pp, j->s, b[i].callsite, v, l, nl);
	}
	return err;
}

/* The wall-clock time of the file's boot-time ts: exact when the file
 * says how the clocks relate (a snapshot's), else pp_wall_time. */
static int64_t wall_of(sqlite3 *db, int64_t ts)
{
	sqlite3_stmt *st = NULL;
	int64_t t = 0;

	if (sqlite3_prepare_v2(db,
	                       "SELECT value FROM heapprof_meta WHERE key = ?",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, META_CLOCK_OFFSET, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW) {
			const char *v =
			        (const char *)sqlite3_column_text(st, 0);
			long long off = v ? strtoll(v, NULL, 10) : 0;
			if (off > 0)
				t = ts + off;
		}
	}
	sqlite3_finalize(st);
	return t ? t : pp_wall_time(db, ts);
}

/*
 * Writes the pprof of dump j->d: from its blocks when it kept them, else
 * from the per-stack counters at the dump (as `heapprof pprof --dump`).
 * 0 or -1 (message printed).
 */
static int write_pprof(struct pprof_job *j)
{
	const char *heap = j->heap ? j->heap : "libc.malloc";
	struct rd_block *b = NULL;
	size_t nb = 0;
	char *c1 = NULL, *c2 = NULL;
	int err = blocks_summary(j->db, SUBSYS, j->d->id, &j->sum);
	struct pp_profile *pp = err ? NULL : pp_new(j->p->interval);

	if (!err && !pp)
		err = -ENOMEM;
	j->from_blocks = !err && j->sum.nblocks > 0;
	if (!err && j->from_blocks)
		err = blocks_load(j->db, SUBSYS, j->d->id, heap, &b, &nb);
	if (!err && j->with_tags && !j->from_blocks)
		fprintf(stderr,
		        "heapprof: %s: this dump kept no blocks: the pprof has "
		        "one sample per call stack, without tags\n",
		        SUBSYS);
	if (!err &&
	    (asprintf(&c1,
	              "heapprof snapshot%s%s%s of process %" PRId64
	              " (%s), heap %s: dump %zu of %zu in %s",
	              j->d->name ? " '" : "", j->d->name ? j->d->name : "",
	              j->d->name ? "'" : "", j->p->pid, j->p->name, heap,
	              j->dump_index, j->ndumps, j->file) < 0 ||
	     asprintf(&c2, "command line: %s", j->p->cmdline) < 0)) {
		c1 = c2 = NULL;
		err = -ENOMEM;
	}
	if (!err)
		err = pp_add_comment(pp, c1);
	if (!err)
		err = pp_add_comment(pp, c2);
	if (!err) {
		int64_t wall =
		        j->wall_ns ? j->wall_ns : wall_of(j->db, j->d->ts);
		pp_set_time(pp, wall, j->d->ts - j->p->start_ts);
	}
	if (!err && j->from_blocks)
		err = j->with_tags ? add_tagged(pp, j, b, nb)
		                   : add_aggregated(pp, j, b, nb);
	else if (!err)
		err = pp_add_dump(pp, j->db, j->s, j->p->upid, heap, j->d->ts,
		                  0, NULL, SUBSYS);
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	if (!err)
		j->nsamples = pp_nsamples(pp);
	if (!err)
		err = pp_write_gz(pp, j->path, SUBSYS);
	free(b);
	free(c1);
	free(c2);
	pp_free(pp);
	return err ? -1 : 0;
}

/* ---- snapshot -p / -n --------------------------------------------------- */

static char *joined_args(int argc, char **argv)
{
	size_t len = sizeof("heapprof");
	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	char *s = malloc(len);
	if (!s)
		return NULL;
	strcpy(s, "heapprof");
	for (int i = 0; i < argc; i++) {
		strcat(s, " ");
		strcat(s, argv[i]);
	}
	return s;
}

/* The snapshot as a profile database at path.  0 or -1 (printed). */
static int write_db(const struct snap_opts *o, const char *path, pid_t pid,
                    const struct candidate *first, int nr,
                    const struct hp_region *const *rs, struct snapshot *snap,
                    uint64_t ts, uint64_t wall)
{
	char comm[64], off[32];
	char *cmdline = proc_cmdline(pid), *me = joined_args(o->argc, o->argv);
	const struct hp_header_v1 *h = first->r.hdr;
	uint64_t shmem = 0;
	int64_t upid = 0;
	int err = cmdline && me ? 0 : -ENOMEM;

	for (int i = 0; i < nr; i++)
		shmem += rs[i]->size;
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
	        .start_ts_ns = first->attach_ts,
	        .how = "snapshot",
	        .ppid = ppid > 0 ? ppid : 0,
	        .session_id = h->session_id,
	};
	struct profile *prof = err ? NULL : profile_create(path, me);
	if (!err && !prof)
		err = -EIO;
	if (!err)
		err = profile_begin_process(prof, &pi, &upid);
	snap->dump.ts_ns = ts;
	snap->dump.reason = "snapshot";
	snap->dump.name = "snapshot";
	snap->dump.blocks_in_flight = snap->blocks_in_flight;
	snapshot_memory(rs[0], pid, true, &snap->dump.memory);
	if (!err)
		err = profile_write_dump(prof, upid, &snap->dump);
	snprintf(off, sizeof(off), "%" PRId64, (int64_t)(wall - ts));
	if (!err)
		err = profile_set_meta(prof, META_CLOCK_OFFSET, off);
	int cerr = prof ? profile_close(prof) : 0;
	if (!err)
		err = cerr;
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	free(cmdline);
	free(me);
	return err ? -1 : 0;
}

/* The pprof of the database just written (its one process and dump). */
static int pprof_of_db(const struct snap_opts *o, const char *db_path,
                       const char *out, uint64_t wall, size_t *nsamples)
{
	sqlite3 *db = reader_open(db_path, SUBSYS);
	struct rd_stacks s;
	struct rd_process *procs = NULL;
	struct rd_dump *d = NULL;
	size_t np = 0, nd = 0;
	int err = db ? 0 : -1;

	memset(&s, 0, sizeof(s));
	if (!err)
		err = reader_load_stacks(db, SUBSYS, &s);
	if (!err)
		err = reader_load_processes(db, SUBSYS, &procs, &np);
	if (!err && np == 1)
		err = reader_load_dumps(db, SUBSYS, procs[0].upid, &d, &nd);
	if (!err && (np != 1 || nd != 1)) {
		hp_err(SUBSYS, "%s: unexpected contents", db_path);
		err = -1;
	}
	if (!err) {
		struct pprof_job j = {
		        .db = db,
		        .s = &s,
		        .p = &procs[0],
		        .d = &d[0],
		        .dump_index = 1,
		        .ndumps = 1,
		        .file = db_path,
		        .heap = o->heap,
		        .with_tags = o->with_tags,
		        .wall_ns = (int64_t)wall,
		        .path = out,
		};
		err = write_pprof(&j);
		*nsamples = j.nsamples;
	}
	reader_free_dumps(d, nd);
	reader_free_processes(procs, np);
	reader_free_stacks(&s);
	if (db)
		sqlite3_close(db);
	return err ? -1 : 0;
}

static void print_summary(pid_t pid, const struct snapshot *snap,
                          uint64_t interval)
{
	char comm[64], hb[HP_FMT_BYTES_MAX], hc[HP_FMT_BYTES_MAX];
	uint64_t bytes = 0, charged = 0;

	for (size_t i = 0; i < snap->dump.nblocks; i++) {
		bytes += snap->dump.blocks[i].size;
		charged += snap->dump.blocks[i].charged;
	}
	proc_comm(pid, comm, sizeof(comm));
	printf("snapshot of pid %d (%s): %zu block%s, %s, %" PRIu64
	       " in flight; ",
	       (int)pid, comm, snap->dump.nblocks,
	       snap->dump.nblocks == 1 ? "" : "s",
	       hp_fmt_bytes(hb, sizeof(hb), (int64_t)bytes),
	       snap->blocks_in_flight);
	if (interval <= 1)
		printf("interval: every allocation\n");
	else
		printf("interval: sampled every %" PRIu64
		       " bytes: the blocks are the sampled ones (estimated "
		       "live: %s)\n",
		       interval,
		       hp_fmt_bytes(hc, sizeof(hc), (int64_t)charged));
}

/* Says what --contents-dir did; 0 if every block was written, else 1. */
static int report_contents(const struct contents_result *c, pid_t pid,
                           const char *dir)
{
	switch (c->status) {
	case CONTENTS_DENY:
		hp_err(SUBSYS,
		       "cannot read the memory of pid %d: ptrace access denied "
		       "(same user and kernel.yama.ptrace_scope=0, or "
		       "CAP_SYS_PTRACE); no contents written",
		       (int)pid);
		return 1;
	case CONTENTS_GONE:
		hp_err(SUBSYS,
		       "cannot read the memory of pid %d: the process is "
		       "gone; no contents written",
		       (int)pid);
		return 1;
	case CONTENTS_ERROR:
		hp_err(SUBSYS, "--contents-dir %s: %s", dir, strerror(c->err));
		return 1;
	}
	printf("wrote the contents of %zu block%s to %s/", c->written,
	       c->written == 1 ? "" : "s", dir);
	if (c->custom)
		printf("; skipped %zu block%s of custom heaps (their "
		       "addresses are ids, not memory)",
		       c->custom, c->custom == 1 ? "" : "s");
	printf("\n");
	if (c->unreadable) {
		hp_err(SUBSYS,
		       "%zu block%s could not be read (freed while the "
		       "process ran?)",
		       c->unreadable, c->unreadable == 1 ? "" : "s");
		return 1;
	}
	return 0;
}

static int run_live(const struct snap_opts *o)
{
	pid_t pid = (pid_t)o->pid;
	struct scan *sc = calloc(1, sizeof(*sc));
	const struct hp_region *rs[TARGET_MAX_REGIONS];
	const struct candidate *first = NULL;
	struct snapshot snap;
	char *db_path = NULL, *out = NULL;
	int nr = 0, rc = 1;

	memset(&snap, 0, sizeof(snap));
	if (!sc) {
		hp_err(SUBSYS, "out of memory");
		return 1;
	}
	if (o->proc_name && find_by_name(o->proc_name, &pid) < 0)
		goto out;
	if (pick_regions(pid, sc, rs, &nr, &first) < 0)
		goto out;
	uint64_t ts = hp_clock_ns(CLOCK_BOOTTIME);
	uint64_t wall = hp_clock_ns(CLOCK_REALTIME);
	int err = snapshot_take_live(rs, nr, &snap);
	if (!err)
		err = snapshot_resolve_paths(&snap, pid, true, NULL);
	if (err) {
		hp_err(SUBSYS, "pid %d: reading its region: %s", (int)pid,
		       strerror(-err));
		goto out;
	}
	/* The contents right after the table: the process may run on. */
	struct contents_result ct = {0};
	if (o->contents &&
	    contents_write(pid, snap.dump.blocks, snap.dump.nblocks,
	                   o->contents, &ct) < 0) {
		hp_err(SUBSYS, "out of memory");
		goto out;
	}
	/* asprintf leaves its pointer undefined on failure: each is reset
	 * on its own, and db_path freed if only out failed. */
	if (o->db ? !(db_path = strdup(o->db))
	          : asprintf(&db_path, "heapprof.snapshot.%d.db", (int)pid) < 0)
		db_path = NULL;
	else if (o->out ? !(out = strdup(o->out))
	                : asprintf(&out, "heapprof.snapshot.%d.pb.gz",
	                           (int)pid) < 0) {
		free(db_path);
		db_path = out = NULL;
	}
	if (!db_path) {
		hp_err(SUBSYS, "out of memory");
		goto out;
	}
	uint64_t interval = first->r.hdr->sampling_interval;
	if (snap.dump.interval_used > interval)
		interval = snap.dump.interval_used;
	size_t nsamples = 0;
	if (write_db(o, db_path, pid, first, nr, rs, &snap, ts, wall) < 0 ||
	    pprof_of_db(o, db_path, out, wall, &nsamples) < 0)
		goto out;
	print_summary(pid, &snap, interval);
	printf("wrote %s and %s (%zu sample%s)\n", db_path, out, nsamples,
	       nsamples == 1 ? "" : "s");
	rc = o->contents ? report_contents(&ct, pid, o->contents) : 0;
out:
	snapshot_free(&snap);
	scan_free(sc);
	free(sc);
	free(db_path);
	free(out);
	return rc;
}

/* ---- --list / --name ----------------------------------------------------- */

/* Live objects and bytes of every heap at ts, from the counters. */
static void counter_totals(sqlite3 *db, int64_t upid, int64_t ts, int64_t *objs,
                           int64_t *bytes)
{
	sqlite3_stmt *st = NULL;

	*objs = *bytes = 0;
	if (sqlite3_prepare_v2(db,
	                       "SELECT coalesce(sum(count), 0),"
	                       " coalesce(sum(size), 0) FROM"
	                       " heap_profile_allocation WHERE upid = ?1 AND"
	                       " ts <= ?2",
	                       -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, upid);
		sqlite3_bind_int64(st, 2, ts);
		if (sqlite3_step(st) == SQLITE_ROW) {
			*objs = sqlite3_column_int64(st, 0);
			*bytes = sqlite3_column_int64(st, 1);
		}
	}
	sqlite3_finalize(st);
}

static int run_list(sqlite3 *db, const struct snap_opts *o)
{
	struct rd_process *procs = NULL;
	size_t np = 0, shown = 0, nsel = 0;
	int err = reader_load_processes(db, SUBSYS, &procs, &np);

	for (size_t i = 0; !err && i < np; i++) {
		const struct rd_process *p = &procs[i];
		struct rd_dump *d = NULL;
		size_t nd = 0;
		if (o->have_pid_filter && p->pid != o->pid_filter)
			continue;
		nsel++;
		if ((err = reader_load_dumps(db, SUBSYS, p->upid, &d, &nd)))
			break;
		for (size_t k = 0; !err && k < nd; k++) {
			if (!d[k].name)
				continue;
			struct rd_block_summary sum;
			err = blocks_summary(db, SUBSYS, d[k].id, &sum);
			if (err)
				break;
			int64_t nblocks = sum.nblocks, bytes = sum.bytes;
			/* No blocks kept (or none live): the counters. */
			if (!nblocks)
				counter_totals(db, p->upid, d[k].ts, &nblocks,
				               &bytes);
			if (!shown++)
				printf("%-8s %5s  %-24s %12s %10s %14s  %s\n",
				       "PID", "DUMP", "NAME", "TIME", "BLOCKS",
				       "BYTES", "IN FLIGHT");
			char in_flight[24] = "-";
			if (sum.in_flight >= 0)
				snprintf(in_flight, sizeof(in_flight),
				         "%" PRId64, sum.in_flight);
			printf("%-8" PRId64 " %5zu  %-24s %10.3f s %10" PRId64
			       " %14" PRId64 "  %s\n",
			       p->pid, k + 1, d[k].name,
			       (double)(d[k].ts - p->start_ts) / 1e9, nblocks,
			       bytes, in_flight);
		}
		reader_free_dumps(d, nd);
	}
	reader_free_processes(procs, np);
	if (err)
		return 1;
	if (o->have_pid_filter && nsel == 0) {
		hp_err(SUBSYS, "%s: no process with pid %ld", o->file,
		       o->pid_filter);
		return 1;
	}
	if (!shown)
		printf("no named snapshots in %s\n", o->file);
	return 0;
}

/* FILE without ".db", then ".NAME.pb.gz" ('/' in NAME made '_'). */
static char *name_output(const char *file, const char *name)
{
	size_t n = strlen(file);
	char *r = NULL, *safe = strdup(name);

	if (!safe)
		return NULL;
	for (char *c = safe; *c; c++)
		if (*c == '/' || (unsigned char)*c < 0x20)
			*c = '_';
	int cut = n > 3 && !strcmp(file + n - 3, ".db") ? 3 : 0;
	if (asprintf(&r, "%.*s.%s.pb.gz", (int)(n - cut), file, safe) < 0)
		r = NULL;
	free(safe);
	return r;
}

static int run_name(sqlite3 *db, const struct snap_opts *o)
{
	struct rd_stacks s;
	struct rd_process *procs = NULL;
	struct rd_dump *dumps = NULL, *d = NULL;
	size_t np = 0, nd = 0, pick_nd = 0, nsel = 0;
	long pick_k = -1;
	const struct rd_process *pick = NULL;
	char pids[256] = "";
	size_t plen = 0, nmatch = 0;
	char *out = NULL;
	int err;

	memset(&s, 0, sizeof(s));
	err = reader_load_processes(db, SUBSYS, &procs, &np);
	for (size_t i = 0; !err && i < np; i++) {
		const struct rd_process *p = &procs[i];
		if (o->have_pid_filter && p->pid != o->pid_filter)
			continue;
		nsel++;
		if ((err = reader_load_dumps(db, SUBSYS, p->upid, &d, &nd)))
			break;
		/* The last of that name, as --dump NAME picks it. */
		long k = -1;
		for (size_t x = nd; x-- > 0 && k < 0;)
			if (d[x].name && !strcmp(d[x].name, o->snap_name))
				k = (long)x;
		if (k < 0) {
			reader_free_dumps(d, nd);
			continue;
		}
		if (plen < sizeof(pids))
			plen += (size_t)snprintf(
			        pids + plen, sizeof(pids) - plen, "%s%" PRId64,
			        nmatch ? ", " : "", p->pid);
		if (nmatch++ == 0) {
			pick = p;
			pick_k = k;
			dumps = d;
			pick_nd = nd;
		} else {
			reader_free_dumps(d, nd);
		}
	}
	if (!err && o->have_pid_filter && nsel == 0) {
		hp_err(SUBSYS, "%s: no process with pid %ld", o->file,
		       o->pid_filter);
		err = -1;
	} else if (!err && nmatch == 0) {
		hp_err(SUBSYS,
		       "%s: no snapshot named '%s'%s (heapprof snapshot --list "
		       "%s shows them)",
		       o->file, o->snap_name,
		       o->have_pid_filter ? " in that process" : "", o->file);
		err = -1;
	} else if (!err && nmatch > 1) {
		hp_err(SUBSYS,
		       "%s: processes %s have a snapshot named '%s': choose "
		       "one with --pid",
		       o->file, pids, o->snap_name);
		err = -1;
	}
	if (!err)
		err = reader_load_stacks(db, SUBSYS, &s);
	if (!err && !(out = o->out ? strdup(o->out)
	                           : name_output(o->file, o->snap_name))) {
		hp_err(SUBSYS, "out of memory");
		err = -1;
	}
	if (!err) {
		struct pprof_job j = {
		        .db = db,
		        .s = &s,
		        .p = pick,
		        .d = &dumps[pick_k],
		        .dump_index = (size_t)pick_k + 1,
		        .ndumps = pick_nd,
		        .file = o->file,
		        .heap = o->heap,
		        .with_tags = o->with_tags,
		        .path = out,
		};
		err = write_pprof(&j);
		if (!err)
			printf("wrote %s: process %" PRId64
			       ", snapshot '%s' (dump %ld of %zu), %zu "
			       "sample%s, from %s\n",
			       out, pick->pid, o->snap_name, pick_k + 1,
			       pick_nd, j.nsamples, j.nsamples == 1 ? "" : "s",
			       j.from_blocks ? "its blocks"
			                     : "per-stack counters");
	}
	free(out);
	reader_free_stacks(&s);
	reader_free_dumps(dumps, pick_nd);
	reader_free_processes(procs, np);
	return err ? 1 : 0;
}

int cmd_snapshot(int argc, char **argv)
{
	struct snap_opts o;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	if (o.pid || o.proc_name) {
		rc = run_live(&o);
	} else {
		sqlite3 *db = reader_open(o.file, SUBSYS);
		if (!db)
			return 1;
		rc = o.list ? run_list(db, &o) : run_name(db, &o);
		sqlite3_close(db);
	}
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	return rc;
}
