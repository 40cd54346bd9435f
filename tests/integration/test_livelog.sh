#!/bin/bash
# The live table's log (docs/LAYOUT.md, "The live table's log"): at -i 1
# a single-threaded program appends its allocations and frees and record
# applies them to the live table.  HEAPPROF_LIVE_LOG=0 switches it off,
# for the comparisons.
#
#   exact      progs/ll_burst under record -i 1: every view of every
#              function exact, with a realloc that fails (the block stays)
#              and one that moves; the same profile without the log
#   threads    the same program then starts threads, which free blocks the
#              collector put in from the log: the table changes hands
#              (the process keeps it itself) and every view is exact
#   sqlite3    Debian's sqlite3 on a fixed script: the same allocations,
#              frees and leaks with the log as without it
#   stalled    record stopped (SIGSTOP) while the program allocates: the
#              program takes its table back (applying the log itself, but
#              for the event record was stopped in), runs to its end as
#              bare while record is still stopped, and the profile is exact
#   stalled-nested  progs/hs_nested, whose SIGALRM handler allocates
#              every 100 us, with record stopped: it starts a thread once
#              about 120,000 events wait in the log, and the program takes
#              its table back, applying them, alarms landing in the middle
#              of it; the handler's allocations then wait in a buffer the
#              takeover applies: recorded + skipped = made, at most 1%
#              skipped (before, every one during the takeover was skipped:
#              386 of 6000 on a loaded machine)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
LLB="$PROGS/ll_burst"
t_require "$HP" "$BUILD/libheapprof.so" "$LLB" "$PROGS/hs_nested"
. "$HERE/session_helpers.sh"
unset LD_PRELOAD
unset HEAPPROF_LIVE_LOG

N=1000000
K=$((N / 10))

stat_of() { # DB NAME: a process counter of the profile
	sqlq "$1" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$2';"
}

# check_burst DB LIVE48: the views of ll_burst's functions (threads: the
# workers' too), LIVE48 the blocks of ll_burst_alloc still live.
check_burst() {
	local db=$1 live=$2
	check_views "$db" ll_warm 1000 48000 0 0
	check_views "$db" ll_burst_alloc "$N" $((48 * N)) "$live" $((48 * live))
	check_views "$db" ll_realloc 1 4096 1 4096
}

# ---------------------------------------------------------------------------
t_begin "exact: ll_burst $N under record -i 1 (the log): every view exact, a failed realloc keeps its block, a moved one moves"
bare_run llb "$LLB" - - "$N"
assert_eq 0 "$BARE_RC" "bare exit status"
assert_eq "kept $((K - 1))" "$(cat "$T_DIR/llb.bare.out" 2>/dev/null)" "bare output"
hp_record llb -i 1 -o "$T_DIR/llb.db" -- "$LLB" - - "$N"
assert_eq 0 "$REC_RC" "record's exit status"
assert_eq "kept $((K - 1))" "$(cat "$T_DIR/llb.out")" "the program's output as bare"
if db_valid "$T_DIR/llb.db"; then
	check_burst "$T_DIR/llb.db" $((K - 1))
	assert_eq 0 "$(stat_of "$T_DIR/llb.db" live_table_full)" "nothing lost to a full table"
	# The log carried the allocations and frees; all of the burst's
	# (N allocations, 0.9 N frees) unless record fell behind (a loaded
	# machine, a sanitizer build) and the program took its table back
	# (live_log_taken_back 2).  Exact either way.
	ev=$(stat_of "$T_DIR/llb.db" live_log_events)
	assert_match "^[1-9][0-9]*$" "$ev" "the log carried events"
	if [ "$(stat_of "$T_DIR/llb.db" live_log_taken_back)" != 0 ]; then
		t_note "record fell behind after $ev events of the log; the program took the table back"
	else
		assert_eq 1 "$((ev >= N + N * 9 / 10))" "the log carried the burst ($ev events)"
	fi
