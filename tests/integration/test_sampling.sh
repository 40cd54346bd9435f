#!/usr/bin/env bash
# test_sampling.sh BUILD: Poisson sampling per byte is unbiased and within
# statistical error; allocations at or above the interval are exact; a free
# takes back exactly what its allocation was charged.
#
# progs/bigalloc.c prints the truth per callsite ("truth NAME alloc_bytes=..
# alloc_count=.. live_bytes=.. live_count=.. var_bytes=.. var_objects=..").
#
# Bounds, for a callsite with B bytes in allocations smaller than the
# interval I:
#   bytes:   the estimate is I * (number of sampled bytes) or s/p per sampled
#            allocation; either way its variance is at most I * B, so
#            sigma = sqrt(I * B) and we require |est - B| <= 4 sigma
#            (two-sided p ~ 6e-5 per check); for callsites of >= 5 MB we also
#            require 10%, which at I = 4096 and ~16 MB is > 4 sigma (4 sigma =
#            1.02 MB = 6.4%), so it can only fail when the estimate is biased.
#   objects: per allocation of size s < I the estimated count has variance
#            at most I/s (1/(e^x - 1) <= 1/x with x = s/I, and I/s for the
#            bytes/s estimator); the program sums it (var_objects), and we
#            require |est - N| <= 5 sqrt(var_objects) + 2 (the +2 covers
#            rounding of the 16.16 fixed-point counts into integer rows).
#            For alloc_small (160000 x 100 B) that is 5 * 2560 = 8% and for
#            alloc_churn 5 * 1280 = 8%: we also require 10% there.
#   exact:   allocations >= I (alloc_large, 64 KiB) are recorded with their
#            true size: exact bytes and counts; a callsite whose allocations
#            were all freed has space 0 and objects 0 exactly.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/bigalloc"

truth() { # truth OUTFILE NAME FIELD
	sed -n "s/^truth $2 .*\\b$3=\\([0-9]*\\).*/\\1/p" "$1" | head -n1
}

within_sigma() { # within_sigma EST TRUE VAR K SLACK MSG: |EST-TRUE| <= K*sqrt(VAR)+SLACK
	local tol
	tol=$(awk -v v="$3" -v k="$4" -v s="$5" 'BEGIN { printf "%.0f", k * sqrt(v) + s }')
	assert_within "$1" "$2" "$tol" "$6 (bound $4 sigma = $tol)"
}

within_pct() { # within_pct EST TRUE PCT MSG
	local tol
	tol=$(awk -v t="$2" -v p="$3" 'BEGIN { printf "%.0f", t * p / 100 }')
	assert_within "$1" "$2" "$tol" "$4 (bound $3% = $tol)"
}

check_sampled() { # DB OUT NAME INTERVAL [pct-checks: bytes|objects|both|none]
	local db=$1 out=$2 name=$3 iv=$4 pct=${5:-none}
	local ab ac lb lc vo v ao as o s
	ab=$(truth "$out" "$name" alloc_bytes)
	ac=$(truth "$out" "$name" alloc_count)
	lb=$(truth "$out" "$name" live_bytes)
	lc=$(truth "$out" "$name" live_count)
	vo=$(truth "$out" "$name" var_objects)
	if [ -z "$ab" ] || [ -z "$vo" ]; then
		t_fail "no truth line for $name in the program's output"
		return 1
	fi
	v=$(leaf_views "$db" "$name") || return 1
	read -r ao as o s <<<"$v"
	t_note "$name: alloc_space $as (true $ab), alloc_objects $ao (true $ac), space $s (true $lb), objects $o (true $lc)"
	within_sigma "$as" "$ab" "$((iv * ab))" 4 0 "$name alloc_space"
	within_sigma "$ao" "$ac" "$vo" 5 2 "$name alloc_objects"
	case "$pct" in
	bytes | both) within_pct "$as" "$ab" 10 "$name alloc_space" ;;
	esac
	case "$pct" in
	objects | both) within_pct "$ao" "$ac" 10 "$name alloc_objects" ;;
	esac
	if [ "$lc" = 0 ]; then
		assert_eq 0 "$s" "$name space (all freed)"
		assert_eq 0 "$o" "$name objects (all freed)"
	elif [ "$lc" = "$ac" ]; then
		assert_eq "$as" "$s" "$name space = alloc_space (nothing freed)"
		assert_eq "$ao" "$o" "$name objects = alloc_objects (nothing freed)"
	fi
}

