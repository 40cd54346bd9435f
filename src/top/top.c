/*
 * `heapprof top`'s loop (top.h, docs/TOP.md): the process found (-n), read
 * from the outside each refresh (inspect/top_read.h: its shared
 * regions, as `heapprof snapshot -p` reads them; the process and its
 * session do nothing for it), drawn (screen.h), and the keys and signals
 * taken between refreshes.  A process no session profiles gets top's own
 * (own.h) for as long as top runs.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/record_child.h"
#include "inspect/live_snapshot.h"
#include "inspect/top_read.h"
#include "top/own.h"
#include "top/screen.h"
#include "top/top.h"
#include "util/err.h"
#include "util/proc.h"

#define SUBSYS "top"

/* How long our own session may take to attach and show its region. */
#define OWN_SESSION_WAIT_MS 30000
/* How long a process whose region stopped may take to be gone, for
 * "exited" rather than "not profiled any more". */
#define EXIT_GRACE_MS 1000

/* ---- signals ------------------------------------------------------------- */

static volatile sig_atomic_t got_quit, got_winch;

static void on_quit(int sig)
{
	got_quit = sig;
}

static void on_winch(int sig)
{
	(void)sig;
	got_winch = 1;
}

static void set_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	/* No SA_RESTART: a signal ends the wait for the next refresh. */
	sa.sa_handler = on_quit;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* A reader of our text gone (top | head): we end, and end our
	 * session, rather than die with it running. */
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
}

/* ---- the loop ------------------------------------------------------------ */

/* A new reading into sc->cur (the last one becomes prev).  0; -1 with why
 * when the process cannot be read; -ENOMEM. */
static int refresh(struct screen *sc, char *why, size_t len)
{
	struct top_reading t;
	int err = top_read(sc->r, &t, why, len);
	if (err)
		return err;
	if (sc->have_prev)
		top_reading_free(&sc->prev);
	sc->prev = sc->cur;
	sc->have_prev = sc->have_cur;
	sc->cur = t;
	sc->have_cur = true;
	return 0;
}

/* A key typed on the terminal.  Whether to redraw now. */
static bool key(struct screen *sc, int ch)
{
	if (ch == 'q' || ch == 'Q') {
		got_quit = -1;
		return false;
	}
	if (sc->help) {
		sc->help = false;
		return true;
	}
	switch (ch) {
	case 'v':
		sc->view = (enum top_view)((sc->view + 1) % TOP_NVIEWS);
		return true;
	case '1':
	case '2':
	case '3':
	case '4':
		sc->view = (enum top_view)(ch - '1');
		return true;
	case 's':
		sc->sort = (enum top_sort)((sc->sort + 1) % 3);
		return true;
	case 'i':
		sc->inclusive = !sc->inclusive;
		return true;
	case 'p':
		sc->paused = !sc->paused;
		return true;
	case 'h':
	case '?':
		sc->help = true;
		return true;
	}
	return false;
}

/* Waits until deadline (CLOCK_MONOTONIC ns), or a key or signal.  Whether
 * the screen wants a redraw now. */
static bool wait_until(struct screen *sc, uint64_t deadline)
{
	for (;;) {
		if (got_quit)
			return false;
		if (got_winch) {
			got_winch = 0;
			return true;
		}
		uint64_t now = hp_clock_ns(CLOCK_MONOTONIC);
		if (now >= deadline)
			return false;
		int ms = (int)((deadline - now + 999999) / 1000000);
		struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
		int rc = poll(&pf, sc->tty ? 1 : 0, ms);
		if (rc > 0 && (pf.revents & POLLIN)) {
			unsigned char ch;
			if (read(STDIN_FILENO, &ch, 1) == 1 && key(sc, ch))
				return true;
		} else if (rc > 0) {
			/* The terminal went away: keys are over, as is top. */
			got_quit = SIGHUP;
		}
	}
}

/* Whether pid is gone or going: an exiting process's client marks its
 * region stopped a moment before the process is a zombie. */
static bool exiting(pid_t pid)
{
	for (int i = 0; i < EXIT_GRACE_MS / 20; i++) {
		if (!proc_alive(pid))
			return true;
		poll(NULL, 0, 20);
	}
	return !proc_alive(pid);
}

/* The process named -n: a profiled one first (as snapshot -n), else
 * the one process of ours of that name.  0, or -1 with the reason
 * printed. */
static int find_pid(const char *name, pid_t *pid)
{
	char why[1024];
	if (live_snapshot_find(name, pid, why, sizeof(why)) == 0)
		return 0;
	pid_t pids[2];
	int n = proc_find_by_name(name, pids, 2);
	if (n == 1) {
		*pid = pids[0];
		return 0;
	}
	if (n > 1)
		hp_err(SUBSYS,
		       "several processes are named '%s': choose one with -p",
		       name);
	else
		hp_err(SUBSYS, "no process of yours is named '%s'", name);
	return -1;
}

/* Our own session: started, and waited for until its region is read (or
 * record says why not).  0, or -1 with the reason printed. */
