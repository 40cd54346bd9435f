/*
 * The client's attach paths end to end, against a fake daemon: this test
 * listens on $XDG_RUNTIME_DIR/heapprof/heapprofd.sock (a temporary dir),
 * starts itself again as a child with LD_PRELOAD=<build>/libheapprof.so
 * and drives it through a pipe.  It checks the startup probe (hello flags,
 * NOT_TARGET, ACCEPT), late attach by HP_ATTACH_SIGNAL (LATE hello, region
 * mapped from the handler, modules scanned lazily so the leaf PC still
 * resolves to the right function), BUSY while profiled, a new session
 * after STOP, a storm of signals, the handler's installation rules,
 * --follow-fork and the peer uid check.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "layout/region.h"
#include "layout/wire_v1.h"
#include "unit.h"

#define NOINLINE __attribute__((noinline, noclone))

/* ---- the child: commands on stdin, "ok" on stdout -------------------- */

static void *a1_blocks[10], *a2_blocks[20];
static volatile unsigned long sink;

NOINLINE void phase_a1(void)
{
	for (int i = 0; i < 10; i++) {
		a1_blocks[i] = malloc(1000);
		memset(a1_blocks[i], 1, 1000);
		sink += ((unsigned char *)a1_blocks[i])[999];
	}
}

NOINLINE void phase_a2(void)
{
	for (int i = 0; i < 20; i++) {
		a2_blocks[i] = malloc(500);
		memset(a2_blocks[i], 2, 500);
		sink += ((unsigned char *)a2_blocks[i])[499];
	}
	for (int i = 0; i < 5; i++) {
		free(a2_blocks[i]);
		a2_blocks[i] = NULL;
	}
}

NOINLINE void fork_child_alloc(void)
{
	static void *p[7];
	for (int i = 0; i < 7; i++) {
		p[i] = malloc(700);
		memset(p[i], 3, 700);
		sink += ((unsigned char *)p[i])[699];
	}
}

#define MANY 30000
static void *many[MANY];

NOINLINE void many_alloc(void)
{
	for (int i = 0; i < MANY; i++) {
		many[i] = malloc(16);
		sink += (uintptr_t)many[i];
	}
}

/* "threads": 4 threads malloc and free in a loop until "stop"; each
 * frees everything it allocated before it ends. */
enum { NTHREADS = 4 };
static pthread_t workers[NTHREADS];
static _Atomic int workers_stop;

NOINLINE void *worker_loop(void *arg)
{
	uintptr_t seed = (uintptr_t)arg * 2654435761u + 1;
	void *held[64] = {0};
	while (!atomic_load(&workers_stop)) {
		for (int i = 0; i < 64; i++) {
			seed = seed * 6364136223846793005ull + 1;
			free(held[i]);
			held[i] = malloc(16 + (seed >> 40) % 2000);
		}
	}
	for (int i = 0; i < 64; i++)
		free(held[i]);
	return NULL;
}

NOINLINE void child_other(void)
{
	sink++;
}

static int read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;
	while (n + 1 < len) {
		char c;
		ssize_t r = read(fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (c == '\n')
			break;
		buf[n++] = c;
	}
	buf[n] = '\0';
	return 0;
}

static void say(const char *s)
{
	size_t n = strlen(s);
	while (n) {
		ssize_t w = write(1, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(9);
		s += w;
		n -= (size_t)w;
	}
}

static int child_main(void)
{
	char line[64];
	while (read_line(0, line, sizeof(line)) == 0) {
		if (!strcmp(line, "a1")) {
			phase_a1();
		} else if (!strcmp(line, "a2")) {
			phase_a2();
		} else if (!strcmp(line, "f1")) {
			for (int i = 0; i < 10; i++)
				free(a1_blocks[i]);
		} else if (!strcmp(line, "many")) {
			many_alloc();
		} else if (!strcmp(line, "freemany")) {
			for (int i = 0; i < MANY; i++)
				free(many[i]);
		} else if (!strcmp(line, "threads")) {
			for (int i = 0; i < NTHREADS; i++)
				pthread_create(&workers[i], NULL, worker_loop,
				               (void *)(uintptr_t)(i + 1));
		} else if (!strcmp(line, "stop")) {
			atomic_store(&workers_stop, 1);
			for (int i = 0; i < NTHREADS; i++)
				pthread_join(workers[i], NULL);
		} else if (!strcmp(line, "fork")) {
			pid_t p = fork();
			if (p == 0) {
				fork_child_alloc();
				_exit(0);
			}
			int st;
			while (waitpid(p, &st, 0) < 0 && errno == EINTR)
				;
		} else {
			child_other();
		}
		say("ok\n");
	}
	return 0;
}

/* ---- the parent: a fake daemon ---------------------------------------- */

static char xdg[256], sock_path[PATH_MAX], lib_path[PATH_MAX];

static int fake_listen(void)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/heapprof", xdg);
	mkdir(dir, 0700);
	snprintf(sock_path, sizeof(sock_path), "%s/heapprof/%s", xdg,
	         HP_DAEMON_SOCK_NAME);
	unlink(sock_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, sock_path);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(listen(fd, 64) == 0);
	return fd;
}

