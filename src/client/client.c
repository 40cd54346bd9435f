/*
 * Attaching to a collector.
 *
 * At startup the library constructor attaches to the collector named by
 * HEAPPROF_SOCKET (`heapprof record -- CMD`, the embedded collector), or,
 * without it (or when that collector is gone), probes the per-user daemon's
 * socket: one failing connect when no daemon runs.  The daemon answers
 * NOT_TARGET at once unless a session wants this process.
 *
 * Later, a running process is reached with HP_ATTACH_SIGNAL: its handler
 * connects to the daemon from the handler itself with async-signal-safe
 * system calls only, receives the region, maps it and turns recording on.
 * Modules are not scanned there (dl_iterate_phdr is not async-signal-
 * safe): the first new stack finds its PCs in no known module and scans
 * (modules.c).  The constructor takes the signal only when a session can
 * need it (install_attach_signal): a daemon answered at startup, and the
 * program left the signal at SIG_DFL.  Anywhere else the program keeps
 * the signal as it was, and a signal the process sends itself is not
 * for us either: the handler gives it its default action.
 *
 * A forked child stops profiling at once so it can never write into its
 * parent's region; with HP_CFG_FOLLOW_FORK it attaches anew with its own
 * region (see docs/ARCHITECTURE.md, "fork").
 *
 * Slots.  Regions live in hp_client.slots; hp_client.cur points at the one
 * new samples go to, and a hook loads it once per call.  A region that is
 * replaced is never unmapped while a hook might still use it: regions of
 * the current and of the previous attach stay mapped, and a new attach
 * unmaps those two attaches old.  (A hook is a bounded amount of work, so
 * a thread that loaded a pointer two whole attaches ago - each a round
 * trip with a collector - has long finished with it.)  GROW regions
 * (--block-client) belong to the attach they grew, chained by `prev`, and
 * frees look through that chain.  A fork child has one thread: it unmaps
 * everything.
 *
 * Each mapped region's memfd stays open, dup'ed to a descriptor >= 512
 * (close-on-exec), while its slot lives: `heapprof snapshot -p PID` finds
 * the regions of a running process through /proc/PID/fd without its
 * cooperation.  The program owns the descriptor table, so a kept
 * descriptor is closed only if it still is the region (same device and
 * inode): a program that closed every descriptor may have reused the
 * number.
 *
 * Named snapshots (heapprof_take_named_snapshot, include/heapprof/
 * heapprof.h) ask the collector over the session's connection; they share
 * the one-request-at-a-time flag with GROW.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "client/got.h"
#include "heapprof/heapprof.h"
#include "layout/paths.h"
#include "layout/wire_v1.h"

_Static_assert(HEAPPROF_SNAPSHOT_NAME_MAX + 1 == HP_SNAPSHOT_NAME_MAX,
               "snapshot name size");

HP_HIDDEN _Atomic int hp_active;
HP_HIDDEN _Atomic int hp_malloc_on = HP_MALLOC_EARLY;
HP_HIDDEN struct client_state hp_client = {.sock_fd = -1};
HP_HIDDEN __thread struct client_tls hp_tls
        __attribute__((tls_model("initial-exec")));

HP_HIDDEN void hooks_init(void);

/*
 * How long an attach waits for the collector's answer.  The command
 * `heapprof record` launched (its parent is the collector: the peer's pid
 * in SO_PEERCRED) waits as long as it takes a collector to answer, and
 * says on its stderr when it could not attach: the user asked for that
 * very command.  Any other new process (a child the program forks or
 * runs, followed or not, a process a daemon may want) waits at most
 * NEW_PROCESS_TIMEOUT_MS, silently: a stopped or busy collector must not
 * stall every process the program starts, nor write on their stderr.
 * A late attach (HP_ATTACH_SIGNAL) was asked for by the daemon.
 */
#define EMBEDDED_TIMEOUT_MS    10000
#define NEW_PROCESS_TIMEOUT_MS 100
#define DAEMON_TIMEOUT_MS      1000
/* attach_via's timeout_ms: EMBEDDED_TIMEOUT_MS when the collector is our
 * parent, else NEW_PROCESS_TIMEOUT_MS. */
#define TIMEOUT_BY_PARENT (-1)

enum { SLOT_FREE = 0, SLOT_CLAIMED = 1, SLOT_MAPPED = 2 };

/* The daemon's socket, computed once in the constructor (the handler
 * cannot call getenv safely).  Empty: no daemon path. */
static char daemon_path[108];
/* The collector this process attached through last (embedded socket or
 * the daemon): where a forked child says hello with --follow-fork. */
static char collector_path[108];
/* One attach at a time (constructor, signal handler, fork child); one
 * GROW at a time.  A late attach takes both. */
static _Atomic int attaching;
static _Atomic int growing;
static uint32_t attach_gen; /* last attach generation; under `attaching` */
/* attach_via got a connection (a collector or daemon was there), for the
 * constructor. */
static bool attach_connected;

void client_stop(struct client_slot *s, uint32_t reason)
{
	struct hp_header_v1 *h = s->region.hdr;
	atomic_store_explicit(&h->stop_reason, reason, memory_order_relaxed);
	atomic_store_explicit(&h->client_state, HP_STATE_STOPPED,
	                      memory_order_release);
	/* Only if no other session attached meanwhile. */
	int gen = (int)s->gen;
	atomic_compare_exchange_strong_explicit(&hp_malloc_on, &gen, 0,
	                                        memory_order_relaxed,
	                                        memory_order_relaxed);
	gen = (int)s->gen;
	if (atomic_compare_exchange_strong_explicit(&hp_active, &gen, 0,
	                                            memory_order_relaxed,
	                                            memory_order_relaxed))
		heaps_session_changed();
}

/* ---- talking to a collector (async-signal-safe) --------------------- */

static size_t str_len(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

/* Connects to path; the peer must run as our uid.  fd or -errno; the
 * peer's pid in *peer (if not NULL). */
static int connect_path_peer(const char *path, pid_t *peer)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = str_len(path);
	if (len == 0 || len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, len + 1);
	/* Non-blocking: a collector that is stopped with its backlog full
	 * makes a blocking connect wait for ever; this one fails at once
	 * (EAGAIN, taken as a timeout).  Blocking again once connected. */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int rc;
	do
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	while (rc != 0 && errno == EINTR);
	if (rc != 0) {
		int e = errno == EAGAIN ? -ETIMEDOUT : -errno;
		close(fd);
		return e;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
	    cred.uid != getuid()) {
		close(fd);
		return -EPERM;
	}
	if (peer)
		*peer = cred.pid;
	return fd;
}

static int connect_path(const char *path)
{
	return connect_path_peer(path, NULL);
}

/* The pid of the collector the last attach reached (0: none reached). */
static pid_t attach_peer;

/* The collector the last attach reached is our parent: it launched this
 * very command. */
static bool launched_by_collector(void)
{
	return attach_peer > 0 && attach_peer == getppid();
}

