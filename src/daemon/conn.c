/*
 * heapprofd's connections: accepting peers (our uid only), reading their
 * messages without ever blocking (a hello, or control messages: ctl.h),
 * the bounded queue of what we send them, and the dispatch of a command's
 * messages.  A descriptor a peer sends us is closed unread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/daemon_int.h"
#include "layout/layout_v2.h"

/* ---- output --------------------------------------------------------------
 */

void conn_kill(struct conn *c, const char *why)
{
	if (c->dead)
		return;
	if (why)
		dlog("%s", why);
	c->dead = 1;
}

/* Writes what a connection's queue holds, without blocking. */
void conn_flush(struct conn *c)
{
	while (c->oq && !c->dead) {
		struct outmsg *m = c->oq;
		struct iovec iov = {.iov_base = m->data + m->off,
		                    .iov_len = m->len - m->off};
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		if (m->off == 0 && m->fd >= 0) {
			memset(&cbuf, 0, sizeof(cbuf));
			mh.msg_control = cbuf.buf;
			mh.msg_controllen = sizeof(cbuf.buf);
			struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &m->fd, sizeof(int));
		}
		ssize_t n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			char why[128];
			snprintf(why, sizeof(why),
			         "pid %d: write failed: %s; closing", c->pid,
			         strerror(errno));
			conn_kill(c, errno == EPIPE || errno == ECONNRESET
			                     ? NULL
			                     : why);
			return;
		}
		if (n > 0 && m->fd >= 0) {
			/* The peer has its copy now. */
			close(m->fd);
			m->fd = -1;
		}
		m->off += (size_t)n;
		if (m->off == m->len) {
			c->oq = m->next;
			if (!c->oq)
				c->oq_tail = NULL;
			c->oq_bytes -= m->len;
			free(m);
		}
	}
}

