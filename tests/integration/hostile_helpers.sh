# tests/integration/hostile_helpers.sh: bare against profiled runs of a
# hostile program (sourced by test_capture.sh and test_hostile.sh, after
# tests/lib.sh, helpers.sh and t_setup_build).
#
# hostile_case runs a program bare twice (its output must be
# deterministic), then under `heapprof record` $RUNS times in each mode of
# $HC_MODES (default "i1 default"; also "follow": -i 1 --follow-fork), every
# run bounded by $TMO seconds.  A run must end with the bare run's exit
# status, stdout and stderr (heapprof's own lines, "heapprof: ...", taken
# out of the recorded stderr), the files it wrote (an argument @DIR@) and,
# at -i 1, a profile whose four views of each function named in a "count
# FUNC ao as o s" line equal that line.  $HC_OPTS: more `record` options;
# $HC_CHECK: a function called after each good -i 1 run as
# `$HC_CHECK TAG DB STDOUT` (its status counts like check_counts').
# Failures are counted (CRASHES, HANGS, DIFFS) for hostile_summary.

CASES=0
NRUNS=0
CRASHES=0
HANGS=0
DIFFS=0
SAN_RE='(AddressSanitizer|LeakSanitizer|ThreadSanitizer|UndefinedBehaviorSanitizer|runtime error:)'

# leaf_table and check_counts: helpers.sh.

# The program's stdout as compared: without the lines matching
# $CC_VARIES (an ERE; lines whose numbers differ with a profiler by
# nature, checked apart).
cmp_out() {
	if [ -n "${CC_VARIES:-}" ]; then
		cmp -s <(grep -Ev "$CC_VARIES" "$1") <(grep -Ev "$CC_VARIES" "$2")
	else
		cmp -s "$1" "$2"
	fi
}

# run_prog DIR CMD...: CMD with every argument "@DIR@" replaced by DIR
# (a new empty directory), bounded; status in RUN_RC.
run_prog() {
	local dir=$1 a args=()
	shift
	for a in "$@"; do
		[ "$a" = @DIR@ ] && a=$dir
		args+=("$a")
	done
	RUN_RC=0
	timeout -k 5 "$TMO" "${args[@]}" </dev/null || RUN_RC=$?
}

