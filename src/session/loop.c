/*
 * The session's loop (session_int.h), with its timers (-d and the
 * continuous dumps), the dumps it takes and the trace's turn.
 *
 * One poll loop serves everything: a signalfd (SIGUSR1 = dump; SIGCHLD =
 * the command ended or stopped; SIGINT/SIGTERM/SIGHUP end a -p/-n session
 * and are passed on to the command of a `-- CMD` session), two timerfds
 * (-d and the continuous dumps), the collector's socket, pending hellos
 * and client connections, and the daemon connection.  Every wait in here
 * is bounded: a client or a daemon that hangs, dies or sends garbage costs
 * at most a bounded read, never the session.  Nor does the profile hold the
 * loop: while it runs, the collector's writer thread writes it (util/jobq.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "session/session_int.h"
#include "util/human.h"
#include "util/err.h"

/* A continuous dump due this close to the end is left to the end dump. */
#define END_SLACK_NS (10 * 1000000ull)
/* While a target streams its trace (or a oneshot one may fill), the loop
 * wakes at least this often: it reads the events, and says at once when a
 * oneshot buffer filled. */
#define TRACE_POLL_MS 10
/* ... and this often when the last read found the buffer half full. */
#define TRACE_BUSY_MS 1
/* The live table's log: how soon the loop looks again after events, and
 * at most while none come. */
#define LOG_BUSY_MS 2
#define LOG_IDLE_MS 16

/* ---- dumps --------------------------------------------------------- */

int session_dump_now(struct session *s, pid_t pid, const char *reason,
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
	hp_log(PFX "pid %d: trace buffer full after %llu events (%s, %.3f s "
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
		if (t->tr.mode == HP_TRACE_LOG) {
			/* The program waits when the log is full: look
			 * again soon while it logs, backing off to
			 * LOG_IDLE_MS while it does not. */
			int left = collector_trace_poll(&s->col, t);
			if (left > 0 && t->tr.last_read > 0)
				t->tr.idle_ms = 0;
			else if (left > 0 || t->tr.last_read > 0)
				t->tr.idle_ms = LOG_BUSY_MS;
			else if (t->tr.idle_ms < LOG_IDLE_MS)
				t->tr.idle_ms = t->tr.idle_ms
				                        ? 2 * t->tr.idle_ms
				                        : LOG_BUSY_MS;
			wait = t->tr.idle_ms < LOG_IDLE_MS ? (int)t->tr.idle_ms
			                                   : LOG_IDLE_MS;
		} else if (t->tr.mode == HP_TRACE_STREAMING) {
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

/* The end of record: what each process's trace kept and left out (after
 * profile_finish, which counts what the file kept after a write error). */
void session_trace_summary(struct session *s)
{
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		/* The live table's log is not a trace: nothing to say (the
		 * profile counts what it carried, live_log_events, and a
		 * table the program took back, live_log_taken_back). */
		if (t->tr.mode == HP_TRACE_LOG)
			continue;
		if (!t->tr.mode)
			continue;
		struct prof_trace pt;
		collector_trace_stats(t, &pt);
		char extra[224] = "";
		size_t o = 0;
		/* Read, then not written (a full disk): the file's own count
		 * once it is closed after a write error. */
		int64_t in_file = profile_events_kept(s->col.profile, t->upid);
		if (in_file >= 0 && (uint64_t)in_file < pt.events)
			pt.events = (uint64_t)in_file;
		if (t->tr.events > pt.events)
			o += (size_t)snprintf(
			        extra + o, sizeof(extra) - o,
			        ", %llu not written to the profile",
			        (unsigned long long)(t->tr.events - pt.events));
		if (pt.incomplete && o < sizeof(extra))
			o += (size_t)snprintf(
			        extra + o, sizeof(extra) - o,
			        ", %llu incomplete",
			        (unsigned long long)pt.incomplete);
		if (pt.waits && o < sizeof(extra))
			snprintf(extra + o, sizeof(extra) - o,
			         ", %llu waits for room (%.3f s)",
			         (unsigned long long)pt.waits,
			         (double)pt.wait_ns / 1e9);
		hp_log(PFX "pid %d: trace (%s): %llu events kept, %llu "
		           "dropped, %llu overwritten%s\n",
		       (int)t->pid, pt.mode, (unsigned long long)pt.events,
		       (unsigned long long)pt.dropped_allocs +
		               (unsigned long long)pt.dropped_frees,
		       (unsigned long long)pt.overwritten, extra);
	}
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
int session_arm_timers(struct session *s)
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
void session_event_loop(struct session *s)
{
	enum { F_SIG, F_END, F_DUMP, F_DAEMON, F_COL };
	collector_writer_start(&s->col);
	while (!s->stopping) {
		size_t want =
		        F_COL + 2 + COLLECTOR_MAX_PENDING + s->col.ntargets;
		struct pollfd *fds = fds_reserve(s, want);
		if (!fds) {
			hp_log(PFX "out of memory\n");
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
		timeout = min_timeout(timeout, collector_tend(&s->col));
		timeout = min_timeout(timeout, session_reap_disconnected(s));
		timeout = min_timeout(timeout, s->trace_timeout);
		timeout = min_timeout(timeout, s->follow_timeout);
		timeout = min_timeout(timeout, s->mem_timeout);
		timeout = min_timeout(timeout, s->curve_timeout);
		if (s->daemon_mode)
			timeout = min_timeout(timeout,
			                      session_signal_fallback(s));
		if (s->daemon_mode && s->cfg->nnames && !s->names_startup)
			timeout = min_timeout(timeout, 100);
		if (poll(fds, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			hp_log_errno("heapprof: record: poll");
			break;
		}
		if (fds[F_SIG].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(s->sfd, &si, sizeof(si)) == sizeof(si)) {
				if (s->daemon_mode)
					session_on_signal_daemon(s, &si);
				else
					session_on_signal_embedded(s, &si);
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
				session_dump_now(s, 0, "periodic", NULL);
		}
		if (fds[F_DAEMON].revents && s->dfd >= 0)
			session_on_daemon(s);
		collector_handle(&s->col, fds + F_COL, n - F_COL,
		                 session_want_embedded, s);
		collector_expire(&s->col);
		trace_turn(s);
		s->mem_timeout = session_memwatch(s);
		s->curve_timeout = session_curve(s);
		session_reap_disconnected(s);
		if (!s->daemon_mode && session_embedded_over(s))
			s->stopping = true;
		if (s->daemon_mode && session_daemon_over(s))
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
void session_wait_command(struct session *s)
{
	while (!s->child_exited) {
		struct pollfd p = {.fd = s->sfd, .events = POLLIN};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			break;
		struct signalfd_siginfo si;
		while (read(s->sfd, &si, sizeof(si)) == sizeof(si))
			session_on_signal_embedded(s, &si);
	}
}
