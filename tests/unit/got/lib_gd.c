/*
 * test_got's library that reaches malloc and free through its GOT
 * (built with -fno-plt and -z now: R_X86_64_GLOB_DAT) and through
 * function pointers in its data (R_X86_64_64), one writable, one in
 * RELRO.
 */
#include <stdlib.h>

void *volatile gd_sink;
void *(*volatile gd_ptr)(size_t) = malloc;
void (*const volatile gd_const_free)(void *) = free;

/* malloc and free through the GOT. */
void gd_sequence(void)
{
	gd_sink = malloc(20);
	free(gd_sink);
}

/* malloc and free through the pointers in data. */
void gd_pointers(void)
{
	gd_sink = gd_ptr(30);
	gd_const_free(gd_sink);
}
