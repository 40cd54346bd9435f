#!/bin/bash
# The peak and memory over time, by default (issue 33).  progs/peak_holder
# holds 20 MiB early (load_cache 15 x 1 MiB, load_index 5 x 1 MiB, both
# through peak_holder), frees it, churns 64-byte blocks for 0.6 s and
# keeps 256 KiB (keep_at_exit) to its exit.
#
#   default     record with no option: a "peak" dump (at_max, 20 MiB, its
#               stacks the peak's) before the end dump; the report's first
#               lines give the peak, peak_holder and what was left at exit;
#               --dump peak --callers peak_holder shows both callers; the
#               counter tables hold ten points a second of the run; on a
#               terminal record says the peak when it ends
#   exact       -i 1 with the live table's log (the collector follows the
#               peak), without it (the program does), and with a thread
#               (the program takes the table back from the log and goes on
#               from the collector's peak): the peak's views exact
#   periodic    --dump-interval while the heap rises: one peak dump (each
#               higher one folds the one before into the dump after it),
#               the dumps in the order of their times, each exact
#   off         --no-peak: one dump, no peak line, --dump peak refused;
#               --dump-at-max as before (every dump at the peak)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
PH="$PROGS/peak_holder"
t_require "$HP" "$BUILD/libheapprof.so" "$PH"
unset LD_PRELOAD
unset HEAPPROF_LIVE_LOG
MIB=1048576

stat_of() { # DB NAME: a process counter of the profile
	sqlq "$1" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$2';"
}
peak_ts() { # DB: the time of the last peak dump
	sqlq "$1" "SELECT ts FROM heapprof_dump WHERE reason = 'peak' ORDER BY ts DESC, id DESC LIMIT 1;"
}
# peak_exact TAG DB [PEAK]: the peak dump holds the 20 blocks of
# peak_holder, all live, and its stacks add up to the peak, PEAK bytes
# (default 20 MiB: nothing else was live then).
peak_exact() {
	local db=$2 ts peak=${3:-$((20 * MIB))}
	ts=$(peak_ts "$db")
	assert_match "^[0-9]+$" "$ts" "$1: a peak dump"
	[ -n "$ts" ] || return
	check_views "$db" peak_holder 20 $((20 * MIB)) 20 $((20 * MIB)) "$ts"
	assert_eq "1|$peak" "$(sqlq "$db" "SELECT at_max, max_live_bytes FROM heapprof_dump WHERE ts = $ts;")" \
		"$1: the peak dump is at the peak, $peak B"
	assert_eq "$peak" "$(sqlq "$db" "SELECT sum(size) FROM heap_profile_allocation WHERE ts <= $ts;")" \
		"$1: its stacks add up to the peak"
}

# ---------------------------------------------------------------------------
t_begin "default: a peak dump beside the end's; the report leads with the peak; callers; ten points a second"
bare_run ph "$PH"
hp_record ph -o "$T_DIR/ph.db" -- "$PH"
assert_eq 0 "$REC_RC" "record's exit status"
assert_eq "$(cat "$T_DIR/ph.bare.out")" "$(cat "$T_DIR/ph.out")" "the program's output as bare"
if db_valid "$T_DIR/ph.db"; then
	DB="$T_DIR/ph.db"
	assert_eq "peak|1
