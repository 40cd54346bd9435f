/*
 * The snapshot code's reads of /proc (snapshot_proc.h), through
 * util/proc.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "inspect/snapshot_proc.h"
#include "util/proc.h"

/* What the client names its region's memfd (collector.c), as
 * /proc/PID/fd shows it. */
#define REGION_LINK "/memfd:heapprof-region (deleted)"

struct region_fds {
	void (*take)(void *ctx, int fd);
	void *ctx;
	int *denied;
};

static int take_region_fd(void *ctx, const struct proc_fd *f)
{
	struct region_fds *r = ctx;
	if (!f->target) {
		if (f->err == EACCES || f->err == EPERM)
			*r->denied = f->err;
		return 0;
	}
	if (strcmp(f->target, REGION_LINK) != 0)
		return 0;
	/* Through /proc: a new open file of the same memfd, read-only. */
	int fd = proc_fd_open(f, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EACCES || errno == EPERM)
			*r->denied = errno;
		return 0; /* closed meanwhile: not ours to count */
	}
	r->take(r->ctx, fd);
	return 0;
}

int snapshot_proc_region_fds(pid_t pid, void (*take)(void *ctx, int fd),
                             void *ctx, int *denied)
{
	struct region_fds r = {take, ctx, denied};
	if (proc_fds(pid, take_region_fd, &r) < 0) {
		if (errno == ENOENT)
			return -ESRCH;
		return errno == EACCES || errno == EPERM ? -EACCES : -errno;
	}
	return 0;
}

static int is_lib_map(void *ctx, const struct proc_map *m)
{
	(void)ctx;
	const char *slash = strrchr(m->path, '/');
	return slash && !strncmp(slash + 1, "libheapprof.so", 14);
}

/*
 * Whether pid has libheapprof mapped: then `record -p` can profile it
 * as it runs (through heapprofd), and a hint to restart it under
 * `record -- CMD` would send the user the long way round.
 */
bool snapshot_proc_has_lib(pid_t pid)
{
	return proc_maps(pid, is_lib_map, NULL) == 1;
}

static int is_region_fd(void *ctx, const struct proc_fd *f)
{
	(void)ctx;
	return f->target && !strcmp(f->target, REGION_LINK);
}

/* Whether pid has a descriptor naming a heapprof region. */
static bool has_region(pid_t pid)
{
	return proc_fds(pid, is_region_fd, NULL) == 1;
}

struct by_name {
	uid_t me;
	pid_t self;
	char want[16]; /* /proc/PID/comm keeps 15 bytes of the name */
	pid_t *found;
	int *n;
	bool *lib;
};

static int match_name(void *ctx, pid_t pid)
{
	struct by_name *b = ctx;
	char comm[64];
	uid_t owner;
	if (pid == b->self || proc_owner(pid, &owner) < 0 ||
	    (b->me != 0 && owner != b->me))
		return 0;
	proc_comm(pid, comm, sizeof(comm));
	if (strcmp(comm, b->want) != 0)
		return 0;
	if (!has_region(pid)) {
		*b->lib = *b->lib || snapshot_proc_has_lib(pid);
		return 0;
	}
	if (*b->n < SNAPSHOT_PROC_BY_NAME_MAX)
		b->found[*b->n] = pid;
	(*b->n)++;
	return 0;
}

int snapshot_proc_by_name(const char *name,
                          pid_t found[SNAPSHOT_PROC_BY_NAME_MAX], int *n,
                          bool *lib)
{
	struct by_name b = {.me = getuid(),
	                    .self = getpid(),
	                    .found = found,
	                    .n = n,
	                    .lib = lib};
	*n = 0;
	*lib = false; /* one of that name has libheapprof loaded */
	snprintf(b.want, sizeof(b.want), "%s", name);
	if (proc_pids(match_name, &b) < 0)
		return -errno;
	return 0;
}

struct mapped_at {
	uint64_t addr;
	char *out;
};

static int path_at(void *ctx, const struct proc_map *m)
{
	struct mapped_at *a = ctx;
	if (a->addr < m->start || a->addr >= m->end || m->path[0] != '/')
		return 0;
	size_t len = strlen(m->path);
	const char *del = " (deleted)";
	size_t dlen = strlen(del);
	if (len > dlen && !memcmp(m->path + len - dlen, del, dlen))
		len -= dlen;
	if (len >= PATH_MAX)
		len = PATH_MAX - 1;
	memcpy(a->out, m->path, len);
	a->out[len] = '\0';
	return 1;
}

bool snapshot_proc_mapped_path(pid_t pid, uint64_t addr, char *out)
{
	struct mapped_at a = {addr, out};
	return proc_maps(pid, path_at, &a) == 1;
}

int snapshot_proc_memory(pid_t pid, struct prof_memory *m)
{
	struct proc_status st;
	/* A zombie has no VmRSS: it is gone for our purpose. */
	if (proc_status(pid, &st) < 0 || !(st.have & PROC_HAVE_RSS))
		return -1;
	m->rss = st.rss;
	m->have_rss = 1;
	m->rss_source = "proc";
	m->rss_anon = st.rss_anon;
	m->rss_file = st.rss_file;
	m->rss_shmem = st.rss_shmem;
	if (st.have & PROC_HAVE_HWM) {
		m->rss_peak = st.rss_peak;
		m->have_peak = 1;
	}
	return 0;
}
