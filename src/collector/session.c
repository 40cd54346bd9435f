/*
 * The session engine behind `heapprof record` (session.h).
 *
 * One poll loop serves everything: a signalfd (SIGUSR1 = dump; SIGCHLD =
 * the command ended or stopped; SIGINT/SIGTERM/SIGHUP end a -p/-n session
 * and are passed on to the command of a `-- CMD` session), two timerfds
 * (-d and the continuous dumps), the collector's socket, pending hellos
 * and client connections, and the daemon connection.  Every wait in here
 * is bounded: a client or a daemon that hangs, dies or sends garbage costs
 * at most a bounded read, never the session.  Nor does the profile hold the
 * loop: while it runs, the collector's writer thread writes it (writeq.h).
 *
 * `-- CMD` runs the command in a process group of its own: a program that
 * signals its group (kill(0, SIG), as servers do to their workers) signals
 * itself and its children, as bare, and never record.  Record gives that
 * group the terminal when it had it, passes on the signals sent to record,
 * and stops and continues with the command (job control).  Record ignores
 * SIGXFSZ (a profile past `ulimit -f` is a write error, said once), SIGPIPE
 * and SIGTTOU; the command gets the dispositions and the signal mask record
 * was started with.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/session.h"
#include "collector/collector.h"
#include "daemon/ctl.h"
#include "layout/wire_v1.h"
#include "util/human.h"

#define PFX "heapprof: record: "
/* Tells the client to keep LD_PRELOAD and HEAPPROF_* in the program's
 * environment (src/client/client.c reads it, env_scrub). */
#define HP_ENV_FOLLOW "HEAPPROF_FOLLOW"

/* A target whose connection closed may be exec'ing: with --follow-exec,
 * its new image gets this long to say hello before the old one is
 * finished as gone (its last dump then says "disconnect", not "exec"). */
#define EXEC_GRACE_MS 500
/* The daemon answers SESSION_START at once; this bounds a broken one. */
#define SESSION_OK_MS 5000
/* -n with --no-startup: the daemon reports every running match right
 * after SESSION_OK; a session that heard of none within this time has
 * nothing to wait for. */
#define NAMES_QUIET_MS 1000
/* A continuous dump due this close to the end is left to the end dump. */
#define END_SLACK_NS (10 * 1000000ull)
/* While a target streams its trace (or a oneshot one may fill), the loop
 * wakes at least this often: it reads the events, and says at once when a
 * oneshot buffer filled. */
#define TRACE_POLL_MS 10
/* ... and this often when the last read found the buffer half full. */
#define TRACE_BUSY_MS 1
/* --follow-fork with -- CMD: once the command and every followed process
 * are gone, a descendant still running (reparented to record, its child
 * subreaper) may be a fork child about to say hello (it says it from fork
 * itself, at once): the session waits this long after the last process
 * came or went, looking every FOLLOW_POLL_MS, unless no descendant runs. */
#define FOLLOW_GRACE_MS 1000
#define FOLLOW_POLL_MS  10
/* At most this many pids named in one line. */
#define PIDS_SAID 8

/* What became of a process the session asked for or heard of. */
enum want_state {
	W_PENDING,   /* -p, nothing heard yet */
	W_SIGNALLED, /* the daemon asked it to attach */
	W_ATTACHED,  /* it is (or was) a target */
	W_FAILED,    /* denied, no client, gone, rejected, timed out */
};

struct want {
	int pid;
	enum want_state st;
	bool explicit_pid; /* named with -p */
};

struct session {
	const struct session_config *cfg;
	struct collector col;
	bool daemon_mode;
	int sfd, end_tfd, dump_tfd, dfd;
	uint64_t session_id;
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC; end 0 = no -d */
	char *out;
	const char *config_text;
	int write_errors;
	bool stopping;     /* the end is decided: finish at the loop's end */
	bool finished;     /* end dump written, profile closed */
	int rejected;      /* rejected_concurrent rows written */
	int trace_timeout; /* ms until the trace wants a turn; -1: never */
	struct pollfd *fds;
	size_t fds_cap;

	/* record -- CMD */
	pid_t child; /* also its process group */
	bool child_exited;
	int child_status;
	uint64_t child_exit_ts; /* CLOCK_BOOTTIME */
	const char *cmd_name;
	char *cmdline;
	/* Record's dispositions when it started, the command's again before
	 * its exec (record ignores these). */
	struct sigaction old_xfsz, old_pipe, old_ttou;
	bool ttou_saved;
	/* Job control: the controlling terminal (-1: none); whether the
	 * command's group is (was made) its foreground; the signal the
	 * command stopped with when record stopped too, and whether the
	 * command's group held the terminal then. */
	int tty;
	bool tty_given;
	int stopped_sig;
	bool stopped_held;
	int reraise; /* the signal record dies of at the very end, or 0 */
	/* --follow-fork: when to look at the descendants again (ms, -1);
	 * the "goes on" line said. */
	int follow_timeout;
	bool said_waiting;

	/* record -p/-n */
	struct want *wants;
	size_t nwants, wants_cap;
	bool daemon_gone;
	bool names_startup; /* -n without --no-startup: wait for new ones */
};

static int status_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

/* ---- the session's options into the collector's ------------------- */

static void select_heap(struct collector_opts *o, const char *name,
                        uint64_t interval, uint32_t flags)
{
	struct hp_heap_select_v1 *e = &o->heap_select[o->nheap_select++];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->interval = interval;
	e->flags = flags;
}

/*
 * Regions are formatted with the session's options.  Heaps travel by name
 * (the client knows its heaps' ids, we do not): --heaps lists them, each
 * with its interval (--heap-intervals, else --interval); --all-heaps takes
 * every heap but --exclude-heaps ones at --interval; neither means
 * libc.malloc only.  The header's sampling_interval is malloc's interval.
 */
static void collector_opts_of(const struct session_config *cfg,
                              struct collector_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->interval = cfg->interval;
	o->unwind_mode = cfg->unwind_mode;
	o->max_frames = cfg->max_frames;
	o->shmem_size = cfg->shmem_size;
	for (int i = 0; i < cfg->nheaps && i < (int)HP_MAX_HEAPS; i++) {
		uint64_t iv = i < cfg->nheap_intervals && cfg->heap_intervals[i]
		                      ? cfg->heap_intervals[i]
		                      : cfg->interval;
		select_heap(o, cfg->heaps[i], iv, 0);
		if (!strcmp(cfg->heaps[i], "libc.malloc"))
			o->interval = iv;
	}
	if (cfg->all_heaps) {
		o->config_flags |= HP_CFG_ALL_HEAPS;
		for (int i = 0;
		     i < cfg->nexclude_heaps && o->nheap_select < HP_MAX_HEAPS;
		     i++)
			select_heap(o, cfg->exclude_heaps[i], 0,
			            HP_HEAPSEL_EXCLUDE);
	}
	if (cfg->follow_fork)
		o->config_flags |= HP_CFG_FOLLOW_FORK;
	o->follow_exec = cfg->follow_exec;
	if (cfg->dump_at_max)
		o->config_flags |= HP_CFG_TRACK_MAX;
	if (cfg->adaptive) {
		o->config_flags |= HP_CFG_ADAPTIVE;
		o->adaptive_threshold_pct = cfg->adaptive_threshold_pct;
		o->adaptive_max_interval = cfg->adaptive_max_interval;
	}
	if (cfg->block_client) {
		o->config_flags |= HP_CFG_BLOCK_CLIENT;
		o->block_timeout_ms = cfg->block_timeout_ms;
	}
	o->trace_mode = cfg->trace_mode;
	o->trace_bytes = cfg->trace_bytes;
	/* A streaming writer that finds no room waits as long as a full
	 * table's (--block-client) would. */
	if (cfg->trace_mode == HP_TRACE_STREAMING && cfg->block_client)
		o->trace_block_ms = cfg->block_timeout_ms;
}

/* ---- targets ------------------------------------------------------- */

static bool is_command(const struct session *s, const struct target *t)
{
	return !s->daemon_mode && t->pid == s->child;
}

/* The dump of a target whose connection closed and that did not come
 * back as a new image: its last state, then its row ends. */
