# bench/workloads.sh: the workloads of the benchmark and the commands of
# its profiler modes, sourced by bench/run.sh (speed) and bench/accuracy.sh
# (accuracy), so both run the same commands on the same inputs in the same
# way. Not a program of its own.
#
# The sourcing script sets BENCH (this directory), BUILD, WORK (inputs and
# scratch) and QUICK (0 or 1), and defines die() and progress(); then calls
# wl_bins (sets RUNONE, MALLOCBENCH, DEEPALLOC), wl_select (sets WORKLOADS), wl_inputs,
# and workload NAME for each name in $WORKLOADS; then wl_runargs MODE FILE
# for the command line of one run. mode_cmd (and so wl_runargs) needs
# HEAPPROF, LIBHEAPPROF, LIBJEMALLOC and LIBTCMALLOC.
#
# Environment: BENCH_WORKLOADS, BENCH_MB_OPS, BENCH_DEEP_ALLOCS, BENCH_SQL_ROWS,
# BENCH_CC1_FUNCS, BENCH_PERL_ROUNDS, BENCH_REDIS_REQUESTS,
# BENCH_PY_ROUNDS, BENCH_PYTHONMALLOC (see bench/run.sh).
# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables set here are the sourcer's

ALL_WORKLOADS="malloc1 malloc2 malloc8 deep sqlite3 cc1 perl python3 redis"

# Sizes: the full run aims at 1-3 s per bare run on a 2-core machine
# (redis: about 0.5 s per redis-benchmark test, four tests).
if [ "${QUICK:-0}" = 0 ]; then
	MB_OPS=${BENCH_MB_OPS:-4000000}
	DEEP_ALLOCS=${BENCH_DEEP_ALLOCS:-3000000}
	SQL_ROWS=${BENCH_SQL_ROWS:-200000}
	CC1_FUNCS=${BENCH_CC1_FUNCS:-300}
	PERL_ROUNDS=${BENCH_PERL_ROUNDS:-10}
	PY_ROUNDS=${BENCH_PY_ROUNDS:-8}
	REDIS_REQUESTS=${BENCH_REDIS_REQUESTS:-500000}
else
	MB_OPS=${BENCH_MB_OPS:-200000}
	DEEP_ALLOCS=${BENCH_DEEP_ALLOCS:-200000}
	SQL_ROWS=${BENCH_SQL_ROWS:-10000}
	CC1_FUNCS=${BENCH_CC1_FUNCS:-30}
	PERL_ROUNDS=${BENCH_PERL_ROUNDS:-2}
	PY_ROUNDS=${BENCH_PY_ROUNDS:-1}
	REDIS_REQUESTS=${BENCH_REDIS_REQUESTS:-50000}
fi
# redis-benchmark's tests and the keyspace of their random keys (-r).
REDIS_TESTS=set,get,lpush,lpop
REDIS_KEYSPACE=100000
# Debian's python3: not whatever python3 comes first in PATH (a pyenv or
# virtualenv shim would put a shell script or another build in front).
PYTHON3=/usr/bin/python3
# CPython's allocator for the python3 workload: "malloc" (the default
# here) sends every object to the profiled malloc; with its own (pymalloc,
# BENCH_PYTHONMALLOC=pymalloc or empty) objects of up to 512 bytes come
# from arenas it maps itself and no malloc profiler sees them.
PY_MALLOC=${BENCH_PYTHONMALLOC-malloc}
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
		malloc1 | malloc2 | malloc8 | deep | sqlite3 | cc1 | perl | python3 | redis) WORKLOADS="$WORKLOADS $w" ;;
		sqlite) WORKLOADS="$WORKLOADS sqlite3" ;;
		python) WORKLOADS="$WORKLOADS python3" ;;
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

