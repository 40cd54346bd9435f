/*
 * The daemon's message reader: everything heapprofd parses from a peer on
 * its socket.
 *
 * The input is what a peer sends.  Its first byte picks how it arrives:
 * (a) as a byte stream through a real socketpair into ctl_recv (framing,
 * the header check, bounded payload reads, descriptor handling; some
 * inputs also pass a descriptor with SCM_RIGHTS, which must be closed
 * unless the message may carry one); (b) as a control header checked by
 * ctl_check_hdr and, when it is a SESSION_START, its payload parsed by
 * ctl_parse_session exactly as the daemon does (session_start, in
 * src/daemon/sessions.c).
 * (What a profiled process sends its collector: fuzz_client.c.)
 * (A client hello is a fixed 56-byte struct whose magic and version are
 * compared; test_daemon.sh sends bad ones.)  The harness checks that no
 * descriptor leaks: the number of open fds is the same after every input
 * as before it, and that a parsed session request holds what the protocol
 * allows.
 */
#include <errno.h>
#include <stdbool.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/ctl.h"
#include "fuzz_common.h"
#include "daemon/daemon.h"
#include "layout/wire_v1.h"

/* Sends buf on s, the first byte with descriptor fd (if >= 0). */
static void send_bytes(int s, const uint8_t *buf, size_t n, int fd)
{
	size_t off = 0;
	while (off < n) {
		struct iovec iov = {.iov_base = (void *)(buf + off),
		                    .iov_len = n - off};
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr a;
		} cb;
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		if (fd >= 0 && off == 0) {
			memset(&cb, 0, sizeof(cb));
			mh.msg_control = cb.b;
			mh.msg_controllen = sizeof(cb.b);
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd, sizeof(int));
		}
		ssize_t w = sendmsg(s, &mh, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		off += (size_t)w;
	}
}

static void via_socket(const uint8_t *p, size_t n, bool with_fd, bool first4)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	/* The socket buffer takes a whole input (inputs are small). */
	int pass = with_fd ? memfd_create("fuzz-pass", MFD_CLOEXEC) : -1;
	send_bytes(sv[0], p, n, pass);
	if (pass >= 0)
		close(pass);
	close(sv[0]); /* EOF after the input: a truncated message ends */
	uint32_t magic = HP_CTL_MAGIC;
	for (int k = 0; k < 4; k++) {
		struct hp_ctl_msg m;
		int rc = ctl_recv(sv[1], &m, 0,
		                  first4 && k == 0 ? &magic : NULL);
		if (rc)
			break;
		if (m.type == HP_CTL_SESSION_START) {
			struct ctl_session_req req;
			char err[160];
			if (!ctl_parse_session(m.payload, m.len, &req, err,
			                       sizeof(err)))
				ctl_session_req_free(&req);
		}
		if (m.fd >= 0)
			close(m.fd);
		ctl_msg_free(&m);
	}
	close(sv[1]);
}

static void parse_direct(const uint8_t *p, size_t n)
{
	struct hp_ctl_hdr h;
	if (n < sizeof(h))
		return;
	memcpy(&h, p, sizeof(h));
	/* The header is the peer's; force a known magic and version half of
	 * the time so the payload parsers are reached. */
	if (h.reserved & 1) {
		h.magic = HP_CTL_MAGIC;
		h.version = HP_CTL_VERSION;
		h.len = (uint32_t)(n - sizeof(h));
	}
	if (ctl_check_hdr(&h))
		return;
	if (h.len > n - sizeof(h))
		return; /* the socket reader would wait for the rest */
	/* The daemon reads len bytes into a buffer of len + 1 and adds a
	 * NUL; an exact-size copy makes ASan see any read past it. */
	uint8_t *pl = malloc((size_t)h.len + 1);
	if (!pl)
		return;
	memcpy(pl, p + sizeof(h), h.len);
	pl[h.len] = '\0';
	if (h.type == HP_CTL_SESSION_START) {
		struct ctl_session_req req;
		char err[160];
		if (!ctl_parse_session(pl, h.len, &req, err, sizeof(err))) {
			if (req.npids + req.nnames == 0 ||
			    req.npids > HP_CTL_MAX_PIDS ||
			    req.nnames > HP_CTL_MAX_NAMES)
				abort();
			for (uint32_t i = 0; i < req.npids; i++)
				if (req.pids[i] <= 0)
					abort();
			for (uint32_t i = 0; i < req.nnames; i++)
				if (!req.names[i][0] ||
				    strlen(req.names[i]) >= HP_CTL_NAME_MAX)
					abort();
			ctl_session_req_free(&req);
		} else if (!err[0] || strchr(err, '\n')) {
			abort(); /* the reason is one line */
		}
	}
	free(pl);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Nothing here prints, but keep a parser's future messages out
	 * of the fuzzer's log. */
	fuzz_quiet_stderr();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > HP_CTL_MAX_PAYLOAD)
		return 0;
	/* Counted around each input: libFuzzer itself opens descriptors
	 * between inputs (its symbolizer's pipes). */
	int base = fuzz_open_fds();
	uint8_t how = data[0];
	data++;
	size--;
	switch (how % 4) {
	case 0:
		via_socket(data, size, false, false);
		break;
	case 1:
		via_socket(data, size, true, false);
		break;
	case 2:
		/* The daemon peeked the magic; ctl_recv gets the rest. */
		via_socket(data, size, how & 4, true);
		break;
	default:
		parse_direct(data, size);
		break;
	}
	if (fuzz_open_fds() != base)
		abort(); /* a descriptor leaked */
	return 0;
}