static void finish_gone(struct session *s, struct target *t)
{
	if (collector_dump_final(&s->col, t, "disconnect", 0) != 0)
		s->write_errors++;
	collector_stop(t);
	collector_retire(&s->col, t);
	uint64_t end = t->disconnect_ts ? t->disconnect_ts : boottime_ns();
	if (collector_end_row(&s->col, t, end, -1, true) != 0)
		s->write_errors++;
}

/* A target's image was replaced (--follow-exec): the old image's row ends
 * here with its last dump; the new image gets a row of its own. */
static void finish_exec(struct session *s, struct target *t)
{
	if (collector_dump_final(&s->col, t, "exec", 0) != 0)
		s->write_errors++;
	collector_stop(t);
	collector_retire(&s->col, t);
	if (collector_end_row(&s->col, t, boottime_ns(), -1, false) != 0)
		s->write_errors++;
}

/* The command exited (SIGCHLD) and its connection closed, while the
 * session goes on (--follow-fork): its end dump and its exit status. */
static void finish_command(struct session *s, struct target *t)
{
	if (collector_dump_final(&s->col, t, "end", 0) != 0)
		s->write_errors++;
	collector_stop(t);
	collector_retire(&s->col, t);
	if (collector_end_row(&s->col, t, t->disconnect_ts,
	                      status_code(s->child_status), false) != 0)
		s->write_errors++;
}

/* How often a target whose connection the program closed is looked at
 * (does it still map its region?). */
#define CONN_LOST_CHECK_MS 200

/* Targets that went away: finished once the exec grace is over.  The
 * command of a `-- CMD` session is left to the end (its exit status comes
 * with SIGCHLD).  Returns ms until the next grace ends, or -1. */
static int reap_disconnected(struct session *s)
{
	uint64_t grace = s->cfg->follow_exec ? EXEC_GRACE_MS * 1000000ull : 0;
	uint64_t now = boottime_ns(), next = UINT64_MAX;
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (!t->disconnected || t->retired || is_command(s, t))
			continue;
		if (now < t->disconnect_ts + grace) {
			if (t->disconnect_ts + grace < next)
				next = t->disconnect_ts + grace;
			continue;
		}
		/* A closed connection is not always an exit: a program that
		 * closes every descriptor (as daemons do) closes ours, and
		 * records on into its region.  While it still maps the
		 * region it is profiled; looked at again every
		 * CONN_LOST_CHECK_MS, and finished once it is gone. */
		if (collector_target_maps_region(t)) {
			if (!t->conn_lost) {
				t->conn_lost = true;
				fprintf(stderr,
				        PFX
				        "pid %d closed its connection to the "
				        "collector (the program closed or "
				        "reused the descriptor); profiled on "
				        "through its shared region\n",
				        (int)t->pid);
			}
			uint64_t again = now + CONN_LOST_CHECK_MS * 1000000ull;
			if (again < next)
				next = again;
			continue;
		}
		if (t->conn_lost)
			t->disconnect_ts = now; /* it ended about now */
		finish_gone(s, t);
	}
	if (next == UINT64_MAX)
		return -1;
	return (int)((next - now) / 1000000 + 1);
}

static struct want *want_find(struct session *s, int pid)
{
	for (size_t i = 0; i < s->nwants; i++)
		if (s->wants[i].pid == pid)
			return &s->wants[i];
	return NULL;
}

static struct want *want_add(struct session *s, int pid, bool explicit_pid)
{
	struct want *w = want_find(s, pid);
	if (w)
		return w;
	if (s->nwants == s->wants_cap) {
		size_t cap = s->wants_cap ? s->wants_cap * 2 : 16;
		struct want *n = realloc(s->wants, cap * sizeof(*n));
		if (!n)
			return NULL;
		s->wants = n;
		s->wants_cap = cap;
	}
	w = &s->wants[s->nwants++];
	*w = (struct want){
	        .pid = pid, .st = W_PENDING, .explicit_pid = explicit_pid};
	return w;
}

static bool is_explicit_pid(const struct session *s, int pid)
{
	for (int i = 0; i < s->cfg->npids; i++)
		if (s->cfg->pids[i] == pid)
			return true;
	return false;
}

/* ---- dumps --------------------------------------------------------- */

static int dump_now(struct session *s, pid_t pid, const char *reason,
                    int *errors)
{
	int err = 0;
	int n = collector_dump_pid(&s->col, pid, reason, &err);
	s->write_errors += err;
	if (errors)
		*errors = err;
	return n;
}

/* ---- the event trace ---------------------------------------------- */

static int min_timeout(int a, int b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return a < b ? a : b;
}

/* Oneshot: the buffer filled; said once, at the turn it is seen. */
static void say_full(const struct target *t, uint64_t full_ts)
{
	char b[HP_FMT_BYTES_MAX];
	uint64_t after = full_ts > t->start_ts ? full_ts - t->start_ts : 0;
	fprintf(stderr,
	        PFX "pid %d: trace buffer full after %llu events (%s, %.3f s "
	            "after start); later events are counted, not kept "
	            "(--trace-buffer, or --trace streaming)\n",
	        (int)t->pid, (unsigned long long)t->tr.cap,
	        hp_fmt_bytes_short(b, sizeof(b), (int64_t)t->tr.bytes),
	        (double)after / 1e9);
}

/*
 * The trace's turn of the loop: streaming targets' events read (a bounded
 * number each), a oneshot buffer that filled said.  Sets s->trace_timeout:
 * 0 when events were left unread, else how soon to look again.
 */
static void trace_turn(struct session *s)
{
	int timeout = -1;
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (!t->tr.mode || t->retired)
			continue;
		uint64_t full_ts;
		if (collector_trace_full(t, &full_ts))
			say_full(t, full_ts);
		if (!collector_trace_active(t))
			continue;
		int wait = TRACE_POLL_MS;
		if (t->tr.mode == HP_TRACE_STREAMING) {
			int left = collector_trace_poll(&s->col, t);
			if (left < 0)
				s->write_errors++;
			else if (left > 0)
				wait = 0;
			else if (t->tr.last_read >= t->tr.cap / 2)
				wait = TRACE_BUSY_MS;
		}
		timeout = min_timeout(timeout, wait);
	}
	s->trace_timeout = timeout;
}

/* The end of record: what each process's trace kept and left out. */
static void trace_summary(struct session *s)
{
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (!t->tr.mode)
			continue;
		struct prof_trace pt;
		collector_trace_stats(t, &pt);
		char extra[160] = "";
		size_t o = 0;
		if (pt.incomplete)
			o += (size_t)snprintf(
			        extra + o, sizeof(extra) - o,
			        ", %llu incomplete",
			        (unsigned long long)pt.incomplete);
		if (pt.waits && o < sizeof(extra))
			snprintf(extra + o, sizeof(extra) - o,
			         ", %llu waits for room (%.3f s)",
			         (unsigned long long)pt.waits,
			         (double)pt.wait_ns / 1e9);
		fprintf(stderr,
		        PFX "pid %d: trace (%s): %llu events kept, %llu "
		            "dropped, %llu overwritten%s\n",
		        (int)t->pid, pt.mode, (unsigned long long)pt.events,
		        (unsigned long long)pt.dropped_allocs +
		                (unsigned long long)pt.dropped_frees,
		        (unsigned long long)pt.overwritten, extra);
	}
}

/* A `-- CMD` session that ended (-d, Ctrl-C) while processes it followed
 * still ran: which ones, since they run on unprofiled. */
static void say_still_running(struct session *s)
{
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (t->retired || t->disconnected || is_command(s, t))
			continue;
		char comm[64];
		proc_comm(t->pid, comm, sizeof(comm));
		fprintf(stderr,
		        PFX "pid %d (%s): still running at the end of the "
		            "session: profiled until now, it runs on "
		            "unprofiled\n",
		        (int)t->pid, comm[0] ? comm : "?");
	}
}

/*
 * The end: the last dump of every target still mapped (its trace read to
 * the end first), STOP in every region (the client stops recording and may
 * be profiled again later by another session), connections closed, rows
 * ended.
 */
