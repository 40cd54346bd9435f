/*
 * dlopener LIB: dlopen(LIB), call its dlib_entry (which allocates 8 x
 * malloc(4444) in dlib_alloc, kept live), then dlclose it, so the library is
 * unmapped before the profile is written: its frames must still carry their
 * names and the mapping its path and build ID.  Also dlsym()s a symbol that
 * does not exist (dlerror allocates).  Exits 15 on success.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE int call_lib(void *h)
{
	int (*entry)(int) = (int (*)(int))dlsym(h, "dlib_entry");
	if (!entry) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return -1;
	}
	return entry(3);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: dlopener LIB\n");
		return 1;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	int r = call_lib(h);
	if (r < 0)
		return 1;
	if (dlsym(h, "no_such_symbol_here") == NULL)
		(void)dlerror();
	if (dlclose(h) != 0) {
		fprintf(stderr, "dlclose: %s\n", dlerror());
		return 1;
	}
	printf("dlopener: done\n");
	return 15;
}
