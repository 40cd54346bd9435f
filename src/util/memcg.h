/*
 * The memory cgroup a process is in, as the session watches it (issue 22:
 * dumps when memory gets tight, a dump at the OOM kill): its limit (the
 * lowest of the cgroup's and its ancestors': cgroup v2 memory.max and
 * memory.high, v1 memory.limit_in_bytes), its usage, and its counters
 * (v2 memory.events high, max, oom_kill; v1 memory.failcnt and
 * memory.oom_control's oom_kill; v2 memory.pressure's "some avg10").
 * Reads files only; the roots are parameters so that a test can give a
 * tree of its own.
 */
#ifndef HEAPPROF_UTIL_MEMCG_H
#define HEAPPROF_UTIL_MEMCG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct memcg {
	int version;         /* 1 or 2; 0: no memory cgroup found */
	char dir[PATH_MAX];  /* the process's own cgroup directory */
	char path[PATH_MAX]; /* its path in the hierarchy ("/a/b") */
	uint64_t limit;      /* bytes; 0: no limit */
	uint64_t high;       /* v2 memory.high (the lowest); 0: none */
};

/* What the counters say now (a field the version lacks stays 0). */
struct memcg_stat {
	uint64_t usage;    /* memory.current / memory.usage_in_bytes */
	uint64_t peak;     /* memory.peak / memory.max_usage_in_bytes; 0 */
	uint64_t oom_kill; /* processes the OOM killer killed in it */
	uint64_t high;     /* v2: times usage went over memory.high */
	uint64_t max;      /* v2: times it hit memory.max; v1: failcnt */
	double some_avg10; /* v2 PSI: % of the last 10 s some task waited */
	bool have_psi;
};

/* The roots where the hierarchies are mounted: NULL for the defaults
 * (v2: /sys/fs/cgroup, or /sys/fs/cgroup/unified in the hybrid layout;
 * v1: /sys/fs/cgroup/memory). */
struct memcg_roots {
	const char *v1, *v2;
};

/* Finds pid's memory cgroup (v2 when it has the memory controller, else
 * v1).  0, or -1 with errno (no /proc/PID/cgroup; ENOENT: no memory
 * cgroup that can be read). */
int memcg_find(pid_t pid, const struct memcg_roots *roots, struct memcg *m);
/* Parses /proc/PID/cgroup's text for the v1 memory line or the v2 line
 * (for the tests). */
int memcg_parse_proc(const char *text, char *v1, size_t v1len, char *v2,
                     size_t v2len);
int memcg_read(const struct memcg *m, struct memcg_stat *s);

#endif
