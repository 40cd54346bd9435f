/*
 * The memory of the process beside the profile: resident set (from
 * /proc/self/statm) and, for glibc's allocator, mallinfo2().  Taken once,
 * when the process exits (the library destructor), into the region
 * header's seqlocked hp_memstat_v1: the collector reads /proc/PID itself
 * for dumps while the process runs, but the last dump comes after the
 * process is gone.
 *
 * Why only at exit: mallinfo2 takes every arena's lock.  Called from an
 * allocation hook it could deadlock a program that allocates in a signal
 * handler which interrupted malloc on the same thread (tcache lets such a
 * program work unprofiled).  At exit the same holds when exit() is called
 * from a signal handler (a common way to end on SIGTERM) that interrupted
 * malloc: so mallinfo2 is skipped when the exiting thread's stack holds a
 * signal frame.  And when other threads are still alive at exit: one of
 * them may hold an arena's lock for good (parked in a signal handler that
 * interrupted its malloc, as a garbage collector's or a sanitizer's
 * stop-the-world does), and mallinfo2 would wait for it forever.  RSS is
 * read either way.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"

typedef struct mallinfo2 (*mallinfo2_fn)(void);
static mallinfo2_fn next_mallinfo2;
/* malloc and mallinfo2 come from different objects (a preloaded or
 * linked jemalloc without a mallinfo2: glibc's would read arenas nobody
 * allocates from, all 0). */
static bool foreign;

void memstat_init(void)
{
	/* Whatever allocator is underneath: glibc's, or a preloaded one
	 * that provides mallinfo2 itself (then its figures are used). */
	next_mallinfo2 = (mallinfo2_fn)dlsym(RTLD_NEXT, "mallinfo2");
	void *m = dlsym(RTLD_NEXT, "malloc");
	Dl_info a, b;
	if (next_mallinfo2 && m && dladdr(m, &a) &&
	    dladdr((void *)next_mallinfo2, &b) && a.dli_fbase != b.dli_fbase)
		foreign = true;
}

/* Parse an unsigned decimal at *p, advancing past it and one separator. */
static uint64_t take_number(const char **p, const char *end)
{
	uint64_t v = 0;
	const char *s = *p;

	while (s < end && *s >= '0' && *s <= '9')
		v = v * 10 + (uint64_t)(*s++ - '0');
	if (s < end)
		s++;
	*p = s;
	return v;
}

/* "size resident shared text lib data dt" in pages. */
static int read_statm(uint64_t *rss, uint64_t *anon)
{
	char buf[256];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	const char *p = buf, *end = buf + n;
	long page = sysconf(_SC_PAGESIZE);
	(void)take_number(&p, end);
	uint64_t resident = take_number(&p, end);
	uint64_t shared = take_number(&p, end);
	*rss = resident * (uint64_t)page;
	*anon = (resident > shared ? resident - shared : 0) * (uint64_t)page;
	return 0;
}

void memstat_take(void)
{
	struct client_slot *s = client_cur();
	/* Under the program's seccomp filter: no /proc reads (the
	 * collector reads the memory of a live process itself). */
	if (!s || atomic_load_explicit(&hp_sandboxed, memory_order_acquire))
		return;
	/* Into the attach's first region, where a collector looks for it
	 * however many regions --block-client added. */
	struct hp_header_v1 *h = s->root->region.hdr;
	struct hp_memstat_v1 *m = &h->memstat;
	uint64_t rss = 0, anon = 0, flags = 0;
	struct mallinfo2 mi = {0};

	if (read_statm(&rss, &anon) == 0)
		flags |= HP_MEMSTAT_RSS;
	if (foreign)
		flags |= HP_MEMSTAT_FOREIGN;
	const char *status =
	        next_mallinfo2 && !foreign ? proc_status_read() : NULL;
	if (status && !unwind_in_signal_handler() &&
	    proc_status_field(status, "\nThreads:") == 1) {
		mi = next_mallinfo2();
		flags |= HP_MEMSTAT_MALLOC;
	}
	uint64_t now = hp_clock_ns(CLOCK_BOOTTIME);

	uint64_t seq = atomic_load_explicit(&m->seq, memory_order_relaxed);
	atomic_store_explicit(&m->seq, seq | 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&m->ts_ns, now, memory_order_relaxed);
	atomic_store_explicit(&m->rss, rss, memory_order_relaxed);
	atomic_store_explicit(&m->rss_anon, anon, memory_order_relaxed);
	atomic_store_explicit(&m->malloc_system, mi.arena + mi.hblkhd,
	                      memory_order_relaxed);
	atomic_store_explicit(&m->malloc_in_use, mi.uordblks + mi.hblkhd,
	                      memory_order_relaxed);
	atomic_store_explicit(&m->malloc_free, mi.fordblks,
	                      memory_order_relaxed);
	atomic_store_explicit(&m->flags, flags, memory_order_relaxed);
	atomic_store_explicit(&m->seq, (seq | 1) + 1, memory_order_release);
}
