/*
 * The interposed allocation functions.  Each one calls the real allocator
 * and, only while hp_malloc_on (a session profiles libc.malloc), tells the
 * recorder.  When the library is loaded but not profiling, a hook costs one
 * predictable branch and an indirect call.
 *
 * Bootstrap: the real functions are found with dlsym(RTLD_NEXT).  Until
 * then every pointer below points at a boot_* function that resolves them
 * first.  dlsym itself may call calloc/malloc; those nested calls are
 * served from a small static pool, and free/realloc switch to pool-aware
 * versions only if the pool was ever used.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"

#define CALLER() ((uintptr_t)__builtin_return_address(0))

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*valloc_fn)(size_t);

static void *boot_malloc(size_t n);
static void boot_free(void *p);
static void *boot_calloc(size_t n, size_t m);
static void *boot_realloc(void *p, size_t n);
static void *boot_memalign(size_t a, size_t n);
static int boot_posix_memalign(void **out, size_t a, size_t n);
static void *boot_aligned_alloc(size_t a, size_t n);
static void *boot_valloc(size_t n);
static void *boot_pvalloc(size_t n);

static malloc_fn real_malloc = boot_malloc;
static free_fn real_free = boot_free;
static calloc_fn real_calloc = boot_calloc;
static realloc_fn real_realloc = boot_realloc;
static memalign_fn real_memalign = boot_memalign;
static posix_memalign_fn real_posix_memalign = boot_posix_memalign;
static memalign_fn real_aligned_alloc = boot_aligned_alloc;
static valloc_fn real_valloc = boot_valloc;
static valloc_fn real_pvalloc = boot_pvalloc;

/* The allocator underneath, once resolved (never the pool wrappers). */
static free_fn next_free;
static realloc_fn next_realloc;

/*
 * A program whose executable defines malloc and free itself: every call of
 * the program and of its libraries reaches its own allocator (the
 * executable comes first in the lookup, before this library), and bare,
 * libstdc++'s operator new does too.  Ours must not send new to glibc and
 * delete to glibc's free then: operator new and delete call the
 * program's functions, found by a global lookup, and record nothing (no
 * hook of ours sees that allocator's calls either).  NULL: malloc is ours.
 */
static malloc_fn own_malloc;
static free_fn own_free;
static memalign_fn own_aligned_alloc;

/* ---- bootstrap pool ------------------------------------------------- */

static _Alignas(64) unsigned char pool[64 * 1024];
static size_t pool_used;
static int resolving;

static void *pool_alloc(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	size_t start = (pool_used + sizeof(size_t) + align - 1) & ~(align - 1);
	if (start + n > sizeof(pool))
		return NULL;
	*(size_t *)(pool + start - sizeof(size_t)) = n;
	pool_used = start + n;
	return pool + start; /* pool memory is zero: fine for calloc too */
}

static int in_pool(const void *p)
{
	return (const unsigned char *)p >= pool &&
	       (const unsigned char *)p < pool + sizeof(pool);
}

bool hooks_ours(const void *p)
{
	return in_pool(p);
}

static void pool_free(void *p)
{
	if (in_pool(p))
		return; /* never reused: the pool is only for bootstrap */
	next_free(p);
}

static void *pool_realloc(void *p, size_t n)
{
	if (!in_pool(p))
		return next_realloc(p, n);
	size_t old = *(size_t *)((unsigned char *)p - sizeof(size_t));
	void *q = real_malloc(n);
	if (q)
		memcpy(q, p, old < n ? old : n);
	return q;
}

