/*
 * Memory incidents (issue 22, docs/INCIDENTS.md): the session looks at
 * each target's RSS and memory cgroup every MEMWATCH_MS and takes a dump
 *
 *   - "memory" as its RSS crosses --memory-dump (default 80% of its
 *     cgroup's limit, when it has one): once per crossing, re-armed when
 *     it falls back under 90% of the threshold, and at most one per
 *     MEMORY_GAP_MS: a process that sits at its limit gets one dump;
 *   - "pressure" (--pressure-dumps) when its cgroup's memory.events high
 *     or max counters (v1: failcnt) went up, or PSI's "some avg10" is at
 *     the threshold or above; at most one per PRESSURE_GAP_MS;
 *
 * and marks its last dump "oom-kill" when the cgroup's oom_kill count went
 * up as the process died: the region outlives the process (a memfd), so
 * that dump is its heap at the kill.  Each dump carries the cgroup's
 * limit, usage and peak (heapprof_dump_memory).  Nothing here touches the
 * target: /proc and the cgroup's files only.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "session/session_int.h"
#include "util/human.h"
#include "util/proc.h"
#include "util/err.h"

#define MEMWATCH_MS     100
#define MEMORY_GAP_MS   1000
#define PRESSURE_GAP_MS 5000
#define OOM_GRACE_MS    1000

/* The RSS that takes a memory dump for w's cgroup (0: none). */
static uint64_t threshold_of(const struct session_config *cfg,
                             const struct memwatch *w)
{
	if (cfg->no_memory_dumps)
		return 0;
	if (cfg->memory_dump_bytes)
		return cfg->memory_dump_bytes;
	if (w->cg.limit && cfg->memory_dump_pct)
		return w->cg.limit / 100 * cfg->memory_dump_pct;
	return 0;
}

/*
 * Looks the process's cgroup up again when it moved (a command that
 * puts itself in a cgroup as it starts, `sh -c 'echo $$ > cgroup.procs;
 * exec prog'`, is profiled from before the move): its limit, threshold
 * and counters are the new cgroup's from then on.
 */
static void find_cgroup(struct session *s, struct target *t, bool first)
{
	struct memwatch *w = &t->mw;
	struct memcg cg;
	if (memcg_find(t->pid, NULL, &cg) != 0) {
		/* A process dies in its cgroup: one that can no longer be
		 * looked up (it died, or was reaped, since the caller saw it)
		 * keeps the cgroup it had, and with it its OOM kill count. */
		if (!first)
			return;
		memset(&cg, 0, sizeof(cg));
	}
	if (!first && cg.version == w->cg.version &&
	    !strcmp(cg.dir, w->cg.dir) && cg.limit == w->cg.limit)
		return;
	/* Nor does an exiting one move: cgroup v1 shows a process that is
	 * exiting in its root cgroup (proc_cgroup_show), and taking that for
	 * a move lost the OOM kill it was dying of.  Checked after the read:
	 * the kernel marks a process exiting before it shows it so. */
	if (!first && proc_exiting(t->pid))
		return;
	w->cg = cg;
	memset(&w->last, 0, sizeof(w->last));
	if (cg.version)
		memcg_read(&w->cg, &w->last);
	w->pressed = w->last; /* only counts that go up from now matter */
	w->oom_base = w->last.oom_kill;
	w->oom_rise_ns = 0;
	w->threshold = threshold_of(s->cfg, w);
	w->armed = true;
	if (w->threshold) {
		char b[HP_FMT_BYTES_MAX], l[HP_FMT_BYTES_MAX];
		hp_log(PFX "pid %d: a dump when its RSS reaches %s%s%s%s\n",
		       (int)t->pid,
		       hp_fmt_bytes_short(b, sizeof(b), (int64_t)w->threshold),
		       w->cg.limit ? " (its memory limit: " : "",
		       w->cg.limit ? hp_fmt_bytes_short(l, sizeof(l),
		                                        (int64_t)w->cg.limit)
		                   : "",
		       w->cg.limit ? ")" : "");
	}
}

bool session_target_rss(const struct target *t, struct proc_status *st,
                        uint64_t *rss)
{
	if (proc_status(t->pid, st) < 0 || !(st->have & PROC_HAVE_RSS))
		return false; /* gone, or a zombie */
	/* heapprof's tables are mapped in the process and counted in its
	 * RSS (RssShmem): they are ours, not the program's growth. */
	uint64_t ours = 0;
	for (int i = 0; i < t->nreg; i++)
		ours += region_resident(t->reg[i].fd, t->reg[i].base,
		                        t->reg[i].size);
	uint64_t shm = st->rss_shmem < ours ? st->rss_shmem : ours;
	*rss = st->rss > shm ? st->rss - shm : 0;
	return true;
}

