/*
 * The collector: owns the control socket, creates one shared region per
 * profiled process, and turns regions into dumps in the profile.  Used
 * embedded by `heapprof record`; the daemon (a later issue) reuses it.
 */
#ifndef HEAPPROF_COLLECTOR_H
#define HEAPPROF_COLLECTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "layout/region.h"
#include "profile/profile.h"

#define COLLECTOR_MAX_TARGETS 64

struct collector_opts {
	uint64_t interval;
	uint32_t unwind_mode;
	uint32_t max_frames;
	uint64_t shmem_size; /* 0: choose from the interval */
};

struct target {
	pid_t pid;
	int fd;     /* control connection, -1 once closed */
	void *base; /* our mapping of the region */
	uint64_t size;
	struct hp_region region; /* geometry as WE formatted it: trusted */
	int64_t upid;
	bool disconnected;
	uint64_t start_ts;
};

struct collector {
	int listen_fd;
	char dir[64];   /* private 0700 directory holding the socket */
	char path[108]; /* socket path */
	struct collector_opts opts;
	struct profile *profile;
	struct target targets[COLLECTOR_MAX_TARGETS];
	size_t ntargets;
};

/* Decides whether a connecting pid is profiled (true: give it a region). */
typedef bool (*collector_want_fn)(void *ctx, pid_t pid);

int collector_open(struct collector *c, const struct collector_opts *o);
/* Accepts one pending connection and answers it.  Returns 0, or a
 * negative errno for a connection that was dropped (not fatal). */
int collector_accept(struct collector *c, collector_want_fn want, void *ctx,
                     const char *name, const char *cmdline);
/* Handles readable client fds: EOF marks the target disconnected. */
void collector_poll_client(struct collector *c, struct target *t);
/* Writes one dump of every target to the profile. */
int collector_dump_all(struct collector *c, const char *reason);
void collector_close(struct collector *c);

uint64_t collector_default_shmem(uint64_t interval);
uint64_t boottime_ns(void);

/* snapshot.c: copies a region into a prof_dump (arrays owned by snap). */
struct snapshot {
	struct prof_dump dump;
	struct prof_module *modules;
	struct prof_stack *stacks;
	struct prof_heap *heaps;
	uint64_t *pcs;
	char *strings;
	uint8_t *build_ids;
	char (*heap_names)[HP_HEAP_NAME_MAX];
};
int snapshot_take(const struct hp_region *r, struct snapshot *s);
/* The process's memory: /proc/PID/status if pid runs (and alive), else
 * what the client wrote at exit; fields it could not get stay unset. */
void snapshot_memory(const struct hp_region *r, pid_t pid, bool alive,
                     struct prof_memory *out);
void snapshot_free(struct snapshot *s);

#endif
