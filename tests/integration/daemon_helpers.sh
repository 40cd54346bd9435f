# daemon_helpers.sh: sourced by tests that start `heapprof daemon` each
# under a private XDG_RUNTIME_DIR (test_daemon.sh, test_security.sh), after
# lib.sh and helpers.sh.  Every daemon, background process and directory
# is stopped or removed at exit.

DAEMON_PIDS=""
XDG_DIRS=""
BG_PIDS=""
stop_all() {
	local p
	for p in $BG_PIDS; do kill -KILL "$p" 2>/dev/null; done
	for p in $DAEMON_PIDS; do
		kill -TERM "$p" 2>/dev/null || continue
		timeout 5 tail --pid="$p" -f /dev/null 2>/dev/null ||
			kill -KILL "$p" 2>/dev/null
	done
	for p in $XDG_DIRS; do chmod -R u+rwx "$p" 2>/dev/null; rm -rf "$p"; done
}
trap 'stop_all; t_cleanup' EXIT

# new_xdg: a fresh private XDG_RUNTIME_DIR in $X, with $DIR, $SOCK, $LOG.
# Short paths under /tmp: a socket path must fit 108 bytes.
new_xdg() {
	X=$(mktemp -d /tmp/hpd.XXXXXX) || exit 1
	XDG_DIRS="$XDG_DIRS $X"
	export XDG_RUNTIME_DIR=$X
	DIR=$X/heapprof
	SOCK=$DIR/heapprofd.sock
	LOG=$DIR/heapprofd.log
}

# start_daemon TAG: `heapprof daemon` (it returns once listening); sets
# DPID from its "(pid N)" and START_RC.
start_daemon() {
	START_RC=0
	run_bounded 20 "$HP" daemon >"$T_DIR/$1.out" 2>"$T_DIR/$1.err" || START_RC=$?
	DPID=$(sed -n 's/.*(pid \([0-9][0-9]*\))$/\1/p' "$T_DIR/$1.out")
	[ -n "$DPID" ] && DAEMON_PIDS="$DAEMON_PIDS $DPID"
	return 0
}

# wait_comm PID NAME: until the background job PID has exec'd NAME (a
# `cmd &` is the shell's fork for a moment), at most 5 s.
wait_comm() {
	local i
	for i in $(seq 1 100); do
		[ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] && return 0
		sleep 0.05
	done
	t_fail "pid $1 did not become $2 within 5 s"
}
