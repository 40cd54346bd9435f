/*
 * The program the user meant: `heapprof record -- CMD` follows its own
 * process through exec by default (a shim, a wrapper script, `sh -c 'exec
 * python3 ...'`), so that the profile, the memory dumps and the OOM-kill
 * mark are the final program's.  Its children stay opt-in (--follow-fork).
 *
 * The constructor takes heapprof's variables out of the environment
 * (client.c, env_scrub): the program has no use for them, and every child
 * would load the library and knock on the collector.  With HEAPPROF_FOLLOW
 * set to "exec" it keeps a copy (exec_keep), and these wrappers of the
 * exec family put the variables back into the environment of an exec
 * made by the process itself (the pid the constructor ran in: not a fork
 * or vfork child, which has its own pid), so that the new image loads the
 * library and says hello to the collector as the same process.  Anything
 * else goes through untouched.
 *
 * glibc's exec functions call its internal execve directly, not through
 * the symbol, so each is wrapped: those that take the environment from
 * environ (execv, execvp, execl, execlp) run the real one with environ
 * pointing at the new array for the call (put back if it fails); those
 * given one (execve, execvpe, execle, fexecve, execveat) get the new
 * array.  The array and the merged LD_PRELOAD string are mmap'd here (an
 * exec is no allocation path, and malloc would be the program's) and
 * unmapped if the exec fails; errno is the real call's.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/client.h"
#include "layout/wire_v1.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[],
                           int);

extern char **environ;

/* "NAME=value" of each variable to put back; LD_PRELOAD's is our entry
 * alone (merged with what the new environment has). */
#define EXEC_VARS 4
static char keep_var[EXEC_VARS][PATH_MAX + 32];
static char keep_preload[PATH_MAX];
static pid_t keep_pid;
static bool keeping;

static _Atomic(void *) real_execve, real_execv, real_execvp, real_execvpe,
        real_fexecve, real_execveat;

static void keep_one(int i, const char *name, const char *value)
{
	size_t n = strlen(name), v = strlen(value);
	if (n + 1 + v + 1 > sizeof(keep_var[i]))
		return;
	memcpy(keep_var[i], name, n);
	keep_var[i][n] = '=';
	memcpy(keep_var[i] + n + 1, value, v + 1);
}

void exec_keep(const char *preload, const char *socket, const char *seccomp,
               const char *follow)
{
	if (!preload || !socket || strlen(preload) >= sizeof(keep_preload))
		return;
	memcpy(keep_preload, preload, strlen(preload) + 1);
	keep_one(0, HP_ENV_SOCKET, socket);
	if (seccomp)
		keep_one(1, HP_ENV_SECCOMP, seccomp);
	keep_one(2, HP_ENV_FOLLOW, follow);
	keep_pid = getpid();
	keeping = keep_var[0][0] != '\0';
	(void)client_real(&real_execve, "execve");
	(void)client_real(&real_execv, "execv");
	(void)client_real(&real_execvp, "execvp");
	(void)client_real(&real_execvpe, "execvpe");
	(void)client_real(&real_fexecve, "fexecve");
	(void)client_real(&real_execveat, "execveat");
}

/* Whether this exec is the process's own, to be followed. */
static bool own_exec(void)
{
	return keeping && getpid() == keep_pid;
}

static bool has_name(const char *entry, const char *var)
{
	size_t n = strcspn(var, "=");
	return strncmp(entry, var, n) == 0 && entry[n] == '=';
}

struct env_copy {
	char **env;
	size_t bytes;
};

/*
 * envp with heapprof's variables: the kept ones replace any of the same
 * name, LD_PRELOAD gets our library first (the rest of its value kept).
 * False (errno kept) if it cannot be made: the exec then goes on without
 * them, unprofiled.
 */
static bool env_with_ours(char *const *envp, struct env_copy *c)
{
	size_t n = 0;
	const char *pre = NULL;
	for (char *const *e = envp; e && *e; e++, n++)
		if (has_name(*e, "LD_PRELOAD="))
			pre = *e + sizeof("LD_PRELOAD");
	size_t pre_len = sizeof("LD_PRELOAD=") + strlen(keep_preload) +
	                 (pre && *pre ? 1 + strlen(pre) : 0);
	c->bytes = (n + EXEC_VARS + 2) * sizeof(char *) + pre_len;
	int saved = errno;
	void *m = mmap(NULL, c->bytes, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	errno = saved;
	if (m == MAP_FAILED)
		return false;
	c->env = m;
	char *ps = (char *)m + (n + EXEC_VARS + 2) * sizeof(char *);
	char *w = ps;
	memcpy(w, "LD_PRELOAD=", sizeof("LD_PRELOAD=") - 1);
	w += sizeof("LD_PRELOAD=") - 1;
	memcpy(w, keep_preload, strlen(keep_preload));
	w += strlen(keep_preload);
	if (pre && *pre) {
		*w++ = ':';
		memcpy(w, pre, strlen(pre));
		w += strlen(pre);
	}
	*w = '\0';
	size_t k = 0;
	c->env[k++] = ps;
	for (int i = 0; i < EXEC_VARS; i++)
		if (keep_var[i][0])
			c->env[k++] = keep_var[i];
	for (char *const *e = envp; e && *e; e++) {
		bool ours = has_name(*e, "LD_PRELOAD=");
		for (int i = 0; i < EXEC_VARS && !ours; i++)
			ours = keep_var[i][0] && has_name(*e, keep_var[i]);
		if (!ours)
			c->env[k++] = *e;
	}
	c->env[k] = NULL;
	return true;
}

static void env_drop(struct env_copy *c)
{
	int saved = errno;
	munmap(c->env, c->bytes);
	errno = saved;
}

HP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	execve_fn f = (execve_fn)client_real(&real_execve, "execve");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	struct env_copy c;
	if (!own_exec() || !env_with_ours(envp, &c))
		return f(path, argv, envp);
	int rc = f(path, argv, c.env);
	env_drop(&c);
	return rc;
}

