#!/usr/bin/env bash
# test_serve.sh BUILD: `heapprof serve` (docs/FLEET.md).  progs/serve_alloc
# waits, profiled by the agent's own session at -i 1, until the test says
# go, then keeps 10 blocks of 100000 bytes in keep_here() and allocates
# and frees 5 of 1000 in temp_here().  /metrics (curl) gives its exact
# totals and keep_here's live bytes; `go tool pprof -top
# -sample_index=inuse_space` of /debug/pprof/heap?pid=N shows keep_here
# with exactly 1000000 bytes.  Bad requests get 4xx; a token file is
# asked for; a non-loopback address needs --allow-remote; SIGTERM ends
# the agent and its session, its temporary directory removed.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/serve_alloc"
. "$HERE/session_helpers.sh"
. "$HERE/serve_helpers.sh"

# ---------------------------------------------------------------------------
t_begin "serve -p at -i 1: /metrics gives the exact totals"
if start_alloc a && start_serve s1 -p "$APID" -i 1; then
	wait_until 30 "the agent's session on $APID in /metrics" attached
	touch "$W/a.go"
	wait_until 30 "live bytes 1000000" live_is 1000000
	assert_eq 1000000 "$(metric heapprof_live_bytes "$APID")" "live bytes"
	assert_eq 10 "$(metric heapprof_live_objects "$APID")" "live objects"
	assert_eq 1005000 "$(metric heapprof_allocated_bytes_total "$APID")" \
		"allocated bytes"
	assert_eq 5000 "$(metric heapprof_freed_bytes_total "$APID")" \
		"freed bytes"
	assert_eq 15 "$(metric heapprof_allocated_objects_total "$APID")" \
		"allocated objects"
	assert_eq 1 "$(metric heapprof_sampling_interval_bytes "$APID")" \
		"interval"
	assert_match "^heapprof_function_live_bytes\{pid=\"$APID\",comm=\"$SANAME\",heap=\"libc.malloc\",function=\"keep_here\"\} 1000000$" \
		"$(cat "$T_DIR/metrics")" "keep_here's series"
	assert_match '^# TYPE heapprof_allocated_bytes_total counter$' \
		"$(cat "$T_DIR/metrics")" "TYPE line"
	assert_match '^# HELP heapprof_live_bytes ' "$(cat "$T_DIR/metrics")" \
		"HELP line"
	assert_match "^heapprof_resident_bytes\{pid=\"$APID\"" \
		"$(cat "$T_DIR/metrics")" "RSS"
fi

t_begin "serve: go tool pprof reads /debug/pprof/heap?pid=N (exact at -i 1)"
if need_go && [ -n "$SURL" ]; then
	if pprof_top gp "$SURL/debug/pprof/heap?pid=$APID" inuse_space; then
		check_top gp keep_here 1000000
		assert_match '^Type: inuse_space$' "$(cat "$T_DIR/gp.top")" \
			"the default sample type"
	fi
	if pprof_top gpa "$SURL/debug/pprof/heap?pid=$APID" alloc_space; then
		assert_match 'keep_here' "$(cat "$T_DIR/gpa.top")" \
			"alloc_space names keep_here"
	fi
	http "$SURL/debug/pprof/heap?name=$SANAME" >/dev/null
	assert_eq 200 "$HTTP_CODE" "?name= of the program"
	assert_match "^$APID	$SANAME	" "$(http "$SURL/debug/pprof/heap")" \
		"the list of processes"
fi

t_begin "serve: bad requests get 4xx, the agent goes on"
if [ -n "$SURL" ]; then
	for q in 'pid=abc' 'pid=' 'pid=-3' 'pid=99999999999' 'pid=1&name=x' \
		'pid=%00' 'name='; do
		http "$SURL/debug/pprof/heap?$q" >/dev/null
		assert_match '^4[0-9][0-9]$' "$HTTP_CODE" "?$q"
	done
	http "$SURL/debug/pprof/heap?pid=1" >/dev/null
	assert_eq 404 "$HTTP_CODE" "a process the agent does not profile"
	http "$SURL/nothing" >/dev/null
	assert_eq 404 "$HTTP_CODE" "an unknown path"
	http "$SURL/metrics" -X POST -d a=b >/dev/null
	assert_eq 405 "$HTTP_CODE" "POST"
	scrape
	assert_eq 1000000 "$(metric heapprof_live_bytes "$APID")" \
		"/metrics after them"
	stop_serve s1
	assert_eq "" "$(ls -A "$TMPDIR" | grep '^heapprof-serve\.')" \
		"serve's temporary directory removed"
fi

t_begin "serve --token-file: 401 without the token, 200 with it"
echo "s3cret-$$" >"$W/token"
if start_serve s2 -p "$APID" --token-file "$W/token"; then
	http "$SURL/metrics" >/dev/null
	assert_eq 401 "$HTTP_CODE" "no token"
	http "$SURL/metrics" -H "Authorization: Bearer wrong" >/dev/null
	assert_eq 401 "$HTTP_CODE" "a wrong token"
	http "$SURL/metrics" -H "Authorization: Bearer s3cret-$$" >/dev/null
	assert_eq 200 "$HTTP_CODE" "the token"
	stop_serve s2
fi

t_begin "serve: a flood of idle connections is bounded, then timed out"
if start_serve s3 -p "$APID" --max-connections 4 --timeout 2; then
	port=${SURL##*:}
	# 12 connections that send half a request line and wait
	timeout -k 5 60 python3 -c '
import socket, sys, time
ss = []
for i in range(12):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2)
        s.send(b"GET /metr")
        ss.append(s)
    except OSError:
        pass
time.sleep(8)
' "$port" &
	FLOOD=$!
	sleep 4
	http "$SURL/metrics" >/dev/null
	assert_eq 200 "$HTTP_CODE" "/metrics once the idle ones timed out"
	kill "$FLOOD" 2>/dev/null
	wait "$FLOOD" 2>/dev/null
	assert_eq 0 "$(kill -0 "$SPID" 2>/dev/null; echo $?)" "serve still runs"
	stop_serve s3
fi

t_begin "serve: errors in one line"
expect_error e1 2 'not a loopback address' serve -p "$APID" --listen 0.0.0.0:0
expect_error e2 2 'need -p PID or -n NAME' serve
expect_error e3 2 'invalid --listen' serve -p "$APID" --listen nowhere
expect_error e4 2 'token-file' serve -p "$APID" --token-file "$W/none"

t_summary
