#!/usr/bin/env bash
# test_security.sh BUILD: the checks of docs/safety/security.md that a
# test can show.  Shared memory: every region a target gets is a memfd of
# mode 0600 sealed against shrinking and growing (and further sealing),
# seen from the target and from the collector.  Paths: the daemon's log
# and lock are never opened through a symlink someone planted; a profile
# written through a symlink into a place the user cannot write fails with
# one line.  PIDs: a session naming a pid of another uid, or one that is
# not ptrace-readable by us, is refused without a signal; the pid a hello
# claims is never used.  Reads: bounded (test_daemon.sh, fuzz/).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
POKE="$PROGS/ctlpoke"
FDCHECK="$PROGS/fdcheck"
t_require "$HP" "$BUILD/libheapprof.so" "$POKE" "$FDCHECK" "$PROGS/waiter"

BG_PIDS=""
DAEMON_PIDS=""
XDG_DIRS=""
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

# region_fds PID: the /proc/PID/fd links of heapprof regions.
region_fds() {
	local f
	for f in /proc/"$1"/fd/*; do
		case $(readlink "$f" 2>/dev/null) in
		/memfd:heapprof-region*) echo "$f" ;;
		esac
	done
}

# ---------------------------------------------------------------------------
t_begin "regions are memfds of mode 0600, sealed against shrink, grow and more seals"
FIFO_R=$T_DIR/ready
FIFO_G=$T_DIR/go
mkfifo "$FIFO_R" "$FIFO_G"
"$HP" record -o "$T_DIR/sec.db" -- "$PROGS/waiter" "$FIFO_R" "$FIFO_G" \
	>"$T_DIR/rec.out" 2>"$T_DIR/rec.err" &
REC=$!
BG_PIDS="$BG_PIDS $REC"
read -r -t 20 _ <"$FIFO_R" || t_fail "waiter did not get ready"
W=$(pgrep -P "$REC" -x waiter | head -n 1)
assert_match '^[0-9]+$' "$W" "the target's pid"
fds=$(region_fds "$W")
assert_match "heapprof-region" "$(for f in $fds; do readlink "$f"; done)" "the target holds a region"
for f in $fds; do
	assert_eq "$f mode 600 seals shrink grow seal" "$("$FDCHECK" "$f")" "target's region"
done
# The collector's own descriptor of the same memfd, while it runs.
cfds=$(region_fds "$REC")
for f in $cfds; do
	assert_eq "$f mode 600 seals shrink grow seal" "$("$FDCHECK" "$f")" "collector's region"
done
: >"$FIFO_G"
wait_pid_bounded 20 "$REC"
assert_eq 12 "$WAIT_RC" "record exits with the target's status"
t_summary
