/*
 * ctlpoke: talks to heapprofd's socket the way a broken, hostile or fake
 * peer would, for tests/integration/test_daemon.sh.
 *
 *   ctlpoke SOCK raw HEX [WAIT_MS]      send the bytes, then report
 *   ctlpoke SOCK header TYPE LEN SEND [WAIT_MS]
 *                                      a ctl header claiming LEN payload
 *                                      bytes, then SEND zero bytes
 *   ctlpoke SOCK silent WAIT_MS         connect and send nothing
 *   ctlpoke SOCK status                 STATUS; print the reply
 *   ctlpoke SOCK fd                     STATUS carrying a descriptor; says
 *                                      whether the daemon closed its copy
 *   ctlpoke SOCK hello FLAGS            a client hello; print the welcome
 *   ctlpoke SOCK session [-p PID] [-n NAME] [-f FLAGS] [-t MS] [-D N]
 *                                      a fake record session: prints each
 *                                      message, answers DUMP_REQUEST with
 *                                      DUMP_DONE (N dumps) and CLIENT with
 *                                      a NOT_TARGET welcome
 *
 * "report": after sending, what the daemon did within WAIT_MS (default
 * 3000): "reply TYPE TEXT" for each ctl message, then "closed" (it closed
 * the connection) or "open" (still open at the end).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../../src/daemon/ctl.h"
#include "../../../src/layout/wire_v1.h"

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_to(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		printf("connect failed: %s\n", strerror(errno));
		exit(1);
	}
	return fd;
}

static void send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n <= 0) {
			printf("send failed: %s\n",
			       n < 0 ? strerror(errno) : "0");
			return;
		}
		p += n;
		len -= (size_t)n;
	}
}

/* Reads exactly len bytes by deadline; 1 ok, 0 EOF, -1 timeout/error. */
static int read_full(int fd, void *buf, size_t len, int64_t deadline)
{
	size_t got = 0;
	while (got < len) {
		int left = (int)(deadline - now_ms());
		if (left <= 0)
			return -1;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, left) <= 0)
			continue;
		ssize_t n = recv(fd, (char *)buf + got, len - got, 0);
		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == ECONNRESET ? 0 : -1;
		}
		got += (size_t)n;
	}
	return 1;
}

static void send_msg(int fd, uint16_t type, const void *p, uint32_t len)
{
	struct hp_ctl_hdr h = {.magic = HP_CTL_MAGIC,
	                       .version = HP_CTL_VERSION,
	                       .type = type,
	                       .len = len};
	char buf[sizeof(h) + 4096];
	if (len > 4096)
		return;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), p, len);
	send_all(fd, buf, sizeof(h) + len);
}

/* Reads one ctl message; 1, 0 on EOF, -1 on timeout or garbage. */
static int recv_msg(int fd, struct hp_ctl_hdr *h, char *payload, size_t cap,
                    int64_t deadline, int *rfd)
{
	if (rfd) {
		/* The header travels with the descriptor, if any. */
		*rfd = -1;
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = {.iov_base = h, .iov_len = sizeof(*h)};
		struct msghdr mh = {.msg_iov = &iov,
		                    .msg_iovlen = 1,
		                    .msg_control = cbuf,
		                    .msg_controllen = sizeof(cbuf)};
		int left = (int)(deadline - now_ms());
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return -1;
		ssize_t n = recvmsg(fd, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC);
		if (n == 0)
			return 0;
		if (n != (ssize_t)sizeof(*h))
			return -1;
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		if (c && c->cmsg_type == SCM_RIGHTS)
			memcpy(rfd, CMSG_DATA(c), sizeof(int));
	} else {
		int r = read_full(fd, h, sizeof(*h), deadline);
		if (r <= 0)
			return r;
	}
	if (h->magic != HP_CTL_MAGIC || h->len > cap - 1)
		return -1;
	int r = read_full(fd, payload, h->len, deadline);
	if (r <= 0)
		return r;
	payload[h->len] = '\0';
	return 1;
}

