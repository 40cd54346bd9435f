#!/bin/bash
# bench/scale.sh BUILD_DIR
#
# The costs that grow with the work rather than with the program's speed
# (docs/BENCHMARKS.md, "Costs that grow with the work"):
#
#  1. the final dump of N distinct call stacks and the profile's size, for
#     N = 10k, 100k and 1M: `heapprof record -i 1` of bench/manystacks N
#     (exactly N stacks, a quarter of their blocks live at the end);
#  2. `heapprof pprof`, `report` and `flamegraph` on the largest profile;
#  3. the CPU of heapprofd, and of the session (`heapprof record -n`), per
#     million samples.
#
# Environment:
#   SCALE_STACKS="10000 100000 1000000"  the numbers of stacks
#   SCALE_RUNS=3         repetitions of each measurement (medians printed)
#   SCALE_SAMPLES=4000000  allocations (all sampled, -i 1) for part 3
#   SCALE_WORK=DIR       profiles, logs and scratch (BUILD/scale-work)
# The tables go to stdout and to BUILD/bench-results/scale-*.txt.
set -u
export LC_ALL=C

die() {
	echo "bench/scale: $*" >&2
	exit 2
}

[ $# -eq 1 ] || die "usage: bench/scale.sh BUILD_DIR"
[ -d "$1" ] || die "$1: no such build directory (run make first)"
BUILD=$(cd "$1" && pwd)
HP=$BUILD/heapprof
MANY=$BUILD/bench/manystacks
RUNONE=$BUILD/bench/runone
for f in "$HP" "$BUILD/heapprofd" "$BUILD/libheapprof.so" "$MANY" "$RUNONE"; do
	[ -e "$f" ] || die "$f is missing (make BUILD=$1 all $1/bench/manystacks $1/bench/runone)"
done
STACKS=${SCALE_STACKS:-10000 100000 1000000}
RUNS=${SCALE_RUNS:-3}
SAMPLES=${SCALE_SAMPLES:-4000000}
WORK=${SCALE_WORK:-$BUILD/scale-work}
case $RUNS in '' | *[!0-9]* | 0) die "SCALE_RUNS must be a positive integer" ;; esac
case $SAMPLES in '' | *[!0-9]* | 0) die "SCALE_SAMPLES must be a positive integer" ;; esac
for n in $STACKS; do
	case $n in '' | *[!0-9]*) die "SCALE_STACKS: '$n' is not a number" ;; esac
	[ "$n" -ge 2 ] || die "SCALE_STACKS: at least 2 stacks"
done
mkdir -p "$WORK" "$BUILD/bench-results" || exit 2
REPORT=$BUILD/bench-results/scale-$(date +%Y%m%d-%H%M%S).txt
: >"$REPORT"

out() { printf '%s\n' "$*" | tee -a "$REPORT"; }

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# field NAME of a runone result line
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" "$2"; }

q() { "$HP" sql "$1" "$2" --csv | tail -n +2; }

now_ns() { date +%s%N; }

# The shared region of `record -i 1` holds the stack table; its default
# (512 MiB) holds about 800k stacks of this depth.  1 KiB per stack, at
# least the default, leaves room (docs/BENCHMARKS.md).
shmem_for() {
	local b=$(($1 * 1024)) min=$((512 * 1024 * 1024))
	[ "$b" -lt "$min" ] && b=$min
	echo "$b"
}

# PID: CPU time of all its threads so far, in ns (schedstat: ns, where
# /proc/PID/stat counts 10 ms ticks).
cpu_ns() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { if (NR) print s }'
}

out "== bench/scale.sh: costs that grow with the work ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
out "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
out "runs: $RUNS per measurement, medians"
out ""

