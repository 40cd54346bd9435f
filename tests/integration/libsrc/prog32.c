/* prog32: a 32-bit program without a C library (gcc -m32 -nostdlib, no
 * multilib needed), dynamically linked so that its loader (libc6-i386's
 * /lib/ld-linux.so.2) reads LD_PRELOAD: prints one line and exits 0
 * (test_hostile.sh, exec32). */
static const char msg[] = "a 32-bit program\n";
__attribute__((noreturn)) void _start(void)
{
	int r;
	__asm__ volatile("int $0x80"
	                 : "=a"(r)
	                 : "a"(4), "b"(1), "c"(msg), "d"(sizeof(msg) - 1)
	                 : "memory");
	__asm__ volatile("int $0x80" : : "a"(1), "b"(0));
	__builtin_unreachable();
}