/* Queues one ctl message (and fd, whose ownership we take) on c. */
int conn_send(struct conn *c, uint16_t type, const void *payload, uint32_t len,
              int fd)
{
	if (c->dead || len > HP_CTL_MAX_PAYLOAD) {
		if (fd >= 0)
			close(fd);
		return -EPIPE;
	}
	if (c->oq_bytes + sizeof(struct hp_ctl_hdr) + len > OUTQ_MAX_BYTES) {
		char why[128];
		snprintf(why, sizeof(why),
		         "pid %d does not read its messages; closing it",
		         c->pid);
		conn_kill(c, why);
		if (fd >= 0)
			close(fd);
		return -ENOBUFS;
	}
	struct outmsg *m = malloc(sizeof(*m) + sizeof(struct hp_ctl_hdr) + len);
	if (!m) {
		conn_kill(c, "out of memory; closing a connection");
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	struct hp_ctl_hdr h = {.magic = HP_CTL_MAGIC,
	                       .version = HP_CTL_VERSION,
	                       .type = type,
	                       .len = len};
	memcpy(m->data, &h, sizeof(h));
	if (len)
		memcpy(m->data + sizeof(h), payload, len);
	m->next = NULL;
	m->len = sizeof(h) + len;
	m->off = 0;
	m->fd = fd;
	if (c->oq_tail)
		c->oq_tail->next = m;
	else
		c->oq = m;
	c->oq_tail = m;
	c->oq_bytes += m->len;
	conn_flush(c);
	return 0;
}

void send_error(struct conn *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Every refused request is one line in the log, as the peer got it
	 * (the peer's pid is SO_PEERCRED's, not anything it said). */
	dlog("pid %d: refused: %s", c->pid, msg);
	conn_send(c, HP_CTL_ERROR, msg, (uint32_t)strlen(msg) + 1, -1);
	c->kind = C_CLOSING;
	c->deadline = now_ms() + CONN_DEADLINE_MS;
}

/* Answers a profiled process's hello and closes its connection. */
void answer_client(struct conn *c, uint32_t status)
{
	struct hp_welcome w = {.magic = HP_WIRE_MAGIC,
	                       .version = HP_WIRE_VERSION,
	                       .status = status,
	                       .layout_version = HP_LAYOUT_VERSION};
	/* 56 bytes into a fresh socket's empty buffer: never blocks. */
	ssize_t n = send(c->fd, &w, sizeof(w), MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)n;
	c->dead = 1;
}

/* ---- messages ------------------------------------------------------------
 */

static void handle_ctl(struct conn *c, uint16_t type, const uint8_t *p,
                       uint32_t len)
{
	if (c->kind == C_SESSION) {
		if (type == HP_CTL_DUMP_DONE) {
			struct hp_ctl_dump_done dd;
			memcpy(&dd, p, sizeof(dd));
			dump_done(c->sess, &dd);
			return;
		}
		if (type == HP_CTL_ATTACHED) {
			struct hp_ctl_attached a;
			memcpy(&a, p, sizeof(a));
			target_attached(c->sess, a.pid);
			return;
		}
		dlog("session %" PRIu64 ": unexpected message type %u ignored",
		     c->sess->id, type);
		return;
	}
	if (c->kind != C_CTL) {
		conn_kill(c, NULL);
		return;
	}
	switch (type) {
	case HP_CTL_SESSION_START:
		session_start(c, p, len);
		return;
	case HP_CTL_DUMP: {
		struct hp_ctl_dump d;
		memcpy(&d, p, sizeof(d));
		if (d.pid < 0) {
			send_error(c, "DUMP: invalid pid %d", d.pid);
			return;
		}
		dump_start(c, d.pid);
		return;
	}
	case HP_CTL_STATUS:
		status_reply(c);
		return;
	case HP_CTL_SHUTDOWN:
		dlog("shutdown requested by pid %d", c->pid);
		D.quit = 1;
		c->kind = C_CLOSING;
		return;
	default:
		send_error(c, "unexpected message type %u", type);
		return;
	}
}

/* ---- connections ---------------------------------------------------------
 */

void conn_free(struct conn *c)
{
	if (c->sess)
		session_end(c->sess);
	for (size_t i = 0; i < D.ndumps; i++)
		if (D.dumps[i]->client == c)
			D.dumps[i]->client = NULL;
	while (c->oq) {
		struct outmsg *m = c->oq;
		c->oq = m->next;
		if (m->fd >= 0)
			close(m->fd);
		free(m);
	}
	if (c->fd >= 0)
		close(c->fd);
	free(c->payload);
	free(c);
}

void accept_conns(void)
{
	for (int k = 0; k < 64; k++) {
		int fd = accept4(D.listen_fd, NULL, NULL,
		                 SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				/* Every waiting peer is in: the episode
				 * of a failing accept is over. */
				D.said_accept_err = 0;
				return;
			}
			if (errno == EINTR || errno == ECONNABORTED)
				return;
			if (!D.said_accept_err)
				dlog("cannot accept a peer: %s; new peers wait "
				     "until a connection closes",
				     strerror(errno));
			D.said_accept_err = 1;
			D.accept_pause_until = now_ms() + ACCEPT_PAUSE_MS;
			return;
		}
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) ||
		    cl != sizeof(cred)) {
			dlog("a peer without credentials refused");
			close(fd);
			continue;
		}
		if (cred.uid != getuid()) {
			dlog("refused a peer of uid %u (pid %d)",
			     (unsigned)cred.uid, (int)cred.pid);
			close(fd);
			continue;
		}
		if (cred.pid <= 0) {
			dlog("refused a peer from another pid namespace");
			close(fd);
			continue;
		}
		if (D.nconns == MAX_CONNS) {
			if (!D.said_full)
				dlog("too many connections (%d); pid %d "
				     "refused, and any other peer until one "
				     "closes",
				     MAX_CONNS, (int)cred.pid);
			D.said_full = 1;
			close(fd);
			continue;
		}
		D.said_full = 0;
		struct conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->pid = cred.pid;
		c->kind = C_NEW;
		c->want = 4;
		c->deadline = now_ms() + CONN_DEADLINE_MS;
		D.conns[D.nconns++] = c;
	}
}

/* Reads what is there into the current message; dispatches it once
 * complete. */
