#!/usr/bin/env bash
# test_trace_report.sh BUILD: what heapprof makes of an event trace
# (record --trace): leaks and temporary allocations in `heapprof report`,
# `heapprof pprof --from/--to` and the timeline of `heapprof flamegraph`,
# on progs/trace_pattern, whose pattern is known:
#
#   leak_some       7 blocks of 7777 B never freed             (leaks)
#   temp_churn      3000 blocks of 4321 B, each freed at once   (temporary)
#   keep_then_free  5 blocks of 5555 B freed after the program slept 60 ms
#
# The program writes the CLOCK_BOOTTIME of its phase boundaries to a file,
# so windows are exact: a window that holds one phase holds exactly that
# phase's allocations.  Then ring and oneshot runs with a small buffer:
# the report says what they left out, and the leaks stay exact.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/trace_pattern"

LEAK_N=7 LEAK_B=54439   # 7 x 7777
TEMP_N=3000 TEMP_B=12963000 # 3000 x 4321
KEEP_N=5 KEEP_B=27775   # 5 x 5555

# trace_row REPORT SECTION FUNC: "V1 V2" of FUNC's row in the report's table
# whose heading matches SECTION ("leaks in heap libc.malloc", "temporary
# allocations in heap libc.malloc"); byte values as exact numbers; nothing
# if FUNC has no row.  Rows: RANK  V1  PCT%  V2  FUNCTION  MODULE.
trace_row() {
	awk -v sec="$2" -v fn="$3" '
	function exact(s) {
		if (match(s, /\(-?[0-9]+ B\)/)) return substr(s, RSTART + 1, RLENGTH - 4)
		gsub(/^ +| +$/, "", s)
		sub(/ B$/, "", s)
		return s
	}
	/^  Top [0-9]+ / { insec = index($0, sec) > 0; next }
	/^  [A-Z]/ { insec = 0 }
	insec && /^ +[0-9]+  / {
		line = $0
		if (!match(line, / -?[0-9.]+% +/)) next
		head = substr(line, 1, RSTART - 1)
		rest = substr(line, RSTART + RLENGTH)
		sub(/^ *[0-9]+ +/, "", head)
		n = split(rest, part, /  +/)
		if (part[2] != fn) next
		print exact(head) " " exact(part[1])
		exit
	}' "$1"
}

# rank_of REPORT SECTION FUNC: FUNC's rank in that table.
rank_of() {
	awk -v sec="$2" -v fn="$3" '
	/^  Top [0-9]+ / { insec = index($0, sec) > 0; next }
	/^  [A-Z]/ { insec = 0 }
	insec && /^ +[0-9]+  / && index($0, "  " fn "  ") { print $1; exit }' "$1"
}

# Frees of function FN's blocks (by the allocation's leaf frame) in DB,
# with COND on the events e.
fn_events() {
	hpq "$1" "SELECT count(*) FROM heapprof_event_callsite e
	  JOIN stack_profile_callsite c ON c.id = e.callsite_id
	  JOIN stack_profile_frame f ON f.id = c.frame_id
	  WHERE f.name = '$2' AND ${3:-1};"
}

# top_total TAG: the total the -top header of $T_DIR/TAG.top names.
top_total() {
	sed -n 's/.* of \([0-9.]*\)B\{0,1\} total.*/\1/p' "$T_DIR/$1.top" | head -n 1
}
# window TAG FROM TO: pprof of that window ("" = bound not given); then the
# flat values of FUNC in each sample type via check_window.
window() {
	local tag=$1 args=()
	[ -n "$2" ] && args+=(--from "$2")
	[ -n "$3" ] && args+=(--to "$3")
	hp_cmd "$tag" pprof "$SDB" "${args[@]}" -o "$T_DIR/$tag.pb.gz"
	assert_eq 0 "$CMD_RC" "pprof ${args[*]} ($(head -c 300 "$T_DIR/$tag.err"))"
}
# check_window TAG FUNC ALLOC_OBJECTS ALLOC_SPACE OBJECTS SPACE: FUNC's
# values, each also the total of the file (nothing else in the window).
check_window() {
	local tag=$1 fn=$2 si want got
	shift 2
	for si in alloc_objects alloc_space objects space; do
		want=$1
		shift
		pprof_top "$tag.$si" "$T_DIR/$tag.pb.gz" "$si" || continue
		got=$(top_flat "$T_DIR/$tag.$si.top" "$fn")
		[ "$want" = 0 ] && [ -z "$got" ] && got=0
		assert_eq "$want" "$got" "$tag: $si of $fn"
		assert_eq "$want" "$(top_total "$tag.$si")" "$tag: total $si (only $fn in the window)"
	done
}

