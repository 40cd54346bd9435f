/*
 * Attaching to a running process by injection (attach.h).
 *
 * One stop of one thread, at a safe point (inject_attach):
 *
 *   1. dlopen(lib, RTLD_NOW), unless a heapprof library is mapped there
 *      already: its constructor sees it is not in the global scope and
 *      does nothing that needs a collector;
 *   2. heapprof_internal_attach_begin(): a socket pair in the process,
 *      the client's hello on one end; it returns both numbers;
 *   3. here: pidfd_getfd takes the other end, the hello is read and
 *      answered (collector_answer: the region's memfd goes with the
 *      welcome), exactly as for a client that connected;
 *   4. heapprof_internal_attach_finish(ours, peer): the client closes the
 *      peer's end, maps the region, starts recording and routes the
 *      process's relocation slots to its hooks (src/client/route.c);
 *   5. the thread resumes as it was (inject_detach).
 *
 * A socket pair made in the process and taken out with pidfd_getfd needs
 * no path both sides can reach: it works across mount namespaces and
 * with no daemon.  The client's end is an ordinary connection from then
 * on: the session sees its end-of-file when the process exits.
 */
#include "inject/attach.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "layout/wire_v1.h"
#include "util/proc.h"
#include "util/clock.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* The hello is in the socket before we look (begin wrote it). */
#define HELLO_WAIT_MS 1000

static int fail(char *why, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, INJECT_WHY, fmt, ap);
	va_end(ap);
	return -1;
}

struct find_lib {
	char *out;
	size_t len;
	bool found;
};

static int find_lib_cb(void *ctx, const struct proc_map *m)
{
	struct find_lib *f = ctx;
	if (m->path[0] != '/' || m->offset != 0 ||
	    strstr(m->path, " (deleted)"))
		return 0;
	const char *base = strrchr(m->path, '/') + 1;
	if (strncmp(base, "libheapprof", 11) != 0 || !strstr(base, ".so"))
		return 0;
	snprintf(f->out, f->len, "%s", m->path);
	f->found = true;
	return 1;
}

bool attach_client_mapped(pid_t pid, char *lib, size_t len)
{
	struct find_lib f = {.out = lib, .len = len};
	proc_maps(pid, find_lib_cb, &f);
	return f.found;
}

/* Reads the client's hello from fd (the socket pair's end we took). */
static int read_hello(int fd, struct hp_hello *h, char *why)
{
	size_t got = 0;
	while (got < sizeof(*h)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int rc = poll(&p, 1, HELLO_WAIT_MS);
		if (rc == 0)
			return fail(why, "its client sent no hello");
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return fail(why, "poll: %s", strerror(errno));
		ssize_t n = recv(fd, (char *)h + got, sizeof(*h) - got,
		                 MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return fail(why, "its client closed the connection");
		got += (size_t)n;
	}
	if (h->magic != HP_WIRE_MAGIC || h->version != HP_WIRE_VERSION)
		return fail(why,
		            "its heapprof library speaks another protocol");
	if (h->layout_version < HP_LAYOUT_MIN_VERSION)
		return fail(why,
		            "its heapprof library asks for layout version %u",
		            h->layout_version);
	return 0;
}

static const char *begin_error(int64_t e)
{
	switch (-e) {
	case EALREADY:
		return "it is profiled by another session already";
	case EBUSY:
		return "another attach to it is under way";
	default:
		return strerror((int)-e);
	}
}

/* The library's area for a reissued call's timeout (inject.c,
 * cut_timeout); an older library has none. */
static void set_reissue_area(struct inject_ctx *ic, pid_t pid, uint64_t handle)
{
	char ignored[INJECT_WHY];
	uint64_t area = 0;
	if (inject_symbol_addr(pid, handle, "heapprof_internal_reissue", &area,
	                       ignored) == 0)
		inject_set_reissue_area(ic, area);
}

/* The client's two calls and the answer between them, on c's thread. */
static int attach_calls(struct collector *col, struct inject_ctx *ic, pid_t pid,
                        uint64_t handle, const char *how, const char *fork_path,
                        struct target **out, struct attach_result *r, char *why)
{
	uint64_t begin = 0, finish = 0;
	if (inject_symbol_addr(pid, handle, "heapprof_internal_attach_begin",
	                       &begin, why) ||
	    inject_symbol_addr(pid, handle, "heapprof_internal_attach_finish",
	                       &finish, why))
		return fail(why,
		            "its heapprof library (%s) cannot be attached: it "
		            "is older than this heapprof; start heapprofd and "
		            "use record -p through it",
		            r->lib);
	const uint64_t none[6] = {0};
	uint64_t ret = 0, path = 0;
	if (fork_path &&
	    inject_write(ic, fork_path, strlen(fork_path) + 1, &path, why))
		return -1;
	if (inject_remote_call(ic, begin, none, &ret, why))
		return -1;
	if ((int64_t)ret < 0)
		return fail(why, "%s", begin_error((int64_t)ret));
	int ours = (int)(ret & 0xffffffffu), peer = (int)(ret >> 32);
	int fd = -1;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd >= 0) {
		fd = (int)syscall(SYS_pidfd_getfd, pidfd, peer, 0);
		int e = errno;
		close(pidfd);
		errno = e;
	}
	struct hp_hello h;
	memset(&h, 0, sizeof(h));
	int rc = 0;
	if (fd < 0)
		rc = fail(why,
		          "cannot take its end of the connection "
		          "(pidfd_getfd): %s",
		          strerror(errno));
	else if (read_hello(fd, &h, why))
		rc = -1;
	if (rc) {
		if (fd >= 0)
			close(fd);
		/* The client's end is closed by finish (a refusal: the
		 * socket's other end is gone). */
		uint64_t args[6] = {(uint64_t)ours, (uint64_t)peer};
		char ignored[INJECT_WHY];
		inject_remote_call(ic, finish, args, &ret, ignored);
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK | O_CLOEXEC);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	struct target_info ti = {.pid = pid,
	                         .ppid = h.ppid > 0 ? h.ppid : proc_ppid(pid),
	                         .how = how,
	                         .from_startup = false,
	                         .layout_version = h.layout_version};
	struct target *t = NULL;
	int arc = collector_answer(col, fd, &ti, &t);
	uint64_t args[6] = {(uint64_t)ours, (uint64_t)peer, path};
	char why2[INJECT_WHY] = "";
	if (inject_remote_call(ic, finish, args, &ret, why2))
		return fail(why, "%s", why2);
	if (!t)
		return fail(why, "no region for it: %s", strerror(-arc));
	if ((int64_t)ret < 0) {
		int64_t e = -(int64_t)ret;
		return fail(why, "its client did not start: %s",
		            e == ENOEXEC ? "its allocation functions could not "
		                           "be routed to the hooks"
		            : e == ECONNREFUSED ? "the welcome was a refusal"
		                                : strerror((int)e));
	}
	r->objects = (uint32_t)(ret >> 32);
	r->slots = (uint32_t)(ret & 0xffffffffu);
	if (out)
		*out = t;
	return 0;
}

