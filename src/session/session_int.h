/*
 * The session engine's parts (session.c says which file holds what): the
 * state of one session and what the parts call of each other.  Private to
 * the files of src/session/; commands call session.h.
 */
#ifndef HEAPPROF_SESSION_INT_H
#define HEAPPROF_SESSION_INT_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include "collector/collector.h"
#include "session/session.h"

#define PFX "heapprof: record: "

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
	bool explicit_pid;     /* named with -p */
	uint64_t signalled_ns; /* W_SIGNALLED since (CLOCK_MONOTONIC) */
};

/* How long a process the daemon signalled may take to answer before the
 * session attaches it by injection instead (its runtime may own the
 * signal: Go's takes every signal and drops ours). */
#define SIGNAL_ANSWER_MS 1000

struct session {
	const struct session_config *cfg;
	struct collector col;
	bool daemon_mode;
	int sfd, end_tfd, dump_tfd, dfd;
	uint64_t session_id;
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC; end 0 = no -d */
	char *out;
	bool written; /* the profile at out was written whole */
	const char *config_text;
	int write_errors;
	bool stopping;     /* the end is decided: finish at the loop's end */
	bool finished;     /* end dump written, profile closed */
	int rejected;      /* rejected_concurrent rows written */
	int trace_timeout; /* ms until the trace wants a turn; -1: never */
	int mem_timeout;   /* ms until session_memwatch wants one; -1 */
	int curve_timeout; /* ms until session_curve wants one; -1 */
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
	/* No daemon: every process attached by injection (attach.h). */
	bool direct;
	char lib[4096]; /* the client library to inject ("" until needed) */
};

/* session.c */
/* The exit status a shell gives for a wait status (128 + signal). */
int session_status_code(int st);

/* session/loop.c: the loop, its timers and its dumps */
int session_dump_now(struct session *s, pid_t pid, const char *reason,
                     int *errors);
int session_arm_timers(struct session *s);
void session_event_loop(struct session *s);
void session_wait_command(struct session *s);
void session_trace_summary(struct session *s);

/* session/launch.c: record -- CMD started */
int session_find_library(char *out, size_t len);
/* HEAPPROF_FOLLOW for the command: "1" (--follow-fork, --follow-exec),
 * HP_FOLLOW_OWN_EXEC (the default: the command through its own execs),
 * NULL (--no-follow-exec). */
const char *session_follow_env(const struct session *s);
/* At the end: what the session did not follow (execs, children). */
void session_say_not_followed(struct session *s);
int session_setup_child_env(const char *path, const char *sock,
                            const char *follow);
void session_child_run(const struct session *s, int go_fd, int err_fd,
                       const sigset_t *oldmask, char *const *argv,
                       const char *lib, const char *sock);
int session_exec_result(int err_fd);
/* preload.c: the LD_PRELOAD entry for the client library at path lib
 * (the per-ABI tree's $LIB form where there is one; else lib). */
void preload_entry(const char *lib, char *out, size_t len);

/* session/jobctl.c: the command's group, the terminal, signals */
void session_tty_give_at_start(struct session *s);
bool session_tty_take_back(struct session *s);
void session_reap_children(struct session *s);
void session_on_signal_embedded(struct session *s,
                                const struct signalfd_siginfo *si);

/* session/targets.c: targets, and the end of a -- CMD session */
bool session_is_command(const struct session *s, const struct target *t);
void session_finish_gone(struct session *s, struct target *t);
void session_finish_exec(struct session *s, struct target *t);
int session_reap_disconnected(struct session *s);
uint32_t session_want_embedded(void *ctx, pid_t pid, const struct hp_hello *h,
                               struct target_info *ti);
bool session_embedded_over(struct session *s);

/* session/daemon.c: record -p/-n */
struct want *session_want_add(struct session *s, int pid, bool explicit_pid);
int session_daemon_start(struct session *s);
void session_on_daemon(struct session *s);
void session_on_signal_daemon(struct session *s,
                              const struct signalfd_siginfo *si);
bool session_daemon_over(struct session *s);

/* session/memwatch.c: memory dumps and the OOM kill (docs/INCIDENTS.md);
 * called each turn of the loop, returns ms until it wants the next (-1:
 * never).  session_final_reason: "oom-kill" for a target the OOM killer
 * killed (said on stderr), else otherwise (a literal). */
int session_memwatch(struct session *s);
/* t's RSS without heapprof's tables in it (st: what /proc said); false
 * when it is gone or a zombie. */
struct proc_status;
bool session_target_rss(const struct target *t, struct proc_status *st,
                        uint64_t *rss);
/* session/curve.c: memory over time (collector_curve) about every
 * CURVE_MS for each target; returns ms until the next one is due (-1:
 * none). */
#define CURVE_MS 100
int session_curve(struct session *s);
const char *session_final_reason(struct session *s, struct target *t,
                                 const char *otherwise);

/* session/attach.c: record -p/-n of a process the daemon cannot reach
 * (no client, or one that does not catch the signal) or with no daemon:
 * the client is injected (attach.h).  Says what came of it. */
void session_attach(struct session *s, pid_t pid, bool explicit_pid);
/* Processes signalled SIGNAL_ANSWER_MS ago without an answer: attached by
 * injection.  Returns ms until the next one is due, or -1. */
int session_signal_fallback(struct session *s);
/* At the end: says which signalled processes never answered. */
void session_say_unanswered(struct session *s);
/* No daemon: the -p pids, and the running processes -n names. */
int session_attach_direct(struct session *s);

#endif
