#!/usr/bin/env bash
# tests/run-all.sh BUILD: unit tests, then integration tests, in one temp dir
# (removed at the end); the last line is the total
# "N passed, N failed[, N skipped]".  Exit status 1 if anything failed.
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)

HEAPPROF_TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/heapprof-tests.XXXXXX") || exit 1
export HEAPPROF_TEST_TMP
trap 'rm -rf "$HEAPPROF_TEST_TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

. "$HERE/san_env.sh"

total_p=0
total_f=0
total_s=0
add() { # add FILE: adds the last summary line of FILE to the totals
	local line p f k
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$1" | tail -n 1)
	if [ -z "$line" ]; then
		total_f=$((total_f + 1))
		return
	fi
	p=$(printf '%s\n' "$line" | grep -Eo '[0-9]+ passed' | grep -Eo '[0-9]+')
	f=$(printf '%s\n' "$line" | grep -Eo '[0-9]+ failed' | grep -Eo '[0-9]+')
	k=$(printf '%s\n' "$line" | grep -Eo '[0-9]+ skipped' | grep -Eo '[0-9]+')
	total_p=$((total_p + p))
	total_f=$((total_f + f))
	total_s=$((total_s + ${k:-0}))
}

"$HERE/run-unit.sh" "$BUILD" 2>&1 | tee "$HEAPPROF_TEST_TMP/all-unit.out"
urc=${PIPESTATUS[0]}
add "$HEAPPROF_TEST_TMP/all-unit.out"
"$HERE/run-integration.sh" "$BUILD" 2>&1 | tee "$HEAPPROF_TEST_TMP/all-integration.out"
irc=${PIPESTATUS[0]}
add "$HEAPPROF_TEST_TMP/all-integration.out"

# Reports written after a runner's own checks (a process that outlived
# its test) still fail the run.
san_check "run-all.sh"
total_f=$((total_f + $?))

# A runner that failed without counting a failure still fails the run.
if { [ "$urc" != 0 ] || [ "$irc" != 0 ]; } && [ "$total_f" = 0 ]; then
	total_f=1
fi
echo "== total"
if [ "$total_s" != 0 ]; then
	echo "$total_p passed, $total_f failed, $total_s skipped"
else
	echo "$total_p passed, $total_f failed"
fi
[ "$total_f" = 0 ]