end|0" "$(sqlq "$DB" "SELECT reason, at_max FROM heapprof_dump ORDER BY ts, id;")" "the dumps: the peak, then the end"
	peak_exact default "$DB"
	rc=0
	run_bounded 60 "$HP" report "$DB" >"$T_DIR/ph.report" 2>&1 || rc=$?
	assert_eq 0 "$rc" "report's exit status"
	assert_match "^Process [0-9]+ \(peak_holder\)$" "$(sed -n 1p "$T_DIR/ph.report")" "report line 1"
	assert_match "^  heap peak +20\.00 MiB at \+0\.[0-9]+ s, 100% in peak_holder \(--dump peak: dump 1 of 2\)$" \
		"$(sed -n 2p "$T_DIR/ph.report")" "report line 2: the peak and its function"
	# 256 KiB, and stdout's buffer when it was sampled.
	assert_match "^  left at exit +2[56][0-9.]+ KiB in [0-9]+ objects, (9[0-9]|100)% in keep_at_exit$" \
		"$(sed -n 3p "$T_DIR/ph.report")" "report line 3: left at exit"
	assert_match "^  churned +[0-9.]+ MiB in [0-9]+ allocations \(all, freed or not\), [0-9]+% in " \
		"$(sed -n 4p "$T_DIR/ph.report")" "report line 4: churned"
	check_views "$DB" keep_at_exit 4 262144 4 262144
	rc=0
	run_bounded 60 "$HP" report "$DB" --dump peak --callers peak_holder >"$T_DIR/ph.callers" 2>&1 || rc=$?
	assert_eq 0 "$rc" "report --callers' exit status"
	assert_match "callers of peak_holder: 20\.00 MiB \(20971520 B\) \(100\.0% of the heap\) on 2 stacks" \
		"$(cat "$T_DIR/ph.callers")" "--callers: peak_holder's total"
	assert_match "15\.00 MiB \(15728640 B\) +75\.0% +load_cache " "$(cat "$T_DIR/ph.callers")" "--callers: load_cache"
	assert_match "5\.00 MiB \(5242880 B\) +25\.0% +load_index " "$(cat "$T_DIR/ph.callers")" "--callers: load_index"
	# Memory over time: at least ten points a second of the process's
	# run, the heap's curve reaching the 20 MiB it held for 0.4 s.
	run_ms=$(sqlq "$DB" "SELECT (end_ts - start_ts) / 1000000 FROM process;")
	for tr in mem.heap mem.heap.libc.malloc mem.rss; do
		n=$(sqlq "$DB" "SELECT count(*) FROM counter c JOIN process_counter_track t ON t.id = c.track_id WHERE t.name = '$tr';")
		assert_ge "$n" $((run_ms / 100)) "$tr: ten points a second of the ${run_ms} ms run"
	done
	assert_eq $((20 * MIB)) "$(sqlq "$DB" "SELECT CAST(max(value) AS INT) FROM counter c JOIN process_counter_track t ON t.id = c.track_id WHERE t.name = 'mem.heap.libc.malloc';")" \
		"the heap's curve: 20 MiB at its highest"
	assert_eq 1 "$(sqlq "$DB" "SELECT max(value) > 20 * 1048576 FROM counter c JOIN process_counter_track t ON t.id = c.track_id WHERE t.name = 'mem.rss';")" \
		"the RSS curve: above the 20 MiB held"
	assert_eq "bytes|bytes" "$(sqlq "$DB" "SELECT group_concat(DISTINCT unit) || '|' || min(unit) FROM process_counter_track;")" "counter units"
	# The page's data: the peak dump marked at the peak (the page opens
	# on it: test_flamegraph.sh drives it), --dump picks another.
	rc=0
	run_bounded 60 "$HP" flamegraph "$DB" -o "$T_DIR/ph.html" >/dev/null 2>&1 || rc=$?
	assert_eq 0 "$rc" "flamegraph's exit status"
	assert_match '"reason":"peak","at_max":1' "$(cat "$T_DIR/ph.html")" "the page's data: the peak dump, at the peak"
	assert_no_match '"open":' "$(cat "$T_DIR/ph.html")" "no --dump: no dump named"
	rc=0
	run_bounded 60 "$HP" flamegraph "$DB" --dump end -o "$T_DIR/phe.html" >/dev/null 2>&1 || rc=$?
	assert_eq 0 "$rc" "flamegraph --dump end: exit status"
	assert_match '"open":1,' "$(cat "$T_DIR/phe.html")" "flamegraph --dump end: the page opens on dump 2"
	rc=0
	run_bounded 60 "$HP" flamegraph "$DB" --dump 3 -o "$T_DIR/ph3.html" >"$T_DIR/ph3.out" 2>&1 || rc=$?
	assert_eq 1 "$rc" "flamegraph --dump 3: exit status"
	assert_match "has 2 dumps; dump 3 is out of range$" "$(cat "$T_DIR/ph3.out")" "flamegraph --dump 3: the message"
	assert_eq no "$([ -e "$T_DIR/ph3.html" ] && echo yes || echo no)" "flamegraph --dump 3: no page"