fi

t_begin "exact: the same without the log (HEAPPROF_LIVE_LOG=0): the same views"
HEAPPROF_LIVE_LOG=0 hp_record llb0 -i 1 -o "$T_DIR/llb0.db" -- "$LLB" - - "$N"
assert_eq 0 "$REC_RC" "record's exit status"
if db_valid "$T_DIR/llb0.db"; then
	check_burst "$T_DIR/llb0.db" $((K - 1))
	assert_eq 0 "$(stat_of "$T_DIR/llb0.db" live_log_events)" "no log"
fi

# ---------------------------------------------------------------------------
t_begin "threads: the program starts threads that free what the collector put in: the table changes hands, every view exact"
hp_record llt -i 1 -o "$T_DIR/llt.db" -- "$LLB" - - "$N" threads
assert_eq 0 "$REC_RC" "record's exit status"
assert_eq "kept 1" "$(cat "$T_DIR/llt.out")" "the program's output"
if db_valid "$T_DIR/llt.db"; then
	check_burst "$T_DIR/llt.db" 1
	# 1 when it started the threads; 2 if the log had stalled before
	# (a collector slower than the program: a sanitizer build).
	assert_match "^[12]$" "$(stat_of "$T_DIR/llt.db" live_log_taken_back)" \
		"the program took its table back (live_log_taken_back 1, or 2 if the log stalled first)"
	assert_match "^[1-9][0-9]*$" "$(stat_of "$T_DIR/llt.db" live_log_events)" \
		"the single-threaded part went through the log"
	check_views "$T_DIR/llt.db" ll_thread_alloc 2000 128000 0 0
fi

# ---------------------------------------------------------------------------
t_begin "sqlite3: Debian's sqlite3 on a fixed script: the same allocations, frees and leaks with the log as without it"
if ! command -v sqlite3 >/dev/null; then
	t_skip "sqlite3 not installed"
else
	{
		echo "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);"
		echo "BEGIN;"
		for i in $(seq 1 3000); do echo "INSERT INTO t(b, c) VALUES ('row $i', $i.5);"; done
		echo "COMMIT;"
		echo "CREATE INDEX tb ON t(b);"
		echo "SELECT count(*), sum(c) FROM t WHERE b LIKE 'row 1%';"
		echo "DELETE FROM t WHERE a % 3 = 0;"
		echo "SELECT count(*) FROM t;"
	} >"$W/fixed.sql"
	totals() { # DB: allocations, frees, leaked bytes at the end dump
		sqlq "$1" "SELECT sum(CASE WHEN count > 0 THEN count ELSE 0 END) || ' ' ||
		  -sum(CASE WHEN count < 0 THEN count ELSE 0 END) || ' ' || sum(size)
		  FROM heap_profile_allocation;"
	}
	bare_run sq sqlite3 :memory: ".read $W/fixed.sql"
	hp_record sq1 -i 1 -o "$T_DIR/sq1.db" -- sqlite3 :memory: ".read $W/fixed.sql"
	assert_eq "$(cat "$T_DIR/sq.bare.out")" "$(cat "$T_DIR/sq1.out")" "output as bare (log)"
	HEAPPROF_LIVE_LOG=0 hp_record sq0 -i 1 -o "$T_DIR/sq0.db" -- sqlite3 :memory: ".read $W/fixed.sql"
	assert_eq "$(cat "$T_DIR/sq.bare.out")" "$(cat "$T_DIR/sq0.out")" "output as bare (no log)"
	if db_valid "$T_DIR/sq1.db" && db_valid "$T_DIR/sq0.db"; then
		a=$(totals "$T_DIR/sq1.db")
		b=$(totals "$T_DIR/sq0.db")
		t_note "sqlite3 allocations, frees, leaked bytes: log $a, no log $b"
		assert_eq "$b" "$a" "allocations, frees and leaks equal"
		assert_match "^[1-9][0-9]{4,} " "$a" "tens of thousands of allocations at least"
		assert_match "^[1-9][0-9]*$" "$(stat_of "$T_DIR/sq1.db" live_log_events)" \
			"sqlite3's allocations and frees went through the log"
	fi
