#!/usr/bin/env bash
# test_stress.sh BUILD: exactness under load (docs/safety/safety.md).
# progs/safe_stress16 runs 16 threads allocating and freeing (five call
# sites, cross-thread frees through a queue) for HEAPPROF_STRESS_SECONDS
# (default 60) under `heapprof record -i 1` with a dump every 5 s.  The
# profile must hold exactly the program's own counts per call site (all
# four views), and nothing may be dropped or skipped.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/safe_stress16"

SECS=${HEAPPROF_STRESS_SECONDS:-60}
if ! printf '%s' "$SECS" | grep -Eq '^[0-9]+$'; then
	t_begin "HEAPPROF_STRESS_SECONDS"
	t_fail "HEAPPROF_STRESS_SECONDS must be a whole number of seconds, got '$SECS'"
	t_summary
fi

t_begin "16 threads for ${SECS}s at -i 1: every call site exact, nothing dropped"
db="$T_DIR/stress.db"
HP_TIMEOUT=$((SECS + 180)) hp_record stress -i 1 --dump-interval 5000 -o "$db" -- \
	"$PROGS/safe_stress16" "$SECS"
out="$T_DIR/stress.out"
assert_eq 0 "$REC_RC" "exit status under heapprof record" || show_err stress
total=$(grep '^total ' "$out")
read -r _ allocs bytes frees threads secs <<<"$total"
if ! t_is_num "$allocs"; then
	t_fail "no totals from safe_stress16: $(head -c 300 "$out")"
elif db_valid "$db"; then
	t_note "safe_stress16: $allocs allocations, $bytes bytes, $frees frees, $threads threads, $secs s"
	assert_ge "$allocs" 1000 "allocations made"
	# Every call site: alloc_objects alloc_space objects space, summed over
	# the rows of every dump (each dump's rows are the change since the
	# previous one).
	while read -r _ site ao as o s; do
		check_views "$db" "$site" "$ao" "$as" "$o" "$s"
	done < <(grep '^count ' "$out")
	# Nothing dropped, skipped or cut.
	for c in stack_table_full stack_table_full_bytes live_table_full \
		live_table_full_bytes module_table_full unwind_errors \
		truncated_stacks reentrant_skipped; do
		assert_eq 0 "$(sqlq "$db" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$c';")" \
			"heapprof_process_stats.$c"
	done
	# The client's own totals agree with the rows: every sampled
	# allocation and every matched free is in them.
	read -r pao po <<<"$(sqlq "$db" "SELECT coalesce(sum(CASE WHEN count > 0 THEN count ELSE 0 END), 0)
	  || ' ' || coalesce(sum(count), 0) FROM heap_profile_allocation;")"
	assert_eq "$pao" "$(sqlq "$db" "SELECT value FROM heapprof_process_stats WHERE name = 'samples';")" \
		"samples == alloc_objects of all rows"
	assert_eq $((pao - po)) "$(sqlq "$db" "SELECT value FROM heapprof_process_stats WHERE name = 'frees_matched';")" \
		"frees_matched == objects freed in all rows"
	# The program's frees are among them (the rest: the C library's own).
	sfree=0
	while read -r _ site ao as o s; do
		sfree=$((sfree + ao - o))
	done < <(grep '^count ' "$out")
	assert_eq "$frees" "$sfree" "the program's own frees add up"
	t_note "profile: $pao samples, $((pao - po)) frees matched, $(sqlq "$db" "SELECT count(*) FROM heapprof_dump;") dumps"
	timeout -k 5 120 "$HP" report "$db" >"$T_DIR/stress.report" 2>&1 </dev/null ||
		t_fail "heapprof report fails: $(head -c 300 "$T_DIR/stress.report")"
fi

t_summary