# Sets CMD (the target command), ENVS (runone -e/-u options for the
# target), DESC, METRIC and DRIVER for workload $1; returns 1 with WHY set
# when it cannot run.
#   METRIC: what the workload's tables compare. "time" (wall time of the
#     run, lower is better) or "rps" (the requests per second the run
#     prints as a line `THROUGHPUT N`, higher is better).
#   DRIVER: for a server: the command that runs the benchmark. It starts
#     the server as the command given after its own arguments and "--"
#     (the mode's profiler and CMD), drives it, stops it; it runs bare.
#     Empty: the mode runs CMD itself (wl_runargs).
workload() {
	CMD=() ENVS=() WHY="" DESC="" METRIC=time DRIVER=()
	case $1 in
	malloc1 | malloc2 | malloc8)
		local t=${1#malloc}
		local ops=$((MB_OPS / t))
		CMD=("$MALLOCBENCH" "$t" "$ops")
		DESC="mallocbench $t $ops ($t thread(s) x $ops ops, $MB_OPS in all)"
		;;
	deep)
		# An interpreter's shape (CPython on PYTHONMALLOC=malloc):
		# ~60-frame stacks, a few thousand of them, a live set of
		# some 300,000 blocks that is then mostly freed.
		CMD=("$DEEPALLOC" "$DEEP_ALLOCS")
		DESC="deepalloc $DEEP_ALLOCS ($DEEP_ALLOCS allocations of 16-512 B, 1 thread, stacks of 55-63 frames, ~4,400 distinct; long-lived set up to ~300,000 blocks, then drained)"
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
	python3)
		[ -x "$PYTHON3" ] || {
			WHY="$PYTHON3 not installed (Debian: python3)"
			return 1
		}
		# -s: no user site directory. Fixed hash seed: the same
		# allocations on every run. No PYTHONPATH or PYTHONHOME of
		# the caller's.
		CMD=("$PYTHON3" -s "$BENCH/alloc.py" "$PY_ROUNDS")
		ENVS=(-e PYTHONHASHSEED=0 -u PYTHONPATH -u PYTHONHOME)
		if [ -n "$PY_MALLOC" ]; then
			ENVS+=(-e "PYTHONMALLOC=$PY_MALLOC")
		else
			ENVS+=(-u PYTHONMALLOC)
		fi
		DESC="python3 $("$PYTHON3" -c 'import platform; print(platform.python_version())' 2>/dev/null) bench/alloc.py $PY_ROUNDS, PYTHONMALLOC=${PY_MALLOC:-(unset: pymalloc)} (records as dicts, index, sorts, strings, expiry)"
		;;
	redis)
		local t
		for t in redis-server redis-cli redis-benchmark; do
			command -v "$t" >/dev/null 2>&1 || {
				WHY="$t not installed (Debian: redis-server, redis-tools)"
				return 1
			}
		done
		CMD=("$(command -v redis-server)")
		DRIVER=("$BENCH/redis.sh" "$WORK/scratch" "$REDIS_REQUESTS" "$REDIS_KEYSPACE" "$REDIS_TESTS")
		METRIC=rps
		DESC="redis-server $("${CMD[0]}" --version 2>/dev/null | sed -n 's/.* v=\([^ ]*\).*/\1/p') under redis-benchmark -P 16 -c 50 -t $REDIS_TESTS -n $REDIS_REQUESTS -r $REDIS_KEYSPACE (throughput: requests/s over all the tests)"
		;;
	*)
		WHY="unknown workload $1"
		return 1
		;;
	esac
	return 0
}

# wl_runargs MODE FILE: sets RUNARGS, what follows runone's own options
# (-t, -m, -r) for one run of the current workload (workload) in MODE,
# writing its profile to FILE: "ENV OPTIONS -- PROFILER CMD" for a
# program; for a server, "-- DRIVER -- env VARS PROFILER CMD", so that
# the profiler and its variables reach the server only.
wl_runargs() {
	mode_cmd "$1" "$2"
	if [ ${#DRIVER[@]} -eq 0 ]; then
		RUNARGS=("${ENVS[@]}" "${MENV[@]}" -- "${PRE[@]}" "${CMD[@]}")
		return
	fi
	# runone's -e NAME=VALUE and -u NAME as env(1)'s arguments (its
	# options before the assignments).
	local unset=() assign=() i opts=("${ENVS[@]}" "${MENV[@]}")
	for ((i = 0; i + 1 < ${#opts[@]}; i += 2)); do
		case ${opts[i]} in
		-e) assign+=("${opts[i + 1]}") ;;
		-u) unset+=(-u "${opts[i + 1]}") ;;
		esac
	done
	RUNARGS=(-- "${DRIVER[@]}" -- env "${unset[@]}" "${assign[@]}" "${PRE[@]}" "${CMD[@]}")
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
	for prog in runone mallocbench deepalloc; do
		if [ ! -x "$BUILD/bench/$prog" ] || [ "$BENCH/$prog.c" -nt "$BUILD/bench/$prog" ]; then
			gcc -std=gnu11 -O2 -g -pthread -o "$BUILD/bench/$prog" "$BENCH/$prog.c" ||
				die "cannot build bench/$prog.c"
		fi
	done
	RUNONE=$BUILD/bench/runone
	MALLOCBENCH=$BUILD/bench/mallocbench
	DEEPALLOC=$BUILD/bench/deepalloc
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
	# The same without the peak's tracking and dump (its cost: default
	# against nopeak, i1 against i1-nopeak).
	nopeak) PRE=("$HEAPPROF" record --no-peak -o "$out" --) ;;
	i1-nopeak) PRE=("$HEAPPROF" record -i 1 --no-peak -o "$out" --) ;;
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
