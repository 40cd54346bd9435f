#!/bin/bash
# bench/run.sh BUILD_DIR
#
# Measures heapprof's overhead against running bare and against the other
# heap profilers (heaptrack, jemalloc's and gperftools' heap profilers,
# Valgrind massif), on a malloc microbenchmark, a deep-stack program of
# interpreter shape (bench/deepalloc.c) and on real programs
# (sqlite3, cc1, perl, python3: wall time; a redis server under
# redis-benchmark: throughput). Every mode of a workload is measured side
# by side in the same run, round-robin within each repetition so that
# drift of the machine (thermal, other load) spreads over all modes
# alike. Then the accuracy of the sampled profiles and the allocation
# totals each profiler reports (bench/accuracy.sh). See docs/BENCHMARKS.md.
#
# Environment:
#   BENCH_RUNS=N          repetitions per mode (default 5)
#   BENCH_SLOW_RUNS=N     repetitions of the slow modes, default 1: they
#                         run in the last N repetitions, in turn with the
#                         others
#   BENCH_SLOW_MODES=...  the slow modes (default "trace trace-ring
#                         gperftools massif": 5 to 50 times bare, they
#                         would take most of the time with 5 repetitions)
#   BENCH_QUICK=1         smoke run: 1 repetition, small inputs
#   BENCH_WORKLOADS=...   subset of: malloc1 malloc2 malloc8 deep sqlite3 cc1
#                         perl python3 redis ("malloc" = the three
#                         mallocbench ones)
#   BENCH_MODES=...       subset of: bare idle default nopeak i1 i1-nopeak fp trace
#                         trace-ring heaptrack heaptrack-raw jemalloc-bare
#                         jemalloc tcmalloc-bare gperftools massif (bare is
#                         always run)
#   BENCH_TIMEOUT=S       limit for one run, seconds (default 600)
#   BENCH_MASSIF_MAX_RATIO=R  massif is skipped on a workload when R times
#                         the bare median exceeds BENCH_TIMEOUT (default 60)
#   BENCH_HEAPTRACK_MEM_MIB=M  address-space limit for heaptrack runs
#                         (default 8192; 0 = none)
#   BENCH_MB_OPS, BENCH_DEEP_ALLOCS, BENCH_SQL_ROWS, BENCH_CC1_FUNCS, BENCH_PERL_ROUNDS,
#   BENCH_PY_ROUNDS, BENCH_REDIS_REQUESTS
#                         override a workload's size
#   BENCH_PYTHONMALLOC=A  CPython's allocator in the python3 workload
#                         (default malloc; empty = its own, pymalloc)
#   BENCH_REDIS_PORT=P    the redis server listens on 127.0.0.1, on the
#                         first free port from P (default 16379)
#   BENCH_REDIS_START_TIMEOUT=S  how long bench/redis.sh waits for the
#                         server to answer PING (default 120)
#   BENCH_WORK=DIR        inputs, logs and scratch (default BUILD/bench-work)
#   BENCH_ACCURACY=0      leave out the accuracy tables (bench/accuracy.sh;
#                         alone: bench/accuracy.sh BUILD_DIR)
#   BENCH_API=0           leave out the custom allocator API's cost per
#                         call with no session (bench/api_idle, a few
#                         seconds; alone: make bench-api)
#   BENCH_ATTACH=0        leave out the last table: the time `record -p`
#                         takes to attach to a running process, idle and
#                         busy, against `heaptrack -p` (bench/attach.sh)
#   BENCH_TRACE_READ=0    leave out the event trace's table: record -i 1
#                         --trace of python3 alloc.py 3 against heaptrack,
#                         and report, flamegraph and pprof of it against
#                         heaptrack_print (bench/trace_read.sh, about a
#                         minute; BENCH_TRACE_RUNS=N repetitions, default 3)
#   BENCH_ATTACH_RUNS=N   its repetitions here (default 2, 20 to 45 s;
#                         alone, make bench-attach: 10)
# Results: a table per workload on stdout, kept with the raw numbers in
# BUILD/bench-results/: results-*.tsv, one line per run (workload mode rep
# status seconds maxrss_kib cpu_seconds output_bytes why requests_per_s;
# the last for a throughput workload only), notes-*.tsv (workload,
# description, metric: time or rps).
set -u
export LC_ALL=C