static void finish(struct session *s)
{
	if (!s->daemon_mode)
		say_still_running(s);
	uint64_t ts = boottime_ns();
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (!t->retired &&
		    collector_dump_final(&s->col, t, "end", ts) != 0)
			s->write_errors++;
	}
	trace_summary(s);
	for (size_t i = 0; i < s->col.ntargets; i++)
		collector_stop(s->col.targets[i]);
	uint64_t end = boottime_ns();
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		bool cmd = is_command(s, t);
		int code = cmd && s->child_exited ? status_code(s->child_status)
		                                  : -1;
		if (collector_end_row(&s->col, t,
		                      t->disconnected ? t->disconnect_ts : end,
		                      code, t->disconnected && !cmd) != 0)
			s->write_errors++;
	}
	if (!s->daemon_mode && s->col.ntargets == 0) {
		/* The program never attached (static binary, setuid, or the
		 * library failed): still say what ran and how it ended. */
		struct prof_process info = {
		        .pid = s->child,
		        .name = s->cmd_name,
		        .cmdline = s->cmdline,
		        .sampling_interval = s->col.opts.interval,
		        .unwind = s->col.opts.unwind_mode == HP_UNWIND_FP
		                          ? "fp"
		                          : "dwarf",
		        .max_frames = s->col.opts.max_frames,
		        .start_ts_ns = end,
		        .how = "command",
		        .note = "never attached",
		};
		int64_t upid;
		struct prof_process_end e = {
		        .end_ts_ns = end,
		        .exit_status = s->child_exited
		                               ? status_code(s->child_status)
		                               : -1,
		        .disconnected = 1};
		if (profile_begin_process(s->col.profile, &info, &upid) != 0 ||
		    profile_end_process(s->col.profile, upid, &e) != 0)
			s->write_errors++;
		/* When its region could not be made, the collector said why
		 * (and that it runs unprofiled): no guess needed. */
		if (!s->col.region_errors)
			fprintf(stderr,
			        PFX "%s never attached to the profiler "
			            "(statically linked, setuid, or LD_PRELOAD "
			            "ignored?); the profile holds no "
			            "allocations\n",
			        s->cmd_name);
	}
	if (s->config_text &&
	    profile_set_meta(s->col.profile, "config", s->config_text) != 0)
		s->write_errors++;
	if (s->dfd >= 0)
		close(s->dfd);
	s->dfd = -1;
}

/* Closes the profile and says where it is; returns 0 when written. */
static int close_profile(struct session *s)
{
	int rc = profile_close(s->col.profile);
	s->col.profile = NULL;
	bool empty = s->daemon_mode && s->col.ntargets == 0 && !s->rejected;
	if (empty) {
		/* Nothing to show: no file is better than an empty one. */
		static const char *const suffix[] = {"", "-wal", "-shm"};
		char path[PATH_MAX];
		for (size_t i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s%s", s->out, suffix[i]);
			unlink(path);
		}
		fprintf(stderr, PFX "no process was profiled; no profile "
		                    "written\n");
		return -1;
	}
	if (rc != 0 || s->write_errors) {
		/* The writer said the first error and what is kept; a second
		 * line would only repeat it. */
		if (!profile_errors_said())
			fprintf(stderr,
			        PFX "the profile %s may be incomplete (write "
			            "errors above)\n",
			        s->out);
		return -1;
	}
	fprintf(stderr, "heapprof: profile written to %s\n", s->out);
	return 0;
}

/* ---- timers -------------------------------------------------------- */

