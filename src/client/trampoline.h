/*
 * The body of an assembly trampoline that runs a note of ours in front of
 * a function of the program's, with every argument register as the
 * program passed them and its return address untouched (sandbox.c's
 * syscall and prctl, route.c's dl* functions): it saves the argument
 * registers (and %al, the vector-register count of a variadic call),
 * calls NOTE with them as its own arguments on a 16-byte aligned stack,
 * restores them and jumps to the address NOTE returned.
 */
#ifndef HEAPPROF_CLIENT_TRAMPOLINE_H
#define HEAPPROF_CLIENT_TRAMPOLINE_H

#define HP_TRAMPOLINE_TO_NOTE(note)                                            \
	"push %rax\n.cfi_adjust_cfa_offset 8\n"                                \
	"push %rdi\n.cfi_adjust_cfa_offset 8\n"                                \
	"push %rsi\n.cfi_adjust_cfa_offset 8\n"                                \
	"push %rdx\n.cfi_adjust_cfa_offset 8\n"                                \
	"push %rcx\n.cfi_adjust_cfa_offset 8\n"                                \
	"push %r8\n.cfi_adjust_cfa_offset 8\n"                                 \
	"push %r9\n.cfi_adjust_cfa_offset 8\n"                                 \
	"call " note "\n"                                                      \
	"mov %rax, %r11\n"                                                     \
	"pop %r9\n.cfi_adjust_cfa_offset -8\n"                                 \
	"pop %r8\n.cfi_adjust_cfa_offset -8\n"                                 \
	"pop %rcx\n.cfi_adjust_cfa_offset -8\n"                                \
	"pop %rdx\n.cfi_adjust_cfa_offset -8\n"                                \
	"pop %rsi\n.cfi_adjust_cfa_offset -8\n"                                \
	"pop %rdi\n.cfi_adjust_cfa_offset -8\n"                                \
	"pop %rax\n.cfi_adjust_cfa_offset -8\n"                                \
	"jmp *%r11\n"

#endif
