/*
 * Reading a process from /proc (proc.h).  Every file is read with a bound
 * (a process's stat, status, comm and cmdline are small; maps and the
 * descriptor directory are walked a line or an entry at a time), and
 * every field is parsed from text the process can influence only through
 * its name: the name in stat may hold spaces and parentheses, so stat is
 * parsed from its last ')'.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/proc.h"

/* /proc/PID/FILE ("" for /proc/PID itself) into path. */
static void proc_path(char *path, size_t len, pid_t pid, const char *file)
{
	snprintf(path, len, "/proc/%d%s%s", (int)pid, file[0] ? "/" : "", file);
}

/* "No such process" is ENOENT here, whichever of the two /proc said. */
static int gone_errno(int e)
{
	return e == ESRCH ? ENOENT : e;
}

/* At most len bytes of /proc/PID/FILE into buf: how many, or -1 with
 * errno. */
static ssize_t read_file(pid_t pid, const char *file, char *buf, size_t len)
{
	char path[64];
	proc_path(path, sizeof(path), pid, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		errno = gone_errno(errno);
		return -1;
	}
	size_t got = 0;
	int e = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			e = gone_errno(errno);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (e && !got) {
		errno = e;
		return -1;
	}
	return (ssize_t)got;
}

/* The text of a small file, NUL-terminated; -1 with ENOENT when it is
 * empty (a zombie being reaped). */
