/*
 * The collector: creates one or more shared regions per profiled process,
 * answers clients (hello -> welcome + region memfd), serves their messages
 * (HP_CMSG_GROW) and turns regions into dumps in the profile.
 *
 * `heapprof record -- CMD` uses it with its own control socket (embedded);
 * a `record -p/-n` session uses it without a socket: the daemon reads each
 * client's hello and hands the session the connection, which the session
 * answers with collector_answer exactly as the embedded socket would.
 */
#ifndef HEAPPROF_COLLECTOR_H
#define HEAPPROF_COLLECTOR_H

#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/jobq.h"
#include "util/memcg.h"

/* A target's memory cgroup as the session watches it (session/memwatch.c):
 * dumps when its RSS crosses the threshold or the cgroup reports
 * pressure, and whether the OOM killer killed it. */
struct memwatch {
	bool checked; /* the cgroup was looked up (cg.version 0: none) */
	struct memcg cg;
	uint64_t threshold; /* RSS that takes a dump; 0: none */
	bool armed;         /* below it since the last such dump */
	uint64_t next_ns;   /* the next look (CLOCK_MONOTONIC) */
	uint64_t last_dump_ns, last_pressure_ns;
	struct memcg_stat last;    /* the counters at the last look */
	struct memcg_stat pressed; /* ... at the last pressure dump */
	uint64_t rss;         /* its RSS at the last look, heapprof's tables
	                       * (mapped in it, in RssShmem) left out */
	bool oom_killed;      /* the OOM killer's count went up as it died */
	uint64_t oom_base;    /* its cgroup's OOM kills not owed to it */
	uint64_t oom_rise_ns; /* when the count rose above oom_base; 0 */
};
#include "layout/region.h"
#include "layout/wire_v1.h"
#include "store/profile.h"

/* A process gets at most this many regions (--block-client: GROW). */
#define TARGET_MAX_REGIONS 4
/* ... and at most shmem_size * TARGET_SHMEM_FACTOR bytes in all. */
#define TARGET_SHMEM_FACTOR 8
/* Connections whose hello we are still reading (embedded socket). */
#define COLLECTOR_MAX_PENDING    64
#define COLLECTOR_MAX_UNPROFILED 256
/* A client that connected must finish its hello within this time. */
#define COLLECTOR_HELLO_MS 2000
/* Bytes of writes queued (trace events) past which the loop waits for
 * the writer thread (the loop stalls only when it makes data faster than
 * SQLite takes it for a long time). */
#define COLLECTOR_QUEUE_MAX_BYTES (512ull << 20)

struct collector_opts {
	uint64_t interval;
	uint32_t unwind_mode;
	uint32_t max_frames;
	uint64_t shmem_size; /* 0: choose from the interval */
	uint64_t session_id; /* the daemon's; 0 for record -- CMD (regions
	                        then say 1) */
	/* Heaps: HP_CFG_ALL_HEAPS in config_flags and this selection
	 * (struct hp_heap_select_v1; none = libc.malloc only), written into
	 * each region; dumps leave unselected heaps' stacks out. */
	struct hp_heap_select_v1 heap_select[HP_MAX_HEAPS];
	uint32_t nheap_select;
	/* Session options written into each region's header. */
	uint32_t config_flags; /* HP_CFG_* */
	uint32_t adaptive_threshold_pct;
	uint64_t adaptive_max_interval;
	uint32_t block_timeout_ms;
	/* record --trace: the event trace in region 0 of each attach of a
	 * v2 client (trace_bytes added to its size); trace_block_ms: how
	 * long a streaming writer waits for room (--block-client). */
	uint32_t trace_mode; /* enum hp_trace_mode; HP_TRACE_OFF: none */
	uint64_t trace_bytes;
	uint32_t trace_block_ms;
	/* --follow-exec: a new image is followed, so an exec is never noted
	 * as not followed (collector_note_exec). */
	bool follow_exec;
	/* Peak tracking (HP_CFG_TRACK_MAX in config_flags): dump_at_max,
	 * every dump holds the state at the peak (--dump-at-max); else
	 * peak_dumps, a dump of the peak ("peak") goes before any dump of a
	 * process whose peak rose since its last dump. */
	bool dump_at_max, peak_dumps;
};