#define RESOLVE(var, name)                                                     \
	do {                                                                   \
		void *f_ = dlsym(RTLD_NEXT, name);                             \
		if (f_)                                                        \
			(var) = f_;                                            \
	} while (0)

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static int fallback_posix_memalign(void **out, size_t a, size_t n)
{
	if (a % sizeof(void *) || (a & (a - 1)) || a == 0)
		return EINVAL;
	void *p = __libc_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

HP_HIDDEN void hooks_init(void);

/* Whether fn lies in another object than this library. */
static bool foreign(void *fn)
{
	Dl_info mine, theirs;
	return fn && dladdr((void *)hooks_init, &mine) && dladdr(fn, &theirs) &&
	       theirs.dli_fbase != mine.dli_fbase;
}

/* Set by the constructor of a client the collector injected (loaded by
 * dlopen, RTLD_LOCAL: not in the global scope, our exported functions
 * preempt nothing until route.c points the relocation slots at them, and
 * every global lookup of "malloc" is foreign to us without being the
 * program's own allocator).  Read before the first resolve. */
static bool injected;

static void find_own_allocator(memalign_fn next_aligned)
{
	if (injected)
		return; /* hooks_routed decides, from what got.c found */
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	void *f = dlsym(RTLD_DEFAULT, "free");
	if (!foreign(m) || !foreign(f))
		return;
	void *a = dlsym(RTLD_DEFAULT, "aligned_alloc");
	own_aligned_alloc = foreign(a) ? (memalign_fn)a : next_aligned;
	own_free = (free_fn)f;
	own_malloc = (malloc_fn)m;
}

static void hooks_resolve(void)
{
	if (resolving)
		return;
	resolving = 1;
	/* glibc's own entry points are the fallback if dlsym finds nothing. */
	malloc_fn m = __libc_malloc;
	free_fn f = __libc_free;
	calloc_fn c = __libc_calloc;
	realloc_fn r = __libc_realloc;
	memalign_fn ma = __libc_memalign;
	posix_memalign_fn pm = fallback_posix_memalign;
	memalign_fn aa = __libc_memalign;
	valloc_fn va = __libc_valloc;
	valloc_fn pv = __libc_pvalloc;
	RESOLVE(m, "malloc");
	RESOLVE(f, "free");
	RESOLVE(c, "calloc");
	RESOLVE(r, "realloc");
	RESOLVE(ma, "memalign");
	RESOLVE(pm, "posix_memalign");
	RESOLVE(aa, "aligned_alloc");
	RESOLVE(va, "valloc");
	RESOLVE(pv, "pvalloc");
	next_free = f;
	next_realloc = r;
	real_malloc = m;
	real_calloc = c;
	real_memalign = ma;
	real_posix_memalign = pm;
	real_aligned_alloc = aa;
	real_valloc = va;
	real_pvalloc = pv;
	real_free = pool_used ? pool_free : f;
	real_realloc = pool_used ? pool_realloc : r;
	find_own_allocator(aa);
	resolving = 0;
}

HP_HIDDEN void hooks_init(void)
{
	if (real_malloc == boot_malloc)
		hooks_resolve();
}

HP_HIDDEN void hooks_set_injected(void)
{
	injected = true;
}

HP_HIDDEN bool hooks_injected(void)
{
	return injected;
}

/*
 * Where got.c stores the definition of name, for the functions whose
 * hooks call a real_* pointer (route.c): the real_* of the allocator the
 * routed slots held, which in a program with an allocator of its own is
 * not libc's.  NULL for the others (operator new and delete call malloc
 * and free).
 */
HP_HIDDEN void **hooks_real_slot(const char *name)
{
	static const struct {
		const char *name;
		void **slot;
	} reals[] = {
	        {"malloc", (void **)&real_malloc},
	        {"free", (void **)&real_free},
	        {"calloc", (void **)&real_calloc},
	        {"realloc", (void **)&real_realloc},
	        {"memalign", (void **)&real_memalign},
	        {"posix_memalign", (void **)&real_posix_memalign},
	        {"aligned_alloc", (void **)&real_aligned_alloc},
	        {"valloc", (void **)&real_valloc},
	        {"pvalloc", (void **)&real_pvalloc},
	};
	for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++)
		if (!strcmp(reals[i].name, name))
			return reals[i].slot;
	return NULL;
}

/*
 * After got.c routed the slots of an injected client: when the malloc
 * and free the slots held are not libc's (the executable or a library
 * brings an allocator of its own), operator new and delete use that
 * allocator, unrecorded, as find_own_allocator makes them do for a
 * preloaded client; the C functions are recorded, through it.
 */
HP_HIDDEN void hooks_routed(void)
{
	/* glibc's malloc is an alias of its __libc_malloc. */
	if (real_malloc == __libc_malloc || real_malloc == boot_malloc)
		return;
	own_aligned_alloc = real_aligned_alloc;
	own_free = real_free;
	own_malloc = real_malloc;
}

