# bench/workloads.sh: the workloads of the benchmark and the commands of
# its profiler modes, sourced by bench/run.sh (speed) and bench/accuracy.sh
# (accuracy), so both run the same commands on the same inputs in the same
# way. Not a program of its own.
#
# The sourcing script sets BENCH (this directory), BUILD, WORK (inputs and
# scratch) and QUICK (0 or 1), and defines die() and progress(); then calls
# wl_bins (sets RUNONE, MALLOCBENCH), wl_select (sets WORKLOADS), wl_inputs,
# and workload NAME for each name in $WORKLOADS; mode_cmd needs HEAPPROF,
# LIBHEAPPROF, LIBJEMALLOC and LIBTCMALLOC.
#
# Environment: BENCH_WORKLOADS, BENCH_MB_OPS, BENCH_SQL_ROWS,
# BENCH_CC1_FUNCS, BENCH_PERL_ROUNDS (see bench/run.sh).
# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables set here are the sourcer's

ALL_WORKLOADS="malloc1 malloc2 malloc8 sqlite3 cc1 perl"

# Sizes: the full run aims at 1-3 s per bare run on a 2-core machine.
if [ "${QUICK:-0}" = 0 ]; then
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
CC1=$(gcc -print-prog-name=cc1 2>/dev/null)
SQL_FILE=$WORK/sql-$SQL_ROWS.sql
BIGC_FILE=$WORK/big-$CC1_FUNCS.c

# Sets WORKLOADS from BENCH_WORKLOADS (default: all).
wl_select() {
	local w
	WORKLOADS=""
	for w in $(echo "${BENCH_WORKLOADS:-$ALL_WORKLOADS}" | tr ',' ' '); do
		case $w in
		malloc) WORKLOADS="$WORKLOADS malloc1 malloc2 malloc8" ;;
		malloc1 | malloc2 | malloc8 | sqlite3 | cc1 | perl) WORKLOADS="$WORKLOADS $w" ;;
		sqlite) WORKLOADS="$WORKLOADS sqlite3" ;;
		*) die "unknown workload '$w' (known: $ALL_WORKLOADS)" ;;
		esac
	done
}

wl_wanted() { case " $WORKLOADS " in *" $1 "*) return 0 ;; esac; return 1; }

# Generates the inputs the selected workloads read, once per size (they
# are kept in $WORK and reused by later runs).
wl_inputs() {
	if wl_wanted sqlite3 && [ ! -s "$SQL_FILE" ]; then
		if ! perl "$BENCH/gen-sql.pl" "$SQL_ROWS" >"$SQL_FILE.tmp" ||
			! mv "$SQL_FILE.tmp" "$SQL_FILE"; then
			die "cannot generate $SQL_FILE"
		fi
	fi
	if wl_wanted cc1 && [ ! -s "$BIGC_FILE" ]; then
		if ! perl "$BENCH/gen-bigc.pl" "$CC1_FUNCS" >"$BIGC_FILE.tmp" ||
			! mv "$BIGC_FILE.tmp" "$BIGC_FILE"; then
			die "cannot generate $BIGC_FILE"
		fi
	fi
}

# Sets CMD (the target command), ENVS (runone -e options for the target)
# and DESC for workload $1; returns 1 with WHY set when it cannot run.
workload() {
	CMD=() ENVS=() WHY="" DESC=""
	case $1 in
	malloc1 | malloc2 | malloc8)
		local t=${1#malloc}
		local ops=$((MB_OPS / t))
		CMD=("$MALLOCBENCH" "$t" "$ops")
		DESC="mallocbench $t $ops ($t thread(s) x $ops ops, $MB_OPS in all)"
		;;
	sqlite3)
		command -v sqlite3 >/dev/null 2>&1 || {
			WHY="sqlite3 not installed"
			return 1
		}
		CMD=("$(command -v sqlite3)" ":memory:" ".read $SQL_FILE")
		DESC="sqlite3 :memory: on $(basename "$SQL_FILE") ($SQL_ROWS rows by INSERT, indexes, joins, group-bys, update, deletes)"
		;;
	cc1)
		if [ -z "$CC1" ] || [ ! -x "$CC1" ]; then
			WHY="cc1 not found (gcc -print-prog-name=cc1)"
			return 1
		fi
		CMD=("$CC1" -quiet -O1 "$BIGC_FILE" -o /dev/null)
		DESC="cc1 -quiet -O1 $(basename "$BIGC_FILE") ($CC1_FUNCS generated functions, $(wc -c <"$BIGC_FILE") bytes)"
		;;
	perl)
		command -v perl >/dev/null 2>&1 || {
			WHY="perl not installed"
			return 1
		}
		CMD=("$(command -v perl)" "$BENCH/alloc.pl" "$PERL_ROUNDS")
		# Fixed hash seed: the same allocations on every run.
		ENVS=(-e PERL_HASH_SEED=0 -e PERL_PERTURB_KEYS=0)
		DESC="perl bench/alloc.pl $PERL_ROUNDS (text records into hashes, sort, string building, expiry)"
		;;
	*)
		WHY="unknown workload $1"
		return 1
		;;
	esac
	return 0
}