struct target_region {
	void *base; /* our mapping */
	uint64_t size;
	int fd; /* the memfd, ours (collector_prepare_region allocates
	         * through it); -1 once closed */
	uint64_t trace_bytes;    /* of size, the trace's (region 0) */
	struct hp_region region; /* geometry as WE formatted it: trusted */
	/* What collector_tend allocated of it ahead of the client (tend.c):
	 * stack records and frames up to these counts, the whole stack
	 * index, and the bytes it allocated in all. */
	uint64_t stacks_ready, frames_ready;
	uint32_t levels_ready; /* live-table levels */
	uint64_t log_ready;    /* bytes of the live table's log */
	bool index_ready;
	uint64_t prepared_bytes;
	/* collector_tend's pace: the next look (CLOCK_MONOTONIC ns), the
	 * gap after it, and the fill it read last. */
	uint64_t tend_at_ns;
	uint32_t tend_gap_ms, tend_load;
};

/* Events per write to the profile (one transaction each). */
#define TRACE_BATCH 16384
/* Events read from one target per turn of the session's loop ... */
#define TRACE_TURN_MAX (4 * TRACE_BATCH)
/* ... and from a oneshot trace at a dump. */
#define TRACE_DUMP_MAX (64 * TRACE_BATCH)

/* What the collector read of a target's event trace (collector_trace_*). */
struct target_trace {
	uint32_t mode;   /* enum hp_trace_mode; HP_TRACE_OFF: not traced */
	uint64_t cap;    /* events the table holds */
	uint64_t bytes;  /* cap * event size */
	uint64_t pos;    /* next position to read (streaming: our tail) */
	uint64_t events; /* read and handed to the writer */
	/* Of those, the ones whose write failed (set by the writer: see
	 * util/jobq.h); `failed` once the failure was said. */
	_Atomic uint64_t lost;
	_Atomic int failed;
	uint64_t overwritten; /* ring: written, then replaced before read */
	uint64_t incomplete;  /* reserved, never finished (writer died) */
	uint64_t backlog;     /* unread after the last streaming drain */
	uint64_t last_read;   /* positions the last drain went through */
	/* The client's counts, copied at each read (they outlive the
	 * mapping). */
	uint64_t dropped[HP_TDROP_COUNT];
	uint64_t full_ts, waits, wait_ns;
	bool said_full; /* oneshot: collector_trace_full said so */
	bool done;      /* the final read is done */
	/* HP_TRACE_LOG: the stacks' free counters owed (livelog_flush),
	 * and the pace of the loop's look at the log. */
	struct livelog_acc acc;
	uint32_t idle_ms;
	/* HP_TRACE_LOG with peak tracking (a STACK_MAX table): each stack's
	 * counters as of the position applied, by stack id (the table's
	 * allocation counters run ahead of it: the client charges them when
	 * it logs), for the copies at the peak (stackmax_save).  peak_off:
	 * no memory for them, the peak is no longer followed. */
	struct hp_stack_counts *peak_sh;
	uint64_t peak_cap;
	bool peak_off;
};

struct target {
	pid_t pid, ppid;
	int fd; /* client connection, -1 once closed */
	struct target_region reg[TARGET_MAX_REGIONS];
	int nreg;
	uint64_t shmem_total; /* bytes of all its regions */
	int64_t upid;
	char how[8]; /* "command", "pid", "name", "fork", "exec" */
	bool from_startup;
	bool disconnected; /* its connection closed during the session */
	bool conn_lost;    /* ... by the program, which still runs (it closed
	                    * or reused the client's descriptor) */
	bool retired;      /* last dump written, regions unmapped */
	/* The peak's epoch (hp_header_v1.max_epoch) when its last dump
	 * looked: another one is a peak with no dump yet
	 * (opts.peak_dumps); and the time of its last dump written.  The
	 * writer thread's (dump_run). */
	uint64_t peak_epoch;
	uint64_t last_dump_ts;
	/* Memory over time (curve.c): the session's next sample of it
	 * (CLOCK_MONOTONIC), and the gap its last walk asked for. */
	uint64_t curve_next_ns, curve_gap_ns;
	uint64_t curve_first_ns; /* its first sample (CLOCK_MONOTONIC) */
	bool proto_error;        /* sent bytes that are not messages: ignored */
	bool row_ended;          /* profile_end_process done */
	uint8_t msg[sizeof(struct hp_client_msg)]; /* partial message */
	size_t msg_len;
	uint64_t start_ts, disconnect_ts; /* CLOCK_BOOTTIME */
	uint32_t grows;          /* GROW requests answered with a region */
	bool said_full;          /* a refused GROW was reported */
	uint32_t layout_version; /* of its regions: 1 or 2 */
	struct target_trace tr;
	/* HP_CMSG_SNAPSHOT: the name being read after the message. */
	char snap_name[HP_SNAPSHOT_NAME_MAX];
	uint32_t snap_len, snap_got; /* snap_len 0: not reading a name */
	uint32_t snapshots;          /* named snapshots written */
	uint64_t interned;           /* its stacks when last interned ahead */
	/* Its working directory when it attached ("" if unknown): where a
	 * library it loaded by a relative path is, once it has exited
	 * (snapshot_resolve_paths). */
	char cwd[PATH_MAX];
	/* Not followed (see collector_note_exec): its image and name when
	 * it attached; the image it exec'd (a path, or a name when the
	 * path was gone), or ""; the first child it forked, or 0. */
	char exe[256], comm[16];
	char exec_not_followed[256];
	/* Its exec was followed (its new image is a target of its own):
	 * never noted as not followed. */
	bool exec_followed;
	pid_t children_not_followed;
	/* Its memory cgroup, as the session watches it. */
	struct memwatch mw;
};

