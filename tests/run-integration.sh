#!/usr/bin/env bash
# tests/run-integration.sh BUILD: runs every tests/integration/test_*.sh with
# BUILD as its argument (each bounded by a timeout), sums their
# "N passed, N failed[, N skipped]" lines and prints the total as the last
# line.  A script that times out, crashes or prints no summary counts as one
# failure.  Exit status 1 if anything failed.
BUILD=${1:-build}
case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac
TIMEOUT=${HEAPPROF_INTEGRATION_TIMEOUT:-600}
HERE=$(cd "$(dirname "$0")" && pwd)

own_tmp=""
if [ -z "${HEAPPROF_TEST_TMP:-}" ]; then
	own_tmp=$(mktemp -d "${TMPDIR:-/tmp}/heapprof-integration.XXXXXX") || exit 1
	HEAPPROF_TEST_TMP=$own_tmp
	trap 'rm -rf "$own_tmp"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
fi
export TMPDIR=$HEAPPROF_TEST_TMP
. "$HERE/san_env.sh"

pass=0
fail=0
skip=0
failed_scripts=""
times="$TMPDIR/integration-times"
: >"$times"
run_start=$(date +%s)
for s in "$HERE"/integration/test_*.sh; do
	[ -f "$s" ] || continue
	# HEAPPROF_TEST_ONLY=exact,cli runs a subset.
	if [ -n "${HEAPPROF_TEST_ONLY:-}" ]; then
		n=$(basename "$s" .sh)
		n=${n#test_}
		case ",$HEAPPROF_TEST_ONLY," in *",$n,"*) ;; *) continue ;; esac
	fi
	name=$(basename "$s")
	echo "== integration: $name"
	out="$TMPDIR/integration-$name.out"
	rc=0
	# The output is streamed and kept, to read the summary back.
	t0=$(date +%s)
	timeout -k 10 "$TIMEOUT" bash "$s" "$BUILD" </dev/null 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	t1=$(date +%s)
	echo "$((t1 - t0)) $name" >>"$times"
	echo "== integration: $name took $((t1 - t0)) s"
	# A sanitizer report is a failure even if every check passed.
	san_check "$name" >"$out.san"
	nrep=$?
	cat "$out.san"
	if [ "$nrep" != 0 ]; then
		fail=$((fail + nrep))
		failed_scripts="$failed_scripts $name"
	fi
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$out" | tail -n 1)
	if [ -z "$line" ]; then
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			echo "FAIL $name: timed out after ${TIMEOUT}s"
		else
			echo "FAIL $name: no summary line (exit status $rc)"
		fi
		fail=$((fail + 1))
		failed_scripts="$failed_scripts $name"
		continue
	fi
	p=$(printf '%s\n' "$line" | grep -Eo '[0-9]+ passed' | grep -Eo '[0-9]+')
	f=$(printf '%s\n' "$line" | grep -Eo '[0-9]+ failed' | grep -Eo '[0-9]+')
	k=$(printf '%s\n' "$line" | grep -Eo '[0-9]+ skipped' | grep -Eo '[0-9]+')
	pass=$((pass + p))
	fail=$((fail + f))
	skip=$((skip + ${k:-0}))
	if [ "$rc" != 0 ]; then
		failed_scripts="$failed_scripts $name"
		if [ "$f" = 0 ]; then
			echo "FAIL $name: exit status $rc with 0 failures reported"
			fail=$((fail + 1))
		fi
	fi
done
if [ -n "$failed_scripts" ]; then
	# What failed, again at the end: a long run's log is often read
	# from its tail only.
	echo "== integration: the first failures of each failing script"
	seen=" "
	for name in $failed_scripts; do
		case "$seen" in *" $name "*) continue ;; esac
		seen="$seen$name "
		out="$TMPDIR/integration-$name.out"
		{ grep -h 'FAIL' "$out" "$out.san" 2>/dev/null ||
			echo "(no FAIL line: timed out, or no summary)"; } |
			head -n 6 | cut -c 1-400 | sed "s|^|$name: |"
	done
	echo "integration: failing:$failed_scripts"
fi
# Where the time went, at the end too: a CI run over its budget is read
# from its tail.
echo "== integration: $(($(date +%s) - run_start)) s in all; the slowest scripts:"
sort -rn "$times" | head -n 8 | awk '{ printf "  %5d s  %s\n", $1, $2 }'
if [ "$skip" != 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" = 0 ]
