/*
 * src/client/got.c: routing a process's allocation calls to hooks by its
 * relocation slots, as in a process the collector injected the client
 * into.  got.c lives in libgot_hooks.so here (tests/unit/got/hooks.c:
 * hooks that count their calls and forward to the real functions), and
 * this program calls malloc, free, calloc and realloc through the
 * objects it links or loads: itself (PLT), libgot_plt.so (lazy PLT, two
 * slots not bound yet), libgot_gd.so (-fno-plt GOT, pointers in data and
 * in RELRO), libc's own GOT (strdup), libgot_plt_now.so (-z now, loaded
 * after the pass: got_patch_new; unloaded and loaded again;
 * libgot_plt_late.so while another pass runs), libgot_user.so and
 * libgot_user_lazy.so (RTLD_DEEPBIND next to an allocator of their own:
 * skipped, counted).  Then the lazy binder's overwrite and got_verify,
 * got_restore and a second attach, four threads in malloc/free while
 * got_patch_all runs, and while got_restore runs; and two programs of their
 * own: a non-PIE one whose malloc has a canonical PLT entry (got/canon.c), one
 * with a slot table too small (got/small.c).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/client/got.h"
#include "unit.h"

enum { T_MALLOC, T_FREE, T_CALLOC, T_REALLOC, T_KINDS };

/* libgot_hooks.so */
const struct got_entry *test_got_table(size_t *n);
unsigned long test_got_calls(int kind);
unsigned long test_got_thread_calls(int kind);
void *test_got_real(int kind);
int test_got_unpatch_lazy(const char *name);
unsigned test_got_recorded(void);
void test_got_hold(void);
void test_got_release(void);
/* libgot_plt.so */
void plt_warm(void);
void plt_sequence(void);
/* libgot_gd.so */
void gd_sequence(void);
void gd_pointers(void);

static void *volatile sink;

struct counts {
	unsigned long n[T_KINDS];
};

static struct counts now(void)
{
	struct counts c;
	for (int k = 0; k < T_KINDS; k++)
		c.n[k] = test_got_calls(k);
	return c;
}

/* The calls counted since `before`, each kind equal to the expected. */
static int delta_is(struct counts before, unsigned long m, unsigned long f,
                    unsigned long c, unsigned long r)
{
	struct counts a = now();
	unsigned long want[T_KINDS] = {m, f, c, r};
	int ok = 1;
	for (int k = 0; k < T_KINDS; k++) {
		if (a.n[k] - before.n[k] != want[k]) {
			fprintf(stderr, "kind %d: %lu calls, want %lu\n", k,
			        a.n[k] - before.n[k], want[k]);
			ok = 0;
		}
	}
	return ok;
}

/* The executable's own calls, through its PLT. */
__attribute__((noinline)) static void exe_sequence(void)
{
	void *p = malloc(11);
	sink = p;
	void *q = calloc(3, 5);
	sink = q;
	q = realloc(q, 200);
	sink = q;
	free(p);
	free(q);
}

/* libc calling its own malloc through its GOT. */
__attribute__((noinline)) static void libc_sequence(void)
{
	char *s = strdup("through libc's GOT");
	sink = s;
	free(s);
}

/* Every known sequence, counted (patched) or not. */
static int all_counted(void)
{
	struct counts b = now();
	exe_sequence();
	int ok = delta_is(b, 1, 2, 1, 1);
	b = now();
	plt_sequence();
	ok &= delta_is(b, 1, 2, 1, 1);
	b = now();
	gd_sequence();
	gd_pointers();
	ok &= delta_is(b, 2, 2, 0, 0);
	b = now();
	libc_sequence();
	ok &= delta_is(b, 1, 1, 0, 0);
	return ok;
}

static int none_counted_but_plt(void)
{
	struct counts b = now();
	exe_sequence();
	gd_sequence();
	gd_pointers();
	libc_sequence();
	return delta_is(b, 0, 0, 0, 0);
}

