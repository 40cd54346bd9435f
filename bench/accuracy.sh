#!/bin/bash
# bench/accuracy.sh BUILD_DIR [PROFILES_DIR]
#
# Accuracy next to speed, on the workloads of bench/run.sh: for each
# workload, heapprof's sampled profiles (default: -i 4096 with DWARF
# unwinding; --unwind fp) against the exact profile of the same run
# configuration (-i 1; -i 1 --unwind fp), call stack by call stack; and
# the allocation totals every profiler reports (heaptrack, gperftools,
# jemalloc) against heapprof -i 1. The tables come from bench/accuracy.pl;
# see docs/BENCHMARKS.md, "Accuracy".
#
# PROFILES_DIR holds profiles bench/run.sh kept from its timed runs
# (WORKLOAD.MODE[...]; WORKLOAD.MODE.failed saying why a mode has none):
# they are used, and only what is missing is run here. Alone, everything
# is run here, once per mode and workload.
#
# Environment: as bench/run.sh (BENCH_QUICK, BENCH_WORKLOADS, BENCH_MODES,
# the sizes, BENCH_PYTHONMALLOC, BENCH_REDIS_PORT, BENCH_TIMEOUT,
# BENCH_WORK, BENCH_HEAPTRACK_MEM_MIB). Of BENCH_MODES, the profilers
# compared are default, fp, heaptrack (or heaptrack-raw), jemalloc,
# gperftools and massif; the exact -i 1 profiles are always made.
set -u
export LC_ALL=C

die() {
	echo "accuracy: $*" >&2
	exit 2
}
progress() { echo "accuracy: $*" >&2; }

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	die "usage: bench/accuracy.sh BUILD_DIR [PROFILES_DIR]"
fi
[ -d "$1" ] || die "$1: no such build directory (run make first)"
BUILD=$(cd "$1" && pwd)
KEEP=${2:-}
[ -z "$KEEP" ] || [ -d "$KEEP" ] || die "$KEEP: no such directory"
BENCH=$(cd "$(dirname "$0")" && pwd)
QUICK=${BENCH_QUICK:-0}
TIMEOUT=${BENCH_TIMEOUT:-600}
HT_MEM=${BENCH_HEAPTRACK_MEM_MIB:-8192}
WORK=${BENCH_WORK:-$BUILD/bench-work}
case $TIMEOUT in '' | *[!0-9]* | 0) die "BENCH_TIMEOUT must be a positive integer" ;; esac
case $HT_MEM in '' | *[!0-9]*) die "BENCH_HEAPTRACK_MEM_MIB must be an integer" ;; esac

# shellcheck source=bench/workloads.sh
. "$BENCH/workloads.sh"
wl_select

MODES=" $(echo "${BENCH_MODES:-default fp heaptrack jemalloc gperftools massif}" | tr ',' ' ') "
has_mode() { case $MODES in *" $1 "*) return 0 ;; esac; return 1; }
# What is compared: key for accuracy.pl, and the mode that makes it.
PLAN=(exact:i1)
has_mode default && PLAN+=(default:default)
has_mode fp && PLAN+=(exactfp:i1fp fp:fp)
if has_mode heaptrack || has_mode heaptrack-raw; then PLAN+=(heaptrack:heaptrack); fi
has_mode jemalloc && PLAN+=(jemalloc:jemalloc)
has_mode gperftools && PLAN+=(gperftools:gperftools)
has_mode massif && PLAN+=(massif:massif)

