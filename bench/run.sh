#!/bin/bash
# bench/run.sh BUILD_DIR
#
# Measures heapprof's overhead against running bare and against heaptrack,
# on a malloc microbenchmark and on real programs (sqlite3, cc1, perl).
# Every mode of a workload is measured side by side in the same run,
# round-robin within each repetition so that drift of the machine (thermal,
# other load) spreads over all modes alike. See docs/BENCHMARKS.md.
#
# Environment:
#   BENCH_RUNS=N          repetitions per mode (default 5)
#   BENCH_QUICK=1         smoke run: 1 repetition, small inputs
#   BENCH_WORKLOADS=...   subset of: malloc1 malloc2 malloc8 sqlite3 cc1 perl
#                         ("malloc" = the three mallocbench ones)
#   BENCH_MODES=...       subset of: bare idle default i1 fp trace
#                         trace-ring heaptrack heaptrack-raw (bare is
#                         always run)
#   BENCH_TIMEOUT=S       limit for one run, seconds (default 600)
#   BENCH_HEAPTRACK_MEM_MIB=M  address-space limit for heaptrack runs
#                         (default 8192; 0 = none)
#   BENCH_MB_OPS, BENCH_SQL_ROWS, BENCH_CC1_FUNCS, BENCH_PERL_ROUNDS
#                         override a workload's size
#   BENCH_WORK=DIR        inputs, logs and scratch (default BUILD/bench-work)
#   BENCH_API=0           leave out the last table: the custom allocator
#                         API's cost per call with no session (bench/api_idle,
#                         a few seconds; alone: make bench-api)
# Results: a table per workload on stdout, kept with the raw numbers in
# BUILD/bench-results/.
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
TIMEOUT=${BENCH_TIMEOUT:-600}
HT_MEM=${BENCH_HEAPTRACK_MEM_MIB:-8192}
WORK=${BENCH_WORK:-$BUILD/bench-work}
RESDIR=$BUILD/bench-results
case $RUNS in '' | *[!0-9]* | 0) die "BENCH_RUNS must be a positive integer" ;; esac
case $TIMEOUT in '' | *[!0-9]* | 0) die "BENCH_TIMEOUT must be a positive integer" ;; esac
case $HT_MEM in '' | *[!0-9]*) die "BENCH_HEAPTRACK_MEM_MIB must be an integer" ;; esac

# Sizes: the full run aims at 1-3 s per bare run on a 2-core machine.
if [ "$QUICK" = 0 ]; then
	MB_OPS=${BENCH_MB_OPS:-4000000}
	SQL_ROWS=${BENCH_SQL_ROWS:-200000}
	CC1_FUNCS=${BENCH_CC1_FUNCS:-300}
	PERL_ROUNDS=${BENCH_PERL_ROUNDS:-10}
else
	MB_OPS=${BENCH_MB_OPS:-200000}
	SQL_ROWS=${BENCH_SQL_ROWS:-10000}
	CC1_FUNCS=${BENCH_CC1_FUNCS:-30}
	PERL_ROUNDS=${BENCH_PERL_ROUNDS:-2}
fi

ALL_WORKLOADS="malloc1 malloc2 malloc8 sqlite3 cc1 perl"
ALL_MODES="bare idle default i1 fp trace trace-ring heaptrack heaptrack-raw"
WORKLOADS=""
for w in $(echo "${BENCH_WORKLOADS:-$ALL_WORKLOADS}" | tr ',' ' '); do
	case $w in
	malloc) WORKLOADS="$WORKLOADS malloc1 malloc2 malloc8" ;;
	malloc1 | malloc2 | malloc8 | sqlite3 | cc1 | perl) WORKLOADS="$WORKLOADS $w" ;;
	sqlite) WORKLOADS="$WORKLOADS sqlite3" ;;
	*) die "unknown workload '$w' (known: $ALL_WORKLOADS)" ;;
	esac
done
MODES="bare"
for m in $(echo "${BENCH_MODES:-$ALL_MODES}" | tr ',' ' '); do
	case " $ALL_MODES " in
	*" $m "*) [ "$m" = bare ] || MODES="$MODES $m" ;;
	*) die "unknown mode '$m' (known: $ALL_MODES)" ;;
	esac
done

