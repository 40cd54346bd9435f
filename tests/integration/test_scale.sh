#!/usr/bin/env bash
# test_scale.sh BUILD: a profile of a program with exactly N distinct call
# stacks (progs/manystacks, the program of bench/scale.sh) has exactly N
# stacks with the exact bytes and objects of each, whether its dump is
# written in one batch or, for a big dump, in batches through the writer's
# worker thread; the dump's write_ms is there; the callsite tree is sound;
# `type` reads as before; pprof, report and flame graph agree with SQL.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
MANY=$PROGS/manystacks
t_require "$HP" "$BUILD/libheapprof.so" "$MANY"

# expect N: "fn alloc_objects alloc_space objects space" for step0 and
# step1, from manystacks.c: stack i allocates 16 + (i * 2654435761) % 256
# bytes (2654435761 = 177 mod 256) in step(bit DEPTH-1 of i), DEPTH the
# bits of N - 1; the blocks of i % 4 == 0 stay live.
expect() {
	awk -v n="$1" 'BEGIN {
	  d = 0; while (2 ^ d < n) d++
	  for (i = 0; i < n; i++) {
	    f = int(i / 2 ^ (d - 1)) % 2
	    s = 16 + (i * 177) % 256
	    ao[f]++; as[f] += s
	    if (i % 4 == 0) { o[f]++; sp[f] += s }
	  }
	  for (f = 0; f < 2; f++)
	    printf "step%d %d %d %d %d\n", f, ao[f], as[f], o[f], sp[f]
	}'
}

# check_profile TAG N: the exact numbers of a profile of manystacks N.
check_profile() {
	local tag=$1 n=$2 db="$T_DIR/$1.db" fn ao as o s
	db_valid "$db" || return 1
	while read -r fn ao as o s; do
		check_views "$db" "$fn" "$ao" "$as" "$o" "$s"
	done <<<"$(expect "$n")"
	# N leaf callsites, a positive row each, a negative row per stack
	# whose block was freed (3 in 4).
	assert_eq "$n $n $((n - (n + 3) / 4))" "$(sqlq "$db" "SELECT
	    count(DISTINCT a.callsite_id) || ' ' || sum(a.count > 0) || ' ' || sum(a.count < 0)
	  FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  WHERE f.name IN ('step0', 'step1');")" "$tag: leaf callsites, rows" || return 1
	# The program's 2 other allocations: its calloc and stdio's buffer.
	assert_eq "$((n + 2)) $((n - (n + 3) / 4))" "$(sqlq "$db" "SELECT
	    (SELECT value FROM heapprof_process_stats WHERE name = 'samples') || ' ' ||
	    (SELECT value FROM heapprof_process_stats WHERE name = 'frees_matched');")" \
		"$tag: samples, frees matched"
	# The peak's dump and the end's, each timed: write_ms is a real >= 0.
	assert_eq "peak real 1,end real 1" "$(sqlq "$db" "SELECT group_concat(x) FROM (SELECT reason || ' ' ||
	    typeof(write_ms) || ' ' || (write_ms >= 0) AS x FROM heapprof_dump ORDER BY ts, id);")" "$tag: the dumps and their write_ms"
	# The tree: ids dense from 1, every parent there, one callsite per
	# (parent, frame), depths from the parent's.
	assert_eq "0 0 0 0" "$(sqlq "$db" "SELECT
	    (SELECT max(id) - count(*) FROM stack_profile_callsite) || ' ' ||
	    (SELECT count(*) FROM stack_profile_callsite c WHERE c.parent_id IS NOT NULL
	       AND NOT EXISTS (SELECT 1 FROM stack_profile_callsite p WHERE p.id = c.parent_id)) || ' ' ||
	    (SELECT count(*) FROM (SELECT 1 FROM stack_profile_callsite
	       GROUP BY parent_id, frame_id HAVING count(*) > 1)) || ' ' ||
	    (SELECT count(*) FROM stack_profile_callsite c JOIN stack_profile_callsite p
	       ON p.id = c.parent_id WHERE c.depth != p.depth + 1);")" "$tag: callsite tree" || return 1
	# Every allocation row names a callsite of the table.
	assert_eq 0 "$(sqlq "$db" "SELECT count(*) FROM heap_profile_allocation a
	  WHERE NOT EXISTS (SELECT 1 FROM stack_profile_callsite c WHERE c.id = a.callsite_id);")" \
		"$tag: rows with an unknown callsite"
	# `type` is generated, and reads as Perfetto's.
	assert_eq "stack_profile_callsite heap_profile_allocation" "$(sqlq "$db" "SELECT
	    (SELECT group_concat(DISTINCT type) FROM stack_profile_callsite) || ' ' ||
	    (SELECT group_concat(DISTINCT type) FROM heap_profile_allocation);")" "$tag: type"
}

# ---------------------------------------------------------------------------
t_begin "3000 stacks: one batch, exact"
hp_record small -i 1 -o "$T_DIR/small.db" -- "$MANY" 3000
assert_eq 0 "$REC_RC" "record exit status" || show_err small
check_profile small 3000

# ---------------------------------------------------------------------------
# 70000 stacks: more than the writer's threshold for its worker thread
# (16384 stacks) and two of its batches (32768), so equal numbers here
# mean batches and thread change nothing.
t_begin "70000 stacks: batches through the worker thread, exact"
hp_record big -i 1 -o "$T_DIR/big.db" -- "$MANY" 70000
assert_eq 0 "$REC_RC" "record exit status" || show_err big
check_profile big 70000
assert_eq "" "$(ls "$T_DIR"/big.db-* 2>/dev/null)" "one self-contained file (no WAL left)"

# ---------------------------------------------------------------------------
t_begin "70000 stacks: report, pprof and flame graph agree with SQL"
SPACE=$(sqlq "$T_DIR/big.db" "SELECT sum(size) FROM heap_profile_allocation;")
STEP0=$(expect 70000 | awk '$1 == "step0" { print $5 }')
run_bounded 60 "$HP" report "$T_DIR/big.db" >"$T_DIR/big.report" 2>"$T_DIR/big.report.err"
assert_match "space +[0-9.]+ [KMG]iB \($SPACE B\)" "$(cat "$T_DIR/big.report")" "report: space"
check_report big "$T_DIR/big.report" self step0 "$STEP0"
run_bounded 60 "$HP" flamegraph -o "$T_DIR/big.html" "$T_DIR/big.db" 2>"$T_DIR/big.fg.err"
assert_eq 0 "$?" "flamegraph exit status ($(head -c 300 "$T_DIR/big.fg.err"))"
run_bounded 60 "$HP" pprof -o "$T_DIR/big.pb.gz" "$T_DIR/big.db" 2>"$T_DIR/big.pp.err"
assert_eq 0 "$?" "pprof exit status ($(head -c 300 "$T_DIR/big.pp.err"))"
if [ "$GO_OK" = 1 ] && [ -s "$T_DIR/big.pb.gz" ]; then
	pprof_top big "$T_DIR/big.pb.gz" space &&
		assert_eq "$STEP0" "$(top_flat "$T_DIR/big.top" step0)" "pprof: step0 flat space"
fi

t_summary
