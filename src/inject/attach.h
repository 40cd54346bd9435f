/*
 * Profiling a running process that never loaded the library, or loaded it
 * but cannot be reached through a daemon (issue 21, docs/ATTACH.md):
 * inject.c loads the client into it and calls the client's two attach
 * entry points under one stop of one thread; between them this side
 * takes the client's end of a socket pair (pidfd_getfd) and answers its
 * hello as for any client (collector_answer).
 */
#ifndef HEAPPROF_INJECT_ATTACH_H
#define HEAPPROF_INJECT_ATTACH_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "collector/collector.h"
#include "inject/inject.h"

/* What one attach did, for the session's line and the benchmark. */
struct attach_result {
	struct inject_stats stop; /* the one stop: threads tried, times */
	double total_ms;          /* from the call to profiling */
	bool loaded;              /* the library was loaded now */
	uint32_t objects, slots;  /* routed (0: preloaded client) */
	char lib[PATH_MAX];       /* the library in the process */
};

/*
 * Makes pid a target of c (how: "pid" or "name"): checks it may be
 * injected into (inject_check), loads `lib` into it unless a heapprof
 * library is mapped there already (that one is used), and attaches its
 * client.  0 and *out (may be NULL), or -1 with the one-line reason in
 * why[INJECT_WHY]; the process is left as it was.  Blocks for the time of
 * the stop (milliseconds); the calling thread becomes pid's tracer
 * meanwhile (inject.h: no waitpid(-1) elsewhere).  fork_path (NULL:
 * none) is the socket a forked child says hello to (--follow-fork).
 */
int attach_process(struct collector *c, pid_t pid, const char *how,
                   const char *lib, const char *fork_path, struct target **out,
                   struct attach_result *r, char *why);

/* Whether pid maps a heapprof client library; its path into lib. */
bool attach_client_mapped(pid_t pid, char *lib, size_t len);

/*
 * The end of a session for a process that runs on: stops it (every
 * thread, each proven outside heapprof's library: inject_stop_others),
 * calls its client's heapprof_internal_detach (the regions unmapped,
 * their descriptors and the connection closed) and lets it go.  A thread
 * found inside the library is let run and the stop tried again, up to
 * DETACH_TRIES times.  Returns the regions unmapped (>= 0), or -1 with
 * the one-line reason in why[INJECT_WHY] (then the process keeps them
 * mapped, their memory freed by the collector all the same).
 */
int detach_process(pid_t pid, char *why);

#endif
