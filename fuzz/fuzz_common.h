/*
 * What the fuzz harnesses share: a quiet stderr, a scratch file for the
 * harnesses that write profiles, and a count of the descriptors a parser
 * could leak.  Included by one harness per program: static functions.
 */
#ifndef HEAPPROF_FUZZ_COMMON_H
#define HEAPPROF_FUZZ_COMMON_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The code under test reports bad input in one line on stderr: not for
 * the fuzzer's log, unless FUZZ_VERBOSE is set (libFuzzer keeps its own
 * FILE, ASan writes to fd 2 directly). */
static inline void fuzz_quiet_stderr(void)
{
	FILE *null = fopen("/dev/null", "w");
	if (null && !getenv("FUZZ_VERBOSE"))
		stderr = null;
}

static char fuzz_file_path[96];
static char fuzz_dir_path[64];

static void fuzz_remove_scratch(void)
{
	/* SQLite's companions too: a profile is written in WAL mode. */
	static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
	char b[128];
	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(b, sizeof(b), "%s%s", fuzz_file_path, sfx[i]);
		unlink(b);
	}
	rmdir(fuzz_dir_path);
}

/* A path NAME in a private directory under $TMPDIR (scripts/fuzz.sh's
 * scratch directory, removed even after a crash) or /dev/shm, removed at
 * exit unless FUZZ_KEEP is set (to look at what was written). */
static inline char *fuzz_scratch_file(const char *name)
{
	if (fuzz_file_path[0])
		return fuzz_file_path;
	const char *tmp = getenv("TMPDIR");
	snprintf(fuzz_dir_path, sizeof(fuzz_dir_path),
	         "%s/heapprof-fuzz-XXXXXX",
	         tmp && *tmp && strlen(tmp) < 40 ? tmp : "/dev/shm");
	if (!mkdtemp(fuzz_dir_path))
		abort();
	snprintf(fuzz_file_path, sizeof(fuzz_file_path), "%s/%s", fuzz_dir_path,
	         name);
	if (!getenv("FUZZ_KEEP"))
		atexit(fuzz_remove_scratch);
	return fuzz_file_path;
}

/* Open sockets and memfds: what the code under test could leak (a client
 * connection, a region, a passed descriptor).  Not every descriptor: the
 * sanitizers start llvm-symbolizer through pipes whenever they first need
 * it, and SQLite opens and closes a profile's -wal and -shm as it likes. */
static inline int fuzz_open_fds(void)
{
	int n = 0;
	char target[64];
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		abort();
	for (struct dirent *e; (e = readdir(d));) {
		ssize_t k = readlinkat(dirfd(d), e->d_name, target,
		                       sizeof(target) - 1);
		if (k <= 0)
			continue;
		target[k] = '\0';
		if (!strncmp(target, "socket:", 7) ||
		    !strncmp(target, "/memfd:", 7))
			n++;
	}
	closedir(d);
	return n;
}

#endif