/* A connection on the embedded socket whose hello is not complete. */
struct pending_conn {
	int fd;
	pid_t pid;
	uint8_t buf[sizeof(struct hp_hello)];
	size_t got;
	uint64_t deadline_ns; /* CLOCK_BOOTTIME */
};

struct events_job;

struct collector {
	int listen_fd;  /* -1 without a socket (daemon sessions) */
	char dir[64];   /* private 0700 directory holding the socket */
	char path[108]; /* socket path */
	struct collector_opts opts;
	struct profile *profile;
	struct target **targets; /* in the order they attached */
	size_t ntargets, cap;
	struct pending_conn pending[COLLECTOR_MAX_PENDING];
	size_t npending;
	/* Trace events for the writer: the batch being filled (TRACE_BATCH
	 * events), and batches the writer is done with, kept for reuse
	 * (trace.c): a batch is 900 KiB, and a new one each time cost page
	 * faults on every one of them. */
	struct events_job *ev_fill, *ev_spare;
	unsigned nspare;
	unsigned region_errors; /* hellos refused: no region could be made */
	/* Processes the session wanted that hung up before their answer
	 * (they wait 100 ms unless record launched them, then run
	 * unprofiled): a row each at the end (collector_add_unprofiled),
	 * unless the pid was profiled after all (its next image); past
	 * COLLECTOR_MAX_UNPROFILED, counted only. */
	struct collector_unprofiled {
		pid_t pid, ppid;
		const char *how; /* a static string: "fork", "exec", ... */
		char comm[16];   /* "" when it was gone */
		uint64_t ts;     /* its hello read (CLOCK_BOOTTIME) */
	} unprofiled[COLLECTOR_MAX_UNPROFILED];
	size_t nunprofiled;
	unsigned unprofiled_more;
	/* Every write to the profile goes through wq (util/jobq.h), in order;
	 * process rows are numbered here (prof_process.upid), so a row's
	 * upid is known before the writer gets to it. */
	struct jobq wq;
	int64_t last_upid;
	/* Interning ahead (collector_intern_ahead): when next (CLOCK_
	 * MONOTONIC; 0: not yet set), jobs queued, the last one's time. */
	uint64_t intern_at_ns;
	unsigned interns_queued;
	uint64_t intern_took_ns;
};

/* How the session came to profile a process (see prof_process). */
struct target_info {
	pid_t pid, ppid;
	const char *how; /* "command", "pid", "name", "fork", "exec" */
	bool from_startup;
	const char *name;    /* NULL: read /proc/PID/comm */
	const char *cmdline; /* NULL: read /proc/PID/cmdline */
	/* The hello's layout_version: 1 gets a v1 region (no trace), 2 and
	 * above (and 0 here: "ours") a v2 one. */
	uint32_t layout_version;
	/* Set by the collector before the want callback: the process hung
	 * up before its answer (it stopped waiting, or it is gone).  The
	 * answer then only says whether it was one to follow. */
	bool gone;
};

/*
 * Decides what to do with a hello read on the embedded socket.  Returns
 * HP_WELCOME_ACCEPT (and fills *ti; ti->pid is preset from SO_PEERCRED)
 * or another hp_welcome_status to refuse.
 */
typedef uint32_t (*collector_want_fn)(void *ctx, pid_t pid,
                                      const struct hp_hello *h,
                                      struct target_info *ti);

/* With listen: a private socket directory under $TMPDIR (embedded).
 * 0 or a negative errno (message printed). */
