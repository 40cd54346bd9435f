# Sourced by the integration tests that drive sessions through a private
# heapprofd (after lib.sh, helpers.sh and t_setup_build): the daemon's
# socket under a private XDG_RUNTIME_DIR, a work dir $W (the cwd), and
# background targets and `heapprof record`s that are waited for on
# conditions with bounds.  Targets started in the background go into
# TPIDS; the daemon is DPID; both are killed at exit.
export XDG_RUNTIME_DIR="$T_DIR/xdg"
mkdir -m 700 "$XDG_RUNTIME_DIR"
SOCK="$XDG_RUNTIME_DIR/heapprof/heapprofd.sock"
DPID=""
TPIDS=""
W="$T_DIR/work"
mkdir -p "$W"
cd "$W" || exit 1

session_cleanup() {
	local p
	for p in $TPIDS; do kill -KILL "$p" 2>/dev/null; done
	[ -n "$DPID" ] && kill -KILL "$DPID" 2>/dev/null
	t_cleanup
}
trap session_cleanup EXIT

q() { sqlq "$@"; }

# wait_until SECONDS DESCRIPTION CMD...: polls CMD until it succeeds.
wait_until() {
	local secs=$1 what=$2
	shift 2
	local end=$((SECONDS + secs))
	until "$@"; do
		if [ "$SECONDS" -ge "$end" ]; then
			t_fail "no $what within ${secs}s"
			return 1
		fi
		sleep 0.02
	done
}

# wait_child SECONDS PID: like lib.sh's wait_pid_bounded, polling every
# 20 ms instead of every second; WAIT_RC is the status.
wait_child() {
	local secs=$1 pid=$2
	if ! timeout "$secs" tail -s 0.02 --pid="$pid" -f /dev/null 2>/dev/null; then
		t_fail "pid $pid still running after ${secs}s; killing it"
		kill -KILL "$pid" 2>/dev/null
	fi
	WAIT_RC=0
	wait "$pid" || WAIT_RC=$?
}

grep_q() { grep -Eq -- "$2" "$1" 2>/dev/null; }                      # FILE REGEX
count_is() { [ "$(grep -Ec -- "$2" "$1" 2>/dev/null)" = "$3" ]; } # FILE REGEX N

start_daemon() {
	rm -f "$SOCK"
	"$HP" daemon --foreground >>"$T_DIR/daemon.log" 2>&1 &
	DPID=$!
	# Not a job: killing it must not print "Killed" into the output.
	disown "$DPID"
	wait_until 20 "daemon socket" test -S "$SOCK"
}

# daemon_gone SIGNAL: sends it to the daemon and waits until it is gone.
daemon_gone() {
	[ -n "$DPID" ] || return 0
	kill "-$1" "$DPID" 2>/dev/null
	if ! timeout 20 tail -s 0.02 --pid="$DPID" -f /dev/null 2>/dev/null; then
		t_fail "heapprofd (pid $DPID) still running 20 s after SIG$1"
		kill -KILL "$DPID" 2>/dev/null
	fi
	DPID=""
}

# start_record TAG ARGS...: `heapprof record ARGS` in the background; RPID.
start_record() {
	local tag=$1
	shift
	timeout -k 5 120 "$HP" record "$@" >"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" </dev/null &
	RPID=$!
}

wait_record() { # TAG: waits for start_record's process; REC_RC
	wait_child 60 "$RPID"
	REC_RC=$WAIT_RC
	[ "$REC_RC" = 0 ] || { echo "  record $1 exited $REC_RC:"; show_err "$1"; }
}
