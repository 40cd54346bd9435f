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
# Every query through heapprof sql: heapprof_event is a virtual table over
# the trace's chunks.
q() { hpq "$@"; }

TK="$PROGS/trace_known"

# Events whose stack resolves to a callsite whose leaf frame is FUNC (the
# join of the heapprof_event_callsite view, on heapprof_event itself so
# that e.rowid is the event's position order).
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
# to_rows NEW ROWS: a copy of profile NEW whose trace is a table of rows, as
# profiles were written before the compressed chunks: its events exported
# through heapprof sql, the virtual table's schema entry removed (sqlite3
# has no such module), the table of rows made and filled in order.
to_rows() {
	cp "$1" "$2" &&
		"$HP" sql "$1" '.headers off' '.mode csv' "SELECT upid, ts, kind, tid,
		  address, size, charged, heap_name, stack_key, alloc_ts
		  FROM heapprof_event ORDER BY rowid" >"$2.csv" &&
		sqlite3 "$2" "PRAGMA writable_schema = ON;
		  DELETE FROM sqlite_master WHERE name = 'heapprof_event';" &&
		sqlite3 "$2" "DROP VIEW heapprof_event_callsite;
		  DROP TABLE heapprof_event_chunk; DROP TABLE heapprof_event_heap;
		  CREATE TABLE heapprof_event(upid INT, ts INT, kind TEXT, tid INT,
		  address INT, size INT, charged INT, heap_name TEXT, stack_key INT,
		  alloc_ts INT);" ".import --csv $2.csv heapprof_event" \
			"UPDATE heapprof_event SET alloc_ts = NULL WHERE alloc_ts = '';
		  CREATE VIEW heapprof_event_callsite AS SELECT e.*, s.callsite_id
		  FROM heapprof_event e LEFT JOIN heapprof_trace_stack s
		  ON s.upid = e.upid AND s.stack_key = e.stack_key;
		  CREATE INDEX heapprof_event_upid_ts ON heapprof_event(upid, ts);
		  VACUUM;" >/dev/null
}

