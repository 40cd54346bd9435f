#!/usr/bin/env bash
# test_daemon.sh BUILD: heapprofd on its own (docs/DAEMON.md): start,
# --status, --stop; its private socket directory; one daemon per user; a
# stale socket; garbage, truncated, oversize and silent peers (with
# progs/ctlpoke) never stop it serving the next request; peers of another
# uid are refused; SIGUSR1 and `heapprof dump`; the daemon's side of a
# session (targets, dumps, a second session refused) with ctlpoke as a
# fake session.  End-to-end `record -p/-n` sessions are in their own tests.
#
# Every daemon runs under a private XDG_RUNTIME_DIR and is stopped at exit.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
POKE="$PROGS/ctlpoke"
t_require "$HP" "$BUILD/heapprofd" "$BUILD/libheapprof.so" "$POKE" "$PROGS/waiter"

. "$HERE/daemon_helpers.sh"

# alive PID: running (a zombie, exited but not yet reaped by whoever
# adopted the daemon, is not).
alive() {
	local st
	st=$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# reap PID: kill a background child of ours and reap it quietly.
reap() {
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}

# wait_log REGEX: until the daemon's log has a line matching REGEX (5 s).
wait_log() {
	local i
	for i in $(seq 1 100); do
		grep -Eq -- "$1" "$LOG" 2>/dev/null && return 0
		sleep 0.05
	done
	t_fail "no log line /$1/ in 5 s: $(tail -n 5 "$LOG" 2>/dev/null | tr '\n' '|')"
	return 1
}

# status_ok TAG: --status answers within 2 s and names our daemon.
status_ok() {
	local out rc=0
	out=$(run_bounded 10 timeout 2 "$HP" daemon --status 2>&1) || rc=$?
	assert_eq 0 "$rc" "$1: --status exit status ($out)" || return 1
	assert_match "^heapprofd pid $DPID, socket $SOCK" "$out" "$1: --status" || return 1
}

# ---------------------------------------------------------------------------
t_begin "no daemon: heapprof dump and --status exit 1 and say how to start one"
new_xdg
rc=0
out=$("$HP" dump 2>&1) || rc=$?
assert_eq 1 "$rc" "dump exit status"
assert_eq "heapprof: dump: no heapprofd is running (no socket at $SOCK); start it with 'heapprofd' or 'heapprof daemon'" "$out" "dump message"
rc=0
out=$("$HP" daemon --status 2>&1) || rc=$?
assert_eq 1 "$rc" "--status exit status"
assert_match "no heapprofd is running" "$out" "--status message"
rc=0
out=$("$HP" dump -p nope 2>&1) || rc=$?
assert_eq 2 "$rc" "dump -p nope: usage error"

# ---------------------------------------------------------------------------
t_begin "heapprof daemon: listens on the socket in a 0700 directory, --status"
new_xdg
start_daemon start
assert_eq 0 "$START_RC" "daemon exit status ($(cat "$T_DIR/start.err"))"
assert_eq "heapprofd: listening on $SOCK (pid $DPID)" "$(cat "$T_DIR/start.out")" "startup line"
[ -S "$SOCK" ] || t_fail "no socket at $SOCK"
assert_eq 700 "$(stat -c %a "$DIR")" "directory mode"
assert_eq "$(id -u)" "$(stat -c %u "$DIR")" "directory owner"
assert_eq 0 "$(($(stat -c '%#a' "$SOCK") & 077))" "socket has no group/other permission"
alive "$DPID" || t_fail "daemon $DPID not running"
status_ok status
out=$("$HP" daemon --status)
assert_match "0 sessions" "$out" "--status with no session"
# heapprofd by its own name
out=$(run_bounded 10 "$BUILD/heapprofd" --status 2>&1)
assert_match "^heapprofd pid $DPID" "$out" "heapprofd --status"
[ -f "$LOG" ] || t_fail "no log at $LOG"
wait_log "listening on $SOCK"

# ---------------------------------------------------------------------------
t_begin "a second daemon is refused and the first keeps serving"
FIRST=$DPID
start_daemon second
assert_eq 1 "$START_RC" "second daemon exit status"
assert_eq "heapprof: daemon: heapprofd is already running (pid $FIRST)" "$(cat "$T_DIR/second.err")" "second daemon message"
DPID=$FIRST
status_ok after-second
rc=0
out=$(run_bounded 10 "$BUILD/heapprofd" --foreground 2>&1) || rc=$?
assert_eq 1 "$rc" "second daemon in the foreground"
assert_match "already running \(pid $FIRST\)" "$out" "foreground message"

# ---------------------------------------------------------------------------
t_begin "garbage, truncated, oversize and malformed messages are refused; the daemon goes on"
# Unknown protocol: closed at once.
out=$(run_bounded 10 "$POKE" "$SOCK" raw 0102030405060708 2000)
assert_eq closed "$out" "unknown magic"
wait_log "unknown protocol \(first bytes 01 02 03 04\)"
# A ctl header claiming 2 GiB of payload: an error, never an allocation.
out=$(run_bounded 10 "$POKE" "$SOCK" header 10 0x7fffffff 0 2000)
assert_match "^reply 3 bad message \(type 10, length 2147483647\)" "$out" "oversize length"
assert_match "closed$" "$out" "oversize: closed"
# A known type with the wrong size, an unknown type.
out=$(run_bounded 10 "$POKE" "$SOCK" header 6 3 3 2000)
assert_match "^reply 3 bad message \(type 6, length 3\)" "$out" "DUMP of 3 bytes"
out=$(run_bounded 10 "$POKE" "$SOCK" header 999 0 0 2000)
assert_match "^reply 3 bad message \(type 999" "$out" "unknown type"
# Truncated: a DUMP header and 3 of its 8 bytes, then silence: closed after
# the 2 s deadline.
out=$(run_bounded 10 "$POKE" "$SOCK" header 6 8 3 4000)
assert_eq closed "$out" "truncated DUMP"
wait_log "no complete message in 2000 ms \(19 bytes\)"
# Malformed SESSION_START payloads: counts beyond the limits, a name
# without its NUL, a truncated pid list, no target at all.
s_hdr() { # FLAGS NPIDS NNAMES: struct hp_ctl_session, little-endian hex
	printf '%08x%08x%08x00000000' "$1" "$2" "$3" | sed -E 's/(..)(..)(..)(..)/\4\3\2\1/g'
}
c_hdr() { # TYPE LEN
	printf '48504354%s%s%s00000000' "$(printf '%04x' 1 | sed -E 's/(..)(..)/\2\1/')" \
		"$(printf '%04x' "$1" | sed -E 's/(..)(..)/\2\1/')" \
		"$(printf '%08x' "$2" | sed -E 's/(..)(..)(..)(..)/\4\3\2\1/')"
}
out=$("$POKE" "$SOCK" raw "$(c_hdr 1 16)$(s_hdr 3 5000 0)" 2000)
assert_match "^reply 3 SESSION_START: 5000 pids" "$out" "too many pids"
out=$("$POKE" "$SOCK" raw "$(c_hdr 1 19)$(s_hdr 3 0 1)616263" 2000)
assert_match "^reply 3 SESSION_START: name 1 is not NUL-terminated" "$out" "unterminated name"
out=$("$POKE" "$SOCK" raw "$(c_hdr 1 18)$(s_hdr 3 1 0)0100" 2000)
assert_match "^reply 3 SESSION_START: truncated pid list" "$out" "truncated pid list"
out=$("$POKE" "$SOCK" raw "$(c_hdr 1 16)$(s_hdr 3 0 0)" 2000)
assert_match "^reply 3 SESSION_START: no pid and no name" "$out" "empty session"
out=$("$POKE" "$SOCK" raw "$(c_hdr 1 21)$(s_hdr 3 0 1)6162630065" 2000)
assert_match "^reply 3 SESSION_START: 21 bytes, 20 used" "$out" "trailing bytes"
# A hello that is cut short.
out=$(run_bounded 10 "$POKE" "$SOCK" raw 48454c4c01000000 4000)
assert_eq closed "$out" "truncated hello"
# A descriptor sent to the daemon is closed, not kept.
out=$(run_bounded 10 "$POKE" "$SOCK" fd)
assert_match "passed fd closed by the daemon" "$out" "passed descriptor"
alive "$DPID" || t_fail "daemon died"
status_ok after-garbage

# ---------------------------------------------------------------------------
t_begin "silent peers do not block the loop; they are closed after 2 s"
pids=""
for i in $(seq 1 20); do
	"$POKE" "$SOCK" silent 5000 >"$T_DIR/silent.$i.out" 2>/dev/null &
	pids="$pids $!"
done
BG_PIDS="$BG_PIDS $pids"
sleep 0.3 # let them connect: the point is that they are there now
t0=$(date +%s%N)
status_ok during-silent
t1=$(date +%s%N)
assert_le $(((t1 - t0) / 1000000)) 1000 "--status took ms while 20 peers were silent"
for p in $pids; do wait_pid_bounded 10 "$p"; done
for i in $(seq 1 20); do
	assert_eq closed "$(cat "$T_DIR/silent.$i.out")" "silent peer $i closed by the daemon"
done

# ---------------------------------------------------------------------------
t_begin "hellos: a process nobody wants is answered NOT_TARGET at once"
for f in 0 1 2 4 8 255; do
	out=$(run_bounded 10 "$POKE" "$SOCK" hello "$f")
	assert_eq "welcome 1" "$out" "hello flags $f"
done
status_ok after-hellos

# ---------------------------------------------------------------------------
# log_count REGEX: lines of the daemon's log matching REGEX.
log_count() { grep -Ec -- "$1" "$LOG" 2>/dev/null || true; }
# rand_hex N: N random bytes in hex.
rand_hex() { head -c "$1" /dev/urandom | od -An -tx1 -v | tr -d ' \n'; }

t_begin "every message type: oversize, wrong-size, garbage and truncated payloads; one log line each, the daemon goes on"
# Payload sizes (ctl.h): -N is "at least N" (variable).
declare -A SIZE=([1]=-16 [2]=8 [3]=-0 [4]=24 [5]=264 [6]=8 [7]=16 [8]=16 [9]=16 [10]=0 [11]=-0 [12]=0)
for t in 1 2 3 4 5 6 7 8 9 10 11 12 0 13 65535; do
	# Oversize: more than HP_CTL_MAX_PAYLOAD, refused from the header.
	n0=$(wc -l <"$LOG")
	out=$(run_bounded 10 "$POKE" "$SOCK" header "$t" 65537 0 2000)
	assert_match "^reply 3 bad message \(type $t, length 65537\)" "$out" "type $t oversize"
	assert_match "closed$" "$out" "type $t oversize: closed"
	assert_eq 1 $(($(wc -l <"$LOG") - n0)) "type $t oversize: log lines"
	sz=${SIZE[$t]:-}
	[ -z "$sz" ] && continue
	# Wrong size: a fixed-size type with one byte more; a
	# variable one (SESSION_START) one byte short of its minimum.
	case $sz in
	-16) bad=15 ;;
	-*) bad= ;;
	*) bad=$((sz + 1)) ;;
	esac
	if [ -n "$bad" ]; then
		n0=$(wc -l <"$LOG")
		out=$(run_bounded 10 "$POKE" "$SOCK" header "$t" "$bad" "$bad" 2000)
		assert_match "^reply 3 bad message \(type $t, length $bad\)" "$out" "type $t of $bad bytes"
		assert_eq 1 $(($(wc -l <"$LOG") - n0)) "type $t of $bad bytes: log lines"
	fi
	# Garbage of an acceptable size (SHUTDOWN and STATUS have none).
	case $t in
	10 | 12) continue ;;
	1) len=40 pl=$(printf 'f0000000')$(rand_hex 36) ;; # unknown flags
	6) len=8 pl=fbffffff$(rand_hex 4) ;;               # pid -5
	3 | 11) len=40 pl=$(rand_hex 40) ;;
	*) len=${sz#-} pl=$(rand_hex "${sz#-}") ;;
	esac
	n0=$(wc -l <"$LOG")
	out=$(run_bounded 10 "$POKE" "$SOCK" raw "$(c_hdr "$t" "$len")$pl" 2000)
	case $t in
	1) want="SESSION_START: unknown flags" ;;
	6) want="DUMP: invalid pid -5" ;;
	*) want="unexpected message type $t" ;;
	esac
	assert_match "^reply 3 $want" "$out" "type $t garbage"
	assert_match "closed$" "$out" "type $t garbage: closed"
	assert_eq 1 $(($(wc -l <"$LOG") - n0)) "type $t garbage: log lines"
