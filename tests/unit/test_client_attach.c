/*
 * The client's attach paths end to end, against a fake daemon: this test
 * listens on $XDG_RUNTIME_DIR/heapprof/heapprofd.sock (a temporary dir),
 * starts itself again as a child with LD_PRELOAD=<build>/libheapprof.so
 * and drives it through a pipe.  It checks the startup probe (hello flags,
 * NOT_TARGET, ACCEPT), late attach by HP_ATTACH_SIGNAL (LATE hello, region
 * mapped from the handler, modules scanned lazily so the leaf PC still
 * resolves to the right function), BUSY while profiled, a new session
 * after STOP, a storm of signals, the handler's installation rules,
 * --follow-fork and the peer uid check; and what issue 6 added: live
 * entries carry the allocating thread (a fork child's own), the event
 * trace written by the real hooks (realloc included), the region memfd
 * kept open at >= 512 and closed with its slot (only if still the same
 * file), and heapprof_take_named_snapshot against the fake collector.
 */
#include <dirent.h>
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

typedef int (*snap_fn)(const char *);

static int call_snapshot(const char *name)
{
	snap_fn fn =
	        (snap_fn)dlsym(RTLD_DEFAULT, "heapprof_take_named_snapshot");
	if (!fn)
		return -9999;
	return fn(name);
}

/* Replies "rc N errno E" for a snapshot call made with errno = EDOM. */
static void say_snapshot(const char *name)
{
	char buf[64];
	errno = EDOM;
	int rc = call_snapshot(name);
	int e = errno;
	snprintf(buf, sizeof(buf), "rc %d errno %d\n", rc, e);
	say(buf);
}

static pthread_t snap_thread;
static int snap_thread_rc;
static char snap_thread_name[256];

static void *snap_thread_main(void *arg)
{
	(void)arg;
	snap_thread_rc = call_snapshot(snap_thread_name);
	return NULL;
}

static volatile uintptr_t re_old;

NOINLINE void realloc_moves(void)
{
	void *p = malloc(100);
	memset(p, 4, 100);
	re_old = (uintptr_t)p;
	void *q = realloc(p, 1 << 20);        /* from the heap to a mapping */
	void *r = realloc(q, (size_t)-1 / 2); /* fails: q stays */
	if (r)
		_exit(8);
	char buf[80];
	snprintf(buf, sizeof(buf), "re %lx %lx\n", (unsigned long)re_old,
	         (unsigned long)(uintptr_t)q);
	free(q);
	say(buf);
}

/* Descriptors of this process, at or above `min`, that are regions (the
 * fake collector's memfds). */
static int count_memfds(int min)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		if (e->d_name[0] == '.' || fd < min)
			continue;
		char path[64], link[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		if (l > 0 && !strncmp(link, "/memfd:test-region", 18))
			n++;
	}
	closedir(d);
	return n;
}

