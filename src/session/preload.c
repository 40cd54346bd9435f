/*
 * The LD_PRELOAD entry for the client library, for every ABI a profiled
 * program may start.
 *
 * The environment `record` gives its command passes on to whatever that
 * command runs, 32-bit programs included, whose loader cannot use a 64-bit
 * library and says so on their stderr ("wrong ELF class").  So where the
 * build (or the install) has a per-ABI tree beside the library,
 *     DIR/heapprof-abi/lib/x86_64-linux-gnu/libheapprof.so.1  (-> DIR's)
 *     DIR/heapprof-abi/lib/i386-linux-gnu/libheapprof.so.1    (32-bit, empty)
 *     DIR/heapprof-abi/lib32/libheapprof.so.1                 (-> the same)
 * the entry is DIR/heapprof-abi/$LIB/libheapprof.so.1: each loader expands
 * $LIB to its own library directory (on Debian, lib/x86_64-linux-gnu; for
 * 32-bit programs lib/i386-linux-gnu with a multiarch i386 libc, lib32
 * with libc6-i386) and finds a library of its own class.  The 32-bit one
 * hooks nothing: such a program runs as bare, unprofiled.  Without the tree
 * (another layout of $LIB, a library moved by hand) the entry is the
 * library's path, as before.
 */
#include <dlfcn.h>
#include <gnu/lib-names.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/session_int.h"

/* What this process's loader expands $LIB to: the directory its libc was
 * loaded from, without the leading "/" or "/usr/" (lib/x86_64-linux-gnu
 * on Debian, lib64 elsewhere). */
static int lib_token_value(char *out, size_t len)
{
	void *h = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
	void *sym = h ? dlsym(h, "printf") : NULL;
	Dl_info info;
	int ok = sym && dladdr(sym, &info) && info.dli_fname;
	if (h)
		dlclose(h);
	if (!ok)
		return -1;
	const char *p = info.dli_fname;
	if (strncmp(p, "/usr/", 5) == 0)
		p += 5;
	else if (*p == '/')
		p++;
	const char *slash = strrchr(p, '/');
	if (!slash || (size_t)(slash - p) >= len)
		return -1;
	memcpy(out, p, (size_t)(slash - p));
	out[slash - p] = '\0';
	return 0;
}

void preload_entry(const char *lib, char *out, size_t len)
{
	snprintf(out, len, "%s", lib);
	const char *base = strrchr(lib, '/');
	char token[PATH_MAX];
	if (!base || lib_token_value(token, sizeof(token)) != 0)
		return;
	char probe[PATH_MAX];
	int n = snprintf(probe, sizeof(probe), "%.*s/heapprof-abi/%s%s",
	                 (int)(base - lib), lib, token, base);
	struct stat a, b;
	if (n <= 0 || (size_t)n >= sizeof(probe) || stat(probe, &a) != 0 ||
	    stat(lib, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return; /* no tree, or not this library in it */
	n = snprintf(out, len, "%.*s/heapprof-abi/$LIB%s", (int)(base - lib),
	             lib, base);
	if (n <= 0 || (size_t)n >= len)
		snprintf(out, len, "%s", lib);
}