static void *boot_malloc(size_t n)
{
	if (resolving)
		return pool_alloc(n, 16);
	hooks_resolve();
	return real_malloc(n);
}

static void boot_free(void *p)
{
	if (in_pool(p) || !p)
		return;
	hooks_resolve();
	real_free(p);
}

static void *boot_calloc(size_t n, size_t m)
{
	if (resolving) {
		size_t t;
		if (__builtin_mul_overflow(n, m, &t))
			return NULL;
		return pool_alloc(t, 16);
	}
	hooks_resolve();
	return real_calloc(n, m);
}

static void *boot_realloc(void *p, size_t n)
{
	if (resolving) {
		void *q = pool_alloc(n, 16);
		if (q && p && in_pool(p)) {
			size_t old = *(size_t *)((unsigned char *)p -
			                         sizeof(size_t));
			memcpy(q, p, old < n ? old : n);
		}
		return q;
	}
	hooks_resolve();
	return real_realloc(p, n);
}

static void *boot_memalign(size_t a, size_t n)
{
	if (resolving)
		return pool_alloc(n, a);
	hooks_resolve();
	return real_memalign(a, n);
}

static int boot_posix_memalign(void **out, size_t a, size_t n)
{
	if (resolving) {
		*out = pool_alloc(n, a);
		return *out ? 0 : ENOMEM;
	}
	hooks_resolve();
	return real_posix_memalign(out, a, n);
}

static void *boot_aligned_alloc(size_t a, size_t n)
{
	if (resolving)
		return pool_alloc(n, a);
	hooks_resolve();
	return real_aligned_alloc(a, n);
}

static void *boot_valloc(size_t n)
{
	if (resolving)
		return pool_alloc(n, 4096);
	hooks_resolve();
	return real_valloc(n);
}

static void *boot_pvalloc(size_t n)
{
	if (resolving)
		return pool_alloc((n + 4095) & ~(size_t)4095, 4096);
	hooks_resolve();
	return real_pvalloc(n);
}

/* ---- the C allocation functions ------------------------------------- */

#define ACTIVE() atomic_load_explicit(&hp_malloc_on, memory_order_relaxed)

/*
 * malloc, calloc and operator new decide before the real call whether the
 * allocation is recorded (client_alloc_sampled): when it is not, the hook
 * is a few instructions and a tail call of the allocator; when it is, the
 * out-of-line path below calls the allocator and records the block.
 */
static __attribute__((noinline)) void *
malloc_recorded(size_t n, size_t size, uintptr_t caller, int how)
{
	void *p = real_malloc(n);
	client_alloc_recorded(p, size, caller, how);
	return p;
}

HP_EXPORT void *malloc(size_t n)
{
	int how;
	if (HP_LIKELY(!ACTIVE()) || HP_LIKELY(!(how = client_alloc_sampled(n))))
		return real_malloc(n);
	return malloc_recorded(n, n, CALLER(), how);
}

HP_EXPORT void free(void *p)
{
	if (HP_UNLIKELY(ACTIVE()) && p)
		client_on_free(p);
	real_free(p);
}

static __attribute__((noinline)) void *
calloc_recorded(size_t n, size_t m, uintptr_t caller, int how)
{
	void *p = real_calloc(n, m);
	client_alloc_recorded(p, n * m, caller, how);
	return p;
}

HP_EXPORT void *calloc(size_t n, size_t m)
{
	size_t size;
	int how;
	/* An overflowing size fails in the allocator: nothing to record. */
	if (HP_LIKELY(!ACTIVE()) || __builtin_mul_overflow(n, m, &size) ||
	    HP_LIKELY(!(how = client_alloc_sampled(size))))
		return real_calloc(n, m);
	return calloc_recorded(n, m, CALLER(), how);
}

/*
 * realloc is a free of the old block and an allocation of the new one.
 * The old block leaves the live table before the real call so that
 * another thread reusing its address cannot race with us; if the real
 * call fails the block is put back (and the trace shows nothing), else
 * the trace shows FREE(old), then ALLOC(new) if the new block is sampled.
 */
