#!/usr/bin/env bash
# test_serve.sh BUILD: `heapprof serve` (docs/FLEET.md).  progs/top_grow after
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
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/top_grow"
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
	http "$SURL/" >/dev/null
	idx=$(cat "$T_DIR/http.body")
	assert_eq 200 "$HTTP_CODE" "GET / (the agent's endpoints)"
	for e in "GET /metrics" "GET /debug/pprof/heap?pid=PID" "GET, POST /debug/pprof/symbol"; do
		assert_match "^$(printf '%s' "$e" | sed 's/[?.]/\\&/g')" "$(grep -F "$e" <<<"$idx")" "/ lists $e"
	done
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
chmod 600 "$W/token" # serve refuses a token others may read
if start_serve s2 -p "$APID" --token-file "$W/token"; then
	http "$SURL/metrics" >/dev/null
	assert_eq 401 "$HTTP_CODE" "no token"
	http "$SURL/metrics" -H "Authorization: Bearer wrong" >/dev/null
	assert_eq 401 "$HTTP_CODE" "a wrong token"
	http "$SURL/metrics" -H "Authorization: Bearer s3cret-$$" >"$T_DIR/metrics"
	assert_eq 200 "$HTTP_CODE" "the token"
	# No -i: Go's 512 KiB, as an always-on agent samples (once the
	# process is attached, its heap's series are there).
	for _ in $(seq 1 100); do
		[ -n "$(metric heapprof_sampling_interval_bytes "$APID")" ] && break
		sleep 0.1
		http "$SURL/metrics" -H "Authorization: Bearer s3cret-$$" >"$T_DIR/metrics"
	done
	assert_eq 524288 "$(metric heapprof_sampling_interval_bytes "$APID")" \
		"the default interval in /metrics"
	stop_serve s2
fi

