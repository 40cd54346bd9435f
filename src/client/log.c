/*
 * Messages from inside the profiled program: formatted into a fixed stack
 * buffer and written to fd 2 with one write(2), never through stdio.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"

void client_log(const char *msg, const char *detail)
{
	int saved = errno;
	char buf[512];
	size_t n = 0;
	const char *parts[] = {"heapprof: ", msg, detail ? ": " : "",
	                       detail ? detail : "", "\n"};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		size_t len = strlen(parts[i]);
		if (len > sizeof(buf) - 1 - n)
			len = sizeof(buf) - 1 - n;
		memcpy(buf + n, parts[i], len);
		n += len;
	}
	ssize_t w = write(2, buf, n);
	(void)w;
	errno = saved;
}
