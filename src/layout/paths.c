/* The daemon's socket path (see paths.h and wire_v1.h). */
#include "layout/paths.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layout/wire_v1.h"

/* Appends s at *pos in buf of len bytes; false when it does not fit. */
static int put(char *buf, size_t len, size_t *pos, const char *s)
{
	size_t n = strlen(s);
	if (*pos + n + 1 > len)
		return 0;
	memcpy(buf + *pos, s, n + 1);
	*pos += n;
	return 1;
}

static void utoa(unsigned long v, char out[24])
{
	char tmp[24];
	int n = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < 23);
	for (int i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	out[n] = '\0';
}

int hp_daemon_paths(char *dir, size_t dirlen, char *sock, size_t socklen)
{
	char d[108];
	size_t pos = 0;
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int ok;
	if (xdg && xdg[0] == '/') {
		ok = put(d, sizeof(d), &pos, xdg) &&
		     put(d, sizeof(d), &pos, "/heapprof");
	} else {
		char uid[24];
		utoa((unsigned long)getuid(), uid);
		ok = put(d, sizeof(d), &pos, "/tmp/heapprof-") &&
		     put(d, sizeof(d), &pos, uid);
	}
	if (!ok)
		return -ENAMETOOLONG;
	if (dir) {
		size_t p = 0;
		if (!put(dir, dirlen, &p, d))
			return -ENAMETOOLONG;
	}
	if (sock) {
		size_t p = 0;
		if (!put(sock, socklen, &p, d) ||
		    !put(sock, socklen, &p, "/") ||
		    !put(sock, socklen, &p, HP_DAEMON_SOCK_NAME))
			return -ENAMETOOLONG;
	}
	return 0;
}
