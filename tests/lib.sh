# tests/lib.sh: a tiny shell test harness, sourced by tests/integration/test_*.sh
# (bash).
#
#   t_begin NAME                 start a test case (ends the previous one)
#   t_end                        end the current test case (optional)
#   t_fail MSG                   mark the current test failed
#   t_skip REASON                mark the current test skipped (then `return`)
#   assert_eq EXPECTED ACTUAL MSG
#   assert_ne UNEXPECTED ACTUAL MSG
#   assert_within VALUE EXPECTED TOLERANCE MSG   |VALUE-EXPECTED| <= TOLERANCE
#   assert_le A B MSG / assert_ge A B MSG        numeric A <= B / A >= B
#   assert_match REGEX TEXT MSG / assert_no_match REGEX TEXT MSG  (grep -E)
#   run_bounded SECONDS CMD...   run CMD under timeout(1), stdin /dev/null;
#                                returns CMD's status; a timeout fails the test
#   t_summary                    prints "N passed, N failed[, N skipped]",
#                                exits 1 if anything failed
#
# Each assertion prints nothing on success and "  FAIL: ..." (to stderr) on
# failure and returns 0/1, so a caller may write `assert_eq ... || return`.
# Assertions work inside $(...) too: failures are also recorded in a file.
# A test case counts as passed when none of its assertions failed.
#
# Every script gets its own temp dir $T_DIR (under $TMPDIR), removed at exit
# unless HEAPPROF_TEST_KEEP=1.

T_PASS=0
T_FAIL=0
T_SKIP=0
T_CUR=""
T_CUR_FAILED=0
T_CUR_SKIPPED=0
T_FAILED_NAMES=""

T_DIR=$(mktemp -d "${TMPDIR:-/tmp}/heapprof-test.XXXXXX") || {
	echo "lib.sh: mktemp failed" >&2
	exit 1
}
t_cleanup() {
	# A sanitizer build (tests/san_env.sh): a report a program printed to
	# a file kept here (its stderr) fails the run too.
	if [ -n "${HEAPPROF_SAN_DIR:-}" ] && [ -d "$HEAPPROF_SAN_DIR" ]; then
		grep -rlsIE 'runtime error:|ERROR: (Address|Leak|Thread|UndefinedBehavior)Sanitizer|WARNING: ThreadSanitizer' "$T_DIR" |
			while read -r f; do
				cp "$f" "$HEAPPROF_SAN_DIR/stderr.$(basename "$f").$RANDOM"
			done
	fi
	if [ "${HEAPPROF_TEST_KEEP:-0}" = 1 ]; then
		echo "(kept $T_DIR)"
	else
		rm -rf "$T_DIR"
	fi
}
trap t_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Failures are also appended to this file, so that an assertion that fails
# inside a command substitution (a subshell) still fails the test.
T_FAIL_FILE="$T_DIR/.t_failures"
: >"$T_FAIL_FILE"
T_CUR_MARK=0
t_fail_lines() {
	wc -l <"$T_FAIL_FILE" 2>/dev/null | tr -d ' '
}

t_end() {
	[ -n "$T_CUR" ] || return 0
	[ "$(t_fail_lines)" = "$T_CUR_MARK" ] || T_CUR_FAILED=1
	if [ "$T_CUR_FAILED" != 0 ]; then
		T_FAIL=$((T_FAIL + 1))
		T_FAILED_NAMES="$T_FAILED_NAMES
  $T_CUR"
		echo "FAIL $T_CUR"
	elif [ "$T_CUR_SKIPPED" != 0 ]; then
		T_SKIP=$((T_SKIP + 1))
	else
		T_PASS=$((T_PASS + 1))
		echo "ok   $T_CUR"
	fi
	T_CUR=""
	return 0
}

t_begin() {
	t_end
	T_CUR="$1"
	T_CUR_FAILED=0
	T_CUR_SKIPPED=0
	T_CUR_MARK=$(t_fail_lines)
}

t_fail() {
	[ -n "$T_CUR" ] || t_begin "(top level)"
	T_CUR_FAILED=1
	echo "$T_CUR: $*" >>"$T_FAIL_FILE"
	echo "  FAIL: $T_CUR: $*" >&2
	return 1
}

t_skip() {
	[ -n "$T_CUR" ] || t_begin "(top level)"
	T_CUR_SKIPPED=1
	echo "skip $T_CUR: $*"
	return 0
}

t_note() {
	echo "  note: $*"
}

