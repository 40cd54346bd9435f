/*
 * ud_sigtramp: allocations in a signal handler that interrupted the
 * sigreturn trampoline itself (test_unwind_diff.sh).
 *
 * A signal handler returns into libc's trampoline (__restore_rt: mov $15,
 * %rax; syscall), and a second signal can arrive there, between the
 * handler's ret and the syscall: the interrupted pc is then the
 * trampoline's first instruction or its syscall, with sp at the first
 * signal's ucontext.  A capture must unwind through that frame too; one that
 * only knew a return address pointing at the trampoline's start stopped at
 * the syscall and lost everything below (a flaky 1 in 8 runs of
 * test_robust.sh's sighandler, where timer signals land there by chance).
 *
 * Here it happens every time, by single-stepping: ut_on_usr1 (SIGUSR1,
 * raised by ut_round from main) sets the trap flag before it returns, so
 * every following instruction raises SIGTRAP.  ut_on_trap (SIGTRAP) lets
 * the handler's epilogue go by and, at the trampoline's two instructions,
 * calls ut_trap_alloc (malloc(96), freed by the next round); at the
 * syscall it clears the trap flag, and rt_sigreturn returns to ut_round as
 * if nothing happened.  ROUNDS rounds give exactly 2 * ROUNDS allocations.
 * Exits 36; 2 when the trap never reached the trampoline.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

#include "ud_common.h"

#define ROUNDS    100
#define TRAP_FLAG 0x100

static struct sc_count c_trap = {"ut_trap_alloc"};

static volatile uintptr_t tramp; /* the trampoline ut_on_usr1 returns to */
static volatile sig_atomic_t at_start, at_syscall, stray;
static void *held;

NOINLINE void ut_trap_alloc(void)
{
	if (held) {
		free(held);
		sc_free(&c_trap, 96);
	}
	held = malloc(96);
	sc_touch(held, 96);
	sc_alloc(&c_trap, held, 96);
}

NOINLINE void ut_on_trap(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = ctx;
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	if (pc == tramp) {
		at_start++;
		ut_trap_alloc();
	} else if (pc == tramp + 7) {
		at_syscall++;
		ut_trap_alloc();
		uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)TRAP_FLAG;
	} else if (++stray > 64) {
		/* Never got there: stop stepping. */
		uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)TRAP_FLAG;
	}
}

NOINLINE void ut_on_usr1(int sig)
{
	(void)sig;
	tramp = (uintptr_t)__builtin_return_address(0);
	stray = 0;
	__asm__ volatile("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq" ::
	                         : "memory", "cc");
}

NOINLINE void ut_round(void)
{
	raise(SIGUSR1);
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = ut_on_trap;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTRAP, &sa, NULL) != 0) {
		perror("sigaction");
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ut_on_usr1;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0) {
		perror("sigaction");
		return 1;
	}
	for (int i = 0; i < ROUNDS; i++)
		ut_round();
	if (at_start != ROUNDS || at_syscall != ROUNDS) {
		printf("ud_sigtramp: %d rounds, the trampoline trapped at its "
		       "start %d and at its syscall %d times\n",
		       ROUNDS, (int)at_start, (int)at_syscall);
		return 2;
	}
	printf("ud_sigtramp: %d rounds, 2 allocations each\n", ROUNDS);
	struct sc_count *const all[] = {&c_trap};
	ud_print_counts(stdout, all, UD_N(all));
	ud_caller("ut_trap_alloc", "ut_on_trap");
	return 36;
}