static int read_text(pid_t pid, const char *file, char *buf, size_t len)
{
	ssize_t n = read_file(pid, file, buf, len - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	if (!n) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

/* ---- stat and status ----------------------------------------------- */

uint64_t proc_start_time(pid_t pid)
{
	struct proc_stat st;
	return proc_stat(pid, &st) == 0 ? st.start_time : 0;
}

int proc_stat(pid_t pid, struct proc_stat *st)
{
	char buf[1024];
	if (read_text(pid, "stat", buf, sizeof(buf)))
		return -1;
	/* "pid (comm) S ppid ...": comm may hold spaces and parentheses,
	 * so the fields follow the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p) {
		errno = EPROTO;
		return -1;
	}
	char *save = NULL;
	int field = 2;
	for (char *tok = strtok_r(p + 1, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save)) {
		field++;
		if (field == 3)
			st->state = tok[0];
		else if (field == 4)
			st->ppid = (pid_t)atoi(tok);
		else if (field == 9)
			st->flags = (unsigned)strtoul(tok, NULL, 10);
		else if (field == 22) {
			st->start_time = strtoull(tok, NULL, 10);
			return 0;
		}
	}
	errno = EPROTO;
	return -1;
}

bool proc_alive(pid_t pid)
{
	struct proc_stat st;
	return !proc_stat(pid, &st) && st.state != 'Z' && st.state != 'X';
}

bool proc_exiting(pid_t pid)
{
	struct proc_stat st;
	return proc_stat(pid, &st) || st.state == 'Z' || st.state == 'X' ||
	       (st.flags & 0x4u);
}

pid_t proc_ppid(pid_t pid)
{
	struct proc_stat st;
	return proc_stat(pid, &st) ? -1 : st.ppid;
}

/* The value in kB of "Key:   123 kB" in bytes; false if not a number. */
static bool kb_value(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long kb = strtoull(v, &end, 10);
	if (end == v)
		return false;
	*out = (uint64_t)kb * 1024;
	return true;
}

/* The four ids of a status "Uid:" or "Gid:" line (real, effective, saved,
 * filesystem); false if there are fewer. */
static bool four_ids(const char *v, unsigned long id[4])
{
	for (int n = 0; n < 4; n++) {
		char *e;
		id[n] = strtoul(v, &e, 10);
		if (e == v)
			return false;
		v = e;
	}
	return true;
}

int proc_status(pid_t pid, struct proc_status *st)
{
	char buf[8192];
	memset(st, 0, sizeof(*st));
	if (read_text(pid, "status", buf, sizeof(buf)))
		return -1;
	for (char *l = buf; l && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		char *colon = strchr(l, ':');
		if (colon) {
			*colon = '\0';
			const char *k = l, *v = colon + 1;
			uint64_t b;
			if (!strcmp(k, "Name")) {
				while (*v == ' ' || *v == '\t')
					v++;
				snprintf(st->name, sizeof(st->name), "%s", v);
			} else if (!strcmp(k, "State")) {
				while (*v == ' ' || *v == '\t')
					v++;
				st->state = *v;
			} else if (!strcmp(k, "PPid")) {
				st->ppid = (pid_t)atoi(v);
			} else if (!strcmp(k, "Uid")) {
				unsigned long id[4];
				if (four_ids(v, id)) {
					for (int i = 0; i < 4; i++)
						st->uid[i] = (uid_t)id[i];
					st->have |= PROC_HAVE_UID;
				}
			} else if (!strcmp(k, "Gid")) {
				unsigned long id[4];
				if (four_ids(v, id)) {
					for (int i = 0; i < 4; i++)
						st->gid[i] = (gid_t)id[i];
					st->have |= PROC_HAVE_GID;
				}
			} else if (!strcmp(k, "TracerPid")) {
				st->tracer = (pid_t)atoi(v);
			} else if (!strcmp(k, "Seccomp")) {
				st->seccomp_mode = atoi(v);
			} else if (!strcmp(k, "SigPnd")) {
				st->sigpnd = strtoull(v, NULL, 16);
			} else if (!strcmp(k, "ShdPnd")) {
				st->shdpnd = strtoull(v, NULL, 16);
			} else if (!strcmp(k, "SigBlk")) {
				st->sigblk = strtoull(v, NULL, 16);
			} else if (!strcmp(k, "SigCgt")) {
				st->sigcgt = strtoull(v, NULL, 16);
			} else if (!strcmp(k, "Seccomp_filters")) {
				st->seccomp = strtol(v, NULL, 10);
			} else if (!strcmp(k, "VmRSS") && kb_value(v, &b)) {
				st->rss = b;
				st->have |= PROC_HAVE_RSS;
			} else if (!strcmp(k, "VmHWM") && kb_value(v, &b)) {
				st->rss_peak = b;
				st->have |= PROC_HAVE_HWM;
			} else if (!strcmp(k, "RssAnon") && kb_value(v, &b)) {
				st->rss_anon = b;
			} else if (!strcmp(k, "RssFile") && kb_value(v, &b)) {
				st->rss_file = b;
			} else if (!strcmp(k, "RssShmem") && kb_value(v, &b)) {
				st->rss_shmem = b;
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return 0;
}

int proc_owner(pid_t pid, uid_t *uid)
{
	char path[64];
	struct stat sb;
	/* Its files, not the directory: some kernels keep the directory
	 * owned by the real owner when the process is not dumpable. */
	proc_path(path, sizeof(path), pid, "stat");
	if (stat(path, &sb) < 0) {
		errno = gone_errno(errno);
		return -1;
	}
	*uid = sb.st_uid;
	return 0;
}

/* ---- names and paths ----------------------------------------------- */

void proc_comm(pid_t pid, char *buf, size_t len)
{
	if (!len)
		return;
	ssize_t n = read_file(pid, "comm", buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
}

char *proc_cmdline(pid_t pid)
{
	size_t cap = 4096;
	char *buf = malloc(cap + 1);
	if (!buf)
		return NULL;
	ssize_t n = read_file(pid, "cmdline", buf, cap);
	if (n < 0)
		n = 0;
	/* Arguments are NUL-separated; the last NUL ends them. */
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	return buf;
}

int proc_argv0(pid_t pid, char *buf, size_t len)
{
	/* The arguments are NUL-separated: the string is the first. */
	if (!read_text(pid, "cmdline", buf, len))
		return 0;
	buf[0] = '\0';
	return -1;
}

/* The target of the link /proc/PID/FILE, cut to len - 1 bytes. */
static int read_link(pid_t pid, const char *file, char *buf, size_t len)
{
	char path[64];
	proc_path(path, sizeof(path), pid, file);
	ssize_t n = len ? readlink(path, buf, len - 1) : -1;
	if (len)
		buf[n > 0 ? n : 0] = '\0';
	if (n > 0)
		return 0;
	if (n == 0)
		errno = ENOENT;
	errno = gone_errno(errno);
	return -1;
}

int proc_exe(pid_t pid, char *buf, size_t len)
{
	return read_link(pid, "exe", buf, len);
}

int proc_cwd(pid_t pid, char *buf, size_t len)
{
	return read_link(pid, "cwd", buf, len);
}

/* ---- walks --------------------------------------------------------- */

int proc_maps(pid_t pid, int (*fn)(void *ctx, const struct proc_map *m),
              void *ctx)
{
	char path[64];
	proc_path(path, sizeof(path), pid, "maps");
	FILE *f = fopen(path, "re");
	if (!f) {
		errno = gone_errno(errno);
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;
	/* Bounded: a process has at most vm.max_map_count mappings. */
	while (!rc && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		struct proc_map m = {.path = ""};
		unsigned long long start, end, off;
		int at = 0;
		/* start-end perms offset dev inode [path] */
		if (sscanf(line, "%llx-%llx %7s %llx %*s %lu %n", &start, &end,
		           m.perms, &off, &m.inode, &at) < 5)
			continue;
		m.start = start;
		m.end = end;
		m.offset = off;
		if (at)
			m.path = line + at;
		rc = fn(ctx, &m);
	}
	/* An empty read (EACCES shows up at read time on some kernels) is
	 * an error too. */
	if (!rc && ferror(f)) {
		rc = -1;
		errno = EIO;
	}
	int e = errno;
	free(line);
	fclose(f);
	errno = e;
	return rc;
}

int proc_fds(pid_t pid, int (*fn)(void *ctx, const struct proc_fd *f),
             void *ctx)
{
	char path[64], link[PATH_MAX];
	proc_path(path, sizeof(path), pid, "fd");
	DIR *d = opendir(path);
	if (!d) {
		errno = gone_errno(errno);
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		struct proc_fd f = {.fd = atoi(e->d_name),
		                    .dirfd = dirfd(d),
		                    .name = e->d_name};
		ssize_t n =
		        readlinkat(f.dirfd, e->d_name, link, sizeof(link) - 1);
		if (n < 0) {
			f.err = errno;
		} else {
			link[n] = '\0';
			f.target = link;
		}
		rc = fn(ctx, &f);
	}
	int err = errno;
	closedir(d);
	errno = err;
	return rc;
}

int proc_fd_open(const struct proc_fd *f, int flags)
{
	return openat(f->dirfd, f->name, flags);
}

/* A /proc entry's name as a pid, or 0 if it is none. */
static pid_t name_pid(const char *s)
{
	if (!isdigit((unsigned char)s[0]))
		return 0;
	char *end;
	long pid = strtol(s, &end, 10);
	if (*end || pid <= 0 || pid > 0x7fffffff)
		return 0;
	return (pid_t)pid;
}

/* fn(ctx, id) for each entry of dir that is a number (a pid or a tid),
 * in directory order, until fn returns non-zero; -1 with errno if dir
 * cannot be opened. */
static int walk_ids(const char *dir, int (*fn)(void *ctx, pid_t id), void *ctx)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		pid_t id = name_pid(e->d_name);
		if (id)
			rc = fn(ctx, id);
	}
	int err = errno;
	closedir(d);
	errno = err;
	return rc;
}

int proc_pids(int (*fn)(void *ctx, pid_t pid), void *ctx)
{
	return walk_ids("/proc", fn, ctx);
}

int proc_tasks(pid_t pid, int (*fn)(void *ctx, pid_t tid), void *ctx)
{
	char path[64];
	proc_path(path, sizeof(path), pid, "task");
	int rc = walk_ids(path, fn, ctx);
	if (rc < 0)
		errno = gone_errno(errno);
	return rc;
}

ssize_t proc_task_read(pid_t pid, pid_t tid, const char *file, char *buf,
                       size_t len)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)pid, (int)tid,
	         file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got + 1 < len) {
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

long proc_task_syscall(pid_t pid, pid_t tid)
{
	char path[96], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid,
	         (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		errno = gone_errno(errno);
		return -2;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int err = errno;
	close(fd);
	if (n <= 0) {
		errno = n < 0 ? gone_errno(err) : ENOENT;
		return -2;
	}
	buf[n] = '\0';
	if (!strncmp(buf, "running", 7) || buf[0] == '-')
		return -1;
	char *e;
	long nr = strtol(buf, &e, 10);
	if (e == buf) {
		errno = EPROTO;
		return -2;
	}
	return nr;
}

int proc_children(pid_t pid, int (*fn)(void *ctx, pid_t child), void *ctx)
{
	char path[64];
	proc_path(path, sizeof(path), pid, "task");
	DIR *d = opendir(path);
	if (!d) {
		errno = gone_errno(errno);
		return -1;
	}
	bool found = false;
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char file[300];
		snprintf(file, sizeof(file), "/proc/%d/task/%s/children",
		         (int)pid, e->d_name);
		FILE *f = fopen(file, "re");
		if (!f)
			continue;
		found = true;
		int child;
		while (!rc && fscanf(f, "%d", &child) == 1)
			rc = fn(ctx, (pid_t)child);
		fclose(f);
	}
	closedir(d);
	if (!found) {
		errno = ENOENT;
		return -1;
	}
	return rc;
}

/* ---- by name -------------------------------------------------------- */

bool proc_name_matches(const char *name, const char *argv0, const char *comm)
{
	if (!name[0])
		return false;
	if (argv0[0]) {
		const char *b = strrchr(argv0, '/');
		b = b ? b + 1 : argv0;
		if (!strcmp(name, argv0) || !strcmp(name, b))
			return true;
	}
	return comm[0] && !strcmp(name, comm);
}

struct by_name {
	const char *name;
	pid_t self, *pids;
	size_t max;
	int n;
};

static int match_one(void *ctx, pid_t pid)
{
	struct by_name *b = ctx;
	char argv0[4096], comm[64];
	if (pid == b->self)
		return 0;
	proc_argv0(pid, argv0, sizeof(argv0));
	proc_comm(pid, comm, sizeof(comm));
	if (!proc_name_matches(b->name, argv0, comm))
		return 0;
	if ((size_t)b->n < b->max)
		b->pids[b->n] = pid;
	b->n++;
	return 0;
}

int proc_find_by_name(const char *name, pid_t *pids, size_t max)
{
	struct by_name b = {
	        .name = name, .self = getpid(), .pids = pids, .max = max};
	if (proc_pids(match_one, &b) < 0)
		return -1;
	return b.n;
}