/* Where kept descriptors go (the connection, the regions' memfds): above
 * what programs usually use. */
#define KEEP_FD_MIN 512
/* The lowest number used: KEEP_FD_MIN, but see keep_min_injected. */
static int keep_fd_min = KEEP_FD_MIN;

/*
 * The program owns the descriptor table: it may close the connection's
 * number (daemons close every descriptor at startup) and reuse it for a
 * file or socket of its own.  So the connection is kept at a high number
 * where the limit allows (out of the way of the numbers a program gets
 * first), and its identity (a socket, its device and inode) is checked
 * before every use.  A connection found taken over is given up without a
 * read, a write or a close of that number, and counted (control_lost);
 * profiling goes on through the shared region, which needs no descriptor.
 */
/* Whether fd still is the file we kept there (its device and inode):
 * async-signal-safe, errno kept. */
static bool fd_same(int fd, uint64_t dev, uint64_t ino)
{
	int saved = errno;
	struct stat st;
	bool same = fd >= 0 && fstat(fd, &st) == 0 &&
	            (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino;
	errno = saved;
	return same;
}

static int sock_keep(int fd, uint64_t *dev, uint64_t *ino)
{
	int high = fcntl(fd, F_DUPFD_CLOEXEC, keep_fd_min);
	if (high >= 0) {
		close(fd);
		fd = high;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	*dev = (uint64_t)st.st_dev;
	*ino = (uint64_t)st.st_ino;
	return fd;
}

/* sock_fd if it still is our connection, else -1 (and it is given up). */
static int sock_ours(void)
{
	int fd = hp_client.sock_fd;
	if (fd < 0)
		return -1;
	if (atomic_load_explicit(&hp_sandboxed, memory_order_acquire)) {
		/* Under a seccomp filter the program installed: no system
		 * call on it any more (sandbox.c); not closed either. */
		hp_client.sock_fd = -1;
		return -1;
	}
	atomic_thread_fence(memory_order_acquire); /* sock_publish's order */
	if (fd_same(fd, hp_client.sock_dev, hp_client.sock_ino))
		return fd;
	hp_client.sock_fd = -1;
	struct client_slot *s = client_cur();
	if (s)
		region_count(&s->region, HP_CTR_CONTROL_LOST, 1);
	return -1;
}

/* Makes fd (from sock_keep) the connection; the one it replaces is closed
 * if it still is ours.  -1, identity, fd: a concurrent sock_ours sees -1
 * or the new pair. */
static void sock_publish(int fd, uint64_t dev, uint64_t ino)
{
	int old = sock_ours();
	hp_client.sock_fd = -1;
	atomic_thread_fence(memory_order_release);
	hp_client.sock_dev = dev;
	hp_client.sock_ino = ino;
	atomic_thread_fence(memory_order_release);
	hp_client.sock_fd = fd;
	if (old >= 0 && old != fd)
		close(old);
}

static int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_hello(int fd, uint32_t flags)
{
	struct hp_hello hello = {.magic = HP_WIRE_MAGIC,
	                         .version = HP_WIRE_VERSION,
	                         .layout_version = HP_LAYOUT_VERSION,
	                         .flags = flags,
	                         .pid = getpid(),
	                         .ppid = getppid()};
	return send_all(fd, &hello, sizeof(hello));
}

/* Waits until fd is readable or deadline (CLOCK_MONOTONIC ns) passes. */
static int wait_readable(int fd, uint64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	for (;;) {
		uint64_t now = hp_clock_ns(CLOCK_MONOTONIC);
		if (now >= deadline)
			return -ETIMEDOUT;
		uint64_t left = (deadline - now + 999999) / 1000000;
		int rc = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

/*
 * Receives one welcome and, when accepted, the region fd, within
 * timeout_ms (flags: MSG_DONTWAIT to only take one already there).  Extra
 * descriptors are closed.  0 or -errno (-EAGAIN: none there).
 */
static int recv_welcome(int fd, struct hp_welcome *w, int *region_fd,
                        int timeout_ms, int flags)
{
	*region_fd = -1;
	if (!(flags & MSG_DONTWAIT)) {
		int rc = wait_readable(fd, hp_clock_ns(CLOCK_MONOTONIC) +
		                                   (uint64_t)timeout_ms *
		                                           1000000ull);
		if (rc)
			return rc;
	}
	char cbuf[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = {.iov_base = w, .iov_len = sizeof(*w)};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = cbuf,
	                     .msg_controllen = sizeof(cbuf)};
	ssize_t n;
	do
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c;
	     c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int one;
			memcpy(&one, CMSG_DATA(c) + i * sizeof(int),
			       sizeof(int));
			if (*region_fd < 0)
				*region_fd = one;
			else
				close(one);
		}
	}
	if (n != (ssize_t)sizeof(*w) || w->magic != HP_WIRE_MAGIC ||
	    w->version != HP_WIRE_VERSION) {
		if (*region_fd >= 0)
			close(*region_fd);
		*region_fd = -1;
		return n == 0 ? -ECONNRESET : -EPROTO;
	}
	return 0;
}

/* ---- slots ---------------------------------------------------------- */

static struct client_slot *slot_claim(void)
{
	for (int i = 0; i < HP_CLIENT_SLOTS; i++) {
		uint32_t want = SLOT_FREE;
		if (atomic_compare_exchange_strong_explicit(
		            &hp_client.slots[i].state, &want, SLOT_CLAIMED,
		            memory_order_acquire, memory_order_relaxed)) {
			hp_client.slots[i].keep_fd = -1;
			return &hp_client.slots[i];
		}
	}
	return NULL;
}

/* Keeps a descriptor of region_fd in s (async-signal-safe).  Without one
 * (no descriptor >= 512 free, a low RLIMIT_NOFILE) only `heapprof
 * snapshot -p` cannot find the region. */
static void keep_region_fd(struct client_slot *s, int region_fd)
{
	s->keep_fd = -1;
	int fd = fcntl(region_fd, F_DUPFD_CLOEXEC, keep_fd_min);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return;
	}
	s->keep_dev = (uint64_t)st.st_dev;
	s->keep_ino = (uint64_t)st.st_ino;
	s->keep_fd = fd;
}

/* Closes s's kept descriptor if it still is the region (async-signal-
 * safe): a program may have closed it and opened something else under
 * that number. */
static void drop_region_fd(struct client_slot *s)
{
	int fd = s->keep_fd;
	s->keep_fd = -1;
	if (fd_same(fd, s->keep_dev, s->keep_ino))
		close(fd);
}

static void slot_release(struct client_slot *s)
{
	drop_region_fd(s);
	if (s->region.base)
		munmap(s->region.base, s->region.size);
	memset(&s->region, 0, sizeof(s->region));
	s->prev = NULL;
	atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
}

/* Maps a region fd into a claimed slot and caches its header. */
static int slot_map(struct client_slot *s, int region_fd, uint64_t size,
                    uint32_t gen)
{
	if (size < HP_REGION_MIN_SIZE)
		return -EPROTO;
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
	                  region_fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	int rc = region_bind(&s->region, base, size);
	/* The collector formats the version our hello asked for; this
	 * client writes v2 entries only. */
	if (!rc && s->region.version != HP_LAYOUT_VERSION)
		rc = -EPROTO;
	if (rc) {
		munmap(base, size);
		memset(&s->region, 0, sizeof(s->region));
		return rc;
	}
	region_populate_hot(&s->region);
	recorder_slot_setup(s, gen);
	keep_region_fd(s, region_fd);
	atomic_store_explicit(&s->state, SLOT_MAPPED, memory_order_release);
	return 0;
}

/* The client's half of the header at attach; the interval in use. */
static uint64_t header_attach(struct client_slot *s, uint64_t interval)
{
	struct hp_header_v1 *h = s->region.hdr;
	if (interval) {
		/* GROW: the new region goes on at the interval in use. */
		atomic_store_explicit(&h->current_interval, interval,
		                      memory_order_relaxed);
		if (s->region.heaps[0].flags & HP_HEAP_ENABLED)
			__atomic_store_n(&s->region.heaps[0].interval, interval,
			                 __ATOMIC_RELAXED);
	} else {
		interval = atomic_load_explicit(&h->current_interval,
		                                memory_order_relaxed);
		if (interval < s->base_interval || interval > s->max_interval)
			interval = s->base_interval;
	}
	h->pid = getpid();
	atomic_store_explicit(&h->attach_time_ns, hp_clock_ns(CLOCK_BOOTTIME),
	                      memory_order_relaxed);
	atomic_store_explicit(&h->client_state, HP_STATE_ACTIVE,
	                      memory_order_release);
	return interval;
}

static void set_interval(uint64_t interval)
{
	atomic_store_explicit(&hp_client.interval, interval,
	                      memory_order_relaxed);
	atomic_store_explicit(&hp_client.exact_from,
	                      interval == 1 ? 0 : interval,
	                      memory_order_relaxed);
}

/* Unmaps the regions of attaches older than the previous one. */
static void retire_old(uint32_t gen)
{
	for (int i = 0; i < HP_CLIENT_SLOTS; i++) {
		struct client_slot *s = &hp_client.slots[i];
		if (atomic_load_explicit(&s->state, memory_order_acquire) ==
		            SLOT_MAPPED &&
		    s->gen + 1 < gen)
			slot_release(s);
	}
}

/*
 * Says hello on path and, when accepted, maps the region and makes it the
 * current one.  Caller holds `attaching` (and `growing` when other threads
 * run).  Returns 0 attached, 1 not a target (or refused), or -errno.
 * Async-signal-safe unless scan is true.
 */
static int attach_on(int fd, const char *path, int timeout_ms, bool scan);

static int attach_via(const char *path, uint32_t hello_flags, int timeout_ms,
                      bool scan)
{
	attach_peer = 0;
	int fd = connect_path_peer(path, &attach_peer);
	if (fd < 0)
		return fd;
	if (timeout_ms == TIMEOUT_BY_PARENT)
		timeout_ms = launched_by_collector() ? EMBEDDED_TIMEOUT_MS
		                                     : NEW_PROCESS_TIMEOUT_MS;
	attach_connected = true;
	int rc = send_hello(fd, hello_flags);
	if (rc) {
		close(fd);
		return rc;
	}
	return attach_on(fd, path, timeout_ms, scan);
}

/*
 * The rest of an attach, once the hello is sent on fd (ours: closed or
 * kept): the welcome, the region, publishing.  path (NULL: none) is where
 * a forked child says hello.  Same returns as attach_via.
 */
static int attach_on(int fd, const char *path, int timeout_ms, bool scan)
{
	struct hp_welcome w;
	int region_fd = -1;
	int rc = recv_welcome(fd, &w, &region_fd, timeout_ms, 0);
	if (rc) {
		close(fd);
		return rc;
	}
	if (w.status != HP_WELCOME_ACCEPT) {
		if (region_fd >= 0)
			close(region_fd);
		close(fd);
		return 1; /* not for us: stay idle, quietly */
	}
	if (region_fd < 0) {
		close(fd);
		return -EPROTO;
	}
	struct client_slot *s = slot_claim();
	if (!s) {
		close(region_fd);
		close(fd);
		return -ENOSPC;
	}
	uint32_t gen = attach_gen + 1;
	if (gen > INT_MAX)
		gen = 1;
	rc = slot_map(s, region_fd, w.region_size, gen);
	close(region_fd);
	if (rc) {
		slot_release(s);
		close(fd);
		return rc;
	}
	attach_gen = gen;
	modules_init();
	unwind_init();
	uint64_t interval = header_attach(s, 0);
	heaps_publish(s);
	bool malloc_on = region_heap_interval(&s->region, "libc.malloc") != 0;
	if (scan)
		modules_scan(&s->region);

	/* Publish: the interval, then the region, then recording on. */
	uint64_t dev = 0, ino = 0;
	fd = sock_keep(fd, &dev, &ino);
	sock_publish(fd, dev, ino);
	if (path && path != collector_path) {
		size_t len = str_len(path);
		if (len < sizeof(collector_path))
			memcpy(collector_path, path, len + 1);
	}
	/* The blocks from before the constructor, when this is its attach
	 * (early.c): recorded before anything else can free them here. */
	early_replay(s, malloc_on);
	set_interval(interval);
	atomic_store_explicit(&hp_client.cur, s, memory_order_seq_cst);
	atomic_store_explicit(&hp_malloc_on, malloc_on ? (int)gen : 0,
	                      memory_order_release);
	atomic_store_explicit(&hp_active, (int)gen, memory_order_release);
	/* A heap registered while we published may have seen the old
	 * region: write the table again (entries already there stay). */
	heaps_publish(s);
	retire_old(gen);
	heaps_session_changed();
	return 0;
}

/* ---- late attach: HP_ATTACH_SIGNAL ---------------------------------- */

/* Profiled now, by a collector still connected (its end of the socket
 * not closed: a peek would block). */
static bool profiled_and_alive(void)
{
	struct client_slot *s = client_cur();
	if (!atomic_load_explicit(&hp_active, memory_order_acquire) || !s)
		return false;
	if (atomic_load_explicit(&s->region.hdr->control,
	                         memory_order_relaxed) == HP_CONTROL_STOP)
		return false;
	int fd = sock_ours();
	if (fd < 0)
		return true; /* given up (the program took its number): the
		              * session goes on through the region */
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0)
		return true;
	if (n == 0)
		return false; /* EOF: the collector is gone */
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

void client_check_session(void)
{
	int gen = atomic_load_explicit(&hp_active, memory_order_acquire);
	struct client_slot *s = client_cur();
	if (!gen || !s || s->gen != (uint32_t)gen)
		return;
	if (atomic_load_explicit(&s->region.hdr->control,
	                         memory_order_relaxed) == HP_CONTROL_STOP) {
		client_stop(s, HP_STOP_REQUESTED);
		return;
	}
	/* A connection the program closed is no sign of the collector. */
	int fd = sock_ours();
	if (fd < 0)
		return;
	int saved = errno;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	errno = saved;
	/* EOF on the connection this session attached through: an attach
	 * that replaced it (and may have let its number be reused) changed
	 * sock_fd or the generation first. */
	if (n == 0 && hp_client.sock_fd == fd &&
	    atomic_load_explicit(&hp_active, memory_order_acquire) == gen)
		client_stop(s, HP_STOP_COLLECTOR_GONE);
}

static void late_attach(void)
{
	if (profiled_and_alive()) {
		/* Tell the daemon (a second session is refused for us);
		 * it needs no answer. */
		int fd = connect_path(daemon_path);
		if (fd >= 0) {
			send_hello(fd, HP_HELLO_BUSY);
			close(fd);
		}
		return;
	}
	int zero = 0;
	if (!atomic_compare_exchange_strong_explicit(&growing, &zero, 1,
	                                             memory_order_acquire,
	                                             memory_order_relaxed))
		return; /* a GROW is under way on the old connection */
	attach_via(daemon_path, HP_HELLO_LATE, DAEMON_TIMEOUT_MS, false);
	atomic_store_explicit(&growing, 0, memory_order_release);
}

static void on_attach_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (atomic_load_explicit(&hp_sandboxed, memory_order_acquire))
		return; /* under the program's seccomp filter: no connect */
	int saved = errno;
	if (si && si->si_pid == getpid() &&
	    (si->si_code == SI_USER || si->si_code == SI_QUEUE ||
	     si->si_code == SI_TKILL)) {
		/* The program sent it itself (raise, kill, sigqueue): not a
		 * daemon's request.  Its default action, as without us: the
		 * signal is blocked in this handler, so the one sent again
		 * is taken, by SIG_DFL, when the handler returns. */
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		sigaction(sig, &dfl, NULL);
		raise(sig);
		errno = saved;
		return;
	}
	int zero = 0;
	/* A storm of signals (or one per thread) attaches once: whoever
	 * does not get the flag returns at once. */
	if (atomic_compare_exchange_strong_explicit(&attaching, &zero, 1,
	                                            memory_order_acquire,
	                                            memory_order_relaxed)) {
		if (daemon_path[0])
			late_attach();
		atomic_store_explicit(&attaching, 0, memory_order_release);
	}
	errno = saved;
}

