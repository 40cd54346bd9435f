/*
 * cap_nosyscall: malloc and free under a seccomp filter that allows only
 * write, exit, exit_group and rt_sigreturn (test_capture.sh).
 *
 * glibc's malloc makes no system call once its heap is big enough; a
 * profiler's hook, capture included, must make none either (sandboxed
 * programs install such filters, and any system call there kills them).
 *
 *   1. mallopt: a fixed mmap threshold (1 MiB) and a trim threshold of
 *      1 GiB, so that free() never gives memory back (no brk, madvise or
 *      munmap later);
 *   2. warm-up on the 3 threads that allocate (main and 2 workers, all
 *      created now): each makes its arena and tcache, then pre-grows its
 *      heap by 32 MiB (512 x malloc(64 KiB) in ns_warm, then all freed),
 *      and a few mallocs/frees through ns_rec, so that any one-time
 *      per-thread setup (glibc's or a profiler's) is done;
 *   3. each thread installs the filter on itself (prctl PR_SET_NO_NEW_PRIVS,
 *      then prctl PR_SET_SECCOMP, SECCOMP_MODE_FILTER, a 10-instruction BPF
 *      program; any other system call, or another architecture, is
 *      SECCOMP_RET_KILL_PROCESS: the process dies of SIGSYS);
 *   4. main makes 100000 and each worker 50000 malloc/free pairs, sizes
 *      16 B .. 64 KiB (below the mmap threshold), at call depths 5..40
 *      (ns_rec recursing down to ns_leaf), drawn from a per-thread
 *      xorshift generator; each block is touched and goes into a ring of
 *      64 slots, freeing the slot's previous block;
 *   5. a worker that is done adds to an atomic counter and ends with
 *      syscall(SYS_exit); main spins on the counter (no futex), writes its
 *      lines with write(2) and ends with syscall(SYS_exit_group, 0).
 * stdout (one write):
 *   done 200000
 *   count ns_leaf 200000 BYTES 192 LIVE_BYTES
 *   count ns_warm 1536 100663296 0 0
 *   count ns_rec 30 ... 0 0
 * (the rings' 3 x 64 blocks are still live at exit).  Exits 0; 2 when the
 * filter cannot be installed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "safe_common.h"

#define WORKERS    2
#define MAIN_PAIRS 100000
#define WORK_PAIRS 50000
#define RING       64
#define WARM_N     512
#define WARM_SIZE  (64 * 1024)

#if defined(__x86_64__)
#define NS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NS_ARCH AUDIT_ARCH_AARCH64
#else
#error "cap_nosyscall: add this architecture's AUDIT_ARCH"
#endif

static struct sc_count c_leaf = {"ns_leaf"}, c_warm = {"ns_warm"},
                       c_rec = {"ns_rec"};
static _Atomic int workers_done, workers_failed;

struct ns_thread {
	uint64_t rng;
	void *ring[RING];
	size_t ring_n[RING];
	unsigned long pairs;
};

static uint64_t next_rand(struct ns_thread *t)
{
	uint64_t x = t->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return t->rng = x;
}

static int install_filter(void)
{
	struct sock_filter f[] = {
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	                 offsetof(struct seccomp_data, arch)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NS_ARCH, 1, 0),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	        BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	                 offsetof(struct seccomp_data, nr)),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 3, 0),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 2, 0),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
	        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 0, 1),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

NOINLINE void ns_leaf(struct ns_thread *t)
{
	/* 16 .. 64 KiB, more small ones than large: 2^(4..16) + an offset */
	uint64_t r = next_rand(t);
	unsigned shift = 4 + (unsigned)(r % 13);
	size_t n = ((size_t)1 << shift) +
	           (size_t)((r >> 8) % ((size_t)1 << shift));
	if (n > WARM_SIZE)
		n = WARM_SIZE;
	int slot = (int)((r >> 32) % RING);
	if (t->ring[slot]) {
		free(t->ring[slot]);
		sc_free(&c_leaf, t->ring_n[slot]);
	}
	void *p = malloc(n);
	if (p) {
		((volatile unsigned char *)p)[0] = 1;
		((volatile unsigned char *)p)[n - 1] = 2;
	}
	sc_alloc(&c_leaf, p, n);
	t->ring[slot] = p;
	t->ring_n[slot] = p ? n : 0;
	t->pairs++;
}

