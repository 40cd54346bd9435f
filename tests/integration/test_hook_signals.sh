#!/usr/bin/env bash
# test_hook_signals.sh BUILD: signals against the hook (issue 18, round
# two, cases 5-7; docs/safety/safety.md).  Each program runs bare twice,
# then under `heapprof record` HEAPPROF_HOOKSIG_RUNS times (default 3) at
# -i 1 and at the default interval, and must behave exactly as bare
# (hostile_case, hostile_helpers.sh); at -i 1:
#   longjmp  siglongjmp out of a SIGALRM handler that interrupted malloc or
#            free (or the hook around them), 3000 times, on the thread's
#            stack and on an alternate one; then hs_after allocates with
#            the timer off.  hs_after exact; the handler's own allocations
#            recorded + reentrant_skipped = made, the skipped few (<= 10)
#            and `heapprof report` saying that number; marks of hooks the
#            jumps left found and cleared (stale_guards_cleared >= 1)
#   nested   a SIGALRM handler allocating every 100 us while the thread
#            only allocates: recorded + reentrant_skipped = made, at most
#            1% skipped, some recorded nested in a hook; no stack holds a
#            frame of libheapprof (also at the default interval); under
#            the unwind oracle (libheapprof-oracle.so) 0 mismatches
#   raise-*  raise(SIG) / kill(getpid(), SIG) of signal 60 and of the
#            attach signal (HP_ATTACH_SIGNAL): killed by it, and
#            /proc/self/status's SigCgt unchanged, bare, under record, and
#            with LD_PRELOAD=libheapprof.so alone (no daemon); with a
#            daemon running the preloaded process does catch the signal
#            (a session may need it) but its own raise still kills it
#
# No daemon of the user's is reachable: every part runs under a private
# XDG_RUNTIME_DIR.
# Env: HEAPPROF_HOOKSIG_RUNS (runs per mode, default 3),
# HEAPPROF_HOOKSIG_TIMEOUT (seconds per run, default 60).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
LIB="$BUILD/libheapprof.so"
ORACLE="$BUILD/libheapprof-oracle.so"
t_require "$HP" "$LIB" "$ORACLE" "$PROGS/hs_longjmp" "$PROGS/hs_nested" \
	"$PROGS/hs_raise"

RUNS=${HEAPPROF_HOOKSIG_RUNS:-3}
TMO=${HEAPPROF_HOOKSIG_TIMEOUT:-60}
if ! t_is_num "$RUNS" || [ "$RUNS" -lt 1 ]; then
	t_begin "HEAPPROF_HOOKSIG_RUNS"
	t_fail "HEAPPROF_HOOKSIG_RUNS must be a positive integer, got '$RUNS'"
	t_summary
fi
. "$HERE/hostile_helpers.sh"
# new_xdg, start_daemon; stops every daemon at exit.
. "$HERE/daemon_helpers.sh"
new_xdg

# stat_of DB NAME: a counter of heapprof_process_stats (0 without a row).
stat_of() {
	sqlq "$1" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$2';"
}

# ours_frames DB: frames of libheapprof in the profile's stacks.
ours_frames() {
	sqlq "$1" "SELECT count(*) FROM stack_profile_callsite c
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  JOIN stack_profile_mapping m ON f.mapping = m.id
	  WHERE m.name LIKE '%libheapprof%';"
}

# made_check TAG DB OUT MAXSKIP: every "made FUNC N BYTES" line of OUT:
# the profile's alloc_objects and alloc_space of FUNC (leaf) plus the
# allocations it says it skipped (reentrant_skipped) are N, and the bytes
# of N - skipped; at most MAXSKIP skipped.
made_check() {
	local tag=$1 db=$2 out=$3 max=$4 fn n bytes ao as o s skipped
	skipped=$(stat_of "$db" reentrant_skipped) || return 1
	assert_le "$skipped" "$max" "$tag: reentrant calls skipped" || return 1
	while read -r _ fn n bytes; do
		read -r ao as o s <<<"$(leaf_views "$db" "$fn")"
		assert_eq "$n" "$((ao + skipped))" \
			"$tag: $fn recorded ($ao) + skipped ($skipped) = made" || return 1
		assert_eq "$((bytes / n * ao))" "$as" "$tag: $fn alloc_space" || return 1
	done < <(grep '^made ' "$out")
	return 0
}