fi

# ---------------------------------------------------------------------------
t_begin "stalled: record stopped while the program allocates: the program takes its table back, runs to its end while record is still stopped, as bare; the profile is exact"
rm -f "$W/ready" "$W/go"
start_record st -i 1 -o "$T_DIR/st.db" -- "$LLB" "$W/ready" "$W/go" "$N"
if wait_until 30 "the program ready" test -e "$W/ready"; then
	REC=$(pgrep -P "$RPID" -x heapprof | head -n 1)
	[ -n "$REC" ] || REC=$RPID
	kill -STOP "$REC"
	: >"$W/go"
	# The program ends (its output written) with record still stopped:
	# it waited for room at most HP_LOG_ROOM_MS, then applied the log
	# itself, all but the event record was stopped in.
	wait_until 60 "the program's end while record is stopped" grep_q "$T_DIR/st.out" "^kept "
	assert_eq T "$(awk '{ print $3 }' "/proc/$REC/stat" 2>/dev/null)" "record was stopped all along"
	kill -CONT "$REC"
fi
wait_record st
assert_eq 0 "$REC_RC" "record's exit status"
assert_eq "kept $((K - 1))" "$(cat "$T_DIR/st.out")" "the program's output as bare"
burst=$(sed -n 's/^burst_ms //p' "$T_DIR/st.err")
t_note "the burst took ${burst:-?} ms with record stopped"
if db_valid "$T_DIR/st.db"; then
	assert_eq 2 "$(stat_of "$T_DIR/st.db" live_log_taken_back)" \
		"the program took its table back because the log stalled (live_log_taken_back 2)"
	check_burst "$T_DIR/st.db" $((K - 1))
	assert_eq 0 "$(stat_of "$T_DIR/st.db" live_table_full)" "nothing lost to a full table"
fi

# ---------------------------------------------------------------------------
t_begin "stalled-nested: record stopped, a thread started, alarms allocating: what the handler allocates while the program takes its table back is recorded"
rm -f "$W/ready" "$W/go"
start_record sn -i 1 -o "$T_DIR/sn.db" -- "$PROGS/hs_nested" "$W/ready" "$W/go" 60000
if wait_until 30 "the program ready" test -e "$W/ready"; then
	REC=$(pgrep -P "$RPID" -x heapprof | head -n 1)
	[ -n "$REC" ] || REC=$RPID
	kill -STOP "$REC"
	: >"$W/go"
	wait_until 60 "the program's end while record is stopped" grep_q "$T_DIR/sn.out" "^made "
	kill -CONT "$REC"
fi
wait_record sn
assert_eq 43 "$REC_RC" "record's exit status (the program's)"
if db_valid "$T_DIR/sn.db"; then
	assert_eq 1 "$(stat_of "$T_DIR/sn.db" live_log_taken_back)" \
		"the program took its table back at its first thread (live_log_taken_back 1)"
	read -r _ _ made bytes < <(grep '^made hs_handler_alloc ' "$T_DIR/sn.out")
	skipped=$(stat_of "$T_DIR/sn.db" reentrant_skipped)
	read -r ao as _ <<<"$(leaf_views "$T_DIR/sn.db" hs_handler_alloc)"
	t_note "handler allocations: made ${made:-?}, recorded $ao, skipped $skipped"
	assert_eq "${made:-x}" "$((ao + skipped))" "the handler's allocations: recorded + skipped = made"
	assert_eq "$(( ${bytes:-0} / ${made:-1} * ao ))" "$as" "the handler's alloc_space"
	assert_le "$skipped" "$(( ${made:-0} / 100 ))" "at most 1% skipped"
fi

t_summary
