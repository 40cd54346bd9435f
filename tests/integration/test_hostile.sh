#!/usr/bin/env bash
# test_hostile.sh BUILD: programs that turn a profiler's assumptions
# against it (issue 18; docs/safety/safety.md, "Hostile programs").  Each
# runs bare twice, then under `heapprof record` HEAPPROF_HOSTILE_RUNS times
# (default 3) per mode, and must behave exactly as bare (hostile_case,
# hostile_helpers.sh):
#   ownmalloc  the executable defines malloc and free itself: operator new
#              and delete must reach its allocator, as bare (case 14)
#   exitlock   a thread parked for good in a signal handler, maybe inside
#              malloc, when main exits: nothing at exit may wait on the
#              arena lock it may hold (case 11)
#
# Env: HEAPPROF_HOSTILE_RUNS (runs per mode, default 3),
# HEAPPROF_HOSTILE_TIMEOUT (seconds per run, default 30).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/hostile_ownmalloc" \
	"$PROGS/hostile_exitlock"

RUNS=${HEAPPROF_HOSTILE_RUNS:-3}
TMO=${HEAPPROF_HOSTILE_TIMEOUT:-30}
if ! t_is_num "$RUNS" || [ "$RUNS" -lt 1 ]; then
	t_begin "HEAPPROF_HOSTILE_RUNS"
	t_fail "HEAPPROF_HOSTILE_RUNS must be a positive integer, got '$RUNS'"
	t_summary
fi
. "$HERE/hostile_helpers.sh"

# ---------------------------------------------------------------------------
# The program's own allocator in its executable: bare, its 1000 strings,
# their vector and 200 aligned objects come from its arena (2212
# allocations), and every delete goes back to it.
if HC_NOCOUNT=1 hostile_case ownmalloc 0 -- "$PROGS/hostile_ownmalloc"; then
	assert_match "served by the program's arena: 2212 allocations" \
		"$(cat "$T_DIR/ownmalloc.i1.out")" "operator new under -i 1"
fi

# A thread parked in a signal handler while main exits (bare: 2 of 6
# profiled runs hung in mallinfo2 at exit before the fix).
HC_NOCOUNT=1 hostile_case exitlock 0 -- "$PROGS/hostile_exitlock"

hostile_summary hostile
t_summary