int collector_open(struct collector *c, const struct collector_opts *o,
                   bool listen);

/*
 * The profile's writes on a thread of their own (util/jobq.h), between
 * collector_writer_start and collector_writer_stop: the session's loop
 * is never held by SQLite.  Meanwhile c->profile is the writer's: every
 * collector_* call that writes only reads what it needs from the
 * regions and queues the rest, and returns 0 for it (a failure is said
 * by the writer and counted: collector_writer_stop returns how many
 * writes failed).  Outside, writes are made inline and their results
 * returned, as the functions below say.  collector_writer_stop waits
 * for every queued write (and runs what follows them: snapshot answers,
 * dump_group ends).
 */
void collector_writer_start(struct collector *c);
unsigned collector_writer_stop(struct collector *c);
/* Whether periodic dumps are still waiting for the writer: the next one
 * is skipped then (a timer that fires during a dump written inline is
 * merged with the next tick too). */
bool collector_periodic_pending(struct collector *c);
/*
 * While the program runs, the writer writes ahead the stacks no dump
 * wrote yet (profile_intern_stacks: their frames named, their callsites),
 * so that the dump at the exit finds them known.  Queues what is due;
 * returns the milliseconds until the next is (-1: none, without the
 * writer thread).  Call it from the loop, before each poll.
 */
int collector_intern_ahead(struct collector *c);

/*
 * The memory of the regions, allocated by the collector ahead of the
 * client (tend.c): pages a process would fault in itself are charged to
 * its memory cgroup; pages the collector allocates first (fallocate-like,
 * MADV_POPULATE_WRITE on its own mapping) are charged to the collector's.
 * collector_prepare_region allocates what a new region's client touches
 * first; collector_tend, from the session's loop, the live table's next
 * level once the open one is 60% full, and stack records and frames ahead
 * of their use.  Returns the milliseconds until it wants to run again
 * (-1: no target).
 */
void collector_prepare_region(struct target_region *tr);
/* Unmaps tr and closes its memfd (a region never handed over). */
void collector_region_drop(struct target_region *tr);
int collector_tend(struct collector *c);
/* The live table's log allocated ahead of its writers' head (a position),
 * from each read of it (trace.c). */
void collector_prepare_log(struct target_region *tr, uint64_t head);
/* Bytes of a target's regions the collector allocated (prepared). */
uint64_t collector_prepared_bytes(const struct target *t);
/* Bytes of a region in memory, whoever allocated them: its memfd's
 * allocated blocks (fd >= 0), else its pages in memory by mincore of the
 * mapping at base (size bytes); 0 if unknown. */
uint64_t region_resident(int fd, const void *base, uint64_t size);
/* Refuses new clients from now on: the embedded socket is closed and
 * removed (a process that starts now finds no collector and runs
 * unprofiled at once), connections whose hello was not read closed. */
void collector_stop_listening(struct collector *c);

/*
 * The poll loop's side: collector_pollfds appends the socket, pending
 * connections and client connections to fds (at most max) and returns how
 * many; collector_handle reads what they said (accepts, hellos through
 * want, GROW requests, disconnects).  Nothing in here blocks.
 */
size_t collector_pollfds(struct collector *c, struct pollfd *fds, size_t max);
void collector_handle(struct collector *c, const struct pollfd *fds, size_t n,
                      collector_want_fn want, void *ctx);
/* Milliseconds until the next pending hello times out; -1 if none. */
int collector_timeout_ms(const struct collector *c);
/* Drops pending connections whose hello did not come in time. */
void collector_expire(struct collector *c);

/*
 * Answers a client whose hello has been read on fd (ours from now on,
 * also on error): makes its region, sends the welcome with the memfd and
 * adds a process to the profile.  *out (may be NULL) gets the target.
 * 0 or a negative errno (the client got HP_WELCOME_ERROR; fd closed).
 */
int collector_answer(struct collector *c, int fd, const struct target_info *ti,
                     struct target **out);
/* Sends a refusing welcome (status != ACCEPT) and closes fd. */
void collector_refuse(int fd, uint32_t status);

/* The newest target of pid that is not retired, or NULL. */
/* Whether the target's process still maps its first region (the same
 * memfd, by inode, in /proc/PID/maps): when its connection closed, the
 * program closed our descriptor; it did not exit or exec. */
bool collector_target_maps_region(const struct target *t);
struct target *collector_find(struct collector *c, pid_t pid);
/* Whether any target (retired or not) ever had this pid. */
bool collector_had_pid(const struct collector *c, pid_t pid);