static int timer_at(uint64_t first_ns, uint64_t every_ns)
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd < 0)
		return -1;
	struct itimerspec its = {
	        .it_value = {.tv_sec = (time_t)(first_ns / 1000000000ull),
	                     .tv_nsec = (long)(first_ns % 1000000000ull)},
	        .it_interval = {.tv_sec = (time_t)(every_ns / 1000000000ull),
	                        .tv_nsec = (long)(every_ns % 1000000000ull)},
	};
	if (timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Arms -d and the continuous dumps, counted from now (the start of
 * profiling: the command's exec, or the daemon's SESSION_OK). */
static int arm_timers(struct session *s)
{
	const struct session_config *cfg = s->cfg;
	s->start_ns = hp_clock_ns(CLOCK_MONOTONIC);
	if (cfg->duration_ms) {
		s->end_ns = s->start_ns + cfg->duration_ms * 1000000ull;
		s->end_tfd = timer_at(s->end_ns, 0);
		if (s->end_tfd < 0)
			return -1;
	}
	if (cfg->dump_interval_ms) {
		uint64_t every = cfg->dump_interval_ms * 1000000ull;
		/* heapprofd's continuous_dump_config: the first dump at the
		 * phase, then every interval; no phase = one interval. */
		uint64_t phase = cfg->dump_phase_ms
		                         ? cfg->dump_phase_ms * 1000000ull
		                         : every;
		s->dump_tfd = timer_at(s->start_ns + phase, every);
		if (s->dump_tfd < 0)
			return -1;
	}
	return 0;
}

static void drain_timer(int fd)
{
	uint64_t n;
	ssize_t r = read(fd, &n, sizeof(n));
	(void)r;
}

/* ---- embedded: record -- CMD --------------------------------------- */

/* Path of libheapprof.so: next to the heapprof binary, or under ../lib. */
static int find_library(char *out, size_t len)
{
	const char *env = getenv("HEAPPROF_LIB");
	if (env && *env) {
		if (access(env, R_OK) != 0) {
			fprintf(stderr, PFX "HEAPPROF_LIB=%s is not readable\n",
			        env);
			return -1;
		}
		snprintf(out, len, "%s", env);
		return 0;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	char *dir = dirname(self);
	const char *cands[] = {"%s/libheapprof.so", "%s/../lib/libheapprof.so"};
	for (size_t i = 0; i < 2; i++) {
		snprintf(out, len, cands[i], dir);
		if (access(out, R_OK) == 0) {
			char real[PATH_MAX];
			if (realpath(out, real))
				snprintf(out, len, "%s", real);
			return 0;
		}
	}
	fprintf(stderr,
	        PFX "cannot find libheapprof.so next to %s (set "
	            "HEAPPROF_LIB)\n",
	        self);
	return -1;
}

static char *join_args(char *const *argv)
{
	size_t len = 1;
	for (char *const *p = argv; *p; p++)
		len += strlen(*p) + 1;
	char *s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (char *const *p = argv; *p; p++) {
		if (p != argv)
			strcat(s, " ");
		strcat(s, *p);
	}
	return s;
}

/* "Seccomp_filters:" of /proc/self/status (0 if none or unknown). */
static long seccomp_filters_of_self(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return 0;
	char line[256];
	long n = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp_filters: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

static int setup_child_env(const char *path, const char *sock, bool follow)
{
	char lib[PATH_MAX + 32];
	preload_entry(path, lib, sizeof(lib));
	const char *old = getenv("LD_PRELOAD");
	char *v;
	if (old && *old) {
		if (asprintf(&v, "%s:%s", lib, old) < 0)
			return -1;
	} else {
		v = strdup(lib);
		if (!v)
			return -1;
	}
	int rc = setenv("LD_PRELOAD", v, 1) | setenv(HP_ENV_SOCKET, sock, 1);
	/* Our own seccomp filters (a container's), inherited by the
	 * command: the client tells the program's own from them. */
	char nf[24];
	snprintf(nf, sizeof(nf), "%ld", seccomp_filters_of_self());
	rc |= setenv(HP_ENV_SECCOMP, nf, 1);
	/* The client takes these variables out of the program's environment
	 * unless it must pass them on: the new images of followed processes
	 * need them (src/client/client.c, env_scrub). */
	if (follow)
		rc |= setenv(HP_ENV_FOLLOW, "1", 1);
	else
		rc |= unsetenv(HP_ENV_FOLLOW);
	free(v);
	return rc;
}

/* In the child: its own process group, then wait for the go byte (the
 * parent may give the group the terminal meanwhile), record's signal
 * state undone, exec; if exec fails, send its errno through err_fd
 * (close-on-exec, so success closes it silently).  Never returns. */
static void child_run(const struct session *s, int go_fd, int err_fd,
                      const sigset_t *oldmask, char *const *argv)
{
	/* The parent does it too: whichever runs first. */
	setpgid(0, 0);
	char b;
	ssize_t n;
	do
		n = read(go_fd, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		_exit(127); /* parent gave up; it already said why */
	close(go_fd);
	sigaction(SIGXFSZ, &s->old_xfsz, NULL);
	sigaction(SIGPIPE, &s->old_pipe, NULL);
	if (s->ttou_saved)
		sigaction(SIGTTOU, &s->old_ttou, NULL);
	sigprocmask(SIG_SETMASK, oldmask, NULL);
	execvp(argv[0], argv);
	int e = errno;
	ssize_t w = write(err_fd, &e, sizeof(e));
	(void)w;
	_exit(e == ENOENT ? 127 : 126);
}

/* In the parent: 0 once the child has exec'd, else the exec errno. */
static int exec_result(int err_fd)
{
	int e = 0;
	ssize_t n;
	do
		n = read(err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(e) ? e : 0;
}

/*
 * Who gets a region on the embedded socket: the launched command's first
 * image; with --follow-fork, a child whose parent (checked in /proc, not
 * taken from the hello) is a target; with --follow-exec, the new image of
 * a target.  Anyone else (e.g. a program the command runs) is told it is
 * not a target and runs unprofiled.
 */
static uint32_t want_embedded(void *ctx, pid_t pid, const struct hp_hello *h,
                              struct target_info *ti)
{
	struct session *s = ctx;
	const struct session_config *cfg = s->cfg;
	if (s->finished)
		return HP_WELCOME_NOT_TARGET;
	if ((h->flags & HP_HELLO_FORK_CHILD) && !cfg->follow_fork) {
		/* Without --follow-fork a target says this hello itself,
		 * before its first fork, vfork or spawn, only to tell us
		 * (src/client/client.c, client_child_note): the report
		 * says its children were not followed. */
		struct target *p = collector_find(&s->col, pid);
		if (p)
			p->children_not_followed = 1;
		return HP_WELCOME_NOT_TARGET;
	}
	if (!cfg->follow_exec && !(h->flags & HP_HELLO_FORK_CHILD)) {
		/* A target's new image (it kept the environment: with
		 * --follow-fork) says hello while it runs: not followed. */
		struct target *old = collector_find(&s->col, pid);
		if (old)
			collector_note_exec(&s->col, old);
	}
	if (h->flags & HP_HELLO_FORK_CHILD) {
		if (collector_had_pid(&s->col, pid))
			return HP_WELCOME_NOT_TARGET;
		/* Its parent is (or was: it may be exiting) a target, or is
		 * gone and the child was reparented to record, the child
		 * subreaper: the grandchild of a double-fork daemon. */
		pid_t ppid = proc_ppid(pid);
		if (ppid <= 0 ||
		    (ppid != getpid() && !collector_had_pid(&s->col, ppid)))
			return HP_WELCOME_NOT_TARGET;
		/* Its parent at the fork, when the hello names a target
		 * (the /proc one may already be record). */
		ti->ppid = h->ppid > 0 && collector_had_pid(&s->col, h->ppid)
		                   ? h->ppid
		                   : ppid;
		ti->how = "fork";
		ti->from_startup = true; /* profiled from its first moment */
		return HP_WELCOME_ACCEPT;
	}
	if (pid == s->child && !collector_had_pid(&s->col, pid)) {
		ti->ppid = getpid();
		ti->how = "command";
		ti->from_startup = true;
		ti->name = s->cmd_name;
		ti->cmdline = s->cmdline;
		return HP_WELCOME_ACCEPT;
	}
	if (cfg->follow_fork && (h->flags & HP_HELLO_AT_STARTUP) &&
	    !collector_had_pid(&s->col, pid)) {
		/* A child started by vfork, posix_spawn, system or popen
		 * runs no atfork handler: its first image of its own is the
		 * one it exec'd, which says hello from its constructor.
		 * Followed as a fork when its parent is (or was) a target. */
		pid_t ppid = proc_ppid(pid);
		if (ppid > 0 && ppid != getpid() &&
		    collector_had_pid(&s->col, ppid)) {
			ti->ppid = ppid;
			ti->how = "fork";
			ti->from_startup = true;
			return HP_WELCOME_ACCEPT;
		}
	}
	if (cfg->follow_exec && collector_had_pid(&s->col, pid)) {
		/* The same pid says hello again from a constructor: its
		 * image was replaced.  The old one's connection may not have
		 * closed yet (two sockets, no order between them). */
		struct target *old = collector_find(&s->col, pid);
		if (old)
			finish_exec(s, old);
		ti->ppid = proc_ppid(pid);
		ti->how = "exec";
		ti->from_startup = true;
		return HP_WELCOME_ACCEPT;
	}
	return HP_WELCOME_NOT_TARGET;
}

/* ---- job control: the command's process group and the terminal ----- */

static bool is_fifo(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

/*
 * Before the command's exec: record run in the terminal's foreground with
 * the terminal as stdin (from an interactive shell) makes the command's
 * group the foreground, so that the terminal's Ctrl-C, Ctrl-Z and reads
 * reach the command as they would bare.  Not when record's output goes
 * into a pipe: the other commands of record's job (a pager) keep the
 * terminal, and its signals reach the command through record.
 */
static void tty_give_at_start(struct session *s)
{
	if (s->tty < 0 || !isatty(STDIN_FILENO) ||
	    tcgetpgrp(s->tty) != getpgrp() || is_fifo(STDOUT_FILENO) ||
	    is_fifo(STDERR_FILENO))
		return;
	/* SIGTTOU is ignored: no stop, whichever group is in front. */
	s->tty_given = tcsetpgrp(s->tty, s->child) == 0;
}

/* The command's group holds the terminal: record's group gets it back. */
static bool tty_take_back(struct session *s)
{
	if (s->tty < 0 || tcgetpgrp(s->tty) != s->child)
		return false;
	return tcsetpgrp(s->tty, getpgrp()) == 0;
}

/* Stops record with sig's default action (SIGSTOP for a signal that does
 * not stop); returns once record is continued. */
static void stop_self(int sig)
{
	if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU)
		sig = SIGSTOP;
	struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
	sigemptyset(&dfl.sa_mask);
	bool restore = sig != SIGSTOP && sigaction(sig, &dfl, &old) == 0;
	sigset_t one, prev;
	sigemptyset(&one);
	sigaddset(&one, sig);
	sigprocmask(SIG_UNBLOCK, &one, &prev);
	kill(getpid(), sig);
	sigprocmask(SIG_SETMASK, &prev, NULL);
	if (restore)
		sigaction(sig, &old, NULL);
}

/*
 * The command stopped.  When that is job control (a terminal's stop
 * signal, or any stop while its group has the terminal), record stops
 * too, with the same signal, after taking the terminal back: the shell
 * sees its job stopped and takes the terminal, as bare; its `fg` or `bg`
 * continues record, which continues the command (command_continued).
 * Without a terminal nobody would continue record: it does not stop.
 */
static void command_stopped(struct session *s, int sig)
{
	if (s->tty < 0)
		return;
	bool held = tcgetpgrp(s->tty) == s->child;
	if (!held && sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU)
		return;
	if (held)
		tty_take_back(s);
	s->stopped_sig = sig;
	s->stopped_held = held;
	stop_self(sig);
}

/* SIGCONT: record was continued; if it stopped with the command, the
 * command's group is continued too, with the terminal when record has it
 * (`fg`) and the command had it or stopped for it. */
static void command_continued(struct session *s)
{
	int sig = s->stopped_sig;
	s->stopped_sig = 0;
	if (!sig || s->child_exited)
		return;
	if (tcgetpgrp(s->tty) == getpgrp() &&
	    (s->stopped_held || sig == SIGTTIN || sig == SIGTTOU) &&
	    tcsetpgrp(s->tty, s->child) == 0)
		s->tty_given = true;
	if (kill(-s->child, SIGCONT) != 0)
		kill(s->child, SIGCONT);
}

/* Reaps record's children: the command (its exit, or its stop), and with
 * --follow-fork the orphans reparented to record (no zombies left). */
static void reap_children(struct session *s)
{
	int st;
	pid_t p;
	int flags = WNOHANG | (s->tty >= 0 ? WUNTRACED : 0);
	/* Before the command is reaped: whether it exec'd an image that is
	 * not followed (its name still reads while it is a zombie). */
	struct target *cmd =
	        s->child_exited ? NULL : collector_find(&s->col, s->child);
	if (cmd)
		collector_note_exec(&s->col, cmd);
	while ((p = waitpid(-1, &st, flags)) > 0) {
		if (p != s->child || s->child_exited)
			continue;
		if (WIFSTOPPED(st)) {
			command_stopped(s, WSTOPSIG(st));
			continue;
		}
		s->child_exited = true;
		s->child_status = st;
		s->child_exit_ts = boottime_ns();
		tty_take_back(s);
	}
}

/* Whether pid is the program (or a process it made, in its group or
 * followed): a signal it sends to record is not for the program. */
static bool from_program(struct session *s, pid_t pid)
{
	if (pid <= 0)
		return false;
	if (pid == s->child || collector_had_pid(&s->col, pid))
		return true;
	return getpgid(pid) == s->child;
}

/*
 * SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP sent to record go on to the
 * command: the terminal's (sent to record's group, so not to the
 * command's) to its group, as the terminal would have bare; a process's
 * to the command itself, as if sent to it.  Once the command is gone
 * (--follow-fork waits for its followed processes), they end the session
 * (SIGTSTP stops record, as any job).
 */
static void pass_signal(struct session *s, const struct signalfd_siginfo *si)
{
	int sig = (int)si->ssi_signo;
	if (s->child_exited) {
		if (sig == SIGTSTP)
			stop_self(SIGTSTP);
		else
			s->stopping = true;
		return;
	}
	if (si->ssi_code == SI_KERNEL) {
		if (kill(-s->child, sig) == 0)
			return;
	} else if (from_program(s, (pid_t)si->ssi_pid)) {
		return; /* the program signalled its parent */
	}
	kill(s->child, sig);
}

static void on_signal_embedded(struct session *s,
                               const struct signalfd_siginfo *si)
{
	switch (si->ssi_signo) {
	case SIGUSR1:
		if (!s->finished)
			dump_now(s, 0, "signal", NULL);
		break;
	case SIGCHLD:
		reap_children(s);
		break;
	case SIGCONT:
		command_continued(s);
		break;
	default:
		pass_signal(s, si);
		break;
	}
}

/* ---- --follow-fork with -- CMD: the end of the session -------------- */

/* The state letter of /proc/PID/stat (0: gone) and its ppid. */
static char proc_state(pid_t pid, pid_t *ppid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	char st;
	int pp;
	if (!p || sscanf(p + 1, " %c %d", &st, &pp) != 2)
		return 0;
	if (ppid)
		*ppid = pp;
	return st;
}

static bool running(pid_t pid)
{
	char st = proc_state(pid, NULL);
	return st && st != 'Z' && st != 'X';
}

/* Record's children that run (not zombies): with --follow-fork these are
 * descendants of the command whose parents are gone.  From
 * /proc/self/task/TID/children, else (a kernel without them) by a scan of
 * /proc; -1 if neither can tell. */
static int running_children(void)
{
	int n = 0;
	bool found = false;
	DIR *d = opendir("/proc/self/task");
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char path[300];
			snprintf(path, sizeof(path),
			         "/proc/self/task/%s/children", e->d_name);
			FILE *f = fopen(path, "re");
			if (!f)
				continue;
			found = true;
			int pid;
			while (fscanf(f, "%d", &pid) == 1)
				n += running(pid);
			fclose(f);
		}
		closedir(d);
	}
	if (found)
		return n;
	d = opendir("/proc");
	if (!d)
		return -1;
	pid_t self = getpid();
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		pid_t pp = 0;
		if (*end || pid <= 0)
			continue;
		char st = proc_state((pid_t)pid, &pp);
		n += pp == self && st && st != 'Z' && st != 'X';
	}
	closedir(d);
	return n;
}

/* Once: the command is gone and the session goes on for the processes it
 * left running. */
static void say_waiting(struct session *s)
{
	char pids[PIDS_SAID * 12 + 16] = "";
	size_t o = 0, n = 0;
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		/* (A connection whose end is not read yet may be of a
		 * process that is gone already.) */
		if (t->retired || t->disconnected || is_command(s, t) ||
		    !running(t->pid))
			continue;
		if (n++ < PIDS_SAID && o < sizeof(pids))
			o += (size_t)snprintf(pids + o, sizeof(pids) - o,
			                      "%s%d", o ? " " : "",
			                      (int)t->pid);
	}
	if (!n)
		return; /* said at a later turn, if any runs then */
	s->said_waiting = true;
	if (n > PIDS_SAID && o < sizeof(pids))
		snprintf(pids + o, sizeof(pids) - o, " ...");
	fprintf(stderr,
	        PFX "%s exited (status %d); the session goes on while %zu "
	            "followed process%s run%s (pid %s); -d or Ctrl-C ends "
	            "it\n",
	        s->cmd_name, status_code(s->child_status), n,
	        n == 1 ? "" : "es", n == 1 ? "s" : "", pids);
}

/*
 * Whether a `-- CMD` session is over: when the command has exited; with
 * --follow-fork, when also no followed process runs (connected), no hello
 * is being read, and no descendant still running may yet say one (within
 * FOLLOW_GRACE_MS of the last process that came or went).  Sets
 * s->follow_timeout: when to look again.
 */
static bool embedded_over(struct session *s)
{
	s->follow_timeout = -1;
	if (!s->child_exited)
		return false;
	if (!s->cfg->follow_fork)
		return true;
	uint64_t last = s->child_exit_ts;
	bool live = false;
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (is_command(s, t)) {
			/* Its last dump and its row's end now, not when the
			 * processes it left are done. */
			if (!t->retired && t->disconnected)
				finish_command(s, t);
			continue;
		}
		if (!t->retired && (!t->disconnected || t->conn_lost))
			live = true;
		if (t->start_ts > last)
			last = t->start_ts;
		if (t->disconnected && t->disconnect_ts > last)
			last = t->disconnect_ts;
	}
	if (live) {
		if (!s->said_waiting)
			say_waiting(s);
		return false;
	}
	if (s->col.npending)
		return false; /* bounded by the hello's own timeout */
	uint64_t now = boottime_ns();
	uint64_t until = last + FOLLOW_GRACE_MS * 1000000ull;
	if (now >= until || running_children() == 0)
		return true;
	uint64_t left = (until - now) / 1000000 + 1;
	s->follow_timeout = left < FOLLOW_POLL_MS ? (int)left : FOLLOW_POLL_MS;
	return false;
}

