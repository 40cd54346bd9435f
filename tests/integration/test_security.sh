#!/usr/bin/env bash
# test_security.sh BUILD: the checks of docs/safety/security.md that a
# test can show.  Shared memory: every region (record -- CMD, and a
# daemon session's late attach) is a memfd of mode 0600 sealed against
# shrinking, growing and further seals, as the target sees it.  Paths: the
# daemon never opens its log or lock through a planted symlink; `record
# -o` over a symlink replaces the link and never writes through it, and
# into a directory the user cannot write fails with one line.  PIDs: a
# session naming a process of another uid (real or effective), one that
# maps a file named like the client without its handler, or the daemon
# itself, is refused and never signalled.  (Bounded reads and claimed
# pids: test_daemon.sh and fuzz/.)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
POKE="$PROGS/ctlpoke"
FDCHECK="$PROGS/fdcheck"
t_require "$HP" "$BUILD/libheapprof.so" "$POKE" "$FDCHECK" "$PROGS/waiter"

. "$HERE/daemon_helpers.sh"

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
# ---------------------------------------------------------------------------
# new_xdg, start_daemon: daemon_helpers.sh.

t_begin "the daemon never opens its log or lock through a planted symlink"
new_xdg
mkdir -m 700 "$DIR"
echo secret >"$X/victim"
ln -s "$X/victim" "$LOG"
start_daemon log-link
assert_eq 1 "$START_RC" "daemon exit status with a symlinked log"
assert_eq "heapprof: daemon: cannot open $LOG: Too many levels of symbolic links" "$(cat "$T_DIR/log-link.err")" "message"
assert_eq secret "$(cat "$X/victim")" "the symlink's target is untouched"
rm -f "$LOG"
ln -s "$X/victim2" "$DIR/heapprofd.lock"
start_daemon lock-link
assert_eq 1 "$START_RC" "daemon exit status with a symlinked lock"
assert_match "heapprofd.lock: Too many levels of symbolic links" "$(cat "$T_DIR/lock-link.err")" "message"
[ -e "$X/victim2" ] && t_fail "the lock symlink was followed: $X/victim2 exists"
rm -f "$DIR/heapprof.lock" "$DIR/heapprofd.lock" "$LOG"

# ---------------------------------------------------------------------------
t_begin "pids a session names: another uid (real or effective), a fake client, heapprofd itself: refused, never signalled"
start_daemon sec
assert_eq 0 "$START_RC" "daemon starts ($(cat "$T_DIR/sec.err"))"
sleep 300 &
PLAIN=$!
BG_PIDS="$BG_PIDS $PLAIN"
# A program whose own file is named like the client library, without the
# client's handler: signal 60 would kill it.
cp "$(command -v sleep)" "$T_DIR/libheapprof-fake"
"$T_DIR/libheapprof-fake" 300 &
FAKE=$!
BG_PIDS="$BG_PIDS $FAKE"
pids="-p $PLAIN -p $FAKE -p $DPID"
EUID_P="" RUID_P=""
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	setpriv --euid=65534 sleep 300 &
	EUID_P=$!
	setpriv --ruid=65534 sleep 300 &
	RUID_P=$!
	BG_PIDS="$BG_PIDS $EUID_P $RUID_P"
	pids="$pids -p $EUID_P -p $RUID_P"
fi
for i in $(seq 1 100); do # until the copies run their own program
	grep -q libheapprof-fake "/proc/$FAKE/maps" 2>/dev/null && break
	sleep 0.05
done
# ... and the others have exec'd sleep (a `cmd &` is the shell's fork at
# first, of uid 0, named bash).
for p in $PLAIN $EUID_P $RUID_P; do wait_comm "$p" sleep; done
out=$(run_bounded 20 "$POKE" "$SOCK" session $pids -t 1500)
assert_match "^target $PLAIN 4 sleep: sleep \(pid $PLAIN\) does not have libheapprof loaded" "$out" "plain process: NO_CLIENT"
assert_match "^target $FAKE 4 libheapprof-fak[a-z]*: .*has libheapprof but does not catch signal 60" "$out" "no handler: NO_CLIENT, no signal"
assert_match "^target $DPID 3 heapprofd: pid $DPID is heapprofd itself" "$out" "the daemon itself: DENIED"
if [ -n "$EUID_P" ]; then
	assert_match "^target $EUID_P 3 sleep: sleep \(pid $EUID_P\) runs as uid 65534, not as uid 0" "$out" "effective uid 65534: DENIED"
	assert_match "^target $RUID_P 3 sleep: sleep \(pid $RUID_P\)" "$out" "real uid 65534: DENIED"
	for p in $EUID_P $RUID_P; do
		kill -0 "$p" 2>/dev/null || t_fail "pid $p of another uid died"
	done
