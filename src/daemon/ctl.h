/*
 * Sending and receiving the daemon's control messages (the format:
 * layout/ctl_v1.h), and the connection to the per-user daemon.
 */
#ifndef HEAPPROF_DAEMON_CTL_H
#define HEAPPROF_DAEMON_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "layout/ctl_v1.h"

/* A received message; payload is owned by the message (ctl_msg_free). */
struct hp_ctl_msg {
	uint16_t type;
	uint32_t len;
	uint8_t *payload; /* len bytes, plus a NUL the sender did not send */
	int fd;           /* received descriptor, or -1 */
};

/* Sends one message (fd >= 0 is passed with SCM_RIGHTS).  0 or -errno. */
int ctl_send(int sock, uint16_t type, const void *payload, uint32_t len,
             int fd);
/*
 * Receives one message, waiting at most timeout_ms (-1: forever) for it to
 * start and bounding the whole read by the same time.  0, -ETIMEDOUT,
 * -ECONNRESET on EOF, -EPROTO on a bad header, or -errno.
 * If `first4` is non-NULL, those 4 bytes were already read by the caller
 * (the daemon peeks the magic) and are taken as the start of the header.
 */
int ctl_recv(int sock, struct hp_ctl_msg *m, int timeout_ms,
             const uint32_t *first4);
void ctl_msg_free(struct hp_ctl_msg *m);

/* Connects to the daemon's socket.  Returns the fd, or -errno; on error
 * writes a one-line reason into err (e.g. "no heapprofd is running ..."). */
int ctl_connect_daemon(char *err, size_t errlen);

#endif
