#!/usr/bin/env bash
# test_trace.sh BUILD: `heapprof record --trace` (issue 6): the event trace
# of progs/trace_known (a known sequence of allocations and frees, see its
# header) with -i 1, in each mode:
#   streaming  exact counts, sizes, threads and stacks; with a tiny buffer
#              every event is either kept or counted as dropped, and with
#              --block-client none is dropped;
#   oneshot    the first events that fit, in order; "trace buffer full" said
#              while the program still runs; the rest counted;
#   ring       the last events that fit, in order, still symbolized; the rest
#              counted as overwritten;
# and through a heapprofd session (record -p).  The leaks at exit are in the
# last dump's blocks.  Waits are on files and lines, each with a bound.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/trace_known" "$PROGS/trace_snap" \
	"$PROGS/trace_v1hello"
LIB="$BUILD/libheapprof.so"
. "$HERE/session_helpers.sh"

TK="$PROGS/trace_known"

# Events whose stack resolves to a callsite whose leaf frame is FUNC (the
# join of the heapprof_event_callsite view, on the table itself so that
# e.rowid is the event's position order).
ev_of() { # FUNC
	echo "FROM heapprof_event e
	  JOIN heapprof_trace_stack s ON s.upid = e.upid AND s.stack_key = e.stack_key
	  JOIN stack_profile_callsite c ON c.id = s.callsite_id
	  JOIN stack_profile_frame f ON f.id = c.frame_id
	  WHERE f.name = '$1'"
}
PROG="$(ev_of trace_alloc)"

# seq_of T N: thread T's events as "alloc:SIZE" / "free:SIZE" lines, in
# order (see trace_known.c).
seq_of() {
	awk -v t="$1" -v n="$2" '
	function sz(k) { return 16 + 8 * (k % 61) + t }
	BEGIN {
		for (k = 0; k < n; k++) {
			print "alloc:" sz(k)
			if (k % 4 == 3) print "free:" sz(k - 1)
		}
		for (k = 0; k < n; k += 4) print "free:" sz(k)
	}'
}