# Nothing of a surrounding profiler may leak into the bare and idle runs:
# "idle" means the client is loaded with no collector to talk to.
unset LD_PRELOAD
for v in $(env | sed -n 's/^\(HEAPPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done

mkdir -p "$WORK/logs" "$WORK/scratch" "$RESDIR" || die "cannot create $WORK"
STAMP=$(date +%Y%m%d-%H%M%S)
TSV=$RESDIR/results-$STAMP.tsv
REPORT=$RESDIR/report-$STAMP.txt
NOTES=$RESDIR/notes-$STAMP.tsv
: >"$TSV"
: >"$NOTES"

note() { printf '%s\t%s\n' "$1" "$2" >>"$NOTES"; }
say() { echo "$*" | tee -a "$REPORT"; }
progress() { echo "bench: $*" >&2; }

# ---- tools -----------------------------------------------------------

# Debian packages the selected workloads and modes need, installed only
# when missing (as scripts/deps.sh does for the build).
need=""
want_mode() { case " $MODES " in *" $1 "*) return 0 ;; esac; return 1; }
want_wl() { case " $WORKLOADS " in *" $1 "*) return 0 ;; esac; return 1; }
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v timeout >/dev/null 2>&1 || need="$need coreutils"
want_wl sqlite3 && ! command -v sqlite3 >/dev/null 2>&1 && need="$need sqlite3"
want_wl perl && ! command -v perl >/dev/null 2>&1 && need="$need perl"
if want_mode heaptrack || want_mode heaptrack-raw; then
	command -v heaptrack >/dev/null 2>&1 || need="$need heaptrack"
	command -v zstd >/dev/null 2>&1 || need="$need zstd"
fi
if [ -n "$need" ]; then
	if [ "$(id -u)" = 0 ]; then
		progress "installing Debian packages:$need"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >/dev/null 2>&1
		apt-get install -y -qq --no-install-recommends $need >/dev/null 2>&1 ||
			progress "apt-get install$need failed; going on without"
	else
		progress "missing:$need (run as root to install); going on without"
	fi
fi
command -v perl >/dev/null 2>&1 || die "perl is needed to generate inputs and tables"
command -v timeout >/dev/null 2>&1 || die "timeout (coreutils) is needed"

# The bench binaries: `make bench` builds them; build them here otherwise.
mkdir -p "$BUILD/bench"
for prog in runone mallocbench; do
	if [ ! -x "$BUILD/bench/$prog" ] || [ "$BENCH/$prog.c" -nt "$BUILD/bench/$prog" ]; then
		gcc -std=gnu11 -O2 -g -pthread -o "$BUILD/bench/$prog" "$BENCH/$prog.c" ||
			die "cannot build bench/$prog.c"
	fi
done
RUNONE=$BUILD/bench/runone
MALLOCBENCH=$BUILD/bench/mallocbench
# Measure a snapshot of the profiler, so a rebuild while the benchmark
# runs cannot mix two versions (or catch a half-written binary).
# heapprof record finds libheapprof.so next to its own binary.
SNAP=$WORK/snap
rm -rf "$SNAP"
mkdir -p "$SNAP"
for f in heapprof libheapprof.so; do
	[ -f "$BUILD/$f" ] && cp -p "$BUILD/$f" "$SNAP/$f"
done
HEAPPROF=$SNAP/heapprof
LIBHEAPPROF=$SNAP/libheapprof.so
CC1=$(gcc -print-prog-name=cc1 2>/dev/null)

# Modes that cannot run at all are skipped with the reason in the table,
# rather than timing the same failure five times.
declare -A SKIP_MODE
if [ ! -f "$LIBHEAPPROF" ]; then
	SKIP_MODE[idle]="skipped: $BUILD/libheapprof.so missing"
fi
probe_db=$WORK/scratch/probe.db
rm -f "$probe_db"
if [ ! -x "$HEAPPROF" ]; then
	why="skipped: $BUILD/heapprof missing"
elif ! "$RUNONE" -t 60 -r "$WORK/scratch/probe.res" -- \
	"$HEAPPROF" record -o "$probe_db" -- /bin/true \
	>"$WORK/logs/probe.log" 2>&1 </dev/null; then
	why="skipped: runone failed"
elif ! grep -q 'status=exit:0' "$WORK/scratch/probe.res" || [ ! -s "$probe_db" ]; then
	why="skipped: 'heapprof record -- /bin/true' failed ($(sed 's/ .*//' "$WORK/scratch/probe.res"), see $WORK/logs/probe.log)"
