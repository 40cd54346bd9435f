/*
 * The daemon control protocol (ctl.h): framing, bounded reads, descriptor
 * passing, and the connection to the per-user daemon.  Both ends treat
 * what they receive as untrusted: every length and size is checked before
 * it is used, and a descriptor that arrives where none is expected is
 * closed at once so a confused or hostile peer cannot leak fds into us.
 */
#include "daemon/ctl.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "layout/paths.h"
#include "util/clock.h"

/* Once a message has started, the rest must follow within this time even
 * when the caller waits forever for the start: a peer that stops in the
 * middle of a message is broken, and we must not hang on it. */
#define CTL_REST_MS 5000
/* A send that cannot make progress for this long fails (the peer stopped
 * reading). */
#define CTL_SEND_MS 5000

/* Milliseconds left until deadline (-1: none) for poll(). */
static int left_ms(int64_t deadline)
{
	if (deadline < 0)
		return -1;
	int64_t l = deadline - (int64_t)hp_mono_ms();
	if (l < 0)
		return 0;
	if (l > 1000000000)
		return 1000000000;
	return (int)l;
}

int ctl_send(int sock, uint16_t type, const void *payload, uint32_t len, int fd)
{
	if (len > HP_CTL_MAX_PAYLOAD || (len && !payload))
		return -EINVAL;
	struct hp_ctl_hdr h = {.magic = HP_CTL_MAGIC,
	                       .version = HP_CTL_VERSION,
	                       .type = type,
	                       .len = len};
	size_t total = sizeof(h) + len, sent = 0;
	int64_t deadline = (int64_t)hp_mono_ms() + CTL_SEND_MS;
	int fd_sent = fd < 0;
	while (sent < total) {
		struct iovec iov[2];
		int niov = 0;
		if (sent < sizeof(h)) {
			iov[niov].iov_base = (char *)&h + sent;
			iov[niov++].iov_len = sizeof(h) - sent;
			if (len) {
				iov[niov].iov_base = (void *)payload;
				iov[niov++].iov_len = len;
			}
		} else {
			iov[niov].iov_base =
			        (char *)payload + (sent - sizeof(h));
			iov[niov++].iov_len = total - sent;
		}
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = niov};
		if (!fd_sent) {
			/* The descriptor travels with the first byte. */
			memset(&cbuf, 0, sizeof(cbuf));
			mh.msg_control = cbuf.buf;
			mh.msg_controllen = sizeof(cbuf.buf);
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd, sizeof(int));
		}
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			sent += (size_t)n;
			fd_sent = 1;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = {.fd = sock, .events = POLLOUT};
			int l = left_ms(deadline);
			if (l == 0)
				return -ETIMEDOUT;
			int rc = poll(&p, 1, l);
			if (rc < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		return n < 0 ? -errno : -EIO;
	}
	return 0;
}

/*
 * Reads exactly len bytes into buf by deadline (-1: none).  Descriptors:
 * the first one received is kept in *fd if fd is non-NULL and *fd < 0;
 * every other one is closed.  The first byte may be waited for until
 * first_deadline, the rest until rest_deadline.
 */
static int read_full(int sock, void *buf, size_t len, int *fd,
                     int64_t first_deadline, int64_t rest_deadline, int started)
{
	size_t got = 0;
	while (got < len) {
		int64_t dl = (started || got) ? rest_deadline : first_deadline;
		struct pollfd p = {.fd = sock, .events = POLLIN};
		int rc = poll(&p, 1, left_ms(dl));
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (rc == 0)
			return -ETIMEDOUT;
		union {
			char buf[CMSG_SPACE(sizeof(int) * 8)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = {.iov_base = (char *)buf + got,
		                    .iov_len = len - got};
		struct msghdr mh = {.msg_iov = &iov,
		                    .msg_iovlen = 1,
		                    .msg_control = cbuf.buf,
		                    .msg_controllen = sizeof(cbuf.buf)};
		ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN ||
			    errno == EWOULDBLOCK)
				continue;
			return -errno;
		}
		/* Descriptors first: even with n == 0 none may leak. */
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
		     c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET ||
			    c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int f;
				memcpy(&f, CMSG_DATA(c) + i * sizeof(int),
				       sizeof(f));
				if (f < 0)
					continue;
				if (fd && *fd < 0)
					*fd = f;
				else
					close(f);
			}
		}
		if (n == 0)
			return -ECONNRESET;
		got += (size_t)n;
	}
	return 0;
}