die() {
	echo "bench: $*" >&2
	exit 2
}

[ $# -eq 1 ] || die "usage: bench/run.sh BUILD_DIR"
[ -d "$1" ] || die "$1: no such build directory (run make first)"
BUILD=$(cd "$1" && pwd)
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)

QUICK=${BENCH_QUICK:-0}
[ "$QUICK" = 0 ] && DEF_RUNS=5 || DEF_RUNS=1
RUNS=${BENCH_RUNS:-$DEF_RUNS}
SLOW_RUNS=${BENCH_SLOW_RUNS:-1}
SLOW_MODES=$(echo "${BENCH_SLOW_MODES-trace trace-ring gperftools massif}" | tr ',' ' ')
TIMEOUT=${BENCH_TIMEOUT:-600}
MASSIF_MAX_RATIO=${BENCH_MASSIF_MAX_RATIO:-60}
HT_MEM=${BENCH_HEAPTRACK_MEM_MIB:-8192}
WORK=${BENCH_WORK:-$BUILD/bench-work}
RESDIR=$BUILD/bench-results
case $RUNS in '' | *[!0-9]* | 0) die "BENCH_RUNS must be a positive integer" ;; esac
case $SLOW_RUNS in '' | *[!0-9]* | 0) die "BENCH_SLOW_RUNS must be a positive integer" ;; esac
case $TIMEOUT in '' | *[!0-9]* | 0) die "BENCH_TIMEOUT must be a positive integer" ;; esac
case $MASSIF_MAX_RATIO in '' | *[!0-9]* | 0) die "BENCH_MASSIF_MAX_RATIO must be a positive integer" ;; esac
case $HT_MEM in '' | *[!0-9]*) die "BENCH_HEAPTRACK_MEM_MIB must be an integer" ;; esac
[ "$SLOW_RUNS" -gt "$RUNS" ] && SLOW_RUNS=$RUNS

# shellcheck source=bench/workloads.sh
. "$BENCH/workloads.sh"
wl_select

ALL_MODES="bare idle default nopeak i1 i1-nopeak fp trace trace-ring heaptrack heaptrack-raw jemalloc-bare jemalloc tcmalloc-bare gperftools massif"
MODES="bare"
for m in $(echo "${BENCH_MODES:-$ALL_MODES}" | tr ',' ' '); do
	case " $ALL_MODES " in
	*" $m "*) [ "$m" = bare ] || MODES="$MODES $m" ;;
	*) die "unknown mode '$m' (known: $ALL_MODES)" ;;
	esac
done
for m in $SLOW_MODES; do
	case " $ALL_MODES " in *" $m "*) ;; *) die "BENCH_SLOW_MODES: unknown mode '$m'" ;; esac
done
is_slow() { case " $SLOW_MODES " in *" $1 "*) return 0 ;; esac; return 1; }

# Nothing of a surrounding profiler may leak into the bare and idle runs:
# "idle" means the client is loaded with no collector to talk to, and the
# peers' modes set their own variables.
unset LD_PRELOAD MALLOC_CONF HEAPPROFILE HEAPCHECK
for v in $(env | sed -n 's/^\(HEAPPROF_[A-Za-z0-9_]*\|HEAP_PROFILE_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done

mkdir -p "$WORK/logs" "$WORK/scratch" "$RESDIR" || die "cannot create $WORK"
STAMP=$(date +%Y%m%d-%H%M%S)
TSV=$RESDIR/results-$STAMP.tsv
REPORT=$RESDIR/report-$STAMP.txt
NOTES=$RESDIR/notes-$STAMP.tsv
: >"$TSV"
: >"$NOTES"
# The profile of the first successful run of each mode bench/accuracy.sh
# reads, or WORKLOAD.MODE.failed saying why there is none.
KEEP=$WORK/profiles
KEEP_MODES="default i1 fp heaptrack jemalloc gperftools"
rm -rf "$KEEP"
mkdir -p "$KEEP" || die "cannot create $KEEP"

note() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$NOTES"; }
say() { echo "$*" | tee -a "$REPORT"; }
progress() { echo "bench: $*" >&2; }

# ---- tools -----------------------------------------------------------

want_mode() { case " $MODES " in *" $1 "*) return 0 ;; esac; return 1; }
want_any() {
	local m
	for m in "$@"; do want_mode "$m" && return 0; done
	return 1
}
ACCURACY=${BENCH_ACCURACY:-1}

