#!/usr/bin/env bash
# tests/run-unit.sh BUILD: runs every BUILD/tests/test_* unit test binary
# (each bounded by a timeout, in a scratch dir), sums their
# "N passed, N failed" lines and prints the total as the last line.  A binary
# that crashes, times out or prints no summary counts as one failure.
# Exit status 1 if anything failed.
BUILD=${1:-build}
case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac
TIMEOUT=${HEAPPROF_UNIT_TIMEOUT:-120}

own_tmp=""
if [ -z "${HEAPPROF_TEST_TMP:-}" ]; then
	own_tmp=$(mktemp -d "${TMPDIR:-/tmp}/heapprof-unit.XXXXXX") || exit 1
	HEAPPROF_TEST_TMP=$own_tmp
	trap 'rm -rf "$own_tmp"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
fi
export TMPDIR=$HEAPPROF_TEST_TMP
. "$(dirname "$0")/san_env.sh"

pass=0
fail=0
nbin=0
failed_bins=""
for t in "$BUILD"/tests/test_*; do
	[ -f "$t" ] && [ -x "$t" ] || continue
	case "$t" in *.d | *.o) continue ;; esac
	nbin=$((nbin + 1))
	name=$(basename "$t")
	echo "== unit: $name"
	out="$TMPDIR/unit-$name.out"
	rc=0
	(cd "$TMPDIR" && exec timeout -k 5 "$TIMEOUT" "$t") >"$out" 2>&1 </dev/null || rc=$?
	cat "$out"
	# A sanitizer report is a failure even if every check passed.
	san_harvest "$out"
	san_check "$name"
	nrep=$?
	if [ "$nrep" != 0 ]; then
		fail=$((fail + nrep))
		failed_bins="$failed_bins $name"
	fi
	line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	if [ -z "$line" ]; then
		echo "FAIL $name: no summary line (exit status $rc)"
		fail=$((fail + 1))
		failed_bins="$failed_bins $name"
		continue
	fi
	p=$(printf '%s\n' "$line" | grep -Eo '[0-9]+ passed' | grep -Eo '[0-9]+')
	f=$(printf '%s\n' "$line" | grep -Eo '[0-9]+ failed' | grep -Eo '[0-9]+')
	pass=$((pass + p))
	fail=$((fail + f))
	if [ "$rc" != 0 ]; then
		failed_bins="$failed_bins $name"
		if [ "$f" = 0 ]; then
			echo "FAIL $name: exit status $rc with 0 failures reported"
			fail=$((fail + 1))
		fi
	fi
done
[ "$nbin" = 0 ] && echo "unit: no test binaries in $BUILD/tests (make unit builds them)"
[ -n "$failed_bins" ] && echo "unit: failing:$failed_bins"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
