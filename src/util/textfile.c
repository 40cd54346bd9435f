/*
 * Reading the small text files an operator names (textfile.h): a regular
 * file only, never more than a bound, a secret only when it is private;
 * and quoting what they hold in a message without letting it act on the
 * terminal.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/textfile.h"

static int fail(char *why, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static int fail(char *why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, HP_TEXT_WHY_MAX, fmt, ap);
	va_end(ap);
	return -1;
}

/* max as a person reads it: "1 MiB", "64 KiB", "100 bytes". */
static void fmt_max(char *buf, size_t len, size_t max)
{
	if (max >= (1u << 20) && max % (1u << 20) == 0)
		snprintf(buf, len, "%zu MiB", max >> 20);
	else if (max >= 1024 && max % 1024 == 0)
		snprintf(buf, len, "%zu KiB", max >> 10);
	else
		snprintf(buf, len, "%zu bytes", max);
}

/* Open path for reading, a regular file only.  An fd, or -1 (why set). */
static int open_regular(const char *path, struct stat *st, char *why)
{
	/* stat(2) first names the kind without opening anything: the
	 * open(2) of a device may act. */
	if (stat(path, st) < 0)
		return fail(why, "%s", strerror(errno));
	if (!S_ISREG(st->st_mode))
		return fail(why, "not a regular file (%s)",
		            hp_file_kind(st->st_mode));
	/* O_NONBLOCK: a FIFO put there since the stat does not block the
	 * open; the descriptor is checked again. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return fail(why, "%s", strerror(errno));
	if (fstat(fd, st) < 0) {
		fail(why, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		fail(why, "not a regular file (%s)", hp_file_kind(st->st_mode));
		close(fd);
		return -1;
	}
	return fd;
}

int hp_text_read(const char *path, size_t max, unsigned flags, char **out,
                 size_t *len, char *why)
{
	bool in = (flags & HP_TEXT_STDIN) && !strcmp(path, "-");
	struct stat st;
	int fd = in ? STDIN_FILENO : open_regular(path, &st, why);

	*out = NULL;
	*len = 0;
	if (fd < 0)
		return -1;
	/* ssh's rule for a private key: no permission at all for group or
	 * others (who could read the secret, or write their own). */
	if (!in && (flags & HP_TEXT_PRIVATE) && (st.st_mode & 077)) {
		close(fd);
		return fail(why,
		            "permissions %04o are too open: a secret must be"
		            " for its owner only, no access for group or"
		            " others (chmod 600 it)",
		            (unsigned)(st.st_mode & 07777));
	}
	/* Counted as read, not from st_size: a /proc file says 0, a file
	 * may grow while it is read. */
	size_t cap = max < 4096 ? max + 1 : 4096, n = 0;
	char *b = malloc(cap + 1);
	int err = b ? 0 : ENOMEM;
	while (!err) {
		if (n == cap) {
			size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			char *nb = ncap > cap ? realloc(b, ncap + 1) : NULL;
			if (!nb) {
				err = ncap > cap ? ENOMEM : EFBIG;
				break;
			}
			b = nb;
			cap = ncap;
		}
		ssize_t k = read(fd, b + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			err = errno;
		else if (k == 0)
			break;
		else
			n += (size_t)k;
	}
	if (!in)
		close(fd);
	if (!err && n > max)
		err = EFBIG;
	if (err) {
		char m[32];
		fmt_max(m, sizeof(m), max);
		free(b);
		return err == EFBIG ? fail(why, "larger than %s", m)
		                    : fail(why, "%s", strerror(err));
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

static bool is_control(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

char *hp_text_escape(char *buf, size_t len, const char *s, size_t n)
{
	size_t o = 0, i;

	if (!len)
		return buf;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[8];
		size_t k;
		if (is_control(c))
			k = (size_t)snprintf(e, sizeof(e), "\\x%02x", c);
		else if (c == '\\')
			k = (size_t)snprintf(e, sizeof(e), "\\\\");
		else
			k = (size_t)snprintf(e, sizeof(e), "%c", c);
		/* room for this, and "..." if more follows */
		if (o + k + (i + 1 < n ? 3 : 0) >= len)
			break;
		memcpy(buf + o, e, k);
		o += k;
	}
	if (i < n && o + 3 < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

const char *hp_text_control(const char *s, size_t n, const char *allowed)
{
	for (size_t i = 0; i < n; i++)
		if (is_control((unsigned char)s[i]) &&
		    !(s[i] && strchr(allowed, s[i])))
			return s + i;
	return NULL;
}
