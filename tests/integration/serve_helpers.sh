# Sourced by the tests of `heapprof serve` (test_serve.sh,
# test_serve_prometheus.sh), after lib.sh, helpers.sh, t_setup_build and
# session_helpers.sh: top_grow copied under a name of this run ($SA,
# $SANAME), the agent started on a port of its choosing and stopped, and
# plain HTTP requests (curl) bounded in time.
export TMPDIR="$W/tmp"
mkdir -p "$TMPDIR"

# top_grow under a name of this run's own (its command name).
SANAME="sva$$"
SA="$W/$SANAME"
cp "$PROGS/top_grow" "$SA" || t_fail "copying top_grow"

need_go() {
	if [ "$GO_OK" != 1 ]; then
		t_skip "go is missing (scripts/deps.sh --test installs golang-go)"
		return 1
	fi
	return 0
}
check_top() {
	assert_eq "$3" "$(top_flat "$T_DIR/$1.top" "$2")" \
		"$1: go tool pprof flat value of $2"
}

# http URL [CURL ARGS...]: the body on stdout, the status in HTTP_CODE.
http() {
	local url=$1
	shift
	HTTP_CODE=$(timeout -k 5 30 curl -s -o "$T_DIR/http.body" \
		-w '%{http_code}' "$@" "$url" </dev/null)
	cat "$T_DIR/http.body"
}

# start_serve TAG ARGS...: heapprof serve ARGS --listen 127.0.0.1:0 in the
# background; SPID, SURL (http://127.0.0.1:PORT) once it listens.
start_serve() {
	local tag=$1
	shift
	timeout -k 5 300 "$HP" serve "$@" --listen 127.0.0.1:0 \
		>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" </dev/null &
	SPID=$!
	TPIDS="$TPIDS $SPID"
	SURL=""
	wait_until 20 "serve $tag listening" \
		grep -qs '^heapprof serve: listening on' "$T_DIR/$tag.out" ||
		return 1
	SURL=$(sed -n 's|^heapprof serve: listening on \(http://[0-9.:]*\)/.*|\1|p' \
		"$T_DIR/$tag.out")
	# serve itself (timeout's child) is killed at exit too, not only
	# its wrapper
	TPIDS="$TPIDS $(pgrep -P "$SPID" | tr '\n' ' ')"
}

# stop_serve: SIGTERM, exit status 0 expected.
stop_serve() {
	kill -TERM "$SPID" 2>/dev/null
	wait_pid_bounded 30 "$SPID"
	assert_eq 0 "$WAIT_RC" "serve's status after SIGTERM: $(head -c 300 "$T_DIR/$1.err")"
}

# metric NAME PID [HEAP [MORE]]: the value of NAME{pid="PID",comm=..,
# heap="HEAP"MORE} in $T_DIR/metrics (HEAP libc.malloc when not given;
# "-": a series of the process without a heap label).
metric() {
	local heap=${3:-libc.malloc} more=${4:-}
	[ "$heap" = - ] && heap="" || heap=",heap=\"$heap\""
	grep -F "$1{pid=\"$2\"," "$T_DIR/metrics" |
		grep -F "\"$heap$more} " | sed 's/^.*} //'
}
scrape() {
	http "$SURL/metrics" >"$T_DIR/metrics"
	[ "$HTTP_CODE" = 200 ]
}
attached() {
	scrape && [ -n "$(metric heapprof_live_bytes "$APID")" ]
}
live_is() {
	scrape && [ "$(metric heapprof_live_bytes "$APID")" = "$1" ]
}


# start_alloc TAG [PROG]: $SA (or PROG, a copy of it under another name)
# in the background (ready file $W/TAG.ready, go file $W/TAG.go); APID
# once it said its pid.
start_alloc() {
	rm -f "$W/$1.ready" "$W/$1.go"
	timeout -k 5 240 "${2:-$SA}" after "$W/$1.ready" "$W/$1.go" \
		>"$T_DIR/$1.alloc.out" 2>&1 </dev/null &
	TPIDS="$TPIDS $!"
	APID=""
	wait_until 30 "top_grow $1 ready" test -s "$W/$1.ready" &&
		APID=$(sed -n 's/^pid //p' "$W/$1.ready")
	TPIDS="$TPIDS $APID"
	[ -n "$APID" ]
}