static int start_own(struct screen *sc, struct own_session *own, char *why,
                     size_t len)
{
	char last[1024];
	if (own_start(own, sc->pid, sc->o->interval))
		return -1;
	sc->own = true;
	hp_log("heapprof: top: pid %d is not profiled: started "
	       "'heapprof record -p %d' (ended when top quits)\n",
	       (int)sc->pid, (int)sc->pid);
	uint64_t until =
	        hp_clock_ns(CLOCK_MONOTONIC) + OWN_SESSION_WAIT_MS * 1000000ull;
	for (;;) {
		int err = refresh(sc, why, len);
		if (err == 0)
			return 0;
		if (err == -ENOMEM) {
			hp_err(SUBSYS, "out of memory");
			return -1;
		}
		if (!own_running(own)) {
			hp_err(SUBSYS,
			       "pid %d: heapprof record could not profile it: "
			       "%s",
			       (int)sc->pid,
			       record_child_last_line(own->log, last,
			                              sizeof(last)));
			return -1;
		}
		if (got_quit || hp_clock_ns(CLOCK_MONOTONIC) > until) {
			if (!got_quit)
				hp_err(SUBSYS,
				       "pid %d: heapprof record did not start "
				       "profiling it within %d s: %s",
				       (int)sc->pid, OWN_SESSION_WAIT_MS / 1000,
				       why);
			return -1;
		}
		poll(NULL, 0, 50);
	}
}

int top_run(const struct top_config *o)
{
	struct screen sc;
	struct own_session own;
	char why[1024];
	int rc = 1;

	memset(&sc, 0, sizeof(sc));
	memset(&own, 0, sizeof(own));
	sc.o = o;
	sc.pid = (pid_t)o->pid;
	for (int k = 0; k < TOP_NVIEWS; k++)
		if (!strcmp(screen_view_names[k], rd_view_names[o->view]))
			sc.view = (enum top_view)k;
	sc.sort = o->sort;
	sc.inclusive = o->inclusive;
	sc.tty =
	        !o->iterations && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
	if (o->proc_name && find_pid(o->proc_name, &sc.pid))
		return 1;
	if (!proc_alive(sc.pid)) {
		hp_err(SUBSYS, "no process with pid %d", (int)sc.pid);
		return 1;
	}
	proc_comm(sc.pid, sc.comm, sizeof(sc.comm));
	if (!(sc.r = top_reader_new(sc.pid))) {
		hp_err(SUBSYS, "out of memory");
		return 1;
	}
	set_signals();
	int err = refresh(&sc, why, sizeof(why));
	if (err == -ENOMEM)
		hp_err(SUBSYS, "out of memory");
	else if (err && !proc_alive(sc.pid))
		hp_err(SUBSYS, "pid %d exited", (int)sc.pid);
	/* Not profiled now (or never): our own session. */
	if (err == -1 && proc_alive(sc.pid))
		err = start_own(&sc, &own, why, sizeof(why));
	if (err)
		goto out;
	if (sc.tty)
		screen_tty_enter();
	const char *gone = NULL;
	uint64_t shown = 0;
	/* Our own session counts from its attach, just now: text output
	 * (--once, --iterations) waits one -d for a first screen that has
	 * something to show, and rates to show with it. */
	if (own.dir[0] && !sc.tty) {
		uint64_t next =
		        hp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)o->delay_ns;
		while (wait_until(&sc, next))
			;
		if (!got_quit && (err = refresh(&sc, why, sizeof(why)))) {
			gone = err == -ENOMEM    ? "out of memory"
			       : exiting(sc.pid) ? "exited"
			                         : why;
			rc = !strcmp(gone, "exited") ? 0 : 1;
			goto shown;
		}
	}
	for (;;) {
		screen_show(&sc);
		shown++;
		if (o->iterations && shown >= o->iterations) {
			rc = 0;
			break;
		}
		uint64_t next =
		        hp_clock_ns(CLOCK_MONOTONIC) + (uint64_t)o->delay_ns;
		while (wait_until(&sc, next))
			screen_show(&sc);
		if (got_quit) {
			rc = 0;
			break;
		}
		if (sc.paused)
			continue;
		err = refresh(&sc, why, sizeof(why));
		if (err == -ENOMEM) {
			gone = "out of memory";
			break;
		}
		if (err && exiting(sc.pid)) {
			gone = "exited";
			rc = 0;
			break;
		}
		if (err) {
			gone = why;
			break;
		}
	}
shown:
	if (sc.tty)
		screen_tty_leave();
	if (gone && rc == 0)
		printf("heapprof top: pid %d (%s) exited\n", (int)sc.pid,
		       sc.comm);
	else if (gone)
		hp_err(SUBSYS, "%s", gone);
out:
	if (own.dir[0] && sc.tty)
		printf("heapprof top: ending its session of pid %d\n",
		       (int)sc.pid);
	own_end(&own);
	if (sc.have_cur)
		top_reading_free(&sc.cur);
	if (sc.have_prev)
		top_reading_free(&sc.prev);
	top_reader_free(sc.r);
	return rc;
}