# ---------------------------------------------------------------------------
SDB="$T_DIR/stream.db"
MARKS="$T_DIR/marks"
t_begin "record trace_pattern -i 1 --trace streaming"
hp_record stream -i 1 --trace streaming -o "$SDB" -- "$PROGS/trace_pattern" "$MARKS"
assert_eq 0 "$REC_RC" "heapprof record exit status" || show_err stream
db_valid "$SDB" || t_summary
assert_eq 5 "$(wc -l <"$MARKS" | tr -d ' ')" "the program wrote its 5 phase marks"
START=$(sqlq "$SDB" "SELECT start_ts FROM process;")
# mark NAME: the time of mark NAME since the process's recorded start, as
# --from/--to take it (negative when the program got there before the
# collector recorded the start).
mark() { awk -v k="$1" '$1 == k { printf "%.0fns\n", $2 - s }' s="$START" "$MARKS"; }
# Every phase's events, exact in streaming (nothing dropped).
assert_eq "$LEAK_N 0" "$(fn_events "$SDB" leak_some "e.kind = 'alloc'") $(fn_events "$SDB" leak_some "e.kind = 'free'")" "leak_some's events"
assert_eq "$TEMP_N $TEMP_N" "$(fn_events "$SDB" temp_churn "e.kind = 'alloc'") $(fn_events "$SDB" temp_churn "e.kind = 'free'")" "temp_churn's events"
assert_eq "$KEEP_N $KEEP_N" "$(fn_events "$SDB" keep_then_free "e.kind = 'alloc'") $(fn_events "$SDB" keep_then_free "e.kind = 'free'")" "keep_then_free's events"
EVENTS=$(hpq "$SDB" "SELECT count(*) FROM heapprof_event;")
ALLOCS=$(hpq "$SDB" "SELECT count(*) FROM heapprof_event WHERE kind = 'alloc';")
FREES=$((EVENTS - ALLOCS))

t_begin "report: the trace line says streaming, complete"
hp_cmd rep report "$SDB"
R="$T_DIR/rep.out"
assert_eq 0 "$CMD_RC" "report exit status ($(head -c 300 "$T_DIR/rep.err"))"
assert_match "^  trace          streaming, 64.00 MiB buffer: $EVENTS events kept \($ALLOCS allocations, $FREES frees\); complete: nothing left out\$" "$(cat "$R")" "trace line"
assert_no_match 'trace is incomplete' "$(cat "$R")" "no incompleteness warning"

t_begin "report: leaks = leak_some's 7 blocks, exact, on top"
assert_match '^  Leaks: allocations still live at exit, from the final dump.s live blocks \(exact\)$' "$(cat "$R")" "leaks heading"
BLOCKS=$(sqlq "$SDB" "SELECT count(*) || ' ' || sum(charged) FROM heapprof_block WHERE dump_id = (SELECT max(id) FROM heapprof_dump);")
assert_eq "$LEAK_N $LEAK_B" "$BLOCKS" "the final dump's blocks are leak_some's"
assert_match "^    heap libc.malloc    $LEAK_N blocks, 53.16 KiB \($LEAK_B B\)\$" "$(cat "$R")" "leak totals"
assert_eq "$LEAK_B $LEAK_N" "$(trace_row "$R" "leaks in heap libc.malloc" leak_some)" "leak_some: bytes and blocks"
assert_eq 1 "$(rank_of "$R" "leaks in heap libc.malloc" leak_some)" "leak_some on top"
assert_eq "" "$(trace_row "$R" "leaks in heap libc.malloc" keep_then_free)" "keep_then_free freed everything"
assert_eq "" "$(trace_row "$R" "leaks in heap libc.malloc" temp_churn)" "temp_churn freed everything"