static int wait_in(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int rc;
	do
		rc = poll(&p, 1, ms);
	while (rc < 0 && errno == EINTR);
	return rc > 0;
}

/* Accepts one client within ms and reads its hello.  fd or -1. */
static int accept_hello(int lfd, int ms, struct hp_hello *h)
{
	if (!wait_in(lfd, ms))
		return -1;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got < sizeof(*h)) {
		if (!wait_in(fd, 2000))
			break;
		ssize_t n = read(fd, (char *)h + got, sizeof(*h) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got != sizeof(*h) || h->magic != HP_WIRE_MAGIC) {
		close(fd);
		return -1;
	}
	return fd;
}

static void send_welcome(int fd, uint32_t status, uint64_t size, int region_fd)
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
	CHECK(sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof(w));
}

struct fake_region {
	void *base;
	uint64_t size;
	struct hp_region r;
};

/* Answers ACCEPT with a fresh region formatted with cfg. */
static void give_region(int fd, struct hp_config *cfg, struct fake_region *fr)
{
	fr->size = 8 << 20;
	int mfd = memfd_create("test-region", MFD_CLOEXEC);
	CHECK(ftruncate(mfd, (off_t)fr->size) == 0);
	fr->base = mmap(NULL, fr->size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd,
	                0);
	CHECK(fr->base != MAP_FAILED);
	if (!cfg->max_frames)
		cfg->max_frames = 64;
	if (!cfg->sampling_interval)
		cfg->sampling_interval = 1;
	CHECK(region_format(fr->base, fr->size, cfg) == 0);
	CHECK(region_bind(&fr->r, fr->base, fr->size) == 0);
	send_welcome(fd, HP_WELCOME_ACCEPT, fr->size, mfd);
	close(mfd);
}

static void drop_region(struct fake_region *fr)
{
	if (fr->base)
		munmap(fr->base, fr->size);
	fr->base = NULL;
}

struct child {
	pid_t pid;
	int in, out; /* its stdin (we write), its stdout (we read) */
};

/* Starts this binary as a child under the library; extra: one more
 * "NAME=VALUE" for its environment, or NULL. */
static void child_start(struct child *c, const char *extra, bool ignore_sig)
{
	int pin[2], pout[2];
	CHECK(pipe2(pin, O_CLOEXEC) == 0 && pipe2(pout, O_CLOEXEC) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		char e1[PATH_MAX + 16], e2[PATH_MAX + 32];
		snprintf(e1, sizeof(e1), "LD_PRELOAD=%s", lib_path);
		snprintf(e2, sizeof(e2), "XDG_RUNTIME_DIR=%s", xdg);
		char *env[] = {e1, e2, (char *)extra, NULL};
		char *argv[] = {"test_client_attach", "--child", NULL};
		if (ignore_sig)
			signal(HP_ATTACH_SIGNAL, SIG_IGN);
		execve("/proc/self/exe", argv, env);
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	c->pid = pid;
	c->in = pin[1];
	c->out = pout[0];
}

/* Sends a command and waits (bounded) for its "ok". */
static bool child_do(struct child *c, const char *cmd)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%s\n", cmd);
	if (write(c->in, buf, strlen(buf)) != (ssize_t)strlen(buf))
		return false;
	if (!wait_in(c->out, 10000))
		return false;
	size_t n = 0;
	while (n < 3) {
		ssize_t r = read(c->out, buf + n, 3 - n);
		if (r <= 0)
			return false;
		n += (size_t)r;
	}
	return memcmp(buf, "ok\n", 3) == 0;
}

static int child_end(struct child *c)
{
	close(c->in);
	close(c->out);
	int st = 0;
	for (int i = 0; i < 1000; i++) {
		pid_t r = waitpid(c->pid, &st, WNOHANG);
		if (r == c->pid)
			return WIFEXITED(st) ? WEXITSTATUS(st)
			                     : 128 + WTERMSIG(st);
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	kill(c->pid, SIGKILL);
	waitpid(c->pid, &st, 0);
	return -1;
}

/* /proc/PID/status: whether the attach signal is caught / ignored. */
static int sig_state(pid_t pid, const char *field)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int r = -1;
	size_t fl = strlen(field);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':') {
			unsigned long long m =
			        strtoull(line + fl + 1, NULL, 16);
			r = (int)((m >> (HP_ATTACH_SIGNAL - 1)) & 1);
		}
	fclose(f);
	return r;
}

/* ---- reading what the child recorded ---------------------------------- */

