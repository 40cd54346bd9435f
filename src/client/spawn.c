/*
 * The ways a program starts a child without running our pthread_atfork
 * handler: vfork, posix_spawn, posix_spawnp, system and popen (glibc runs
 * the last four through its own clone, with no atfork handler).  Each
 * tells the collector first (client_child_note: once per process, only
 * when the session does not follow forks), then does exactly what the
 * real function does.  `sh -c 'CMD < FILE'` runs CMD this way (dash
 * vforks), so without this the report could not say that the work went
 * on in a child.
 *
 * vfork cannot be wrapped by a C function: the child returns from it on
 * the parent's stack and would overwrite the wrapper's frame.  On x86-64
 * it is a trampoline that calls the note with the program's return
 * address still on top of the stack, then jumps to the real vfork, which
 * returns to the program as if called directly.  Elsewhere vfork is not
 * hooked.
 */
#include <dlfcn.h>
#include <errno.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/client.h"

typedef int (*spawn_fn)(pid_t *, const char *,
                        const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[],
                        char *const[]);
typedef int (*system_fn)(const char *);
typedef FILE *(*popen_fn)(const char *, const char *);

void *client_real(_Atomic(void *) *slot, const char *name)
{
	void *f = atomic_load_explicit(slot, memory_order_acquire);
	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		atomic_store_explicit(slot, f, memory_order_release);
	}
	return f;
}

static _Atomic(void *) real_spawn, real_spawnp, real_system, real_popen;
#if defined(__x86_64__)
static _Atomic(void *) real_vfork;
#endif

/* From the constructor: a first call from a signal handler (a crash
 * handler that spawns a symbolizer) must not be the one that runs dlsym,
 * which may take the loader's lock and allocate. */
void spawn_init(void)
{
	(void)client_real(&real_spawn, "posix_spawn");
	(void)client_real(&real_spawnp, "posix_spawnp");
	(void)client_real(&real_system, "system");
	(void)client_real(&real_popen, "popen");
#if defined(__x86_64__)
	(void)client_real(&real_vfork, "vfork");
#endif
}

HP_EXPORT int posix_spawn(pid_t *pid, const char *path,
                          const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[],
                          char *const envp[])
{
	client_child_note();
	spawn_fn f = (spawn_fn)client_real(&real_spawn, "posix_spawn");
	return f ? f(pid, path, fa, attr, argv, envp) : ENOSYS;
}

HP_EXPORT int posix_spawnp(pid_t *pid, const char *file,
                           const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[],
                           char *const envp[])
{
	client_child_note();
	spawn_fn f = (spawn_fn)client_real(&real_spawnp, "posix_spawnp");
	return f ? f(pid, file, fa, attr, argv, envp) : ENOSYS;
}

HP_EXPORT int system(const char *command)
{
	if (command)
		client_child_note();
	system_fn f = (system_fn)client_real(&real_system, "system");
	return f ? f(command) : -1;
}

HP_EXPORT FILE *popen(const char *command, const char *type)
{
	client_child_note();
	popen_fn f = (popen_fn)client_real(&real_popen, "popen");
	return f ? f(command, type) : NULL;
}

#if defined(__x86_64__)
/* Called by the trampoline: the note, then the real vfork's address (NULL:
 * none, errno ENOSYS, and the trampoline returns -1). */
HP_HIDDEN void *hp_vfork_prepare(void);
HP_HIDDEN void *hp_vfork_prepare(void)
{
	client_child_note();
	void *f = client_real(&real_vfork, "vfork");
	if (!f)
		errno = ENOSYS;
	return f;
}

/* vfork: the return address stays where the real vfork expects it; the
 * call below is balanced (8 bytes to align the stack, then back). */
__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork, @function\n"
        "vfork:\n"
        "	.cfi_startproc\n"
        "	subq $8, %rsp\n"
        "	.cfi_adjust_cfa_offset 8\n"
        "	call hp_vfork_prepare\n"
        "	addq $8, %rsp\n"
        "	.cfi_adjust_cfa_offset -8\n"
        "	testq %rax, %rax\n"
        "	jz 1f\n"
        "	jmp *%rax\n"
        "1:	movq $-1, %rax\n"
        "	ret\n"
        "	.cfi_endproc\n"
        ".size vfork, .-vfork\n");
#endif