/* ---- daemon: record -p/-n ------------------------------------------ */

static const char *target_status_name(uint32_t st)
{
	switch (st) {
	case HP_TGT_SIGNALLED:
		return "signalled";
	case HP_TGT_REJECTED_CONCURRENT:
		return "rejected_concurrent";
	case HP_TGT_DENIED:
		return "denied";
	case HP_TGT_NO_CLIENT:
		return "no_client";
	case HP_TGT_GONE:
		return "gone";
	case HP_TGT_TIMEOUT:
		return "timeout";
	default:
		return "unknown";
	}
}

/* Copies a fixed-size text field of a message, cut at its end. */
static void field_str(char *dst, size_t dstlen, const char *src, size_t len)
{
	size_t n = strnlen(src, len);
	if (n >= dstlen)
		n = dstlen - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	/* One line: no control characters from the daemon. */
	for (char *p = dst; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = '?';
}

static void on_target_msg(struct session *s, const struct hp_ctl_msg *m)
{
	struct hp_ctl_target t;
	if (m->len != sizeof(t))
		return;
	memcpy(&t, m->payload, sizeof(t));
	char name[64], text[192];
	field_str(name, sizeof(name), t.name, sizeof(t.name));
	field_str(text, sizeof(text), t.text, sizeof(t.text));
	struct want *w = want_add(s, t.pid, is_explicit_pid(s, t.pid));
	const char *sn = target_status_name(t.status);
	if (t.status == HP_TGT_SIGNALLED) {
		if (w && w->st != W_ATTACHED)
			w->st = W_SIGNALLED;
		fprintf(stderr, PFX "pid %d (%s): asked to attach\n", t.pid,
		        name[0] ? name : "?");
		return;
	}
	/* A process that timed out may still attach later: a later CLIENT
	 * makes it a target all the same. */
	if (w && w->st != W_ATTACHED)
		w->st = W_FAILED;
	fprintf(stderr, PFX "pid %d (%s): not profiled: %s (%s)\n", t.pid,
	        name[0] ? name : "?", text[0] ? text : sn, sn);
	if (t.status == HP_TGT_REJECTED_CONCURRENT) {
		if (collector_add_rejected(&s->col, t.pid,
		                           w && w->explicit_pid ? "pid"
		                                                : "name",
		                           name, text[0] ? text : sn) != 0)
			s->write_errors++;
		s->rejected++;
	}
}

static void on_client_msg(struct session *s, struct hp_ctl_msg *m)
{
	struct hp_ctl_client cm;
	if (m->len != sizeof(cm) || m->fd < 0)
		return;
	memcpy(&cm, m->payload, sizeof(cm));
	int fd = m->fd;
	m->fd = -1; /* ours now */
	/* The connection itself says who is at the other end. */
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    cred.uid != getuid() || s->finished) {
		collector_refuse(fd, HP_WELCOME_NOT_TARGET);
		return;
	}
	int nonblock = fcntl(fd, F_GETFL);
	if (nonblock >= 0)
		fcntl(fd, F_SETFL, nonblock | O_NONBLOCK);
	pid_t pid = cred.pid;
	if (cm.layout_version < HP_LAYOUT_MIN_VERSION) {
		/* As the embedded socket does: no layout we can make. */
		fprintf(stderr,
		        PFX "pid %d: not profiled: its heapprof library asks "
		            "for layout version %u\n",
		        (int)pid, cm.layout_version);
		collector_refuse(fd, HP_WELCOME_NOT_TARGET);
		struct want *w = want_find(s, pid);
		if (w && w->st != W_ATTACHED)
			w->st = W_FAILED;
		return;
	}
	struct target_info ti = {.pid = pid,
	                         .ppid = cm.ppid > 0 ? cm.ppid : proc_ppid(pid),
	                         .from_startup = cm.from_startup != 0,
	                         .layout_version = cm.layout_version};
	struct target *old = collector_find(&s->col, pid);
	bool again = collector_had_pid(&s->col, pid);
	if (cm.hello_flags & HP_HELLO_FORK_CHILD) {
		ti.how = "fork";
		/* As with record -- CMD: the child is profiled from its
		 * first moment (the fork). */
		ti.from_startup = true;
	} else if (again && (cm.hello_flags & HP_HELLO_AT_STARTUP) &&
	           s->cfg->follow_exec)
		ti.how = "exec";
	else if (is_explicit_pid(s, pid))
		ti.how = "pid";
	else
		ti.how = "name";
	if (old) {
		if (!strcmp(ti.how, "exec"))
			finish_exec(s, old);
		else
			finish_gone(s, old);
	}
	struct target *t;
	int rc = collector_answer(&s->col, fd, &ti, &t);
	struct want *w = want_add(s, pid, is_explicit_pid(s, pid));
	if (!t) {
		fprintf(stderr, PFX "pid %d: not profiled: %s\n", (int)pid,
		        strerror(-rc));
		if (w && w->st != W_ATTACHED)
			w->st = W_FAILED;
		return;
	}
	if (rc)
		s->write_errors++;
	if (w)
		w->st = W_ATTACHED;
	char comm[64];
	proc_comm(pid, comm, sizeof(comm));
	const char *what = !strcmp(ti.how, "fork")   ? " (forked child)"
	                   : !strcmp(ti.how, "exec") ? " (new image)"
	                   : ti.from_startup         ? " from startup"
	                                             : "";
	fprintf(stderr, PFX "pid %d (%s): profiling%s\n", (int)pid,
	        comm[0] ? comm : "?", what);
}

