/*
 * test_got's non-PIE program that takes malloc's address in its code:
 * the linker gives malloc a "canonical PLT" address (its .dynsym entry is
 * undefined with a value), which dlsym(RTLD_DEFAULT) returns and every
 * GLOB_DAT of malloc holds, while the program's own JUMP_SLOT holds
 * libc's malloc.  The hook's real function must be libc's (calling the
 * PLT entry would loop through the patched slot), and calls through the
 * PLT, through the taken address and from libc are each counted once.
 * Exit status 0 if so; SIGALRM kills it if a hook loops.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/got.h"

const struct got_entry *test_got_table(size_t *n);
unsigned long test_got_calls(int kind);
void *test_got_real(int kind);

void *(*taken)(size_t);
void *volatile sink;

__attribute__((noinline)) static void take(void)
{
	taken = malloc; /* absolute, in code: the canonical PLT entry */
}

int main(void)
{
	alarm(10);
	take();
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *libc_malloc = libc ? dlsym(libc, "malloc") : NULL;
	if (dlsym(RTLD_DEFAULT, "malloc") != (void *)taken ||
	    (void *)taken == libc_malloc) {
		printf("no canonical PLT for malloc here\n");
		return 2;
	}
	size_t n;
	const struct got_entry *tab = test_got_table(&n);
	struct got_stats st;
	if (got_patch_all(tab, n, &st) != 0)
		return 1;
	int ok = test_got_real(0) == libc_malloc;
	unsigned long m = test_got_calls(0);
	sink = malloc(10); /* the PLT */
	free(sink);
	sink = taken(20); /* the canonical entry, the PLT again */
	free(sink);
	sink = strdup("libc's GLOB_DAT: the canonical entry"); /* patched */
	free(sink);
	m = test_got_calls(0) - m;
	got_restore();
	printf("real is libc's: %d, calls: %lu (want 3), foreign %u\n", ok, m,
	       st.foreign);
	return ok && m == 3 ? 0 : 1;
}
