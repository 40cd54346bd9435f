/*
 * api_callbacks LOG run
 * api_callbacks LOG wait DIR
 * api_callbacks LOG closefds DIR
 *
 * Registers three custom heaps, "cb.a", "cb.b" and "cb.c", each with an
 * enable and a disable callback, and appends what happens to the file LOG,
 * one line per event, with write(2) on an O_APPEND descriptor (no stdio,
 * no malloc: the callbacks may run on heapprof's own thread):
 *
 *   enabled HEAP INTERVAL THREAD   an enable callback ran; THREAD is "main"
 *                                  or the name of the thread it ran on
 *   disabled HEAP THREAD           a disable callback ran
 *   registered HEAP ENABLES        registerHeap returned; ENABLES is how
 *                                  many enable callbacks of HEAP had run
 *                                  by then
 *   reported A B C                 reports that returned true in one round
 *                                  of the pattern, per heap
 *   exit                           main returns
 *
 * The pattern, one round (function: heap, reports; with interval 1, or
 * blocks of at least the interval, exact):
 *   a_alloc  cb.a  10 blocks of 5000 B, 4 freed: 10, 50000; 6, 30000
 *   b_alloc  cb.b  3 blocks of 10000 B, kept:    3, 30000; 3, 30000
 *   c_alloc  cb.c  2 blocks of 8192 B, kept:     2, 16384; 2, 16384
 *
 * run:  registers, one round, exits 0.
 * wait: registers, writes DIR/ready, then until DIR/exit appears: each
 *       time DIR/go appears it removes it, runs one round and writes
 *       DIR/allocated (removed again at the next go).  Gives up after 30 s
 *       (exit 3).  The test drives it through these files.
 * closefds: as wait, after closing every descriptor above 2 once the
 *       heaps are registered (as daemons do): heapprof's eventfd goes
 *       too, and callbacks must still come.
 */
#define _GNU_SOURCE
#include <heapprof/heap_profile.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static const char *log_path;
static const char *dir;

struct heap {
	const char *name;
	uint32_t id;
	volatile int enables;
};

static struct heap heaps[3] = {{"cb.a", 0, 0}, {"cb.b", 0, 0}, {"cb.c", 0, 0}};

static void log_line(const char *line)
{
	int fd =
	        open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	size_t n = strlen(line);
	ssize_t w = write(fd, line, n);
	(void)w;
	close(fd);
}

static void thread_name(char *buf, size_t len)
{
	if (syscall(SYS_gettid) == getpid()) {
		snprintf(buf, len, "main");
		return;
	}
	if (pthread_getname_np(pthread_self(), buf, len) != 0)
		snprintf(buf, len, "?");
}

static void on_enable(void *data, const AHeapProfileEnableCallbackInfo *info)
{
	struct heap *h = data;
	char tn[32], line[160];
	thread_name(tn, sizeof(tn));
	h->enables++;
	snprintf(line, sizeof(line), "enabled %s %llu %s\n", h->name,
	         (unsigned long long)
	                 AHeapProfileEnableCallbackInfo_getSamplingInterval(
	                         info),
	         tn);
	log_line(line);
}

static void on_disable(void *data, const AHeapProfileDisableCallbackInfo *info)
{
	(void)info;
	struct heap *h = data;
	char tn[32], line[160];
	thread_name(tn, sizeof(tn));
	snprintf(line, sizeof(line), "disabled %s %s\n", h->name, tn);
	log_line(line);
}

static int round_no;

NOINLINE int a_alloc(void)
{
	int n = 0;
	uint64_t base = (uint64_t)round_no * 1000;
	for (int i = 0; i < 10; i++)
		n += AHeapProfile_reportAllocation(heaps[0].id, base + i, 5000);
	for (int i = 0; i < 4; i++)
		AHeapProfile_reportFree(heaps[0].id, base + i);
	return n;
}

NOINLINE int b_alloc(void)
{
	int n = 0;
	uint64_t base = (uint64_t)round_no * 1000;
	for (int i = 0; i < 3; i++)
		n += AHeapProfile_reportAllocation(heaps[1].id, base + i,
		                                   10000);
	return n;
}

NOINLINE int c_alloc(void)
{
	int n = 0;
	uint64_t base = (uint64_t)round_no * 1000;
	for (int i = 0; i < 2; i++)
		n += AHeapProfile_reportAllocation(heaps[2].id, base + i, 8192);
	return n;
}

static void one_round(void)
{
	char line[96];
	int a = a_alloc(), b = b_alloc(), c = c_alloc();
	round_no++;
	snprintf(line, sizeof(line), "reported %d %d %d\n", a, b, c);
	log_line(line);
}

static int exists(const char *name)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

static void put_file(const char *name)
{
	char p[4096], t[4200];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	snprintf(t, sizeof(t), "%s.tmp", p);
	int fd = open(t, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	rename(t, p);
}

static void remove_file(const char *name)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	unlink(p);
}

int main(int argc, char **argv)
{
	bool closefds = argc > 2 && !strcmp(argv[2], "closefds");
	if (argc < 3 ||
	    (strcmp(argv[2], "run") && strcmp(argv[2], "wait") && !closefds) ||
	    (strcmp(argv[2], "run") && argc < 4)) {
		fprintf(stderr, "usage: api_callbacks LOG run | LOG wait DIR "
		                "| LOG closefds DIR\n");
		return 2;
	}
	log_path = argv[1];
	for (int i = 0; i < 3; i++) {
		AHeapInfo *info = AHeapInfo_create(heaps[i].name);
		AHeapInfo_setEnabledCallback(info, on_enable, &heaps[i]);
		AHeapInfo_setDisabledCallback(info, on_disable, &heaps[i]);
		heaps[i].id = AHeapProfile_registerHeap(info);
		char line[96];
		snprintf(line, sizeof(line), "registered %s %d\n",
		         heaps[i].name, heaps[i].enables);
		log_line(line);
	}
	if (closefds)
		for (int fd = 3; fd < 4096; fd++)
			close(fd);
	int rc = 0;
	if (!strcmp(argv[2], "run")) {
		one_round();
	} else {
		dir = argv[3];
		put_file("ready");
		struct timespec t0, now;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			if (exists("exit"))
				break;
			if (exists("go")) {
				remove_file("go");
				remove_file("allocated");
				one_round();
				put_file("allocated");
			}
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - t0.tv_sec > 30) {
				rc = 3;
				break;
			}
			struct timespec d = {0, 5 * 1000 * 1000};
			nanosleep(&d, NULL);
		}
	}
	log_line("exit\n");
	return rc;
}