/* `heapprof dump`: DUMP_DONE once the dumps are in the profile. */
struct dump_reply {
	struct dump_group g; /* first: done gets it */
	struct session *s;
	uint64_t request_id;
};

static void send_dump_done(struct session *s, uint64_t request_id, int dumps,
                           int errors)
{
	struct hp_ctl_dump_done d = {.request_id = request_id,
	                             .dumps = (uint32_t)dumps,
	                             .errors = (uint32_t)errors};
	if (s->dfd >= 0)
		ctl_send(s->dfd, HP_CTL_DUMP_DONE, &d, sizeof(d), -1);
}

static void dump_reply_done(struct dump_group *g)
{
	struct dump_reply *r = (struct dump_reply *)g;
	send_dump_done(r->s, r->request_id, g->dumps, g->errors);
	free(r);
}

static void on_dump_request(struct session *s, const struct hp_ctl_msg *m)
{
	struct hp_ctl_dump_request q;
	if (m->len != sizeof(q))
		return;
	memcpy(&q, m->payload, sizeof(q));
	struct dump_reply *r = s->finished ? NULL : malloc(sizeof(*r));
	if (!r) {
		int errors = 0;
		int n = s->finished ? 0
		                    : dump_now(s, q.pid, "request", &errors);
		send_dump_done(s, q.request_id, n, errors);
		return;
	}
	*r = (struct dump_reply){.g = {.done = dump_reply_done},
	                         .s = s,
	                         .request_id = q.request_id};
	collector_dump_group(&s->col, q.pid, "request", &r->g);
}

static void daemon_lost(struct session *s, const char *why)
{
	if (s->dfd >= 0)
		close(s->dfd);
	s->dfd = -1;
	s->daemon_gone = true;
	/* Nothing more can arrive through it; processes already attached
	 * talk to us directly and go on. */
	for (size_t i = 0; i < s->nwants; i++)
		if (s->wants[i].st == W_PENDING ||
		    s->wants[i].st == W_SIGNALLED)
			s->wants[i].st = W_FAILED;
	fprintf(stderr,
	        PFX "lost the connection to heapprofd (%s); going on with "
	            "the %zu process(es) attached\n",
	        why, s->col.ntargets);
}

static void on_daemon(struct session *s)
{
	/* Several messages may be queued; a bounded number per turn. */
	for (int i = 0; i < 32 && s->dfd >= 0; i++) {
		struct pollfd p = {.fd = s->dfd, .events = POLLIN};
		if (i > 0 && poll(&p, 1, 0) <= 0)
			return;
		struct hp_ctl_msg m;
		int rc = ctl_recv(s->dfd, &m, 1000, NULL);
		if (rc == -ETIMEDOUT && i > 0)
			return;
		if (rc) {
			daemon_lost(s, rc == -ECONNRESET ? "it closed it"
			                                 : strerror(-rc));
			return;
		}
		switch (m.type) {
		case HP_CTL_CLIENT:
			on_client_msg(s, &m);
			break;
		case HP_CTL_TARGET:
			on_target_msg(s, &m);
			break;
		case HP_CTL_DUMP_REQUEST:
			on_dump_request(s, &m);
			break;
		case HP_CTL_ERROR:
			fprintf(stderr, PFX "heapprofd: %.200s\n",
			        m.payload ? (const char *)m.payload : "");
			break;
		default:
			break; /* newer daemon: ignore what we do not know */
		}
		ctl_msg_free(&m);
	}
}

static int start_daemon_session(struct session *s)
{
	const struct session_config *cfg = s->cfg;
	size_t len = sizeof(struct hp_ctl_session) + (size_t)cfg->npids * 4;
	for (int i = 0; i < cfg->nnames; i++)
		len += strlen(cfg->names[i]) + 1;
	if (len > HP_CTL_MAX_PAYLOAD) {
		fprintf(stderr, PFX "too many targets for one session\n");
		return -1;
	}
	uint8_t *buf = calloc(1, len);
	if (!buf)
		return -1;
	struct hp_ctl_session h = {.npids = (uint32_t)cfg->npids,
	                           .nnames = (uint32_t)cfg->nnames};
	if (!cfg->no_startup)
		h.flags |= HP_SESS_STARTUP;
	if (!cfg->no_running)
		h.flags |= HP_SESS_RUNNING;
	if (cfg->follow_fork)
		h.flags |= HP_SESS_FOLLOW_FORK;
	if (cfg->follow_exec)
		h.flags |= HP_SESS_FOLLOW_EXEC;
	memcpy(buf, &h, sizeof(h));
	size_t off = sizeof(h);
	for (int i = 0; i < cfg->npids; i++) {
		int32_t p = cfg->pids[i];
		memcpy(buf + off, &p, 4);
		off += 4;
	}
	for (int i = 0; i < cfg->nnames; i++) {
		size_t n = strlen(cfg->names[i]) + 1;
		memcpy(buf + off, cfg->names[i], n);
		off += n;
	}
	int rc = ctl_send(s->dfd, HP_CTL_SESSION_START, buf, (uint32_t)len, -1);
	free(buf);
	if (rc) {
		fprintf(stderr, PFX "cannot talk to heapprofd: %s\n",
		        strerror(-rc));
		return -1;
	}
	struct hp_ctl_msg m;
	rc = ctl_recv(s->dfd, &m, SESSION_OK_MS, NULL);
	if (rc) {
		fprintf(stderr, PFX "heapprofd did not answer: %s\n",
		        rc == -ECONNRESET ? "it closed the connection"
		                          : strerror(-rc));
		return -1;
	}
	if (m.type == HP_CTL_ERROR) {
		fprintf(stderr, PFX "heapprofd refused the session: %.200s\n",
		        m.payload ? (const char *)m.payload : "");
		ctl_msg_free(&m);
		return -1;
	}
	if (m.type != HP_CTL_SESSION_OK ||
	    m.len != sizeof(struct hp_ctl_session_ok)) {
		fprintf(stderr,
		        PFX "heapprofd answered with message type %u "
		            "instead of SESSION_OK\n",
		        m.type);
		ctl_msg_free(&m);
		return -1;
	}
	struct hp_ctl_session_ok ok;
	memcpy(&ok, m.payload, sizeof(ok));
	ctl_msg_free(&m);
	s->session_id = ok.session_id;
	s->col.opts.session_id = ok.session_id;
	return 0;
}