done
# Truncated: the header and all but one payload byte (or half a header
# for the types without payload), then a stall: each is closed at the 2 s
# deadline with one line.  All at once, in the background.
n0=$(log_count "no complete message in 2000 ms")
tp=""
for t in 1 2 3 4 5 6 7 8 9 10 11 12; do
	sz=${SIZE[$t]#-}
	case $t in
	10 | 12) "$POKE" "$SOCK" raw "$(c_hdr "$t" 0 | cut -c1-16)" 6000 >"$T_DIR/trunc.$t" 2>&1 & ;;
	1 | 3 | 11) "$POKE" "$SOCK" header "$t" 40 39 6000 >"$T_DIR/trunc.$t" 2>&1 & ;;
	*) "$POKE" "$SOCK" header "$t" "$sz" $((sz - 1)) 6000 >"$T_DIR/trunc.$t" 2>&1 & ;;
	esac
	tp="$tp $!"
done
BG_PIDS="$BG_PIDS $tp"
status_ok during-truncated
for p in $tp; do wait_pid_bounded 15 "$p"; done
for t in 1 2 3 4 5 6 7 8 9 10 11 12; do
	assert_eq closed "$(cat "$T_DIR/trunc.$t")" "type $t truncated, stalled: closed"
done
assert_eq 12 $(($(log_count "no complete message in 2000 ms") - n0)) "one log line per stalled peer"
alive "$DPID" || t_fail "daemon died"
status_ok after-every-type