static int none_counted(void)
{
	struct counts b = now();
	exe_sequence();
	plt_sequence();
	gd_sequence();
	gd_pointers();
	libc_sequence();
	return delta_is(b, 0, 0, 0, 0);
}

/* LD_BIND_NOW binds every slot at load: nothing is lazy. */
static int lazy_binding(void)
{
	const char *now = getenv("LD_BIND_NOW");
	return !now || !*now;
}

static void test_before_patch(void)
{
	/* libgot_plt.so: malloc and free bound; calloc and realloc not
	 * (plt_sequence is not called before the pass). */
	plt_warm();
	CHECK(none_counted_but_plt());
}

/* Whether the mapping holding p has these permissions (/proc/self/maps). */
static int page_perms(const void *p, const char *want)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f || !p)
		return 0;
	char line[512], perms[8];
	unsigned long lo, hi;
	int ok = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    (uintptr_t)p >= lo && (uintptr_t)p < hi)
			ok = !strcmp(perms, want);
	fclose(f);
	return ok;
}

static void test_patch_all(void)
{
	size_t n;
	const struct got_entry *tab = test_got_table(&n);
	struct got_stats st;
	dlerror();
	CHECK(got_patch_all(tab, n, &st) == 0);
	/* The name no object defines was not asked of dlsym (a failed
	 * dlsym allocates its message). */
	CHECK(dlerror() == NULL);
	CHECK_EQ_U64(st.undefined, 1);
	CHECK(st.objects >= 4); /* the program, libc, plt, gd at least */
	CHECK(st.patched >= 12);
	if (lazy_binding())
		CHECK(st.lazy >= 2); /* libgot_plt.so's calloc and realloc */
	CHECK_EQ_U64(st.failed, 0);
	CHECK_EQ_U64(st.unrecorded, 0);
	CHECK_EQ_U64(test_got_recorded(), st.patched);
	/* The reals are the definitions: libc's. */
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	CHECK(libc != NULL);
	CHECK(test_got_real(T_MALLOC) == dlsym(libc, "malloc"));
	CHECK(test_got_real(T_FREE) == dlsym(libc, "free"));
	CHECK(test_got_real(T_CALLOC) == dlsym(libc, "calloc"));
	CHECK(test_got_real(T_REALLOC) == dlsym(libc, "realloc"));
	CHECK(all_counted());
	CHECK(all_counted()); /* the lazy slots patched stay ours */
	/* The RELRO pages written are read-only again. */
	void *gd = dlopen("libgot_gd.so", RTLD_NOW | RTLD_NOLOAD);
	CHECK(gd != NULL);
	CHECK(page_perms(gd ? dlsym(gd, "gd_const_free") : NULL, "r--p"));

	/* A second pass finds every slot ours. */
	CHECK(got_patch_all(tab, n, &st) == 0);
	CHECK_EQ_U64(st.patched, 0);
	CHECK(st.already >= 12);
	CHECK(all_counted());
	/* Nothing new since: got_patch_new returns at once. */
	CHECK(got_patch_new(&st) == 0);
	CHECK_EQ_U64(st.objects, 0);
}

static void test_verify(void)
{
	struct got_stats st;
	CHECK(got_verify(&st) == 0);
	CHECK_EQ_U64(st.repatched, 0);
	CHECK_EQ_U64(st.changed, 0);
	if (!lazy_binding())
		return;
	/* The loader's lazy binding stores the definition over a patch. */
	CHECK(test_got_unpatch_lazy("calloc") == 1);
	struct counts b = now();
	plt_sequence(); /* its calloc binds again: not counted */
	CHECK(delta_is(b, 1, 2, 0, 1));
	CHECK(got_verify(&st) == 0);
	CHECK_EQ_U64(st.repatched, 1);
	CHECK_EQ_U64(st.changed, 0);
	b = now();
	plt_sequence();
	CHECK(delta_is(b, 1, 2, 1, 1));
	CHECK(got_verify(&st) == 0);
	CHECK_EQ_U64(st.repatched, 0);
}