t_begin "serve: a flood of idle connections is bounded, then timed out"
if start_serve s3 -p "$APID" --max-connections 4 --timeout 2; then
	port=${SURL##*:}
	# 12 connections that send half a request line and wait (45 s: long
	# past the bounded wait below, so a slow agent cannot outlast them)
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
open(sys.argv[2], "w").write("connected\n")
time.sleep(45)
' "$port" "$W/flood.ready" &
	FLOOD=$!
	wait_until 10 "the flood connected" test -s "$W/flood.ready"
	wait_until 15 "/metrics answered while the flood holds its sockets" \
		scrape
	assert_eq 0 "$(kill -0 "$FLOOD" 2>/dev/null; echo $?)" \
		"the flood still held its sockets then (answered after the" \
		"idle ones timed out, not after the flood ended)"
	kill "$FLOOD" 2>/dev/null
	wait "$FLOOD" 2>/dev/null
	assert_eq 0 "$(kill -0 "$SPID" 2>/dev/null; echo $?)" "serve still runs"
	stop_serve s3
fi

t_begin "serve: clients trickling a request's headers are cut after 3 timeouts"
if start_serve s3b -p "$APID" --max-connections 4 --timeout 2; then
	port=${SURL##*:}
	# 4 connections (all there are) sending a header byte a second, for
	# 40 s: never idle 2 s, never done
	timeout -k 5 60 python3 -c '
import socket, sys, time
ss = []
for i in range(4):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2)
    s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    ss.append(s)
open(sys.argv[2], "w").write("connected\n")
for t in range(40):
    time.sleep(1)
    for s in ss:
        try:
            s.send(b"a")
        except OSError:
            pass
' "$port" "$W/slow.ready" &
	SLOW=$!
	wait_until 10 "the slow clients connected" test -s "$W/slow.ready"
	wait_until 25 "/metrics answered while the slow clients trickle" scrape
	assert_eq 0 "$(kill -0 "$SLOW" 2>/dev/null; echo $?)" \
		"the slow clients were still sending then"
	assert_match '^heapprof_http_connections_cut_total [1-9]' \
		"$(cat "$T_DIR/metrics")" "connections cut, counted"
	kill "$SLOW" 2>/dev/null
	wait "$SLOW" 2>/dev/null
	stop_serve s3b
fi

t_begin "serve -n: a process that ends and starts again under the name is picked up, each its own session"
# the first case's process of the name ends first
kill -TERM "$APID" 2>/dev/null
wait_until 20 "$APID's end" eval "! kill -0 $APID 2>/dev/null"
if start_alloc n1 && start_serve s4 -n "$SANAME" -i 1 -o "$W/agent4"; then
	P1=$APID
	wait_until 30 "the session on $P1 in /metrics" attached
	touch "$W/n1.go"
	wait_until 30 "live bytes 1000000 of $P1" live_is 1000000
	kill -TERM "$P1"
	gone() { scrape && [ -z "$(metric heapprof_live_bytes "$P1")" ]; }
	wait_until 30 "$P1 gone from /metrics" gone
	if start_alloc n2; then
		P2=$APID
		wait_until 30 "the session on $P2 (same name) in /metrics" attached
		touch "$W/n2.go"
		wait_until 30 "live bytes 1000000 of $P2" live_is 1000000
		assert_eq 1005000 "$(metric heapprof_allocated_bytes_total "$P2")" \
			"$P2's allocated bytes: its own session, from its start"
		# a second process of the name while the first runs
		if start_alloc n3; then
			P3=$APID
			wait_until 30 "the session on $P3 beside $P2" attached
			touch "$W/n3.go"
			wait_until 30 "live bytes 1000000 of $P3" live_is 1000000
			assert_eq 1000000 "$(metric heapprof_live_bytes "$P2")" \
				"$P2 still profiled, exact, beside $P3"
			assert_eq 2 "$(sed -n 's/^heapprof_profiled //p' "$T_DIR/metrics")" \
				"heapprof_profiled"
			kill -TERM "$P3"
		fi
		kill -TERM "$P2"
	fi
	stop_serve s4
	for p in "$P1" "$P2"; do
		assert_eq yes "$(test -s "$W/agent4/$SANAME.$p.db" && echo yes)" \
			"-o DIR keeps $p's session database"
	done
	# its session's database: keep_here 10 x 100000 B, all live at its end
	check_views "$W/agent4/$SANAME.$P2.db" keep_here 10 1000000 10 1000000
fi

t_begin "serve -o DIR: ?save=1 keeps the snapshot of the request; without -o it is refused"
if start_alloc sv && start_serve s5 -p "$APID" -i 1 -o "$W/agent5"; then
	wait_until 30 "the session on $APID in /metrics" attached
	touch "$W/sv.go"
	wait_until 30 "live bytes 1000000" live_is 1000000
	http "$SURL/debug/pprof/heap?pid=$APID&save=1" -D "$T_DIR/sv.hdr" \
		-o "$T_DIR/sv.pb.gz" >/dev/null
	assert_eq 200 "$HTTP_CODE" "?save=1"
	saved=$(sed -n 's/^X-Heapprof-Saved: \(.*\)\r$/\1/p' "$T_DIR/sv.hdr")
	assert_match "^$W/agent5/$SANAME\.$APID\.snapshot\.[0-9T]+\.db$" "$saved" \
		"the saved snapshot's path"
	if [ -f "$saved" ]; then
		"$HP" report "$saved" --top 3 >"$T_DIR/sv.report" 2>&1
		assert_match 'keep_here' "$(cat "$T_DIR/sv.report")" \
			"heapprof report reads the saved snapshot"
		assert_eq 1000000 "$(q "$saved" "SELECT sum(b.size) FROM heapprof_block b
		  JOIN stack_profile_callsite c ON b.callsite_id = c.id
		  JOIN stack_profile_frame f ON c.frame_id = f.id
		  WHERE f.name = 'keep_here';")" "the saved snapshot's keep_here blocks"
	else
		t_fail "no saved snapshot at '$saved'"
	fi
	http "$SURL/debug/pprof/heap?pid=$APID&save=maybe" >/dev/null
	assert_eq 400 "$HTTP_CODE" "save=maybe"
	stop_serve s5
fi
if start_serve s6 -p "$APID"; then
	# (the session is a new one: its process read before each check)
	wait_until 30 "the new session on $APID in /metrics" attached
	http "$SURL/debug/pprof/heap?pid=$APID&save=1" >"$T_DIR/s6.body"
	assert_eq 400 "$HTTP_CODE" "save=1 without -o"
	assert_match 'keeps no profiles' "$(cat "$T_DIR/s6.body")" "why"
	http "$SURL/debug/pprof/heap?pid=$APID&seconds=30" >/dev/null
	assert_eq 400 "$HTTP_CODE" "a delta profile (seconds=)"
	http "$SURL/debug/pprof/heap?pid=$APID&heap=nope" >/dev/null
	assert_eq 404 "$HTTP_CODE" "a heap the process does not have"
	scrape
	assert_eq 0 "$(metric heapprof_samples_dropped_total "$APID" - ',reason="reentrant"')" \
		"samples dropped (reentrant): a series, 0"
	assert_eq 0 "$(metric heapprof_client_errors_total "$APID" - ',error="stack_table_full"')" \
		"client errors (stack_table_full): a series, 0"
	assert_match "^heapprof_resident_bytes\{pid=\"$APID\",comm=\"$SANAME\"\} [1-9][0-9]*$" \
		"$(cat "$T_DIR/metrics")" "RSS, labelled by process"
	stop_serve s6
fi

t_begin "serve --all-heaps: a custom heap's series and ?heap= (exact at -i 1)"
"$PROGS/api_attach" >"$W/ap.pout" 2>"$W/ap.perr" </dev/null &
APID=$!
TPIDS="$TPIDS $APID"
if wait_until 20 "api_attach ready" grep -q ': ready$' "$W/ap.pout" &&
	start_serve s7 -p "$APID" -i 1 --all-heaps; then
	wait_until 30 "the session on $APID in /metrics" attached
	kill -USR1 "$APID"
	wait_until 20 "api_attach's phase" grep -q ': phase done$' "$W/ap.pout"
	pool_is() {
		scrape && [ "$(metric heapprof_live_bytes "$APID" attach.pool)" = 448 ]
	}
	wait_until 30 "attach.pool live 448" pool_is
	assert_eq 640 "$(metric heapprof_allocated_bytes_total "$APID" attach.pool)" \
		"attach.pool allocated bytes"
	assert_eq 7 "$(metric heapprof_live_objects "$APID" attach.pool)" \
		"attach.pool live objects"
	assert_eq 448 "$(metric heapprof_function_live_bytes "$APID" attach.pool ',function="pool_take"')" \
		"pool_take's series in attach.pool"
	assert_eq 100 "$(metric heapprof_function_live_bytes "$APID" libc.malloc ',function="api_malloc"')" \
		"api_malloc's series in libc.malloc"
	if need_go && pprof_top ah "$SURL/debug/pprof/heap?pid=$APID&heap=attach.pool" inuse_space; then
		check_top ah pool_take 448
	fi
	stop_serve s7
fi
kill -USR1 "$APID" 2>/dev/null

t_begin "serve: another user's process is refused (403), served with --all-users as root"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	t_skip "needs root and setpriv"
else
	OD=$(mktemp -d /tmp/hp-serve-other.XXXXXX)
	chmod 755 "$OD"
	mkdir -m 1777 "$OD/run"
	cp "$SA" "$OD/$SANAME"
	timeout -k 5 240 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$OD/$SANAME" after "$OD/run/o.ready" "$OD/run/o.go" \
		>"$T_DIR/o.out" 2>&1 </dev/null &
	TPIDS="$TPIDS $!"
	OPID=""
	wait_until 30 "nobody's top_grow ready" test -s "$OD/run/o.ready" &&
		OPID=$(sed -n 's/^pid //p' "$OD/run/o.ready")
	TPIDS="$TPIDS $OPID"
	if [ -n "$OPID" ] && start_serve s8 -p "$OPID" -i 1; then
		http "$SURL/debug/pprof/heap?pid=$OPID" >"$T_DIR/s8.body"
		assert_eq 403 "$HTTP_CODE" "?pid= of another user's process"
		assert_match "another user's" "$(cat "$T_DIR/s8.body")" "why"
		scrape
		assert_eq "" "$(metric heapprof_live_bytes "$OPID")" \
			"not in /metrics"
		assert_eq "0" "$(sed -n 's/^heapprof_targets //p' "$T_DIR/metrics")" \
			"no target"
		stop_serve s8
	fi
	if [ -n "$OPID" ] && start_serve s9 -p "$OPID" -i 1 --all-users; then
		APID=$OPID
		wait_until 30 "the session on nobody's $OPID" attached
		touch "$OD/run/o.go"
		wait_until 30 "live bytes 1000000 of nobody's process" live_is 1000000
		http "$SURL/debug/pprof/heap?pid=$OPID" >/dev/null
		assert_eq 200 "$HTTP_CODE" "?pid= with --all-users"
		stop_serve s9
	fi
	kill -TERM "$OPID" 2>/dev/null
	rm -rf "$OD"
fi

t_begin "serve -c FILE: the options from a config; IPv6 loopback"
if start_alloc cf; then
	printf '# the agent\npid: %s\ninterval: 1\ntop: 2\nall_heaps: false\n' \
		"$APID" >"$W/serve.conf"
	if start_serve s10 -c "$W/serve.conf"; then
		wait_until 30 "the session on $APID in /metrics" attached
		touch "$W/cf.go"
		wait_until 30 "live bytes 1000000 (interval 1 from the config)" \
			live_is 1000000
		assert_eq 1 "$(metric heapprof_sampling_interval_bytes "$APID")" \
			"the config's interval"
		stop_serve s10
	fi
	if [ -r /proc/net/if_inet6 ] && grep -q ' lo$' /proc/net/if_inet6; then
		timeout -k 5 60 "$HP" serve -p "$APID" --listen '[::1]:0' \
			>"$T_DIR/v6.out" 2>"$T_DIR/v6.err" </dev/null &
		V6=$!
		TPIDS="$TPIDS $V6"
		wait_until 20 "serve on [::1] listening" \
			grep -q '^heapprof serve: listening on http://\[::1\]:[0-9]' \
			"$T_DIR/v6.out"
		v6url=$(sed -n 's|^heapprof serve: listening on \(http://\[::1\]:[0-9]*\)/.*|\1|p' \
			"$T_DIR/v6.out")
		http "$v6url/metrics" -g >/dev/null
		assert_eq 200 "$HTTP_CODE" "/metrics over IPv6 loopback"
		kill -TERM "$V6"
		wait_pid_bounded 30 "$V6"
		assert_eq 0 "$WAIT_RC" "serve on [::1]: exit status"
	else
		t_skip "no IPv6 loopback here"
	fi
fi

t_begin "serve -c FILE in record's config syntax (docs/CONFIG.md)"
if start_alloc cg; then
	printf '# the agent, as record -c reads it\npid: %s\nsampling_interval_bytes: 1 # exact\ntop: 2, heaps: "libc.malloc"\n' \
		"$APID" >"$W/serve2.conf"
	if start_serve s12 -c "$W/serve2.conf"; then
		wait_until 30 "the session on $APID in /metrics" attached
		touch "$W/cg.go"
		wait_until 30 "live bytes 1000000 (interval 1 from the config)" \
			live_is 1000000
		assert_eq 1 "$(metric heapprof_sampling_interval_bytes "$APID")" \
			"the config's interval"
		stop_serve s12
	fi
	kill -TERM "$APID" 2>/dev/null
fi

t_begin "serve: a command name cut inside a UTF-8 character is labelled valid UTF-8"
U8NAME="utf8name-abcdeé"   # 14 bytes, then 2: /proc keeps 15
cp "$PROGS/top_grow" "$W/$U8NAME"
if start_alloc u8 "$W/$U8NAME" && start_serve s11 -p "$APID" -i 1; then
	wait_until 30 "the session on $APID in /metrics" attached
	assert_eq ok "$(python3 -c '
import sys
b = open(sys.argv[1], "rb").read()
b.decode("utf-8")
print("ok" if "comm=\"utf8name-abcde\ufffd\"".encode() in b else "no label")
' "$T_DIR/metrics" 2>&1)" "/metrics is UTF-8, the cut byte as U+FFFD"
	stop_serve s11
fi
kill -TERM "$APID" 2>/dev/null

t_begin "serve: errors in one line"
expect_error e1 2 'not a loopback address' serve -p "$APID" --listen 0.0.0.0:0
expect_error e2 2 'need -p PID or -n NAME' serve
expect_error e3 2 'invalid --listen' serve -p "$APID" --listen nowhere
expect_error e4 2 'token-file' serve -p "$APID" --token-file "$W/none"
printf 'pid: 1\nbogus: 2\n' >"$W/bad.conf"
expect_error e5 2 'bad.conf:2: unknown key .bogus.' serve -c "$W/bad.conf"
printf 'allow_remote: perhaps\n' >"$W/bad2.conf"
expect_error e6 2 'bad2.conf:1: allow-remote is true or false' \
	serve -c "$W/bad2.conf"
printf 'process_cmdline: "a,b"\n' >"$W/bad3.conf"
expect_error e10 2 "config .*bad3.conf:1: field 'process_cmdline': a ','" \
	serve -c "$W/bad3.conf"
printf 'listen: "127.0.0.1:0"\nsampling_interval_bytes: 64X\n' >"$W/bad4.conf"
expect_error e11 2 "config .*bad4.conf:2: field 'sampling_interval_bytes'" \
	serve -c "$W/bad4.conf"
expect_error e7 2 'not a loopback address' serve -p 1 --listen '[::]:0'
expect_error e8 2 'invalid --listen address' serve -p 1 --listen '[zz]:0'
expect_error e9 1 '-o .*: not a directory' serve -p 1 -o "$W/bad.conf"

t_summary
