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
 *   ctlpoke SOCK hello FLAGS [PID PPID] a client hello (claiming PID and
 *                                      PPID); print the welcome
 *   ctlpoke SOCK fds N                  STATUS carrying N descriptors of
 *                                      every kind (pipe, socket, directory,
 *                                      memfd, /dev/null); says how many the
 *                                      daemon kept open
 *   ctlpoke SOCK many N WAIT_MS         N connections at once, silent;
 *                                      after WAIT_MS: "connected C closed K"
 *                                      (K: closed by the daemon)
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
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../../src/layout/ctl_v1.h"
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

/* N silent connections; how many the daemon closed within wait_ms. */
static int many(const char *path, int n, int wait_ms)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int *fds = calloc((size_t)n, sizeof(int));
	struct pollfd *p = calloc((size_t)n, sizeof(*p));
	int connected = 0;
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		if (fd < 0 ||
		    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			if (fd >= 0)
				close(fd);
			fds[i] = -1;
			continue;
		}
		fds[i] = fd;
		connected++;
	}
	/* Closed by the daemon: EOF (or a reset) on our end. */
	int64_t deadline = now_ms() + wait_ms;
	int closed = 0;
	char *seen = calloc((size_t)n, 1);
	while (now_ms() < deadline && closed < connected) {
		int k = 0;
		for (int i = 0; i < n; i++)
			if (fds[i] >= 0 && !seen[i])
				p[k++] = (struct pollfd){.fd = fds[i],
				                         .events = POLLIN};
		int left = (int)(deadline - now_ms());
		if (poll(p, (nfds_t)k, left > 0 ? left : 0) <= 0)
			break;
		for (int j = 0; j < k; j++) {
			if (!p[j].revents)
				continue;
			char b;
			if (recv(p[j].fd, &b, 1, MSG_DONTWAIT) <= 0)
				for (int i = 0; i < n; i++)
					if (fds[i] == p[j].fd && !seen[i]) {
						seen[i] = 1;
						closed++;
					}
		}
	}
	printf("connected %d closed %d\n", connected, closed);
	return 0;
}

/* Descriptors of different kinds, for "fds". */
static int some_fd(int i)
{
	int sv[2];
	switch (i % 5) {
	case 0:
		return open("/dev/null", O_RDONLY | O_CLOEXEC);
	case 1:
		return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	case 2:
		return memfd_create("ctlpoke", MFD_CLOEXEC);
	case 3:
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			return -1;
		close(sv[1]);
		return sv[0];
	default:
		if (pipe2(sv, O_CLOEXEC))
			return -1;
		close(sv[0]);
		return sv[1];
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
	if (!strcmp(cmd, "many") && argc >= 5)
		return many(argv[1], atoi(argv[3]), atoi(argv[4]));
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
	if (!strcmp(cmd, "fds") && argc >= 4) {
		/* One message, many descriptors: the kernel passes at most
		 * SCM_MAX_FD (253) in one message. */
		int n = atoi(argv[3]);
		if (n < 1 || n > 253)
			return 2;
		int *fds = calloc((size_t)n, sizeof(int));
		for (int i = 0; i < n; i++)
			if ((fds[i] = some_fd(i)) < 0)
				return 1;
		struct hp_ctl_hdr h = {.magic = HP_CTL_MAGIC,
		                       .version = HP_CTL_VERSION,
		                       .type = HP_CTL_STATUS};
		size_t clen = CMSG_SPACE(sizeof(int) * (size_t)n);
		char *cbuf = calloc(1, clen);
		struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
		struct msghdr mh = {.msg_iov = &iov,
		                    .msg_iovlen = 1,
		                    .msg_control = cbuf,
		                    .msg_controllen = clen};
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
		if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(h)) {
			printf("sendmsg failed: %s\n", strerror(errno));
			return 1;
		}
		report(fd, 3000);
		return 0;
	}
	if (!strcmp(cmd, "hello") && argc >= 4) {
		struct hp_hello h = {
		        .magic = HP_WIRE_MAGIC,
		        .version = HP_WIRE_VERSION,
		        .layout_version = 1,
		        .flags = (uint32_t)strtoul(argv[3], NULL, 0),
		        .pid = argc >= 6 ? atoi(argv[4]) : getpid(),
		        .ppid = argc >= 6 ? atoi(argv[5]) : getppid()};
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
