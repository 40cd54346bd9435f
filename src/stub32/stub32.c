/*
 * libheapprof.so.1 for 32-bit (i386) programs: hooks nothing.  `heapprof
 * record` preloads DIR/heapprof-abi/$LIB/libheapprof.so.1 (src/cli/
 * preload.c), so a 32-bit program that a profiled 64-bit one starts finds
 * this object instead of the 64-bit client, which its loader would refuse
 * with an error on the program's stderr.  The program runs as bare,
 * unprofiled.  Built with -nostdlib: no 32-bit C library is needed.
 */
const char heapprof_stub32[] = "heapprof: 32-bit programs are not profiled";
