/*
 * The collector's control socket and regions.  The socket lives in a
 * private 0700 directory; only peers of our own uid are answered.  Each
 * accepted process gets a fresh memfd, sized, formatted and sealed against
 * shrinking (a client that truncated it could otherwise crash us with
 * SIGBUS), mapped by us and passed to the client with SCM_RIGHTS.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "collector/collector.h"
#include "layout/wire_v1.h"

#define HELLO_TIMEOUT_MS 2000

uint64_t boottime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t collector_default_shmem(uint64_t interval)
{
	/* Pages are only committed when touched; with interval 1 every live
	 * block needs a slot, so reserve more address space. */
	return interval == 1 ? 512ull << 20 : 64ull << 20;
}

int collector_open(struct collector *c, const struct collector_opts *o)
{
	memset(c, 0, sizeof(*c));
	c->listen_fd = -1;
	c->opts = *o;
	if (!c->opts.shmem_size)
		c->opts.shmem_size = collector_default_shmem(o->interval);
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp || strlen(tmp) > 40)
		tmp = "/tmp";
	snprintf(c->dir, sizeof(c->dir), "%s/heapprof-XXXXXX", tmp);
	if (!mkdtemp(c->dir)) {
		int e = errno;
		fprintf(stderr, "heapprof: collector: cannot create %s: %s\n",
		        c->dir, strerror(e));
		c->dir[0] = '\0';
		return -e;
	}
	snprintf(c->path, sizeof(c->path), "%s/ctl", c->dir);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, c->path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 64) != 0) {
		int e = errno;
		fprintf(stderr,
		        "heapprof: collector: cannot listen on %s: %s\n",
		        c->path, strerror(e));
		close(fd);
		return -e;
	}
	c->listen_fd = fd;
	return 0;
}

static int make_region(struct collector *c, struct target *t)
{
	int fd = memfd_create("heapprof-region",
	                      MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	uint64_t size = c->opts.shmem_size;
	if (ftruncate(fd, (off_t)size) != 0)
		goto fail;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
	    0)
		goto fail;
	void *base =
	        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		goto fail;
	struct hp_config cfg = {.sampling_interval = c->opts.interval,
	                        .unwind_mode = c->opts.unwind_mode,
	                        .max_frames = c->opts.max_frames,
	                        .session_id = 1,
	                        .heap_enable_mask = 1};
	int rc = region_format(base, size, &cfg);
	if (!rc)
		rc = region_bind(&t->region, base, size);
	if (rc) {
		munmap(base, size);
		close(fd);
		return rc;
	}
	t->base = base;
	t->size = size;
	return fd;
fail:;
	int e = -errno;
	close(fd);
	return e;
}

static int send_welcome(int fd, uint32_t status, uint64_t size, int region_fd)
{
	struct hp_welcome w = {.magic = HP_WIRE_MAGIC,
	                       .version = HP_WIRE_VERSION,
	                       .status = status,
	                       .layout_version = HP_LAYOUT_VERSION,
	                       .region_size = size};
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (region_fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &region_fd, sizeof(int));
	}
	ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	return n == (ssize_t)sizeof(w) ? 0 : -EPIPE;
}

static int read_hello(int fd, struct hp_hello *h)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t got = 0;
	while (got < sizeof(*h)) {
		int rc = poll(&p, 1, HELLO_TIMEOUT_MS);
		if (rc == 0)
			return -ETIMEDOUT;
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		ssize_t n = recv(fd, (char *)h + got, sizeof(*h) - got, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	if (h->magic != HP_WIRE_MAGIC || h->version != HP_WIRE_VERSION)
		return -EPROTO;
	return 0;
}

int collector_accept(struct collector *c, collector_want_fn want, void *ctx,
                     const char *name, const char *cmdline)
{
	int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct hp_hello hello;
	int rc = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
	if (rc != 0 || cred.uid != getuid()) {
		close(fd);
		return -EPERM;
	}
	rc = read_hello(fd, &hello);
	if (rc) {
		close(fd);
		return rc;
	}
	if (!want(ctx, cred.pid) || c->ntargets == COLLECTOR_MAX_TARGETS ||
	    hello.layout_version < HP_LAYOUT_VERSION) {
		send_welcome(fd, HP_WELCOME_NOT_TARGET, 0, -1);
		close(fd);
		return 0;
	}
	struct target *t = &c->targets[c->ntargets];
	memset(t, 0, sizeof(*t));
	int region_fd = make_region(c, t);
	if (region_fd < 0) {
		fprintf(stderr,
		        "heapprof: collector: cannot create a %llu-byte region "
		        "for pid %d: %s\n",
		        (unsigned long long)c->opts.shmem_size, cred.pid,
		        strerror(-region_fd));
		send_welcome(fd, HP_WELCOME_ERROR, 0, -1);
		close(fd);
		return region_fd;
	}
	rc = send_welcome(fd, HP_WELCOME_ACCEPT, t->size, region_fd);
	close(region_fd);
	if (rc) {
		munmap(t->base, t->size);
		close(fd);
		return rc;
	}
	t->pid = cred.pid;
	t->fd = fd;
	t->start_ts = boottime_ns();
	c->ntargets++;
	struct prof_process info = {
	        .pid = cred.pid,
	        .name = name,
	        .cmdline = cmdline,
	        .sampling_interval = c->opts.interval,
	        .unwind = c->opts.unwind_mode == HP_UNWIND_FP ? "fp" : "dwarf",
	        .max_frames = c->opts.max_frames,
	        .shmem_size = t->size,
	        .from_startup = 1,
	        .start_ts_ns = t->start_ts,
	};
	return profile_begin_process(c->profile, &info, &t->upid);
}

void collector_poll_client(struct collector *c, struct target *t)
{
	char buf[256];
	ssize_t n = recv(t->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		/* Exit or exec closed the connection; the region stays
		 * readable in our mapping. */
		close(t->fd);
		t->fd = -1;
		t->disconnected = true;
	}
	/* v1 clients send nothing after the hello; extra bytes are ignored. */
}

int collector_dump_all(struct collector *c, const char *reason)
{
	int rc = 0;
	uint64_t ts = boottime_ns();
	for (size_t i = 0; i < c->ntargets; i++) {
		struct snapshot s;
		int r = snapshot_take(&c->targets[i].region, &s);
		if (r) {
			rc = r;
			continue;
		}
		s.dump.ts_ns = ts;
		s.dump.reason = reason;
		snapshot_memory(&c->targets[i].region, c->targets[i].pid,
		                !c->targets[i].disconnected, &s.dump.memory);
		r = profile_write_dump(c->profile, c->targets[i].upid, &s.dump);
		if (r)
			rc = r;
		snapshot_free(&s);
	}
	return rc;
}

void collector_close(struct collector *c)
{
	for (size_t i = 0; i < c->ntargets; i++) {
		if (c->targets[i].fd >= 0)
			close(c->targets[i].fd);
		if (c->targets[i].base)
			munmap(c->targets[i].base, c->targets[i].size);
	}
	c->ntargets = 0;
	if (c->listen_fd >= 0)
		close(c->listen_fd);
	c->listen_fd = -1;
	if (c->path[0])
		unlink(c->path);
	if (c->dir[0])
		rmdir(c->dir);
	c->path[0] = c->dir[0] = '\0';
}
