/*
 * What a profiled process sends its collector after the welcome
 * (wire_v1.h): 16-byte hp_client_msg (GROW: a new, larger region;
 * SNAPSHOT: a named dump, its name of 1..127 bytes following), and
 * anything else, which must only make the collector ignore the rest.
 *
 * For each input collector_answer makes a real target on one end of a
 * socketpair (a region in a memfd, a process row in a profile under
 * $TMPDIR or /dev/shm), the input arrives on the other end and is closed
 * (the program "exits"), collector_poll_client reads it as the session
 * loop does (regions made and sent, named snapshots written), then the
 * final dump.  Checks: no crash, leak or undefined behaviour, and no
 * socket or region descriptor left open.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collector/collector.h"
#include "fuzz_common.h"

/* Sends all of buf on s (the socket buffer takes a small input). */
static void send_bytes(int s, const uint8_t *buf, size_t n)
{
	size_t off = 0;
	while (off < n) {
		ssize_t w = send(s, buf + off, n - off, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		off += (size_t)w;
	}
}

static struct collector col;
static bool col_open;
static int col_uses;
static char col_dir[64], col_path[80];

static void col_close(void)
{
	if (!col_open)
		return;
	profile_close(col.profile);
	col.profile = NULL;
	collector_close(&col);
	col_open = false;
	static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
	char b[96];
	for (size_t i = 0; i < 4; i++) {
		snprintf(b, sizeof(b), "%s%s", col_path, sfx[i]);
		unlink(b);
	}
}

static void col_cleanup(void)
{
	col_close();
	rmdir(col_dir);
}

/* A collector with a profile, renewed every 200 inputs (each adds a
 * target and its rows). */
static bool col_get(void)
{
	if (col_open && ++col_uses < 200)
		return true;
	col_close();
	if (!col_dir[0]) {
		/* $TMPDIR (scripts/fuzz.sh's scratch directory) or
		 * /dev/shm. */
		const char *tmp = getenv("TMPDIR");
		snprintf(col_dir, sizeof(col_dir), "%s/heapprof-fuzz-XXXXXX",
		         tmp && *tmp && strlen(tmp) < 40 ? tmp : "/dev/shm");
		if (!mkdtemp(col_dir))
			abort();
		snprintf(col_path, sizeof(col_path), "%s/p.db", col_dir);
		atexit(col_cleanup);
	}
	struct collector_opts o = {.interval = 4096,
	                           .max_frames = HP_DEFAULT_FRAMES,
	                           .shmem_size = HP_REGION_MIN_SIZE};
	if (collector_open(&col, &o, false))
		abort();
	col.profile = profile_create(col_path, "fuzz");
	if (!col.profile)
		abort();
	col_open = true;
	col_uses = 0;
	return true;
}

static void client_msgs(const uint8_t *p, size_t n)
{
	int sv[2];
	if (!col_get() ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	struct target_info ti = {.pid = getpid(),
	                         .ppid = 1,
	                         .how = "command",
	                         .name = "fuzz",
	                         .cmdline = "fuzz",
	                         .layout_version = HP_LAYOUT_VERSION};
	struct target *t = NULL;
	/* The collector's end is nonblocking, as accept4 makes it. */
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	if (collector_answer(&col, sv[1], &ti, &t) || !t) {
		close(sv[0]);
		return;
	}
	send_bytes(sv[0], p, n);
	shutdown(sv[0], SHUT_WR); /* the program "exits" after it */
	for (int k = 0; k < 64 && t->fd >= 0; k++)
		collector_poll_client(&col, t);
	collector_dump_final(&col, t, "exit", 0);
	collector_end_row(&col, t, boottime_ns(), 0, true);
	collector_retire(&col, t);
	/* Our end held the welcomes and the regions' descriptors passed
	 * with them: closing it releases them. */
	close(sv[0]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* The collector's one-line messages about a malformed client. */
	fuzz_quiet_stderr();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	/* Counted around each input: libFuzzer opens descriptors between
	 * inputs (its symbolizer's pipes). */
	int base = fuzz_open_fds();
	client_msgs(data, size);
	if (fuzz_open_fds() != base)
		abort(); /* a descriptor leaked */
	return 0;
}
