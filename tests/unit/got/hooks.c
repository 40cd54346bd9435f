/*
 * test_got's stand-in for libheapprof.so: src/client/got.c compiled into
 * a library with hooks that count their calls (in total and per thread)
 * and forward to the real functions got.c found.  Being the library
 * got.c is in, it is the one object got.c never patches.
 */
#include <stdatomic.h>
#include <stddef.h>

#include "../../../src/client/got.c"

enum { T_MALLOC, T_FREE, T_CALLOC, T_REALLOC, T_KINDS };

static _Atomic unsigned long calls[T_KINDS];
static __thread unsigned long thread_calls[T_KINDS];

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *real_nothing;

static void count(int kind)
{
	atomic_fetch_add_explicit(&calls[kind], 1, memory_order_relaxed);
	thread_calls[kind]++;
}

static void *t_malloc(size_t n)
{
	count(T_MALLOC);
	return __atomic_load_n(&real_malloc, __ATOMIC_ACQUIRE)(n);
}

static void t_free(void *p)
{
	count(T_FREE);
	__atomic_load_n(&real_free, __ATOMIC_ACQUIRE)(p);
}

static void *t_calloc(size_t n, size_t m)
{
	count(T_CALLOC);
	return __atomic_load_n(&real_calloc, __ATOMIC_ACQUIRE)(n, m);
}

static void *t_realloc(void *p, size_t n)
{
	count(T_REALLOC);
	return __atomic_load_n(&real_realloc, __ATOMIC_ACQUIRE)(p, n);
}

static void t_nothing(void)
{
}

/* A name no object defines: never looked up with dlsym. */
static const struct got_entry table[] = {
        {"malloc", (void *)t_malloc, (void **)&real_malloc},
        {"free", (void *)t_free, (void **)&real_free},
        {"calloc", (void *)t_calloc, (void **)&real_calloc},
        {"realloc", (void *)t_realloc, (void **)&real_realloc},
        {"heapprof_test_defined_nowhere", (void *)t_nothing, &real_nothing},
};

const struct got_entry *test_got_table(size_t *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}

unsigned long test_got_calls(int kind)
{
	return atomic_load_explicit(&calls[kind], memory_order_relaxed);
}

unsigned long test_got_thread_calls(int kind)
{
	return thread_calls[kind];
}

void *test_got_real(int kind)
{
	void *const r[] = {(void *)real_malloc, (void *)real_free,
	                   (void *)real_calloc, (void *)real_realloc};
	return r[kind];
}

/* What the loader's lazy binding does to a fresh patch of ours: the
 * first slot recorded for `name` whose old value was an unbound PLT
 * entry gets that value back (the next call through it binds it to the
 * definition).  1 if one was found. */
int test_got_unpatch_lazy(const char *name)
{
	enter();
	int e = tab_index(name);
	for (uint32_t i = 0; e >= 0 && i < nslots; i++) {
		struct got_slot *s = &slots[i];
		if (s->entry == e && s->old != defs[e]) {
			uintptr_t hook = (uintptr_t)tab[e].hook;
			write_slot(s->addr, &hook, s->old, s->prot);
			leave();
			return 1;
		}
	}
	leave();
	return 0;
}

/* The slots recorded now. */
unsigned test_got_recorded(void)
{
	return nslots;
}

/* Another entry point running. */
void test_got_hold(void)
{
	enter();
}

void test_got_release(void)
{
	leave();
}