unset LD_PRELOAD MALLOC_CONF HEAPPROFILE HEAPCHECK
for v in $(env | sed -n 's/^\(HEAPPROF_[A-Za-z0-9_]*\|HEAP_PROFILE_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done

mkdir -p "$WORK/logs" "$WORK/scratch" || die "cannot create $WORK"
wl_bins
# The heapprof bench/run.sh measured (BENCH_SNAP), else a copy of the
# build's, so a rebuild meanwhile cannot mix two versions.
SNAP=${BENCH_SNAP:-}
if [ -z "$SNAP" ]; then
	SNAP=$WORK/snap-accuracy
	wl_snapshot "$SNAP"
else
	HEAPPROF=$SNAP/heapprof
	LIBHEAPPROF=$SNAP/libheapprof.so
fi
LIBJEMALLOC=$(find_lib libjemalloc.so.2)
LIBTCMALLOC=$(find_lib libtcmalloc.so.4)
[ -x "$HEAPPROF" ] || die "$HEAPPROF missing (run make first)"
wl_inputs

ACC=$WORK/accuracy
mkdir -p "$ACC"

# Why mode $1 cannot run on this machine, or nothing.
cannot_run() {
	case $1 in
	heaptrack) command -v heaptrack >/dev/null 2>&1 || echo "heaptrack not installed" ;;
	jemalloc) [ -n "$LIBJEMALLOC" ] || echo "libjemalloc.so.2 not found" ;;
	gperftools) [ -n "$LIBTCMALLOC" ] || echo "libtcmalloc.so.4 not found" ;;
	esac
}

# profile_of WL MODE: sets PROF to the profile file of MODE on workload
# WL (kept by run.sh, or made now), or to "!why" when there is none.
profile_of() {
	local wl=$1 mode=$2 base f status
	if [ "$mode" = massif ]; then
		# massif counts no allocations: nothing to run for a total.
		PROF="!reports no allocation count or total"
		return
	fi
	if [ -n "$KEEP" ] && [ -e "$KEEP/$wl.$mode.ok" ]; then
		base=$KEEP/$wl.$mode
	elif [ -n "$KEEP" ] && [ -s "$KEEP/$wl.$mode.failed" ]; then
		PROF="!failed in the timed runs: $(head -1 "$KEEP/$wl.$mode.failed")"
		return
	else
		PROF="!$(cannot_run "$mode")"
		[ "$PROF" != "!" ] && return
		base=$ACC/$wl.$mode
		rm -f "$base" "$base".*
		wl_runargs "$mode" "$base"
		local lim=()
		[ "$mode" = heaptrack ] && [ "$HT_MEM" -gt 0 ] && lim=(-m "$HT_MEM")
		progress "$wl: $mode"
		(cd "$WORK/scratch" &&
			timeout -k 10 $((TIMEOUT + 30)) "$RUNONE" -t "$TIMEOUT" "${lim[@]}" \
				-r "$ACC/res" "${RUNARGS[@]}") \
			>"$WORK/logs/$wl.accuracy.$mode.log" 2>&1 </dev/null
		status=$(sed -n 's/.*status=\([^ ]*\).*/\1/p' "$ACC/res" 2>/dev/null)
		if [ "$status" != exit:0 ]; then
			PROF="!failed: ${status:-runone failed}, see $WORK/logs/$wl.accuracy.$mode.log"
			return
		fi
	fi
	# The file itself: heapprof's and massif's have the given name,
	# heaptrack adds .zst, gperftools numbers its dumps (the last is
	# the one at exit, with the totals), jemalloc adds PID.SEQ.f.heap.
	local files=()
	case $mode in
	heaptrack) files=("$base.zst") ;;
	gperftools) files=("$base".[0-9]*.heap) ;; # in order: .0001, .0002, ...
	jemalloc) files=("$base".*.f.heap) ;;
	*) files=("$base") ;;
	esac
	f=${files[${#files[@]} - 1]}
	if [ -n "$f" ] && [ -s "$f" ]; then
		PROF=$f
	else
		PROF="!no profile file ($base*)"
	fi
}

T0=$(date +%s)
for wl in $WORKLOADS; do
	if ! workload "$wl"; then
		echo "== accuracy: $wl: skipped: $WHY =="
		echo
		continue
	fi
	args=()
	for p in "${PLAN[@]}"; do
		profile_of "$wl" "${p#*:}"
		args+=("${p%%:*}=$PROF")
	done
	progress "$wl: comparing"
	perl "$BENCH/accuracy.pl" "$HEAPPROF" "$wl" "$DESC" "${args[@]}" ||
		echo "(accuracy.pl failed on $wl)"
	# What was made here is not kept: the next run makes it again.
	rm -f "$ACC/$wl".*
done
rm -f "$ACC/res"
[ -n "$KEEP" ] || echo "accuracy: $(($(date +%s) - T0)) s"
