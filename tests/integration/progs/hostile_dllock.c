/*
 * hostile_dllock LIB: a lock order the program keeps and heapprof must not
 * break.  Thread A enumerates the loaded objects with dl_iterate_phdr,
 * which holds the loader's lock while its callback runs; the callback
 * takes the program's mutex M.  Thread B holds M and calls into LIB, a
 * library dlopened after the start, whose code allocates.  Bare, B's
 * malloc never touches the loader's lock: B returns, drops M, A goes on.
 * A profiler that records B's new stack by asking dl_iterate_phdr for the
 * new library waits for A's loader lock while A waits for B's M: both
 * hang (it did, every run at -i 1, before modules.c found objects with
 * _dl_find_object).
 *
 * Prints:
 *   count dlib_alloc 8 35552 8 35552
 *   lock order kept
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static atomic_int b_holds_m, a_in_callback;
static int (*dlib_entry)(int);

/* Waits (1 ms steps, at most 10 s) until *flag is set. */
static int wait_flag(atomic_int *flag)
{
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < 10000; i++) {
		if (atomic_load(flag))
			return 0;
		nanosleep(&ms, NULL);
	}
	return -1;
}

static int callback(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	/* Under the loader's lock: now B may call into the library. */
	atomic_store(&a_in_callback, 1);
	pthread_mutex_lock(&m);
	pthread_mutex_unlock(&m);
	return 1; /* the first object is enough */
}

static void *thread_a(void *arg)
{
	(void)arg;
	if (wait_flag(&b_holds_m) != 0)
		return (void *)1;
	dl_iterate_phdr(callback, NULL);
	return NULL;
}

static void *thread_b(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&m);
	atomic_store(&b_holds_m, 1);
	void *rc = NULL;
	if (wait_flag(&a_in_callback) != 0)
		rc = (void *)1;
	else
		dlib_entry(3); /* 8 x malloc(4444) from a new object */
	pthread_mutex_unlock(&m);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: hostile_dllock LIB\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	*(void **)&dlib_entry = dlsym(h, "dlib_entry");
	if (!dlib_entry) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 2;
	}
	pthread_t a, b;
	void *ra = NULL, *rb = NULL;
	if (pthread_create(&a, NULL, thread_a, NULL) != 0 ||
	    pthread_create(&b, NULL, thread_b, NULL) != 0) {
		fprintf(stderr, "pthread_create failed\n");
		return 2;
	}
	pthread_join(a, &ra);
	pthread_join(b, &rb);
	if (ra || rb) {
		fprintf(stderr, "a thread timed out\n");
		return 3;
	}
	/* dlib_alloc keeps its 8 blocks: they are live at exit. */
	printf("count dlib_alloc 8 35552 8 35552\n");
	printf("lock order kept\n");
	return 0;
}