# ---------------------------------------------------------------------------
t_begin "descriptors passed to the daemon: 253 of every kind are closed, one log line"
nfd0=$(ls "/proc/$DPID/fd" | wc -l)
n0=$(log_count "passed [0-9]+ descriptors")
out=$(run_bounded 10 "$POKE" "$SOCK" fds 253)
assert_match "^reply 11 heapprofd pid $DPID" "$out" "STATUS with 253 descriptors is answered"
assert_match "closed$" "$out" "then closed"
assert_eq 1 $(($(log_count "passed [0-9]+ descriptors") - n0)) "log lines"
for i in $(seq 1 100); do
	[ "$(ls "/proc/$DPID/fd" | wc -l)" = "$nfd0" ] && break
	sleep 0.05
done
assert_eq "$nfd0" "$(ls "/proc/$DPID/fd" | wc -l)" "daemon's descriptors after"
# A descriptor with a client hello and with garbage.
out=$(run_bounded 10 "$POKE" "$SOCK" fd)
assert_match "passed fd closed by the daemon" "$out" "one passed descriptor"
status_ok after-fds

# ---------------------------------------------------------------------------
t_begin "a hello claiming another pid: SO_PEERCRED's is used, one log line"
for claim in "$DPID 1" "1 1" "-5 0" "999999999 $DPID"; do
	set -- $claim
	n0=$(log_count "hello claims pid $1;")
	out=$(run_bounded 10 "$POKE" "$SOCK" hello 2 "$1" "$2")
	assert_eq "welcome 1" "$out" "LATE hello claiming pid $1"
	assert_eq 1 $(($(log_count "hello claims pid $1;") - n0)) "claim $1: log lines"
	out=$(run_bounded 10 "$POKE" "$SOCK" hello 8 "$1" "$2")
	assert_eq "welcome 1" "$out" "FORK_CHILD hello claiming pid $1, parent $2"
