#!/bin/bash
# bench/trace_read.sh BUILD_DIR
#
# The event trace of every allocation, written and read back, against
# heaptrack on the same run (issue 32; docs/PERFORMANCE.md, "The event
# trace: writing and reading it"): the python3 workload (bench/alloc.py 3,
# PYTHONMALLOC=malloc, PYTHONHASHSEED=0: about 3.6 million allocations and
# as many frees) recorded by
#   heapprof   record -i 1 --trace streaming (every event, the default
#              64 MiB buffer, no --block-client: events the session cannot
#              store in time are dropped and counted)
#   heaptrack  heaptrack -o F
# in turn, BENCH_TRACE_RUNS times (default 3), the first one rotating; then
# the files read back in turn, BENCH_TRACE_RUNS times each: heapprof
# report, flamegraph, flamegraph --from 1s --to 2s and pprof on the last
# heapprof profile, heaptrack_print on the last heaptrack file.  Prints the
# median wall time of each, the events heapprof kept and dropped, and the
# sizes of the files.  About a minute on 2 vCPUs.
#
# Environment: BENCH_TRACE_RUNS=N, BENCH_WORK=DIR (scratch; default
# BUILD/bench-work), BENCH_PY_ROUNDS (default 3).
set -u
export LC_ALL=C

die() {
	echo "trace_read: $*" >&2
	exit 2
}

[ $# -eq 1 ] || die "usage: bench/trace_read.sh BUILD_DIR"
BUILD=$(cd "$1" && pwd) || die "$1: no such build directory"
BENCH=$(cd "$(dirname "$0")" && pwd)
HP=$BUILD/heapprof
[ -x "$HP" ] || die "$HP: not built (make first)"
PY=/usr/bin/python3
[ -x "$PY" ] || die "$PY: missing"
command -v heaptrack >/dev/null && command -v heaptrack_print >/dev/null ||
	die "heaptrack and heaptrack_print needed (scripts/deps.sh --test)"
RUNS=${BENCH_TRACE_RUNS:-3}
ROUNDS=${BENCH_PY_ROUNDS:-3}
WORK=${BENCH_WORK:-$BUILD/bench-work}/trace
rm -rf "$WORK"
mkdir -p "$WORK" || die "cannot make $WORK"
export PYTHONMALLOC=malloc PYTHONHASHSEED=0

now() { date +%s.%N; }

# time_of NAME CMD...: runs CMD (output to $WORK/NAME.out, .err), appends
# its wall time in seconds to $WORK/NAME.t; the status is CMD's.
time_of() {
	local name=$1 t0 t1 rc=0
	shift
	t0=$(now)
	"$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
	t1=$(now)
	echo "$t1 - $t0" | bc -l >>"$WORK/$name.t"
	[ "$rc" = 0 ] || echo "trace_read: $name failed ($rc): $(head -c 300 "$WORK/$name.err")" >&2
	return $rc
}

median() { sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

rec_heapprof() {
	rm -f "$WORK/py.db"
	time_of record "$HP" record -i 1 --trace streaming -o "$WORK/py.db" -- \
		"$PY" "$BENCH/alloc.py" "$ROUNDS"
	grep -Eo 'trace \(streaming\): [0-9]+ events kept, [0-9]+ dropped' \
		"$WORK/record.err" >>"$WORK/kept"
}
rec_heaptrack() {
	rm -f "$WORK"/ht.*
	time_of heaptrack heaptrack -o "$WORK/ht" "$PY" "$BENCH/alloc.py" "$ROUNDS"
}
time_of bare "$PY" "$BENCH/alloc.py" "$ROUNDS" || exit 1
for ((r = 0; r < RUNS; r++)); do
	if ((r % 2)); then
		rec_heaptrack
		rec_heapprof
	else
		rec_heapprof
		rec_heaptrack
	fi
	time_of bare "$PY" "$BENCH/alloc.py" "$ROUNDS"
done
HT=$(ls "$WORK"/ht*.zst 2>/dev/null | head -n 1)
[ -s "$WORK/py.db" ] && [ -n "$HT" ] || die "no profile to read (see $WORK)"
for ((r = 0; r < RUNS; r++)); do
	time_of htprint heaptrack_print "$HT"
	time_of report "$HP" report "$WORK/py.db"
	time_of flamegraph "$HP" flamegraph "$WORK/py.db" -o "$WORK/fg.html"
	time_of flamegraph_window "$HP" flamegraph "$WORK/py.db" -o "$WORK/fgw.html" \
		--from 1s --to 2s
	time_of pprof "$HP" pprof "$WORK/py.db" -o "$WORK/py.pb.gz"
done

size() { stat -c %s "$1"; }
events=$("$HP" sql "$WORK/py.db" .headers\ off .mode\ list \
	"SELECT count(*) FROM heapprof_event" 2>/dev/null)
chunks=$(sqlite3 -readonly "$WORK/py.db" \
	"SELECT coalesce(sum(length(data)), 0) FROM heapprof_event_chunk" 2>/dev/null)
echo "== the event trace, written and read: python3 alloc.py $ROUNDS, -i 1 --trace streaming vs heaptrack (bench/trace_read.sh) =="
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; median of $RUNS runs, interleaved"
printf '%-40s %8s\n' "bare python3" "$(median "$WORK/bare.t") s"
# The events kept and dropped: once if every run says the same.
kept=$(sort -u "$WORK/kept" | tr '\n' ';' | sed 's/;$//; s/;/; /g')
[ "$(sort -u "$WORK/kept" | wc -l)" = 1 ] && kept="$kept (every run)"
printf '%-40s %8s   %s\n' "heapprof record -i 1 --trace" "$(median "$WORK/record.t") s" "$kept"
printf '%-40s %8s\n' "heaptrack" "$(median "$WORK/heaptrack.t") s"
printf '%-40s %8s\n' "heaptrack_print" "$(median "$WORK/htprint.t") s"
printf '%-40s %8s\n' "heapprof report" "$(median "$WORK/report.t") s"
printf '%-40s %8s\n' "heapprof flamegraph" "$(median "$WORK/flamegraph.t") s"
printf '%-40s %8s\n' "heapprof flamegraph --from 1s --to 2s" "$(median "$WORK/flamegraph_window.t") s"
printf '%-40s %8s\n' "heapprof pprof" "$(median "$WORK/pprof.t") s"
printf '%-40s %12s bytes (%s events; their chunks %s bytes, %s bytes an event)\n' \
	"heapprof profile" "$(size "$WORK/py.db")" "$events" "$chunks" \
	"$(echo "scale=2; $chunks / ($events + (${events:-0} == 0))" | bc -l)"
printf '%-40s %12s bytes\n' "heaptrack file" "$(size "$HT")"