typedef void (*fn)(void);

static void test_dlopen_after(void)
{
	void *h = dlopen("libgot_plt_now.so", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h)
		return;
	fn seq = (fn)dlsym(h, "plt_sequence");
	CHECK(seq != NULL && seq != plt_sequence);
	struct counts b = now();
	seq();
	CHECK(delta_is(b, 0, 0, 0, 0)); /* bound to libc at load */
	struct got_stats st;
	CHECK(got_patch_new(&st) == 0);
	CHECK_EQ_U64(st.objects, 1);
	CHECK_EQ_U64(st.patched, 4);
	CHECK_EQ_U64(st.lazy, 0);
	CHECK_EQ_U64(st.foreign, 0);
	b = now();
	seq();
	CHECK(delta_is(b, 1, 2, 1, 1));
	CHECK(got_patch_new(&st) == 0);
	CHECK_EQ_U64(st.objects, 0);
	CHECK(all_counted());
}

/* Unloaded, then loaded again (likely at the same address, the same
 * object to got.c's identity): the dead object's slots are not touched,
 * and got_patch_new walks every object after an unload. */
static void test_dlclose_reload(void)
{
	void *h = dlopen("libgot_plt_now.so", RTLD_NOW | RTLD_NOLOAD);
	CHECK(h != NULL);
	if (!h)
		return;
	CHECK(dlclose(h) == 0); /* the NOLOAD reference */
	CHECK(dlclose(h) == 0); /* test_dlopen_after's: unloaded */
	CHECK(dlopen("libgot_plt_now.so", RTLD_NOW | RTLD_NOLOAD) == NULL);
	unsigned recorded = test_got_recorded();
	struct got_stats st;
	CHECK(got_verify(&st) == 0);
	CHECK_EQ_U64(st.repatched, 0);
	CHECK_EQ_U64(st.changed, 0);
	CHECK_EQ_U64(test_got_recorded(), recorded - 4); /* its 4 forgotten */
	h = dlopen("libgot_plt_now.so", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h)
		return;
	fn seq = (fn)dlsym(h, "plt_sequence");
	CHECK(seq != NULL);
	struct counts b = now();
	seq();
	CHECK(delta_is(b, 0, 0, 0, 0));
	CHECK(got_patch_new(&st) == 0);
	CHECK_EQ_U64(st.patched, 4);
	CHECK_EQ_U64(st.foreign, 0);
	b = now();
	seq();
	CHECK(delta_is(b, 1, 2, 1, 1));
	CHECK(all_counted());
	CHECK(got_verify(&st) == 0);
	CHECK_EQ_U64(st.repatched + st.changed + st.failed, 0);
}

/* A dlopen while another entry point runs (a library constructor's
 * dlopen, the loader's lock held): got_patch_new leaves its work to the
 * one running, which does it before it returns. */
static void test_deferred(void)
{
	void *h = dlopen("libgot_plt_late.so", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h)
		return;
	fn seq = (fn)dlsym(h, "plt_sequence");
	CHECK(seq != NULL);
	struct got_stats st;
	test_got_hold();
	CHECK(got_patch_new(&st) == 1);
	CHECK(got_verify(&st) == 1);
	struct counts b = now();
	seq();
	CHECK(delta_is(b, 0, 0, 0, 0));
	test_got_release(); /* runs the new objects' pass */
	b = now();
	seq();
	CHECK(delta_is(b, 1, 2, 1, 1));
	CHECK(got_patch_new(&st) == 0);
	CHECK_EQ_U64(st.objects, 0);
}

/* An allocator of its own, in the local scope of libraries loaded
 * RTLD_DEEPBIND: their malloc and free slots hold its functions (-z now),
 * or PLT entries not bound yet that would bind to it (lazy). */
