/*
 * Attaching to a collector.  The library constructor looks for
 * HEAPPROF_SOCKET; without it the library stays idle (every hook is one
 * predictable branch).  With it, the client says hello on the socket,
 * receives the region's memfd, maps it, records its modules and turns
 * hp_active on.  A forked child stops profiling at once so it can never
 * write into its parent's region (see docs/ARCHITECTURE.md, "fork").
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "layout/wire_v1.h"

HP_HIDDEN _Atomic int hp_active;
HP_HIDDEN struct client_state hp_client = {.sock_fd = -1};
HP_HIDDEN __thread struct client_tls hp_tls
        __attribute__((tls_model("initial-exec")));

HP_HIDDEN void hooks_init(void);

#define HELLO_TIMEOUT_MS 10000

static uint64_t boottime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void client_stop(uint32_t reason)
{
	atomic_store_explicit(&hp_active, 0, memory_order_relaxed);
	struct hp_header_v1 *h = hp_client.region.hdr;
	if (h) {
		atomic_store_explicit(&h->stop_reason, reason,
		                      memory_order_relaxed);
		atomic_store_explicit(&h->client_state, HP_STATE_STOPPED,
		                      memory_order_release);
	}
}

static void on_fork_child(void)
{
	/* The child shares the parent's region mapping; it must never write
	 * there.  Drop everything; the child runs unprofiled. */
	atomic_store_explicit(&hp_active, 0, memory_order_relaxed);
	if (hp_client.region.base) {
		munmap(hp_client.region.base, hp_client.region.size);
		memset(&hp_client.region, 0, sizeof(hp_client.region));
	}
	if (hp_client.sock_fd >= 0) {
		close(hp_client.sock_fd);
		hp_client.sock_fd = -1;
	}
}

static int wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	for (;;) {
		int rc = poll(&p, 1, timeout_ms);
		if (rc > 0)
			return 0;
		if (rc == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Receives the welcome and, when accepted, the region fd. */
static int recv_welcome(int fd, struct hp_welcome *w, int *region_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = w, .iov_len = sizeof(*w)};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = cbuf,
	                     .msg_controllen = sizeof(cbuf)};
	*region_fd = -1;
	int rc = wait_readable(fd, HELLO_TIMEOUT_MS);
	if (rc)
		return rc;
	ssize_t n;
	do
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*w))
		return n < 0 ? -errno : -EPROTO;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c;
	     c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(region_fd, CMSG_DATA(c), sizeof(int));
	if (w->magic != HP_WIRE_MAGIC || w->version != HP_WIRE_VERSION)
		return -EPROTO;
	return 0;
}

static int connect_collector(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

static int attach(int fd, struct hp_welcome *w)
{
	struct hp_hello hello = {.magic = HP_WIRE_MAGIC,
	                         .version = HP_WIRE_VERSION,
	                         .layout_version = HP_LAYOUT_VERSION,
	                         .flags = HP_HELLO_AT_STARTUP,
	                         .pid = getpid(),
	                         .ppid = getppid()};
	if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello))
		return -EPIPE;
	int region_fd;
	int rc = recv_welcome(fd, w, &region_fd);
	if (rc)
		return rc;
	if (w->status != HP_WELCOME_ACCEPT) {
		if (region_fd >= 0)
			close(region_fd);
		return 1; /* not for us: stay idle, quietly */
	}
	if (region_fd < 0 || w->region_size < HP_REGION_MIN_SIZE)
		return -EPROTO;
	void *base = mmap(NULL, w->region_size, PROT_READ | PROT_WRITE,
	                  MAP_SHARED, region_fd, 0);
	close(region_fd);
	if (base == MAP_FAILED)
		return -errno;
	rc = region_bind(&hp_client.region, base, w->region_size);
	if (rc) {
		munmap(base, w->region_size);
		return rc;
	}
	return 0;
}

__attribute__((constructor)) static void client_init(void)
{
	int saved = errno;
	hooks_init();
	const char *path = getenv(HP_ENV_SOCKET);
	if (!path || !*path)
		goto out;
	int fd = connect_collector(path);
	if (fd < 0) {
		/* A collector that is gone means its session ended (e.g. a
		 * grandchild started after `heapprof record` finished): stay
		 * quiet, the program's stderr is not ours to write to. */
		if (fd != -ENOENT && fd != -ECONNREFUSED)
			client_log("cannot reach the collector, running "
			           "unprofiled",
			           strerror(-fd));
		goto out;
	}
	struct hp_welcome w;
	int rc = attach(fd, &w);
	if (rc != 0) {
		if (rc < 0)
			client_log("attach failed, running unprofiled",
			           strerror(-rc));
		close(fd);
		goto out;
	}
	hp_client.sock_fd = fd;

	struct hp_header_v1 *h = hp_client.region.hdr;
	hp_client.interval = h->sampling_interval;
	hp_client.exact_from =
	        h->sampling_interval == 1 ? 0 : h->sampling_interval;
	hp_client.unwind_mode = h->unwind_mode;
	hp_client.max_frames = h->max_frames;
	h->pid = getpid();

	modules_init();
	unwind_init();
	memstat_init();
	modules_scan(&hp_client.region);
	pthread_atfork(NULL, NULL, on_fork_child);

	atomic_store_explicit(&h->attach_time_ns, boottime_ns(),
	                      memory_order_relaxed);
	atomic_store_explicit(&h->client_state, HP_STATE_ACTIVE,
	                      memory_order_release);
	atomic_store_explicit(&hp_active, 1, memory_order_release);
out:
	errno = saved;
}

/*
 * At exit (after main returns or exit()), record the process's memory for
 * the final dump.  Profiling goes on: later destructors may still free.
 */
__attribute__((destructor)) static void client_fini(void)
{
	int saved = errno;
	if (atomic_load_explicit(&hp_active, memory_order_acquire)) {
		hp_tls.in_hook++;
		memstat_take();
		hp_tls.in_hook--;
	}
	errno = saved;
}
