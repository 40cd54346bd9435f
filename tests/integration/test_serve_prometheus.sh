#!/usr/bin/env bash
# test_serve_prometheus.sh BUILD: Debian's own `prometheus` scrapes
# `heapprof serve` (docs/FLEET.md).  progs/top_grow, profiled by the
# agent's session at -i 1, keeps 10 blocks of 100000 bytes in keep_here()
# and allocates and frees 5 of 1000; prometheus, on a free loopback port
# of its own with a config written here (scrape_interval 1s), scrapes the
# agent's /metrics; its HTTP API (/api/v1/query, /api/v1/targets) gives
# the exact numbers the agent gives (live 1000000, allocated 1005000,
# keep_here 1000000) with the agent's labels and its own, the target
# "up", nothing logged against the scrape.  With --token-file, a job with
# `authorization: {type: Bearer, credentials_file: ...}` scrapes the same
# numbers and a job with a wrong token has its target down with a 401.
# Skipped, with the reason, when prometheus is not installed.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/top_grow"
. "$HERE/session_helpers.sh"
. "$HERE/serve_helpers.sh"

# free_port: a loopback TCP port free right now (bound and let go).
free_port() {
	timeout -k 5 20 python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
' </dev/null
}

# prom_config FILE JOB TOKENFILE [JOB TOKENFILE]...: a config with one
# job per JOB scraping the agent at $SURL every second, with that bearer
# token file unless it is "".
prom_config() {
	local f=$1
	shift
	printf 'global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n' >"$f"
	printf 'scrape_configs:\n' >>"$f"
	while [ $# -gt 0 ]; do
		printf '  - job_name: %s\n    metrics_path: /metrics\n' \
			"$1" >>"$f"
		if [ -n "$2" ]; then
			printf '    authorization:\n      type: Bearer\n' >>"$f"
			printf '      credentials_file: %s\n' "$2" >>"$f"
		fi
		printf '    static_configs:\n      - targets: ["%s"]\n' \
			"${SURL#http://}" >>"$f"
		shift 2
	done
}

# prom_ready PORT: prometheus on PORT answers /-/ready, or it is gone.
prom_ready() {
	PROM_UP=0
	if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
		"http://127.0.0.1:$1/-/ready" </dev/null)" = 200 ]; then
		PROM_UP=1
		return 0
	fi
	! kill -0 "$PROMPID" 2>/dev/null
}

# start_prom TAG CONFIG: Debian's prometheus with CONFIG in the
# background on a loopback port picked free (again if another process
# took it meanwhile), its TSDB in $T_DIR/TAG.tsdb, its messages in
# $T_DIR/TAG.log; PROMPID (timeout's pid), PURL once it is ready.
start_prom() {
	local tag=$1 cfg=$2 port kid
	PURL=""
	for _ in 1 2 3; do
		port=$(free_port) || {
			t_fail "no free port"
			return 1
		}
		timeout -k 5 120 prometheus --config.file="$cfg" \
			--storage.tsdb.path="$T_DIR/$tag.tsdb" \
			--web.listen-address="127.0.0.1:$port" \
			>"$T_DIR/$tag.log" 2>&1 </dev/null &
		PROMPID=$!
		TPIDS="$TPIDS $PROMPID"
		wait_until 30 "prometheus $tag ready" prom_ready "$port" ||
			return 1
		if [ "$PROM_UP" = 1 ]; then
			PURL="http://127.0.0.1:$port"
			# killed at exit itself, not only its timeout wrapper
			kid=$(cat "/proc/$PROMPID/task/$PROMPID/children" \
				2>/dev/null)
			TPIDS="$TPIDS $kid"
			return 0
		fi
		wait "$PROMPID"
		grep -q 'address already in use' "$T_DIR/$tag.log" || break
	done
	t_fail "prometheus $tag did not start: $(tail -c 600 "$T_DIR/$tag.log")"
	return 1
}