static const struct {
	const char *name;
	void (*fn)(void);
} funcs[] = {{"phase_a1", phase_a1},
             {"phase_a2", phase_a2},
             {"fork_child_alloc", fork_child_alloc},
             {"many_alloc", many_alloc},
             {"child_other", child_other}};

/* Our own functions' offsets from our load base: the child is the same
 * binary, so its PCs minus its module base must land on the same
 * offsets. */
static const char *leaf_name(const struct hp_region *r, uint64_t pc)
{
	uint64_t used = atomic_load(&r->hdr->modules_used);
	Dl_info self;
	if (!dladdr((void *)phase_a1, &self))
		return NULL;
	for (uint64_t i = 0; i < used && i < r->modules_cap; i++) {
		const struct hp_module_v1 *m = &r->modules[i];
		if (pc < m->start || pc >= m->end)
			continue;
		uint64_t off = pc - m->base;
		const char *best = NULL;
		uint64_t best_off = 0;
		for (size_t f = 0; f < sizeof(funcs) / sizeof(funcs[0]); f++) {
			uint64_t fo = (uintptr_t)funcs[f].fn -
			              (uintptr_t)self.dli_fbase;
			if (fo <= off && (!best || fo > best_off)) {
				best = funcs[f].name;
				best_off = fo;
			}
		}
		/* Within a few hundred bytes of the start: the function. */
		return best && off - best_off < 512 ? best : "?";
	}
	return NULL; /* in no module: not symbolizable */
}

struct leaf_sum {
	uint64_t allocs, alloc_bytes, frees, free_bytes;
	uint64_t unresolved; /* stacks whose leaf is in no module */
};

static void sum_leaf(const struct hp_region *r, const char *name,
                     struct leaf_sum *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t used = atomic_load(&r->hdr->stacks_used);
	for (uint64_t id = 1; id < used && id < r->stacks_cap; id++) {
		const struct hp_stack_v1 *s = &r->stacks[id];
		if (!atomic_load(&s->ready) || s->nframes == 0 ||
		    !atomic_load(&s->alloc_count))
			continue;
		const char *leaf = leaf_name(r, r->frames[s->frames_off]);
		if (!leaf) {
			out->unresolved++;
			continue;
		}
		if (strcmp(leaf, name) != 0)
			continue;
		out->allocs += atomic_load(&s->alloc_count);
		out->alloc_bytes += atomic_load(&s->alloc_bytes);
		out->frees += atomic_load(&s->free_count);
		out->free_bytes += atomic_load(&s->free_bytes);
	}
}

/* ---- tests ------------------------------------------------------------ */

/* Startup probe: AT_STARTUP hello with our pids; NOT_TARGET leaves the
 * child idle; the handler is installed anyway. */
static void test_startup_not_target(void)
{
	int lfd = fake_listen();
	struct child c;
	child_start(&c, NULL, false);
	struct hp_hello h;
	int fd = accept_hello(lfd, 5000, &h);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ_U64(h.flags, HP_HELLO_AT_STARTUP);
		CHECK_EQ_U64(h.pid, c.pid);
		CHECK_EQ_U64(h.ppid, getpid());
		CHECK_EQ_U64(h.layout_version, HP_LAYOUT_VERSION);
		send_welcome(fd, HP_WELCOME_NOT_TARGET, 0, -1);
		/* The client closes after NOT_TARGET. */
		CHECK(wait_in(fd, 5000));
		char b;
		CHECK(read(fd, &b, 1) == 0);
		close(fd);
	}
	CHECK(child_do(&c, "a1"));
	CHECK_EQ_U64(sig_state(c.pid, "SigCgt"), 1);
	CHECK_EQ_U64(child_end(&c), 0);
	close(lfd);
}

/* No daemon at all: the child runs, silently. */
static void test_no_daemon(void)
{
	unlink(sock_path);
	struct child c;
	child_start(&c, NULL, false);
	CHECK(child_do(&c, "a1"));
	CHECK(child_do(&c, "a2"));
	CHECK_EQ_U64(child_end(&c), 0);
}

/* HEAPPROF_SOCKET naming a collector that is gone: the daemon is asked. */
static void test_stale_socket_falls_back(void)
{
	int lfd = fake_listen();
	struct child c;
	char env[PATH_MAX + 32];
	snprintf(env, sizeof(env), "%s=%s/gone.sock", HP_ENV_SOCKET, xdg);
	child_start(&c, env, false);
	struct hp_hello h;
	int fd = accept_hello(lfd, 5000, &h);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ_U64(h.flags, HP_HELLO_AT_STARTUP);
		send_welcome(fd, HP_WELCOME_NOT_TARGET, 0, -1);
		close(fd);
	}
	CHECK(child_do(&c, "a1"));
	CHECK_EQ_U64(child_end(&c), 0);
	close(lfd);
}

