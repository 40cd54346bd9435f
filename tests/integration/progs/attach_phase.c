/*
 * attach_phase [LIB]: a program for test_attach.sh to attach to while it
 * runs (heapprof record -p / -n, injected: it never loads libheapprof
 * itself), with a deterministic phase gated by a signal.
 *
 *   1. pre_alloc: 8 x malloc(5000), before any attach;
 *      prints "attach_phase: ready" (flushed) and waits in sigsuspend
 *      until the first SIGUSR1 (blocked outside sigsuspend: no race).
 *   2. the phase, exact with -i 1 (ALLOC_OBJECTS ALLOC_SPACE OBJECTS SPACE):
 *        6 of pre_alloc's blocks freed: made before the attach, they must
 *                        appear nowhere and make nothing negative
 *        ph_malloc       30 x malloc(1000), 10 freed:
 *                        30 30000 20 20000
 *        ph_calloc       12 x calloc(4, 250) = 1000 B each, all freed:
 *                        12 12000 0 0
 *        ph_realloc      malloc(100), realloc to 200, 300, 400, 500 (each a
 *                        free of the old size and an allocation of the new):
 *                        5 allocations, 100+200+300+400+500 = 1500; live 1
 *                        block of 500: 5 1500 1 500
 *        ph_memalign     6 x posix_memalign(64, 2048), 2 freed:
 *                        6 12288 4 8192
 *      with ATTACH_PHASE_FORK set: ph_fork forks a child that runs
 *      ch_child, 4 x malloc(5000), 1 freed: 4 20000 3 15000 in the
 *      child's own process (--follow-fork), and exits; the parent waits
 *      for it (nothing of the child's in the parent's rows).
 *      with LIB: dl_phase dlopens LIB (libsrc/dlib.c, RTLD_NOW), finds
 *      dlib_entry with dlsym and calls it: dlib_alloc, 8 x malloc(4444),
 *      live: 8 35552 8 35552; the library stays loaded.
 *      The whole phase live: 20 + 1 + 4 (+ 8) blocks,
 *      20000 + 500 + 8192 (+ 35552) = 28692 (64244) bytes.
 *      Prints "attach_phase: phase done" and waits for the second SIGUSR1.
 *   3. after the session (idle hooks, or none): frees every block still
 *      held, allocates and frees 100 more, prints "attach_phase: exit" and
 *      its checksum, exits 0.
 * The output is the same bare, attached, and preloaded.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile sig_atomic_t usr1;
static unsigned long sum;
static void *pre[8], *keep_m[30], *keep_r, *keep_a[6];

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

static void touch(void *p, size_t n, int c)
{
	memset(p, c, n);
	sum += ((unsigned char *)p)[n - 1] + n;
}

NOINLINE void pre_alloc(void)
{
	for (int i = 0; i < 8; i++) {
		pre[i] = malloc(5000);
		touch(pre[i], 5000, 1);
	}
}

NOINLINE void ph_malloc(void)
{
	for (int i = 0; i < 30; i++) {
		keep_m[i] = malloc(1000);
		touch(keep_m[i], 1000, 2);
	}
	for (int i = 0; i < 10; i++) {
		free(keep_m[i]);
		keep_m[i] = NULL;
	}
}

NOINLINE void ph_calloc(void)
{
	void *p[12];
	for (int i = 0; i < 12; i++) {
		p[i] = calloc(4, 250);
		sum += ((unsigned char *)p[i])[999] + 1;
	}
	for (int i = 0; i < 12; i++)
		free(p[i]);
}

NOINLINE void ph_realloc(void)
{
	char *p = malloc(100);
	touch(p, 100, 3);
	for (size_t n = 200; n <= 500; n += 100) {
		p = realloc(p, n);
		touch(p, n, 3);
	}
	keep_r = p;
}

NOINLINE void ph_memalign(void)
{
	for (int i = 0; i < 6; i++) {
		if (posix_memalign(&keep_a[i], 64, 2048) != 0)
			abort();
		touch(keep_a[i], 2048, 4);
	}
	free(keep_a[0]);
	free(keep_a[1]);
	keep_a[0] = keep_a[1] = NULL;
}

NOINLINE void ch_child(void)
{
	void *p[4];
	for (int i = 0; i < 4; i++) {
		p[i] = malloc(5000);
		touch(p[i], 5000, 6);
	}
	free(p[0]);
}

NOINLINE void ph_fork(void)
{
	pid_t c = fork();
	if (c < 0)
		abort();
	if (c == 0) {
		ch_child();
		_exit(0);
	}
	int st;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		abort();
}

NOINLINE void dl_phase(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "attach_phase: %s\n", dlerror());
		exit(4);
	}
	int (*entry)(int) = (int (*)(int))dlsym(h, "dlib_entry");
	if (!entry) {
		fprintf(stderr, "attach_phase: %s\n", dlerror());
		exit(4);
	}
	sum += (unsigned long)entry(3);
}

static void wait_usr1(sig_atomic_t n, const sigset_t *during)
{
	while (usr1 < n)
		sigsuspend(during);
}

int main(int argc, char **argv)
{
	sigset_t block, during;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &during);
	sigdelset(&during, SIGUSR1);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);

	pre_alloc();
	printf("attach_phase: ready\n");
	fflush(stdout);
	wait_usr1(1, &during);

	for (int i = 0; i < 6; i++) {
		free(pre[i]);
		pre[i] = NULL;
	}
	ph_malloc();
	ph_calloc();
	ph_realloc();
	ph_memalign();
	if (getenv("ATTACH_PHASE_FORK"))
		ph_fork();
	if (argc > 1)
		dl_phase(argv[1]);
	printf("attach_phase: phase done\n");
	fflush(stdout);
	wait_usr1(2, &during);

	for (int i = 0; i < 8; i++)
		free(pre[i]);
	for (int i = 0; i < 30; i++)
		free(keep_m[i]);
	for (int i = 0; i < 6; i++)
		free(keep_a[i]);
	free(keep_r);
	for (int i = 0; i < 100; i++) {
		void *p = malloc(64 + (size_t)i);
		touch(p, 64 + (size_t)i, 5);
		free(p);
	}
	printf("attach_phase: exit, checksum %lu\n", sum);
	return 0;
}
