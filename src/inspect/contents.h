/*
 * The bytes of a snapshot's live blocks, read from the running process
 * (`heapprof snapshot --contents-dir`): each block of the libc heap to a
 * file DIR/0xADDRESS, read with process_vm_readv, which needs ptrace
 * rights over the process.
 */
#ifndef HEAPPROF_INSPECT_CONTENTS_H
#define HEAPPROF_INSPECT_CONTENTS_H

#include <stddef.h>
#include <sys/types.h>

#include "store/profile.h"

#define CONTENTS_DENY  1 /* ptrace access denied */
#define CONTENTS_GONE  2 /* the process is gone */
#define CONTENTS_ERROR 3 /* a local error (err) */

/* What contents_write did. */
struct contents_result {
	int status; /* CONTENTS_*; 0 ok */
	int err;    /* errno of a local error */
	/* Blocks written, not readable (freed while the process ran?), and
	 * of custom heaps (their addresses are ids: skipped). */
	size_t written, unreadable, custom;
};

/*
 * Writes the bytes of every block of b[0..nb) of the libc heap to
 * dir/0xADDRESS (dir made if missing), reading them from process pid;
 * what came of it in *out.  0, or -ENOMEM when there is no memory to
 * start (nothing done).
 */
int contents_write(pid_t pid, const struct prof_block *b, size_t nb,
                   const char *dir, struct contents_result *out);

#endif