t_begin "report: temporaries (default 1 ms) = temp_churn's 3000"
assert_match '^  Temporary allocations: freed at most 1 ms after they were made \(--temporary-threshold\), from the trace$' "$(cat "$R")" "heading names the threshold"
# The report against the events themselves: always exact.
SQL_TMP=$(hpq "$SDB" "SELECT count(*) FROM heapprof_event WHERE kind = 'free' AND ts - alloc_ts <= 1000000;")
assert_match "^    heap libc.malloc    $SQL_TMP of $ALLOCS allocations " "$(cat "$R")" "temporary count of all allocations"
# temp_churn frees right after each malloc; only a machine that stalls the
# program for over 1 ms between the two can make one longer (not asserted:
# timing; the threshold of 50 ms below is).
SLOW=$(fn_events "$SDB" temp_churn "e.kind = 'free' AND e.ts - e.alloc_ts > 1000000")
if [ "$SLOW" = 0 ]; then
	assert_eq "$TEMP_N" "$SQL_TMP" "every temporary is temp_churn's"
	assert_eq "$TEMP_N $TEMP_B" "$(trace_row "$R" "temporary allocations in heap libc.malloc" temp_churn)" "temp_churn: count and bytes"
else
	t_note "$SLOW of temp_churn's blocks lived over 1 ms (a stalled machine)"
	assert_eq "$((TEMP_N - SLOW))" "$(trace_row "$R" "temporary allocations in heap libc.malloc" temp_churn | cut -d' ' -f1)" "temp_churn: count"
fi
assert_eq 1 "$(rank_of "$R" "temporary allocations in heap libc.malloc" temp_churn)" "temp_churn on top"
assert_eq "" "$(trace_row "$R" "temporary allocations in heap libc.malloc" keep_then_free)" "keep_then_free's blocks lived 60 ms"
assert_eq "" "$(trace_row "$R" "temporary allocations in heap libc.malloc" leak_some)" "leak_some's blocks were never freed"

t_begin "report --temporary-threshold: 50ms keeps keep_then_free out, 1s takes it in"
hp_cmd rep50 report "$SDB" --temporary-threshold 50ms
assert_eq 0 "$CMD_RC" "report exit status"
assert_match 'freed at most 50 ms after' "$(cat "$T_DIR/rep50.out")" "heading"
assert_eq "$TEMP_N $TEMP_B" "$(trace_row "$T_DIR/rep50.out" "temporary allocations in heap libc.malloc" temp_churn)" "temp_churn: all 3000"
assert_eq "" "$(trace_row "$T_DIR/rep50.out" "temporary allocations in heap libc.malloc" keep_then_free)" "keep_then_free: slept 60 ms"
hp_cmd rep1s report "$SDB" --temporary-threshold 1s
assert_eq "$KEEP_N $KEEP_B" "$(trace_row "$T_DIR/rep1s.out" "temporary allocations in heap libc.malloc" keep_then_free)" "keep_then_free within 1 s"
expect_error rep-bad 2 "^heapprof: report: invalid --temporary-threshold '5'" report "$SDB" --temporary-threshold 5

t_begin "report of a profile without a trace: no trace sections"
NDB="$T_DIR/notrace.db"
hp_record notrace -i 1 -o "$NDB" -- "$PROGS/trace_pattern" "$T_DIR/marks.notrace"
assert_eq 0 "$REC_RC" "record without --trace" || show_err notrace
hp_cmd repn report "$NDB"
assert_eq 0 "$CMD_RC" "report exit status"
assert_no_match '^  (trace  |Leaks:|Temporary allocations)' "$(cat "$T_DIR/repn.out")" "unchanged report"

# ---------------------------------------------------------------------------
t_begin "pprof --from/--to: a window holding one phase has exactly that phase"
if [ "$GO_OK" != 1 ]; then
	t_skip "go is missing (scripts/deps.sh --test installs golang-go)"
