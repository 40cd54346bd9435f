/*
 * `record -- CMD`: the command started with the client preloaded and the
 * collector's socket in its environment (session_int.h).
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/session_int.h"
#include "util/proc.h"
#include "util/err.h"

/* Path of libheapprof.so: next to the heapprof binary, or under ../lib. */
int session_find_library(char *out, size_t len)
{
	const char *env = getenv("HEAPPROF_LIB");
	if (env && *env) {
		if (access(env, R_OK) != 0) {
			hp_log(PFX "HEAPPROF_LIB=%s is not readable\n", env);
			return -1;
		}
		snprintf(out, len, "%s", env);
		return 0;
	}
	char self[PATH_MAX];
	if (proc_exe(getpid(), self, sizeof(self)) < 0 || !self[0])
		return -1;
	char *dir = dirname(self);
	/* Next to it (the build directory), in ../lib (make install), in
	 * ../lib/MULTIARCH (Debian's package); the versioned name first:
	 * the unversioned link is the -dev package's. */
#ifndef HP_MULTIARCH
#define HP_MULTIARCH ""
#endif
	/* Each takes the directory, then the multiarch name ("%.0s": not
	 * used). */
	const char *cands[] = {
	        "%s/libheapprof.so.1%.0s", "%s/../lib/libheapprof.so.1%.0s",
	        "%s/../lib/%s/libheapprof.so.1", "%s/libheapprof.so%.0s",
	        "%s/../lib/libheapprof.so%.0s"};
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		snprintf(out, len, cands[i], dir, HP_MULTIARCH);
		if (access(out, R_OK) == 0) {
			char real[PATH_MAX];
			if (realpath(out, real))
				snprintf(out, len, "%s", real);
			return 0;
		}
	}
	hp_log(PFX "cannot find libheapprof.so next to %s (set "
	           "HEAPPROF_LIB)\n",
	       self);
	return -1;
}

/* "Seccomp_filters:" of our status (0 if none or unknown). */
static long seccomp_filters_of_self(void)
{
	struct proc_status st;
	return proc_status(getpid(), &st) == 0 ? st.seccomp : 0;
}

const char *session_follow_env(const struct session *s)
{
	if (s->cfg->follow_fork || s->cfg->follow_exec)
		return "1";
	return s->cfg->no_follow_exec ? NULL : HP_FOLLOW_OWN_EXEC;
}

int session_setup_child_env(const char *path, const char *sock,
                            const char *follow)
{
	char lib[PATH_MAX + 32];
	preload_entry(path, lib, sizeof(lib));
	const char *old = getenv("LD_PRELOAD");
	char *v;
	if (old && *old) {
		if (asprintf(&v, "%s:%s", lib, old) < 0)
			return -1;
	} else {
		v = strdup(lib);
		if (!v)
			return -1;
	}
	int rc = setenv("LD_PRELOAD", v, 1) | setenv(HP_ENV_SOCKET, sock, 1);
	/* Our own seccomp filters (a container's), inherited by the
	 * command: the client tells the program's own from them. */
	char nf[24];
	snprintf(nf, sizeof(nf), "%ld", seccomp_filters_of_self());
	rc |= setenv(HP_ENV_SECCOMP, nf, 1);
	/* The client takes these variables out of the program's environment
	 * unless it must pass them on: the new images of followed processes
	 * need them (src/client/client.c, env_scrub; src/client/exec.c). */
	if (follow)
		rc |= setenv(HP_ENV_FOLLOW, follow, 1);
	else
		rc |= unsetenv(HP_ENV_FOLLOW);
	free(v);
	return rc;
}

/* In the child: its own process group, then wait for the go byte (the
 * parent may give the group the terminal meanwhile): 'g' to run with the
 * client library lib preloaded and the collector's socket sock, 'b' to
 * run bare (no profile: its environment untouched); record's signal
 * state undone, exec; if exec fails, send its errno through err_fd
 * (close-on-exec, so success closes it silently).  Never returns. */
void session_child_run(const struct session *s, int go_fd, int err_fd,
                       const sigset_t *oldmask, char *const *argv,
                       const char *lib, const char *sock)
{
	/* The parent does it too: whichever runs first. */
	setpgid(0, 0);
	char b;
	ssize_t n;
	do
		n = read(go_fd, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		_exit(127); /* parent gave up; it already said why */
	close(go_fd);
	if (b == 'g' &&
	    session_setup_child_env(lib, sock, session_follow_env(s)))
		_exit(127);
	sigaction(SIGXFSZ, &s->old_xfsz, NULL);
	sigaction(SIGPIPE, &s->old_pipe, NULL);
	if (s->ttou_saved)
		sigaction(SIGTTOU, &s->old_ttou, NULL);
	sigprocmask(SIG_SETMASK, oldmask, NULL);
	execvp(argv[0], argv);
	int e = errno;
	ssize_t w = write(err_fd, &e, sizeof(e));
	(void)w;
	_exit(e == ENOENT ? 127 : 126);
}

/* In the parent: 0 once the child has exec'd, else the exec errno. */
int session_exec_result(int err_fd)
{
	int e = 0;
	ssize_t n;
	do
		n = read(err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(e) ? e : 0;
}
