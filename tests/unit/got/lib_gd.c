/*
 * test_got's library that reaches malloc and free through its GOT
 * (built with -fno-plt and -z now: R_X86_64_GLOB_DAT, in RELRO) and
 * through function pointers in its data (R_X86_64_64): malloc's in .data,
 * free's in .data.rel.ro (RELRO).
 */
#include <stdlib.h>

void *volatile gd_sink;
void *(*volatile gd_ptr)(size_t) = malloc;
void (*const gd_const_free)(void *) = free;
/* Read through this, gd_const_free's value is not folded into a call of
 * free. */
void (*const *volatile gd_const_free_at)(void *) = &gd_const_free;

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
	(*gd_const_free_at)(gd_sink);
}
