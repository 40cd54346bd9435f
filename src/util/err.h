/*
 * One-line error messages for the heapprof command and its subsystems:
 * "heapprof: <subsystem>: <message>" on stderr.  Out-of-target code only;
 * the client inside the profiled program has its own fd writer.
 */
#ifndef HEAPPROF_UTIL_ERR_H
#define HEAPPROF_UTIL_ERR_H

/* Print "heapprof: subsys: <fmt ...>\n" to stderr. */
void hp_err(const char *subsys, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* What a file that is not a regular one is, for messages: "a directory",
 * "a FIFO", "a character device", "a block device", "a socket" (st_mode). */
const char *hp_file_kind(unsigned int st_mode);

#endif