static void *realloc_tracked(void *old, size_t n, uintptr_t caller)
{
	if (!old) {
		void *p = real_realloc(NULL, n);
		if (p)
			client_on_alloc(p, n, caller);
		return p;
	}
	struct recorder_hold hold;
	if (recorder_log_hold(old, &hold)) {
		void *p = real_realloc(old, n);
		/* realloc(old, 0) that returns NULL freed old (glibc). */
		recorder_log_release(&hold, p != NULL || n == 0);
		if (p)
			client_on_alloc(p, n, caller);
		return p;
	}
	struct hp_live_v2 v;
	struct client_slot *had = recorder_take(old, &v);
	void *p = real_realloc(old, n);
	if (!p && n != 0) {
		if (had)
			recorder_put_back(had, old, &v);
		return NULL;
	}
	if (had)
		recorder_apply_free(had, (uintptr_t)old, &v);
	if (p)
		client_on_alloc(p, n, caller);
	return p;
}

HP_EXPORT void *realloc(void *old, size_t n)
{
	if (HP_LIKELY(!ACTIVE()))
		return real_realloc(old, n);
	return realloc_tracked(old, n, CALLER());
}

HP_EXPORT void *reallocarray(void *old, size_t n, size_t m)
{
	size_t t;
	if (__builtin_mul_overflow(n, m, &t)) {
		errno = ENOMEM;
		return NULL;
	}
	if (HP_LIKELY(!ACTIVE()))
		return real_realloc(old, t);
	return realloc_tracked(old, t, CALLER());
}

HP_EXPORT void *memalign(size_t a, size_t n)
{
	void *p = real_memalign(a, n);
	if (HP_UNLIKELY(ACTIVE()) && p)
		client_on_alloc(p, n, CALLER());
	return p;
}

HP_EXPORT int posix_memalign(void **out, size_t a, size_t n)
{
	int rc = real_posix_memalign(out, a, n);
	if (HP_UNLIKELY(ACTIVE()) && rc == 0 && *out)
		client_on_alloc(*out, n, CALLER());
	return rc;
}

HP_EXPORT void *aligned_alloc(size_t a, size_t n)
{
	void *p = real_aligned_alloc(a, n);
	if (HP_UNLIKELY(ACTIVE()) && p)
		client_on_alloc(p, n, CALLER());
	return p;
}

HP_EXPORT void *valloc(size_t n)
{
	void *p = real_valloc(n);
	if (HP_UNLIKELY(ACTIVE()) && p)
		client_on_alloc(p, n, CALLER());
	return p;
}

HP_EXPORT void *pvalloc(size_t n)
{
	void *p = real_pvalloc(n);
	if (HP_UNLIKELY(ACTIVE()) && p)
		client_on_alloc(p, n, CALLER());
	return p;
}

/* ---- C++ operator new / delete --------------------------------------- */
/*
 * The fast path allocates with the real malloc and records the block at
 * the caller of operator new.  When malloc fails, the real operator new
 * of libstdc++ takes over: it runs the new_handler loop and throws
 * std::bad_alloc (this file is built with -fexceptions so the exception
 * can pass through our frame); its own malloc call is recorded by our
 * malloc hook.
 */
typedef void *(*new_fn)(size_t);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_al_nt_fn)(size_t, size_t, const void *);

static void *next_sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

static void *new_fallback(const char *sym, size_t n)
{
	new_fn f = (new_fn)next_sym(sym);
	if (f)
		return f(n);
	return NULL; /* no libstdc++: behave like nothrow */
}

static void *new_nt_fallback(const char *sym, size_t n, const void *nt)
{
	new_nt_fn f = (new_nt_fn)next_sym(sym);
	return f ? f(n, nt) : NULL;
}

static void *new_al_fallback(const char *sym, size_t n, size_t a)
{
	new_al_fn f = (new_al_fn)next_sym(sym);
	return f ? f(n, a) : NULL;
}

static void *new_al_nt_fallback(const char *sym, size_t n, size_t a,
                                const void *nt)
{
	new_al_nt_fn f = (new_al_nt_fn)next_sym(sym);
	return f ? f(n, a, nt) : NULL;
}