# stop_prom TAG: SIGTERM (timeout passes it on), exit status 0 expected,
# and nothing logged against the scrape or the samples meanwhile.
stop_prom() {
	kill -TERM "$PROMPID" 2>/dev/null
	wait_pid_bounded 30 "$PROMPID"
	assert_eq 0 "$WAIT_RC" \
		"prometheus' status after SIGTERM: $(tail -c 300 "$T_DIR/$1.log")"
	assert_no_match 'level=(warn|error).*(scrape|sample)' \
		"$(cat "$T_DIR/$1.log")" "prometheus' complaints"
}

# promq EXPR: prometheus' instant query EXPR at $PURL, one line per series
# as in the exposition format (labels sorted); nothing when there is none;
# status 1 if the API did not answer "success".
promq() {
	timeout -k 5 20 python3 -c '
import json, sys, urllib.parse, urllib.request
q = urllib.parse.urlencode({"query": sys.argv[2]})
with urllib.request.urlopen(sys.argv[1] + "/api/v1/query?" + q,
                            timeout=10) as r:
    d = json.load(r)
if d["status"] != "success":
    sys.exit(1)
for s in d["data"]["result"]:
    m = dict(s["metric"])
    name = m.pop("__name__", "")
    ls = ",".join("%s=\"%s\"" % (k, m[k]) for k in sorted(m))
    print("%s{%s} %s" % (name, ls, s["value"][1]))
' "$PURL" "$1" </dev/null
}
prom_has() { [ -n "$(promq "$1" 2>/dev/null)" ]; }

# prom_target JOB: "HEALTH SCRAPEURL LASTERROR" of JOB's one target, from
# prometheus' /api/v1/targets.
prom_target() {
	timeout -k 5 20 python3 -c '
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1] + "/api/v1/targets?state=active",
                            timeout=10) as r:
    d = json.load(r)
for t in d["data"]["activeTargets"]:
    if t["scrapePool"] == sys.argv[2]:
        print(t["health"], t["scrapeUrl"], t["lastError"])
' "$PURL" "$1" </dev/null
}
target_health_is() { # JOB HEALTH
	[ "$(prom_target "$1" 2>/dev/null | cut -d' ' -f1)" = "$2" ]
}

# tscrape: the agent's /metrics with the token into $T_DIR/metrics.
tscrape() {
	http "$SURL/metrics" -H "Authorization: Bearer $TOKEN" \
		>"$T_DIR/metrics"
	[ "$HTTP_CODE" = 200 ]
}
tlive_is() { tscrape && [ "$(metric heapprof_live_bytes "$APID")" = "$1" ]; }
tattached() { tscrape && [ -n "$(metric heapprof_live_bytes "$APID")" ]; }

# stop_alloc: SIGTERM to top_grow $APID (it exits 0), until it is gone.
alloc_gone() { ! kill -0 "$APID" 2>/dev/null; }
stop_alloc() {
	kill -TERM "$APID" 2>/dev/null
	wait_until 10 "top_grow $APID gone" alloc_gone
}

# check_series JOB NAME EXPECTED [FUNCTION]: NAME of $APID as prometheus
# has it from JOB, with the agent's labels and the target's, equal to the
# agent's own number in $T_DIR/metrics and to EXPECTED.
check_series() {
	local job=$1 name=$2 want=$3 fn=${4:-} sel agent lab
	sel="job=\"$job\",pid=\"$APID\""
	if [ -n "$fn" ]; then
		sel="$sel,function=\"$fn\""
		agent=$(sed -n "s/^$name{pid=\"$APID\".*function=\"$fn\"} //p" \
			"$T_DIR/metrics")
		fn="function=\"$fn\","
	else
		agent=$(metric "$name" "$APID")
	fi
	assert_eq "$want" "$agent" "the agent's $name $fn"
	lab="comm=\"$SANAME\",${fn}heap=\"libc.malloc\""
	lab="$lab,instance=\"${SURL#http://}\",job=\"$job\",pid=\"$APID\""
	assert_eq "$name{$lab} $want" "$(promq "$name{$sel}")" \
		"prometheus' $name $fn"
}