static void look(struct session *s, struct target *t, uint64_t now)
{
	const struct session_config *cfg = s->cfg;
	struct memwatch *w = &t->mw;
	struct proc_status st;
	/* Gone, or a zombie: its end comes with the EOF. */
	if (!session_target_rss(t, &st, &w->rss))
		return;
	/* Killed (SIGKILL pending, the OOM killer's way) or exiting: a rise
	 * of the OOM kill count now is its own kill. */
	bool dying = ((st.sigpnd | st.shdpnd) >> (SIGKILL - 1) & 1u) ||
	             proc_exiting(t->pid);
	find_cgroup(s, t, false);
	struct memcg_stat cs;
	bool have_cg = w->cg.version && memcg_read(&w->cg, &cs) == 0;
	if (have_cg) {
		/* The count goes up as the OOM killer picks its victim,
		 * before the victim is gone: a rise while the target dies is
		 * its own; else it is taken for someone else's once the
		 * target outlived it by OOM_GRACE_MS. */
		if (cs.oom_kill > w->oom_base && dying) {
			w->oom_killed = true;
		} else if (cs.oom_kill > w->oom_base) {
			if (!w->oom_rise_ns)
				w->oom_rise_ns = now;
			else if (now >
			         w->oom_rise_ns + OOM_GRACE_MS * 1000000ull) {
				w->oom_base = cs.oom_kill;
				w->oom_rise_ns = 0;
			}
		}
		w->last = cs;
	}
	char b[HP_FMT_BYTES_MAX], l[HP_FMT_BYTES_MAX];
	if (w->threshold) {
		if (!w->armed && w->rss < w->threshold / 10 * 9)
			w->armed = true;
		if (w->armed && w->rss >= w->threshold &&
		    now >= w->last_dump_ns + MEMORY_GAP_MS * 1000000ull) {
			w->armed = false;
			w->last_dump_ns = now;
			if (w->cg.limit)
				hp_log(PFX "pid %d: RSS %s, %.0f%% of its "
				           "memory limit %s: dump\n",
				       (int)t->pid,
				       hp_fmt_bytes_short(b, sizeof(b),
				                          (int64_t)w->rss),
				       100.0 * (double)w->rss /
				               (double)w->cg.limit,
				       hp_fmt_bytes_short(
				               l, sizeof(l),
				               (int64_t)w->cg.limit));
			else
				hp_log(PFX "pid %d: RSS %s: dump\n",
				       (int)t->pid,
				       hp_fmt_bytes_short(b, sizeof(b),
				                          (int64_t)w->rss));
			session_dump_now(s, t->pid, "memory", NULL);
		}
	}
	if (cfg->pressure_dumps && have_cg &&
	    now >= w->last_pressure_ns + PRESSURE_GAP_MS * 1000000ull) {
		bool events =
		        cs.high > w->pressed.high || cs.max > w->pressed.max;
		bool psi = cs.have_psi &&
		           cs.some_avg10 >= (double)cfg->pressure_psi_pct;
		if (events || psi) {
			w->last_pressure_ns = now;
			w->pressed = cs;
			hp_log(PFX "pid %d: memory pressure in its cgroup "
			           "(%s): dump\n",
			       (int)t->pid,
			       psi ? "PSI some avg10 at the threshold"
			           : "its usage reached the limit");
			session_dump_now(s, t->pid, "pressure", NULL);
		}
	}
}

int session_memwatch(struct session *s)
{
	uint64_t now = hp_clock_ns(CLOCK_MONOTONIC);
	int wait = -1;
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (t->retired || t->disconnected || s->finished)
			continue;
		if (!t->mw.checked) {
			t->mw.checked = true;
			find_cgroup(s, t, true);
		}
		/* In no memory cgroup (and none to move to): nothing to
		 * watch.  Else its counters are followed for the OOM kill
		 * even with --no-memory-dumps. */
		if (!t->mw.threshold && !t->mw.cg.version)
			continue;
		if (now >= t->mw.next_ns) {
			look(s, t, now);
			t->mw.next_ns = now + MEMWATCH_MS * 1000000ull;
		}
		uint64_t left = t->mw.next_ns > now ? t->mw.next_ns - now : 0;
		int ms = (int)(left / 1000000ull) + 1;
		if (wait < 0 || ms < wait)
			wait = ms;
	}
	return wait;
}

const char *session_final_reason(struct session *s, struct target *t,
                                 const char *otherwise)
{
	struct memwatch *w = &t->mw;
	if (!w->checked || !w->cg.version)
		return otherwise;
	struct memcg_stat cs;
	if (memcg_read(&w->cg, &cs) == 0) {
		if (cs.oom_kill > w->oom_base && proc_exiting(t->pid))
			w->oom_killed = true;
		if (w->oom_killed && cs.peak)
			w->last.peak = cs.peak; /* its usage at the kill */
	}
	if (!w->oom_killed)
		return otherwise;
	char b[HP_FMT_BYTES_MAX], l[HP_FMT_BYTES_MAX];
	uint64_t at = w->last.peak ? w->last.peak : w->rss;
	if (w->cg.limit)
		hp_log(PFX "pid %d: killed by the OOM killer at %s of its %s "
		           "limit\n",
		       (int)t->pid,
		       hp_fmt_bytes_short(b, sizeof(b), (int64_t)at),
		       hp_fmt_bytes_short(l, sizeof(l), (int64_t)w->cg.limit));
	else
		hp_log(PFX "pid %d: killed by the OOM killer\n", (int)t->pid);
	(void)s;
	return "oom-kill";
}