/* From startup: the region is used at once, modules scanned at attach. */
static void test_startup_accept(void)
{
	int lfd = fake_listen();
	struct child c;
	child_start(&c, NULL, false);
	struct hp_hello h;
	struct fake_region fr = {0};
	int fd = accept_hello(lfd, 5000, &h);
	CHECK(fd >= 0);
	if (fd < 0) {
		child_end(&c);
		close(lfd);
		return;
	}
	struct hp_config cfg = {.sampling_interval = 1};
	give_region(fd, &cfg, &fr);
	CHECK(child_do(&c, "a1"));
	CHECK(atomic_load(&fr.r.hdr->client_state) == HP_STATE_ACTIVE);
	CHECK_EQ_U64(fr.r.hdr->pid, c.pid);
	CHECK(atomic_load(&fr.r.hdr->modules_used) > 0);
	struct leaf_sum s;
	sum_leaf(&fr.r, "phase_a1", &s);
	CHECK_EQ_U64(s.allocs, 10);
	CHECK_EQ_U64(s.alloc_bytes, 10000);
	CHECK_EQ_U64(s.unresolved, 0);
	CHECK_EQ_U64(child_end(&c), 0);
	CHECK(atomic_load(&fr.r.hdr->memstat.ts_ns) > 0); /* at exit */
	close(fd);
	drop_region(&fr);
	close(lfd);
}

/*
 * Late attach: the signal makes the child connect with a LATE hello from
 * its handler; what it allocates afterwards is recorded and resolves to
 * the right function although the module table started empty.  Then
 * BUSY while profiled, STOP, a new session, and a storm of signals.
 */
static void test_late_attach(void)
{
	int lfd = fake_listen();
	struct child c;
	child_start(&c, NULL, false);
	struct hp_hello h;
	int fd = accept_hello(lfd, 5000, &h);
	CHECK(fd >= 0);
	if (fd >= 0) {
		send_welcome(fd, HP_WELCOME_NOT_TARGET, 0, -1);
		close(fd);
	}
	CHECK(child_do(&c, "a1")); /* before the attach: not recorded */

	CHECK(kill(c.pid, HP_ATTACH_SIGNAL) == 0);
	fd = accept_hello(lfd, 5000, &h);
	CHECK(fd >= 0);
	if (fd < 0) {
		child_end(&c);
		close(lfd);
		return;
	}
	CHECK_EQ_U64(h.flags, HP_HELLO_LATE);
	CHECK_EQ_U64(h.pid, c.pid);
	struct fake_region fr = {0};
	struct hp_config cfg = {.sampling_interval = 1,
	                        .config_flags = HP_CFG_TRACK_MAX};
	give_region(fd, &cfg, &fr);
	/* The handler ran while the child sat in read(): SA_RESTART. */
	CHECK(child_do(&c, "a2"));
	CHECK(child_do(&c, "f1")); /* frees of blocks from before: ignored */
	CHECK(atomic_load(&fr.r.hdr->client_state) == HP_STATE_ACTIVE);
	CHECK_EQ_U64(fr.r.hdr->pid, c.pid);
	CHECK(atomic_load(&fr.r.hdr->attach_time_ns) > 0);
	CHECK(atomic_load(&fr.r.hdr->modules_used) > 0); /* lazily */
	struct leaf_sum s;
	sum_leaf(&fr.r, "phase_a2", &s);
	CHECK_EQ_U64(s.allocs, 20);
	CHECK_EQ_U64(s.alloc_bytes, 10000);
	CHECK_EQ_U64(s.frees, 5);
	CHECK_EQ_U64(s.free_bytes, 2500);
	CHECK_EQ_U64(s.unresolved, 0);
	sum_leaf(&fr.r, "phase_a1", &s);
	CHECK_EQ_U64(s.allocs, 0);
	/* Peak tracking works in a late region too. */
	CHECK(atomic_load(&fr.r.hdr->max_live_bytes) >= 10000);

	/* Profiled and connected: the signal only says BUSY, on a new
	 * connection, and does not wait for an answer (EOF follows). */
	CHECK(kill(c.pid, HP_ATTACH_SIGNAL) == 0);
	int bfd = accept_hello(lfd, 5000, &h);
	CHECK(bfd >= 0);
	if (bfd >= 0) {
		CHECK_EQ_U64(h.flags, HP_HELLO_BUSY);
		CHECK(wait_in(bfd, 5000));
		char b;
		CHECK(read(bfd, &b, 1) == 0);
		close(bfd);
	}
	CHECK(child_do(&c, "a2")); /* still recording into fr */
	sum_leaf(&fr.r, "phase_a2", &s);
	CHECK_EQ_U64(s.allocs, 40);

	/* The session ends: STOP, then it closes the connection.  The next
	 * sample stops the client; nothing more reaches the old region. */
	atomic_store(&fr.r.hdr->control, HP_CONTROL_STOP);
	close(fd);
	CHECK(child_do(&c, "a2"));
	CHECK(atomic_load(&fr.r.hdr->client_state) == HP_STATE_STOPPED);
	CHECK(atomic_load(&fr.r.hdr->stop_reason) == HP_STOP_REQUESTED);
	sum_leaf(&fr.r, "phase_a2", &s);
	CHECK_EQ_U64(s.allocs, 40);

	/* A new session: a storm of signals attaches once (LATE), every
	 * other signal sees it profiled and says BUSY. */
	enum { STORM = 12 };
	for (int i = 0; i < STORM; i++)
		CHECK(kill(c.pid, HP_ATTACH_SIGNAL) == 0);
	fd = accept_hello(lfd, 5000, &h);
	CHECK(fd >= 0);
	struct fake_region fr2 = {0};
	if (fd >= 0) {
		CHECK_EQ_U64(h.flags, HP_HELLO_LATE);
		struct hp_config cfg2 = {.sampling_interval = 1};
		give_region(fd, &cfg2, &fr2);
	}
	int busy = 0, late = 0;
	for (int i = 1; i < STORM; i++) {
		int xfd = accept_hello(lfd, 5000, &h);
		if (xfd < 0)
			break;
		busy += h.flags == HP_HELLO_BUSY;
		late += h.flags == HP_HELLO_LATE;
		close(xfd);
	}
	CHECK_EQ_U64(busy, STORM - 1);
	CHECK_EQ_U64(late, 0);
	CHECK(!wait_in(lfd, 200)); /* and nothing more */
	CHECK(child_do(&c, "a2"));
	if (fr2.base) {
		sum_leaf(&fr2.r, "phase_a2", &s);
		CHECK_EQ_U64(s.allocs, 20);
		CHECK_EQ_U64(s.frees, 5);
		CHECK_EQ_U64(s.unresolved, 0);
		CHECK(atomic_load(&fr2.r.hdr->client_state) == HP_STATE_ACTIVE);
	}
	sum_leaf(&fr.r, "phase_a2", &s);
	CHECK_EQ_U64(s.allocs, 40); /* the old region is left alone */
	CHECK_EQ_U64(child_end(&c), 0);
	if (fd >= 0)
		close(fd);
	drop_region(&fr);
	drop_region(&fr2);
	close(lfd);
}