# ---------------------------------------------------------------------------
DB="$T_DIR/big.db"
t_begin "bigalloc at the default interval: runs, interval 4096"
hp_record big -o "$DB" -- "$PROGS/bigalloc"
assert_eq 0 "$REC_RC" "exit status" || show_err big
OUT="$T_DIR/big.out"
assert_match '^bigalloc: failures 0$' "$(cat "$OUT")" "program output"
db_valid "$DB"
BIG_OK=$?
if [ "$BIG_OK" = 0 ]; then
	assert_eq 4096 "$(sqlq "$DB" "SELECT sampling_interval FROM heapprof_process;")" \
		"heapprof_process.sampling_interval"
	assert_eq "libc.malloc" "$(sqlq "$DB" "SELECT DISTINCT heap_name FROM heap_profile_allocation;")" \
		"heap_name of all rows"

	t_begin "alloc_small (160000 x 100 B live): estimate within 4 sigma and 10%"
	check_sampled "$DB" "$OUT" alloc_small 4096 both

	t_begin "alloc_mixed (1..8000 B, ~16 MB, all freed): within 4 sigma and 10%, space exactly 0"
	check_sampled "$DB" "$OUT" alloc_mixed 4096 bytes

	t_begin "alloc_churn (80000 x malloc/free 200 B): within 4 sigma and 10%, space exactly 0"
	check_sampled "$DB" "$OUT" alloc_churn 4096 both

	t_begin "alloc_large (100 x 64 KiB >= interval, 50 freed): exact"
	# 100 x 65536 = 6553600 B; 50 freed: 50 live, 3276800 B.
	check_views "$DB" alloc_large 100 6553600 50 3276800

	t_begin "no sample lost or invented at the default interval"
	# Frees never exceed allocations, per callsite and in total.
	assert_eq 0 "$(sqlq "$DB" "SELECT count(*) FROM (SELECT callsite_id,
	  sum(count) AS c, sum(size) AS s FROM heap_profile_allocation
	  GROUP BY callsite_id HAVING c < 0 OR s < 0);")" "callsites with negative totals"
	for st in stack_table_full live_table_full module_table_full unwind_errors; do
		v=$(sqlq "$DB" "SELECT value FROM heapprof_process_stats WHERE name = '$st';")
		[ -n "$v" ] && assert_eq 0 "$v" "heapprof_process_stats $st"
	done
fi

# ---------------------------------------------------------------------------
DB2="$T_DIR/big64k.db"
t_begin "bigalloc at -i 65536: within 4 sigma; 64 KiB allocations (= interval) exact"
hp_record big64k -i 65536 -o "$DB2" -- "$PROGS/bigalloc" 65536
assert_eq 0 "$REC_RC" "exit status" || show_err big64k
OUT2="$T_DIR/big64k.out"
if db_valid "$DB2"; then
	assert_eq 65536 "$(sqlq "$DB2" "SELECT sampling_interval FROM heapprof_process;")" \
		"heapprof_process.sampling_interval"
	check_sampled "$DB2" "$OUT2" alloc_small 65536
	check_sampled "$DB2" "$OUT2" alloc_mixed 65536
	check_sampled "$DB2" "$OUT2" alloc_churn 65536
	check_views "$DB2" alloc_large 100 6553600 50 3276800
fi

t_summary