# reported_skips NAME MODE: `heapprof report` (hostile_case wrote it) says
# the same number of reentrant calls skipped as the profile's stats.
reported_skips() {
	local want got
	want=$(stat_of "$T_DIR/$1.$2.db" reentrant_skipped)
	got=$(sed -n 's/.* allocations sampled, .* frees matched, \([0-9]*\) reentrant calls skipped$/\1/p' \
		"$T_DIR/$1.$2.report" | head -n 1)
	assert_eq "$want" "$got" "$1 $2: reentrant calls skipped in heapprof report"
}

# ---------------------------------------------------------------------------
# (a) siglongjmp out of hooks.  Before the fix the first jump out of a
# record left the thread's flag set: nothing more was recorded
# (3,421,942 reentrant calls skipped, 0 samples).
longjmp_check() {
	made_check "$1" "$2" "$3" 10 || return 1
	assert_ge "$(stat_of "$2" stale_guards_cleared)" 1 \
		"$1: marks of hooks left by a jump, cleared"
}
if HC_CHECK=longjmp_check hostile_case longjmp 41 -- "$PROGS/hs_longjmp"; then
	reported_skips longjmp i1
	reported_skips longjmp default
	assert_eq 0 "$(ours_frames "$T_DIR/longjmp.i1.db")" "longjmp: frames of libheapprof in the stacks"
fi

