/*
 * heapprofd's log: one line per event, to stderr in the foreground, to
 * heapprofd.log (rotated) in the background; and the errors of its
 * startup, which go to the user (through the parent, when the daemon went
 * to the background).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon_int.h"
#include "util/clock.h"

int g_startup_fd = -1; /* background startup: errors go to parent */
char g_log_path[160];  /* background: rotated when too large */

void dlog(const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	int n = (int)strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
	n += snprintf(line + n, sizeof(line) - (size_t)n,
	              " heapprofd[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	if (n < (int)sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* A peer that makes us log a lot must not fill the disk. */
	struct stat st;
	if (g_log_path[0] && fstat(2, &st) == 0 && st.st_size > LOG_MAX_BYTES) {
		char old[sizeof(g_log_path) + 4];
		snprintf(old, sizeof(old), "%s.1", g_log_path);
		rename(g_log_path, old);
		int fd = open(g_log_path,
		              O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
		                      O_CLOEXEC,
		              0600);
		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
	}
	ssize_t w = write(2, line, (size_t)n);
	(void)w;
}

/* A startup error: one line to the user (through the parent when we went
 * to the background). */
void derr(const char *fmt, ...)
{
	char line[1024];
	int n = snprintf(line, sizeof(line), "heapprof: daemon: ");
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w =
	        write(g_startup_fd >= 0 ? g_startup_fd : 2, line, (size_t)n);
	(void)w;
}

int64_t now_ms(void)
{
	return (int64_t)hp_mono_ms();
}