static void test_foreign(void)
{
	int flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
	void *h = dlopen("libgot_user.so", flags);
	CHECK(h != NULL);
	flags = RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND;
	void *hl = dlopen("libgot_user_lazy.so", flags);
	CHECK(hl != NULL);
	if (!h || !hl)
		return;
	fn seq = (fn)dlsym(h, "user_sequence");
	fn seq_lazy = (fn)dlsym(hl, "user_sequence");
	CHECK(seq != NULL && seq_lazy != NULL && seq != seq_lazy);
	struct got_stats st;
	CHECK(got_patch_new(&st) == 0);
	/* libgot_user.so, libgot_user_lazy.so, libgot_own.so */
	CHECK_EQ_U64(st.objects, 3);
	CHECK_EQ_U64(st.foreign, 4);
	CHECK_EQ_U64(st.patched, 0);
	struct counts b = now();
	seq();
	seq_lazy();
	CHECK(delta_is(b, 0, 0, 0, 0));
	CHECK(all_counted());
}

static void test_restore(void)
{
	unsigned recorded = test_got_recorded();
	size_t restored = got_restore();
	CHECK_EQ_U64(restored, recorded);
	CHECK_EQ_U64(test_got_recorded(), 0);
	CHECK(none_counted());
	struct got_stats st;
	CHECK(got_patch_new(&st) == -1); /* forgotten until the next pass */
	CHECK(got_verify(&st) == 0);
	CHECK_EQ_U64(st.repatched, 0);
	CHECK(none_counted());
	/* Attached again. */
	size_t n;
	const struct got_entry *tab = test_got_table(&n);
	CHECK(got_patch_all(tab, n, &st) == 0);
	CHECK(st.patched >= 12);
	CHECK_EQ_U64(st.already, 0);
	CHECK(all_counted());
	CHECK_EQ_U64(got_restore(), st.patched);
	CHECK(none_counted());
}

/* ---- threads in malloc/free while the pass runs ------------------------ */

#define THREADS 4
#define AFTER   20000 /* iterations each thread makes after the pass */

static _Atomic unsigned long iters[THREADS];
static _Atomic int patched;

struct result {
	unsigned long total, m, f;
};

static void *storm(void *arg)
{
	int id = (int)(long)arg;
	struct result *r = calloc(1, sizeof(*r));
	unsigned long after = 0;
	while (after < AFTER) {
		int done = atomic_load(&patched);
		void *p = malloc(16 + (size_t)id);
		sink = p;
		free(p);
		atomic_fetch_add(&iters[id], 1);
		if (done)
			after++;
	}
	r->total = atomic_load(&iters[id]);
	r->m = test_got_thread_calls(T_MALLOC);
	r->f = test_got_thread_calls(T_FREE);
	return r;
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_threads(void)
{
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, storm, (void *)i) == 0);
	/* Every thread in its loop, unpatched, before the pass (10 s at
	 * most). */
	double end = seconds() + 10;
	for (int i = 0; i < THREADS; i++)
		while (atomic_load(&iters[i]) < 1000 && seconds() < end)
			sched_yield();
	for (int i = 0; i < THREADS; i++)
		CHECK(atomic_load(&iters[i]) >= 1000);
	size_t n;
	const struct got_entry *tab = test_got_table(&n);
	struct got_stats st;
	unsigned long before[THREADS], after[THREADS];
	for (int i = 0; i < THREADS; i++)
		before[i] = atomic_load(&iters[i]);
	CHECK(got_patch_all(tab, n, &st) == 0);
	for (int i = 0; i < THREADS; i++)
		after[i] = atomic_load(&iters[i]);
	CHECK(st.patched >= 12);
	atomic_store(&patched, 1);
	for (int i = 0; i < THREADS; i++) {
		void *rv = NULL;
		CHECK(pthread_join(t[i], &rv) == 0);
		struct result *r = rv;
		if (!r)
			continue;
		/* No call of an iteration done before the pass was seen,
		 * every call after it was (the iteration under way when it
		 * ended may have made one before). */
		unsigned long lo = r->total - after[i] - 1,
		              hi = r->total - before[i];
		CHECK(r->m >= lo && r->m <= hi);
		CHECK(r->f >= lo && r->f <= hi);
		CHECK(r->m >= AFTER && r->f >= AFTER);
		/* calloc above ran before the pass: the real one's block. */
		free(r);
	}
	CHECK(got_verify(&st) == 0);
	CHECK(all_counted());
	got_restore();
	CHECK(none_counted());
}

