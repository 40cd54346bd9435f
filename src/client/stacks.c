/*
 * What the stack capture must hear of to bound the stacks a program runs
 * on, and to keep its rule cache true (unwind.c, cfi.c): interposed
 * sigaltstack(), makecontext() and dlclose().  Each does exactly what the
 * real function does (it is called, or for sigaltstack its system call is
 * made) and then notes what it did.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "client/client.h"

/* glibc's sigaltstack() is its system call and nothing else. */
HP_EXPORT int sigaltstack(const stack_t *ss, stack_t *old)
{
	long rc = syscall(SYS_sigaltstack, ss, old);
	if (rc == 0 && ss) {
		int saved = errno;
		unwind_note_altstack(ss->ss_sp, ss->ss_size, ss->ss_flags);
		errno = saved;
	}
	return (int)rc;
}

typedef int (*dlclose_fn)(void *);
static _Atomic(dlclose_fn) real_dlclose;

HP_EXPORT int dlclose(void *handle)
{
	dlclose_fn f =
	        atomic_load_explicit(&real_dlclose, memory_order_acquire);
	if (!f) {
		f = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
		if (!f)
			return -1;
		atomic_store_explicit(&real_dlclose, f, memory_order_release);
	}
	int rc = f(handle);
	int saved = errno;
	cfi_forget();
	errno = saved;
	return rc;
}

#if defined(__x86_64__)
/*
 * makecontext(ucp, func, argc, ...) is variadic, so it cannot be wrapped
 * in C: a few instructions save the argument registers (and %al, the
 * vector-register count of a variadic call), note ucp's stack, and jump
 * to the real makecontext with every register and stack argument as the
 * program passed them.
 */
typedef void (*makecontext_fn)(void);
static _Atomic(makecontext_fn) real_makecontext;

HP_HIDDEN makecontext_fn hp_makecontext_note(ucontext_t *ucp);
HP_HIDDEN makecontext_fn hp_makecontext_note(ucontext_t *ucp)
{
	int saved = errno;
	if (ucp)
		unwind_note_stack(ucp->uc_stack.ss_sp, ucp->uc_stack.ss_size);
	makecontext_fn f =
	        atomic_load_explicit(&real_makecontext, memory_order_acquire);
	if (!f) {
		f = (makecontext_fn)dlsym(RTLD_NEXT, "makecontext");
		atomic_store_explicit(&real_makecontext, f,
		                      memory_order_release);
	}
	errno = saved;
	return f;
}

__asm__(".text\n"
        ".globl makecontext\n"
        ".type makecontext, @function\n"
        "makecontext:\n"
        ".cfi_startproc\n"
        "push %rax\n.cfi_adjust_cfa_offset 8\n"
        "push %rdi\n.cfi_adjust_cfa_offset 8\n"
        "push %rsi\n.cfi_adjust_cfa_offset 8\n"
        "push %rdx\n.cfi_adjust_cfa_offset 8\n"
        "push %rcx\n.cfi_adjust_cfa_offset 8\n"
        "push %r8\n.cfi_adjust_cfa_offset 8\n"
        "push %r9\n.cfi_adjust_cfa_offset 8\n"
        "call hp_makecontext_note\n"
        "mov %rax, %r11\n"
        "pop %r9\n.cfi_adjust_cfa_offset -8\n"
        "pop %r8\n.cfi_adjust_cfa_offset -8\n"
        "pop %rcx\n.cfi_adjust_cfa_offset -8\n"
        "pop %rdx\n.cfi_adjust_cfa_offset -8\n"
        "pop %rsi\n.cfi_adjust_cfa_offset -8\n"
        "pop %rdi\n.cfi_adjust_cfa_offset -8\n"
        "pop %rax\n.cfi_adjust_cfa_offset -8\n"
        "test %r11, %r11\n"
        "jz 1f\n"
        "jmp *%r11\n"
        "1: ret\n"
        ".cfi_endproc\n"
        ".size makecontext, .-makecontext\n");
#endif