void conn_read(struct conn *c)
{
	if (c->kind == C_CLOSING || c->kind == C_WAIT) {
		/* Nothing more is expected: EOF ends it, data is an error. */
		char b[64];
		ssize_t n = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			conn_kill(c, NULL);
		return;
	}
	uint8_t *dst;
	size_t room;
	int in_payload = c->payload != NULL;
	if (in_payload) {
		struct hp_ctl_hdr h;
		memcpy(&h, c->head, sizeof(h));
		dst = c->payload + (c->have - sizeof(h));
		room = sizeof(h) + h.len - c->have;
	} else {
		dst = c->head + c->have;
		room = c->want - c->have;
	}
	union {
		char buf[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = dst, .iov_len = room};
	struct msghdr mh = {.msg_iov = &iov,
	                    .msg_iovlen = 1,
	                    .msg_control = cbuf.buf,
	                    .msg_controllen = sizeof(cbuf.buf)};
	ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	/* No peer sends the daemon a descriptor: close any, unused (the
	 * kernel closes those beyond our buffer, MSG_CTRUNC). */
	if (n >= 0) {
		int nfds = 0;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm;
		     cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int f;
				memcpy(&f, CMSG_DATA(cm) + i * sizeof(int),
				       sizeof(f));
				if (f >= 0)
					close(f);
				nfds++;
			}
		}
		if ((nfds || (mh.msg_flags & MSG_CTRUNC)) && !c->said_fds) {
			dlog("pid %d: passed %d descriptor%s%s; closed, "
			     "unused",
			     c->pid, nfds, nfds == 1 ? "" : "s",
			     (mh.msg_flags & MSG_CTRUNC) ? " and more" : "");
			c->said_fds = 1;
		}
	}
	if (n <= 0) {
		char why[160] = "";
		if (c->kind != C_SESSION && c->have)
			snprintf(why, sizeof(why),
			         "pid %d: connection ended in the middle of a "
			         "message (%zu bytes)",
			         c->pid, c->have);
		else if (c->kind == C_SESSION && c->have)
			snprintf(why, sizeof(why),
			         "session %" PRIu64 ": connection ended in the "
			         "middle of a message",
			         c->sess->id);
		conn_kill(c, why[0] ? why : NULL);
		return;
	}
	if (c->have == 0 && c->kind == C_SESSION)
		c->deadline = now_ms() + MSG_DEADLINE_MS;
	c->have += (size_t)n;
	if (in_payload) {
		struct hp_ctl_hdr h;
		memcpy(&h, c->head, sizeof(h));
		if (c->have < sizeof(h) + h.len)
			return;
		c->payload[h.len] = '\0';
		uint8_t *p = c->payload;
		c->payload = NULL;
		c->have = 0;
		c->want = sizeof(h);
		if (c->kind == C_SESSION)
			c->deadline = -1;
		handle_ctl(c, h.type, p, h.len);
		free(p);
		return;
	}
	if (c->have < c->want)
		return;
	if (c->kind == C_NEW) {
		uint32_t magic;
		memcpy(&magic, c->head, 4);
		if (magic == HP_WIRE_MAGIC) {
			c->kind = C_HELLO;
			c->want = sizeof(struct hp_hello);
		} else if (magic == HP_CTL_MAGIC) {
			c->kind = C_CTL;
			c->want = sizeof(struct hp_ctl_hdr);
		} else {
			dlog("pid %d: unknown protocol (first bytes "
			     "%02x %02x %02x %02x); closing",
			     c->pid, c->head[0], c->head[1], c->head[2],
			     c->head[3]);
			conn_kill(c, NULL);
		}
		return;
	}
	if (c->kind == C_HELLO) {
		struct hp_hello h;
		memcpy(&h, c->head, sizeof(h));
		handle_hello(c, &h);
		return;
	}
	/* A ctl header is complete. */
	struct hp_ctl_hdr h;
	memcpy(&h, c->head, sizeof(h));
	if (ctl_check_hdr(&h)) {
		/* One line either way: a session's connection is closed,
		 * any other peer gets the reason (send_error logs it). */
		if (c->kind == C_SESSION) {
			dlog("session %" PRIu64 ": bad control message header "
			     "(type %u, length %u, version %u); closing",
			     c->sess->id, h.type, h.len, h.version);
			conn_kill(c, NULL);
		} else {
			send_error(c, "bad message (type %u, length %u)",
			           h.type, h.len);
		}
		return;
	}
	if (h.len == 0) {
		/* Complete already. */
		c->have = 0;
		c->want = sizeof(h);
		if (c->kind == C_SESSION)
			c->deadline = -1;
		uint8_t none = 0;
		handle_ctl(c, h.type, &none, 0);
		return;
	}
	c->payload = malloc((size_t)h.len + 1);
	if (!c->payload)
		conn_kill(c, "out of memory reading a message");
}
