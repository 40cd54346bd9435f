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

. "$HERE/hostile_helpers.sh"

# ---------------------------------------------------------------------------
# Descriptors: the program closes everything from 3 up, then its files and
# pipes take the lowest numbers; its own code has no CFI.
hostile_case fdreuse 0 -- "$PROGS/cap_fdreuse" @DIR@

# Allocating signal handler on a small alternate stack (the bare handler
# uses about 3.2 KiB of it on an AVX-512 machine, most of it the kernel's
# signal frame).
# Where the kernel's signal frame is larger (AVX-512 with AMX: the frame
# grows with the CPU's state), 4 KiB leaves the handler less than the 1
# KiB heapprof needs to capture a stack: then each of its allocations is
# left out and counted (stack_low), never recorded from a stack it could
# overrun.  So: main_alloc exact, and alt_alloc's recorded allocations
# plus stack_low exactly what it made (both exact where the frame fits).
altstack_counts() {
	local tag=$1 db=$2 out=$3 want got low made rec
	low=$(sqlq "$db" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = 'stack_low';")
	want=$(grep '^count main_alloc ' "$out" | cut -d' ' -f3-)
	got=$(leaf_table "$db" | awk '$1 == "main_alloc" { $1 = ""; sub(/^ /, ""); print; exit }')
	assert_eq "$want" "$got" "$tag: main_alloc (alloc_objects alloc_space objects space)" || return 1
	made=$(grep '^count alt_alloc ' "$out" | cut -d' ' -f3)
	rec=$(leaf_table "$db" | awk '$1 == "alt_alloc" { print $2; exit }')
	rec=${rec:-0}
	assert_eq "$made" "$((rec + low))" "$tag: alt_alloc recorded ($rec) + left out for a low stack ($low) = made ($made)" || return 1
	if [ "$low" = 0 ]; then
		check_counts "$tag" "$db" "$out" || return 1
	fi
	return 0
}
HC_NOCOUNT=1 HC_CHECK=altstack_counts hostile_case altstack-4096 0 -- "$PROGS/cap_altstack" 4096
hostile_case altstack-8192 0 -- "$PROGS/cap_altstack" 8192

# A 16 KiB thread stack (bare: about 2.4 KiB never written).
hostile_case smallthread 0 -- "$PROGS/cap_smallthread"

# makecontext coroutines on 8 KiB stacks (bare: 1.3 KiB used).
hostile_case coroutine-malloc 0 -- "$PROGS/cap_coroutine" malloc
hostile_case coroutine-mmap 0 -- "$PROGS/cap_coroutine" mmap

# Deferred cancellation pending across malloc/free.
hostile_case cancel 0 -- "$PROGS/cap_cancel"

# The stack one malloc+free takes: at most 1 KiB more than bare.  The
# "stack used" lines are compared apart: at -i 1 every size, at the
# default interval the sizes that are sampled for sure (64 KiB, 1 MiB).
STACK_RE='^stack used by malloc\(([0-9]+)\)\+free: ([0-9]+) bytes$'
stack_used() { # FILE SIZE
	sed -nE "s/$STACK_RE/\1 \2/p" "$1" | awk -v s="$2" '$1 == s { print $2; exit }'
}
if CC_VARIES='^stack used by ' hostile_case stackuse 0 -- "$PROGS/cap_stackuse"; then
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
hostile_case nosyscall 0 -- "$PROGS/cap_nosyscall"

# ---------------------------------------------------------------------------
t_end
hostile_summary capture
t_summary