else
	why=""
fi
rm -f "$probe_db"
if [ -n "$why" ]; then
	for m in default i1 fp trace trace-ring; do SKIP_MODE[$m]=$why; done
fi
if ! command -v heaptrack >/dev/null 2>&1; then
	SKIP_MODE[heaptrack]="skipped: heaptrack not installed"
	SKIP_MODE[heaptrack-raw]="skipped: heaptrack not installed"
fi

# ---- inputs ------------------------------------------------------------

SQL_FILE=$WORK/sql-$SQL_ROWS.sql
BIGC_FILE=$WORK/big-$CC1_FUNCS.c
if want_wl sqlite3 && [ ! -s "$SQL_FILE" ]; then
	perl "$BENCH/gen-sql.pl" "$SQL_ROWS" >"$SQL_FILE.tmp" && mv "$SQL_FILE.tmp" "$SQL_FILE" ||
		die "cannot generate $SQL_FILE"
fi
if want_wl cc1 && [ ! -s "$BIGC_FILE" ]; then
	perl "$BENCH/gen-bigc.pl" "$CC1_FUNCS" >"$BIGC_FILE.tmp" && mv "$BIGC_FILE.tmp" "$BIGC_FILE" ||
		die "cannot generate $BIGC_FILE"
fi

# Sets CMD (the target command), ENVS (runone -e options for the target)
# and DESC for workload $1; returns 1 with WHY set when it cannot run.
workload() {
	CMD=() ENVS=() WHY=""
	case $1 in
	malloc1 | malloc2 | malloc8)
		local t=${1#malloc}
		local ops=$((MB_OPS / t))
		CMD=("$MALLOCBENCH" "$t" "$ops")
		DESC="mallocbench $t $ops ($t thread(s) x $ops ops, $MB_OPS in all)"
		;;
	sqlite3)
		command -v sqlite3 >/dev/null 2>&1 || { WHY="sqlite3 not installed"; return 1; }
		CMD=("$(command -v sqlite3)" ":memory:" ".read $SQL_FILE")
		DESC="sqlite3 :memory: on $(basename "$SQL_FILE") ($SQL_ROWS rows by INSERT, indexes, joins, group-bys, update, deletes)"
		;;
	cc1)
		[ -n "$CC1" ] && [ -x "$CC1" ] || { WHY="cc1 not found (gcc -print-prog-name=cc1)"; return 1; }
		CMD=("$CC1" -quiet -O1 "$BIGC_FILE" -o /dev/null)
		DESC="cc1 -quiet -O1 $(basename "$BIGC_FILE") ($CC1_FUNCS generated functions, $(wc -c <"$BIGC_FILE") bytes)"
		;;
	perl)
		command -v perl >/dev/null 2>&1 || { WHY="perl not installed"; return 1; }
		CMD=("$(command -v perl)" "$BENCH/alloc.pl" "$PERL_ROUNDS")
		# Fixed hash seed: the same allocations on every run.
		ENVS=(-e PERL_HASH_SEED=0 -e PERL_PERTURB_KEYS=0)
		DESC="perl bench/alloc.pl $PERL_ROUNDS (text records into hashes, sort, string building, expiry)"
		;;
	esac
	return 0
}

# ---- one run -------------------------------------------------------------