/* Handles readable data on a client connection: whole 16-byte messages
 * (GROW; SNAPSHOT and its name, answered once the named dump is written);
 * EOF marks the target disconnected. */
void collector_poll_client(struct collector *c, struct target *t);
/* Makes a region twice the size of the target's last one (bounded) and
 * sends it; 0 or a negative errno (the client got HP_WELCOME_ERROR). */
int collector_grow(struct collector *c, struct target *t);

/* One dump of one target, stamped ts (0: now); its regions are read
 * when the writer gets to it (at once without the writer thread).  0 or a
 * negative errno.  A traced target's dump also reads what oneshot kept
 * since the last one, and writes the trace's counts so far
 * (heapprof_trace). */
int collector_dump(struct collector *c, struct target *t, const char *reason,
                   uint64_t ts);
/* Memory over time (curve.c): t's heaps' live bytes, summed from its
 * stack tables, and rss (if have_rss) queued as counter values at ts
 * (CLOCK_BOOTTIME); sets t->curve_gap_ns.  0 or a negative errno. */
int collector_curve(struct collector *c, struct target *t, uint64_t ts,
                    uint64_t rss, bool have_rss);
/* A dump with every live block (snapshot_take_live); name (may be NULL)
 * makes it a named snapshot. */
int collector_dump_blocks(struct collector *c, struct target *t,
                          const char *reason, const char *name, uint64_t ts);
/* The last dump of a target (it is gone, exec'd, or the session ends):
 * the rest of its trace first, then the dump, with every live block when
 * it is traced (the blocks never freed: leaks at exit). */
int collector_dump_final(struct collector *c, struct target *t,
                         const char *reason, uint64_t ts);

/*
 * The event trace (trace.c).  collector_trace_poll is the session loop's
 * turn: streaming, at most TRACE_TURN_MAX events read in order and written
 * (the client gets the room back: trace_tail); returns how many events it
 * left unread (the loop comes back at once), or a negative errno when
 * writing failed (the events are lost, the room still given back).  At a
 * dump it also reads what a oneshot trace holds (TRACE_DUMP_MAX at most).
 * collector_trace_final reads all that is left (streaming and oneshot:
 * to the head, skipping after bounded retries what a writer never
 * finished, "incomplete"; ring: the newest capacity events).
 */
int collector_trace_poll(struct collector *c, struct target *t);
int collector_trace_final(struct collector *c, struct target *t);
/*
 * Progress of collector_trace_final, which may read millions of events:
 * fn(arg, done, total) every 65536 events it reads, fn(arg, -1, total)
 * when it is done.  NULL: none.  Process-wide; set by the command line.
 */
/* The trace's batches kept for reuse, freed (the writer stopped). */
void collector_trace_free(struct collector *c);
void collector_set_trace_progress(void (*fn)(void *arg, int64_t done,
                                             int64_t total),
                                  void *arg);
/* Oneshot: true once, the first time the client said the table is full;
 * *full_ts is when (CLOCK_BOOTTIME). */
bool collector_trace_full(struct target *t, uint64_t *full_ts);
/* The counts for heapprof_trace so far. */
void collector_trace_stats(struct target *t, struct prof_trace *out);
/* Whether the session should wake often for t: streaming, or oneshot not
 * yet full (its "full" line is said at once). */
bool collector_trace_active(const struct target *t);
/* One dump of every target that is not retired (pid 0), or of pid's.
 * Returns the number of processes dumped (queued); *errors counts
 * failures known at once. */
int collector_dump_all(struct collector *c, const char *reason);
int collector_dump_pid(struct collector *c, pid_t pid, const char *reason,
                       int *errors);
/*
 * Dumps someone waits for (heapprof dump: DUMP_DONE): as
 * collector_dump_pid, and once every one of them is written (or failed),
 * g->done(g) on the loop's thread (at once when writes are inline), with
 * g->dumps and g->errors counted; done may free g.
 */
struct dump_group {
	int dumps, errors;
	void (*done)(struct dump_group *g);
};
void collector_dump_group(struct collector *c, pid_t pid, const char *reason,
                          struct dump_group *g);

/* Sets header.control = STOP in every region of t (the client stops and
 * may be attached again later) and closes its connection. */
void collector_stop(struct target *t);
/* Unmaps t's regions (after its last dump, and after the dumps queued
 * before: they read them); the target stays listed. */
