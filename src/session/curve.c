/*
 * Memory over time (issue 33): each target's heaps and RSS about every
 * CURVE_MS, whatever the dumps (collector/curve.c writes them as
 * Perfetto's process counters).  A target whose stack table takes long
 * to walk is sampled less often (collector_curve's gap), and so is one
 * profiled for long: after CURVE_FULL_S the gap is its age / CURVE_AGE_DIV
 * (a second at 50 minutes, 29 s at a day: an always-on agent's profile
 * grows by some 20,000 points a day per curve, not 864,000).  Nothing here
 * touches the target: its tables from our mapping, /proc for its RSS.
 */
#include <time.h>

#include "session/session_int.h"
#include "util/clock.h"
#include "util/proc.h"

#define CURVE_FULL_S  300
#define CURVE_AGE_DIV 3000

int session_curve(struct session *s)
{
	uint64_t now = hp_clock_ns(CLOCK_MONOTONIC);
	int wait = -1;
	for (size_t i = 0; i < s->col.ntargets; i++) {
		struct target *t = s->col.targets[i];
		if (t->retired || t->disconnected || !t->nreg || s->finished ||
		    s->stopping)
			continue;
		if (now >= t->curve_next_ns) {
			struct proc_status st;
			uint64_t rss = 0;
			bool have = session_target_rss(t, &st, &rss);
			collector_curve(&s->col, t, hp_clock_ns(CLOCK_BOOTTIME),
			                rss, have);
			if (!t->curve_first_ns)
				t->curve_first_ns = now;
			uint64_t gap = CURVE_MS * 1000000ull;
			uint64_t age = now - t->curve_first_ns;
			if (age > CURVE_FULL_S * 1000000000ull &&
			    age / CURVE_AGE_DIV > gap)
				gap = age / CURVE_AGE_DIV;
			if (t->curve_gap_ns > gap)
				gap = t->curve_gap_ns;
			/* On a grid: a late turn of the loop does not push
			 * the later samples back (ten a second means ten). */
			t->curve_next_ns =
			        t->curve_next_ns && gap == CURVE_MS * 1000000ull
			                ? t->curve_next_ns + gap
			                : now + gap;
			if (t->curve_next_ns <= now)
				t->curve_next_ns = now + gap;
		}
		uint64_t left =
		        t->curve_next_ns > now ? t->curve_next_ns - now : 0;
		int ms = (int)(left / 1000000ull) + 1;
		if (wait < 0 || ms < wait)
			wait = ms;
	}
	return wait;
}
