/*
 * The session engine behind `heapprof record` (session.h): a session's
 * setup and its end, for both ways it finds its processes.  Its parts:
 *
 *  - session/loop.c: the poll loop, its timers, dumps and the trace's turn;
 *  - session/launch.c: `-- CMD` started with the client preloaded;
 *  - session/jobctl.c: the command's process group, the terminal, signals;
 *  - session/targets.c: who is a target of `-- CMD`, the end of a target,
 *    and when an embedded session is over;
 *  - session/daemon.c: `-p`/`-n`, the daemon connection.
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
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inject/attach.h"
#include "session/session_int.h"
#include "daemon/ctl.h"
#include "util/args.h"
#include "util/proc.h"
#include "util/err.h"

int session_status_code(int st)
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
	/* The peak, by default: its own dump beside the others, or every
	 * dump at the peak (--dump-at-max). */
	if (cfg->dump_at_max || !cfg->no_peak)
		o->config_flags |= HP_CFG_TRACK_MAX;
	o->dump_at_max = cfg->dump_at_max;
	o->peak_dumps = !cfg->dump_at_max && !cfg->no_peak;
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

/* A `-- CMD` session that ended (-d, Ctrl-C) while processes it followed
 * still ran: which ones, since they run on unprofiled. */
static void say_still_running(struct session *s)
{
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (t->retired || (t->disconnected && !t->conn_lost) ||
		    session_is_command(s, t))
			continue;
		char comm[64];
		proc_comm(t->pid, comm, sizeof(comm));
		hp_log(PFX "pid %d (%s): still running at the end of the "
		           "session: profiled until now, it runs on "
		           "unprofiled\n",
		       (int)t->pid, comm[0] ? comm : "?");
	}
}

/*
 * A target that runs on after the session: its regions unmapped and its
 * descriptors closed in it (attach.c, detach_process), so that it is left
 * as it was before the session; the collector frees their memory anyway
 * (collector_retire).  Said when it cannot be done to a process that
 * still runs.
 */
static void detach_target(struct target *t)
{
	/* Disconnected: gone, unless the program only closed or reused our
	 * descriptor (conn_lost: it still maps its region). */
	if (t->retired || (t->disconnected && !t->conn_lost) || !t->nreg ||
	    kill(t->pid, 0) != 0)
		return;
	char why[INJECT_WHY];
	if (detach_process(t->pid, why) >= 0)
		return;
	struct proc_stat st;
	if (kill(t->pid, 0) == 0 && proc_stat(t->pid, &st) == 0 &&
	    st.state != 'Z' && st.state != 'X')
		hp_log(PFX "pid %d: its profiling region stays mapped in it "
		           "(its memory is freed): %s\n",
		       (int)t->pid, why);
}

/*
 * The end: the last dump of every target still mapped (its trace read to
 * the end first), STOP in every region (the client stops recording and may
 * be profiled again later by another session), connections closed, rows
 * ended.
 */