# Debian packages the selected workloads and modes need, installed only
# when missing (as scripts/deps.sh does for the build).
need=""
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v timeout >/dev/null 2>&1 || need="$need coreutils"
wl_wanted sqlite3 && ! command -v sqlite3 >/dev/null 2>&1 && need="$need sqlite3"
wl_wanted perl && ! command -v perl >/dev/null 2>&1 && need="$need perl"
wl_wanted python3 && [ ! -x "$PYTHON3" ] && need="$need python3"
if wl_wanted redis; then
	command -v redis-server >/dev/null 2>&1 || need="$need redis-server"
	command -v redis-benchmark >/dev/null 2>&1 || need="$need redis-tools"
fi
if want_any heaptrack heaptrack-raw; then
	command -v heaptrack >/dev/null 2>&1 || need="$need heaptrack"
	command -v zstd >/dev/null 2>&1 || need="$need zstd"
fi
if want_any jemalloc-bare jemalloc; then
	[ -n "$(find_lib libjemalloc.so.2)" ] || need="$need libjemalloc2"
fi
if want_any tcmalloc-bare gperftools; then
	[ -n "$(find_lib libtcmalloc.so.4)" ] || need="$need libgoogle-perftools4"
fi
want_mode massif && ! command -v valgrind >/dev/null 2>&1 && need="$need valgrind"
if [ -n "$need" ]; then
	if [ "$(id -u)" = 0 ]; then
		progress "installing Debian packages:$need"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >/dev/null 2>&1
		# shellcheck disable=SC2086 # a list of package names
		apt-get install -y -qq --no-install-recommends $need >/dev/null 2>&1 ||
			progress "apt-get install$need failed; going on without"
	else
		progress "missing:$need (run as root to install); going on without"
	fi
fi
command -v perl >/dev/null 2>&1 || die "perl is needed to generate inputs and tables"
command -v timeout >/dev/null 2>&1 || die "timeout (coreutils) is needed"

wl_bins
# Measure a snapshot of the profiler (wl_snapshot).
SNAP=$WORK/snap
wl_snapshot "$SNAP"
LIBJEMALLOC=$(find_lib libjemalloc.so.2)
LIBTCMALLOC=$(find_lib libtcmalloc.so.4)

# Modes that cannot run at all are skipped with the reason in the table,
# rather than timing the same failure five times.
declare -A SKIP_MODE
if [ ! -f "$LIBHEAPPROF" ]; then
	SKIP_MODE[idle]="skipped: $BUILD/libheapprof.so missing"
fi
# probe MODE: runs /bin/true in MODE; sets why when it failed or (for a
# profiler) wrote no profile.
probe() {
	local out=$WORK/scratch/probe.out res=$WORK/scratch/probe.res
	rm -f "$out" "$out".* "$res"
	mode_cmd "$1" "$out"
	why=""
	if ! "$RUNONE" -t 60 -r "$res" "${MENV[@]}" -- "${PRE[@]}" /bin/true \
		>"$WORK/logs/probe.$1.log" 2>&1 </dev/null; then
		why="skipped: runone failed"
	elif ! grep -q 'status=exit:0' "$res"; then
		why="skipped: $2 -- /bin/true failed ($(sed 's/ .*//' "$res"), see $WORK/logs/probe.$1.log)"
	elif [ -n "${3:-}" ] && [ "$(cat "$out" "$out".* 2>/dev/null | wc -c)" -eq 0 ]; then
		why="skipped: $2 -- /bin/true wrote no profile (see $WORK/logs/probe.$1.log)"
	fi
	rm -f "$out" "$out".*
}
if [ ! -x "$HEAPPROF" ]; then
	why="skipped: $BUILD/heapprof missing"
