/*
 * The snapshot code's reads of /proc (snapshot_proc.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/collector.h"
#include "collector/snapshot_proc.h"

/* What the client names its region's memfd (collector.c), as
 * /proc/PID/fd shows it. */
#define REGION_LINK "/memfd:heapprof-region (deleted)"

int snapshot_proc_region_fds(pid_t pid, void (*take)(void *ctx, int fd),
                             void *ctx, int *denied)
{
	char path[64], link[128];

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
				*denied = errno;
			continue;
		}
		link[n] = '\0';
		if (strcmp(link, REGION_LINK) != 0)
			continue;
		/* Through /proc: a new open file of the same memfd,
		 * read-only. */
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno == EACCES || errno == EPERM)
				*denied = errno;
			continue; /* closed meanwhile: not ours to count */
		}
		take(ctx, fd);
	}
	closedir(d);
	return 0;
}

/*
 * Whether pid has libheapprof mapped: then `record -p` can profile it
 * as it runs (through heapprofd), and a hint to restart it under
 * `record -- CMD` would send the user the long way round.
 */
bool snapshot_proc_has_lib(pid_t pid)
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

int snapshot_proc_by_name(const char *name,
                          pid_t found[SNAPSHOT_PROC_BY_NAME_MAX], int *n,
                          bool *lib)
{
	DIR *d = opendir("/proc");
	uid_t me = getuid();
	/* /proc/PID/comm keeps 15 bytes of the name. */
	char want[16];

	*n = 0;
	*lib = false; /* one of that name has libheapprof loaded */
	if (!d)
		return -errno;
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
			*lib = *lib || snapshot_proc_has_lib((pid_t)pid);
			continue;
		}
		if (*n < SNAPSHOT_PROC_BY_NAME_MAX)
			found[*n] = (pid_t)pid;
		(*n)++;
	}
	closedir(d);
	return 0;
}

bool snapshot_proc_mapped_path(pid_t pid, uint64_t addr, char *out)
{
	char name[64], line[PATH_MAX + 128];
	bool found = false;
	snprintf(name, sizeof(name), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(name, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		int at = 0;
		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &lo, &hi,
		           &at) < 2 ||
		    !at || addr < lo || addr >= hi || line[at] != '/')
			continue;
		size_t len = strcspn(line + at, "\n");
		const char *del = " (deleted)";
		size_t dlen = strlen(del);
		if (len > dlen && !memcmp(line + at + len - dlen, del, dlen))
			len -= dlen;
		memcpy(out, line + at, len);
		out[len] = '\0';
		found = true;
	}
	fclose(f);
	return found;
}

/* The value in kB of "Key:   123 kB" in a /proc status text, in bytes. */
static int status_field(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);

	for (const char *l = text; l && *l;
	     l = strchr(l, '\n'), l = l ? l + 1 : l) {
		if (strncmp(l, key, klen) != 0 || l[klen] != ':')
			continue;
		char *end;
		unsigned long long kb = strtoull(l + klen + 1, &end, 10);
		if (end == l + klen + 1)
			return -1;
		*out = (uint64_t)kb * 1024;
		return 0;
	}
	return -1;
}

int snapshot_proc_memory(pid_t pid, struct prof_memory *m)
{
	char path[64], buf[4096];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* A zombie has no VmRSS: it is gone for our purpose. */
	if (status_field(buf, "VmRSS", &m->rss) < 0)
		return -1;
	m->have_rss = 1;
	m->rss_source = "proc";
	status_field(buf, "RssAnon", &m->rss_anon);
	status_field(buf, "RssFile", &m->rss_file);
	status_field(buf, "RssShmem", &m->rss_shmem);
	if (status_field(buf, "VmHWM", &m->rss_peak) == 0)
		m->have_peak = 1;
	return 0;
}