else
	# From the trace's start: nothing allocates before leak_some.
	window leak "" "$(mark leak_end)"
	check_window leak leak_some "$LEAK_N" "$LEAK_B" "$LEAK_N" "$LEAK_B"
	window temp "$(mark leak_end)" "$(mark temp_end)"
	check_window temp temp_churn "$TEMP_N" "$TEMP_B" 0 0
	window keep "$(mark temp_end)" "$(mark keep_alloc_end)"
	check_window keep keep_then_free "$KEEP_N" "$KEEP_B" "$KEEP_N" "$KEEP_B"
	window kept "$(mark temp_end)" "$(mark keep_end)"
	check_window kept keep_then_free "$KEEP_N" "$KEEP_B" 0 0
	# Open bounds: from the start; to the end of the trace.
	window tail "$(mark temp_end)" ""
	check_window tail keep_then_free "$KEEP_N" "$KEEP_B" 0 0
	gopprof -comments "$T_DIR/temp.pb.gz" >"$T_DIR/temp.comments"
	assert_match '^heapprof profile .*, heap libc.malloc, window [-+][0-9.]+ s to [-+][0-9.]+ s since the process started$' "$(cat "$T_DIR/temp.comments")" "comment: the window"
	assert_match '^trace: streaming, complete' "$(cat "$T_DIR/temp.comments")" "comment: the trace was complete"
	assert_match "^wrote .*temp.pb.gz: process [0-9]+, heap libc.malloc, window [-+][0-9.]+ s to [-+][0-9.]+ s, 1 samples\$" "$(cat "$T_DIR/temp.out")" "what pprof says it wrote"
fi

t_begin "pprof --from/--to: errors"
expect_error pp-order 2 "^heapprof: pprof: --from 2 s is not before --to 1 s$" pprof "$SDB" --from 2s --to 1s
expect_error pp-same 2 "is not before" pprof "$SDB" --from 1s --to 1000ms
expect_error pp-unit 2 "^heapprof: pprof: invalid --from '1.5'" pprof "$SDB" --from 1.5
expect_error pp-all 2 "^heapprof: pprof: --from/--to and --dump/--all exclude each other$" pprof "$SDB" --to 1s --all
expect_error pp-notrace 1 "^heapprof: pprof: .*notrace.db: --from/--to need an event trace \(heapprof record --trace\), and this profile has none$" \
	pprof "$NDB" --to 1s -o "$T_DIR/nt.pb.gz"
[ -e "$T_DIR/nt.pb.gz" ] && t_fail "a file was written for a profile without a trace"
expect_error fg-notrace 1 "^heapprof: flamegraph: .*need an event trace" flamegraph "$NDB" --from 0 -o "$T_DIR/nt.html"
[ -e "$T_DIR/nt.html" ] && t_fail "a page was written for a profile without a trace"

# ---------------------------------------------------------------------------
# page_data PAGE EXPR: EXPR (JavaScript, of the page's data D) printed by node.
page_data() {
	timeout -k 5 60 node -e '
	  const html = require("fs").readFileSync(process.argv[1], "utf8");
	  const open = "<script type=\"application/json\" id=\"hp-data\">";
	  const s = html.indexOf(open), e = html.indexOf("</script>", s);
	  const D = JSON.parse(html.slice(s + open.length, e));
	  console.log(eval(process.argv[2]));' "$1" "$2" 2>&1
}
HAVE_NODE=0
command -v node >/dev/null 2>&1 && HAVE_NODE=1

t_begin "flamegraph: the timeline of live bytes from the trace"
hp_cmd fg flamegraph "$SDB" -o "$T_DIR/stream.html"
assert_eq 0 "$CMD_RC" "flamegraph exit status ($(head -c 300 "$T_DIR/fg.err"))"
PAGE="$T_DIR/stream.html"
if [ "$HAVE_NODE" != 1 ]; then
	t_skip "node is missing"