/* Before the first resolve (operator new in a constructor that runs
 * before ours): find the allocators first, so a block is never made by
 * one allocator and freed by the other. */
static inline void resolve_first(void)
{
	if (HP_UNLIKELY(real_malloc == boot_malloc))
		hooks_resolve();
}

static inline void *new_plain(size_t n, uintptr_t caller)
{
	resolve_first();
	if (HP_UNLIKELY(own_malloc != NULL))
		return own_malloc(n ? n : 1);
	int how;
	if (HP_LIKELY(!ACTIVE()) || HP_LIKELY(!(how = client_alloc_sampled(n))))
		return real_malloc(n ? n : 1);
	return malloc_recorded(n ? n : 1, n, caller, how);
}

static inline void *new_aligned(size_t n, size_t a, uintptr_t caller)
{
	void *p = NULL;
	resolve_first();
	if (HP_UNLIKELY(own_malloc != NULL)) {
		/* As libstdc++ does: aligned_alloc wants a multiple. */
		size_t sz = n ? n : 1;
		return own_aligned_alloc(a, (sz + a - 1) & ~(a - 1));
	}
	if (a < sizeof(void *))
		a = sizeof(void *);
	if (real_posix_memalign(&p, a, n ? n : 1) != 0)
		return NULL;
	if (HP_UNLIKELY(ACTIVE()) && p)
		client_on_alloc(p, n, caller);
	return p;
}

static inline void delete_any(void *p)
{
	resolve_first();
	if (HP_UNLIKELY(own_free != NULL)) {
		own_free(p);
		return;
	}
	if (HP_UNLIKELY(ACTIVE()) && p)
		client_on_free(p);
	real_free(p);
}

/* operator new(size_t), new[](size_t) */
HP_EXPORT void *_Znwm(size_t n)
{
	void *p = new_plain(n, CALLER());
	return p ? p : new_fallback("_Znwm", n);
}
HP_EXPORT void *_Znam(size_t n)
{
	void *p = new_plain(n, CALLER());
	return p ? p : new_fallback("_Znam", n);
}
/* nothrow */
HP_EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt)
{
	void *p = new_plain(n, CALLER());
	return p ? p : new_nt_fallback("_ZnwmRKSt9nothrow_t", n, nt);
}
HP_EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *nt)
{
	void *p = new_plain(n, CALLER());
	return p ? p : new_nt_fallback("_ZnamRKSt9nothrow_t", n, nt);
}
/* aligned */
HP_EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a)
{
	void *p = new_aligned(n, a, CALLER());
	return p ? p : new_al_fallback("_ZnwmSt11align_val_t", n, a);
}
HP_EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a)
{
	void *p = new_aligned(n, a, CALLER());
	return p ? p : new_al_fallback("_ZnamSt11align_val_t", n, a);
}
HP_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a,
                                                   const void *nt)
{
	void *p = new_aligned(n, a, CALLER());
	return p ? p
	         : new_al_nt_fallback("_ZnwmSt11align_val_tRKSt9nothrow_t", n,
	                              a, nt);
}
HP_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a,
                                                   const void *nt)
{
	void *p = new_aligned(n, a, CALLER());
	return p ? p
	         : new_al_nt_fallback("_ZnamSt11align_val_tRKSt9nothrow_t", n,
	                              a, nt);
}

/* operator delete in all its forms: sized, aligned, nothrow. */
HP_EXPORT void _ZdlPv(void *p)
{
	delete_any(p);
}
HP_EXPORT void _ZdaPv(void *p)
{
	delete_any(p);
}
HP_EXPORT void _ZdlPvm(void *p, size_t n)
{
	delete_any(p);
}
HP_EXPORT void _ZdaPvm(void *p, size_t n)
{
	delete_any(p);
}
HP_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt)
{
	delete_any(p);
}
HP_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt)
{
	delete_any(p);
}
HP_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a)
{
	delete_any(p);
}
HP_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a)
{
	delete_any(p);
}
HP_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a)
{
	delete_any(p);
}
HP_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a)
{
	delete_any(p);
}
HP_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a,
                                                   const void *nt)
{
	delete_any(p);
}
HP_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a,
                                                   const void *nt)
{
	delete_any(p);
}