/* The handler is not installed when the program has the signal (here:
 * ignored, inherited through exec) or HEAPPROF_ATTACH_SIGNAL=0. */
static void test_handler_rules(void)
{
	unlink(sock_path);
	struct child c;
	child_start(&c, NULL, true);
	CHECK(child_do(&c, "a1"));
	CHECK_EQ_U64(sig_state(c.pid, "SigCgt"), 0);
	CHECK_EQ_U64(sig_state(c.pid, "SigIgn"), 1);
	CHECK_EQ_U64(child_end(&c), 0);

	child_start(&c, "HEAPPROF_ATTACH_SIGNAL=0", false);
	CHECK(child_do(&c, "a1"));
	CHECK_EQ_U64(sig_state(c.pid, "SigCgt"), 0);
	CHECK_EQ_U64(child_end(&c), 0);

	child_start(&c, "HEAPPROF_ATTACH_SIGNAL=1", false);
	CHECK(child_do(&c, "a1"));
	CHECK_EQ_U64(sig_state(c.pid, "SigCgt"), 1);
	CHECK_EQ_U64(child_end(&c), 0);
}

static bool wait_state(struct hp_header_v1 *h, uint32_t state, int ms)
{
	for (int i = 0; i < ms; i++) {
		if (atomic_load(&h->client_state) == state)
			return true;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return false;
}

/*
 * Late attach into a busy multi-threaded program, five sessions in a row,
 * each started by a storm of signals (to the process: any thread takes
 * them, several at once): one LATE hello per session, the rest BUSY or
 * nothing; each session stopped while the threads allocate.  In the last
 * region, after the threads freed all they hold, every stack's frees
 * match its allocations exactly (-i 1): nothing torn, nothing lost.
 */
static void test_threads_sessions(void)
{
	int lfd = fake_listen();
	struct child c;
	child_start(&c, NULL, false);
	struct hp_hello h;
	int fd = accept_hello(lfd, 5000, &h);
	CHECK(fd >= 0);
	if (fd >= 0) {
		send_welcome(fd, HP_WELCOME_NOT_TARGET, 0, -1);
		close(fd);
	}
	CHECK(child_do(&c, "threads"));
	struct fake_region fr[5] = {{0}};
	int fds[5] = {-1, -1, -1, -1, -1};
	bool ok = true;
	for (int k = 0; k < 5 && ok; k++) {
		for (int i = 0; i < 6; i++)
			kill(c.pid, HP_ATTACH_SIGNAL);
		fds[k] = accept_hello(lfd, 5000, &h);
		CHECK(fds[k] >= 0);
		if (fds[k] < 0) {
			ok = false;
			break;
		}
		CHECK_EQ_U64(h.flags, HP_HELLO_LATE);
		struct hp_config cfg = {.sampling_interval = 1,
		                        .config_flags =
		                                k % 2 ? HP_CFG_TRACK_MAX : 0};
		give_region(fds[k], &cfg, &fr[k]);
		int xfd, late = 0;
		while ((xfd = accept_hello(lfd, 300, &h)) >= 0) {
			late += h.flags != HP_HELLO_BUSY;
			close(xfd);
		}
		CHECK_EQ_U64(late, 0);
		CHECK(wait_state(fr[k].r.hdr, HP_STATE_ACTIVE, 5000));
		/* Let it record, then end the session. */
		struct timespec ts = {0, 50 * 1000000};
		nanosleep(&ts, NULL);
		if (k < 4) {
			atomic_store(&fr[k].r.hdr->control, HP_CONTROL_STOP);
			close(fds[k]);
			fds[k] = -1;
			CHECK(wait_state(fr[k].r.hdr, HP_STATE_STOPPED, 5000));
		}
	}
	CHECK(child_do(&c, "stop"));
	if (ok) {
		struct hp_region *r = &fr[4].r;
		uint64_t used = atomic_load(&r->hdr->stacks_used);
		uint64_t allocs = 0, bad = 0;
		for (uint64_t id = 0; id < used && id < r->stacks_cap; id++) {
			struct hp_stack_v1 *st = &r->stacks[id];
			allocs += atomic_load(&st->alloc_count);
			bad += atomic_load(&st->alloc_bytes) !=
			       atomic_load(&st->free_bytes);
		}
		CHECK(allocs > 1000);
		CHECK_EQ_U64(bad, 0);
		CHECK_EQ_U64(atomic_load(&r->hdr->counters[HP_CTR_LIVE_FULL]),
		             0);
		/* Stopped regions: consistent, nothing freed twice. */
		for (int k = 0; k < 4; k++) {
			struct hp_region *o = &fr[k].r;
			uint64_t n = atomic_load(&o->hdr->stacks_used);
			for (uint64_t id = 0; id < n && id < o->stacks_cap;
			     id++)
				CHECK(atomic_load(&o->stacks[id].free_bytes) <=
				      atomic_load(&o->stacks[id].alloc_bytes));
		}
	}
	CHECK_EQ_U64(child_end(&c), 0);
	for (int k = 0; k < 5; k++) {
		if (fds[k] >= 0)
			close(fds[k]);
		drop_region(&fr[k]);
	}
	close(lfd);
}

/* --follow-fork: a forked child says hello FORK_CHILD (ppid = the
 * profiled parent) and records into its own region; without the flag it
 * does not connect. */
static void test_follow_fork(void)
{
	for (int follow = 0; follow < 2; follow++) {
		int lfd = fake_listen();
		struct child c;
		child_start(&c, NULL, false);
		struct hp_hello h;
		int fd = accept_hello(lfd, 5000, &h);
		CHECK(fd >= 0);
		if (fd < 0) {
			child_end(&c);
			close(lfd);
			return;
		}
		struct fake_region fr = {0}, frc = {0};
		struct hp_config cfg = {
		        .sampling_interval = 1,
		        .config_flags = follow ? HP_CFG_FOLLOW_FORK : 0};
		give_region(fd, &cfg, &fr);
		CHECK(child_do(&c, "a1"));
		/* "fork" answers once the grandchild has exited; it says
		 * hello first and waits for us, so answer while it runs. */
		const char *cmd = "fork\n";
		CHECK(write(c.in, cmd, strlen(cmd)) == (ssize_t)strlen(cmd));
		int gfd = -1;
		if (follow) {
			gfd = accept_hello(lfd, 5000, &h);
			CHECK(gfd >= 0);
			if (gfd >= 0) {
				CHECK_EQ_U64(h.flags, HP_HELLO_FORK_CHILD);
				CHECK_EQ_U64(h.ppid, c.pid);
				CHECK(h.pid != c.pid);
				struct hp_config cc = {.sampling_interval = 1};
				give_region(gfd, &cc, &frc);
			}
		}
		char ok[3];
		CHECK(wait_in(c.out, 10000));
		CHECK(read(c.out, ok, 3) == 3 && !memcmp(ok, "ok\n", 3));
		if (!follow)
			CHECK(!wait_in(lfd, 0)); /* nobody connected */
		struct leaf_sum s;
		sum_leaf(&fr.r, "fork_child_alloc", &s);
		CHECK_EQ_U64(s.allocs, 0); /* never in the parent's region */
		sum_leaf(&fr.r, "phase_a1", &s);
		CHECK_EQ_U64(s.allocs, 10);
		if (frc.base) {
			sum_leaf(&frc.r, "fork_child_alloc", &s);
			CHECK_EQ_U64(s.allocs, 7);
			CHECK_EQ_U64(s.alloc_bytes, 4900);
			CHECK_EQ_U64(s.unresolved, 0);
			CHECK(frc.r.hdr->pid != c.pid && frc.r.hdr->pid > 0);
			sum_leaf(&frc.r, "phase_a1", &s);
			CHECK_EQ_U64(s.allocs, 0);
		}
		CHECK(child_do(&c, "a2")); /* the parent goes on */
		sum_leaf(&fr.r, "phase_a2", &s);
		CHECK_EQ_U64(s.allocs, 20);
		CHECK_EQ_U64(child_end(&c), 0);
		if (gfd >= 0)
			close(gfd);
		close(fd);
		drop_region(&fr);
		drop_region(&frc);
		close(lfd);
	}
}

/* Starts a child, answers its startup hello with a 1 MiB region (-i 1,
 * --block-client), returns the connection. */
static int start_small(int lfd, struct child *c, struct fake_region *fr,
                       uint32_t timeout_ms)
{
	child_start(c, NULL, false);
	struct hp_hello h;
	int fd = accept_hello(lfd, 5000, &h);
	CHECK(fd >= 0);
	if (fd < 0)
		return -1;
	struct hp_config cfg = {.sampling_interval = 1,
	                        .config_flags = HP_CFG_BLOCK_CLIENT,
	                        .block_timeout_ms = timeout_ms};
	fr->size = HP_REGION_MIN_SIZE;
	int mfd = memfd_create("small", MFD_CLOEXEC);
	CHECK(ftruncate(mfd, (off_t)fr->size) == 0);
	fr->base = mmap(NULL, fr->size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd,
	                0);
	cfg.max_frames = 64;
	CHECK(region_format(fr->base, fr->size, &cfg) == 0);
	CHECK(region_bind(&fr->r, fr->base, fr->size) == 0);
	send_welcome(fd, HP_WELCOME_ACCEPT, fr->size, mfd);
	close(mfd);
	return fd;
}

/*
 * --block-client: a client whose live table fills sends GROW on its
 * connection and waits; the collector's new region takes the samples and
 * frees find blocks in both.  Nothing is dropped.
 */
static void test_block_client_grow(void)
{
	int lfd = fake_listen();
	struct child c;
	struct fake_region fr = {0}, fr2 = {0};
	int fd = start_small(lfd, &c, &fr, 5000);
	if (fd < 0) {
		close(lfd);
		return;
	}
	CHECK(fr.r.live_cap < MANY);
	const char *cmd = "many\n";
	CHECK(write(c.in, cmd, strlen(cmd)) == (ssize_t)strlen(cmd));
	struct hp_client_msg m = {0};
	CHECK(wait_in(fd, 10000));
	CHECK(read(fd, &m, sizeof(m)) == (ssize_t)sizeof(m));
	CHECK_EQ_U64(m.magic, HP_WIRE_MAGIC);
	CHECK_EQ_U64(m.type, HP_CMSG_GROW);
	CHECK_EQ_U64(m.arg, HP_TAB_LIVE_KEYS);
	struct hp_config cfg = {.sampling_interval = 1,
	                        .config_flags = HP_CFG_BLOCK_CLIENT,
	                        .block_timeout_ms = 5000};
	give_region(fd, &cfg, &fr2);
	char ok[3];
	CHECK(wait_in(c.out, 20000));
	CHECK(read(c.out, ok, 3) == 3 && !memcmp(ok, "ok\n", 3));
	struct leaf_sum a, b;
	sum_leaf(&fr.r, "many_alloc", &a);
	sum_leaf(&fr2.r, "many_alloc", &b);
	CHECK_EQ_U64(a.allocs + b.allocs, MANY);
	CHECK(a.allocs > 0 && b.allocs > 0);
	CHECK_EQ_U64(b.unresolved, 0); /* modules scanned into the new one */
	CHECK_EQ_U64(atomic_load(&fr.r.hdr->counters[HP_CTR_LIVE_FULL]), 0);
	CHECK_EQ_U64(atomic_load(&fr2.r.hdr->counters[HP_CTR_LIVE_FULL]), 0);
	CHECK(atomic_load(&fr2.r.hdr->client_state) == HP_STATE_ACTIVE);
	CHECK_EQ_U64(fr2.r.hdr->pid, c.pid);
	CHECK(child_do(&c, "freemany"));
	sum_leaf(&fr.r, "many_alloc", &a);
	sum_leaf(&fr2.r, "many_alloc", &b);
	CHECK_EQ_U64(a.frees, a.allocs);
	CHECK_EQ_U64(b.frees, b.allocs);
	CHECK_EQ_U64(child_end(&c), 0);
	/* The memory at exit goes to the attach's first region. */
	CHECK(atomic_load(&fr.r.hdr->memstat.ts_ns) > 0);
	CHECK_EQ_U64(atomic_load(&fr2.r.hdr->memstat.ts_ns), 0);
	close(fd);
	drop_region(&fr);
	drop_region(&fr2);

	/* A collector that does not answer: the client waits the timeout
	 * once, then drops (counted) without stalling every sample. */
	fd = start_small(lfd, &c, &fr, 200);
	if (fd >= 0) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(child_do(&c, "many"));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double s = (double)(t1.tv_sec - t0.tv_sec) +
		           (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
		CHECK(s >= 0.2 && s < 5.0);
		CHECK(read(fd, &m, sizeof(m)) == (ssize_t)sizeof(m));
		CHECK_EQ_U64(m.type, HP_CMSG_GROW);
		sum_leaf(&fr.r, "many_alloc", &a);
		CHECK_EQ_U64(a.allocs, MANY);
		CHECK(atomic_load(&fr.r.hdr->counters[HP_CTR_LIVE_FULL]) > 0);
		CHECK_EQ_U64(child_end(&c), 0);
		close(fd);
		drop_region(&fr);
	}
	close(lfd);
}

/* A "daemon" running as another uid is not talked to.  The kernel reports
 * the credentials the listener had when it called listen(): we bind the
 * socket, a helper drops to uid 65534 and listens. */
static void test_peer_uid(void)
{
	if (getuid() != 0) {
		printf("skip peer_uid: needs root to run a peer as another "
		       "uid\n");
		return;
	}
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/heapprof", xdg);
	mkdir(dir, 0700);
	unlink(sock_path);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, sock_path);
	CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	int rep[2], ready[2];
	CHECK(pipe(rep) == 0 && pipe(ready) == 0);
	pid_t helper = fork();
	if (helper == 0) {
		close(rep[0]);
		close(ready[0]);
		if (setresgid(65534, 65534, 65534) != 0 ||
		    setresuid(65534, 65534, 65534) != 0)
			_exit(2);
		if (listen(lfd, 8) != 0)
			_exit(3);
		if (write(ready[1], "r", 1) != 1)
			_exit(4);
		/* Report whether a hello arrived. */
		char what = 'n';
		if (wait_in(lfd, 5000)) {
			int fd = accept(lfd, NULL, NULL);
			struct hp_hello h;
			what = 'e';
			if (wait_in(fd, 3000) &&
			    read(fd, &h, sizeof(h)) == (ssize_t)sizeof(h))
				what = 'h';
		}
		if (write(rep[1], &what, 1) != 1)
			_exit(5);
		_exit(0);
	}
	close(rep[1]);
	close(ready[1]);
	close(lfd);
	char r = 0;
	CHECK(wait_in(ready[0], 5000) && read(ready[0], &r, 1) == 1);
	struct child c;
	child_start(&c, NULL, false);
	char what = 0;
	CHECK(wait_in(rep[0], 10000) && read(rep[0], &what, 1) == 1);
	CHECK_EQ_U64(what, 'e'); /* connected, saw the uid, said nothing */
	CHECK(child_do(&c, "a1"));
	CHECK_EQ_U64(child_end(&c), 0);
	int st;
	waitpid(helper, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(rep[0]);
	close(ready[0]);
	unlink(sock_path);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--child"))
		return child_main();
	signal(SIGPIPE, SIG_IGN);
	char self[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	/* BUILD/tests/test_client_attach -> BUILD/libheapprof.so */
	char *slash = strrchr(self, '/');
	*slash = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	snprintf(lib_path, sizeof(lib_path), "%s/libheapprof.so", self);
	if (access(lib_path, R_OK) != 0) {
		fprintf(stderr, "no %s (make all first)\n", lib_path);
		return 1;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(xdg, sizeof(xdg), "%s/hpattach.XXXXXX",
	         tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(xdg))
		return 1;
	snprintf(sock_path, sizeof(sock_path), "%s/heapprof/%s", xdg,
	         HP_DAEMON_SOCK_NAME);
	static const struct unit_test tests[] = {
	        {"startup_not_target", test_startup_not_target},
	        {"no_daemon", test_no_daemon},
	        {"stale_socket_falls_back", test_stale_socket_falls_back},
	        {"startup_accept", test_startup_accept},
	        {"late_attach", test_late_attach},
	        {"handler_rules", test_handler_rules},
	        {"threads_sessions", test_threads_sessions},
	        {"follow_fork", test_follow_fork},
	        {"block_client_grow", test_block_client_grow},
	        {"peer_uid", test_peer_uid},
	        {NULL, NULL},
	};
	int rc = unit_main("client_attach", tests);
	unlink(sock_path);
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), "%s/heapprof", xdg);
	rmdir(dir);
	rmdir(xdg);
	return rc;
}