else
	assert_eq "streaming 1 $EVENTS start" "$(page_data "$PAGE" 'const t = D.procs[0].trace; [t.mode, t.complete, t.events, t.anchor].join(" ")')" "trace info"
	TL='D.procs[0].heaps[0].timeline'
	assert_eq 400 "$(page_data "$PAGE" "$TL.live.length")" "400 points"
	assert_eq "$LEAK_B" "$(page_data "$PAGE" "$TL.live[$TL.live.length - 1]")" "ends at the leaks"
	# The highest: the leaks and keep_then_free's blocks while it slept.
	assert_eq "$((LEAK_B + KEEP_B))" "$(page_data "$PAGE" "Math.max(...$TL.peak)")" "the highest live bytes"
	# A complete streaming trace counts up from 0 at its start (whether
	# the first bucket already holds an allocation depends on timing).
	assert_eq 0 "$(page_data "$PAGE" "$TL.base")" "starts from nothing"
fi

t_begin "flamegraph --from/--to: the window's graph"
hp_cmd fgw flamegraph "$SDB" -o "$T_DIR/win.html" --from "$(mark temp_end)" --to "$(mark keep_alloc_end)"
assert_eq 0 "$CMD_RC" "flamegraph exit status ($(head -c 300 "$T_DIR/fgw.err"))"
if [ "$HAVE_NODE" = 1 ]; then
	F=$(timeout -k 5 60 node "$HERE/../browser/fg_folded.js" "$T_DIR/win.html" space 2>&1)
	assert_match "(^|;)main;keep_then_free $KEEP_B\$" "$F" "space: keep_then_free's blocks"
	assert_eq "$KEEP_B" "$(printf '%s\n' "$F" | awk '{ s += $NF } END { print s }')" "nothing else"
	F=$(timeout -k 5 60 node "$HERE/../browser/fg_folded.js" "$T_DIR/win.html" alloc_objects 2>&1)
	assert_eq "$KEEP_N" "$(printf '%s\n' "$F" | awk '{ s += $NF } END { print s }')" "alloc_objects"
	assert_eq "${START}" "$(page_data "$T_DIR/win.html" "D.procs[0].dumps[0].ts - D.procs[0].window.to")" "the window's dump is at its end"
fi
expect_error fg-order 2 "^heapprof: flamegraph: --from 2 s is not before --to 1 s$" flamegraph "$SDB" --from 2s --to 1s

t_begin "flamegraph: the timeline drawn in headless Chromium"
if ! command -v chromium >/dev/null 2>&1; then
	t_skip "chromium is missing"
else
	# dom PAGE: the page's DOM once its script ran; the timeline's tag.
	dom() {
		timeout -k 5 90 chromium --headless=new --no-sandbox --disable-gpu \
			--user-data-dir="$T_DIR/chromium" --window-size=1400,1000 \
			--dump-dom "file://$1" 2>/dev/null | grep -o '<canvas id="timeline"[^>]*>\|<body[^>]*>'
	}
	D=$(dom "$PAGE")
	assert_match 'data-ready="1"' "$D" "the page rendered"
	assert_match 'data-source="trace"' "$D" "drawn from the trace"
	assert_match 'data-points="401"' "$D" "every point (and the start)"
	assert_match "data-max=\"$((LEAK_B + KEEP_B))\"" "$D" "its highest point"
	assert_match "data-final=\"$LEAK_B\"" "$D" "its last point"
	D=$(dom "$T_DIR/win.html")
	assert_match 'data-ready="1"' "$D" "the window page rendered"
	assert_match 'data-window="[0-9]+,[0-9]+"' "$D" "the window on the chart"
	hp_cmd fgn flamegraph "$NDB" -o "$T_DIR/notrace.html"
	D=$(dom "$T_DIR/notrace.html")
	assert_match 'data-source="samples"' "$D" "without a trace: from the session's samples"
	assert_match 'data-rss="[1-9][0-9]*"' "$D" "without a trace: the RSS curve"
	# A profile without the counter tables' rows (written before them):
	# a line through the dumps.
	cp "$NDB" "$T_DIR/nocurve.db"
	sqlite3 "$T_DIR/nocurve.db" "DELETE FROM counter; DELETE FROM process_counter_track;"
	hp_cmd fgc flamegraph "$T_DIR/nocurve.db" -o "$T_DIR/nocurve.html"
	D=$(dom "$T_DIR/nocurve.html")
	assert_match 'data-source="dumps"' "$D" "without a trace or samples: from the dumps"
	assert_match 'data-rss="0"' "$D" "without samples: no RSS curve"
fi