# ---- 1. the dump of N stacks --------------------------------------------
out "== 1. heapprof record -i 1 -- bench/manystacks N: the final dump"
out "dump ms: heapprof_dump.write_ms, from reading the regions to the dump committed"
out "after exit s: from the end of the program's main to the end of heapprof record"
out "  (final dump, indexes, folding the WAL into the file, exit)"
out ""
hdr=$(printf '%9s %10s %10s %9s %9s %12s %12s' stacks callsites "rows" "dump ms" "after s" "record s" "profile MiB")
out "$hdr"
LARGEST=""
for n in $STACKS; do
	shm=$(shmem_for "$n")
	db="$WORK/stacks-$n.db"
	: >"$WORK/dump-$n.ms"
	: >"$WORK/after-$n.s"
	: >"$WORK/record-$n.s"
	ok=1
	for r in $(seq 1 "$RUNS"); do
		log="$WORK/record-$n.$r.log"
		"$RUNONE" -t 600 -r "$WORK/record-$n.$r.res" -- \
			"$HP" record -i 1 --shmem-size "$shm" -o "$db" -- "$MANY" "$n" >"$log" 2>&1
		t_end=$(now_ns)
		if [ "$(field status "$WORK/record-$n.$r.res")" != exit:0 ]; then
			out "  $n stacks, run $r failed: $(cat "$WORK/record-$n.$r.res") (log: $log)"
			ok=0
			break
		fi
		field seconds "$WORK/record-$n.$r.res" >>"$WORK/record-$n.s"
		p_end=$(sed -n 's/.*end_ns=\([0-9]*\).*/\1/p' "$log")
		[ -n "$p_end" ] && echo "$(((t_end - p_end) / 1000000))" |
			awk '{ printf "%.3f\n", $1 / 1000 }' >>"$WORK/after-$n.s"
		# write_ms is missing in profiles of heapprof before it
		q "$db" "SELECT write_ms FROM heapprof_dump WHERE reason = 'end'" \
			>>"$WORK/dump-$n.ms" 2>/dev/null
	done
	[ "$ok" = 1 ] || continue
	full=$(q "$db" "SELECT value FROM heapprof_process_stats WHERE name = 'stack_table_full'")
	[ "${full:-0}" = 0 ] || out "  warning: $n stacks: $full samples found the stack table full (more --shmem-size)"
	cs=$(q "$db" "SELECT count(*) FROM stack_profile_callsite")
	rows=$(q "$db" "SELECT count(*) FROM heap_profile_allocation")
	size=$(stat -c %s "$db")
	dump=$(median <"$WORK/dump-$n.ms")
	line=$(printf '%9s %10s %10s %9s %9.2f %12.2f %12.1f' "$n" "$cs" "$rows" \
		"$([ -n "$dump" ] && printf '%.0f' "$dump" || echo n/a)" \
		"$(median <"$WORK/after-$n.s")" "$(median <"$WORK/record-$n.s")" \
		"$(echo "$size" | awk '{ print $1 / 1048576 }')")
	out "$line"
	LARGEST=$n
done
out ""
out "stacks: distinct stacks of the program (the profile has 2 more: its own"
out "  calloc and stdio's buffer); rows: heap_profile_allocation rows"

# ---- 2. reading the largest profile -------------------------------------
if [ -n "$LARGEST" ]; then
	db="$WORK/stacks-$LARGEST.db"
	out ""
	out "== 2. reading the profile of $LARGEST stacks ($(($(stat -c %s "$db") / 1048576)) MiB)"
	out "$(printf '%-28s %9s %9s %14s' command seconds "cpu s" "peak RSS MiB")"
	for cmd in pprof report flamegraph; do
		: >"$WORK/$cmd.s"
		: >"$WORK/$cmd.cpu"
		: >"$WORK/$cmd.rss"
		case $cmd in
		pprof) args=(pprof -o "$WORK/largest.pb.gz" "$db") ;;
		report) args=(report "$db") ;;
		flamegraph) args=(flamegraph -o "$WORK/largest.html" "$db") ;;
		esac
		bad=""
		for r in $(seq 1 "$RUNS"); do
			res="$WORK/$cmd.$r.res"
			"$RUNONE" -t 600 -r "$res" -- "$HP" "${args[@]}" \
				>"$WORK/$cmd.$r.out" 2>"$WORK/$cmd.$r.err"
			if [ "$(field status "$res")" != exit:0 ]; then
				bad="failed: $(cat "$res") ($WORK/$cmd.$r.err)"
				break
			fi
			field seconds "$res" >>"$WORK/$cmd.s"
			field cpu_seconds "$res" >>"$WORK/$cmd.cpu"
			field maxrss_kib "$res" >>"$WORK/$cmd.rss"
		done
		if [ -n "$bad" ]; then
			out "$(printf '%-28s %s' "heapprof $cmd" "$bad")"
			continue
		fi
		out "$(printf '%-28s %9.2f %9.2f %14.0f' "heapprof ${args[0]}" \
			"$(median <"$WORK/$cmd.s")" "$(median <"$WORK/$cmd.cpu")" \
			"$(median <"$WORK/$cmd.rss" | awk '{ print $1 / 1024 }')")"
	done