/* Commands that answer something other than "ok"; false if not one. */
static bool child_special(const char *line)
{
	char buf[160];
	if (!strncmp(line, "snap:", 5)) {
		say_snapshot(line + 5);
	} else if (!strcmp(line, "snapbad")) {
		/* NULL, empty, 128 bytes, a control character, DEL. */
		char long_name[130];
		memset(long_name, 'x', 128);
		long_name[128] = '\0';
		int r[5] = {call_snapshot(NULL), call_snapshot(""),
		            call_snapshot(long_name), call_snapshot("a\x01b"),
		            call_snapshot("a\x7f")};
		snprintf(buf, sizeof(buf), "bad %d %d %d %d %d\n", r[0], r[1],
		         r[2], r[3], r[4]);
		say(buf);
	} else if (!strcmp(line, "snap127")) {
		char name[128];
		for (int i = 0; i < 127; i++)
			name[i] = (char)('a' + i % 26);
		name[127] = '\0';
		say_snapshot(name);
	} else if (!strncmp(line, "snapbg:", 7)) {
		snprintf(snap_thread_name, sizeof(snap_thread_name), "%s",
		         line + 7);
		pthread_create(&snap_thread, NULL, snap_thread_main, NULL);
		say("ok\n");
	} else if (!strcmp(line, "snapjoin")) {
		pthread_join(snap_thread, NULL);
		snprintf(buf, sizeof(buf), "rc %d errno 0\n", snap_thread_rc);
		say(buf);
	} else if (!strncmp(line, "getfd ", 6)) {
		snprintf(buf, sizeof(buf), "fd %d\n",
		         fcntl(atoi(line + 6), F_GETFD));
		say(buf);
	} else if (!strncmp(line, "clobber ", 8)) {
		/* The program closes a descriptor and reuses the number
		 * for a file of its own on the same file system. */
		int fd = atoi(line + 8);
		close(fd);
		int own = memfd_create("program-own", MFD_CLOEXEC);
		dup2(own, fd);
		close(own);
		say("ok\n");
	} else if (!strcmp(line, "forkfds")) {
		pid_t p = fork();
		if (p == 0)
			_exit(count_memfds(512));
		int st = 0;
		while (waitpid(p, &st, 0) < 0 && errno == EINTR)
			;
		snprintf(buf, sizeof(buf), "n %d\n",
		         WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		say(buf);
	} else if (!strcmp(line, "re")) {
		realloc_moves();
	} else {
		return false;
	}
	return true;
}

static int child_main(void)
{
	char line[256];
	while (read_line(0, line, sizeof(line)) == 0) {
		if (child_special(line))
			continue;
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

static void send_welcome_to(int fd, uint32_t status, uint64_t size,
                            int region_fd, uint32_t answer_to)
{
	struct hp_welcome w = {.magic = HP_WIRE_MAGIC,
	                       .version = HP_WIRE_VERSION,
	                       .status = status,
	                       .layout_version = HP_LAYOUT_VERSION,
	                       .region_size = size,
	                       .answer_to = answer_to};
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

static void send_welcome(int fd, uint32_t status, uint64_t size, int region_fd)
{
	send_welcome_to(fd, status, size, region_fd, 0);
}

/* The collector's answer to a snapshot request. */
static void send_snap_answer(int fd, uint32_t status)
{
	send_welcome_to(fd, status, 0, -1, HP_CMSG_SNAPSHOT);
}

struct fake_region {
	void *base;
	uint64_t size;
	struct hp_region r;
	uint64_t ino; /* the memfd's */
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
	struct stat st;
	CHECK(fstat(mfd, &st) == 0);
	fr->ino = (uint64_t)st.st_ino;
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
		/* A sanitizer build's options (tests/san_env.sh) go along:
		 * the child is this instrumented binary. */
		static const char *const san[] = {
		        "ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"};
		char es[3][PATH_MAX + 256];
		char *env[6] = {e1, e2}, **e = env + 2;
		for (int i = 0; i < 3; i++) {
			const char *v = getenv(san[i]);
			if (v) {
				/* It plays a profiled program: what it keeps
				 * live is on purpose, and huge requests must
				 * fail with NULL as they do without ASan. */
				snprintf(es[i], sizeof(es[i]), "%s=%s%s",
				         san[i], v,
				         i == 0 ? ":detect_leaks=0:allocator_"
				                  "may_return_null=1"
				                : "");
				*e++ = es[i];
			}
		}
		*e = (char *)extra;
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

/* Sends a command and reads its one-line answer (bounded). */
static bool child_ask(struct child *c, const char *cmd, char *out, size_t len)
{
	char buf[300];
	snprintf(buf, sizeof(buf), "%s\n", cmd);
	if (write(c->in, buf, strlen(buf)) != (ssize_t)strlen(buf))
		return false;
	size_t n = 0;
	while (n + 1 < len) {
		if (!wait_in(c->out, 10000))
			return false;
		ssize_t r = read(c->out, out + n, 1);
		if (r <= 0)
			return false;
		if (out[n] == '\n')
			break;
		n++;
	}
	out[n] = '\0';
	return true;
}

/* Reads the answer to a command written earlier. */
static bool child_answer(struct child *c, char *out, size_t len)
{
	size_t n = 0;
	while (n + 1 < len) {
		if (!wait_in(c->out, 40000))
			return false;
		ssize_t r = read(c->out, out + n, 1);
		if (r <= 0)
			return false;
		if (out[n] == '\n')
			break;
		n++;
	}
	out[n] = '\0';
	return true;
}

static bool child_send(struct child *c, const char *cmd)
{
	char buf[300];
	snprintf(buf, sizeof(buf), "%s\n", cmd);
	return write(c->in, buf, strlen(buf)) == (ssize_t)strlen(buf);
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
             {"realloc_moves", realloc_moves},
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

/* Live entries of r: how many carry tid, how many another. */
static void live_tids(const struct hp_region *r, uint32_t tid, uint64_t *same,
                      uint64_t *other)
{
	*same = *other = 0;
	for (uint64_t i = 0; i < r->live_cap; i++) {
		uint64_t key;
		struct hp_live_v2 v;
		if (livetab_read(r, i, &key, &v) != HP_LIVE_READ_OK)
			continue;
		if (v.tid == tid)
			(*same)++;
		else
			(*other)++;
		CHECK(v.ts_ns > 0);
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
 * ignored, inherited through exec), HEAPPROF_ATTACH_SIGNAL=0, or no
 * daemon answered at startup (unless HEAPPROF_ATTACH_SIGNAL=1). */
static void test_handler_rules(void)
{
	unlink(sock_path);
	struct child c;
	child_start(&c, NULL, true);
	CHECK(child_do(&c, "a1"));
	CHECK_EQ_U64(sig_state(c.pid, "SigCgt"), 0);
	CHECK_EQ_U64(sig_state(c.pid, "SigIgn"), 1);
	CHECK_EQ_U64(child_end(&c), 0);

	/* No daemon: the signal is left as the program has it. */
	child_start(&c, NULL, false);
	CHECK(child_do(&c, "a1"));
	CHECK_EQ_U64(sig_state(c.pid, "SigCgt"), 0);
	CHECK_EQ_U64(sig_state(c.pid, "SigIgn"), 0);
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
		pid_t gpid = 0;
		if (follow) {
			gfd = accept_hello(lfd, 5000, &h);
			CHECK(gfd >= 0);
			if (gfd >= 0) {
				gpid = h.pid;
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
		/* Live entries name their thread: the parent's main
		 * thread, the fork child's own (not its parent's id).
		 * Blocks from before the attach (libstdc++'s pool) are the
		 * main thread's too, and stay. */
		uint64_t same, other;
		uint64_t early = atomic_load(
		        region_counter(&fr.r, HP_CTR_STARTUP_RECORDED));
		live_tids(&fr.r, (uint32_t)c.pid, &same, &other);
		CHECK(same >= 10 && same <= 10 + early);
		CHECK_EQ_U64(other, 0);
		if (frc.base) {
			live_tids(&frc.r, (uint32_t)gpid, &same, &other);
			CHECK_EQ_U64(same, 7);
			CHECK_EQ_U64(other, 0);
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

/* ---- issue 6: thread ids, trace, kept memfd, named snapshots ---------- */

/* The leaf function of stack id (region r), or NULL. */
static const char *stack_leaf(const struct hp_region *r, uint32_t id)
{
	if (id == 0 || id >= r->stacks_cap || r->stacks[id].nframes == 0)
		return NULL;
	return leaf_name(r, r->frames[r->stacks[id].frames_off]);
}

/*
 * The event trace through the real hooks: phase_a2's 20 mallocs and 5
 * frees are exactly 25 events (thread, stack, sizes, alloc_ts of the
 * frees); a realloc that moves a block is FREE(old) + ALLOC(new), one
 * that fails is nothing.
 */
static void test_trace_hooks(void)
{
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
	struct fake_region fr = {0};
	struct hp_config cfg = {.sampling_interval = 1,
	                        .trace_mode = HP_TRACE_STREAMING,
	                        .trace_bytes = 64 << 10};
	give_region(fd, &cfg, &fr);
	CHECK(fr.r.trace_cap == 1024);
	CHECK(child_do(&c, "a2"));
	struct hp_region *r = &fr.r;
	uint64_t head = atomic_load(&r->ext->trace_head);
	/* First the blocks from before the attach (libstdc++'s pool; under
	 * a sanitizer, its runtime's), recorded when it came, and those of
	 * them freed again: events of other stacks than phase_a2's. */
	uint64_t allocs = 0, frees = 0, bad = 0, others = 0;
	uint64_t alloc_ts[64] = {0}, alloc_addr[64] = {0};
	CHECK(head >= 25);
	for (uint64_t p = 0; p < head; p++) {
		struct hp_event_v2 e;
		CHECK(trace_get(r, p, &e) == HP_EV_READ_OK);
		const char *leaf = stack_leaf(r, e.stack_id);
		if (!leaf || strcmp(leaf, "phase_a2") != 0) {
			others++;
			continue;
		}
		if (allocs >= 64)
			break;
		bad += e.tid != (uint32_t)c.pid || e.region != 0 ||
		       e.heap_id != 0 || e.size != 500 || e.charged != 500;
		if (e.kind == HP_EV_ALLOC) {
			alloc_ts[allocs] = e.ts_ns;
			alloc_addr[allocs] = e.addr;
			allocs++;
		} else if (e.kind == HP_EV_FREE) {
			/* phase_a2 frees its first 5 blocks */
			bad += frees >= allocs || e.addr != alloc_addr[frees] ||
			       e.alloc_ts_ns != alloc_ts[frees] ||
			       e.ts_ns < e.alloc_ts_ns;
			frees++;
		}
	}
	CHECK_EQ_U64(allocs, 20);
	CHECK_EQ_U64(frees, 5);
	CHECK_EQ_U64(bad, 0);
	CHECK_EQ_U64(others, head - 25);

	char ans[128];
	unsigned long pa = 0, qa = 0;
	CHECK(child_ask(&c, "re", ans, sizeof(ans)));
	CHECK(sscanf(ans, "re %lx %lx", &pa, &qa) == 2);
	CHECK(pa != qa);
	CHECK_EQ_U64(atomic_load(&r->ext->trace_head), head + 4);
	struct hp_event_v2 e[4];
	for (int i = 0; i < 4; i++)
		CHECK(trace_get(r, head + (uint64_t)i, &e[i]) == HP_EV_READ_OK);
	CHECK(e[0].kind == HP_EV_ALLOC && e[0].addr == pa && e[0].size == 100);
	CHECK(e[1].kind == HP_EV_FREE && e[1].addr == pa && e[1].size == 100);
	CHECK_EQ_U64(e[1].alloc_ts_ns, e[0].ts_ns);
	CHECK(e[2].kind == HP_EV_ALLOC && e[2].addr == qa &&
	      e[2].size == 1 << 20);
	CHECK(e[3].kind == HP_EV_FREE && e[3].addr == qa &&
	      e[3].size == 1 << 20);
	CHECK_EQ_U64(e[3].alloc_ts_ns, e[2].ts_ns);
	for (int i = 0; i < 4; i++) {
		const char *leaf = stack_leaf(r, e[i].stack_id);
		CHECK(leaf && !strcmp(leaf, "realloc_moves"));
	}
	for (int d = 0; d < HP_TDROP_COUNT; d++)
		CHECK_EQ_U64(atomic_load(&r->ext->trace_dropped[d]), 0);
	CHECK_EQ_U64(child_end(&c), 0);
	close(fd);
	drop_region(&fr);
	close(lfd);
}

/* pid's descriptors that are the memfd with inode ino: their count, the
 * first in *first. */
static int find_fds(pid_t pid, uint64_t ino, int *first)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	*first = -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[PATH_MAX], link[256];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		struct stat st;
		if (l <= 0 || strncmp(link, "/memfd:", 7) != 0 ||
		    stat(path, &st) != 0 || (uint64_t)st.st_ino != ino)
			continue;
		if (n++ == 0)
			*first = atoi(e->d_name);
	}
	closedir(d);
	return n;
}

/* Where pid's descriptor fd points ("" if closed). */
static void fd_link(pid_t pid, int fd, char *out, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	ssize_t l = readlink(path, out, len - 1);
	out[l > 0 ? l : 0] = '\0';
}

/* Ends the session of fr (STOP, connection closed; the next sample
 * notices) and attaches a new one by the signal. */
static bool next_session(int lfd, struct child *c, int *fd,
                         struct fake_region *old, struct fake_region *fr)
{
	atomic_store(&old->r.hdr->control, HP_CONTROL_STOP);
	close(*fd);
	*fd = -1;
	if (!child_do(c, "a1") ||
	    atomic_load(&old->r.hdr->client_state) != HP_STATE_STOPPED)
		return false;
	kill(c->pid, HP_ATTACH_SIGNAL);
	struct hp_hello h;
	*fd = accept_hello(lfd, 5000, &h);
	if (*fd < 0 || h.flags != HP_HELLO_LATE)
		return false;
	struct hp_config cfg = {.sampling_interval = 1};
	give_region(*fd, &cfg, fr);
	return child_do(c, "a1");
}

/*
 * The region memfd stays open for `heapprof snapshot`: one descriptor per
 * mapped region, >= 512, close-on-exec, not in a fork child; closed when
 * its slot is unmapped (two attaches later), except when the program
 * closed that number and reused it meanwhile.
 */
static void test_kept_fds(void)
{
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
	struct fake_region fr[4] = {{0}};
	struct hp_config cfg = {.sampling_interval = 1};
	give_region(fd, &cfg, &fr[0]);
	CHECK(child_do(&c, "a1"));
	int n0;
	CHECK_EQ_U64(find_fds(c.pid, fr[0].ino, &n0), 1);
	CHECK(n0 >= 512);
	char cmd[64], ans[128], link[256];
	snprintf(cmd, sizeof(cmd), "getfd %d", n0);
	CHECK(child_ask(&c, cmd, ans, sizeof(ans)));
	CHECK(!strcmp(ans, "fd 1")); /* FD_CLOEXEC */
	CHECK(child_ask(&c, "forkfds", ans, sizeof(ans)));
	CHECK(!strcmp(ans, "n 0"));

	bool ok = next_session(lfd, &c, &fd, &fr[0], &fr[1]);
	CHECK(ok);
	int n1 = -1;
	if (ok) {
		CHECK_EQ_U64(find_fds(c.pid, fr[0].ino, &n0), 1);
		CHECK_EQ_U64(find_fds(c.pid, fr[1].ino, &n1), 1);
		CHECK(n1 >= 512 && n1 != n0);
		snprintf(cmd, sizeof(cmd), "clobber %d", n1);
		CHECK(child_do(&c, cmd));
		ok = next_session(lfd, &c, &fd, &fr[1], &fr[2]);
		CHECK(ok);
	}
	if (ok) {
		/* The first attach's region is unmapped: its fd closed. */
		int x;
		CHECK_EQ_U64(find_fds(c.pid, fr[0].ino, &x), 0);
		fd_link(c.pid, n0, link, sizeof(link));
		CHECK(strncmp(link, "/memfd:", 7) != 0);
		CHECK_EQ_U64(find_fds(c.pid, fr[2].ino, &x), 1);
		ok = next_session(lfd, &c, &fd, &fr[2], &fr[3]);
		CHECK(ok);
	}
	if (ok) {
		/* The second's number is the program's own memfd now: left
		 * open. */
		fd_link(c.pid, n1, link, sizeof(link));
		CHECK(!strcmp(link, "/memfd:program-own (deleted)"));
		int x;
		CHECK_EQ_U64(find_fds(c.pid, fr[2].ino, &x), 1);
		CHECK_EQ_U64(find_fds(c.pid, fr[3].ino, &x), 1);
		CHECK(child_ask(&c, "forkfds", ans, sizeof(ans)));
		CHECK(!strcmp(ans, "n 0"));
	}
	CHECK_EQ_U64(child_end(&c), 0);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 4; i++)
		drop_region(&fr[i]);
	close(lfd);
}

static bool read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		if (!wait_in(fd, 5000))
			return false;
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

/* Reads one HP_CMSG_SNAPSHOT request; its name into name. */
static bool read_snap_req(int fd, char *name, size_t cap)
{
	struct hp_client_msg m;
	if (!read_full(fd, &m, sizeof(m)) || m.magic != HP_WIRE_MAGIC ||
	    m.type != HP_CMSG_SNAPSHOT || m.arg == 0 || m.arg >= cap)
		return false;
	if (!read_full(fd, name, m.arg))
		return false;
	name[m.arg] = '\0';
	return true;
}

static void expect_rc(const char *ans, int rc)
{
	char want[64];
	snprintf(want, sizeof(want), "rc %d errno %d", rc, EDOM);
	if (strcmp(ans, want) != 0)
		fprintf(stderr, "got \"%s\", want \"%s\"\n", ans, want);
	CHECK(!strcmp(ans, want));
}

/*
 * heapprof_take_named_snapshot against the fake collector: the request's
 * bytes; 0 on ACCEPT, -EIO on ERROR; a late GROW answer (with an fd)
 * skipped and its fd closed; bad names refused before anything is sent;
 * -EBUSY while another request is out; -ENOTCONN when the collector
 * hangs up and when not profiled.  errno is left alone.
 */
static void test_named_snapshot(void)
{
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
	struct fake_region fr = {0};
	struct hp_config cfg = {.sampling_interval = 1};
	give_region(fd, &cfg, &fr);
	char name[HP_SNAPSHOT_NAME_MAX + 8], ans[128];

	CHECK(child_send(&c, "snap:after-load"));
	CHECK(read_snap_req(fd, name, sizeof(name)));
	CHECK(!strcmp(name, "after-load"));
	send_snap_answer(fd, HP_WELCOME_ACCEPT);
	CHECK(child_answer(&c, ans, sizeof(ans)));
	expect_rc(ans, 0);

	CHECK(child_send(&c, "snap:no room"));
	CHECK(read_snap_req(fd, name, sizeof(name)));
	CHECK(!strcmp(name, "no room"));
	send_snap_answer(fd, HP_WELCOME_ERROR);
	CHECK(child_answer(&c, ans, sizeof(ans)));
	expect_rc(ans, -EIO);

	/* A late answer to a GROW comes first. */
	CHECK(child_send(&c, "snap:second"));
	CHECK(read_snap_req(fd, name, sizeof(name)));
	CHECK(!strcmp(name, "second"));
	int stale = memfd_create("stale-grow", MFD_CLOEXEC);
	struct stat st;
	CHECK(fstat(stale, &st) == 0);
	send_welcome_to(fd, HP_WELCOME_ACCEPT, 1 << 20, stale, HP_CMSG_GROW);
	close(stale);
	/* ... and a late GROW refusal (no fd) is not taken for ours. */
	send_welcome_to(fd, HP_WELCOME_ERROR, 0, -1, HP_CMSG_GROW);
	send_snap_answer(fd, HP_WELCOME_ACCEPT);
	CHECK(child_answer(&c, ans, sizeof(ans)));
	expect_rc(ans, 0);
	int x;
	CHECK_EQ_U64(find_fds(c.pid, (uint64_t)st.st_ino, &x), 0);

	CHECK(child_send(&c, "snap127"));
	CHECK(read_snap_req(fd, name, sizeof(name)));
	CHECK_EQ_U64(strlen(name), 127);
	CHECK(name[0] == 'a' && name[126] == 'a' + 126 % 26);
	send_snap_answer(fd, HP_WELCOME_ACCEPT);
	CHECK(child_answer(&c, ans, sizeof(ans)));
	expect_rc(ans, 0);

	CHECK(child_ask(&c, "snapbad", ans, sizeof(ans)));
	snprintf(name, sizeof(name), "bad %d %d %d %d %d", -EINVAL, -EINVAL,
	         -EINVAL, -EINVAL, -EINVAL);
	CHECK(!strcmp(ans, name));
	CHECK(!wait_in(fd, 100)); /* nothing sent */

	/* One request at a time: a second waits ~1 s, then -EBUSY. */
	CHECK(child_ask(&c, "snapbg:first", ans, sizeof(ans)));
	CHECK(!strcmp(ans, "ok"));
	CHECK(read_snap_req(fd, name, sizeof(name)));
	CHECK(!strcmp(name, "first"));
	CHECK(child_ask(&c, "snap:two", ans, sizeof(ans)));
	expect_rc(ans, -EBUSY);
	CHECK(!wait_in(fd, 0));
	send_snap_answer(fd, HP_WELCOME_ACCEPT);
	CHECK(child_ask(&c, "snapjoin", ans, sizeof(ans)));
	CHECK(!strcmp(ans, "rc 0 errno 0"));

	/* The collector hangs up while the program waits. */
	CHECK(child_send(&c, "snap:gone"));
	CHECK(read_snap_req(fd, name, sizeof(name)));
	close(fd);
	CHECK(child_answer(&c, ans, sizeof(ans)));
	expect_rc(ans, -ENOTCONN);
	CHECK(child_ask(&c, "snap:again", ans, sizeof(ans)));
	expect_rc(ans, -ENOTCONN);
	CHECK_EQ_U64(child_end(&c), 0);
	drop_region(&fr);

	/* Not profiled: at once, and nobody is asked. */
	child_start(&c, NULL, false);
	fd = accept_hello(lfd, 5000, &h);
	CHECK(fd >= 0);
	if (fd >= 0) {
		send_welcome(fd, HP_WELCOME_NOT_TARGET, 0, -1);
		close(fd);
	}
	CHECK(child_ask(&c, "snap:x", ans, sizeof(ans)));
	expect_rc(ans, -ENOTCONN);
	CHECK(!wait_in(lfd, 100));
	CHECK_EQ_U64(child_end(&c), 0);
	close(lfd);
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
#ifdef __SANITIZE_THREAD__
	/* make SAN=tsan: the child would be this TSan binary with the
	 * uninstrumented client preloaded in front of TSan's malloc.  TSan
	 * then sees the client's memcpy/memcmp (its interceptors) but not
	 * its atomics, and reports races the release/acquire protocol rules
	 * out (the stack table), and the child crashes.  The client's code
	 * runs under TSan in test_client_recorder, test_sampler and
	 * test_region instead (docs/safety/sanitizers.md). */
	printf("client_attach: skipped under TSan (an uninstrumented "
	       "preloaded client in an instrumented program)\n");
	printf("client_attach: 0 passed, 0 failed\n");
	return 0;
#endif
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
	        {"trace_hooks", test_trace_hooks},
	        {"kept_fds", test_kept_fds},
	        {"named_snapshot", test_named_snapshot},
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