void collector_retire(struct collector *c, struct target *t);
/* Ends t's process row once.  0 or a negative errno. */
int collector_end_row(struct collector *c, struct target *t, uint64_t end_ts,
                      int exit_status, bool disconnected);

/* A row for a process another session profiles (nothing recorded). */
int collector_add_rejected(struct collector *c, pid_t pid, const char *how,
                           const char *name, const char *note);
/* A row for each process listed in c->unprofiled (nothing recorded: it
 * stopped waiting for the collector), then the list emptied.  Returns how
 * many there were (the listed and the more); the first max pids in
 * pids. */
unsigned collector_add_unprofiled(struct collector *c, pid_t *pids, size_t max);

/* Closes the socket, every connection and mapping; frees the targets. */
void collector_close(struct collector *c);

uint64_t collector_default_shmem(uint64_t interval);
uint64_t boottime_ns(void);

/* /proc/PID/comm and cmdline (arguments joined by spaces); "" if gone.
 * ppid from /proc/PID/stat, -1 if unknown. */
/*
 * Whether t's process replaced its image: its pid still runs with another
 * executable than the one it attached with, or (a zombie, whose executable
 * cannot be read any more) has another name that is a program in PATH.
 * If so, the new image's path goes to t->exec_not_followed, once.  Called when
 * its connection closes (an exec closes it: the client's socket is
 * close-on-exec, and the kernel installs the new executable before it closes
 * those) and before the command is reaped.
 */
void collector_note_exec(const struct collector *c, struct target *t);

/* snapshot.c: copies regions into a prof_dump (arrays owned by snap). */
struct snapshot {
	struct prof_dump dump;
	struct prof_module *modules;
	struct prof_stack *stacks;
	struct prof_heap *heaps;
	uint64_t *pcs;
	char *strings;
	uint8_t *build_ids;
	char (*heap_names)[HP_HEAP_NAME_MAX];
	struct prof_block *blocks; /* snapshot_take_live */
	/* Live slots a writer held through every retry, and blocks whose
	 * stack had no allocation counted yet: allocations and frees in
	 * progress while the snapshot was read (0 when the process was
	 * stopped). */
	uint64_t blocks_in_flight;
	/* Module paths snapshot_resolve_paths made (modules[].path). */
	char **paths;
	size_t npaths;
};
int snapshot_take(const struct hp_region *r, struct snapshot *s);
/*
 * The module paths the loader had relative ("./libx.so": a dlopen by a
 * relative path, or a library found through LD_LIBRARY_PATH=.), made the
 * file's absolute, canonical path: from /proc/PID/maps while the process
 * runs (alive) and still maps it, else from cwd (the process's working
 * directory when it attached; "" if unknown) when the file is there; a
 * path found once is kept for the process's later dumps.  The client
 * cannot do it: it records modules inside the program's allocations,
 * with no system call.  Others stay as they are.  0 or -ENOMEM.
 */
int snapshot_resolve_paths(struct snapshot *s, pid_t pid, bool alive,
                           const char *cwd);
/*
 * All of a process's regions into one dump: stacks concatenated (the
 * writer merges equal call stacks, so a stack's identity is its frames,
 * whatever region holds it), modules from all (duplicates dropped), header
 * counters summed.  at_peak, when the regions track the peak
 * (HP_CFG_TRACK_MAX: a STACK_MAX table): the stacks hold the state at the
 * peak of live bytes (stackmax_read) and at_max is set; else the state
 * now.  A region that tracks the peak gives max_ts_ns and max_live_bytes
 * either way.
 */
int snapshot_take_regions(const struct hp_region *const *r, int n, bool at_peak,
                          struct snapshot *s);
/*
 * snapshot_take_regions plus every live block (dump.blocks, nblocks): the
 * consistent snapshot.  Each block is copied whole (the live entries are
 * seqlocks, livetab_read) while the process runs; a block allocated or
 * freed during the read may or may not be in it, and blocks_in_flight
 * counts the entries a writer was changing.  Read while the process is
 * stopped (SIGSTOP), it is exact.  Stacks keep key = region index << 32 |
 * stack id.
 */
int snapshot_take_live(const struct hp_region *const *r, int n, bool at_peak,
                       struct snapshot *s);
/* The process's memory: /proc/PID/status if pid runs (and alive), else
 * what the client wrote at exit; fields it could not get stay unset. */
void snapshot_memory(const struct hp_region *r, pid_t pid, bool alive,
                     struct prof_memory *out);
void snapshot_free(struct snapshot *s);

#endif
