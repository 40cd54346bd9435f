/*
 * The one error-message format of the heapprof command (see err.h): a
 * single line per error, prefixed with the subsystem, so scripts and users
 * can tell which part failed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util/err.h"

static __thread hp_log_fn log_fn;
static __thread void *log_arg;

void hp_log_hook(hp_log_fn fn, void *arg)
{
	log_fn = fn;
	log_arg = fn ? arg : NULL;
}

void hp_log_hook_get(hp_log_fn *fn, void **arg)
{
	*fn = log_fn;
	*arg = log_arg;
}

static void emit(const char *line)
{
	int e = errno;
	if (log_fn)
		log_fn(log_arg, line);
	else
		fputs(line, stderr);
	errno = e;
}

void hp_log(const char *fmt, ...)
{
	/* A path (PATH_MAX) and the words around it fit. */
	char line[4352];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* A cut line still ends its line. */
	if (n >= (int)sizeof(line))
		line[sizeof(line) - 2] = '\n';
	emit(line);
}

void hp_log_errno(const char *what)
{
	int e = errno;
	hp_log("%s: %s\n", what, strerror(e));
	errno = e;
}

void hp_err(const char *subsys, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	hp_log("heapprof: %s: %s\n", subsys, msg);
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