fi

t_begin "default: on a terminal record says the peak and where, what was left at exit"
if command -v script >/dev/null 2>&1; then
	rc=0
	TERM=dumb run_bounded 120 script -qec "$HP record -o $T_DIR/tty.db -- $PH" /dev/null >"$T_DIR/tty.out" 2>&1 || rc=$?
	assert_eq 0 "$rc" "record on a terminal: exit status"
	assert_match "pid [0-9]+ \(peak_holder\): peak 20\.00 MiB at \+0\.[0-9]+ s, 100% in peak_holder; 2[56][0-9.]+ KiB left at exit, (9[0-9]|100)% in keep_at_exit" \
		"$(tr -d '\r' <"$T_DIR/tty.out")" "the summary line"
else
	t_skip "script (bsdutils) is not installed"
fi

# ---------------------------------------------------------------------------
t_begin "exact: -i 1 with the live table's log: the collector follows the peak"
hp_record i1 -i 1 -o "$T_DIR/i1.db" -- "$PH"
assert_eq 0 "$REC_RC" "record's exit status"
if db_valid "$T_DIR/i1.db"; then
	assert_match "^[1-9][0-9]*$" "$(stat_of "$T_DIR/i1.db" live_log_events)" "the log carried the events"
	peak_exact log "$T_DIR/i1.db"
	check_views "$T_DIR/i1.db" keep_at_exit 4 262144 4 262144
	if [ "$(stat_of "$T_DIR/i1.db" live_log_taken_back)" != 0 ]; then
		t_note "record fell behind; the program took its table back"
	fi
fi

t_begin "exact: -i 1 without the log (HEAPPROF_LIVE_LOG=0): the program follows the peak"
HEAPPROF_LIVE_LOG=0 hp_record i0 -i 1 -o "$T_DIR/i0.db" -- "$PH"
assert_eq 0 "$REC_RC" "record's exit status"
if db_valid "$T_DIR/i0.db"; then
	assert_eq 0 "$(stat_of "$T_DIR/i0.db" live_log_events)" "no log"
	peak_exact table "$T_DIR/i0.db"
fi

t_begin "exact: -i 1 with a thread: the program takes its table back and goes on from the collector's peak"
# The thread leaves a block of libc's live (its thread descriptor's): the
# peak is 20 MiB and that, the same with the log as without.
HEAPPROF_LIVE_LOG=0 hp_record it0 -i 1 -o "$T_DIR/it0.db" -- "$PH" thread
assert_eq 0 "$REC_RC" "record's exit status, without the log"
hp_record it -i 1 -o "$T_DIR/it.db" -- "$PH" thread
assert_eq 0 "$REC_RC" "record's exit status"
if db_valid "$T_DIR/it.db" && db_valid "$T_DIR/it0.db"; then
	assert_ne 0 "$(stat_of "$T_DIR/it.db" live_log_taken_back)" "the table taken back"
	want=$(sqlq "$T_DIR/it0.db" "SELECT max_live_bytes FROM heapprof_dump WHERE reason = 'peak' ORDER BY ts DESC LIMIT 1;")
	assert_ge "$want" $((20 * MIB)) "without the log: the peak"
	peak_exact thread "$T_DIR/it.db" "$want"
fi

