/*
 * trace_v1hello: plays an older client that speaks only layout version 1:
 * connects to $HEAPPROF_SOCKET (the embedded collector of `heapprof
 * record`), says hello with layout_version 1, maps the region it gets and
 * prints
 *   v1hello: status S layout L version V size N
 * (the welcome's status and layout_version, the region header's version,
 * the region's size), then exits, which ends the connection.  Exits 1 when
 * there is no socket or no answer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../../src/layout/layout_v1.h"
#include "../../../src/layout/wire_v1.h"

int main(void)
{
	const char *path = getenv(HP_ENV_SOCKET);
	if (!path ||
	    strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr, "trace_v1hello: no %s\n", HP_ENV_SOCKET);
		return 1;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("trace_v1hello: connect");
		return 1;
	}
	struct hp_hello h = {.magic = HP_WIRE_MAGIC,
	                     .version = HP_WIRE_VERSION,
	                     .layout_version = 1,
	                     .flags = HP_HELLO_AT_STARTUP,
	                     .pid = getpid(),
	                     .ppid = getppid()};
	if (send(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		perror("trace_v1hello: send");
		return 1;
	}
	struct hp_welcome w;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = cbuf,
	                     .msg_controllen = sizeof(cbuf)};
	if (recvmsg(fd, &msg, 0) != (ssize_t)sizeof(w)) {
		fprintf(stderr, "trace_v1hello: no welcome\n");
		return 1;
	}
	int rfd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c;
	     c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_type == SCM_RIGHTS)
			memcpy(&rfd, CMSG_DATA(c), sizeof(int));
	uint32_t version = 0;
	if (rfd >= 0 && w.region_size >= sizeof(struct hp_header_v1)) {
		struct hp_header_v1 *hdr = mmap(NULL, w.region_size, PROT_READ,
		                                MAP_SHARED, rfd, 0);
		if (hdr != MAP_FAILED) {
			version = hdr->version;
			munmap(hdr, w.region_size);
		}
		close(rfd);
	}
	printf("v1hello: status %u layout %u version %u size %llu\n", w.status,
	       w.layout_version, version, (unsigned long long)w.region_size);
	close(fd);
	return 0;
}
