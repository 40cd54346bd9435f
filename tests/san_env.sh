# tests/san_env.sh: sourced by the test runners (bash) after BUILD is set.
# If BUILD/heapprof was built with a sanitizer (make SAN=asan or SAN=tsan,
# docs/safety/sanitizers.md), it sets HEAPPROF_SAN (asan or tsan) and the
# sanitizers' options: every report goes to a file under HEAPPROF_SAN_DIR
# instead of stderr (the tests compare stderr), and san_check fails the
# runner for each report found.  Nothing is set for a normal build.
if [ -z "${HEAPPROF_SAN+x}" ]; then
	HEAPPROF_SAN=""
	_san_needed=$(readelf -d "$BUILD/heapprof" 2>/dev/null)
	case "$_san_needed" in
	*libasan.so*) HEAPPROF_SAN=asan ;;
	*libtsan.so*) HEAPPROF_SAN=tsan ;;
	esac
	unset _san_needed
	export HEAPPROF_SAN
	if [ -n "$HEAPPROF_SAN" ]; then
		HEAPPROF_SAN_DIR="$HEAPPROF_TEST_TMP/sanitizer-reports"
		mkdir -p "$HEAPPROF_SAN_DIR/seen"
		export HEAPPROF_SAN_DIR
		# verify_asan_link_order=0: test_client_attach preloads the client
		# into the (instrumented) unit test binary, ahead of libasan.
		export ASAN_OPTIONS="log_path=$HEAPPROF_SAN_DIR/asan:halt_on_error=1:detect_leaks=1:verify_asan_link_order=0:exitcode=86"
		export UBSAN_OPTIONS="log_path=$HEAPPROF_SAN_DIR/ubsan:halt_on_error=1:print_stacktrace=1:exitcode=87"
		export TSAN_OPTIONS="log_path=$HEAPPROF_SAN_DIR/tsan:halt_on_error=0:second_deadlock_stack=1:exitcode=66"
		echo "(sanitizer build: $HEAPPROF_SAN; reports in $HEAPPROF_SAN_DIR)"
	fi
fi

# What a sanitizer prints when it finds something.
SAN_PATTERN='runtime error:|ERROR: (Address|Leak|Thread|UndefinedBehavior)Sanitizer|WARNING: ThreadSanitizer'

# san_harvest FILE...: a report printed to a file a test kept (stderr):
# UBSan's reports in an ASan build go to stderr whatever log_path says.
# Copies each file that holds one into HEAPPROF_SAN_DIR.
san_harvest() {
	local f
	[ -n "${HEAPPROF_SAN_DIR:-}" ] || return 0
	for f in "$@"; do
		[ -f "$f" ] && grep -qsIE "$SAN_PATTERN" "$f" || continue
		cp "$f" "$HEAPPROF_SAN_DIR/stderr.$(basename "$f").$RANDOM"
	done
}

# san_check LABEL: prints every new sanitizer report (a file in
# HEAPPROF_SAN_DIR) as a failure of LABEL, moves it aside, and returns the
# number of reports (0: clean, or not a sanitizer build).
san_check() {
	local n=0 f
	[ -n "${HEAPPROF_SAN_DIR:-}" ] || return 0
	for f in "$HEAPPROF_SAN_DIR"/*; do
		[ -f "$f" ] || continue
		# Only errors count: a warning such as ASan's "failed to
		# allocate" (allocator_may_return_null) is not a finding.
		if ! grep -qE "SUMMARY: |$SAN_PATTERN" "$f"; then
			mv -f "$f" "$HEAPPROF_SAN_DIR/seen/$(basename "$f").$RANDOM"
			continue
		fi
		n=$((n + 1))
		echo "FAIL $1: sanitizer report $(basename "$f"):"
		head -n 60 "$f" | sed 's/^/  | /'
		mv -f "$f" "$HEAPPROF_SAN_DIR/seen/$(basename "$f").$RANDOM"
	done
	return "$n"
}

# Under a sanitizer the suite looks for memory errors and races in our
# code; each run is checked by the sanitizer, so the scripts that repeat
# the same runs many times to catch a rare interleaving (a timing question,
# which the normal build's suite asks at full count) repeat them fewer
# times: the sanitized suites stay within CI's budget (.ci/run runs three
# suites).  An explicit value still wins.
if [ -n "${HEAPPROF_SAN:-}" ]; then
	export HEAPPROF_SAFETY_RUNS=${HEAPPROF_SAFETY_RUNS:-5}
	export HEAPPROF_STRESS_SECONDS=${HEAPPROF_STRESS_SECONDS:-20}
	export HEAPPROF_CHECK_RUNS=${HEAPPROF_CHECK_RUNS:-5}
	export HEAPPROF_BADINPUT_STRIDE=${HEAPPROF_BADINPUT_STRIDE:-3}
fi