# ---------------------------------------------------------------------------
# (b) a handler allocating in the middle of hooks.  Before the fix about
# half its allocations were skipped as reentrant (2992 of 6000 recorded).
nested_check() {
	local made
	made=$(sed -n 's/^made hs_handler_alloc \([0-9]*\) .*/\1/p' "$3")
	made_check "$1" "$2" "$3" "$((made / 100))" || return 1
	assert_ge "$(stat_of "$2" nested_recorded)" 1 \
		"$1: allocations recorded nested in a hook" || return 1
	assert_eq 0 "$(ours_frames "$2")" "$1: frames of libheapprof in the stacks"
}
if CC_VARIES='^count hs_main_alloc ' HC_CHECK=nested_check \
	hostile_case nested 43 -- "$PROGS/hs_nested"; then
	reported_skips nested i1
	assert_eq 0 "$(ours_frames "$T_DIR/nested.default.db")" \
		"nested, default interval: frames of libheapprof in the stacks"
	# The handler's stack: its caller, the signal frame, then the
	# program's frame it interrupted (never heapprof's hook).
	got=$(sqlq "$T_DIR/nested.i1.db" "SELECT DISTINCT pf.name
	  FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  JOIN stack_profile_callsite p ON p.id = c.parent_id
	  JOIN stack_profile_frame pf ON pf.id = p.frame_id
	  WHERE f.name = 'hs_handler_alloc';")
	assert_eq hs_on_alarm "$got" "callers of hs_handler_alloc"
fi

t_begin "nested: the captures inside a hook equal libgcc's unwind (libheapprof-oracle.so)"
ORACLE_RE='^heapprof: unwind oracle: ([0-9]+) captures, ([0-9]+) exact, ([0-9]+) mismatches, ([0-9]+) skipped$'
HEAPPROF_LIB="$ORACLE" HP_TIMEOUT=$TMO hp_record nested-oracle -i 1 \
	-o "$T_DIR/nested-oracle.db" -- "$PROGS/hs_nested"
if assert_eq 43 "$REC_RC" "exit status under the oracle"; then
	line=$(grep -E "$ORACLE_RE" "$T_DIR/nested-oracle.err")
	read -r cap ex mis sk <<<"$(printf '%s\n' "$line" | sed -E "s/$ORACLE_RE/\1 \2 \3 \4/")"
	if ! assert_eq 0 "$mis" "mismatches ($line)"; then
		grep -E '^heapprof: (  !|unwind oracle: mismatch)' "$T_DIR/nested-oracle.err" |
			head -n 30 | sed -e 's/^/    | /' >&2
	fi
	assert_le "$sk" "$((cap / 100))" "captures the oracle skipped ($line)"
	nested_check "oracle" "$T_DIR/nested-oracle.db" "$T_DIR/nested-oracle.out"
	t_note "nested under the oracle: $line"
fi

# ---------------------------------------------------------------------------
# (c) The program's own real-time signal.  Before the fix a preloaded
# library took the signal in every process: raise(60) was caught
# ("survived", status 0) and SigCgt showed it.
ASIG=$(sed -n 's/^#define HP_ATTACH_SIGNAL \([0-9][0-9]*\).*/\1/p' "$HERE/../../src/layout/wire_v1.h")
SIGS="60"
[ -n "$ASIG" ] && [ "$ASIG" != 60 ] && SIGS="$SIGS $ASIG"
for sig in $SIGS; do
	for how in raise kill; do
		hostile_case "raise-$sig-$how" "$((128 + sig))" -- "$PROGS/hs_raise" "$sig" "$how"
	done
done

t_begin "raise: LD_PRELOAD=libheapprof.so with no daemon behaves as bare"
for sig in $SIGS; do
	for how in raise kill; do
		bare_run "pre-$sig-$how" "$PROGS/hs_raise" "$sig" "$how"
		rc=0
		LD_PRELOAD="$LIB" run_bounded "$TMO" "$PROGS/hs_raise" "$sig" "$how" \
			>"$T_DIR/pre-$sig-$how.out" 2>"$T_DIR/pre-$sig-$how.err" || rc=$?
		assert_eq "$((128 + sig))" "$BARE_RC" "bare: killed by signal $sig ($how)"
		assert_eq "$BARE_RC" "$rc" "preloaded: the bare status ($how $sig)"
		assert_eq "$(cat "$T_DIR/pre-$sig-$how.bare.out")" \
			"$(cat "$T_DIR/pre-$sig-$how.out")" "preloaded: the bare disposition and SigCgt ($how $sig)"
		assert_eq "signal $sig: default, SigCgt 0, SigIgn 0
child: SigCgt 0
child: killed by signal $sig" "$(cat "$T_DIR/pre-$sig-$how.out")" "bare output ($how $sig)"
	done
done

t_begin "raise: with a daemon running, the preloaded process catches the signal, and its own raise still kills it"
new_xdg
start_daemon hsd
if assert_eq 0 "$START_RC" "daemon started ($(cat "$T_DIR/hsd.err"))"; then
	for how in raise kill; do
		rc=0
		LD_PRELOAD="$LIB" run_bounded "$TMO" "$PROGS/hs_raise" "${ASIG:-60}" "$how" \
			>"$T_DIR/dpre-$how.out" 2>"$T_DIR/dpre-$how.err" || rc=$?
		assert_eq "$((128 + ${ASIG:-60}))" "$rc" "preloaded, daemon: killed by its own $how"
		assert_eq "signal ${ASIG:-60}: a handler, SigCgt 1, SigIgn 0
child: SigCgt 1
child: killed by signal ${ASIG:-60}" "$(cat "$T_DIR/dpre-$how.out")" \
			"preloaded, daemon: the handler is there for the daemon"
	done
	# `record -- CMD` attaches to its own collector at startup: no
	# session can need the signal, daemon or not.
	hp_record drec -o "$T_DIR/drec.db" -- "$PROGS/hs_raise" "${ASIG:-60}"
	assert_eq "$((128 + ${ASIG:-60}))" "$REC_RC" "record, daemon: killed by its own raise"
	assert_eq "signal ${ASIG:-60}: default, SigCgt 0, SigIgn 0
child: SigCgt 0
child: killed by signal ${ASIG:-60}" "$(cat "$T_DIR/drec.out")" \
		"record, daemon: the signal left alone"
	assert_eq "" "$(grep -v '^heapprof: ' "$T_DIR/drec.err")" "record, daemon: nothing else on stderr"
fi

hostile_summary hook-signals
t_summary