done
alive "$DPID" || t_fail "daemon died"
status_ok after-claims

# ---------------------------------------------------------------------------
t_begin "many connections at once: the limit refuses the rest with one log line; all are closed; the daemon goes on"
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 1200 ]; then
	t_skip "1100 connections need a descriptor limit of 1200 (hard limit $hard)"
else
	n0=$(log_count "too many connections|cannot accept a peer")
	out=$(run_bounded 60 "$POKE" "$SOCK" many 1100 20000)
	assert_eq "connected 1100 closed 1100" "$out" "1100 silent peers"
	assert_eq 1 $(($(log_count "too many connections|cannot accept a peer") - n0)) "log lines for the limit"
	alive "$DPID" || t_fail "daemon died"
	status_ok after-many
fi
# Out of descriptors (a low RLIMIT_NOFILE): accepting pauses instead of
# spinning, one line, and every peer is served (closed) in the end.
if command -v prlimit >/dev/null; then
	prlimit --pid "$DPID" --nofile=48:
	n0=$(log_count "cannot accept a peer")
	out=$(run_bounded 60 "$POKE" "$SOCK" many 100 30000)
	assert_eq "connected 100 closed 100" "$out" "100 peers with 48 descriptors"
	assert_eq 1 $(($(log_count "cannot accept a peer: Too many open files") - n0)) "log lines for EMFILE"
	prlimit --pid "$DPID" --nofile=1280:
	alive "$DPID" || t_fail "daemon died"
	status_ok after-emfile