/* ---- attached by the collector's injector (issue 21) ----------------- */

/* The end of its socket pair heapprof_internal_attach_begin keeps, and the
 * identity of both ends: the program's other threads run between the
 * two calls, and may close a number and reuse it. */
static int inj_fd = -1, inj_peer = -1;
static uint64_t inj_dev, inj_ino, inj_peer_dev, inj_peer_ino;

static void inj_drop(void)
{
	if (fd_same(inj_fd, inj_dev, inj_ino))
		close(inj_fd);
	if (fd_same(inj_peer, inj_peer_dev, inj_peer_ino))
		close(inj_peer);
	inj_fd = inj_peer = -1;
}

/*
 * Where the kept descriptors go in a process we were injected into.
 * Giving a descriptor a number past the end of a table that threads share
 * makes the kernel wait for an RCU grace period (expand_fdtable): 10 to
 * 15 ms measured in a 4-thread malloc storm, with the thread the
 * collector stopped waiting.  So a multi-threaded process whose table is
 * smaller than KEEP_FD_MIN gets them at the top of the table it has
 * ("FDSize:", the last 8 numbers), still out of the way of the numbers it
 * gets first; identity is checked before every use as for any kept
 * descriptor.
 */
static int keep_min_injected(void)
{
	const char *buf = proc_status_read();
	long size = buf ? proc_status_field(buf, "\nFDSize:") : -1;
	long threads = buf ? proc_status_field(buf, "\nThreads:") : -1;
	if (threads <= 1 || size < 16 || size >= KEEP_FD_MIN)
		return KEEP_FD_MIN;
	return (int)size - 8;
}

