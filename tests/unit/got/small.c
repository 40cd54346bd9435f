/*
 * test_got's program for a full slot table: libgot_hooks_small.so is
 * got.c built with room for 4 slots.  The program's own 4 (malloc, free,
 * calloc, realloc through its PLT, walked first) are recorded, libc's
 * (malloc, free, calloc, realloc) are patched but not recorded: counted,
 * never verified nor restored.  Exit status 0 if so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/got.h"

const struct got_entry *test_got_table(size_t *n);
unsigned long test_got_calls(int kind);
unsigned test_got_recorded(void);

void *volatile sink;

/* malloc through the program's PLT, and through libc's GOT. */
static unsigned long counted(void)
{
	unsigned long m = test_got_calls(0);
	sink = malloc(10);
	free(sink);
	sink = calloc(1, 10);
	sink = realloc(sink, 100);
	free(sink);
	sink = strdup("libc");
	free(sink);
	return test_got_calls(0) - m;
}

int main(void)
{
	alarm(10);
	counted(); /* every slot bound */
	size_t n;
	const struct got_entry *tab = test_got_table(&n);
	struct got_stats st;
	int ok = got_patch_all(tab, n, &st) == 0;
	ok &= st.patched == 8 && st.unrecorded == 4;
	ok &= test_got_recorded() == 4;
	ok &= counted() == 2;
	struct got_stats v;
	ok &= got_verify(&v) == 0 && !v.repatched && !v.changed;
	size_t restored = got_restore();
	ok &= restored == 4;
	ok &= counted() == 1; /* libc's, not restored */
	printf("patched %u unrecorded %u restored %zu: %s\n", st.patched,
	       st.unrecorded, restored, ok ? "ok" : "FAIL");
	return ok ? 0 : 1;
}