else
	probe default "'heapprof record'" profile
fi
if [ -n "$why" ]; then
	for m in default i1 fp trace trace-ring; do SKIP_MODE[$m]=$why; done
fi
if ! command -v heaptrack >/dev/null 2>&1; then
	SKIP_MODE[heaptrack]="skipped: heaptrack not installed"
	SKIP_MODE[heaptrack-raw]="skipped: heaptrack not installed"
fi
if [ -z "$LIBJEMALLOC" ]; then
	SKIP_MODE[jemalloc-bare]="skipped: libjemalloc.so.2 not found (Debian: libjemalloc2)"
	SKIP_MODE[jemalloc]=${SKIP_MODE[jemalloc-bare]}
elif want_mode jemalloc; then
	# Debian's build has the profiler; another build may not.
	probe jemalloc "jemalloc with MALLOC_CONF=prof:true" profile
	[ -n "$why" ] && SKIP_MODE[jemalloc]=$why
fi
if [ -z "$LIBTCMALLOC" ]; then
	SKIP_MODE[tcmalloc-bare]="skipped: libtcmalloc.so.4 not found (Debian: libgoogle-perftools4)"
	SKIP_MODE[gperftools]=${SKIP_MODE[tcmalloc-bare]}
elif want_mode gperftools; then
	probe gperftools "tcmalloc with HEAPPROFILE" profile
	[ -n "$why" ] && SKIP_MODE[gperftools]=$why
fi
if ! command -v valgrind >/dev/null 2>&1; then
	SKIP_MODE[massif]="skipped: valgrind not installed"
fi

# ---- inputs ------------------------------------------------------------

wl_inputs

# ---- one run -------------------------------------------------------------

# run_one WORKLOAD MODE REP: runs it, appends a line to $TSV:
# workload mode rep status seconds maxrss_kib cpu_seconds output_bytes why
# requests_per_s (a throughput workload's `THROUGHPUT N` line, else empty)
run_one() {
	local wl=$1 mode=$2 rep=$3
	local out=$WORK/scratch/out.$wl.$mode
	local log=$WORK/logs/$wl.$mode.$rep.log
	local res=$WORK/scratch/res
	local lim=()
	rm -f "$out" "$out".* "$res"
	wl_runargs "$mode" "$out"
	case $mode in heaptrack*) [ "$HT_MEM" -gt 0 ] && lim=(-m "$HT_MEM") ;; esac

	(cd "$WORK/scratch" &&
		timeout -k 10 $((TIMEOUT + 30)) "$RUNONE" -t "$TIMEOUT" "${lim[@]}" \
			-r "$res" "${RUNARGS[@]}") \
		>"$log" 2>&1 </dev/null
	local line status secs rss cpu
	line=$(cat "$res" 2>/dev/null)
	if [ -z "$line" ]; then
		status="runone-failed" secs=0 rss=0 cpu=0
	else
		status=$(echo "$line" | sed -n 's/.*status=\([^ ]*\).*/\1/p')
		secs=$(echo "$line" | sed -n 's/.*seconds=\([0-9.]*\) maxrss.*/\1/p')
		rss=$(echo "$line" | sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p')
		cpu=$(echo "$line" | sed -n 's/.*cpu_seconds=\([0-9.]*\).*/\1/p')
	fi
	# A profiler must not change what the program computes.
	if [ "$status" = exit:0 ] && [ "$mode" != bare ]; then
		local got
		got=$(grep '^RESULT' "$log" | md5sum | cut -c1-32)
		[ "$got" = "${REF[$wl]}" ] || status="wrong-output"
	fi
	# ... and a throughput workload's run is worth its requests/s.
	local rate=""
	if [ "$METRIC" = rps ]; then
		rate=$(sed -n 's/^THROUGHPUT \([0-9.]*\)$/\1/p' "$log" | tail -1)
		[ "$status" = exit:0 ] && [ -z "$rate" ] && status="no-throughput"
	fi
	# ... and a profiler run that wrote no profile did not work.
	local bytes=0
	case $mode in
	bare | idle | *-bare) ;;
	*)
		bytes=$(cat "$out" "$out".* 2>/dev/null | wc -c)
		[ "$status" = exit:0 ] && [ "$bytes" -eq 0 ] && status="no-profile"
		;;
	esac
	# For a failure, the first line of the log that looks like why.
	local why=""
	if [ "$status" != exit:0 ] && [ "$status" != timeout ]; then
		why=$(grep -v '^RESULT' "$log" | grep -m1 -iE \
			'error|terminate called|what\(\)|segmentation|abort|denied|cannot|failed|killed' |
			tr '\t' ' ' | cut -c1-90)
	fi
	# The first good profile of the modes accuracy.sh reads is kept,
	# moved only after the measurement.
	case " $KEEP_MODES " in
	*" $mode "*)
		if [ "$status" = exit:0 ] && [ ! -e "$KEEP/$wl.$mode.ok" ]; then
			local f
			for f in "$out" "$out".*; do
				[ -e "$f" ] && mv "$f" "$KEEP/$wl.$mode${f#"$out"}"
			done
			rm -f "$KEEP/$wl.$mode.failed"
			: >"$KEEP/$wl.$mode.ok"
		elif [ "$status" != exit:0 ] && [ ! -e "$KEEP/$wl.$mode.ok" ]; then
			echo "$status${why:+: $why}" >"$KEEP/$wl.$mode.failed"
		fi
		;;
	esac
	rm -f "$out" "$out".*
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$wl" "$mode" "$rep" "$status" \
		"${secs:-0}" "${rss:-0}" "${cpu:-0}" "$bytes" "$why" "$rate" >>"$TSV"
	LAST_STATUS=$status
	progress "$(printf '%-8s %-13s run %d/%d  %-12s %8ss%s' "$wl" "$mode" "$rep" "$RUNS" "$status" "$secs" \
		"${rate:+  $rate requests/s}")"
}