static void finish(struct session *s)
{
	session_say_not_followed(s);
	if (!s->daemon_mode)
		say_still_running(s);
	else
		session_say_unanswered(s);
	uint64_t ts = boottime_ns();
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (!t->retired &&
		    collector_dump_final(&s->col, t,
		                         session_final_reason(s, t, "end"),
		                         ts) != 0)
			s->write_errors++;
	}
	for (size_t i = 0; i < s->col.ntargets; i++)
		collector_stop(s->col.targets[i]);
	for (size_t i = 0; i < s->col.ntargets; i++)
		detach_target(s->col.targets[i]);
	uint64_t end = boottime_ns();
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		bool cmd = session_is_command(s, t);
		int code = cmd && s->child_exited
		                   ? session_status_code(s->child_status)
		                   : -1;
		/* A process profiled on without its connection, still
		 * running at the end, ends with the session as a connected
		 * one does. */
		bool gone = t->disconnected && !(t->conn_lost && !t->retired &&
		                                 proc_alive(t->pid));
		if (collector_end_row(&s->col, t, gone ? t->disconnect_ts : end,
		                      code, gone && !cmd) != 0)
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
		        .exit_status =
		                s->child_exited
		                        ? session_status_code(s->child_status)
		                        : -1,
		        .disconnected = 1};
		if (profile_begin_process(s->col.profile, &info, &upid) != 0 ||
		    profile_end_process(s->col.profile, upid, &e) != 0)
			s->write_errors++;
		/* When its region could not be made, the collector said why
		 * (and that it runs unprofiled): no guess needed. */
		if (!s->col.region_errors)
			hp_log(PFX "%s never attached to the profiler "
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

static const char *dumps_word(int64_t n)
{
	return n == 1 ? "dump" : "dumps";
}

/*
 * After a write error (a full disk, ...): what became of the profile, in
 * one line, with the numbers the file left holds (profile_finish counted
 * them): the program ran on, the profile paid.
 */
static void say_lost(const struct session *s, const struct profile_status *st)
{
	long long n = st->dumps, kept = st->dumps_kept, lost = n - kept;
	char events[96] = "";
	if (st->events_kept < st->events)
		snprintf(events, sizeof(events),
		         "; %lld of %lld trace events kept",
		         (long long)st->events_kept, (long long)st->events);
	if (st->removed && st->damaged)
		hp_log("heapprof: no profile: %s: %s; what was written could "
		       "not be left a whole database and is removed (%lld %s "
		       "lost)\n",
		       s->out, st->why, n, dumps_word(n));
	else if (st->removed && n == 1)
		hp_log("heapprof: no profile: %s: %s; its one dump could not "
		       "be kept\n",
		       s->out, st->why);
	else if (st->removed && n)
		hp_log("heapprof: no profile: %s: %s; none of its %lld dumps "
		       "could be kept\n",
		       s->out, st->why, n);
	else if (st->removed)
		hp_log("heapprof: no profile: %s: %s\n", s->out, st->why);
	else if (lost && st->lost_last)
		hp_log("heapprof: profile %s is incomplete: %s: the first "
		       "%lld of %lld dumps are kept, the last %lld lost%s\n",
		       s->out, st->why, kept, n, lost, events);
	else if (lost)
		hp_log("heapprof: profile %s is incomplete: %s: %lld of %lld "
		       "dumps kept, %lld lost%s\n",
		       s->out, st->why, kept, n, lost, events);
	else
		hp_log("heapprof: profile %s is incomplete: %s: %s %lld %s "
		       "kept%s\n",
		       s->out, st->why, n == 1 ? "its" : "all", n,
		       dumps_word(n),
		       events[0] ? events : ", not all of its other rows");
}

/* Closes the profile and says in one line what became of it (the trace's
 * summary before, with what the file kept); returns 0 when written
 * whole. */
static int close_profile(struct session *s)
{
	struct profile_status st;
	profile_finish(s->col.profile, &st);
	session_trace_summary(s);
	profile_free(s->col.profile);
	s->col.profile = NULL;
	/* A process refused because another session profiles it is no
	 * process profiled: said when refused, no row kept (a session that
	 * profiles others keeps its rows, as the report shows them). */
	bool empty = s->daemon_mode && s->col.ntargets == 0;
	if (empty) {
		/* Nothing to show: no file is better than an empty one. */
		static const char *const suffix[] = {"", "-wal", "-shm"};
		char path[PATH_MAX];
		for (size_t i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s%s", s->out, suffix[i]);
			unlink(path);
		}
		/* Without a daemon each process said why already. */
		if (!s->direct)
			hp_log(PFX "no process was profiled; no "
			           "profile written\n");
		return -1;
	}
	if (st.err) {
		say_lost(s, &st);
		return -1;
	}
	if (s->write_errors) {
		/* Not the file's: a dump that could not be read or made
		 * (out of memory, said above). */
		hp_log(PFX "the profile %s may be incomplete (errors above)\n",
		       s->out);
		return -1;
	}
	hp_log("heapprof: profile written to %s\n", s->out);
	s->written = true;
	return 0;
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

/*
 * Record's status once the command is gone: the command's (128 + signal
 * for a signal).  A profile that could not be written (disk full, ...) is
 * a failure of record even when the program succeeded: 1 then; a failing
 * program's own status is the more useful one to pass on.
 */
static int command_result(struct session *s, bool profile_written)
{
	int code = session_status_code(s->child_status);
	/* The command died of SIGINT while its group had the terminal:
	 * Ctrl-C went to it alone, where bare it would have reached
	 * record's whole group too (a shell script running record, which
	 * stops only when it got SIGINT itself and its child died of it).
	 * Once all is done, record's group gets it (session_run). */
	if (s->tty_given && WIFSIGNALED(s->child_status) &&
	    WTERMSIG(s->child_status) == SIGINT && s->tty >= 0 &&
	    tcgetpgrp(s->tty) == getpgrp())
		s->reraise = SIGINT;
	return !profile_written && code == 0 ? 1 : code;
}

/*
 * The command runs unprofiled (no room for the profile, said already):
 * record is only its wrapper, as when profiling it (signals passed on,
 * job control, its status), with no dump to take.  As with a profile
 * that could not be written whole, a command that exited 0 gives 1: the
 * profile asked for is not there; a failing command's own status is the
 * more useful one to pass on.
 */
static int run_bare(struct session *s)
{
	s->finished = true; /* SIGUSR1: no dump to take */
	session_wait_command(s);
	session_reap_children(s);
	return command_result(s, false);
}

static int run_embedded(struct session *s, const char *record_cmdline)
{
	const struct session_config *cfg = s->cfg;
	char lib[PATH_MAX];
	if (session_find_library(lib, sizeof(lib)) != 0)
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
		hp_log(PFX "cannot become a child subreaper (%s): processes "
		           "whose parent exits are not followed\n",
		       strerror(errno));
	sigset_t oldmask;
	int go[2], err[2];
	if (setup_signals(s, &oldmask) != 0 || pipe2(go, O_CLOEXEC) != 0) {
		hp_log_errno("heapprof: record");
		return 1;
	}
	if (pipe2(err, O_CLOEXEC) != 0) {
		hp_log_errno("heapprof: record");
		close(go[0]);
		close(go[1]);
		return 1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		hp_log_errno("heapprof: record: fork");
		return 1;
	}
	if (pid == 0) {
		close(go[1]);
		close(err[0]);
		session_child_run(s, go[0], err[1], &oldmask, cfg->argv, lib,
		                  s->col.path);
	}
	close(go[0]);
	close(err[1]);
	setpgid(pid, pid); /* as the child does: whichever runs first */
	s->child = pid;
	s->cmd_name = cfg->argv[0];
	s->cmdline = hp_join_args(NULL, -1, cfg->argv);

	s->out = cfg->output ? strdup(cfg->output) : default_output(cfg, pid);
	struct profile_status pst = {.err = -ENOMEM};
	snprintf(pst.why, sizeof(pst.why), "out of memory");
	s->col.profile =
	        s->out ? profile_open(s->out, record_cmdline, &pst) : NULL;
	/* A full disk costs the profile, never the program: it runs as it
	 * would bare (no library, no socket in its environment). */
	bool bare = !s->col.profile && pst.no_room && s->cmdline;
	if (!s->col.profile && !bare)
		hp_log("heapprof: profile: %s: %s\n", s->out ? s->out : "-o",
		       pst.why);
	if ((!s->col.profile && !bare) || !s->cmdline) {
		/* Nothing ran yet: closing the pipe makes the child exit. */
		close(go[1]);
		close(err[0]);
		waitpid(pid, NULL, 0);
		return 1;
	}
	if (bare) {
		hp_log("heapprof: no profile: %s: %s; %s runs "
		       "unprofiled\n",
		       s->out, pst.why, s->cmd_name);
		/* Its orphans go where they would bare. */
		if (cfg->follow_fork)
			prctl(PR_SET_CHILD_SUBREAPER, 0);
	}
	session_tty_give_at_start(s);
	if (write(go[1], bare ? "b" : "g", 1) != 1)
		hp_log_errno("heapprof: record");
	close(go[1]);
	int exec_err = session_exec_result(err[0]);
	close(err[0]);
	if (exec_err) {
		/* Nothing ran: no profile is better than an empty one. */
		hp_log(PFX "cannot run '%s': %s\n", cfg->argv[0],
		       strerror(exec_err));
		waitpid(pid, NULL, 0);
		session_tty_take_back(s);
		if (s->col.profile) {
			profile_close(s->col.profile);
			s->col.profile = NULL;
			unlink(s->out);
		}
		return exec_err == ENOENT ? 127 : 126;
	}
	if (bare)
		return run_bare(s);
	if (session_arm_timers(s) != 0) {
		hp_log_errno("heapprof: record: timerfd");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		session_tty_take_back(s);
		return 1;
	}

	session_event_loop(s);
	finish(s);
	s->finished = true;
	int prc = close_profile(s);
	/* No more clients: its later children find no socket and stay
	 * quiet, unprofiled. */
	collector_close(&s->col);
	if (!s->child_exited)
		session_wait_command(s);
	/* Orphans that died meanwhile: no zombie left to init. */
	session_reap_children(s);
	if (prc != 0 && !s->child_exited)
		return 1;
	return command_result(s, prc == 0);
}

static int run_daemon(struct session *s, const char *record_cmdline)
{
	const struct session_config *cfg = s->cfg;
	char why[256];
	s->dfd = ctl_connect_daemon(why, sizeof(why));
	int derr = s->dfd < 0 ? -s->dfd : 0;
	if (derr) {
		s->dfd = -1;
		/* No daemon we can reach (none, or its directory is not
		 * ours): each process is attached by injection. */
		s->direct = derr == ENOENT || derr == ECONNREFUSED ||
		            derr == ENOTDIR || derr == EACCES;
		s->daemon_gone = true;
	}
	/* Without a daemon, a --follow-fork session's children say hello
	 * on a socket of ours (session/attach.c). */
	struct collector_opts o;
	collector_opts_of(cfg, &o);
	if (collector_open(&s->col, &o, s->direct && cfg->follow_fork) != 0)
		return 1;
	if (derr && !s->direct) {
		hp_log(PFX "%s\n", why);
		return 1;
	}
	/* The daemon may go away at any time: a write to it must fail, not
	 * kill us (SIGPIPE is ignored, session_run). */
	sigset_t oldmask;
	if (setup_signals(s, &oldmask) != 0) {
		hp_log_errno("heapprof: record");
		return 1;
	}
	s->out = cfg->output ? strdup(cfg->output)
	                     : default_output(cfg, getpid());
	struct profile_status pst = {.err = -ENOMEM};
	snprintf(pst.why, sizeof(pst.why), "out of memory");
	s->col.profile =
	        s->out ? profile_open(s->out, record_cmdline, &pst) : NULL;
	if (!s->col.profile) {
		/* Before any process is touched: none is disturbed. */
		if (pst.no_room)
			hp_log("heapprof: no profile: %s: %s; no process was "
			       "attached\n",
			       s->out, pst.why);
		else
			hp_log("heapprof: profile: %s: %s\n",
			       s->out ? s->out : "profile", pst.why);
		return 1;
	}
	for (int i = 0; i < cfg->npids; i++)
		session_want_add(s, cfg->pids[i], true);
	s->names_startup = cfg->nnames && !cfg->no_startup && !s->direct;
	if (!s->direct && session_daemon_start(s) != 0) {
		profile_close(s->col.profile);
		s->col.profile = NULL;
		unlink(s->out);
		return 1;
	}
	/* Without a daemon, each process's line says it all. */
	if (s->direct && session_attach_direct(s) != 0)
		s->stopping = true;
	if (session_arm_timers(s) != 0) {
		hp_log_errno("heapprof: record: timerfd");
		return 1;
	}
	if (!s->direct)
		hp_log(PFX "session %llu started%s\n",
		       (unsigned long long)s->session_id,
		       s->names_startup ? "; waiting for processes to start "
		                          "until -d or Ctrl-C"
		                        : "");

	session_event_loop(s);
	finish(s);
	s->finished = true;
	size_t profiled = s->col.ntargets;
	int prc = close_profile(s);
	return prc == 0 && profiled > 0 ? 0 : 1;
}

/* cfg as config_print writes it, for the profile's metadata; NULL if
 * memory is short. */
static char *config_text(const struct session_config *cfg)
{
	char *text = NULL;
	size_t tlen = 0;
	FILE *mf = open_memstream(&text, &tlen);
	if (mf) {
		config_print(cfg, mf);
		fclose(mf);
	}
	return text;
}

int session_run(const struct session_config *cfg, char *const *record_argv,
                char *written, size_t len)
{
	char *text = config_text(cfg);
	char *record_cmdline = hp_join_args(NULL, -1, record_argv);
	struct session s = {.cfg = cfg,
	                    .trace_timeout = -1,
	                    .mem_timeout = -1,
	                    .curve_timeout = -1,
	                    .follow_timeout = -1,
	                    .sfd = -1,
	                    .end_tfd = -1,
	                    .dump_tfd = -1,
	                    .dfd = -1,
	                    .tty = -1,
	                    .config_text = text,
	                    .daemon_mode = !(cfg->argv && cfg->argv[0])};
	/* A profile past the file size limit (`ulimit -f`) must be a write
	 * error, said once with what is kept, not the end of record (and of
	 * the session of a program still running); a closed stderr pipe
	 * must not end it either.  The command gets both back
	 * (session_child_run). */
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigemptyset(&ign.sa_mask);
	sigaction(SIGXFSZ, &ign, &s.old_xfsz);
	sigaction(SIGPIPE, &ign, &s.old_pipe);
	int rc = s.daemon_mode ? run_daemon(&s, record_cmdline)
	                       : run_embedded(&s, record_cmdline);
	if (len)
		snprintf(written, len, "%s", s.written && s.out ? s.out : "");
	session_free(&s);
	free(record_cmdline);
	free(text);
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