fi

# ---- 3. the daemon and a session per million samples --------------------
out ""
out "== 3. heapprofd and a session (record -n NAME -i 1), CPU per million samples"
X=$(mktemp -d "$WORK/xdg.XXXXXX") || exit 2
chmod 700 "$X"
export XDG_RUNTIME_DIR=$X
DPID=""
RPID=""
cleanup() {
	[ -n "$RPID" ] && kill "$RPID" 2>/dev/null
	[ -n "$DPID" ] && "$HP" daemon --stop >/dev/null 2>&1
	rm -rf "$X"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# 1024 stacks, SAMPLES / 1024 rounds: the session's dumps stay small, the
# samples are all the client's work.
ROUNDS=$(((SAMPLES + 1023) / 1024))
if ! "$BUILD/heapprofd" >"$WORK/daemon.out" 2>&1; then
	out "  heapprofd did not start: $(cat "$WORK/daemon.out")"
	exit 1
fi
DPID=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$WORK/daemon.out")
: >"$WORK/daemon.ms"
: >"$WORK/session.ms"
for r in $(seq 1 "$RUNS"); do
	db="$WORK/daemon-$r.db"
	err="$WORK/session-$r.err"
	"$HP" record -n manystacks -i 1 -o "$db" 2>"$err" &
	RPID=$!
	for _ in $(seq 1 200); do
		grep -q "session [0-9]* started" "$err" 2>/dev/null && break
		sleep 0.05
	done
	d0=$(cpu_ns "$DPID")
	LD_PRELOAD=$BUILD/libheapprof.so "$MANY" 1024 "$ROUNDS" >"$WORK/daemon-prog-$r.out" 2>&1
	# The session dumps a process that exits; wait for that dump.
	for _ in $(seq 1 600); do
		[ -n "$(q "$db" "SELECT 1 FROM heapprof_dump WHERE reason = 'disconnect'" 2>/dev/null)" ] && break
		sleep 0.05
	done
	s1=$(cpu_ns "$RPID")
	kill -INT "$RPID"
	wait "$RPID"
	RPID=""
	d1=$(cpu_ns "$DPID")
	n=$(q "$db" "SELECT value FROM heapprof_process_stats WHERE name = 'samples'")
	if [ -z "$n" ] || [ "$n" = 0 ] || [ -z "$d0" ] || [ -z "$d1" ] || [ -z "$s1" ]; then
		out "  run $r: no samples recorded ($err)"
		continue
	fi
	awk -v d=$((d1 - d0)) -v n="$n" \
		'BEGIN { printf "%.3f\n", d / 1e6 / (n / 1e6) }' >>"$WORK/daemon.ms"
	awk -v s="$s1" -v n="$n" \
		'BEGIN { printf "%.3f\n", s / 1e6 / (n / 1e6) }' >>"$WORK/session.ms"
	SAMPLES_SEEN=$n
done
"$HP" daemon --stop >/dev/null 2>&1
DPID=""
if [ -s "$WORK/daemon.ms" ]; then
	out "samples per run: ${SAMPLES_SEEN:-?} (1024 stacks)"
	out "$(printf '%-40s %12.3f' "heapprofd, CPU ms per million samples" "$(median <"$WORK/daemon.ms")")"
	out "$(printf '%-40s %12.3f' "session, CPU ms per million samples" "$(median <"$WORK/session.ms")")"
	out "(the session's CPU is its whole life but closing the profile: waiting,"
	out " attaching the process and its dump at exit)"
fi
out ""
out "report: $REPORT"