# The median of the numbers in the arguments.
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2];
		else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ---- the machine -----------------------------------------------------------

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem_total=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$ROOT" status --porcelain -- src include 2>/dev/null)" ] && commit="$commit (+ uncommitted changes in src/)"
ht_ver=$(heaptrack --version 2>/dev/null | head -1)
pkg_ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null; }
je_ver=$(pkg_ver libjemalloc2)
gp_ver=$(pkg_ver libgoogle-perftools4)
vg_ver=$(valgrind --version 2>/dev/null)
: >"$REPORT"
say "heapprof benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
say "machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, $mem_total RAM"
say "kernel:  $(uname -sr); $(ldd --version 2>&1 | head -1 | sed 's/^ldd //')"
py_ver=$("$PYTHON3" -c 'import platform; print(platform.python_version())' 2>/dev/null)
redis_ver=$(redis-server --version 2>/dev/null | sed -n 's/.* v=\([^ ]*\).*/\1/p')
say "tools:   gcc $(gcc -dumpfullversion 2>/dev/null), sqlite3 $(sqlite3 --version 2>/dev/null | cut -d' ' -f1), perl $(perl -e 'printf "%vd", $^V'), python3 ${py_ver:--}, redis ${redis_ver:--}"
say "peers:   ${ht_ver:-heaptrack not installed}, jemalloc ${je_ver:-${LIBJEMALLOC:-not installed}}, gperftools ${gp_ver:-${LIBTCMALLOC:-not installed}}, ${vg_ver:-valgrind not installed}"
say "heapprof: commit $commit, $BUILD"
say "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
slow=""
[ -n "${SLOW_MODES// /}" ] && [ "$SLOW_RUNS" -lt "$RUNS" ] && slow=" ($SLOW_RUNS for the slow modes: $SLOW_MODES)"
say "runs:    $RUNS per mode$slow, round-robin; timeout ${TIMEOUT}s per run; workloads:$WORKLOADS"
for m in "${!SKIP_MODE[@]}"; do
	want_mode "$m" && say "note:    mode $m ${SKIP_MODE[$m]}"
