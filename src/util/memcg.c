/*
 * A process's memory cgroup (memcg.h).
 */
#include "util/memcg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Limits at or above this are "none" (v1 writes PAGE_COUNTER_MAX, about
 * 2^63, rounded down to a page). */
#define NO_LIMIT (1ull << 62)

static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0) {
		errno = e;
		return -1;
	}
	buf[n] = '\0';
	return 0;
}

/* dir/name as a number; "max" and values past NO_LIMIT are 0 (none). */
static int read_limit(const char *dir, const char *name, uint64_t *out)
{
	char path[PATH_MAX + 64], text[64];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (read_small(path, text, sizeof(text)))
		return -1;
	if (!strncmp(text, "max", 3)) {
		*out = 0;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno || end == text)
		return -1;
	*out = v >= NO_LIMIT ? 0 : (uint64_t)v;
	return 0;
}

/* "key N" lines of dir/name: the value of key, or 0. */
static uint64_t read_key(const char *dir, const char *name, const char *key)
{
	char path[PATH_MAX + 64], text[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (read_small(path, text, sizeof(text)))
		return 0;
	size_t kl = strlen(key);
	for (char *l = text; l && *l;) {
		if (!strncmp(l, key, kl) && l[kl] == ' ')
			return strtoull(l + kl + 1, NULL, 10);
		l = strchr(l, '\n');
		if (l)
			l++;
	}
	return 0;
}

int memcg_parse_proc(const char *text, char *v1, size_t v1len, char *v2,
                     size_t v2len)
{
	if (v1len)
		v1[0] = '\0';
	if (v2len)
		v2[0] = '\0';
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t ll = nl ? (size_t)(nl - l) : strlen(l);
		const char *c1 = memchr(l, ':', ll);
		const char *c2 =
		        c1 ? memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - l))
		           : NULL;
		if (c2) {
			size_t cl = (size_t)(c2 - c1 - 1);
			const char *path = c2 + 1;
			size_t pl = ll - (size_t)(path - l);
			bool mem = false;
			for (const char *p = c1 + 1; p < c2;) {
				const char *comma =
				        memchr(p, ',', (size_t)(c2 - p));
				const char *e = comma ? comma : c2;
				if ((size_t)(e - p) == 6 &&
				    !strncmp(p, "memory", 6))
					mem = true;
				p = e + 1;
			}
			char *dst = NULL;
			size_t dl = 0;
			if (cl == 0 && !strncmp(l, "0:", 2)) {
				dst = v2;
				dl = v2len;
			} else if (mem) {
				dst = v1;
				dl = v1len;
			}
			if (dst && pl < dl) {
				memcpy(dst, path, pl);
				dst[pl] = '\0';
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return v1[0] || v2[0] ? 0 : -1;
}

static bool file_exists(const char *dir, const char *name)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static const char *v2_root(const struct memcg_roots *r)
{
	if (r && r->v2)
		return r->v2;
	if (file_exists("/sys/fs/cgroup", "cgroup.controllers"))
		return "/sys/fs/cgroup";
	return "/sys/fs/cgroup/unified";
}

/* The lowest limit of dir and its ancestors up to root. */
static void lowest(struct memcg *m, const char *root, const char *name,
                   uint64_t *out)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", m->dir);
	size_t rl = strlen(root);
	*out = 0;
	for (;;) {
		uint64_t v;
		if (read_limit(dir, name, &v) == 0 && v && (!*out || v < *out))
			*out = v;
		char *slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < rl)
			break;
		*slash = '\0';
	}
}

int memcg_find(pid_t pid, const struct memcg_roots *roots, struct memcg *m)
{
	memset(m, 0, sizeof(*m));
	char text[8192], path[PATH_MAX];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (read_small(path, text, sizeof(text)))
		return -1;
	char v1[PATH_MAX], v2[PATH_MAX];
	if (memcg_parse_proc(text, v1, sizeof(v1), v2, sizeof(v2))) {
		errno = ENOENT;
		return -1;
	}
	const char *r2 = v2_root(roots);
	int n;
	if (v2[0]) {
		n = snprintf(m->dir, sizeof(m->dir), "%s%s", r2,
		             strcmp(v2, "/") ? v2 : "");
		if (n > 0 && (size_t)n < sizeof(m->dir) &&
		    file_exists(m->dir, "memory.current")) {
			m->version = 2;
			snprintf(m->path, sizeof(m->path), "%s", v2);
			lowest(m, r2, "memory.max", &m->limit);
			lowest(m, r2, "memory.high", &m->high);
			return 0;
		}
	}
	const char *r1 =
	        roots && roots->v1 ? roots->v1 : "/sys/fs/cgroup/memory";
	if (v1[0]) {
		n = snprintf(m->dir, sizeof(m->dir), "%s%s", r1,
		             strcmp(v1, "/") ? v1 : "");
		if (n > 0 && (size_t)n < sizeof(m->dir) &&
		    file_exists(m->dir, "memory.limit_in_bytes")) {
			m->version = 1;
			snprintf(m->path, sizeof(m->path), "%s", v1);
			lowest(m, r1, "memory.limit_in_bytes", &m->limit);
			return 0;
		}
	}
	memset(m, 0, sizeof(*m));
	errno = ENOENT;
	return -1;
}

int memcg_read(const struct memcg *m, struct memcg_stat *s)
{
	memset(s, 0, sizeof(*s));
	if (m->version == 2) {
		if (read_limit(m->dir, "memory.current", &s->usage))
			return -1;
		if (read_limit(m->dir, "memory.peak", &s->peak))
			s->peak = 0; /* before Linux 5.19 */
		s->oom_kill = read_key(m->dir, "memory.events", "oom_kill");
		s->high = read_key(m->dir, "memory.events", "high");
		s->max = read_key(m->dir, "memory.events", "max");
		char path[PATH_MAX + 64], text[512];
		snprintf(path, sizeof(path), "%s/memory.pressure", m->dir);
		const char *a;
		if (read_small(path, text, sizeof(text)) == 0 &&
		    !strncmp(text, "some ", 5) &&
		    (a = strstr(text, "avg10=")) != NULL) {
			s->some_avg10 = strtod(a + 6, NULL);
			s->have_psi = true;
		}
		return 0;
	}
	if (m->version == 1) {
		if (read_limit(m->dir, "memory.usage_in_bytes", &s->usage))
			return -1;
		if (read_limit(m->dir, "memory.max_usage_in_bytes", &s->peak))
			s->peak = 0;
		s->oom_kill =
		        read_key(m->dir, "memory.oom_control", "oom_kill");
		/* Charges that hit the limit: memory's, and memory+swap's
		 * (checked first: with both limits set, it is the one that
		 * counts them). */
		uint64_t f;
		if (read_limit(m->dir, "memory.failcnt", &f) == 0)
			s->max = f;
		if (read_limit(m->dir, "memory.memsw.failcnt", &f) == 0)
			s->max += f;
		return 0;
	}
	errno = ENOENT;
	return -1;
}