int attach_process(struct collector *c, pid_t pid, const char *how,
                   const char *lib, const char *fork_path, struct target **out,
                   struct attach_result *r, char *why)
{
	memset(r, 0, sizeof(*r));
	if (out)
		*out = NULL;
	double t0 = hp_mono_msf();
	if (inject_check(pid, why))
		return -1;
	char mapped[PATH_MAX];
	bool has_client = attach_client_mapped(pid, mapped, sizeof(mapped));
	char abs[PATH_MAX];
	if (has_client) {
		/* The one it has (inject_check_path: the same file here). */
		snprintf(abs, sizeof(abs), "%s", mapped);
	} else if (!realpath(lib, abs)) {
		return fail(why, "cannot use %s: %s", lib, strerror(errno));
	}
	snprintf(r->lib, sizeof(r->lib), "%s", abs);
	if (inject_check_path(pid, abs, why))
		return -1;
	uint64_t handle = 0;
	int loaded = inject_loaded(pid, abs, &handle, why);
	if (loaded < 0)
		return -1;
	/* inject_check ran first: its refusals come before the library's. */
	struct inject_opts o = {.budget_ms = 200, .checked = true};
	struct inject_ctx *ic = NULL;
	if (inject_attach(pid, &o, &ic, why) || !ic)
		return -1;
	int rc = 0;
	if (!loaded) {
		rc = inject_dlopen_in(ic, abs, &handle, why);
		r->loaded = rc == 0;
	}
	if (!rc)
		set_reissue_area(ic, pid, handle);
	if (!rc)
		rc = attach_calls(c, ic, pid, handle, how, fork_path, out, r,
		                  why);
	char why2[INJECT_WHY] = "";
	if (inject_detach(ic, &r->stop, why2) && !rc)
		rc = fail(why, "%s", why2);
	r->total_ms = hp_mono_msf() - t0;
	return rc;
}

/* ---- the end: detach_process ----------------------------------------- */

#define DETACH_TRIES 20

struct lib_text {
	const char *path;
	uint64_t lo, hi;
};

static int lib_text_cb(void *ctx, const struct proc_map *m)
{
	struct lib_text *t = ctx;
	if (m->perms[2] != 'x' || strcmp(m->path, t->path) != 0)
		return 0;
	if (!t->lo || m->start < t->lo)
		t->lo = m->start;
	if (m->end > t->hi)
		t->hi = m->end;
	return 0;
}

int detach_process(pid_t pid, char *why)
{
	char lib[PATH_MAX];
	if (!attach_client_mapped(pid, lib, sizeof(lib)))
		return fail(why, "no heapprof library is mapped in %d",
		            (int)pid);
	struct lib_text text = {.path = lib};
	if (proc_maps(pid, lib_text_cb, &text) < 0 || !text.hi)
		return fail(why, "cannot find the code of %s in %d", lib,
		            (int)pid);
	uint64_t handle = 0, fn = 0;
	if (inject_loaded(pid, lib, &handle, why) != 1 ||
	    inject_symbol_addr(pid, handle, "heapprof_internal_detach", &fn,
	                       why))
		return -1;
	struct inject_opts o = {.deny_lo = text.lo,
	                        .deny_hi = text.hi,
	                        .deny_what = "heapprof's library"};
	for (int i = 0; i < DETACH_TRIES; i++) {
		struct inject_ctx *ctx;
		if (inject_attach(pid, &o, &ctx, why))
			return -1;
		set_reissue_area(ctx, pid, handle);
		o.checked = true;
		int rc = inject_stop_others(ctx, why);
		uint64_t ret = 0;
		if (rc == 0) {
			const uint64_t none[6] = {0};
			rc = inject_remote_call(ctx, fn, none, &ret, why) ? -1
			                                                  : 0;
		}
		char why2[INJECT_WHY];
		if (inject_detach(ctx, NULL, why2) && rc == 0) {
			snprintf(why, INJECT_WHY, "%s", why2);
			rc = -1;
		}
		if (rc < 0)
			return -1;
		if (rc == 0) {
			if ((int64_t)ret < 0)
				return fail(why, "the client of %d refused: %s",
				            (int)pid,
				            strerror((int)-(int64_t)ret));
			return (int)ret;
		}
		/* A thread was inside the library: let it finish. */
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	return -1; /* why: the last thread found inside */
}