/* Four threads in malloc/free while got_restore runs. */
static _Atomic int stop;
static _Atomic unsigned long loops[THREADS];

static void *storm_on(void *arg)
{
	int id = (int)(long)arg;
	while (!atomic_load(&stop)) {
		void *p = malloc(24 + (size_t)id);
		sink = p;
		free(p);
		atomic_fetch_add(&loops[id], 1);
	}
	return NULL;
}

/* Until every thread made `more` loops more (10 s at most). */
static int wait_loops(unsigned long more)
{
	unsigned long want[THREADS];
	for (int i = 0; i < THREADS; i++)
		want[i] = atomic_load(&loops[i]) + more;
	double end = seconds() + 10;
	int ok = 1;
	for (int i = 0; i < THREADS; i++) {
		while (atomic_load(&loops[i]) < want[i] && seconds() < end)
			sched_yield();
		ok &= atomic_load(&loops[i]) >= want[i];
	}
	return ok;
}

static void test_threads_restore(void)
{
	size_t n;
	const struct got_entry *tab = test_got_table(&n);
	struct got_stats st;
	CHECK(got_patch_all(tab, n, &st) == 0);
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, storm_on, (void *)i) == 0);
	CHECK(wait_loops(1000));
	unsigned long m = test_got_calls(T_MALLOC);
	CHECK(wait_loops(1000));
	CHECK(test_got_calls(T_MALLOC) - m >= THREADS * 1000);
	CHECK_EQ_U64(got_restore(), st.patched);
	/* At most a call per thread under way through a slot read before. */
	m = test_got_calls(T_MALLOC);
	unsigned long f = test_got_calls(T_FREE);
	CHECK(wait_loops(1000));
	atomic_store(&stop, 1);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(test_got_calls(T_MALLOC) - m <= THREADS);
	CHECK(test_got_calls(T_FREE) - f <= THREADS);
	CHECK(none_counted());
}

/* Runs BUILD/tests/got/NAME; its exit status (-1: not exited; each
 * program has alarm(10)). */
static int run_prog(const char *name)
{
	char path[4096];
	ssize_t k = readlink("/proc/self/exe", path, sizeof(path) - 64);
	if (k <= 0)
		return -1;
	path[k] = 0;
	snprintf(strrchr(path, '/') + 1, 64, "got/%s", name);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	int status = 0;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* The non-PIE program of got/canon.c. */
static void test_canonical_plt(void)
{
	int rc = run_prog("got_canon");
	/* 2: the toolchain made no canonical PLT entry. */
	CHECK(rc == 0 || rc == 2);
}

/* The full slot table of got/small.c. */
static void test_table_full(void)
{
	CHECK(run_prog("got_small") == 0);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"before_patch", test_before_patch},
	        {"patch_all", test_patch_all},
	        {"verify_lazy_rebind", test_verify},
	        {"dlopen_after", test_dlopen_after},
	        {"dlclose_reload", test_dlclose_reload},
	        {"deferred_new", test_deferred},
	        {"foreign_skipped", test_foreign},
	        {"restore_and_again", test_restore},
	        {"threads", test_threads},
	        {"threads_restore", test_threads_restore},
	        {"canonical_plt", test_canonical_plt},
	        {"table_full", test_table_full},
	        {NULL, NULL},
	};
	return unit_main("got", tests);
}