# sums_of THREADS N: "ALLOC_BYTES FREE_BYTES LIVE_BYTES" of all threads.
sums_of() {
	local t out a=0 f=0 x
	for ((t = 0; t < $1; t++)); do
		out=$(seq_of "$t" "$2" | awk -F: '
		  $1 == "alloc" { a += $2 } $1 == "free" { f += $2 }
		  END { print a, f }')
		read -r x y <<<"$out"
		a=$((a + x))
		f=$((f + y))
	done
	echo "$a $f $((a - f))"
}

# is_subseq A B: the lines of file A are a subsequence of those of B.
is_subseq() {
	awk 'BEGIN { i = 0; n = 0 } FILENAME == ARGV[1] { a[n++] = $0; next } i < n && $0 == a[i] { i++ }
	  END { exit !(i == n) }' "$1" "$2"
}

# Allocations and frees the profile counted (-i 1: all of them), which the
# trace must account for: kept + dropped.
profile_totals() { # DB: "ALLOCS FREES ALLOC_BYTES FREE_BYTES"
	q "$1" "SELECT coalesce(sum(CASE WHEN count > 0 THEN count END), 0)
	  || ' ' || coalesce(-sum(CASE WHEN count < 0 THEN count END), 0)
	  || ' ' || coalesce(sum(CASE WHEN size > 0 THEN size END), 0)
	  || ' ' || coalesce(-sum(CASE WHEN size < 0 THEN size END), 0)
	  FROM heap_profile_allocation;"
}

kept_totals() { # DB: "ALLOCS FREES ALLOC_BYTES FREE_BYTES" of heapprof_event
	q "$1" "SELECT count(CASE WHEN kind = 'alloc' THEN 1 END)
	  || ' ' || count(CASE WHEN kind = 'free' THEN 1 END)
	  || ' ' || coalesce(sum(CASE WHEN kind = 'alloc' THEN size END), 0)
	  || ' ' || coalesce(sum(CASE WHEN kind = 'free' THEN size END), 0)
	  FROM heapprof_event;"
}

trace_row() { # DB: the heapprof_trace row, '|'-separated
	q "$1" "SELECT mode, buffer_bytes, events, dropped_allocs,
	  dropped_frees, dropped_alloc_bytes, dropped_free_bytes, overwritten,
	  incomplete, full_ts IS NOT NULL, waits FROM heapprof_trace;"
}

# check_accounted TAG DB: every allocation and free the profile counted is
# in the trace or counted as dropped (or overwritten), exactly.
check_accounted() {
	local tag=$1 db=$2 pa pf pab pfb ka kf kab kfb row
	read -r pa pf pab pfb <<<"$(profile_totals "$db")"
	read -r ka kf kab kfb <<<"$(kept_totals "$db")"
	row=$(trace_row "$db")
	local mode bb ev da df dab dfb ov inc
	IFS='|' read -r mode bb ev da df dab dfb ov inc _ _ <<<"$row"
	assert_eq "$((ka + kf))" "$ev" "$tag: heapprof_trace.events = rows"
	assert_eq 0 "$inc" "$tag: incomplete"
	if [ "$mode" = ring ]; then
		assert_eq "$((pa + pf))" "$((ka + kf + da + df + ov))" \
			"$tag: kept + dropped + overwritten = every event"
	else
		assert_eq "$pa" "$((ka + da))" "$tag: allocations kept + dropped"
		assert_eq "$pf" "$((kf + df))" "$tag: frees kept + dropped"
		assert_eq "$pab" "$((kab + dab))" "$tag: allocated bytes kept + dropped"
		assert_eq "$pfb" "$((kfb + dfb))" "$tag: freed bytes kept + dropped"
	fi
}

# ---------------------------------------------------------------------------
t_begin "streaming: every event of 4 threads, exact, each stack resolved"
T=4 N=2000
DB="$T_DIR/s.db"
hp_record s -i 1 --trace -o "$DB" "$TK" "$T" "$N"
assert_eq 0 "$REC_RC" "record exit status" || show_err s
assert_eq "trace_known: done" "$(cat "$T_DIR/s.out")" "program output"
if db_valid "$DB"; then
	read -r AB FB LB <<<"$(sums_of "$T" "$N")"
	assert_eq "$((T * N))|$AB" "$(q "$DB" "SELECT count(*), sum(e.size) $PROG AND e.kind = 'alloc';")" \
		"trace_alloc: allocation events, bytes"
	assert_eq "$((T * N / 2))|$FB" "$(q "$DB" "SELECT count(*), sum(e.size) $PROG AND e.kind = 'free';")" \
		"trace_alloc: free events, bytes"
	assert_eq "0" "$(q "$DB" "SELECT count(*) FROM heapprof_event_callsite WHERE callsite_id IS NULL;")" \
		"events whose stack does not resolve"
	assert_eq "$T" "$(q "$DB" "SELECT count(DISTINCT e.tid) $PROG;")" "threads"
	assert_eq "0" "$(q "$DB" "SELECT count(*) $PROG AND e.kind = 'free'
	  AND (e.alloc_ts IS NULL OR e.alloc_ts > e.ts);")" "frees know when their block was allocated"
	# Each thread's own events in its order (positions are the rows' order).
	for ((t = 0; t < T; t++)); do
		tid=$(q "$DB" "SELECT e.tid $PROG AND e.kind = 'alloc' AND e.size = $((16 + t)) ORDER BY e.rowid LIMIT 1;")
		got=$(q "$DB" "SELECT e.kind || ':' || e.size $PROG AND e.tid = $tid ORDER BY e.rowid;")
		if [ "$got" != "$(seq_of "$t" "$N")" ]; then
			t_fail "thread $t: its events are not its sequence in order"
		fi
	done
	assert_eq "streaming|67108864|0|0|0|0|0|0" \
		"$(q "$DB" "SELECT mode, buffer_bytes, dropped_allocs, dropped_frees,
		  overwritten, incomplete, full_ts IS NOT NULL, waits FROM heapprof_trace;")" \
		"heapprof_trace"
	check_accounted streaming "$DB"
	# The leaks at exit: the last dump's blocks.
	assert_eq "$((T * N / 2))|$LB" "$(q "$DB" "SELECT count(*), sum(b.size) FROM heapprof_block b
	  JOIN heapprof_dump d ON d.id = b.dump_id
	  JOIN stack_profile_callsite c ON c.id = b.callsite_id
	  JOIN stack_profile_frame f ON f.id = c.frame_id
	  WHERE f.name = 'trace_alloc' AND d.reason = 'end';")" "live blocks of trace_alloc at exit"
	ev=$(q "$DB" "SELECT count(*) FROM heapprof_event;")
	assert_match "pid [0-9]+: trace \(streaming\): $ev events kept, 0 dropped, 0 overwritten$" \
		"$(cat "$T_DIR/s.err")" "summary line"
fi

# ---------------------------------------------------------------------------
t_begin "streaming, 64 KiB buffer, no --block-client: kept + dropped = every event"
DB="$T_DIR/st.db"
hp_record st -i 1 --trace streaming --trace-buffer 65536 -o "$DB" "$TK" 1 40000
assert_eq 0 "$REC_RC" "record exit status" || show_err st
if db_valid "$DB"; then
	check_accounted tiny "$DB"
	IFS='|' read -r _ bb ev da df _ <<<"$(trace_row "$DB")"
	assert_eq 65536 "$bb" "buffer bytes"
	[ "$((da + df))" -gt 0 ] || t_note "the drain kept up: nothing dropped this time"
	# What was kept is the program's sequence with holes, in order.
	q "$DB" "SELECT e.kind || ':' || e.size $PROG ORDER BY e.rowid;" >"$T_DIR/st.kept"
	seq_of 0 40000 >"$T_DIR/st.seq"
	is_subseq "$T_DIR/st.kept" "$T_DIR/st.seq" ||
		t_fail "the kept events are not the program's in its order"
	assert_match "trace \(streaming\): $ev events kept, $((da + df)) dropped" \
		"$(cat "$T_DIR/st.err")" "summary line"
fi

# ---------------------------------------------------------------------------
t_begin "streaming, 64 KiB buffer, --block-client: the program waits, nothing dropped"
DB="$T_DIR/sb.db"
hp_record sb -i 1 --trace --trace-buffer 65536 --block-client=10000 -o "$DB" "$TK" 2 20000
assert_eq 0 "$REC_RC" "record exit status" || show_err sb
if db_valid "$DB"; then
	read -r AB FB LB <<<"$(sums_of 2 20000)"
	assert_eq "40000|$AB" "$(q "$DB" "SELECT count(*), sum(e.size) $PROG AND e.kind = 'alloc';")" \
		"trace_alloc: allocation events, bytes"
	assert_eq "20000|$FB" "$(q "$DB" "SELECT count(*), sum(e.size) $PROG AND e.kind = 'free';")" \
		"trace_alloc: free events, bytes"
	IFS='|' read -r _ _ _ da df _ _ _ _ _ waits <<<"$(trace_row "$DB")"
	assert_eq "0 0" "$da $df" "dropped"
	check_accounted block "$DB"
	[ "$waits" -gt 0 ] || t_note "no writer had to wait this time"
fi

# ---------------------------------------------------------------------------
t_begin "oneshot, 64 KiB: the first 1024 events in order, 'full' said while the program runs"
DB="$T_DIR/o.db"
D="$W/o"
mkdir -p "$D"
start_record o -i 1 --trace oneshot --trace-buffer 65536 -o "$DB" "$TK" 1 4000 "$D" after
if wait_until 30 "trace buffer full line" grep_q "$T_DIR/o.err" "trace buffer full"; then
	# The program is still waiting for go: the line came while it ran.
	wait_until 30 "program ready" test -e "$D/ready"
	assert_match "heapprof: record: pid [0-9]+: trace buffer full after 1024 events \(64\.00 KiB, [0-9]+\.[0-9]{3} s after start\); later events are counted, not kept \(--trace-buffer, or --trace streaming\)$" \
		"$(cat "$T_DIR/o.err")" "the full line"
	assert_no_match "profile written" "$(cat "$T_DIR/o.err")" "record still running"
fi
: >"$D/go"
wait_record o
assert_eq 0 "$REC_RC" "record exit status"
if db_valid "$DB"; then
	check_accounted oneshot "$DB"
	IFS='|' read -r mode bb ev da df _ _ ov inc full _ <<<"$(trace_row "$DB")"
	assert_eq "oneshot|1024|0|1" "$mode|$ev|$ov|$full" "mode, kept, overwritten, full_ts set"
	read -r pa pf _ _ <<<"$(profile_totals "$DB")"
	assert_eq "$((pa + pf - 1024))" "$((da + df))" "dropped = every event - 1024"
	k=$(q "$DB" "SELECT count(*) $PROG;")
	assert_ge "$k" 900 "trace_alloc events among the first 1024"
	# The program's first k events, in order: a prefix of its sequence.
	if [ "$(q "$DB" "SELECT e.kind || ':' || e.size $PROG ORDER BY e.rowid;")" != \
		"$(seq_of 0 4000 | head -n "$k")" ]; then
		t_fail "the kept events are not the first $k of the program's, in order"
	fi
	assert_eq 1 "$(q "$DB" "SELECT count(*) FROM heapprof_trace t JOIN process p USING(upid)
	  WHERE t.full_ts > p.start_ts;")" "full_ts after the start"
fi

# ---------------------------------------------------------------------------
t_begin "ring, 64 KiB: the last 1024 events in order, symbolized; the rest overwritten"
DB="$T_DIR/r.db"
hp_record r -i 1 --trace ring --trace-buffer 65536 -o "$DB" "$TK" 1 4000
assert_eq 0 "$REC_RC" "record exit status" || show_err r
if db_valid "$DB"; then
	IFS='|' read -r mode bb ev da df _ _ ov inc full _ <<<"$(trace_row "$DB")"
	read -r pa pf _ _ <<<"$(profile_totals "$DB")"
	assert_eq "ring|1024|0|0|0" "$mode|$ev|$da|$df|$full" "mode, kept, dropped, full_ts"
	assert_eq "$((pa + pf - 1024))" "$ov" "overwritten = every event - 1024"
	check_accounted ring "$DB"
	assert_eq "0" "$(q "$DB" "SELECT count(*) FROM heapprof_event_callsite WHERE callsite_id IS NULL;")" \
		"kept events whose stack does not resolve"
	k=$(q "$DB" "SELECT count(*) $PROG;")
	assert_ge "$k" 900 "trace_alloc events among the last 1024"
	if [ "$(q "$DB" "SELECT e.kind || ':' || e.size $PROG ORDER BY e.rowid;")" != \
		"$(seq_of 0 4000 | tail -n "$k")" ]; then
		t_fail "the kept events are not the last $k of the program's, in order"
	fi
	# The program's very last event: the free of block 3996.
	assert_eq "free:$((16 + 8 * (3996 % 61)))" \
		"$(q "$DB" "SELECT e.kind || ':' || e.size $PROG ORDER BY e.rowid DESC LIMIT 1;")" \
		"the last event kept"
	assert_match "trace \(ring\): 1024 events kept, 0 dropped, $ov overwritten" \
		"$(cat "$T_DIR/r.err")" "summary line"
fi

# ---------------------------------------------------------------------------
t_begin "named snapshots from inside the program: every live block, by name"
DB="$T_DIR/n.db"
hp_record n -i 1 --trace -o "$DB" "$PROGS/trace_snap"
assert_eq 0 "$REC_RC" "record exit status" || show_err n
assert_eq "snap: 0 0" "$(tail -n 1 "$T_DIR/n.out")" "the API's results"
blocks_of() { # DUMP_NAME FUNC: "count|bytes" of its blocks at FUNC
	q "$DB" "SELECT count(*) || '|' || coalesce(sum(b.size), 0)
	  FROM heapprof_block b JOIN heapprof_dump d ON d.id = b.dump_id
	  JOIN stack_profile_callsite c ON c.id = b.callsite_id
	  JOIN stack_profile_frame f ON f.id = c.frame_id
	  WHERE d.name = '$1' AND f.name = '$2';"
}
if db_valid "$DB"; then
	assert_eq "before-phase|snapshot|0
after-phase|snapshot|0
|end|0" "$(q "$DB" "SELECT coalesce(name, ''), reason, blocks_in_flight
	  FROM heapprof_dump ORDER BY ts;")" "dumps"
	assert_eq "10|10000" "$(blocks_of before-phase snap_phase1)" "before: phase 1's blocks"
	assert_eq "0|0" "$(blocks_of before-phase snap_phase2)" "before: phase 2's blocks"
	assert_eq "6|6000" "$(blocks_of after-phase snap_phase1)" "after: phase 1's blocks"
	assert_eq "20|10000" "$(blocks_of after-phase snap_phase2)" "after: phase 2's blocks"
	# The addresses the program printed.
	assert_eq "$(head -n 10 "$T_DIR/n.out" | sort -n)" \
		"$(q "$DB" "SELECT b.address FROM heapprof_block b
		  JOIN heapprof_dump d ON d.id = b.dump_id
		  JOIN stack_profile_callsite c ON c.id = b.callsite_id
		  JOIN stack_profile_frame f ON f.id = c.frame_id
		  WHERE d.name = 'before-phase' AND f.name = 'snap_phase1'
		  ORDER BY b.address;")" "block addresses"
	# The trace goes on through them.
	assert_eq "30|4" "$(q "$DB" "SELECT count(CASE WHEN e.kind = 'alloc' THEN 1 END),
	  count(CASE WHEN e.kind = 'free' THEN 1 END) $(ev_of snap_phase1 | sed 's/^/ /')
	  OR f.name = 'snap_phase2';")" "trace events of both phases"
fi

# ---------------------------------------------------------------------------
t_begin "record -p PID --trace (heapprofd session): exact events"
start_daemon
D="$W/p"
mkdir -p "$D"
LD_PRELOAD="$LIB" "$TK" 2 400 "$D" before >"$D/out" 2>"$D/err" &
TPID=$!
TPIDS="$TPIDS $TPID"
DB="$T_DIR/p.db"
if wait_until 30 "program ready" test -e "$D/ready"; then
	start_record p -p "$TPID" -i 1 --trace -o "$DB"
	if wait_until 20 "profiling line" grep_q "$T_DIR/p.err" "pid $TPID \(trace_known\): profiling"; then
		: >"$D/go"
	fi
fi
: >"$D/go"
wait_child 30 "$TPID"
assert_eq 0 "$WAIT_RC" "program exit status"
wait_record p
assert_eq 0 "$REC_RC" "record exit status"
if db_valid "$DB"; then
	read -r AB FB LB <<<"$(sums_of 2 400)"
	assert_eq "800|$AB" "$(q "$DB" "SELECT count(*), sum(e.size) $PROG AND e.kind = 'alloc';")" \
		"trace_alloc: allocation events, bytes"
	assert_eq "400|$FB" "$(q "$DB" "SELECT count(*), sum(e.size) $PROG AND e.kind = 'free';")" \
		"trace_alloc: free events, bytes"
	assert_eq "streaming|0|0" "$(q "$DB" "SELECT mode, dropped_allocs, dropped_frees FROM heapprof_trace;")" \
		"heapprof_trace"
	check_accounted daemon "$DB"
	assert_eq "400|$LB" "$(q "$DB" "SELECT count(*), sum(b.size) FROM heapprof_block b
	  JOIN stack_profile_callsite c ON c.id = b.callsite_id
	  JOIN stack_profile_frame f ON f.id = c.frame_id
	  WHERE f.name = 'trace_alloc';")" "live blocks of trace_alloc at exit"
fi
daemon_gone TERM

# ---------------------------------------------------------------------------
t_begin "a client that speaks layout v1 gets a v1 region, no trace, and record says so"
DB="$T_DIR/v1.db"
# env (with the library: v2, traced) execs the fake old client in place.
hp_record v1 --follow-exec --trace -i 1 -o "$DB" -- env -u LD_PRELOAD "$PROGS/trace_v1hello"
assert_eq 0 "$REC_RC" "record exit status" || show_err v1
assert_match "^v1hello: status 0 layout 1 version 1 size [0-9]+$" "$(cat "$T_DIR/v1.out")" \
	"welcome and region of v1"
assert_match "pid [0-9]+: its heapprof library is older \(layout v1\): no event trace for it" \
	"$(cat "$T_DIR/v1.err")" "said on stderr"
if db_valid "$DB"; then
	assert_eq "env|command|1
trace_v1hello|exec|0" "$(q "$DB" "SELECT p.name, h.how, count(t.upid) FROM process p
	  JOIN heapprof_process h USING(upid) LEFT JOIN heapprof_trace t USING(upid)
	  GROUP BY p.upid ORDER BY p.upid;")" "processes and their traces"
fi

# ---------------------------------------------------------------------------
t_begin "options: --trace forms, --trace-buffer bounds, config keys"
out=$("$HP" record --trace --print-config -- true 2>&1)
assert_match '^trace_mode: "streaming"$' "$out" "--trace alone is streaming"
out=$("$HP" record --trace ring --trace-buffer 1048576 --print-config true 2>&1)
assert_match '^trace_mode: "ring"$' "$out" "--trace MODE"
assert_match '^trace_buffer_bytes: 1048576$' "$out" "--trace-buffer"
out=$("$HP" record --trace=oneshot --print-config true 2>&1)
assert_match '^trace_mode: "oneshot"$' "$out" "--trace=MODE"
printf '%s\n' "$out" >"$T_DIR/t.cfg"
out=$("$HP" record -c "$T_DIR/t.cfg" --print-config 2>&1)
assert_match '^trace_mode: "oneshot"$' "$out" "read back from a config"
# A word that is not a mode is the command.
out=$("$HP" record --print-config --trace true 2>&1)
assert_match '^command: "true"$' "$out" "--trace CMD"
rc=0
out=$("$HP" record --trace=circular true 2>&1) || rc=$?
assert_eq "2|heapprof: record: invalid --trace 'circular': use streaming, oneshot or ring" \
	"$rc|$out" "bad mode"
rc=0
out=$("$HP" record --trace --trace-buffer 1000 true 2>&1) || rc=$?
assert_eq 2 "$rc" "small buffer: exit status"
assert_match "invalid --trace-buffer '1000': out of range: 65536 to 17179869184" "$out" "small buffer"
rc=0
out=$("$HP" record --trace-buffer 65536 true 2>&1) || rc=$?
assert_eq 2 "$rc" "buffer without trace: exit status"
assert_match "needs trace_mode \(--trace\)" "$out" "buffer without trace"
assert_match "--trace\[=MODE\]" "$("$HP" record --help)" "usage"

t_summary