# ---------------------------------------------------------------------------
t_begin "periodic: --dump-interval -i 1: one peak dump (each higher one folds the one before), in time order, every dump exact"
# "slow": the heap rises over 0.6 s, through a dozen dumps, each with a
# higher peak than the one before.
hp_record pd -i 1 --dump-interval 50 -o "$T_DIR/pd.db" -- "$PH" slow
assert_eq 0 "$REC_RC" "record's exit status"
if db_valid "$T_DIR/pd.db"; then
	DB="$T_DIR/pd.db"
	assert_eq 0 "$(sqlq "$DB" "SELECT count(*) FROM heapprof_dump a JOIN heapprof_dump b ON b.upid = a.upid AND b.id > a.id WHERE b.ts <= a.ts;")" \
		"no dump before an earlier-written one"
	assert_ge "$(sqlq "$DB" "SELECT count(*) FROM heapprof_dump WHERE reason = 'periodic';")" 10 "periodic dumps"
	assert_eq 1 "$(sqlq "$DB" "SELECT count(*) FROM heapprof_dump WHERE reason = 'peak';")" "one peak dump"
	assert_eq end "$(sqlq "$DB" "SELECT reason FROM heapprof_dump ORDER BY ts DESC, id DESC LIMIT 1;")" "the last dump: the end"
	peak_exact periodic "$DB"
	assert_eq $((20 * MIB)) "$(sqlq "$DB" "SELECT max_live_bytes FROM heapprof_process;")" "the process's peak"
	# The folded peaks' rows went to the dumps after them: the state at
	# every dump is what the program held then, exact at the end.
	check_views "$DB" peak_holder 20 $((20 * MIB)) 0 0
	check_views "$DB" keep_at_exit 4 262144 4 262144
	assert_eq 0 "$(sqlq "$DB" "SELECT count(*) FROM heapprof_dump d WHERE
	  (SELECT sum(size) FROM heap_profile_allocation a WHERE a.upid = d.upid AND a.ts <= d.ts) < 0
	  OR (SELECT sum(count) FROM heap_profile_allocation a WHERE a.upid = d.upid AND a.ts <= d.ts) < 0;")" \
		"no dump with less than nothing live"
	assert_eq 0 "$(sqlq "$DB" "SELECT count(*) FROM heap_profile_allocation a WHERE NOT EXISTS
	  (SELECT 1 FROM heapprof_dump d WHERE d.upid = a.upid AND d.ts = a.ts);")" "every row at a dump's time"
fi

# ---------------------------------------------------------------------------
t_begin "off: --no-peak: one dump, no peak line, --dump peak refused"
hp_record np --no-peak -o "$T_DIR/np.db" -- "$PH"
assert_eq 0 "$REC_RC" "record's exit status"
if db_valid "$T_DIR/np.db"; then
	assert_eq "end|0" "$(sqlq "$T_DIR/np.db" "SELECT reason, at_max FROM heapprof_dump;")" "one dump, the end"
	out=$(run_bounded 60 "$HP" report "$T_DIR/np.db" 2>&1)
	assert_no_match "heap peak" "$out" "no peak line"
	assert_match "^  left at exit " "$(sed -n 2p <<<"$out")" "the report leads with what was left at exit"
	rc=0
	run_bounded 60 "$HP" report "$T_DIR/np.db" --dump peak >"$T_DIR/np.peak" 2>&1 || rc=$?
	assert_ne 0 "$rc" "report --dump peak: refused"
	assert_match "no dump at its peak" "$(cat "$T_DIR/np.peak")" "report --dump peak: says why"
fi

t_begin "off: --dump-at-max: every dump at the peak, as before"
hp_record am --dump-at-max -o "$T_DIR/am.db" -- "$PH"
assert_eq 0 "$REC_RC" "record's exit status"
if db_valid "$T_DIR/am.db"; then
	assert_eq "end|1|$((20 * MIB))" "$(sqlq "$T_DIR/am.db" "SELECT reason, at_max, max_live_bytes FROM heapprof_dump;")" "one dump, at the peak"
	check_views "$T_DIR/am.db" peak_holder 20 $((20 * MIB)) 20 $((20 * MIB))
	out=$(run_bounded 60 "$HP" report "$T_DIR/am.db" 2>&1)
	assert_match "^  heap peak +20\.00 MiB at " "$(sed -n 2p <<<"$out")" "the peak line"
	assert_no_match "left at exit" "$out" "no left-at-exit line (the dump is the peak's)"
fi

t_summary
