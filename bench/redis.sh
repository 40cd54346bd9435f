#!/bin/bash
# bench/redis.sh SCRATCH REQUESTS KEYSPACE TESTS -- SERVER_CMD...
#
# The redis benchmark workload's driver (bench/workloads.sh). SERVER_CMD
# is the command that starts redis-server, with the profiler of the mode
# in front of it (`heapprof record -o F --`, `heaptrack -o F`, `env
# LD_PRELOAD=... redis-server`, ...): only the server is profiled, this
# script and the redis-benchmark client run bare. It
#
#  1. makes a private working directory under SCRATCH and picks a free
#     TCP port on 127.0.0.1 (from BENCH_REDIS_PORT, default 16379, up);
#  2. starts SERVER_CMD with that port and directory, persistence off
#     (--save '' --appendonly no), in the foreground, its output in the
#     directory;
#  3. waits until it answers PING: redis-cli every 10 ms at first, then
#     less often, up to BENCH_REDIS_START_TIMEOUT seconds (default 120;
#     under Valgrind the server takes seconds to start), stopping at once
#     if the server exits;
#  4. runs redis-benchmark -P 16 -t TESTS -n REQUESTS -r KEYSPACE --csv
#     against it (50 clients, 16 commands pipelined per request);
#  5. stops the server with `redis-cli shutdown nosave` (SIGTERM to the
#     server's pid if that fails) and waits for SERVER_CMD to exit: for a
#     profiler, until its profile is written.
#
# Prints the server's output, redis-benchmark's CSV, one line per test
# `RATE TEST REQUESTS_PER_SECOND`, the throughput of all the tests together
# (requests over the sum of the tests' times), which bench/run.sh reads:
#
#     THROUGHPUT 812345.67
#
# and RESULT lines that must be the same under every profiler (which
# tests completed; the list LPUSH filled and LPOP emptied is empty).
# Exit status 0 when all of this worked and SERVER_CMD exited 0, else 1
# with a line `redis.sh: error: ...` saying why.
set -u
export LC_ALL=C

err() {
	echo "redis.sh: error: $*"
	FAILED=1
}

if [ $# -lt 6 ] || [ "$5" != -- ]; then
	echo "usage: bench/redis.sh SCRATCH REQUESTS KEYSPACE TESTS -- SERVER_CMD..." >&2
	exit 2
fi
SCRATCH=$1 REQUESTS=$2 KEYSPACE=$3 TESTS=$4
shift 5
START_TIMEOUT=${BENCH_REDIS_START_TIMEOUT:-120}
PORT=${BENCH_REDIS_PORT:-16379}
FAILED=0

for tool in redis-cli redis-benchmark; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "redis.sh: error: $tool not found (Debian: redis-tools)"
		exit 1
	}
done

mkdir -p "$SCRATCH" || exit 1
DIR=$(mktemp -d "$SCRATCH/redis.XXXXXX") || exit 1

# A port nobody listens on (IPv4 or IPv6): /proc/net/tcp* list the local
# port of each socket in hex, state 0A = LISTEN.
listening=" "
while read -r hex; do
	listening="$listening$((16#$hex)) "
done < <(awk '$4 == "0A" { sub(/.*:/, "", $2); print $2 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
while [ "$PORT" -lt 65535 ]; do
	case $listening in *" $PORT "*) PORT=$((PORT + 1)) ;; *) break ;; esac
done
CLI=(redis-cli -h 127.0.0.1 -p "$PORT")

# The server in the foreground of its own directory (nothing to save,
# nothing to load), reachable from this machine only; its pid in a file,
# since SERVER_CMD's pid is the profiler's when there is one.
(cd "$DIR" && exec "$@" --port "$PORT" --bind 127.0.0.1 --dir "$DIR" \
	--save '' --appendonly no --daemonize no --pidfile "$DIR/redis.pid" \
	--logfile '' --loglevel notice) >"$DIR/server.log" 2>&1 </dev/null &
SRV=$!

# Until it answers PING, the server has exited, or the time is up.
ready=0
t0=${EPOCHREALTIME/./}
delay=0.01
while :; do
	if [ "$("${CLI[@]}" ping 2>/dev/null)" = PONG ]; then
		ready=1
		break
	fi
	kill -0 "$SRV" 2>/dev/null || break
	[ $((${EPOCHREALTIME/./} - t0)) -ge $((START_TIMEOUT * 1000000)) ] && break
	sleep "$delay"
	case $delay in 0.01) delay=0.02 ;; 0.02) delay=0.05 ;; 0.05) delay=0.1 ;; *) delay=0.2 ;; esac
done
start_ms=$(((${EPOCHREALTIME/./} - t0) / 1000))

if [ "$ready" = 1 ]; then
	echo "redis.sh: server answers PING on port $PORT after $start_ms ms"
	# The benchmark, unprofiled. Its CSV: "TEST","RPS","avg_latency_ms",...
	csv=$(redis-benchmark -h 127.0.0.1 -p "$PORT" -P 16 -c 50 -t "$TESTS" \
		-n "$REQUESTS" -r "$KEYSPACE" --csv 2>"$DIR/benchmark.err")
	rc=$?
	printf '%s\n' "$csv"
	sed 's/^/redis-benchmark: /' "$DIR/benchmark.err"
	[ "$rc" = 0 ] || err "redis-benchmark exited with status $rc"
	rates=$(printf '%s\n' "$csv" | sed -n 's/^"\([A-Za-z_ ]*\)","\([0-9.]*\)".*/\1 \2/p')
	printf '%s\n' "$rates" | sed -n 's/^./RATE &/p'
	# Every test asked for, in the order asked.
	for t in $(echo "$TESTS" | tr ',' ' ' | tr '[:lower:]' '[:upper:]'); do
		if printf '%s\n' "$rates" | grep -q "^$t [0-9]"; then
			echo "RESULT redis test $t: $REQUESTS requests"
		else
			err "redis-benchmark reported no rate for $t"
		fi
	done
	# Requests over the sum of the tests' times.
	tput=$(printf '%s\n' "$rates" | awk -v n="$REQUESTS" '$2 > 0 { t += n / $2; k++ }
		END { if (k) printf "%.2f", k * n / t }')
	[ -n "$tput" ] && echo "THROUGHPUT $tput"
	case ",$TESTS," in
	*,lpush,*lpop,*) echo "RESULT redis mylist length after LPUSH and LPOP: $("${CLI[@]}" llen mylist 2>&1)" ;;
	esac
	# redis-cli prints nothing and exits 0 when the server closed the
	# connection to exit.
	if ! "${CLI[@]}" shutdown nosave >/dev/null 2>&1 && kill -0 "$SRV" 2>/dev/null; then
		echo "redis.sh: redis-cli shutdown failed; SIGTERM to the server"
		kill -TERM "$(cat "$DIR/redis.pid" 2>/dev/null || echo "$SRV")" 2>/dev/null
	fi
elif kill -0 "$SRV" 2>/dev/null; then
	err "the server did not answer PING on port $PORT within $START_TIMEOUT s"
	kill -TERM "$(cat "$DIR/redis.pid" 2>/dev/null || echo "$SRV")" 2>/dev/null
else
	err "the server exited before it answered PING on port $PORT"
fi

# The server, and a profiler in front of it, until it has exited (and
# written its profile). bench/runone's limit bounds the whole run.
wait "$SRV"
st=$?
stop_ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
echo "redis.sh: server command exited with status $st, $stop_ms ms after start"
[ "$st" = 0 ] || err "the server command exited with status $st"
sed 's/^/server: /' "$DIR/server.log"
rm -rf "$DIR"
exit "$FAILED"
