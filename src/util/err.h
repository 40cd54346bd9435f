/*
 * The one channel of heapprof's messages (out-of-target code only; the
 * client inside the profiled program has its own fd writer).  Libraries
 * (the collector, the session, the store, the agent...) never write to
 * stderr themselves: they return an error, and what they have to say goes
 * through hp_err or hp_log, which write a whole line to stderr unless the
 * caller set a hook for the thread (hp_log_hook): serve's HTTP thread
 * keeps the message for its answer, a test keeps it to compare.
 */
#ifndef HEAPPROF_UTIL_ERR_H
#define HEAPPROF_UTIL_ERR_H

/* "heapprof: subsys: <fmt ...>\n", through hp_log. */
void hp_err(const char *subsys, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* One message, formatted whole (fmt carries its own "heapprof: " prefix
 * and newline; a longer one is cut at 4351 bytes, its newline kept),
 * then to the thread's hook or stderr in
 * one write, so that concurrent writers do not interleave in a line. */
void hp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* hp_log("%s: %s\n", what, strerror(errno)), errno kept. */
void hp_log_errno(const char *what);

/* The calling thread's hook: fn(arg, line) gets each message (the line
 * with its newline) instead of stderr; fn NULL sets stderr back.  The
 * hook may call hp_log_hook's previous value (hp_log_hook_get). */
typedef void (*hp_log_fn)(void *arg, const char *line);
void hp_log_hook(hp_log_fn fn, void *arg);
void hp_log_hook_get(hp_log_fn *fn, void **arg);

/* What a file that is not a regular one is, for messages: "a directory",
 * "a FIFO", "a character device", "a block device", "a socket" (st_mode). */
const char *hp_file_kind(unsigned int st_mode);

#endif