/* How long heapprof_internal_attach_finish waits for the welcome; the collector
 * sent it before the call. */
#define INJECT_WELCOME_MS 2000

/*
 * The first of the two calls the collector's injector makes here, on a
 * thread it stopped at a safe point (outside the allocator and the
 * loader): a socket pair, and our hello on one end.  Returns
 * (peer << 32) | ours; the collector takes the peer with pidfd_getfd,
 * answers the hello on it, and calls heapprof_internal_attach_finish.  Or
 * -errno: -EALREADY when a session that is still connected profiles this
 * process, -EBUSY when another attach is under way.  errno is kept.
 */
/*
 * The two calls' way in and out: `attaching` taken (-EBUSY if another
 * attach holds it), and cancellation disabled while they run: send, poll
 * and recvmsg are cancellation points, and a cancel pending in the thread
 * the collector chose stays pending for the program's own next one.
 */
static bool inj_enter(int *cancel)
{
	int zero = 0;
	if (!atomic_compare_exchange_strong_explicit(&attaching, &zero, 1,
	                                             memory_order_acquire,
	                                             memory_order_relaxed))
		return false;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, cancel);
	return true;
}

static void inj_leave(int cancel)
{
	atomic_store_explicit(&attaching, 0, memory_order_release);
	pthread_setcancelstate(cancel, NULL);
}

HP_EXPORT int64_t heapprof_internal_attach_begin(void)
{
	int saved = errno;
	int cancel;
	if (!inj_enter(&cancel)) {
		errno = saved;
		return -EBUSY;
	}
	int64_t ret;
	int sv[2];
	struct stat a, b;
	inj_drop(); /* a begin whose finish never came */
	if (profiled_and_alive()) {
		ret = -EALREADY;
	} else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		ret = -errno;
	} else if ((ret = send_hello(sv[0],
	                             HP_HELLO_LATE | HP_HELLO_INJECTED)) != 0 ||
	           fstat(sv[0], &a) != 0 || fstat(sv[1], &b) != 0) {
		ret = ret ? ret : -errno;
		close(sv[0]);
		close(sv[1]);
	} else {
		inj_fd = sv[0];
		inj_dev = (uint64_t)a.st_dev;
		inj_ino = (uint64_t)a.st_ino;
		inj_peer = sv[1];
		inj_peer_dev = (uint64_t)b.st_dev;
		inj_peer_ino = (uint64_t)b.st_ino;
		ret = ((int64_t)sv[1] << 32) | sv[0];
	}
	inj_leave(cancel);
	errno = saved;
	return ret;
}

/*
 * The second call: closes the peer's end here (the collector has its
 * copy), takes the welcome and the region as any attach does, and, in a
 * process we were injected into, routes the relocation slots (route.c).
 * fork_path (NULL: none) is where a forked child of a --follow-fork
 * session says hello.
 * Returns (objects << 32) | slots routing our functions, 0 for a
 * preloaded client (nothing to route), or -errno: -EBADF if the numbers
 * are no longer the pair begin made, -ECONNREFUSED if the collector
 * refused, -ENOEXEC if the slots could not be routed (the attach is
 * undone).
 */