# same_files A B: the same file names with the same bytes.
same_files() {
	[ "$(cd "$1" && ls -A)" = "$(cd "$2" && ls -A)" ] || return 1
	local f
	for f in "$1"/*; do
		[ -e "$f" ] || continue
		cmp -s "$f" "$2/$(basename "$f")" || return 1
	done
	return 0
}

# hostile_case NAME WANT_STATUS -- CMD [ARGS]: the program bare twice (status
# 77 bare: the case is skipped, the machine cannot run it), then
# RUNS times in each mode of $HC_MODES.  An argument
# "@DIR@" is a new empty directory for each run, whose files must equal
# the bare run's.  The profiles of the last run of a mode are kept as
# $T_DIR/NAME.MODE.db (stdout NAME.MODE.out); each bare run's stdout as
# NAME.bare1.out.  Failures are counted as in test_safety.sh and the case
# stops after 3.
hostile_case() {
	local name=$1 want=$2
	shift 3
	local modes=${HC_MODES:-i1 default}
	t_begin "$name: bare x2, $RUNS runs x {${modes// /,}} == bare"
	CASES=$((CASES + 1))
	local b r mode fails=0 opts tag err d
	for b in 1 2; do
		d="$T_DIR/$name.bare$b.dir"
		mkdir -p "$d"
		run_prog "$d" "$@" >"$T_DIR/$name.bare$b.out" 2>"$T_DIR/$name.bare$b.err"
		if [ "$RUN_RC" = 124 ] || [ "$RUN_RC" = 137 ]; then
			t_fail "bare run $b timed out: $*"
			return 1
		fi
		if [ "$RUN_RC" = 77 ]; then
			t_skip "cannot run on this machine: $(head -c 300 "$T_DIR/$name.bare$b.err")"
			return 1
		fi
		assert_eq "$want" "$RUN_RC" "bare run $b: exit status ($(head -c 300 "$T_DIR/$name.bare$b.err"))" || return 1
	done
	if ! cmp_out "$T_DIR/$name.bare1.out" "$T_DIR/$name.bare2.out" ||
		! cmp -s "$T_DIR/$name.bare1.err" "$T_DIR/$name.bare2.err" ||
		! same_files "$T_DIR/$name.bare1.dir" "$T_DIR/$name.bare2.dir"; then
		t_fail "the program's output differs between two bare runs (not deterministic)"
		return 1
	fi
	for ((r = 1; r <= RUNS; r++)); do
		for mode in $modes; do
			case $mode in
			i1) opts=(-i 1) ;;
			default) opts=() ;;
			follow) opts=(-i 1 --follow-fork) ;;
			*) t_fail "unknown mode $mode"; return 1 ;;
			esac
			# shellcheck disable=SC2206 # options split as given
			[ -n "${HC_OPTS:-}" ] && opts+=($HC_OPTS)
			tag="$name.$mode"
			d="$T_DIR/$tag.$r.dir"
			mkdir -p "$d"
			NRUNS=$((NRUNS + 1))
			run_prog "$d" "$HP" record "${opts[@]}" -o "$T_DIR/$tag.db" -- "$@" \
				>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err"
			grep -v '^heapprof: ' "$T_DIR/$tag.err" >"$T_DIR/$tag.perr"
			err=""
			if [ "$RUN_RC" = 124 ] || [ "$RUN_RC" = 137 ]; then
				HANGS=$((HANGS + 1))
				err="hang (timeout ${TMO}s, status $RUN_RC)"
			elif { [ "$RUN_RC" -ge 128 ] && [ "$want" -lt 128 ]; } ||
				grep -Eq "$SAN_RE" "$T_DIR/$tag.err"; then
				CRASHES=$((CRASHES + 1))
				err="crash (status $RUN_RC$( [ "$RUN_RC" -gt 128 ] && echo ", signal $(kill -l $((RUN_RC - 128)) 2>/dev/null)"))"
			elif [ "$RUN_RC" != "$want" ] ||
				! cmp_out "$T_DIR/$name.bare1.out" "$T_DIR/$tag.out" ||
				! cmp -s "$T_DIR/$name.bare1.err" "$T_DIR/$tag.perr"; then
				DIFFS=$((DIFFS + 1))
				err="output differs (status $RUN_RC, want $want): $(diff "$T_DIR/$name.bare1.out" "$T_DIR/$tag.out" | head -n 8 | tr '\n' ' ') $(diff "$T_DIR/$name.bare1.err" "$T_DIR/$tag.perr" | head -n 6 | tr '\n' ' ')"
			elif ! same_files "$T_DIR/$name.bare1.dir" "$d"; then
				DIFFS=$((DIFFS + 1))
				err="the files it wrote differ from the bare run's ($d)"
			fi
			if [ -n "$err" ]; then
				fails=$((fails + 1))
				t_fail "run $r, $mode: $err"
				sed -e 's/^/    | /' "$T_DIR/$tag.err" | tail -n 4 >&2
				[ -e "$T_DIR/$tag.failed.db" ] || cp "$T_DIR/$tag.db" "$T_DIR/$tag.failed.db" 2>/dev/null
				[ "$fails" -lt 3 ] || return 1
				continue
			fi
			if [ "$mode" = i1 ] && [ -z "${HC_NOCOUNT:-}" ]; then
				check_counts "run $r, $mode" "$T_DIR/$tag.db" "$T_DIR/$tag.out" || fails=$((fails + 1))
			fi
			if [ "$mode" = i1 ] && [ -n "${HC_CHECK:-}" ]; then
				"$HC_CHECK" "run $r, $mode" "$T_DIR/$tag.db" "$T_DIR/$tag.out" || fails=$((fails + 1))
			fi
			[ "$fails" -lt 3 ] || return 1
		done
	done
	[ "$fails" = 0 ] || return 1
	local m
	for m in $modes; do
		db_valid "$T_DIR/$name.$m.db" || return 1
		if ! timeout -k 5 60 "$HP" report "$T_DIR/$name.$m.db" >"$T_DIR/$name.$m.report" 2>"$T_DIR/$name.$m.report.err" </dev/null; then
			t_fail "heapprof report fails: $(head -c 300 "$T_DIR/$name.$m.report.err")"
			return 1
		fi
	done
	return 0
}

# hostile_summary LABEL: the counts on one line, and a test that they are 0.
hostile_summary() {
	echo "$1: cases $CASES, runs $NRUNS, crashes $CRASHES, hangs $HANGS, output differences $DIFFS"
	t_begin "$1 summary: 0 crashes, 0 hangs, 0 output differences"
	assert_eq "0 0 0" "$CRASHES $HANGS $DIFFS" "crashes hangs differences"
}

