#!/usr/bin/env bash
# test_tls.sh BUILD: what libheapprof takes of every thread of the program
# it is loaded into (issue 31, item 4; docs/SAFETY.md, "Known limits").
#
# glibc carves a thread's static TLS out of its stack: the library keeps
# at most 64 bytes there (struct client_tls), the rest of a thread's state
# in records of a pool in its own memory (src/client/thread.c).
#   - PT_TLS of libheapprof.so.1: MemSiz at most 64 (0x40).
#   - progs/tls_smallstack: 8 threads with a 16 KiB stack that use 11 KiB
#     of it and allocate.  Bare it runs; with 1104 bytes more of stack
#     (what the library's old 1168 bytes of TLS took beyond 64) it dies:
#     it runs that close to the edge.  With the library preloaded and no
#     session, and under `record` (-i 1: exact, and the default interval),
#     it runs as bare.
#   - progs/tls_churn: 20,000 threads that come and go, each with an
#     alternate signal stack and an allocating handler on it: as bare,
#     exact at -i 1, and stack_unbounded 0: every thread had a record that
#     knew its alternate stack (a record not given back at a thread's exit
#     would run the pool of 4096 out, and later threads' handlers would be
#     recorded with their caller only).
# Env: HEAPPROF_TLS_RUNS (runs per mode, default 2), HEAPPROF_TLS_TIMEOUT
# (seconds per run, default 60).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
LIB=$BUILD/libheapprof.so.1
t_require "$HP" "$LIB" "$PROGS/tls_smallstack" "$PROGS/tls_churn"

RUNS=${HEAPPROF_TLS_RUNS:-2}
TMO=${HEAPPROF_TLS_TIMEOUT:-60}
. "$HERE/hostile_helpers.sh"

# ---------------------------------------------------------------------------
t_begin "PT_TLS of libheapprof.so.1: MemSiz <= 64"
if ! command -v readelf >/dev/null 2>&1; then
	t_skip "no readelf (binutils)"
else
	tls=$(readelf -lW "$LIB" | awk '$1 == "TLS" { print $6 }')
	if [ -z "$tls" ]; then
		t_note "no PT_TLS segment"
	else
		t_note "PT_TLS MemSiz $tls ($((tls)) bytes)"
		assert_le "$((tls))" 64 "PT_TLS MemSiz ($tls)"
	fi
fi

# ---------------------------------------------------------------------------
t_begin "tls_smallstack runs at the edge of its stack (1104 bytes more kill it bare)"
run_bounded "$TMO" "$PROGS/tls_smallstack" 1104 >"$T_DIR/edge.out" 2>"$T_DIR/edge.err"
rc=$?
if [ "$rc" -lt 128 ]; then
	t_skip "this machine leaves its 16 KiB threads more stack (status $rc): the old library's TLS would not have killed it here"
else
	t_note "bare with 1104 bytes more: killed by SIG$(kill -l $((rc - 128)) 2>/dev/null)"
fi

t_begin "tls_smallstack with the library preloaded, no session: as bare"
bare_run ss "$PROGS/tls_smallstack"
assert_eq 0 "$BARE_RC" "bare status ($(head -c 300 "$T_DIR/ss.bare.err"))"
rc=0
env -u HEAPPROF_SOCKET LD_PRELOAD="$LIB" timeout -k 5 "$TMO" "$PROGS/tls_smallstack" \
	>"$T_DIR/ss.pre.out" 2>"$T_DIR/ss.pre.err" </dev/null || rc=$?
assert_eq 0 "$rc" "preloaded status$( [ "$rc" -gt 128 ] && echo " (signal $(kill -l $((rc - 128)) 2>/dev/null))")"
cmp -s "$T_DIR/ss.bare.out" "$T_DIR/ss.pre.out" ||
	t_fail "stdout differs: $(diff "$T_DIR/ss.bare.out" "$T_DIR/ss.pre.out" | head -n 6 | tr '\n' ' ')"

hostile_case smallstack 0 -- "$PROGS/tls_smallstack"

# ---------------------------------------------------------------------------
# After each -i 1 run of tls_churn: every handler's allocation had its
# thread's alternate stack (no record was missing), nothing was skipped.
churn_check() { # TAG DB OUT
	local st v rc=0
	for st in stack_unbounded reentrant_skipped stack_low; do
		v=$(sqlq "$2" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$st';")
		assert_eq 0 "$v" "$1: $st" || rc=1
	done
	return $rc
}
HC_CHECK=churn_check hostile_case churn 0 -- "$PROGS/tls_churn"

hostile_summary tls
t_summary