/* What the daemon does within wait_ms: replies, then closed or open. */
static void report(int fd, int wait_ms)
{
	int64_t deadline = now_ms() + wait_ms;
	for (;;) {
		struct hp_ctl_hdr h;
		static char payload[HP_CTL_MAX_PAYLOAD + 1];
		int r = recv_msg(fd, &h, payload, sizeof(payload), deadline,
		                 NULL);
		if (r == 0) {
			printf("closed\n");
			return;
		}
		if (r < 0) {
			if (now_ms() >= deadline) {
				printf("open\n");
				return;
			}
			printf("garbage\n");
			return;
		}
		if (h.type == HP_CTL_ERROR || h.type == HP_CTL_STATUS_REPLY)
			printf("reply %u %s\n", h.type, payload);
		else
			printf("reply %u\n", h.type);
		fflush(stdout);
	}
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int session(int fd, int argc, char **argv)
{
	int32_t pids[64];
	const char *names[16];
	int np = 0, nn = 0, wait_ms = 5000;
	uint32_t flags = HP_SESS_RUNNING | HP_SESS_STARTUP, dumps = 1;
	for (int i = 0; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p") && np < 64)
			pids[np++] = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-n") && nn < 16)
			names[nn++] = argv[i + 1];
		else if (!strcmp(argv[i], "-f"))
			flags = (uint32_t)strtoul(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "-t"))
			wait_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-D"))
			dumps = (uint32_t)atoi(argv[i + 1]);
	}
	char buf[4096];
	struct hp_ctl_session s = {
	        .flags = flags, .npids = (uint32_t)np, .nnames = (uint32_t)nn};
	size_t off = sizeof(s);
	memcpy(buf, &s, sizeof(s));
	memcpy(buf + off, pids, (size_t)np * 4);
	off += (size_t)np * 4;
	for (int i = 0; i < nn; i++) {
		size_t l = strlen(names[i]) + 1;
		if (off + l > sizeof(buf))
			return 1;
		memcpy(buf + off, names[i], l);
		off += l;
	}
	send_msg(fd, HP_CTL_SESSION_START, buf, (uint32_t)off);
	int64_t deadline = now_ms() + wait_ms;
	for (;;) {
		struct hp_ctl_hdr h;
		static char payload[HP_CTL_MAX_PAYLOAD + 1];
		int cfd = -1;
		int r = recv_msg(fd, &h, payload, sizeof(payload), deadline,
		                 &cfd);
		if (r == 0) {
			printf("eof\n");
			return 0;
		}
		if (r < 0) {
			printf(now_ms() >= deadline ? "end\n" : "garbage\n");
			return 0;
		}
		switch (h.type) {
		case HP_CTL_SESSION_OK: {
			struct hp_ctl_session_ok ok;
			memcpy(&ok, payload, sizeof(ok));
			printf("session_ok %llu\n",
			       (unsigned long long)ok.session_id);
			break;
		}
		case HP_CTL_ERROR:
			printf("error %s\n", payload);
			break;
		case HP_CTL_TARGET: {
			struct hp_ctl_target t;
			memcpy(&t, payload, sizeof(t));
			t.name[sizeof(t.name) - 1] = '\0';
			t.text[sizeof(t.text) - 1] = '\0';
			printf("target %d %u %s: %s\n", t.pid, t.status, t.name,
			       t.text);
			break;
		}
		case HP_CTL_CLIENT: {
			struct hp_ctl_client c;
			memcpy(&c, payload, sizeof(c));
			printf("client %d flags %u from_startup %u fd %s\n",
			       c.pid, c.hello_flags, c.from_startup,
			       cfd >= 0 ? "yes" : "no");
			if (cfd >= 0) {
				struct hp_welcome w = {
				        .magic = HP_WIRE_MAGIC,
				        .version = HP_WIRE_VERSION,
				        .status = HP_WELCOME_NOT_TARGET};
				send(cfd, &w, sizeof(w), MSG_NOSIGNAL);
				close(cfd);
			}
			break;
		}
		case HP_CTL_DUMP_REQUEST: {
			struct hp_ctl_dump_request q;
			memcpy(&q, payload, sizeof(q));
			printf("dump_request %llu pid %d\n",
			       (unsigned long long)q.request_id, q.pid);
			struct hp_ctl_dump_done d = {.request_id = q.request_id,
			                             .dumps = dumps};
			send_msg(fd, HP_CTL_DUMP_DONE, &d, sizeof(d));
			break;
		}
		default:
			printf("message %u\n", h.type);
		}
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: ctlpoke SOCK COMMAND ARGS...\n");
		return 2;
	}
	const char *cmd = argv[2];
	int fd = connect_to(argv[1]);
	if (!strcmp(cmd, "raw") && argc >= 4) {
		const char *hex = argv[3];
		size_t n = strlen(hex) / 2;
		unsigned char *b = malloc(n + 1);
		for (size_t i = 0; i < n; i++)
			b[i] = (unsigned char)(hexval(hex[2 * i]) * 16 +
			                       hexval(hex[2 * i + 1]));
		send_all(fd, b, n);
		free(b);
		report(fd, argc > 4 ? atoi(argv[4]) : 3000);
		return 0;
	}
	if (!strcmp(cmd, "header") && argc >= 6) {
		struct hp_ctl_hdr h = {
		        .magic = HP_CTL_MAGIC,
		        .version = HP_CTL_VERSION,
		        .type = (uint16_t)atoi(argv[3]),
		        .len = (uint32_t)strtoul(argv[4], NULL, 0)};
		send_all(fd, &h, sizeof(h));
		size_t n = strtoul(argv[5], NULL, 0);
		char *z = calloc(1, n + 1);
		send_all(fd, z, n);
		free(z);
		report(fd, argc > 6 ? atoi(argv[6]) : 3000);
		return 0;
	}
	if (!strcmp(cmd, "silent") && argc >= 4) {
		int64_t t0 = now_ms();
		report(fd, atoi(argv[3]));
		fprintf(stderr, "after %lld ms\n", (long long)(now_ms() - t0));
		return 0;
	}
	if (!strcmp(cmd, "status")) {
		send_msg(fd, HP_CTL_STATUS, NULL, 0);
		report(fd, 3000);
		return 0;
	}
	if (!strcmp(cmd, "fd")) {
		int p[2];
		if (pipe(p))
			return 1;
		struct hp_ctl_hdr h = {.magic = HP_CTL_MAGIC,
		                       .version = HP_CTL_VERSION,
		                       .type = HP_CTL_STATUS};
		char cbuf[CMSG_SPACE(sizeof(int))];
		memset(cbuf, 0, sizeof(cbuf));
		struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
		struct msghdr mh = {.msg_iov = &iov,
		                    .msg_iovlen = 1,
		                    .msg_control = cbuf,
		                    .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &p[1], sizeof(int));
		if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(h))
			return 1;
		close(p[1]);
		report(fd, 3000);
		/* Only the daemon's copy of the write end can keep the pipe
		 * open now. */
		struct pollfd pp = {.fd = p[0], .events = POLLIN};
		int r = poll(&pp, 1, 2000);
		printf("passed fd %s\n", r == 1 && read(p[0], cbuf, 1) == 0
		                                 ? "closed by the daemon"
		                                 : "still open");
		return 0;
	}
	if (!strcmp(cmd, "hello") && argc >= 4) {
		struct hp_hello h = {
		        .magic = HP_WIRE_MAGIC,
		        .version = HP_WIRE_VERSION,
		        .layout_version = 1,
		        .flags = (uint32_t)strtoul(argv[3], NULL, 0),
		        .pid = getpid(),
		        .ppid = getppid()};
		send_all(fd, &h, sizeof(h));
		struct hp_welcome w;
		int r = read_full(fd, &w, sizeof(w), now_ms() + 3000);
		if (r == 1)
			printf("welcome %u\n", w.status);
		else
			printf(r == 0 ? "closed\n" : "no answer\n");
		return 0;
	}
	if (!strcmp(cmd, "session"))
		return session(fd, argc - 3, argv + 3);
	fprintf(stderr, "ctlpoke: bad command\n");
	return 2;
}