# ---------------------------------------------------------------------------
for mode in ring oneshot; do
	t_begin "$mode with a 64 KiB buffer: the report says what was left out"
	MDB="$T_DIR/$mode.db"
	hp_record "$mode" -i 1 --trace "$mode" --trace-buffer 65536 -o "$MDB" -- "$PROGS/trace_pattern" "$T_DIR/marks.$mode"
	assert_eq 0 "$REC_RC" "record --trace $mode" || show_err "$mode"
	hp_cmd "rep-$mode" report "$MDB"
	R="$T_DIR/rep-$mode.out"
	assert_eq 0 "$CMD_RC" "report exit status"
	KEPT=$(hpq "$MDB" "SELECT count(*) FROM heapprof_event;")
	assert_eq 1024 "$KEPT" "64 KiB holds 1024 events"
	LEFT=$(sqlq "$MDB" "SELECT dropped_allocs + dropped_frees + overwritten FROM heapprof_trace;")
	# The same program makes the same events: kept + left out = all.
	assert_eq "$EVENTS" "$((KEPT + LEFT))" "kept and left out add up to the streaming run's events"
	if [ "$mode" = ring ]; then
		assert_match "^  trace          ring, 64.00 KiB buffer: the newest 1024 events kept \([0-9]+ allocations, [0-9]+ frees, from [-+][0-9.]+ s\); $LEFT older events overwritten\$" "$(cat "$R")" "ring: the newest kept, the older overwritten"
	else
		DA=$(sqlq "$MDB" "SELECT dropped_allocs FROM heapprof_trace;")
		assert_match "^  trace          oneshot, 64.00 KiB buffer: 1024 events kept \([0-9]+ allocations, [0-9]+ frees\); the buffer filled at [-+][0-9.]+ s; $DA allocations \([0-9.]+ [KM]iB\) and [0-9]+ frees \([0-9.]+ [KM]iB\) left out \(made after it filled\)\$" "$(cat "$R")" "oneshot: when it filled, what it left out"
	fi
	assert_match "^  warning: the trace is incomplete \($LEFT events left out\): the temporary allocations below count only the events kept and are lower bounds" "$(cat "$R")" "what it means for the numbers"
	assert_match 'from the trace \(incomplete: lower bounds\)$' "$(cat "$R")" "temporaries: lower bounds"
	# Leaks come from the final dump's blocks: exact whatever the trace.
	assert_match "^    heap libc.malloc    $LEAK_N blocks, 53.16 KiB \($LEAK_B B\)\$" "$(cat "$R")" "leaks still exact"
	assert_eq "$LEAK_B $LEAK_N" "$(trace_row "$R" "leaks in heap libc.malloc" leak_some)" "leak_some"
done

t_begin "ring: pprof and the timeline say the trace is incomplete"
if [ "$GO_OK" = 1 ]; then
	hp_cmd ringpp pprof "$T_DIR/ring.db" --to 1s -o "$T_DIR/ring.pb.gz"
	assert_eq 0 "$CMD_RC" "pprof of the ring ($(head -c 300 "$T_DIR/ringpp.err"))"
	assert_match '\(trace incomplete\)' "$(cat "$T_DIR/ringpp.out")" "says so when writing"
	gopprof -comments "$T_DIR/ring.pb.gz" >"$T_DIR/ring.comments"
	assert_match '^trace: ring, INCOMPLETE: [0-9]+ events left out .*; the events kept start at [-+][0-9.]+ s' "$(cat "$T_DIR/ring.comments")" "comment"
fi
if [ "$HAVE_NODE" = 1 ]; then
	hp_cmd ringfg flamegraph "$T_DIR/ring.db" -o "$T_DIR/ring.html"
	assert_eq "ring 0 end" "$(page_data "$T_DIR/ring.html" 'const t = D.procs[0].trace; [t.mode, t.complete, t.anchor].join(" ")')" "trace info"
	# Counted back from the final dump: it ends at the leaks.
	assert_eq "$LEAK_B" "$(page_data "$T_DIR/ring.html" 'const l = D.procs[0].heaps[0].timeline.live; l[l.length - 1]')" "ends at the leaks"
fi

t_summary