HP_EXPORT int64_t heapprof_internal_attach_finish(int64_t ours, int64_t peer,
                                                  const char *fork_path)
{
	int saved = errno;
	int cancel;
	if (!inj_enter(&cancel)) {
		errno = saved;
		return -EBUSY;
	}
	int64_t ret = -EBADF;
	if (ours != inj_fd || peer != inj_peer ||
	    !fd_same(inj_fd, inj_dev, inj_ino)) {
		inj_drop();
		goto out;
	}
	if (fd_same(inj_peer, inj_peer_dev, inj_peer_ino))
		close(inj_peer);
	inj_fd = inj_peer = -1;
	/* Where a forked child says hello (--follow-fork): the collector's
	 * socket, or the daemon's; NULL: none (children run unprofiled). */
	if (fork_path && str_len(fork_path) >= sizeof(collector_path))
		fork_path = NULL;
	if (hooks_injected())
		keep_fd_min = keep_min_injected();
	int rc = attach_on((int)ours, fork_path, INJECT_WELCOME_MS, true);
	if (rc) {
		ret = rc < 0 ? rc : -ECONNREFUSED;
		goto out;
	}
	ret = 0;
	if (hooks_injected()) {
		struct got_stats st;
		if (route_all(&st) != 0) {
			struct client_slot *s = client_cur();
			if (s)
				client_stop(s, HP_STOP_INTERNAL);
			ret = -ENOEXEC;
			goto out;
		}
		ret = ((int64_t)st.objects << 32) | (st.patched + st.already);
	}
out:
	inj_leave(cancel);
	errno = saved;
	return ret;
}

/*
 * The end of a session, called by the collector's injector (attach.c,
 * detach_process) once the session has read the last of the regions: it
 * stops every other thread of the process and proves each is outside this
 * library (no frame of ours on its stack) before the call, and the thread
 * it calls on is at a safe point outside it too.  So no hook holds a
 * region: each is unmapped, its kept descriptor closed (if it still is
 * the region), and the connection closed, leaving the process's address
 * space and descriptor table as they were before the session (the
 * library's own pages aside).  Hooks find hp_active 0 when the threads
 * run again.  The custom heaps' disabled callbacks are not run here
 * (they are the program's code, and its other threads are stopped, maybe
 * holding a lock a callback takes); a heap's reports are ignored from
 * now on.  Returns the regions unmapped, or -EBUSY when an attach is
 * under way.  errno is kept.
 */
/* Where the collector's injector writes the timeout of a system call it
 * interrupted and issues again (a struct timespec: semtimedop,
 * rt_sigtimedwait, io_getevents), with what is left of it: the program's
 * own timespec is never written, and memory on the thread's stack could
 * be a signal handler's before the call reads it (inject.c,
 * cut_timeout).  Written by the injector only, read by the kernel. */
HP_EXPORT struct timespec heapprof_internal_reissue[8];

HP_EXPORT int64_t heapprof_internal_detach(void)
{
	int saved = errno;
	int cancel;
	if (!inj_enter(&cancel)) {
		errno = saved;
		return -EBUSY;
	}
	struct client_slot *cur = client_cur();
	if (cur && atomic_load_explicit(&hp_active, memory_order_acquire) &&
	    atomic_load_explicit(&cur->region.hdr->client_state,
	                         memory_order_relaxed) != HP_STATE_STOPPED) {
		atomic_store_explicit(&cur->region.hdr->stop_reason,
		                      HP_STOP_REQUESTED, memory_order_relaxed);
		atomic_store_explicit(&cur->region.hdr->client_state,
		                      HP_STATE_STOPPED, memory_order_release);
	}
	atomic_store_explicit(&hp_malloc_on, 0, memory_order_relaxed);
	atomic_store_explicit(&hp_active, 0, memory_order_release);
	atomic_store_explicit(&hp_client.cur, NULL, memory_order_release);
	int64_t n = 0;
	for (int i = 0; i < HP_CLIENT_SLOTS; i++) {
		struct client_slot *s = &hp_client.slots[i];
		if (atomic_load_explicit(&s->state, memory_order_acquire) ==
		    SLOT_MAPPED) {
			slot_release(s);
			n++;
		}
	}
	int fd = sock_ours();
	hp_client.sock_fd = -1;
	if (fd >= 0)
		close(fd);
	inj_drop();
	inj_leave(cancel);
	errno = saved;
	return n;
}

/* Whether this library is in the global scope (preloaded, or linked by
 * the program), by the loader's lookup of a name only we define on the
 * main program's handle: the program, what it loaded at startup and with
 * RTLD_GLOBAL.  (RTLD_DEFAULT would search our own local scope too.)  A
 * failed dlsym leaves an error for dlerror: taken back at once. */
static bool in_global_scope(void)
{
	void *main_h = dlopen(NULL, RTLD_NOW);
	void *f =
	        main_h ? dlsym(main_h, "heapprof_internal_attach_begin") : NULL;
	if (!f) {
		(void)dlerror();
		return false;
	}
	Dl_info theirs, mine;
	return dladdr(f, &theirs) && dladdr((void *)in_global_scope, &mine) &&
	       theirs.dli_fbase == mine.dli_fbase;
}

/*
 * Whether to take HP_ATTACH_SIGNAL.  Only the daemon sends it, to a
 * process that catches it: a session can need it only when a daemon was
 * there at startup (daemon_seen: it answered our hello, whatever it said).
 * A process started by `heapprof record -- CMD` attached to that
 * collector and asked no daemon; one started with no daemon running
 * keeps the signal as it was (and can be profiled from startup only).
 * HEAPPROF_ATTACH_SIGNAL=0: never; =1: always (a process started before
 * the daemon that should be reachable).  And never when the program has
 * the signal already (it is not SIG_DFL now: an inherited SIG_IGN, or a
 * handler of the program's).
 */
static void install_attach_signal(bool daemon_seen)
{
	const char *env = getenv("HEAPPROF_ATTACH_SIGNAL");
	if (env && env[0] == '0' && env[1] == '\0')
		return;
	if (!daemon_seen && !(env && env[0] == '1' && env[1] == '\0'))
		return;
	struct sigaction old;
	if (sigaction(HP_ATTACH_SIGNAL, NULL, &old) != 0)
		return;
	if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
		return;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_attach_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(HP_ATTACH_SIGNAL, &sa, NULL);
}

/* ---- GROW (--block-client) ------------------------------------------ */

/* After a GROW that timed out, the next one waits this long: a full
 * table must not stall every sample for block_timeout_ms. */
#define GROW_RETRY_NS 1000000000ull