/* The payload size a message type must have, -1 for "at least min_out". */
int ctl_payload_size(uint16_t type, uint32_t *min_out)
{
	*min_out = 0;
	switch (type) {
	case HP_CTL_SESSION_START:
		*min_out = sizeof(struct hp_ctl_session);
		return -1;
	case HP_CTL_SESSION_OK:
		return sizeof(struct hp_ctl_session_ok);
	case HP_CTL_ERROR:
	case HP_CTL_STATUS_REPLY:
		return -1;
	case HP_CTL_CLIENT:
		return sizeof(struct hp_ctl_client);
	case HP_CTL_TARGET:
		return sizeof(struct hp_ctl_target);
	case HP_CTL_DUMP:
		return sizeof(struct hp_ctl_dump);
	case HP_CTL_ATTACHED:
		return sizeof(struct hp_ctl_attached);
	case HP_CTL_DUMP_REQUEST:
		return sizeof(struct hp_ctl_dump_request);
	case HP_CTL_DUMP_DONE:
		return sizeof(struct hp_ctl_dump_done);
	case HP_CTL_DUMP_RESULT:
		return sizeof(struct hp_ctl_dump_result);
	case HP_CTL_STATUS:
	case HP_CTL_SHUTDOWN:
		return 0;
	default:
		return -2;
	}
}

int ctl_check_hdr(const struct hp_ctl_hdr *h)
{
	if (h->magic != HP_CTL_MAGIC || h->version != HP_CTL_VERSION ||
	    h->len > HP_CTL_MAX_PAYLOAD)
		return -EPROTO;
	uint32_t min;
	int want = ctl_payload_size(h->type, &min);
	if (want == -2)
		return -EPROTO;
	if (want >= 0 ? h->len != (uint32_t)want : h->len < min)
		return -EPROTO;
	return 0;
}

