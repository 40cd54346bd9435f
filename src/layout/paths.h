/*
 * Where the per-user daemon's socket lives.  Compiled into the client
 * library too: no stdio, no allocation.
 */
#ifndef HEAPPROF_LAYOUT_PATHS_H
#define HEAPPROF_LAYOUT_PATHS_H

#include <stddef.h>

/*
 * Writes the daemon's directory ($XDG_RUNTIME_DIR/heapprof, or
 * /tmp/heapprof-<uid>) into dir and its socket path into sock.  Either may
 * be NULL.  Returns 0, or -ENAMETOOLONG when a path does not fit (a socket
 * path must fit sockaddr_un's 108 bytes).  Reads the environment: call it
 * from a constructor or a normal context, not from a signal handler.
 */
int hp_daemon_paths(char *dir, size_t dirlen, char *sock, size_t socklen);

#endif