struct client_slot *client_grow(struct client_slot *s, uint32_t table)
{
	uint64_t now = hp_clock_ns(CLOCK_MONOTONIC);
	if (now < atomic_load_explicit(&s->grow_after_ns, memory_order_relaxed))
		return NULL;
	int zero = 0;
	if (!atomic_compare_exchange_strong_explicit(&growing, &zero, 1,
	                                             memory_order_acquire,
	                                             memory_order_relaxed))
		return NULL; /* another thread is asking: drop as usual */
	struct client_slot *ns = NULL;
	struct client_slot *cur = client_cur();
	int fd = sock_ours();
	if (!cur || cur != s) {
		/* Someone grew, re-attached or detached since s was loaded. */
		ns = cur && cur->gen == s->gen ? cur : NULL;
		goto out;
	}
	if (fd < 0)
		goto out;
	struct hp_welcome w;
	int region_fd = -1;
	/* An answer to an earlier GROW that came after its timeout. */
	int rc = recv_welcome(fd, &w, &region_fd, 0, MSG_DONTWAIT);
	if (rc == -EAGAIN || rc == -EWOULDBLOCK ||
	    (rc == 0 && w.status != HP_WELCOME_ACCEPT)) {
		struct hp_client_msg m = {.magic = HP_WIRE_MAGIC,
		                          .type = HP_CMSG_GROW,
		                          .arg = table};
		rc = send_all(fd, &m, sizeof(m));
		if (!rc)
			rc = recv_welcome(fd, &w, &region_fd,
			                  (int)s->block_timeout_ms, 0);
	}
	if (rc || w.status != HP_WELCOME_ACCEPT || region_fd < 0) {
		if (region_fd >= 0)
			close(region_fd);
		/* No room (the collector said so, or the connection is
		 * gone): stop asking.  No answer in time: ask again later;
		 * a late answer is taken then. */
		uint64_t after =
		        rc == -ETIMEDOUT
		                ? hp_clock_ns(CLOCK_MONOTONIC) + GROW_RETRY_NS
		                : UINT64_MAX;
		atomic_store_explicit(&s->grow_after_ns, after,
		                      memory_order_relaxed);
		goto out;
	}
	ns = slot_claim();
	if (ns) {
		rc = slot_map(ns, region_fd, w.region_size, s->gen);
		if (rc) {
			slot_release(ns);
			ns = NULL;
		}
	}
	close(region_fd);
	if (!ns) {
		atomic_store_explicit(&s->grow_after_ns, UINT64_MAX,
		                      memory_order_relaxed);
		goto out;
	}
	recorder_slot_chain(ns, s);
	uint64_t interval =
	        atomic_load_explicit(&hp_client.interval, memory_order_relaxed);
	header_attach(ns, interval);
	heaps_publish(ns);
	atomic_store_explicit(&hp_client.cur, ns, memory_order_seq_cst);
	heaps_publish(ns);
out:
	atomic_store_explicit(&growing, 0, memory_order_release);
	return ns;
}

/* ---- named snapshots (heapprof.h) ------------------------------------ */

/* How long a snapshot waits for a GROW or another snapshot to finish,
 * and for the collector's answer. */
#define SNAP_BUSY_WAIT_MS 1000
#define SNAP_ANSWER_MS    30000

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* 1..HEAPPROF_SNAPSHOT_NAME_MAX bytes, no control characters: its length,
 * or 0. */
static size_t snapshot_name_len(const char *name)
{
	if (!name)
		return 0;
	size_t n = 0;
	for (; name[n]; n++) {
		unsigned char c = (unsigned char)name[n];
		if (n == HEAPPROF_SNAPSHOT_NAME_MAX || c < 0x20 || c == 0x7f)
			return 0;
	}
	return n;
}

/* The request on the session's connection; caller holds `growing`. */
static int snapshot_request(int fd, const char *name, size_t len)
{
	struct hp_welcome w;
	int region_fd;
	/* Answers already there are late ones, to a GROW that timed out
	 * (client_grow would have taken them at its next request). */
	while (recv_welcome(fd, &w, &region_fd, 0, MSG_DONTWAIT) == 0)
		if (region_fd >= 0)
			close(region_fd);

	struct {
		struct hp_client_msg m;
		char name[HP_SNAPSHOT_NAME_MAX];
	} req;
	req.m = (struct hp_client_msg){
	        .magic = HP_WIRE_MAGIC, .type = HP_CMSG_SNAPSHOT, .arg = len};
	memcpy(req.name, name, len);
	if (send_all(fd, &req, sizeof(req.m) + len) != 0)
		return -ENOTCONN;

	uint64_t deadline =
	        hp_clock_ns(CLOCK_MONOTONIC) + SNAP_ANSWER_MS * 1000000ull;
	for (;;) {
		uint64_t now = hp_clock_ns(CLOCK_MONOTONIC);
		if (now >= deadline)
			return -ETIMEDOUT;
		int left = (int)((deadline - now + 999999) / 1000000);
		int rc = recv_welcome(fd, &w, &region_fd, left, 0);
		if (rc == -ETIMEDOUT)
			return -ETIMEDOUT;
		if (rc == -ECONNRESET || rc == -EPIPE || rc == -ENOTCONN)
			return -ENOTCONN; /* the collector is gone */
		if (rc)
			return -EIO;
		if (region_fd >= 0 || w.answer_to != HP_CMSG_SNAPSHOT) {
			/* A late GROW answer: its region is not wanted
			 * now; ours comes after it. */
			if (region_fd >= 0)
				close(region_fd);
			continue;
		}
		return w.status == HP_WELCOME_ACCEPT ? 0 : -EIO;
	}
}

static int take_named_snapshot(const char *name)
{
	size_t len = snapshot_name_len(name);
	if (len == 0)
		return -EINVAL;
	int gen = atomic_load_explicit(&hp_active, memory_order_acquire);
	struct client_slot *s = client_cur();
	if (!gen || !s || s->gen != (uint32_t)gen || hp_client.sock_fd < 0 ||
	    atomic_load_explicit(&s->region.hdr->control,
	                         memory_order_relaxed) == HP_CONTROL_STOP)
		return -ENOTCONN;
	/* One request at a time on the connection (GROW, a late attach
	 * replacing it, another snapshot). */
	for (int waited = 0;; waited++) {
		int zero = 0;
		if (atomic_compare_exchange_strong_explicit(
		            &growing, &zero, 1, memory_order_acquire,
		            memory_order_relaxed))
			break;
		if (waited == SNAP_BUSY_WAIT_MS)
			return -EBUSY;
		sleep_ms(1);
	}
	int rc;
	int fd = sock_ours();
	if (fd < 0 ||
	    atomic_load_explicit(&hp_active, memory_order_acquire) != gen)
		rc = -ENOTCONN; /* ended while we waited */
	else
		rc = snapshot_request(fd, name, len);
	atomic_store_explicit(&growing, 0, memory_order_release);
	return rc;
}

