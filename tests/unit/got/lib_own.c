/*
 * test_got's allocator of its own (as jemalloc linked into a library):
 * malloc and free that forward to glibc's.  Loaded only as a dependency
 * of libgot_user.so, RTLD_DEEPBIND: not in the global scope.
 */
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

void *malloc(size_t n)
{
	return __libc_malloc(n);
}

void free(void *p)
{
	__libc_free(p);
}