static void on_signal_daemon(struct session *s,
                             const struct signalfd_siginfo *si)
{
	if (si->ssi_signo == SIGUSR1) {
		if (!s->finished)
			dump_now(s, 0, "signal", NULL);
		return;
	}
	/* SIGINT, SIGTERM, SIGHUP: the end of the session. */
	s->stopping = true;
}

/*
 * Whether a -p/-n session has nothing left to wait for: every process it
 * asked for attached or failed, no target is still connected (or within
 * its exec grace), and, with names, no new process can come (--no-startup
 * after the daemon's report of running matches, or the daemon is gone).
 */
static bool daemon_session_over(struct session *s)
{
	for (size_t i = 0; i < s->col.ntargets; i++) {
		const struct target *t = s->col.targets[i];
		if (!t->retired && !t->disconnected)
			return false;
		if (!t->retired && s->cfg->follow_exec)
			return false; /* in its grace */
	}
	for (size_t i = 0; i < s->nwants; i++)
		if (s->wants[i].st == W_PENDING ||
		    s->wants[i].st == W_SIGNALLED)
			return false;
	if (s->cfg->nnames && !s->daemon_gone) {
		if (s->names_startup)
			return false;
		if (hp_clock_ns(CLOCK_MONOTONIC) <
		    s->start_ns + NAMES_QUIET_MS * 1000000ull)
			return false;
	}
	return true;
}

/* ---- the loop ------------------------------------------------------ */

static struct pollfd *fds_reserve(struct session *s, size_t n)
{
	if (n > s->fds_cap) {
		struct pollfd *f = realloc(s->fds, n * sizeof(*f));
		if (!f)
			return NULL;
		s->fds = f;
		s->fds_cap = n;
	}
	return s->fds;
}

/*
 * The loop, with the profile written by the collector's writer thread
 * (collector_writer_start): a dump or a new process row never holds it, so
 * hellos, client messages and signals are answered while SQLite writes.
 * At its end every queued write is made (in order) before the end dumps.
 */
static void event_loop(struct session *s)
{
	enum { F_SIG, F_END, F_DUMP, F_DAEMON, F_COL };
	collector_writer_start(&s->col);
	while (!s->stopping) {
		size_t want =
		        F_COL + 2 + COLLECTOR_MAX_PENDING + s->col.ntargets;
		struct pollfd *fds = fds_reserve(s, want);
		if (!fds) {
			fprintf(stderr, PFX "out of memory\n");
			s->stopping = true;
			break;
		}
		fds[F_SIG] = (struct pollfd){.fd = s->sfd, .events = POLLIN};
		fds[F_END] =
		        (struct pollfd){.fd = s->end_tfd, .events = POLLIN};
		fds[F_DUMP] =
		        (struct pollfd){.fd = s->dump_tfd, .events = POLLIN};
		fds[F_DAEMON] = (struct pollfd){.fd = s->dfd, .events = POLLIN};
		size_t n = F_COL;
		n += collector_pollfds(&s->col, fds + n, want - n);

		int timeout = collector_timeout_ms(&s->col);
		timeout = min_timeout(timeout, collector_intern_ahead(&s->col));
		timeout = min_timeout(timeout, reap_disconnected(s));
		timeout = min_timeout(timeout, s->trace_timeout);
		timeout = min_timeout(timeout, s->follow_timeout);
		if (s->daemon_mode && s->cfg->nnames && !s->names_startup)
			timeout = min_timeout(timeout, 100);
		if (poll(fds, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			perror("heapprof: record: poll");
			break;
		}
		if (fds[F_SIG].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(s->sfd, &si, sizeof(si)) == sizeof(si)) {
				if (s->daemon_mode)
					on_signal_daemon(s, &si);
				else
					on_signal_embedded(s, &si);
			}
		}
		if (fds[F_END].revents & POLLIN) {
			drain_timer(s->end_tfd);
			s->stopping = true;
		}
		if ((fds[F_DUMP].revents & POLLIN) && !s->stopping) {
			drain_timer(s->dump_tfd);
			/* The end dump is about to be taken; or the last
			 * ones still wait for the writer (this tick is
			 * merged with theirs, as a tick during a dump the
			 * loop wrote itself was). */
			if ((!s->end_ns ||
			     hp_clock_ns(CLOCK_MONOTONIC) + END_SLACK_NS <
			             s->end_ns) &&
			    !collector_periodic_pending(&s->col))
				dump_now(s, 0, "periodic", NULL);
		}
		if (fds[F_DAEMON].revents && s->dfd >= 0)
			on_daemon(s);
		collector_handle(&s->col, fds + F_COL, n - F_COL, want_embedded,
		                 s);
		collector_expire(&s->col);
		trace_turn(s);
		reap_disconnected(s);
		if (!s->daemon_mode && embedded_over(s))
			s->stopping = true;
		if (s->daemon_mode && daemon_session_over(s))
			s->stopping = true;
	}
	/* No new client from now on: one that starts during the writes
	 * below finds no socket and runs unprofiled at once, instead of
	 * waiting for an answer that would be "not a target". */
	collector_stop_listening(&s->col);
	s->write_errors += (int)collector_writer_stop(&s->col);
}

/* After -d ended the profiling of a `-- CMD` session: the command runs on
 * (unprofiled); wait for it, passing signals on, and return its status. */
static void wait_command(struct session *s)
{
	while (!s->child_exited) {
		struct pollfd p = {.fd = s->sfd, .events = POLLIN};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			break;
		struct signalfd_siginfo si;
		while (read(s->sfd, &si, sizeof(si)) == sizeof(si))
			on_signal_embedded(s, &si);
	}
}

/* ---- setup --------------------------------------------------------- */

static char *default_output(const struct session_config *cfg, pid_t pid)
{
	char *out = NULL;
	int rc;
	if (cfg->argv && cfg->argv[0]) {
		char *copy = strdup(cfg->argv[0]);
		if (!copy)
			return NULL;
		rc = asprintf(&out, "heapprof.%s.%d.db", basename(copy),
		              (int)pid);
		free(copy);
	} else if (cfg->nnames) {
		/* A name may be a path (matched against argv[0]). */
		char *copy = strdup(cfg->names[0]);
		if (!copy)
			return NULL;
		rc = asprintf(&out, "heapprof.%s.%d.db", basename(copy),
		              (int)pid);
		free(copy);
	} else {
		rc = asprintf(&out, "heapprof.%d.%d.db", cfg->pids[0],
		              (int)pid);
	}
	return rc < 0 ? NULL : out;
}

static int setup_signals(struct session *s, sigset_t *oldmask)
{
	sigset_t mask;
	sigemptyset(&mask);
	int emb[] = {SIGCHLD, SIGUSR1, SIGINT,  SIGTERM,
	             SIGHUP,  SIGQUIT, SIGTSTP, SIGCONT};
	int dmn[] = {SIGUSR1, SIGINT, SIGTERM, SIGHUP};
	int *sigs = s->daemon_mode ? dmn : emb;
	size_t n = s->daemon_mode ? sizeof(dmn) / sizeof(dmn[0])
	                          : sizeof(emb) / sizeof(emb[0]);
	for (size_t i = 0; i < n; i++)
		sigaddset(&mask, sigs[i]);
	sigprocmask(SIG_BLOCK, &mask, oldmask);
	s->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	return s->sfd < 0 ? -1 : 0;
}

