/*
 * The one error-message format of the heapprof command (see err.h): a
 * single line per error, prefixed with the subsystem, so scripts and users
 * can tell which part failed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include "util/err.h"

void hp_err(const char *subsys, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One fprintf so concurrent writers do not interleave inside a line. */
	fprintf(stderr, "heapprof: %s: %s\n", subsys, msg);
}

const char *hp_file_kind(unsigned int st_mode)
{
	mode_t m = (mode_t)st_mode;
	return S_ISDIR(m)    ? "a directory"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	       : S_ISFIFO(m) ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISLNK(m)  ? "a symbolic link"
	                     : "a special file";
}