t_begin "storage: compressed chunks, read as heapprof_event rows; a profile with the table of rows reads the same"
DB="$T_DIR/s.db"
if [ -s "$DB" ]; then
	# Every event in a chunk; the chunks' counts are the rows'.
	assert_eq "$(q "$DB" "SELECT count(*), count(CASE WHEN kind = 'alloc' THEN 1 END) FROM heapprof_event;")" \
		"$(sqlq "$DB" "SELECT sum(events), sum(allocs) FROM heapprof_event_chunk;")" \
		"heapprof_event_chunk: events, allocations"
	# With -i 1 and nothing dropped, the allocations of the trace are
	# every allocation the dumps counted, exactly.
	assert_eq "$(sqlq "$DB" "SELECT sum(count) || '|' || sum(size) FROM heap_profile_allocation WHERE count > 0;")" \
		"$(q "$DB" "SELECT count(*), sum(size) FROM heapprof_event WHERE kind = 'alloc';")" \
		"SELECT count(*), sum(size) FROM heapprof_event WHERE kind = 'alloc'"
	assert_eq "0" "$(q "$DB" "SELECT count(*) FROM heapprof_event WHERE kind = 'free'
	  AND (alloc_ts IS NULL OR alloc_ts > ts OR size IS NULL);")" "frees carry their block's allocation"
	# The rowid numbers the events in order; ts constraints narrow.
	total=$(q "$DB" "SELECT count(*) FROM heapprof_event;")
	assert_eq "1|$total|$total" "$(q "$DB" "SELECT min(rowid), max(rowid), count(DISTINCT rowid) FROM heapprof_event;")" \
		"rowids 1..N"
	mid=$(q "$DB" "SELECT ts FROM heapprof_event WHERE rowid = $((total / 2));")
	assert_eq "$(q "$DB" "SELECT count(*) FROM (SELECT ts FROM heapprof_event) WHERE ts >= $mid;")" \
		"$(q "$DB" "SELECT count(*) FROM heapprof_event WHERE ts >= $mid;")" "a ts constraint gives the same rows"
	# sqlite3 alone: the other tables, and a plain message for the events.
	out=$(sqlite3 -readonly "$DB" "SELECT count(*) FROM heapprof_event;" 2>&1)
	assert_match "no such module: heapprof_events" "$out" "sqlite3: heapprof_event needs heapprof's module"
	assert_eq "$total" "$(sqlq "$DB" "SELECT sum(events) FROM heapprof_event_chunk;")" "sqlite3 reads the chunk table"
	# The same profile with the older table of rows: every command reads
	# it to the same output.
	# (The same file name, in another directory: the outputs name it.)
	mkdir -p "$T_DIR/rows"
	RDB="$T_DIR/rows/s.db"
	if to_rows "$DB" "$RDB"; then
		assert_eq "$total" "$(sqlq "$RDB" "SELECT count(*) FROM heapprof_event;")" "rows form: every event"
		assert_eq "$(q "$DB" "SELECT group_concat(h, '') FROM (SELECT kind || ts || tid || address || size
		  || charged || heap_name || stack_key || coalesce(alloc_ts, 'N') AS h FROM heapprof_event ORDER BY rowid);" | md5sum)" \
			"$(sqlq "$RDB" "SELECT group_concat(h, '') FROM (SELECT kind || ts || tid || address || size
		  || charged || heap_name || stack_key || coalesce(alloc_ts, 'N') AS h FROM heapprof_event ORDER BY rowid);" | md5sum)" \
			"rows form: every column of every event, in order"
		for form in "$T_DIR" "$T_DIR/rows"; do
			(cd "$form" && run_bounded 120 "$HP" report s.db >rep.txt 2>&1 &&
				run_bounded 120 "$HP" pprof s.db -o w.pb.gz --from 0 --to 10s >/dev/null 2>&1 &&
				run_bounded 120 "$HP" flamegraph s.db -o fg.html >/dev/null 2>&1 &&
				run_bounded 120 "$HP" flamegraph s.db -o fgw.html --from 1ms --to 10s >/dev/null 2>&1) ||
				t_fail "report, pprof or flamegraph failed in $form"
		done
		assert_eq "$(md5sum <"$T_DIR/rep.txt")" "$(md5sum <"$T_DIR/rows/rep.txt")" "report: the same on both forms"
		assert_eq "$(cat "$T_DIR"/w*.pb.gz | zcat | md5sum)" "$(cat "$T_DIR"/rows/w*.pb.gz | zcat | md5sum)" \
			"pprof --from/--to: the same on both forms"
		assert_eq "$(md5sum <"$T_DIR/fg.html")" "$(md5sum <"$T_DIR/rows/fg.html")" "flamegraph: the same on both forms"
		assert_eq "$(md5sum <"$T_DIR/fgw.html")" "$(md5sum <"$T_DIR/rows/fgw.html")" \
			"flamegraph --from/--to: the same on both forms"
	else
		t_fail "could not make the rows form"
	fi
fi

# ---------------------------------------------------------------------------
t_begin "streaming, a million allocations, default buffer: no event lost"
# ll_burst makes N allocations of 48 B, freeing 9 in 10 at once: about
# 1.9 million events, twice what the 64 MiB buffer holds, so the session
# must store them while the program runs.
# A collector built with ASan or TSan runs several times slower than the
# one users get, so there the program waits for room (--block-client):
# what is checked then is that every event is stored, not the speed.
N=1000000
DB="$T_DIR/m.db"
block=()
if nm -D "$HP" 2>/dev/null | grep -q '__asan_init\|__tsan_init' ||
	nm "$HP" 2>/dev/null | grep -q '__asan_init\|__tsan_init'; then
	block=(--block-client)
	t_note "a sanitizer build: --block-client"
fi
hp_record m -i 1 --trace streaming "${block[@]}" -o "$DB" "$PROGS/ll_burst" - - "$N"
assert_eq 0 "$REC_RC" "record exit status" || show_err m
if db_valid "$DB"; then
	IFS='|' read -r da df inc <<<"$(sqlq "$DB" "SELECT dropped_allocs, dropped_frees, incomplete FROM heapprof_trace;")"
	assert_eq "0 0 0" "$da $df $inc" "nothing dropped or incomplete"
	# (One more free: the realloc that moves a kept block.)
	assert_eq "$N|$((N - N / 10 + 1))" "$(q "$DB" "SELECT count(CASE WHEN e.kind = 'alloc' THEN 1 END),
	  count(CASE WHEN e.kind = 'free' THEN 1 END) $(ev_of ll_burst_alloc | sed 's/^/ /');")" \
		"ll_burst_alloc: every allocation and free"
	check_accounted m "$DB"
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
	  FROM heapprof_dump WHERE reason != 'peak' ORDER BY ts;")" "dumps (beside the peak's)"
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