static void session_free(struct session *s)
{
	collector_writer_stop(&s->col);
	if (s->col.profile)
		profile_close(s->col.profile);
	s->col.profile = NULL;
	collector_close(&s->col);
	if (s->sfd >= 0)
		close(s->sfd);
	if (s->end_tfd >= 0)
		close(s->end_tfd);
	if (s->dump_tfd >= 0)
		close(s->dump_tfd);
	if (s->dfd >= 0)
		close(s->dfd);
	if (s->tty >= 0)
		close(s->tty);
	free(s->fds);
	free(s->wants);
	free(s->out);
	free(s->cmdline);
}

static int run_embedded(struct session *s, const char *record_cmdline)
{
	const struct session_config *cfg = s->cfg;
	char lib[PATH_MAX];
	if (find_library(lib, sizeof(lib)) != 0)
		return 1;
	struct collector_opts o;
	collector_opts_of(cfg, &o);
	if (collector_open(&s->col, &o, true) != 0)
		return 1;
	/* Job control: giving the terminal to the command's group, and
	 * taking it back, from a group that may be in the background; nor
	 * may a line to the terminal stop record (`stty tostop`). */
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigemptyset(&ign.sa_mask);
	s->ttou_saved = sigaction(SIGTTOU, &ign, &s->old_ttou) == 0;
	s->tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	/* --follow-fork: the command's descendants whose parents exit
	 * (daemons: fork, setsid, fork) are reparented to record, which
	 * follows them, waits for them and reaps them. */
	if (cfg->follow_fork && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
		fprintf(stderr,
		        PFX "cannot become a child subreaper (%s): processes "
		            "whose parent exits are not followed\n",
		        strerror(errno));
	sigset_t oldmask;
	int go[2], err[2];
	if (setup_signals(s, &oldmask) != 0 || pipe2(go, O_CLOEXEC) != 0) {
		perror("heapprof: record");
		return 1;
	}
	if (pipe2(err, O_CLOEXEC) != 0) {
		perror("heapprof: record");
		close(go[0]);
		close(go[1]);
		return 1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("heapprof: record: fork");
		return 1;
	}
	if (pid == 0) {
		close(go[1]);
		close(err[0]);
		if (setup_child_env(lib, s->col.path,
		                    s->cfg->follow_fork ||
		                            s->cfg->follow_exec) != 0)
			_exit(127);
		child_run(s, go[0], err[1], &oldmask, cfg->argv);
	}
	close(go[0]);
	close(err[1]);
	setpgid(pid, pid); /* as the child does: whichever runs first */
	s->child = pid;
	s->cmd_name = cfg->argv[0];
	s->cmdline = join_args(cfg->argv);

	s->out = cfg->output ? strdup(cfg->output) : default_output(cfg, pid);
	s->col.profile = s->out ? profile_create(s->out, record_cmdline) : NULL;
	if (!s->col.profile || !s->cmdline) {
		/* Nothing ran yet: closing the pipe makes the child exit. */
		close(go[1]);
		close(err[0]);
		waitpid(pid, NULL, 0);
		return 1;
	}
	tty_give_at_start(s);
	if (write(go[1], "g", 1) != 1)
		perror("heapprof: record");
	close(go[1]);
	int exec_err = exec_result(err[0]);
	close(err[0]);
	if (exec_err) {
		/* Nothing ran: no profile is better than an empty one. */
		fprintf(stderr, PFX "cannot run '%s': %s\n", cfg->argv[0],
		        strerror(exec_err));
		waitpid(pid, NULL, 0);
		tty_take_back(s);
		profile_close(s->col.profile);
		s->col.profile = NULL;
		unlink(s->out);
		return exec_err == ENOENT ? 127 : 126;
	}
	if (arm_timers(s) != 0) {
		perror("heapprof: record: timerfd");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		tty_take_back(s);
		return 1;
	}

	event_loop(s);
	finish(s);
	s->finished = true;
	int prc = close_profile(s);
	/* No more clients: its later children find no socket and stay
	 * quiet, unprofiled. */
	collector_close(&s->col);
	if (!s->child_exited)
		wait_command(s);
	/* Orphans that died meanwhile: no zombie left to init. */
	reap_children(s);
	if (prc != 0 && !s->child_exited)
		return 1;
	/* A profile that could not be written (disk full, ...) is a failure
	 * of record even when the program succeeded; a failing program's own
	 * status is the more useful one to pass on. */
	int code = status_code(s->child_status);
	/* The command died of SIGINT while its group had the terminal:
	 * Ctrl-C went to it alone, where bare it would have reached
	 * record's whole group too (a shell script running record, which
	 * stops only when it got SIGINT itself and its child died of it).
	 * Once all is done, record's group gets it (session_run). */
	if (s->tty_given && WIFSIGNALED(s->child_status) &&
	    WTERMSIG(s->child_status) == SIGINT && s->tty >= 0 &&
	    tcgetpgrp(s->tty) == getpgrp())
		s->reraise = SIGINT;
	return prc != 0 && code == 0 ? 1 : code;
}

static int run_daemon(struct session *s, const char *record_cmdline)
{
	const struct session_config *cfg = s->cfg;
	struct collector_opts o;
	collector_opts_of(cfg, &o);
	if (collector_open(&s->col, &o, false) != 0)
		return 1;
	char why[256];
	s->dfd = ctl_connect_daemon(why, sizeof(why));
	if (s->dfd < 0) {
		fprintf(stderr, PFX "%s\n", why);
		s->dfd = -1;
		return 1;
	}
	/* The daemon may go away at any time: a write to it must fail, not
	 * kill us (SIGPIPE is ignored, session_run). */
	sigset_t oldmask;
	if (setup_signals(s, &oldmask) != 0) {
		perror("heapprof: record");
		return 1;
	}
	s->out = cfg->output ? strdup(cfg->output)
	                     : default_output(cfg, getpid());
	s->col.profile = s->out ? profile_create(s->out, record_cmdline) : NULL;
	if (!s->col.profile)
		return 1;
	for (int i = 0; i < cfg->npids; i++)
		want_add(s, cfg->pids[i], true);
	s->names_startup = cfg->nnames && !cfg->no_startup;
	if (start_daemon_session(s) != 0) {
		profile_close(s->col.profile);
		s->col.profile = NULL;
		unlink(s->out);
		return 1;
	}
	if (arm_timers(s) != 0) {
		perror("heapprof: record: timerfd");
		return 1;
	}
	fprintf(stderr, PFX "session %llu started%s\n",
	        (unsigned long long)s->session_id,
	        s->names_startup ? "; waiting for processes to start until "
	                           "-d or Ctrl-C"
	                         : "");

	event_loop(s);
	finish(s);
	s->finished = true;
	size_t profiled = s->col.ntargets;
	int prc = close_profile(s);
	return prc == 0 && profiled > 0 ? 0 : 1;
}

int session_run(const struct session_config *cfg, const char *record_cmdline,
                const char *config_text)
{
	struct session s = {.cfg = cfg,
	                    .trace_timeout = -1,
	                    .follow_timeout = -1,
	                    .sfd = -1,
	                    .end_tfd = -1,
	                    .dump_tfd = -1,
	                    .dfd = -1,
	                    .tty = -1,
	                    .config_text = config_text,
	                    .daemon_mode = !(cfg->argv && cfg->argv[0])};
	/* A profile past the file size limit (`ulimit -f`) must be a write
	 * error, said once with what is kept, not the end of record (and of
	 * the session of a program still running); a closed stderr pipe
	 * must not end it either.  The command gets both back (child_run). */
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigemptyset(&ign.sa_mask);
	sigaction(SIGXFSZ, &ign, &s.old_xfsz);
	sigaction(SIGPIPE, &ign, &s.old_pipe);
	int rc = s.daemon_mode ? run_daemon(&s, record_cmdline)
	                       : run_embedded(&s, record_cmdline);
	session_free(&s);
	if (s.reraise) {
		fflush(NULL);
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		sigemptyset(&dfl.sa_mask);
		sigaction(s.reraise, &dfl, NULL);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, s.reraise);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		kill(0, s.reraise);
	}
	return rc;
}
