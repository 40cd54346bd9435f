/*
 * test_got's library that calls the allocator through its PLT (built
 * three times: lazy binding, libgot_plt.so; -z now, libgot_plt_now.so and
 * libgot_plt_late.so).
 */
#include <stdlib.h>

void *volatile plt_sink;

/* Binds malloc and free (lazy build): calloc and realloc stay unbound. */
void plt_warm(void)
{
	plt_sink = malloc(8);
	free(plt_sink);
}

/* One call each of malloc, calloc and realloc, two of free. */
void plt_sequence(void)
{
	void *p = malloc(10);
	plt_sink = p;
	void *q = calloc(2, 8);
	plt_sink = q;
	q = realloc(q, 100);
	plt_sink = q;
	free(p);
	free(q);
}
