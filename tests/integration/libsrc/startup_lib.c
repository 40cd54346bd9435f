/*
 * startup_lib: a shared library whose constructor allocates before
 * heapprof's constructor has attached (test_startup.sh).  The loader runs
 * the constructors of a program's libraries before those of LD_PRELOAD'ed
 * ones, so every block here is made before the client can have a region.
 *
 * STARTUP_LIB_BLOCKS (default 100) x malloc(100) in sl_ctor_alloc, called
 * from the constructor sl_ctor; the first 40% are freed again inside the
 * constructor, the rest stay until exit.  At startup it also does one
 * calloc(10, 40) (sl_ctor_calloc) that stays, and one malloc(64) that
 * realloc grows to 640 (sl_ctor_realloc) and that stays.
 * STARTUP_LIB_DLSYM=1: sl_ctor_dlsym asks dlsym for a symbol nobody has;
 * glibc keeps the error's blocks until the next dlsym or dlerror of the
 * thread (the client's constructor's, right after), which frees them.
 * STARTUP_LIB_CHURN=N: last, sl_ctor_churn does free(malloc(32)) N times.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static void **kept;
static long nkept;
static char *grown;
static char *zeroed;

__attribute__((noinline)) void sl_ctor_alloc(long n)
{
	kept = calloc((size_t)n, sizeof(*kept)); /* counted: sl_ctor_alloc */
	for (long i = 0; i < n; i++) {
		kept[i] = malloc(100);
		if (kept[i])
			memset(kept[i], 1, 100);
	}
	for (long i = 0; i < n * 4 / 10; i++) {
		free(kept[i]);
		kept[i] = NULL;
	}
	nkept = n;
}

__attribute__((noinline)) void sl_ctor_calloc(void)
{
	zeroed = calloc(10, 40);
}

__attribute__((noinline)) void sl_ctor_realloc(void)
{
	grown = malloc(64);
	grown = realloc(grown, 640);
	if (grown)
		memset(grown, 2, 640);
}

__attribute__((noinline)) void sl_ctor_dlsym(void)
{
	if (dlsym(RTLD_DEFAULT, "sl_no_such_symbol_anywhere"))
		abort();
}

__attribute__((noinline)) void sl_ctor_churn(long n)
{
	for (long i = 0; i < n; i++) {
		char *p = malloc(32);
		if (p)
			p[0] = 1;
		free(p);
	}
}

__attribute__((constructor)) static void sl_ctor(void)
{
	const char *e = getenv("STARTUP_LIB_BLOCKS");
	sl_ctor_alloc(e ? atol(e) : 100);
	sl_ctor_calloc();
	sl_ctor_realloc();
	e = getenv("STARTUP_LIB_DLSYM");
	if (e && *e == '1')
		sl_ctor_dlsym();
	e = getenv("STARTUP_LIB_CHURN");
	if (e)
		sl_ctor_churn(atol(e));
}

long sl_live(void)
{
	long n = 0;
	for (long i = 0; i < nkept; i++)
		n += kept[i] != NULL;
	return n + (zeroed != NULL) + (grown != NULL);
}
