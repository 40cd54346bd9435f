#!/usr/bin/env bash
# test_capture.sh BUILD: hostile cases for the stack capture in the hook
# (docs/safety/safety.md, "The capture cases").
#
# The profiler captures a stack inside every sampled malloc, on the
# program's stack, in the program's thread, with the program's
# descriptors, signal state and cancellation state.  Each program in
# progs/cap_* makes one of those tight or fragile, and must run exactly
# as without the profiler:
#   fdreuse        closes descriptors 3..1023, reuses the numbers, no CFI
#   altstack-4096  allocating signal handler on a 4 KiB sigaltstack
#   altstack-8192  the same on 8 KiB
#   smallthread    a 16 KiB thread stack, nearly full
#   coroutine-*    makecontext coroutine on an 8 KiB stack (malloc'ed with
#                  a canary / mmap'ed with a guard page)
#   cancel         malloc with a deferred cancellation pending
#   stackuse       the stack one malloc+free uses: at most 1024 bytes more
#                  than bare (-i 1)
#   nosyscall      200000 malloc/free pairs under a seccomp filter that
#                  kills on any system call but write/exit
# Each case runs bare twice (its output must be deterministic), then
# under `heapprof record` HEAPPROF_CAPTURE_RUNS times (default 3) with
# -i 1 and with the default interval, every run bounded by `timeout`.  A
# run must end with the bare run's exit status, stdout and stderr
# (heapprof's own lines, "heapprof: ...", taken out of the recorded
# stderr), the files it wrote (fdreuse) and, at -i 1, a profile whose four
# views of each function named in a "count FUNC ao as o s" line equal
# that line.  One summary line at the end, as test_safety.sh's.
#
# Env: HEAPPROF_CAPTURE_RUNS (runs per mode, default 3),
# HEAPPROF_CAPTURE_TIMEOUT (seconds per run, default 30).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/cap_fdreuse" "$PROGS/cap_altstack" \
	"$PROGS/cap_smallthread" "$PROGS/cap_coroutine" "$PROGS/cap_cancel" \
	"$PROGS/cap_stackuse" "$PROGS/cap_nosyscall"

RUNS=${HEAPPROF_CAPTURE_RUNS:-3}
TMO=${HEAPPROF_CAPTURE_TIMEOUT:-30}
if ! t_is_num "$RUNS" || [ "$RUNS" -lt 1 ]; then
	t_begin "HEAPPROF_CAPTURE_RUNS"
	t_fail "HEAPPROF_CAPTURE_RUNS must be a positive integer, got '$RUNS'"
	t_summary
fi

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

# cap_case NAME WANT_STATUS -- CMD [ARGS]: the program bare twice (status
# 77 bare: the case is skipped, the machine cannot run it), then
# RUNS times each under -i 1 and the default interval.  An argument
# "@DIR@" is a new empty directory for each run, whose files must equal
# the bare run's.  The profiles of the last run of a mode are kept as
# $T_DIR/NAME.MODE.db (stdout NAME.MODE.out); each bare run's stdout as
# NAME.bare1.out.  Failures are counted as in test_safety.sh and the case
# stops after 3.
cap_case() {
	local name=$1 want=$2
	shift 3
	t_begin "$name: bare x2, $RUNS runs x {i1,default} == bare"
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
		for mode in i1 default; do
			case $mode in
			i1) opts=(-i 1) ;;
			default) opts=() ;;
			esac
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
			if [ "$mode" = i1 ]; then
				check_counts "run $r, $mode" "$T_DIR/$tag.db" "$T_DIR/$tag.out" || fails=$((fails + 1))
			fi
			[ "$fails" -lt 3 ] || return 1
		done
	done
	[ "$fails" = 0 ] || return 1
	local m
	for m in i1 default; do
		db_valid "$T_DIR/$name.$m.db" || return 1
	done
	if ! timeout -k 5 60 "$HP" report "$T_DIR/$name.i1.db" >"$T_DIR/$name.i1.report" 2>"$T_DIR/$name.i1.report.err" </dev/null; then
		t_fail "heapprof report fails: $(head -c 300 "$T_DIR/$name.i1.report.err")"
		return 1
	fi
	return 0
}

# ---------------------------------------------------------------------------
# Descriptors: the program closes everything from 3 up, then its files and
# pipes take the lowest numbers; its own code has no CFI.
cap_case fdreuse 0 -- "$PROGS/cap_fdreuse" @DIR@

# Allocating signal handler on a small alternate stack (the bare handler
# uses about 3.2 KiB of it on an AVX-512 machine, most of it the kernel's
# signal frame).
cap_case altstack-4096 0 -- "$PROGS/cap_altstack" 4096
cap_case altstack-8192 0 -- "$PROGS/cap_altstack" 8192

# A 16 KiB thread stack (bare: about 2.4 KiB never written).
cap_case smallthread 0 -- "$PROGS/cap_smallthread"

# makecontext coroutines on 8 KiB stacks (bare: 1.3 KiB used).
cap_case coroutine-malloc 0 -- "$PROGS/cap_coroutine" malloc
cap_case coroutine-mmap 0 -- "$PROGS/cap_coroutine" mmap

# Deferred cancellation pending across malloc/free.
cap_case cancel 0 -- "$PROGS/cap_cancel"

# The stack one malloc+free takes: at most 1 KiB more than bare.  The
# "stack used" lines are compared apart: at -i 1 every size, at the
# default interval the sizes that are sampled for sure (64 KiB, 1 MiB).
STACK_RE='^stack used by malloc\(([0-9]+)\)\+free: ([0-9]+) bytes$'
stack_used() { # FILE SIZE
	sed -nE "s/$STACK_RE/\1 \2/p" "$1" | awk -v s="$2" '$1 == s { print $2; exit }'
}
if CC_VARIES='^stack used by ' cap_case stackuse 0 -- "$PROGS/cap_stackuse"; then
	t_begin "stackuse: the hook adds at most 1024 bytes of the program's stack"
	for sz in 1048576 65536 100; do
		bare=$(stack_used "$T_DIR/stackuse.bare1.out" "$sz")
		for mode in i1 default; do
			[ "$mode" = default ] && [ "$sz" -lt 65536 ] && continue
			prof=$(stack_used "$T_DIR/stackuse.$mode.out" "$sz")
			if ! t_is_num "$bare" || ! t_is_num "$prof"; then
				t_fail "no 'stack used by malloc($sz)' line (bare '$bare', $mode '$prof')"
				continue
			fi
			t_note "malloc($sz)+free: bare $bare bytes, $mode $prof bytes (+$((prof - bare)))"
			assert_le $((prof - bare)) 1024 "malloc($sz)+free at $mode: $prof bytes profiled - $bare bare"
		done
	done
else
	# Still show the numbers of what ran.
	for f in "$T_DIR"/stackuse.bare1.out "$T_DIR"/stackuse.i1.out; do
		[ -f "$f" ] && t_note "$(basename "$f"): $(grep '^stack used' "$f" | tr '\n' ';')"
	done
fi

# No system call in the hook: a seccomp filter kills the process on any
# but write/exit/exit_group/rt_sigreturn.
cap_case nosyscall 0 -- "$PROGS/cap_nosyscall"

# ---------------------------------------------------------------------------
t_end
echo "capture: cases $CASES, runs $NRUNS, crashes $CRASHES, hangs $HANGS, output differences $DIFFS"
t_begin "capture summary: 0 crashes, 0 hangs, 0 output differences"
assert_eq "0 0 0" "$CRASHES $HANGS $DIFFS" "crashes hangs differences"
t_summary