# The bench programs: `make bench` builds them; built here otherwise (or
# when older than their source).
# wl_snapshot DIR: copies the build's heapprof and libheapprof.so into DIR
# and points HEAPPROF and LIBHEAPPROF at the copies, so a rebuild while
# the benchmark runs cannot mix two versions (or catch a half-written
# binary).  heapprof record finds libheapprof.so next to its own binary.
wl_snapshot() {
	local f
	rm -rf "$1"
	mkdir -p "$1"
	for f in heapprof libheapprof.so; do
		[ -f "$BUILD/$f" ] && cp -p "$BUILD/$f" "$1/$f"
	done
	HEAPPROF=$1/heapprof
	LIBHEAPPROF=$1/libheapprof.so
}

wl_bins() {
	local prog
	mkdir -p "$BUILD/bench"
	for prog in runone mallocbench; do
		if [ ! -x "$BUILD/bench/$prog" ] || [ "$BENCH/$prog.c" -nt "$BUILD/bench/$prog" ]; then
			gcc -std=gnu11 -O2 -g -pthread -o "$BUILD/bench/$prog" "$BENCH/$prog.c" ||
				die "cannot build bench/$prog.c"
		fi
	done
	RUNONE=$BUILD/bench/runone
	MALLOCBENCH=$BUILD/bench/mallocbench
}

# The path of shared library $1 (e.g. libjemalloc.so.2) for this
# machine's word size, or nothing.
find_lib() {
	local p
	p=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n && /x86-64/ { print $NF; exit }')
	if [ -z "$p" ]; then
		for p in "/usr/lib/x86_64-linux-gnu/$1" "/lib/x86_64-linux-gnu/$1" "/usr/lib64/$1" "/usr/lib/$1"; do
			[ -f "$p" ] && break
			p=""
		done
	fi
	echo "$p"
}

# jemalloc's heap profiler as its documentation has users run it, sampling
# at the same mean interval as heapprof's default (2^12 = 4096 bytes):
# prof_accum keeps what was ever allocated (as heapprof's alloc_space),
# prof_final dumps the profile at exit.
JEMALLOC_PROF_CONF="prof:true,lg_prof_sample:12,prof_final:true,prof_accum:true"

# Sets PRE (the command put before the target's) and MENV (runone -e
# options) to run mode $1 writing its profile to $2. The profile is the
# file $2 or files $2.* (heaptrack: $2.zst; gperftools: $2.0001.heap, ...,
# the last one written at exit; jemalloc: $2.PID.0.f.heap).
mode_cmd() {
	local out=$2
	PRE=() MENV=()
	case $1 in
	bare) ;;
	idle) MENV=(-e "LD_PRELOAD=$LIBHEAPPROF") ;;
	default) PRE=("$HEAPPROF" record -o "$out" --) ;;
	i1) PRE=("$HEAPPROF" record -i 1 -o "$out" --) ;;
	fp) PRE=("$HEAPPROF" record --unwind fp -o "$out" --) ;;
	# The exact profile that --unwind fp is compared with (accuracy).
	i1fp) PRE=("$HEAPPROF" record -i 1 --unwind fp -o "$out" --) ;;
	# Every allocation and free as an event, kept in full (streaming,
	# waiting for the collector rather than dropping) or the newest
	# 64 MiB of them (ring): what heaptrack records.
	trace) PRE=("$HEAPPROF" record -i 1 --trace streaming --block-client -o "$out" --) ;;
	trace-ring) PRE=("$HEAPPROF" record -i 1 --trace ring -o "$out" --) ;;
	heaptrack) PRE=(heaptrack -o "$out") ;;
	heaptrack-raw) PRE=(heaptrack --raw -o "$out") ;;
	jemalloc-bare) MENV=(-e "LD_PRELOAD=$LIBJEMALLOC") ;;
	jemalloc) MENV=(-e "LD_PRELOAD=$LIBJEMALLOC" -e "MALLOC_CONF=$JEMALLOC_PROF_CONF,prof_prefix:$out") ;;
	tcmalloc-bare) MENV=(-e "LD_PRELOAD=$LIBTCMALLOC") ;;
	# gperftools' heap profiler with its defaults: every allocation is
	# recorded; a profile is written for every 1 GiB allocated
	# (HEAP_PROFILE_ALLOCATION_INTERVAL), every 100 MiB of growth in use
	# (HEAP_PROFILE_INUSE_INTERVAL) and at exit.
	gperftools) MENV=(-e "LD_PRELOAD=$LIBTCMALLOC" -e "HEAPPROFILE=$out") ;;
	massif) PRE=(valgrind --tool=massif "--massif-out-file=$out") ;;
	*) die "mode_cmd: unknown mode $1" ;;
	esac
}
