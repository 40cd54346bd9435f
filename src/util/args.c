/* A command line as one string (args.h). */
#include <stdlib.h>
#include <string.h>

#include "util/args.h"

char *hp_join_args(const char *first, int argc, char *const *argv)
{
	size_t len = 1 + (first ? strlen(first) + 1 : 0);
	int n = 0;
	for (; argc < 0 ? argv[n] != NULL : n < argc; n++)
		len += strlen(argv[n]) + 1;
	char *s = malloc(len);
	if (!s)
		return NULL;
	char *p = s;
	if (first) {
		size_t l = strlen(first);
		memcpy(p, first, l);
		p += l;
	}
	for (int i = 0; i < n; i++) {
		if (first || i > 0)
			*p++ = ' ';
		size_t l = strlen(argv[i]);
		memcpy(p, argv[i], l);
		p += l;
	}
	*p = '\0';
	return s;
}
