/*
 * Job control for `record -- CMD` (session_int.h): the command's process
 * group and the terminal, its stops and continues, and the signals record
 * passes on to it.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "session/session_int.h"

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
void session_tty_give_at_start(struct session *s)
{
	if (s->tty < 0 || !isatty(STDIN_FILENO) ||
	    tcgetpgrp(s->tty) != getpgrp() || is_fifo(STDOUT_FILENO) ||
	    is_fifo(STDERR_FILENO))
		return;
	/* SIGTTOU is ignored: no stop, whichever group is in front. */
	s->tty_given = tcsetpgrp(s->tty, s->child) == 0;
}

/* The command's group holds the terminal: record's group gets it back. */
bool session_tty_take_back(struct session *s)
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
		session_tty_take_back(s);
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
void session_reap_children(struct session *s)
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
		session_tty_take_back(s);
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

void session_on_signal_embedded(struct session *s,
                                const struct signalfd_siginfo *si)
{
	switch (si->ssi_signo) {
	case SIGUSR1:
		if (!s->finished)
			session_dump_now(s, 0, "signal", NULL);
		break;
	case SIGCHLD:
		session_reap_children(s);
		break;
	case SIGCONT:
		command_continued(s);
		break;
	default:
		pass_signal(s, si);
		break;
	}
}