else
	t_skip "needs root and setpriv for processes of another uid"
fi
kill -0 "$FAKE" 2>/dev/null || t_fail "the process without the handler was killed (signalled)"
kill -0 "$PLAIN" 2>/dev/null || t_fail "the plain process died"
kill -0 "$DPID" 2>/dev/null || t_fail "the daemon died"

# ---------------------------------------------------------------------------
t_begin "a daemon session's regions are 0600 and sealed too"
LD_PRELOAD=$BUILD/libheapprof.so "$PROGS/waiter" "$FIFO_R" "$FIFO_G" >/dev/null 2>&1 &
W=$!
BG_PIDS="$BG_PIDS $W"
read -r -t 10 _ <"$FIFO_R" || t_fail "waiter did not get ready"
"$HP" record -p "$W" -o "$T_DIR/dsec.db" >"$T_DIR/drec.out" 2>"$T_DIR/drec.err" &
DREC=$!
BG_PIDS="$BG_PIDS $DREC"
fds=""
for i in $(seq 1 200); do
	fds=$(region_fds "$W")
	[ -n "$fds" ] && break
	sleep 0.05
done
assert_match "fd" "$fds" "the late-attached target holds a region"
for f in $fds; do
	assert_eq "$f mode 600 seals shrink grow seal" "$("$FDCHECK" "$f")" "late-attach region"
done
: >"$FIFO_G"
wait_pid_bounded 20 "$W"
wait_pid_bounded 20 "$DREC"

# ---------------------------------------------------------------------------
t_begin "-o through a symlink into a place the user cannot write: never written through; -o there: one line, non-zero exit"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	ROOTDIR=$(mktemp -d /tmp/hps-root.XXXXXX)
	XDG_DIRS="$XDG_DIRS $ROOTDIR"
	chmod 755 "$ROOTDIR"
	UDIR=$(mktemp -d /tmp/hps-user.XXXXXX)
	XDG_DIRS="$XDG_DIRS $UDIR"
	chown 65534:65534 "$UDIR"
	ln -s "$ROOTDIR/stolen.db" "$UDIR/link.db"
	as_nobody() {
		(cd "$UDIR" && run_bounded 30 env -u XDG_RUNTIME_DIR HOME="$UDIR" TMPDIR="$UDIR" \
			setpriv --reuid=65534 --regid=65534 --clear-groups "$@")
	}
	# The old profile (here a symlink) is removed, never written through:
	# the new profile is a file of its own where the link was.
	rc=0
	out=$(as_nobody "$HP" record -o "$UDIR/link.db" -- /bin/true 2>&1) || rc=$?
	assert_eq 0 "$rc" "record over a symlink ($out)"
	[ -L "$UDIR/link.db" ] && t_fail "link.db is still a symlink"
	[ -f "$UDIR/link.db" ] || t_fail "no profile at link.db"
	[ -e "$ROOTDIR/stolen.db" ] && t_fail "a file was created through the symlink"
	# Straight into the directory it cannot write.
	rc=0
	out=$(as_nobody "$HP" record -o "$ROOTDIR/direct.db" -- /bin/true 2>&1) || rc=$?
	assert_ne 0 "$rc" "record into $ROOTDIR: exit status"
	assert_eq 1 "$(printf '%s\n' "$out" | grep -c '^heapprof: ')" "one error line ($out)"
	assert_match "direct.db" "$out" "the line names the file"
	[ -e "$ROOTDIR/direct.db" ] && t_fail "direct.db was created"
else
	t_skip "needs root and setpriv to run as another uid"
fi

t_summary
