/*
 * Which processes `heapprof serve` serves: looked for again at every use
 * (each second by the supervisor, at each request by the HTTP side), so a
 * process of a -n name that starts later is found, and one that ended is
 * gone.
 */
#ifndef HEAPPROF_AGENT_TARGETS_H
#define HEAPPROF_AGENT_TARGETS_H

#include <stddef.h>
#include <sys/types.h>

#include "agent/serve.h"

/* The processes c asks for that run now and may be served (ours, or
 * all_users), into out (at most SERVE_MAX_TARGETS); how many. */
size_t targets_list(const struct serve_config *c, pid_t *out);

#endif