HP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	execve_fn f = (execve_fn)client_real(&real_execvpe, "execvpe");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	struct env_copy c;
	if (!own_exec() || !env_with_ours(envp, &c))
		return f(file, argv, envp);
	int rc = f(file, argv, c.env);
	env_drop(&c);
	return rc;
}

HP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	fexecve_fn f = (fexecve_fn)client_real(&real_fexecve, "fexecve");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	struct env_copy c;
	if (!own_exec() || !env_with_ours(envp, &c))
		return f(fd, argv, envp);
	int rc = f(fd, argv, c.env);
	env_drop(&c);
	return rc;
}

HP_EXPORT int execveat(int dirfd, const char *path, char *const argv[],
                       char *const envp[], int flags)
{
	execveat_fn f = (execveat_fn)client_real(&real_execveat, "execveat");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	struct env_copy c;
	if (!own_exec() || !env_with_ours(envp, &c))
		return f(dirfd, path, argv, envp, flags);
	int rc = f(dirfd, path, argv, c.env, flags);
	env_drop(&c);
	return rc;
}

/* The real f(file, argv) with environ holding ours for the call. */
static int via_environ(execv_fn f, const char *file, char *const argv[])
{
	struct env_copy c;
	if (!own_exec() || !env_with_ours(environ, &c))
		return f(file, argv);
	char **was = environ;
	environ = c.env;
	int rc = f(file, argv);
	int saved = errno;
	environ = was;
	env_drop(&c);
	errno = saved;
	return rc;
}

HP_EXPORT int execv(const char *path, char *const argv[])
{
	execv_fn f = (execv_fn)client_real(&real_execv, "execv");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return via_environ(f, path, argv);
}

HP_EXPORT int execvp(const char *file, char *const argv[])
{
	execv_fn f = (execv_fn)client_real(&real_execvp, "execvp");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return via_environ(f, file, argv);
}

/* execl, execlp, execle: the arguments into an argv on the stack, as
 * glibc's own do (no mmap: in a vfork child it would be a mapping left in
 * the parent), then as execv, execvp, execve.  ARGS_COUNT counts the list
 * before the NULL; args_fill copies it with the NULL and, for execle,
 * returns the envp that follows. */
#define ARGS_COUNT(n, arg)                                                     \
	do {                                                                   \
		va_list c_;                                                    \
		va_start(c_, arg);                                             \
		for ((n) = 1; va_arg(c_, const char *); (n)++)                 \
			;                                                      \
		va_end(c_);                                                    \
	} while (0)

static char *const *args_fill(char **argv, size_t n, const char *arg0,
                              va_list ap, bool envp)
{
	argv[0] = (char *)arg0;
	for (size_t i = 1; i < n; i++)
		argv[i] = va_arg(ap, char *);
	argv[n] = va_arg(ap, char *); /* the NULL */
	return envp ? va_arg(ap, char *const *) : NULL;
}

HP_EXPORT int execl(const char *path, const char *arg, ...)
{
	size_t n;
	ARGS_COUNT(n, arg);
	char *argv[n + 1];
	va_list ap;
	va_start(ap, arg);
	(void)args_fill(argv, n, arg, ap, false);
	va_end(ap);
	return execv(path, argv);
}

HP_EXPORT int execlp(const char *file, const char *arg, ...)
{
	size_t n;
	ARGS_COUNT(n, arg);
	char *argv[n + 1];
	va_list ap;
	va_start(ap, arg);
	(void)args_fill(argv, n, arg, ap, false);
	va_end(ap);
	return execvp(file, argv);
}

HP_EXPORT int execle(const char *path, const char *arg, ...)
{
	size_t n;
	ARGS_COUNT(n, arg);
	char *argv[n + 1];
	va_list ap;
	va_start(ap, arg);
	char *const *envp = args_fill(argv, n, arg, ap, true);
	va_end(ap);
	return execve(path, argv, envp);
}