HP_EXPORT int heapprof_take_named_snapshot(const char *name)
{
	int saved = errno;
	/* Nothing this thread does meanwhile is recorded (a signal handler
	 * that allocates while we wait is counted as re-entrant); a longjmp
	 * out of such a handler leaves a mark the next record clears. */
	int held = recorder_hold((uintptr_t)__builtin_frame_address(0),
	                         (uintptr_t)__builtin_return_address(0), true);
	int rc = take_named_snapshot(name);
	recorder_unhold(held);
	errno = saved;
	return rc;
}

/* ---- fork ----------------------------------------------------------- */

static const int fork_guard_const = 1;
HP_HIDDEN const volatile int *hp_fork_guard = &fork_guard_const;
static volatile int *fork_guard_page; /* NULL: no MADV_WIPEONFORK */

/* One private page that a fork child gets zeroed.  Before the first
 * attach (the constructor), so a region is never used unguarded. */
static void fork_guard_init(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t len = pg > 0 ? (size_t)pg : 4096;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
#ifdef MADV_WIPEONFORK
	if (madvise(p, len, MADV_WIPEONFORK) == 0) {
		fork_guard_page = p;
		*fork_guard_page = 1;
		hp_fork_guard = fork_guard_page;
		return;
	}
#endif
	munmap(p, len);
}

static void fork_child_reset(bool may_follow);
static void follow_fork(void);

/* Attached through HEAPPROF_SOCKET (`record -- CMD`): its collector is
 * told when the program starts a child it does not follow
 * (client_child_note). */
static bool collector_embedded;
static _Atomic bool child_noted;

/*
 * Without --follow-fork, before the program's first fork, vfork,
 * posix_spawn, system or popen (spawn.c): tell the collector, so the
 * report can say that work may have gone on in a child that was not
 * followed.  A FORK_CHILD hello from the parent itself (the collector
 * sees its pid in SO_PEERCRED), which the collector answers with
 * NOT_TARGET: connect, hello, answer, once per process (at most
 * NEW_PROCESS_TIMEOUT_MS).  Not under the program's seccomp filter (a connect
 * could be the system call that kills it).
 */
void client_child_note(void)
{
	if (!collector_embedded ||
	    atomic_load_explicit(&child_noted, memory_order_relaxed) ||
	    atomic_load_explicit(&hp_sandboxed, memory_order_acquire))
		return;
	struct client_slot *s = client_cur();
	if (!atomic_load_explicit(&hp_active, memory_order_acquire) || !s ||
	    (s->flags & HP_CFG_FOLLOW_FORK) ||
	    atomic_load_explicit(&s->region.hdr->control,
	                         memory_order_relaxed) == HP_CONTROL_STOP)
		return;
	if (atomic_exchange_explicit(&child_noted, true, memory_order_relaxed))
		return;
	int saved = errno;
	/* connect, send, poll, recvmsg are cancellation points, and fork
	 * is not: a cancel pending in this thread must not act inside the
	 * program's fork (the prepare handlers run before ours would never
	 * get their parent half).  It stays pending for the program's next
	 * cancellation point. */
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	int fd = connect_path_peer(collector_path, NULL);
	if (fd >= 0) {
		/* Waits for the answer (NOT_TARGET): the note is in before
		 * the session can end, a program that exits at once
		 * included. */
		struct hp_welcome w;
		int region_fd = -1;
		if (send_hello(fd, HP_HELLO_FORK_CHILD) == 0 &&
		    recv_welcome(fd, &w, &region_fd, NEW_PROCESS_TIMEOUT_MS,
		                 0) == 0 &&
		    region_fd >= 0)
			close(region_fd);
		close(fd);
	}
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
}

/* The guard stopped a child that --follow-fork wants, from a hook: the
 * attach waits for our atfork handler (a hook may have run first, in an
 * atfork handler registered before ours); a raw fork has none and stays
 * unprofiled. */
static bool follow_pending;

struct client_slot *client_forked_unseen(void)
{
	/* Only this thread exists in the child (a fork copies the caller
	 * alone), and it is at the start of a hook: no region pointer of
	 * ours is in use. */
	int saved = errno;
	fork_child_reset(false);
	errno = saved;
	return NULL;
}

static void on_fork_child(void)
{
	if (follow_pending && !client_cur()) {
		follow_pending = false;
		follow_fork();
		return;
	}
	fork_child_reset(true);
}

static void fork_child_reset(bool may_follow)
{
	/* This child's own copy of the guard page, zeroed by the fork: from
	 * now on this process is the one its attaches (--follow-fork, a late
	 * attach) are for. */
	if (fork_guard_page)
		*fork_guard_page = 1;
	/* The child shares the parent's region mappings; it must never
	 * write there.  Drop everything: the child has one thread, so no
	 * hook can be using a region. */
	struct client_slot *s = client_cur();
	bool profiled =
	        atomic_load_explicit(&hp_active, memory_order_relaxed) && s &&
	        atomic_load_explicit(&s->region.hdr->control,
	                             memory_order_relaxed) != HP_CONTROL_STOP;
	bool follow = profiled && (s->flags & HP_CFG_FOLLOW_FORK);
	atomic_store_explicit(&hp_active, 0, memory_order_relaxed);
	atomic_store_explicit(&hp_malloc_on, 0, memory_order_relaxed);
	atomic_store_explicit(&hp_client.cur, NULL, memory_order_relaxed);
	bool sandboxed =
	        atomic_load_explicit(&hp_sandboxed, memory_order_acquire);
	if (sandboxed) {
		/* Under the program's seccomp filter: no system call (no
		 * munmap, no close, no attach); the parent's region says
		 * why this child is not followed (a counter the parent also
		 * adds to, atomically). */
		if (follow && s)
			region_count(&s->root->region,
			             HP_CTR_SANDBOXED_CHILDREN, 1);
		for (int i = 0; i < HP_CLIENT_SLOTS; i++)
			atomic_store_explicit(&hp_client.slots[i].state,
			                      SLOT_FREE, memory_order_relaxed);
		follow = false;
	} else {
		/* (This also closes the parent's kept region descriptors:
		 * the child's own regions, if any, come with its own
		 * attach.) */
		for (int i = 0; i < HP_CLIENT_SLOTS; i++)
			if (atomic_load_explicit(&hp_client.slots[i].state,
			                         memory_order_relaxed) !=
			    SLOT_FREE)
				slot_release(&hp_client.slots[i]);
		int fd = sock_ours();
		if (fd >= 0)
			close(fd);
	}
	hp_client.sock_fd = -1;
	/* Flags held by threads that do not exist in the child. */
	atomic_store_explicit(&attaching, 0, memory_order_relaxed);
	atomic_store_explicit(&growing, 0, memory_order_relaxed);
	/* The child is another thread id; it has started no child yet. */
	atomic_store_explicit(&child_noted, false, memory_order_relaxed);
	collector_embedded = false;
	hp_tls.tid = 0;
	modules_reset_after_fork();
	heaps_after_fork_child();
	follow_pending = false;
	if (!follow || !collector_path[0])
		return;
	if (!may_follow) {
		follow_pending = true;
		return;
	}
	follow_fork();
}