/* depth levels of ns_rec above ns_leaf; warm: a block of its own. */
NOINLINE void ns_rec(struct ns_thread *t, int depth, int warm)
{
	volatile char pad[64];
	pad[0] = (char)depth;
	if (warm && depth == 1) {
		size_t n = 200;
		void *p = malloc(n);
		sc_touch(p, n);
		sc_alloc(&c_rec, p, n);
		free(p);
		sc_free(&c_rec, n);
	}
	if (depth > 1)
		ns_rec(t, depth - 1, warm);
	else if (!warm)
		ns_leaf(t);
	sc_sink += (unsigned char)pad[0];
}

NOINLINE void ns_warm(void)
{
	static _Thread_local void *blocks[WARM_N];
	for (int k = 0; k < WARM_N; k++) {
		blocks[k] = malloc(WARM_SIZE);
		sc_touch(blocks[k], 64);
		sc_alloc(&c_warm, blocks[k], WARM_SIZE);
	}
	for (int k = 0; k < WARM_N; k++) {
		free(blocks[k]);
		if (blocks[k])
			sc_free(&c_warm, WARM_SIZE);
	}
}

static void warm_up(struct ns_thread *t)
{
	ns_warm();
	for (int d = 1; d <= 10; d++)
		ns_rec(t, d, 1);
}

static void run(struct ns_thread *t, unsigned long pairs)
{
	for (unsigned long i = 0; i < pairs; i++)
		ns_rec(t, 5 + (int)(next_rand(t) % 36), 0);
}

static void *worker(void *arg)
{
	struct ns_thread *t = arg;
	warm_up(t);
	if (install_filter() != 0) {
		atomic_fetch_add(&workers_failed, 1);
		atomic_fetch_add(&workers_done, 1);
		return NULL;
	}
	run(t, WORK_PAIRS);
	atomic_fetch_add(&workers_done, 1);
	syscall(SYS_exit, 0);
	return NULL;
}

static size_t put_str(char *b, size_t at, const char *s)
{
	size_t n = strlen(s);
	memcpy(b + at, s, n);
	return at + n;
}

static size_t put_count(char *b, size_t at, const struct sc_count *c)
{
	char line[160];
	snprintf(line, sizeof(line), "count %s %ld %ld %ld %ld\n", c->name,
	         c->ao, c->as, c->o, c->s);
	return put_str(b, at, line);
}

int main(void)
{
	static struct ns_thread th[1 + WORKERS];
	pthread_t tid[WORKERS];
	char line[64];

	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	for (int k = 0; k <= WORKERS; k++)
		th[k].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1);
	warm_up(&th[0]);
	/* snprintf once before the filter, in case it sets anything up */
	snprintf(line, sizeof(line), "%lu", 12345ul);
	for (int k = 0; k < WORKERS; k++) {
		if (pthread_create(&tid[k], NULL, worker, &th[1 + k]) != 0) {
			fprintf(stderr,
			        "cap_nosyscall: pthread_create failed\n");
			return 2;
		}
		pthread_detach(tid[k]);
	}
	fflush(stdout);
	if (install_filter() != 0) {
		fprintf(stderr,
		        "cap_nosyscall: cannot install the seccomp filter: "
		        "%s\n",
		        strerror(errno));
		return 2;
	}
	run(&th[0], MAIN_PAIRS);
	while (atomic_load(&workers_done) < WORKERS)
		__asm__ volatile(
		        "" ::
		                : "memory"); /* no futex, no sched_yield */

	char out[1024];
	size_t at = 0;
	if (atomic_load(&workers_failed)) {
		at = put_str(out, at,
		             "a worker could not install the filter\n");
		if (write(2, out, at) < 0)
			at = 0;
		syscall(SYS_exit_group, 2);
	}
	unsigned long pairs = 0;
	for (int k = 0; k <= WORKERS; k++)
		pairs += th[k].pairs;
	snprintf(line, sizeof(line), "done %lu\n", pairs);
	at = put_str(out, at, line);
	at = put_count(out, at, &c_leaf);
	at = put_count(out, at, &c_warm);
	at = put_count(out, at, &c_rec);
	if (write(1, out, at) != (ssize_t)at)
		syscall(SYS_exit_group, 1);
	syscall(SYS_exit_group, 0);
	return 0;
}