# run_one WORKLOAD MODE REP: runs it, appends a line to $TSV:
# workload mode rep status seconds maxrss_kib cpu_seconds output_bytes
run_one() {
	local wl=$1 mode=$2 rep=$3
	local out=$WORK/scratch/out.$wl.$mode
	local log=$WORK/logs/$wl.$mode.$rep.log
	local res=$WORK/scratch/res
	local pre=() lim=()
	rm -f "$out" "$out".* "$res"
	case $mode in
	bare | idle) ;;
	default) pre=("$HEAPPROF" record -o "$out" --) ;;
	i1) pre=("$HEAPPROF" record -i 1 -o "$out" --) ;;
	fp) pre=("$HEAPPROF" record --unwind fp -o "$out" --) ;;
	# Every allocation and free as an event, kept in full (streaming,
	# waiting for the collector rather than dropping) or the newest
	# 64 MiB of them (ring): what heaptrack records.
	trace) pre=("$HEAPPROF" record -i 1 --trace streaming --block-client -o "$out" --) ;;
	trace-ring) pre=("$HEAPPROF" record -i 1 --trace ring -o "$out" --) ;;
	heaptrack) pre=(heaptrack -o "$out") ;;
	heaptrack-raw) pre=(heaptrack --raw -o "$out") ;;
	esac
	local menv=()
	[ "$mode" = idle ] && menv=(-e "LD_PRELOAD=$LIBHEAPPROF")
	case $mode in heaptrack*) [ "$HT_MEM" -gt 0 ] && lim=(-m "$HT_MEM") ;; esac

	(cd "$WORK/scratch" &&
		timeout -k 10 $((TIMEOUT + 30)) "$RUNONE" -t "$TIMEOUT" "${lim[@]}" \
			-r "$res" "${ENVS[@]}" "${menv[@]}" -- "${pre[@]}" "${CMD[@]}") \
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
	# ... and a profiler run that wrote no profile did not work.
	local bytes=0
	if [ "$mode" != bare ] && [ "$mode" != idle ]; then
		bytes=$(cat "$out" "$out".* 2>/dev/null | wc -c)
		[ "$status" = exit:0 ] && [ "$bytes" -eq 0 ] && status="no-profile"
	fi
	rm -f "$out" "$out".*
	# For a failure, the first line of the log that looks like why.
	local why=""
	if [ "$status" != exit:0 ] && [ "$status" != timeout ]; then
		why=$(grep -v '^RESULT' "$log" | grep -m1 -iE \
			'error|terminate called|what\(\)|segmentation|abort|denied|cannot|failed|killed' |
			tr '\t' ' ' | cut -c1-90)
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$wl" "$mode" "$rep" "$status" \
		"${secs:-0}" "${rss:-0}" "${cpu:-0}" "$bytes" "$why" >>"$TSV"
	LAST_STATUS=$status
	progress "$(printf '%-8s %-13s run %d/%d  %-12s %8ss' "$wl" "$mode" "$rep" "$RUNS" "$status" "$secs")"
}

# ---- the machine -----------------------------------------------------------

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem_total=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$ROOT" status --porcelain -- src include 2>/dev/null)" ] && commit="$commit (+ uncommitted changes in src/)"
ht_ver=$(heaptrack --version 2>/dev/null | head -1)
: >"$REPORT"
say "heapprof benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
say "machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, $mem_total RAM"
say "kernel:  $(uname -sr); $(ldd --version 2>&1 | head -1 | sed 's/^ldd //')"
say "tools:   gcc $(gcc -dumpfullversion 2>/dev/null), sqlite3 $(sqlite3 --version 2>/dev/null | cut -d' ' -f1), perl $(perl -e 'printf "%vd", $^V'), ${ht_ver:-heaptrack not installed}"
say "heapprof: commit $commit, $BUILD"
say "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
say "runs:    $RUNS per mode, round-robin; timeout ${TIMEOUT}s per run; workloads:$WORKLOADS"
for m in "${!SKIP_MODE[@]}"; do
	case " $MODES " in *" $m "*) say "note:    mode $m ${SKIP_MODE[$m]}" ;; esac
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
	note "$wl" "$DESC"
	# Warm-up (page cache, lazy binding) and the reference output.
	progress "$wl: warm-up"
	wlog=$WORK/logs/$wl.warmup.log
	(cd "$WORK/scratch" && timeout -k 10 $((TIMEOUT + 30)) "$RUNONE" -t "$TIMEOUT" \
		-r "$WORK/scratch/res" "${ENVS[@]}" -- "${CMD[@]}") >"$wlog" 2>&1 </dev/null
	if ! grep -q 'status=exit:0' "$WORK/scratch/res" 2>/dev/null; then
		say "== $wl: skipped: bare warm-up run failed ($(cat "$WORK/scratch/res" 2>/dev/null)), see $wlog =="
		say ""
		continue
	fi
	REF[$wl]=$(grep '^RESULT' "$wlog" | md5sum | cut -c1-32)

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
			run_one "$wl" "$m" "$rep"
			[ "$LAST_STATUS" = timeout ] && GAVE_UP[$m]=1
		done
	done
	perl "$BENCH/summarize.pl" "$TSV" "$NOTES" "$wl" "$MODES" | tee -a "$REPORT"
done

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

T1=$(date +%s)
say "total time: $((T1 - T0)) s; load $(cut -d' ' -f1-3 /proc/loadavg) at end"
say "raw numbers: $TSV"
say "report:      $REPORT"