int ctl_parse_session(const uint8_t *p, uint32_t len,
                      struct ctl_session_req *out, char *err, size_t errlen)
{
	struct hp_ctl_session h;
	memset(out, 0, sizeof(*out));
	if (len < sizeof(h)) {
		snprintf(err, errlen, "SESSION_START: %u bytes, need %zu", len,
		         sizeof(h));
		return -EPROTO;
	}
	memcpy(&h, p, sizeof(h));
	const uint32_t known = HP_SESS_STARTUP | HP_SESS_RUNNING |
	                       HP_SESS_FOLLOW_FORK | HP_SESS_FOLLOW_EXEC;
	if (h.flags & ~known) {
		snprintf(err, errlen, "SESSION_START: unknown flags 0x%x",
		         h.flags & ~known);
		return -EPROTO;
	}
	if (h.npids > HP_CTL_MAX_PIDS || h.nnames > HP_CTL_MAX_NAMES) {
		snprintf(err, errlen,
		         "SESSION_START: %u pids and %u names (at most %u "
		         "and %u)",
		         h.npids, h.nnames, HP_CTL_MAX_PIDS, HP_CTL_MAX_NAMES);
		return -EPROTO;
	}
	if (!h.npids && !h.nnames) {
		snprintf(err, errlen, "SESSION_START: no pid and no name");
		return -EPROTO;
	}
	size_t off = sizeof(h);
	/* Sizes are checked before anything is allocated: h.npids is at
	 * most HP_CTL_MAX_PIDS, and the list must be in the payload. */
	if ((size_t)h.npids * 4 > len - off) {
		snprintf(err, errlen, "SESSION_START: truncated pid list");
		return -EPROTO;
	}
	out->flags = h.flags;
	out->pids = calloc(h.npids ? h.npids : 1, sizeof(int32_t));
	out->names = calloc(h.nnames ? h.nnames : 1, sizeof(char *));
	if (!out->pids || !out->names) {
		ctl_session_req_free(out);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < h.npids; i++) {
		int32_t pid;
		memcpy(&pid, p + off, 4);
		off += 4;
		if (pid <= 0) {
			ctl_session_req_free(out);
			snprintf(err, errlen, "SESSION_START: invalid pid %d",
			         pid);
			return -EPROTO;
		}
		out->pids[out->npids++] = pid;
	}
	for (uint32_t i = 0; i < h.nnames; i++) {
		const char *nm = (const char *)p + off;
		size_t room = len - off;
		size_t n = strnlen(
		        nm, room < HP_CTL_NAME_MAX ? room : HP_CTL_NAME_MAX);
		if (n == room || n == HP_CTL_NAME_MAX || n == 0) {
			ctl_session_req_free(out);
			snprintf(err, errlen, "SESSION_START: name %u is %s",
			         i + 1,
			         n == 0      ? "empty"
			         : n == room ? "not NUL-terminated"
			                     : "too long");
			return -EPROTO;
		}
		out->names[i] = strndup(nm, n);
		if (!out->names[i]) {
			ctl_session_req_free(out);
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		out->nnames++;
		off += n + 1;
	}
	if (off != len) {
		ctl_session_req_free(out);
		snprintf(err, errlen, "SESSION_START: %u bytes, %zu used", len,
		         off);
		return -EPROTO;
	}
	return 0;
}

void ctl_session_req_free(struct ctl_session_req *r)
{
	/* names is NULL when its allocation failed (nnames is 0 then). */
	for (uint32_t i = 0; r->names && i < r->nnames; i++)
		free(r->names[i]);
	free(r->names);
	free(r->pids);
	memset(r, 0, sizeof(*r));
}

int ctl_recv(int sock, struct hp_ctl_msg *m, int timeout_ms,
             const uint32_t *first4)
{
	m->type = 0;
	m->len = 0;
	m->payload = NULL;
	m->fd = -1;
	int64_t start = (int64_t)hp_mono_ms();
	int64_t first_dl = timeout_ms < 0 ? -1 : start + timeout_ms;
	int64_t rest_dl;
	struct hp_ctl_hdr h = {0}; /* read_full fills it: 0 for the analyzer */
	size_t off = 0;
	if (first4) {
		memcpy(&h, first4, 4);
		off = 4;
	}
	/* The header: its first byte may take the caller's whole timeout;
	 * once it started, the message must be complete by the same deadline
	 * or CTL_REST_MS, whichever comes first. */
	int fd = -1;
	int rc;
	if (!off) {
		rc = read_full(sock, &h, 1, &fd, first_dl, first_dl, 0);
		if (rc)
			goto fail;
		off = 1;
	}
	rest_dl = (int64_t)hp_mono_ms() + CTL_REST_MS;
	if (first_dl >= 0 && first_dl < rest_dl)
		rest_dl = first_dl;
	rc = read_full(sock, (char *)&h + off, sizeof(h) - off, &fd, rest_dl,
	               rest_dl, 1);
	if (rc)
		goto fail;
	rc = ctl_check_hdr(&h);
	if (rc)
		goto fail;
	m->payload = malloc((size_t)h.len + 1);
	if (!m->payload) {
		rc = -ENOMEM;
		goto fail;
	}
	if (h.len) {
		rc = read_full(sock, m->payload, h.len, &fd, rest_dl, rest_dl,
		               1);
		if (rc)
			goto fail;
	}
	m->payload[h.len] = '\0';
	m->type = h.type;
	m->len = h.len;
	/* Only HP_CTL_CLIENT carries a descriptor; any other one is closed
	 * rather than handed to a caller that does not expect it. */
	if (fd >= 0 && h.type != HP_CTL_CLIENT) {
		close(fd);
		fd = -1;
	}
	m->fd = fd;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(m->payload);
	m->payload = NULL;
	m->type = 0;
	m->len = 0;
	return rc;
}

void ctl_msg_free(struct hp_ctl_msg *m)
{
	if (!m)
		return;
	free(m->payload);
	m->payload = NULL;
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	m->len = 0;
}

int ctl_connect_daemon(char *err, size_t errlen)
{
	char sock[108];
	if (hp_daemon_paths(NULL, 0, sock, sizeof(sock)) < 0) {
		snprintf(err, errlen,
		         "the daemon's socket path is too long "
		         "(XDG_RUNTIME_DIR)");
		return -ENAMETOOLONG;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		return -e;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR)
			snprintf(err, errlen,
			         "no heapprofd is running (no socket at %s); "
			         "start it with 'heapprofd' or 'heapprof "
			         "daemon'",
			         sock);
		else
			snprintf(err, errlen, "cannot connect to %s: %s", sock,
			         strerror(e));
		return -e;
	}
	/* Whoever listens there must be us: another user's process could
	 * otherwise collect our sessions' profiles. */
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 ||
	    cl != sizeof(cred)) {
		int e = errno ? errno : EPROTO;
		close(fd);
		snprintf(err, errlen, "cannot check the daemon at %s: %s", sock,
		         strerror(e));
		return -e;
	}
	if (cred.uid != getuid()) {
		close(fd);
		snprintf(err, errlen,
		         "the process listening at %s runs as uid %u, not as "
		         "us (uid %u); refusing it",
		         sock, (unsigned)cred.uid, (unsigned)getuid());
		return -EPERM;
	}
	return fd;
}