else
	t_skip "no prlimit"
fi

# ---------------------------------------------------------------------------
t_begin "another uid is refused (SO_PEERCRED)"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	t_skip "needs root and setpriv to run a peer as another uid"
else
	# Make the socket reachable for uid 65534 for this test only.
	chmod 711 "$X" "$DIR"
	chmod 777 "$SOCK"
	out=$(run_bounded 10 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$POKE" "$SOCK" status 2>&1)
	chmod 700 "$X" "$DIR"
	chmod 600 "$SOCK"
	# Closed before or after it could send; never an answer.
	assert_match "^closed$" "$out" "peer of uid 65534 is closed"
	assert_no_match "^reply" "$out" "peer of uid 65534 gets no answer"
	wait_log "refused a peer of uid 65534"
	status_ok after-uid
fi

# ---------------------------------------------------------------------------
t_begin "SIGUSR1 and heapprof dump with no session"
kill -USR1 "$DPID"
wait_log "SIGUSR1 from pid [0-9]+: dump requested"
alive "$DPID" || t_fail "daemon died on SIGUSR1"
rc=0
out=$(run_bounded 20 "$HP" dump 2>&1) || rc=$?
assert_eq 1 "$rc" "dump exit status"
assert_eq "heapprof: dump: no session is recording; nothing dumped" "$out" "dump message"
rc=0
out=$(run_bounded 20 "$HP" dump -p 1 2>&1) || rc=$?
assert_eq 1 "$rc" "dump -p 1 exit status"
assert_eq "heapprof: dump: no session is recording pid 1; nothing dumped" "$out" "dump -p message"

# ---------------------------------------------------------------------------
t_begin "a session: its targets are checked and reported; dumps are relayed"
sleep 300 &
SLEEPER=$!
BG_PIDS="$BG_PIDS $SLEEPER"
wait_comm "$SLEEPER" sleep
"$POKE" "$SOCK" session -p "$SLEEPER" -p 999999999 -n no-such-program-here -t 6000 -D 3 \
	>"$T_DIR/sess.out" 2>&1 &
SESS=$!
BG_PIDS="$BG_PIDS $SESS"
for i in $(seq 1 100); do
	grep -q "^target 999999999" "$T_DIR/sess.out" && break
	sleep 0.05
done
out=$(cat "$T_DIR/sess.out")
assert_match "^session_ok 1$" "$out" "SESSION_OK"
assert_match "^target $SLEEPER 4 sleep: sleep \(pid $SLEEPER\) does not have libheapprof loaded" "$out" "NO_CLIENT for a plain process"
assert_match "^target 999999999 5 : no process 999999999" "$out" "GONE for a missing pid"
out=$("$HP" daemon --status)
assert_match "session 1: pid $SESS, [0-9]+ s, -p $SLEEPER,999999999 -n no-such-program-here startup running; targets: none" "$out" "--status lists the session"
rc=0
out=$(run_bounded 20 "$HP" dump 2>&1) || rc=$?
assert_eq 0 "$rc" "dump exit status"
assert_eq "heapprof: dump: 3 processes dumped in 1 session" "$out" "dump result"
assert_match "^dump_request [0-9]+ pid 0$" "$(cat "$T_DIR/sess.out")" "session got DUMP_REQUEST"
kill -USR1 "$DPID"
for i in $(seq 1 100); do
	[ "$(grep -c '^dump_request' "$T_DIR/sess.out")" -ge 2 ] && break
	sleep 0.05
done
assert_eq 2 "$(grep -c '^dump_request' "$T_DIR/sess.out")" "SIGUSR1 reaches the session"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups sleep 300 &
	OTHER=$!
	BG_PIDS="$BG_PIDS $OTHER"
	wait_comm "$OTHER" sleep
	out=$(run_bounded 10 "$POKE" "$SOCK" session -p "$OTHER" -t 1000)
	assert_match "^target $OTHER 3 sleep: sleep \(pid $OTHER\) runs as uid 65534, not as uid 0" "$out" "DENIED for another uid"
	reap "$OTHER"
fi
wait_pid_bounded 15 "$SESS"
out=$("$HP" daemon --status)
assert_match "0 sessions" "$out" "the session is gone once its connection closed"
reap "$SLEEPER"

# ---------------------------------------------------------------------------
t_begin "a running process with the client: signalled, handed over, refused to a second session"
FIFO_R=$T_DIR/ready
FIFO_G=$T_DIR/go
mkfifo "$FIFO_R" "$FIFO_G"
LD_PRELOAD=$BUILD/libheapprof.so "$PROGS/waiter" "$FIFO_R" "$FIFO_G" >/dev/null 2>&1 &
W=$!
BG_PIDS="$BG_PIDS $W"
read -r -t 10 _ <"$FIFO_R" || t_fail "waiter did not get ready"
"$POKE" "$SOCK" session -p "$W" -t 5000 >"$T_DIR/s1.out" 2>&1 &
S1=$!
BG_PIDS="$BG_PIDS $S1"
for i in $(seq 1 100); do
	grep -q "^client $W" "$T_DIR/s1.out" && break
	sleep 0.05
done
out=$(cat "$T_DIR/s1.out")
assert_match "^target $W 1 waiter: waiter \(pid $W\) asked to attach" "$out" "SIGNALLED"
assert_match "^client $W flags 2 from_startup 0 fd yes" "$out" "the LATE hello's connection is passed"
out=$(run_bounded 10 "$POKE" "$SOCK" session -p "$W" -t 500)
assert_match "^target $W 2 waiter: waiter \(pid $W\) is already profiled by session [0-9]+" "$out" "second session refused"
out=$("$HP" daemon --status)
assert_match "targets: $W \(profiled\)" "$out" "--status shows the owned target"
wait_pid_bounded 15 "$S1"
# The session is gone: the process is free again.
out=$(run_bounded 10 "$POKE" "$SOCK" session -p "$W" -t 1500)
assert_match "^target $W 1 waiter" "$out" "signalled again once the first session ended"
: >"$FIFO_G"
wait_pid_bounded 10 "$W"
assert_eq 12 "$WAIT_RC" "the waiter ran to its end"
alive "$DPID" || t_fail "daemon died"

# ---------------------------------------------------------------------------
t_begin "a process that starts while a session wants its name is handed over from startup"
"$POKE" "$SOCK" session -n waiter -f 1 -t 4000 >"$T_DIR/s2.out" 2>&1 &
S2=$!
BG_PIDS="$BG_PIDS $S2"
for i in $(seq 1 100); do
	grep -q "^session_ok" "$T_DIR/s2.out" && break
	sleep 0.05
done
LD_PRELOAD=$BUILD/libheapprof.so "$PROGS/waiter" "$FIFO_R" "$FIFO_G" >/dev/null 2>&1 &
W=$!
BG_PIDS="$BG_PIDS $W"
read -r -t 10 _ <"$FIFO_R" || t_fail "waiter did not get ready"
: >"$FIFO_G"
wait_pid_bounded 10 "$W"
wait_pid_bounded 15 "$S2"
assert_match "^client $W flags 1 from_startup 1 fd yes" "$(cat "$T_DIR/s2.out")" "AT_STARTUP hello passed"

# ---------------------------------------------------------------------------
t_begin "a stale socket is recovered; a daemon killed mid-way leaves one"
kill -KILL "$DPID"
timeout 5 tail --pid="$DPID" -f /dev/null
[ -S "$SOCK" ] || t_fail "expected the killed daemon's socket to remain"
rc=0
out=$("$HP" dump 2>&1) || rc=$?
assert_eq 1 "$rc" "dump against a stale socket"
assert_match "no heapprofd is running" "$out" "stale socket message"
start_daemon restart
assert_eq 0 "$START_RC" "restart exit status ($(cat "$T_DIR/restart.err"))"
wait_log "removed a stale socket"
status_ok after-restart

# ---------------------------------------------------------------------------
t_begin "heapprof daemon --stop"
rc=0
out=$(run_bounded 20 "$HP" daemon --stop 2>&1) || rc=$?
assert_eq 0 "$rc" "--stop exit status"
assert_eq "heapprofd: stopped (pid $DPID)" "$out" "--stop message"
alive "$DPID" && t_fail "daemon $DPID still running"
[ -e "$SOCK" ] && t_fail "socket still there after --stop"
wait_log "shutdown requested"

# ---------------------------------------------------------------------------
t_begin "a socket directory that is not private is refused"
chmod 755 "$DIR"
start_daemon badmode
assert_eq 1 "$START_RC" "exit status with a 0755 directory"
assert_eq "heapprof: daemon: $DIR has mode 0755; it must be 0700 (private); refusing to use it" \
	"$(cat "$T_DIR/badmode.err")" "message"
rc=0
out=$(run_bounded 10 "$HP" daemon --foreground 2>&1) || rc=$?
assert_eq 1 "$rc" "--foreground with a 0755 directory"
assert_match "has mode 0755" "$out" "--foreground message"
chmod 700 "$DIR"
new_xdg
mkdir "$X/elsewhere"
chmod 700 "$X/elsewhere"
ln -s "$X/elsewhere" "$DIR"
start_daemon symlink
assert_eq 1 "$START_RC" "exit status with a symlinked directory"
assert_match "$DIR is not a directory \(a symlink or a file\)" "$(cat "$T_DIR/symlink.err")" "symlink message"
if [ "$(id -u)" = 0 ]; then
	new_xdg
	mkdir -m 700 "$DIR"
	chown 65534 "$DIR"
	start_daemon owner
	assert_eq 1 "$START_RC" "exit status with another uid's directory"
	assert_match "belongs to uid 65534" "$(cat "$T_DIR/owner.err")" "owner message"
fi

# ---------------------------------------------------------------------------
t_begin "heapprof refuses a daemon socket served by another uid"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	t_skip "needs root and setpriv"
else
	new_xdg
	chown 65534 "$X"
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_RUNTIME_DIR="$X" \
		timeout 20 "$HP" daemon >"$T_DIR/nobody.out" 2>&1 || rc=$?
	assert_eq 0 "$rc" "daemon as uid 65534 ($(cat "$T_DIR/nobody.out"))"
	NP=$(sed -n 's/.*(pid \([0-9][0-9]*\))$/\1/p' "$T_DIR/nobody.out")
	[ -n "$NP" ] && DAEMON_PIDS="$DAEMON_PIDS $NP"
	rc=0
	out=$("$HP" dump 2>&1) || rc=$?
	assert_eq 1 "$rc" "dump exit status"
	assert_match "^heapprof: dump: the process listening at $SOCK runs as uid 65534, not as us \(uid 0\); refusing it$" "$out" "message"
	[ -n "$NP" ] && kill -TERM "$NP"
fi

t_summary
