/*
 * A recording session (`heapprof record`): the collector, its targets and
 * one poll loop, for both ways a session finds its processes:
 *
 *  - embedded (`record -- CMD`): the session launches CMD with the client
 *    preloaded and serves its own control socket;
 *  - daemon (`record -p PID / -n NAME`): the session registers with the
 *    per-user daemon (ctl.h), which hands it each matching client's
 *    connection; the session answers those clients itself.
 *
 * See docs/ARCHITECTURE.md ("Sessions") for the rules: when a session
 * ends, what each dump is, what the profile says about each process.
 */
#ifndef HEAPPROF_SESSION_H
#define HEAPPROF_SESSION_H

#include <stddef.h>

#include "config/config.h"

/*
 * Runs the session described by cfg (already checked with config_check).
 * record_argv, record's own words (NULL-terminated), is stored in the
 * profile's metadata as one line, and cfg as config_print writes it too.
 * Returns the exit status: for `-- CMD` the command's, else 0 when at
 * least one process was profiled and the profile written, 1 otherwise.
 * written (len bytes) gets the profile's path when it was written whole,
 * "" otherwise.
 */
int session_run(const struct session_config *cfg, char *const *record_argv,
                char *written, size_t len);

#endif