done
say ""

# ---- the runs ----------------------------------------------------------------

declare -A REF
T0=$(date +%s)
for wl in $WORKLOADS; do
	if ! workload "$wl"; then
		say "== $wl: skipped: $WHY =="
		say ""
		continue
	fi
	note "$wl" "$DESC" "$METRIC"
	# Warm-up (page cache, lazy binding) and the reference output.
	progress "$wl: warm-up"
	wlog=$WORK/logs/$wl.warmup.log
	wl_runargs bare ""
	(cd "$WORK/scratch" && timeout -k 10 $((TIMEOUT + 30)) "$RUNONE" -t "$TIMEOUT" \
		-r "$WORK/scratch/res" "${RUNARGS[@]}") >"$wlog" 2>&1 </dev/null
	if ! grep -q 'status=exit:0' "$WORK/scratch/res" 2>/dev/null; then
		say "== $wl: skipped: bare warm-up run failed ($(cat "$WORK/scratch/res" 2>/dev/null)), see $wlog =="
		say ""
		continue
	fi
	REF[$wl]=$(grep '^RESULT' "$wlog" | md5sum | cut -c1-32)
	# Bare times so far, the warm-up's first: what massif's skip rule
	# estimates from.
	bare_times=("$(sed -n 's/.*seconds=\([0-9.]*\) maxrss.*/\1/p' "$WORK/scratch/res")")

	run_modes=()
	for m in $MODES; do
		if [ -n "${SKIP_MODE[$m]:-}" ]; then
			printf '%s\t%s\t0\t%s\t0\t0\t0\t0\n' "$wl" "$m" "${SKIP_MODE[$m]}" >>"$TSV"
		else
			run_modes+=("$m")
		fi
	done
	n=${#run_modes[@]}
	declare -A GAVE_UP=()
	for rep in $(seq 1 "$RUNS"); do
		# Rotate the starting mode each repetition, so no mode always
		# runs right after the same other one.
		for i in $(seq 0 $((n - 1))); do
			m=${run_modes[$(((i + rep - 1) % n))]}
			# A mode that timed out once would time out again: do
			# not spend the limit N times.
			[ -n "${GAVE_UP[$m]:-}" ] && continue
			# The slow modes run in the last SLOW_RUNS repetitions
			# only, still in turn with the others.
			is_slow "$m" && [ "$rep" -le $((RUNS - SLOW_RUNS)) ] && continue
			if [ "$m" = massif ]; then
				est=$(median "${bare_times[@]}")
				if awk -v b="$est" -v r="$MASSIF_MAX_RATIO" -v t="$TIMEOUT" 'BEGIN { exit !(b * r > t) }'; then
					printf '%s\t%s\t%s\t%s\t0\t0\t0\t0\n' "$wl" "$m" "$rep" \
						"$(awk -v b="$est" -v r="$MASSIF_MAX_RATIO" -v t="$TIMEOUT" 'BEGIN {
							printf "skipped: would take ~%.0f s (bare %.2f s x %d > BENCH_TIMEOUT %d s)", b * r, b, r, t }')" >>"$TSV"
					GAVE_UP[$m]=1
					progress "$wl: massif skipped: bare ${est}s x $MASSIF_MAX_RATIO > ${TIMEOUT}s"
					continue
				fi
			fi
			run_one "$wl" "$m" "$rep"
			[ "$LAST_STATUS" = timeout ] && GAVE_UP[$m]=1
			[ "$m" = bare ] && [ "$LAST_STATUS" = exit:0 ] &&
				bare_times+=("$(tail -1 "$TSV" | cut -f5)")
		done
	done
	perl "$BENCH/summarize.pl" "$TSV" "$NOTES" "$wl" "$MODES" | tee -a "$REPORT"
done
T1=$(date +%s)

# ---- accuracy ----------------------------------------------------------------

# The sampled profiles against the exact ones, and the allocation totals
# every profiler reports, from the profiles kept above (accuracy.sh runs
# what is missing, e.g. heapprof -i 1 --unwind fp).
if [ "$ACCURACY" != 0 ] && ! want_any default fp heaptrack heaptrack-raw jemalloc gperftools massif; then
	say "== accuracy: skipped: none of its modes selected (default fp heaptrack jemalloc gperftools massif) =="
	say ""
