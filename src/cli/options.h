/* Parsing of numeric command-line values with clear messages. */
#ifndef HEAPPROF_CLI_OPTIONS_H
#define HEAPPROF_CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "layout/wire_v1.h"
#include "store/reader.h"

/* Parses a decimal integer in [min, max]; on error prints
 * "heapprof: <cmd>: invalid <what> '<s>': <reason>" and returns -1. */
int opt_parse_u64(const char *cmd, const char *what, const char *s,
                  uint64_t min, uint64_t max, uint64_t *out);

/*
 * For an unknown option word ("--intervl" or "--intervl=5"): "; did you
 * mean '--interval'?" when a long option that usage(f) prints is close
 * (hp_suggest), else "".  The text is in buf (len bytes, 128 enough).
 */
const char *opt_hint(const char *word, void (*usage)(FILE *f), char *buf,
                     size_t len);

/*
 * The value of long option `name` at argv[*i], given as "--x V" (then *i
 * moves to V) or "--x=V"; NULL if argv[*i] is another option, or if V is
 * missing (then *missing is set).
 */
const char *opt_value(int argc, char **argv, int *i, const char *name,
                      int *missing);

/* A whole decimal long (sign allowed); 0, or -1 without a message. */
int opt_parse_long(const char *s, long *out);
/* --top N: N a positive number, else a message (cmd: the command's
 * prefix) and -1. */
int opt_parse_top(const char *cmd, const char *v, long *out);
/* A string option that must not be empty: *out = v and 0, or the message
 * `empty` and -1. */
int opt_nonempty(const char *cmd, const char *v, const char *empty,
                 const char **out);

/* A view name (space, alloc_space, objects, alloc_objects); on error
 * prints "heapprof: <cmd>: invalid --view ..." and returns -1. */
int opt_parse_view(const char *cmd, const char *v, enum rd_view *out);

/*
 * A dump named on the command line: by position (index 1 is the first,
 * -1 the last; 0 = not given, the last) or by the name of a snapshot
 * (heapprof_take_named_snapshot, heapprof snapshot): name is then not
 * NULL (it points into argv).  A value that is a number is a position.
 */
struct dump_ref {
	long index;
	const char *name;
	/* --dump peak: the dump at the peak of live bytes (the last of a
	 * process's at-max dumps); --dump end: its last dump.  The words win
	 * over a snapshot of that name (reached by its number). */
	enum { DUMP_BY_REF, DUMP_PEAK, DUMP_END } which;
};

/* --dump N|NAME|peak|end; 0 and empty values are refused with
 * "heapprof: <cmd>: invalid --dump ..." (-1). */
int opt_parse_dump(const char *cmd, const char *v, struct dump_ref *out);

/*
 * The dump ref names among d[0..n) (one process's dumps, reader order):
 * its 0-based index; a name picks the last dump of that name.  -1 with
 * "heapprof: <cmd>: <who>: ..." printed when it is out of range, no dump
 * has the name, or n is 0.
 */
long opt_pick_dump(const char *cmd, const char *who, const struct rd_dump *d,
                   size_t n, const struct dump_ref *ref);
/* "dump 3" or "snapshot 'after-load'" for messages; buf of 160 bytes. */
const char *opt_dump_str(const struct dump_ref *ref, char *buf, size_t len);

/* --pid P: a pid, 1 .. CFG_PID_MAX (the kernel's largest); else
 * "heapprof: <cmd>: invalid --pid ..." (-1). */
int opt_parse_pid(const char *cmd, const char *v, long *out);

/*
 * A duration such as "1.5s", "500ms", "250us" or "100ns" (a decimal number
 * and a unit: ns, us, ms or s; "0" alone is allowed) in nanoseconds.  On
 * error prints "heapprof: <cmd>: invalid <what> '<s>' (...)" and returns
 * -1.
 */
int opt_parse_duration(const char *cmd, const char *what, const char *s,
                       int64_t *out_ns);

/*
 * A time relative to a start, as opt_parse_duration but with an optional
 * sign: "-2ms" is 2 ms before it.  Same errors (-1, message printed).
 */
int opt_parse_offset(const char *cmd, const char *what, const char *s,
                     int64_t *out_ns);

/* A duration for messages: "1.5 s", "500 ms", "0 s"; buf of 32 bytes. */
const char *opt_duration_str(int64_t ns, char *buf, size_t len);

/*
 * The argument walk of the commands that read profiles.  -h/--help prints
 * usage(stdout) and returns 1.  Each word goes to parse(argc, argv, &i,
 * ctx) first (-1 error, 0 taken, 1 not one of its options); other words
 * starting with '-' are unknown options; the rest are operands, at most
 * max of them, stored in operands[] (*n counts them).  Returns 0, 1, or 2
 * on a usage error (message printed).
 */
int opt_walk(const char *cmd, int argc, char **argv,
             int (*parse)(int argc, char **argv, int *i, void *ctx), void *ctx,
             void (*usage)(FILE *f), const char **operands, size_t max,
             size_t *n);

#endif