# check_samples JOB: as many samples in prometheus' last scrape of JOB as
# lines of samples in $T_DIR/metrics (it read every one of them).
check_samples() {
	assert_eq "$(grep -c '^[a-z]' "$T_DIR/metrics")" \
		"$(promq "scrape_samples_scraped{job=\"$1\"}" | sed 's/.* //')" \
		"the samples of a scrape of $1"
}

# ---------------------------------------------------------------------------
t_begin "prometheus scrapes serve's /metrics: the exact numbers, target up"
if ! command -v prometheus >/dev/null 2>&1; then
	t_skip "prometheus is missing (scripts/deps.sh --test installs it)"
elif start_alloc a && start_serve p1 -p "$APID" -i 1; then
	wait_until 30 "the agent's session on $APID in /metrics" attached
	touch "$W/a.go"
	wait_until 30 "live bytes 1000000" live_is 1000000
	prom_config "$T_DIR/p1.yml" heapprof ""
	if start_prom prom1 "$T_DIR/p1.yml"; then
		wait_until 20 "heapprof_live_bytes in prometheus" \
			prom_has "heapprof_live_bytes{pid=\"$APID\"}"
		scrape
		check_series heapprof heapprof_live_bytes 1000000
		check_series heapprof heapprof_allocated_bytes_total 1005000
		check_series heapprof heapprof_function_live_bytes 1000000 \
			keep_here
		check_samples heapprof
		assert_eq "up $SURL/metrics " "$(prom_target heapprof)" \
			"the target (health, URL, last error)"
		assert_eq "up{instance=\"${SURL#http://}\",job=\"heapprof\"} 1" \
			"$(promq 'up{job="heapprof"}')" "up"
		stop_prom prom1
	fi
	stop_serve p1
	stop_alloc
fi

t_begin "prometheus with the bearer token: scrapes; a wrong token: 401"
if ! command -v prometheus >/dev/null 2>&1; then
	t_skip "prometheus is missing (scripts/deps.sh --test installs it)"
else
	TOKEN="tok-$$-$RANDOM"
	echo "$TOKEN" >"$W/token"
	chmod 600 "$W/token" # serve refuses a token others may read
	echo "wrong-$$" >"$W/wrong"
	if start_alloc b && start_serve p2 -p "$APID" -i 1 \
		--token-file "$W/token"; then
		wait_until 30 "the agent's session on $APID in /metrics" \
			tattached
		touch "$W/b.go"
		wait_until 30 "live bytes 1000000" tlive_is 1000000
		prom_config "$T_DIR/p2.yml" right "$W/token" wrong "$W/wrong"
		if start_prom prom2 "$T_DIR/p2.yml"; then
			wait_until 20 "heapprof_live_bytes in prometheus" \
				prom_has "heapprof_live_bytes{pid=\"$APID\"}"
			wait_until 20 "the wrong token's target down" \
				target_health_is wrong down
			tscrape
			check_series right heapprof_live_bytes 1000000
			check_series right heapprof_function_live_bytes \
				1000000 keep_here
			check_samples right
			assert_eq "up $SURL/metrics " "$(prom_target right)" \
				"the token's target"
			assert_match "^down $SURL/metrics .*401" \
				"$(prom_target wrong)" "the wrong token's target"
			assert_eq "" "$(promq "{job=\"wrong\",pid=\"$APID\"}")" \
				"no series of the wrong token's job"
			assert_eq "up{instance=\"${SURL#http://}\",job=\"wrong\"} 0" \
				"$(promq 'up{job="wrong"}')" "up of the wrong one"
			stop_prom prom2
		fi
		stop_serve p2
		stop_alloc
	fi
fi

t_summary