elif [ "$ACCURACY" != 0 ]; then
	progress "accuracy"
	BENCH_WORK=$WORK BENCH_WORKLOADS="$WORKLOADS" BENCH_QUICK=$QUICK \
		BENCH_MB_OPS=$MB_OPS BENCH_DEEP_ALLOCS=$DEEP_ALLOCS BENCH_SQL_ROWS=$SQL_ROWS BENCH_CC1_FUNCS=$CC1_FUNCS \
		BENCH_PERL_ROUNDS=$PERL_ROUNDS BENCH_PY_ROUNDS=$PY_ROUNDS \
		BENCH_PYTHONMALLOC=$PY_MALLOC BENCH_REDIS_REQUESTS=$REDIS_REQUESTS \
		BENCH_TIMEOUT=$TIMEOUT BENCH_SNAP=$SNAP \
		BENCH_HEAPTRACK_MEM_MIB=$HT_MEM BENCH_MODES="$MODES" \
		"$BENCH/accuracy.sh" "$BUILD" "$KEEP" | tee -a "$REPORT"
fi
T2=$(date +%s)

# ---- the custom allocator API ------------------------------------------------

# ns per AHeapProfile_* call in a program linked with -lheapprof that no
# session profiles (docs/HEAPS.md); `make bench` builds it.
if [ "${BENCH_API:-1}" != 0 ]; then
	API=$BUILD/bench/api_idle
	say "== custom allocator API, no session: bench/api_idle =="
	if [ ! -x "$API" ]; then
		say "skipped: $API missing (make bench builds it)"
	else
		[ "$QUICK" = 0 ] && api_args=() || api_args=(3 5)
		progress "api_idle: measuring"
		timeout -k 5 120 "$API" "${api_args[@]}" >"$WORK/logs/api_idle.log" 2>&1 </dev/null
		rc=$?
		tee -a "$REPORT" <"$WORK/logs/api_idle.log"
		[ "$rc" = 0 ] || say "api_idle failed (status $rc)"
	fi
	say ""
fi

# ---- attaching to a running process -------------------------------------------

# record -p into a process that never loaded the library, against
# heaptrack -p (docs/PERFORMANCE.md); `make bench` builds the target.
T3=$(date +%s)
if [ "${BENCH_ATTACH:-1}" != 0 ]; then
	if [ ! -x "$BUILD/bench/attach_target" ]; then
		say "== attaching to a running process: skipped: $BUILD/bench/attach_target missing (make bench builds it) =="
	else
		progress "attach: measuring"
		[ "$QUICK" = 0 ] && def_attach=2 || def_attach=1
		BENCH_WORK=$WORK BENCH_ATTACH_RUNS=${BENCH_ATTACH_RUNS:-$def_attach} \
			"$BENCH/attach.sh" "$BUILD" | tee -a "$REPORT"
	fi
	say ""
fi

# ---- the event trace: written and read back ------------------------------------

# record -i 1 --trace of the python3 workload against heaptrack, and its
# readers against heaptrack_print (docs/PERFORMANCE.md, bench/trace_read.sh).
T5=$(date +%s)
if [ "${BENCH_TRACE_READ:-1}" != 0 ]; then
	progress "trace_read: measuring"
	[ "$QUICK" = 0 ] && def_trace=3 || def_trace=1
	BENCH_WORK=$WORK BENCH_TRACE_RUNS=${BENCH_TRACE_RUNS:-$def_trace} \
		"$BENCH/trace_read.sh" "$BUILD" | tee -a "$REPORT"
	say ""
fi

T4=$(date +%s)
say "total time: $((T4 - T0)) s (speed $((T1 - T0)) s, accuracy $((T2 - T1)) s, attach $((T5 - T3)) s, trace $((T4 - T5)) s); load $(cut -d' ' -f1-3 /proc/loadavg) at end"
say "raw numbers: $TSV"
say "report:      $REPORT"
