#!/bin/bash
# bench/cost.sh BUILD: what heapprof costs the program per sampled
# allocation, counted instead of timed.  Each workload runs bare and under
# `heapprof record` (default interval and -i 1) inside Valgrind's
# cachegrind, which counts the instructions executed and simulates the
# L1 data cache; the differences, divided by the allocations recorded, are
# the same from one run to the next (within the 1% the sampler's random
# gaps move the sample count), where wall times on a shared VM move by
# 15%.  It says how much work a change saves, not how fast it runs: read
# it next to `make bench`.
#
# Columns: samples recorded; instructions added per sample (all of them,
# and those in heapprof's own code); L1 data misses added per sample (all,
# heapprof's own, and the program's: lines of the program's that heapprof's
# lines pushed out of the cache and it had to load again).
#
# A last column says what heapprof added to the whole run, in percent of
# the bare run's instructions.
#
# Workload redis (not in the default list; Debian's redis-server and
# redis-tools): redis-server runs under cachegrind while redis-benchmark,
# bare, sends it COST_REDIS_REQUESTS (200000) requests of each of
# set,get,lpush,lpop, pipelined 16 deep from 50 clients; only the server
# is counted.  redis-benchmark's random keys make the server's own count
# move by about 1% between runs.
#
# Environment: COST_WORKLOADS (default: sqlite3 mallocbench python3;
# also redis), COST_MODES (default: default i1; also none, a session
# whose interval is so large that nothing is sampled: the hooks' checks
# and the free filter alone, printed per allocation call).
set -u
B=$(cd "${1:?usage: bench/cost.sh BUILD}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
W=$B/bench-work
mkdir -p "$W"
if ! command -v cg_annotate >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
	command -v apt-get >/dev/null 2>&1; then
	echo "cost: installing valgrind" >&2
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null; then
		apt-get update -q >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null
	fi
fi
for tool in valgrind cg_annotate sqlite3; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "cost: $tool is missing (apt-get install valgrind sqlite3)" >&2
		exit 2
	}
done
[ -x "$B/heapprof" ] || { echo "cost: $B/heapprof is missing (make)" >&2; exit 2; }
SQL=$W/sql-20000.sql
[ -s "$SQL" ] || perl "$HERE/gen-sql.pl" 20000 >"$SQL" || exit 2
# python3 on the C allocator (as in make bench), the same hash seed in
# every run; valgrind traces the command itself, not an env(1) before it.
export PYTHONMALLOC=malloc PYTHONHASHSEED=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# cg_out FILE: "Ir D1misses ours_Ir ours_D1misses" of a cachegrind output.
cg_out() {
	cg_annotate --show-percs=no "$1" 2>/dev/null | awk '
		/PROGRAM TOTALS/ { gsub(",", ""); ir = $1; d1 = $5 + $8 }
		/src\/(client|layout)\// && $1 ~ /^[0-9,]+$/ {
			gsub(",", ""); oir += $1; od1 += $5 + $8 }
		END { printf "%.0f %.0f %.0f %.0f\n", ir, d1, oir, od1 }'
}

# run_redis OUT PREFIX...: the redis workload's server under cachegrind
# (output file OUT), started by PREFIX (a heapprof record command line or
# nothing), driven by redis-benchmark until it has sent its requests,
# then shut down.  Fails when the server does not answer in 60 s.
run_redis() {
	local out=$1 port i rc=0
	shift
	port=$((20000 + RANDOM % 20000))
	"$@" "${vg[@]}" --cachegrind-out-file="$out" redis-server --port "$port" \
		--bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--dir "$tmp" >/dev/null 2>&1 &
	local srv=$!
	for i in $(seq 600); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.1
	done
	if redis-cli -p "$port" ping >/dev/null 2>&1; then
		redis-benchmark -p "$port" -P 16 -c 50 -t set,get,lpush,lpop \
			-n "${COST_REDIS_REQUESTS:-200000}" -r 100000 -q \
			>/dev/null 2>&1 || rc=1
		redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
	else
		rc=1
		kill "$srv" 2>/dev/null
	fi
	wait "$srv" || rc=1
	return $rc
}

printf '%-12s %-8s %8s %12s %10s %10s %10s %10s %8s\n' workload mode samples \
	"Ir/sample" "ours" "D1/sample" "ours" "program" "added%"
for w in ${COST_WORKLOADS:-sqlite3 mallocbench python3}; do
	case $w in
	sqlite3) cmd=(/usr/bin/sqlite3 :memory: ".read $SQL") ;;
	mallocbench) cmd=("$B/bench/mallocbench" 1 300000) ;;
	python3) cmd=(/usr/bin/python3 -s "$HERE/alloc.py" 1) ;;
	redis) cmd=(redis-server) ;;
	*) echo "cost: unknown workload $w" >&2; exit 2 ;;
	esac
	if [ "$w" = redis ]; then
		for tool in redis-server redis-cli redis-benchmark; do
			command -v "$tool" >/dev/null 2>&1 || {
				echo "cost: $tool is missing (apt-get install redis-server redis-tools), $w skipped" >&2
				continue 2
			}
		done
	else
		[ -x "${cmd[0]}" ] || { echo "cost: ${cmd[0]} is missing, $w skipped" >&2; continue; }
	fi
	vg=(valgrind --tool=cachegrind --cache-sim=yes)
	if [ "$w" = redis ]; then
		run_redis "$tmp/bare"
	else
		"${vg[@]}" --cachegrind-out-file="$tmp/bare" "${cmd[@]}" >/dev/null 2>&1
	fi || { echo "cost: $w failed bare" >&2; continue; }
	read -r bir bd1 _ _ < <(cg_out "$tmp/bare")
	for m in ${COST_MODES:-default i1}; do
		case $m in
		default) opt=() ;;
		i1) opt=(-i 1) ;;
		none) opt=(-i 1073741824) ;;
		*) echo "cost: unknown mode $m" >&2; exit 2 ;;
		esac
		rm -f "$tmp/p.db" "$tmp/prof"
		# --follow-exec: valgrind execs its tool, which runs the program.
		rec=("$B/heapprof" record "${opt[@]}" --follow-exec -o "$tmp/p.db" --)
		if [ "$w" = redis ]; then
			run_redis "$tmp/prof" "${rec[@]}"
		else
			"${rec[@]}" "${vg[@]}" --cachegrind-out-file="$tmp/prof" \
				"${cmd[@]}" >/dev/null 2>&1
		fi || { echo "cost: $w $m failed" >&2; continue; }
		n=$(sqlite3 "$tmp/p.db" "select max(value) from heapprof_process_stats where name = 'samples'")
		read -r pir pd1 oir od1 < <(cg_out "$tmp/prof")
		awk -v w="$w" -v m="$m" -v n="${n:-0}" -v bir="$bir" -v bd1="$bd1" \
			-v pir="$pir" -v pd1="$pd1" -v oir="$oir" -v od1="$od1" 'BEGIN {
			pct = 100 * (pir - bir) / bir
			if (n < 100) {
				printf "%-12s %-8s %8d %12s %10s %10s %10s %10s %7.1f%%\n",
					w, m, n, "-", "-", "-", "-", "-", pct
				exit
			}
			printf "%-12s %-8s %8d %12.0f %10.0f %10.1f %10.1f %10.1f %7.1f%%\n",
				w, m, n, (pir - bir) / n, oir / n, (pd1 - bd1) / n,
				od1 / n, (pd1 - bd1 - od1) / n, pct }'
	done
done
