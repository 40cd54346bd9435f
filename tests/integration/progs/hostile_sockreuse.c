/*
 * hostile_sockreuse: the program takes every descriptor number for itself
 * (issue 18, case 1).
 *
 *   1. warm-up: 100 x malloc/free in hs_warm, so a profiler has attached
 *      and set up whatever it keeps (its connection to a collector among
 *      it);
 *   2. closes descriptors 3..1023 (as daemons do), makes a socketpair and
 *      dup2's one end onto every number from 3 to 1023, so any number a
 *      profiler kept now is the program's own socket; writes a 24-byte
 *      message into the other end;
 *   3. 1000 x malloc(64) in hs_after, 500 of them freed (counted, checked
 *      against the profile at -i 1), then FLOOD live blocks of 48 bytes in
 *      hs_flood (not counted: with a small region and --block-client they
 *      fill the live table, and the profiler asks its collector for more
 *      room);
 *   4. reads the message back from its socket (non-blocking: a message
 *      someone else consumed is a short read, never a hang) and checks
 *      that nothing else arrived on either end (a profiler writing its
 *      protocol into the program's socket).
 * stdout:
 *   sockreuse: message intact, 0 stray bytes
 *   count hs_after 1000 64000 500 32000
 * Exits 0; 1 (with what differs) on any damage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "safe_common.h"

#define FLOOD 30000

static struct sc_count c_after = {"hs_after"};
static void *keep[1000];
static void **flood;

static NOINLINE void hs_warm(void)
{
	for (int i = 0; i < 100; i++) {
		void *p = malloc(32 + (size_t)i);
		sc_touch(p, 8);
		free(p);
	}
}

static NOINLINE void hs_after(int i)
{
	keep[i] = malloc(64);
	sc_alloc(&c_after, keep[i], 64);
	sc_touch(keep[i], 64);
}

static NOINLINE void *hs_flood(void)
{
	void *p = malloc(48);
	sc_touch(p, 8);
	return p;
}

static long drain(int fd, char *buf, size_t len)
{
	long got = 0;
	for (;;) {
		ssize_t n = read(fd, buf + got, len - (size_t)got);
		if (n > 0) {
			got += n;
			if ((size_t)got == len)
				return got;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return got;
	}
}

int main(void)
{
	hs_warm();
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) {
		perror("socketpair");
		return 1;
	}
	for (int fd = 3; fd < 1024; fd++)
		if (fd != sv[0] && fd != sv[1] && dup2(sv[0], fd) < 0) {
			perror("dup2");
			return 1;
		}
	static const char msg[24] = "the program's own data!";
	if (write(sv[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg)) {
		perror("write");
		return 1;
	}
	for (int i = 0; i < 1000; i++)
		hs_after(i);
	for (int i = 0; i < 1000; i += 2) {
		sc_free(&c_after, 64);
		free(keep[i]);
	}
	flood = calloc(FLOOD, sizeof(*flood));
	for (int i = 0; flood && i < FLOOD; i++)
		flood[i] = hs_flood();
	char buf[64];
	long got = drain(sv[0], buf, sizeof(msg));
	int bad = 0;
	if (got != (long)sizeof(msg) || memcmp(buf, msg, sizeof(msg)) != 0) {
		printf("sockreuse: message damaged (%ld of %zu bytes back)\n",
		       got, sizeof(msg));
		bad = 1;
	}
	long stray =
	        drain(sv[0], buf, sizeof(buf)) + drain(sv[1], buf, sizeof(buf));
	if (!bad)
		printf("sockreuse: message intact, %ld stray bytes\n", stray);
	sc_print(&c_after);
	return bad || stray ? 1 : 0;
}