t_summary() {
	t_end
	if [ "$T_FAIL" != 0 ]; then
		echo "failed tests:$T_FAILED_NAMES"
	fi
	if [ "$T_SKIP" != 0 ]; then
		echo "$T_PASS passed, $T_FAIL failed, $T_SKIP skipped"
	else
		echo "$T_PASS passed, $T_FAIL failed"
	fi
	[ "$T_FAIL" = 0 ]
	exit $?
}

# Numbers: accept integers and decimals (sqlite may print 12.0).
t_is_num() {
	printf '%s' "$1" | grep -Eq '^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'
}

assert_eq() {
	if [ "$1" != "$2" ]; then
		t_fail "$3: expected '$1', got '$2'"
		return 1
	fi
	return 0
}

assert_ne() {
	if [ "$1" = "$2" ]; then
		t_fail "$3: expected anything but '$1'"
		return 1
	fi
	return 0
}

assert_within() {
	if ! t_is_num "$1" || ! t_is_num "$2" || ! t_is_num "$3"; then
		t_fail "$4: expected $2 +- $3, got '$1' (not a number)"
		return 1
	fi
	if awk -v v="$1" -v e="$2" -v t="$3" \
		'BEGIN { d = v - e; if (d < 0) d = -d; exit !(d <= t) }'; then
		return 0
	fi
	t_fail "$4: expected $2 +- $3, got $1"
	return 1
}

assert_le() {
	if t_is_num "$1" && t_is_num "$2" &&
		awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; then
		return 0
	fi
	t_fail "$3: expected '$1' <= '$2'"
	return 1
}

assert_ge() {
	if t_is_num "$1" && t_is_num "$2" &&
		awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; then
		return 0
	fi
	t_fail "$3: expected '$1' >= '$2'"
	return 1
}

assert_match() {
	if printf '%s\n' "$2" | grep -Eq -- "$1"; then
		return 0
	fi
	t_fail "$3: /$1/ not found in: $(printf '%s' "$2" | head -c 600)"
	return 1
}

assert_no_match() {
	if printf '%s\n' "$2" | grep -Eq -- "$1"; then
		t_fail "$3: /$1/ unexpectedly found in: $(printf '%s' "$2" | grep -E -- "$1" | head -c 600)"
		return 1
	fi
	return 0
}

# run_bounded SECONDS CMD [ARGS...]: CMD under timeout(1) (TERM, then KILL 5 s
# later), stdin from /dev/null.  Returns CMD's exit status; on a timeout the
# current test fails and the status is 124 or 137.
run_bounded() {
	local secs=$1
	shift
	local rc=0
	timeout -k 5 "$secs" "$@" </dev/null || rc=$?
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		t_fail "timed out after ${secs}s (status $rc): $*"
	fi
	return "$rc"
}

# wait_pid_bounded SECONDS PID: wait for a background child of this shell to
# exit, killing it (KILL) when it outlives SECONDS; sets WAIT_RC to its status.
wait_pid_bounded() {
	local secs=$1 pid=$2
	if ! timeout "$secs" tail --pid="$pid" -f /dev/null 2>/dev/null; then
		t_fail "pid $pid still running after ${secs}s; killing it"
		kill -KILL "$pid" 2>/dev/null
	fi
	WAIT_RC=0
	wait "$pid" || WAIT_RC=$?
}

# sqlq DB SQL: query a profile with the sqlite3 CLI (read-only), rows as
# a|b|c lines, no header.  Fails the test (and prints the error) on error.
sqlq() {
	local out rc=0
	out=$(timeout -k 5 60 sqlite3 -readonly -batch -noheader -separator '|' \
		"$1" "$2" 2>&1 </dev/null) || rc=$?
	if [ "$rc" != 0 ]; then
		t_fail "sqlite3 failed ($rc) on $1: $2: $out"
		return 1
	fi
	printf '%s\n' "$out"
}

# Common locations, given the build dir as $1 of the test script.
t_setup_build() {
	BUILD=${1:-${BUILD:-build}}
	case "$BUILD" in
	/*) ;;
	*) BUILD="$(pwd)/$BUILD" ;;
	esac
	HP="$BUILD/heapprof"
	PROGS="$BUILD/progs"
	export BUILD HP PROGS
}

# t_require FILE...: fail a "prerequisites" test and exit if any is missing.
t_require() {
	local f missing=""
	for f in "$@"; do
		[ -x "$f" ] || [ -f "$f" ] || missing="$missing $f"
	done
	if [ -n "$missing" ]; then
		t_begin "prerequisites"
		t_fail "missing:$missing (run make first)"
		t_summary
	fi
}