/* --follow-fork: our own region from the same collector.  Modules are
 * scanned lazily, by the first new stack. */
static void follow_fork(void)
{
	int saved = errno;
	/* Inside the program's fork, which is no cancellation point: see
	 * client_child_note. */
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	atomic_store_explicit(&attaching, 1, memory_order_relaxed);
	attach_via(collector_path, HP_HELLO_FORK_CHILD, NEW_PROCESS_TIMEOUT_MS,
	           false);
	atomic_store_explicit(&attaching, 0, memory_order_release);
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
}

/* ---- constructor / destructor --------------------------------------- */

extern char **environ;

/* environ's "NAME=value" entry for name, or NULL. */
static char *env_entry(const char *name)
{
	size_t n = str_len(name);
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e;
	return NULL;
}

/*
 * The command `heapprof record` launched gets LD_PRELOAD (our entry first,
 * then the user's own, if any), HEAPPROF_SOCKET and
 * HEAPPROF_SECCOMP_FILTERS.  The program has no use for them, and seeing
 * them changes what it does (a program that copies its environment
 * allocates for them) and what it passes on: every child and every image
 * it execs would load the library and knock on the collector.  So, once
 * read, they go, unless the session follows forks or execs
 * (HEAPPROF_FOLLOW "1"), whose new images need them to say hello.  With
 * HEAPPROF_FOLLOW "exec" (record's default: its command followed through
 * exec, not its children) a copy is kept first, which exec.c puts back
 * for an exec of the process itself.  LD_PRELOAD keeps the user's
 * entries: ours (the first) is cut out of the string in place.
 *
 * This runs in the constructor, before main: the process has one thread
 * unless a library constructed before us started one, and nothing else
 * reads the environment meanwhile.  unsetenv does not allocate (it only
 * moves the pointers of environ), and the in-place edit of LD_PRELOAD
 * neither; the strings were the process's own from its start.
 */
static void env_scrub(void)
{
	const char *follow = getenv(HP_ENV_FOLLOW);
	bool own_exec = follow && strcmp(follow, HP_FOLLOW_OWN_EXEC) == 0;
	if (follow && *follow && !own_exec)
		return;
	char *pre = env_entry("LD_PRELOAD");
	if (pre) {
		char *v = pre + sizeof("LD_PRELOAD");
		size_t first = strcspn(v, ": ");
		const char *base = v;
		for (size_t i = 0; i < first; i++)
			if (v[i] == '/')
				base = v + i + 1;
		if (first && strncmp(base, "libheapprof", 11) == 0) {
			if (own_exec && first < PATH_MAX) {
				char lib[PATH_MAX];
				memcpy(lib, v, first);
				lib[first] = '\0';
				exec_keep(lib, getenv(HP_ENV_SOCKET),
				          getenv(HP_ENV_SECCOMP), follow);
			}
			const char *rest = v + first + strspn(v + first, ": ");
			if (*rest)
				memmove(v, rest, str_len(rest) + 1);
			else
				unsetenv("LD_PRELOAD");
		}
	}
	unsetenv(HP_ENV_SOCKET);
	unsetenv(HP_ENV_SECCOMP);
	unsetenv(HP_ENV_FOLLOW);
}

__attribute__((constructor)) static void client_init(void)
{
	int saved = errno;
	/* What the program allocated before this ran is kept (early.c);
	 * from here on, nothing of ours is (the lookups below included). */
	early_end();
	/* Loaded into a running process by the injector: under the
	 * loader's lock, in a thread the collector stopped.  Only what
	 * needs no collector; the attach is the collector's next call. */
	bool injected = !in_global_scope();
	if (injected)
		hooks_set_injected();
	hooks_init();
	spawn_init();
	sandbox_init();
	fork_guard_init();
	unwind_setup();
	/* What attaching needs and a signal handler cannot do: ready before
	 * any attach, also a late one. */
	memstat_init();
	pthread_atfork(client_child_note, NULL, on_fork_child);
	if (hp_daemon_paths(NULL, 0, daemon_path, sizeof(daemon_path)) != 0)
		daemon_path[0] = '\0';
	if (injected) {
		/* No attach from here, no signal taken: the program's
		 * dispositions are its own. */
		early_finish();
		errno = saved;
		return;
	}

	atomic_store_explicit(&attaching, 1, memory_order_relaxed);
	/* Our copy: env_scrub takes the variable out of environ. */
	char path[sizeof(collector_path)] = "";
	const char *env_path = getenv(HP_ENV_SOCKET);
	if (env_path && str_len(env_path) < sizeof(path))
		memcpy(path, env_path, str_len(env_path) + 1);
	int rc = -ENOENT;
	if (path[0] && sandbox_at_start()) {
		/* Started under a seccomp filter the program installed (an
		 * exec'd child of a sandboxed program): attaching could be
		 * the system call that kills it.  Unprofiled, silently. */
		env_scrub();
		early_finish();
		atomic_store_explicit(&attaching, 0, memory_order_release);
		errno = saved;
		return;
	}
	if (path[0]) {
		env_scrub();
		rc = attach_via(path, HP_HELLO_AT_STARTUP, TIMEOUT_BY_PARENT,
		                true);
		collector_embedded = rc == 0;
		/* A collector that is gone means its session ended (e.g. a
		 * grandchild started after `heapprof record` finished): stay
		 * quiet, the program's stderr is not ours to write to; and
		 * only the command record launched says anything at all. */
		if (rc < 0 && rc != -ENOENT && rc != -ECONNREFUSED &&
		    launched_by_collector())
			client_log(rc == -ETIMEDOUT || rc == -EPROTO ||
			                           rc == -ECONNRESET
			                   ? "attach failed, running unprofiled"
			                   : "cannot reach the collector, "
			                     "running unprofiled",
			           strerror(-rc));
	}
	bool daemon_seen = false;
	if ((rc == -ENOENT || rc == -ECONNREFUSED) && daemon_path[0] &&
	    access(daemon_path, F_OK) == 0) {
		/* No daemon is the common case: quiet, and one access() when
		 * none ever ran here (its socket file is missing).  A daemon
		 * that does not want us answers NOT_TARGET: quiet too. */
		attach_connected = false;
		attach_via(daemon_path, HP_HELLO_AT_STARTUP,
		           NEW_PROCESS_TIMEOUT_MS, true);
		daemon_seen = attach_connected;
	}
	/* An attach here replayed what came before it (attach_via); else
	 * it is dropped, and the hooks leave their early mode. */
	early_finish();
	atomic_store_explicit(&attaching, 0, memory_order_release);
	install_attach_signal(daemon_seen);
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
		int held = recorder_hold((uintptr_t)__builtin_frame_address(0),
		                         (uintptr_t)__builtin_return_address(0),
		                         true);
		memstat_take();
		recorder_unhold(held);
	}
	errno = saved;
}
