#!/usr/bin/env bash
# test_session.sh BUILD: `heapprof record` sessions (issue 4's must-show
# list): -p / -n through a private heapprofd, from_startup, dumps on demand
# (heapprof dump, SIGUSR1 to the daemon), continuous and at the peak, a
# refused second session, the daemon SIGKILLed mid-session, --follow-fork
# and --follow-exec with -- CMD, and --print-config / -c.
#
# Targets are progs/sess_target with libheapprof preloaded, driven through
# files (ready, go, allocated, exit) so every step waits on a condition
# with a bound.  Exact numbers with -i 1 (see sess_target.c):
#   startup_alloc   5 10000 5 10000     (profiled from startup only)
#   attached_alloc  14 22000 10 10000
#   peak_alloc      100 1000000 0 0     (at the peak: 100 1000000 100 1000000)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/sess_target" "$PROGS/forker" \
	"$PROGS/execer" "$PROGS/sess_many" "$PROGS/inject_target"

LIB="$BUILD/libheapprof.so"
. "$HERE/session_helpers.sh"

# start_target TAG: sess_target with the client preloaded, in $W/TAG;
# sets TPID once it is ready.
start_target() {
	local d="$W/$1"
	mkdir -p "$d"
	LD_PRELOAD="$LIB" "$PROGS/sess_target" "$d" >"$d/out" 2>"$d/err" &
	TPID=$!
	TPIDS="$TPIDS $TPID"
	wait_until 30 "ready from $1" test -e "$d/ready"
}

# finish_target TAG: lets it exit; TRC is its status.
finish_target() {
	local d="$W/$1"
	: >"$d/go"
	: >"$d/exit"
	wait_child 30 "$TPID"
	TRC=$WAIT_RC
}

allocate() { # TAG: go, then wait until the target has allocated
	: >"$W/$1/go"
	wait_until 30 "allocations from $1" test -e "$W/$1/allocated"
}

# Bare run of the target, for "exit code and output identical".
mkdir -p "$W/bare"
: >"$W/bare/go"
: >"$W/bare/exit"
bare_run bare "$PROGS/sess_target" "$W/bare"

start_daemon

# ---------------------------------------------------------------------------
t_begin "record -p PID -d 2: the allocations made after the attach, exact"
start_target p1
start_record p1 -p "$TPID" -d 2 -i 1 -o "$T_DIR/p1.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/p1.err" "pid $TPID \(sess_target\): profiling"; then
	allocate p1
fi
wait_record p1
assert_eq 0 "$REC_RC" "record exit status"
finish_target p1
assert_eq 0 "$TRC" "target exit status"
db_valid "$T_DIR/p1.db" &&
	{
		check_views "$T_DIR/p1.db" attached_alloc 14 22000 10 10000
		check_views "$T_DIR/p1.db" peak_alloc 100 1000000 0 0
		# Allocated before the attach: not in the profile.
		assert_eq 0 "$(leaf_rows "$T_DIR/p1.db" startup_alloc)" "startup_alloc rows"
		assert_eq "$TPID|sess_target|pid|0|0|0" \
			"$(q "$T_DIR/p1.db" "SELECT p.pid, p.name, h.how, h.from_startup,
			  h.rejected_concurrent, h.disconnected
			  FROM process p JOIN heapprof_process h USING(upid);")" "process row"
		assert_eq "1|end" "$(q "$T_DIR/p1.db" "SELECT count(*), max(reason) FROM heapprof_dump WHERE reason != 'peak';")" \
			"one dump (the peak's beside it), at the end"
		assert_ne 0 "$(q "$T_DIR/p1.db" "SELECT session_id FROM heapprof_process;")" "session id"
	}

# ---------------------------------------------------------------------------
t_begin "record -n NAME -d 2: the same by name"
start_target n1
start_record n1 -n sess_target -d 2 -i 1 -o "$T_DIR/n1.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/n1.err" "pid $TPID \(sess_target\): profiling"; then
	allocate n1
fi
wait_record n1
assert_eq 0 "$REC_RC" "record exit status"
finish_target n1
assert_eq 0 "$TRC" "target exit status"
db_valid "$T_DIR/n1.db" &&
	{
		check_views "$T_DIR/n1.db" attached_alloc 14 22000 10 10000
		assert_eq "$TPID|name|0" "$(q "$T_DIR/n1.db" "SELECT p.pid, h.how, h.from_startup
		  FROM process p JOIN heapprof_process h USING(upid);")" "process row"
	}

# ---------------------------------------------------------------------------
t_begin "record -n NAME: a program started during the session is from_startup, exact from main"
start_record st -n sess_target -i 1 -o "$T_DIR/st.db"
if wait_until 20 "session start" grep_q "$T_DIR/st.err" "session [0-9]+ started"; then
	start_target st
	if wait_until 20 "profiling line" grep_q "$T_DIR/st.err" "pid $TPID \(sess_target\): profiling from startup"; then
		allocate st
	fi
fi
kill -INT "$RPID"
wait_record st
assert_eq 0 "$REC_RC" "record exit status after SIGINT"
finish_target st
assert_eq 0 "$TRC" "target exit status"
db_valid "$T_DIR/st.db" &&
	{
		check_views "$T_DIR/st.db" startup_alloc 5 10000 5 10000
		check_views "$T_DIR/st.db" attached_alloc 14 22000 10 10000
		assert_eq "$TPID|name|1" "$(q "$T_DIR/st.db" "SELECT p.pid, h.how, h.from_startup
		  FROM process p JOIN heapprof_process h USING(upid);")" "process row"
	}

# ---------------------------------------------------------------------------
t_begin "heapprof dump and SIGUSR1 to the daemon add dumps to a running session"
start_target dd
start_record dd -p "$TPID" -i 1 -o "$T_DIR/dd.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/dd.err" "profiling"; then
	run_bounded 30 "$HP" dump >"$T_DIR/dump.out" 2>&1
	assert_eq 0 "$?" "heapprof dump exit status ($(cat "$T_DIR/dump.out"))"
	wait_dumps "$T_DIR/dd.db" 1
	allocate dd
	kill -USR1 "$DPID"
	wait_dumps "$T_DIR/dd.db" 2
fi
kill -INT "$RPID"
wait_record dd
assert_eq 0 "$REC_RC" "record exit status"
finish_target dd
db_valid "$T_DIR/dd.db" &&
	{
		# (The peak's dump, reached by the allocations, before the
		# second.)
		assert_eq "request peak request end" \
			"$(q "$T_DIR/dd.db" "SELECT reason FROM heapprof_dump ORDER BY ts;" | tr '\n' ' ' | sed 's/ $//')" \
			"dump reasons in order"
		assert_eq 4 "$(q "$T_DIR/dd.db" "SELECT count(DISTINCT ts) FROM heapprof_dump;")" "four distinct ts"
		ts1=$(q "$T_DIR/dd.db" "SELECT ts FROM heapprof_dump WHERE reason != 'peak' ORDER BY ts LIMIT 1;")
		ts2=$(q "$T_DIR/dd.db" "SELECT ts FROM heapprof_dump WHERE reason != 'peak' ORDER BY ts LIMIT 1 OFFSET 1;")
		# The first dump was before the allocations, the second after.
		check_views "$T_DIR/dd.db" attached_alloc 0 0 0 0 "$ts1"
		check_views "$T_DIR/dd.db" attached_alloc 14 22000 10 10000 "$ts2"
	}

# ---------------------------------------------------------------------------
t_begin "--dump-interval 500 over 3 s: about 6 dumps"
start_target di
start_record di -p "$TPID" -d 3 --dump-interval 500 -o "$T_DIR/di.db"
wait_record di
assert_eq 0 "$REC_RC" "record exit status"
finish_target di
n=$(q "$T_DIR/di.db" "SELECT count(*) FROM heapprof_dump WHERE reason != 'peak';")
assert_ge "$n" 5 "dumps"
assert_le "$n" 7 "dumps"
assert_eq 1 "$(q "$T_DIR/di.db" "SELECT count(*) FROM heapprof_dump WHERE reason = 'end';")" "one end dump"
assert_eq "$((n - 1))" "$(q "$T_DIR/di.db" "SELECT count(*) FROM heapprof_dump WHERE reason = 'periodic';")" \
	"the others are periodic"
t_note "--dump-interval 500 -d 3: $n dumps"

# ---------------------------------------------------------------------------
t_begin "--dump-at-max: a peak the program freed again, exact"
start_target mx
start_record mx -p "$TPID" -i 1 --dump-at-max -o "$T_DIR/mx.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/mx.err" "profiling"; then
	allocate mx
fi
kill -INT "$RPID"
wait_record mx
finish_target mx
db_valid "$T_DIR/mx.db" &&
	{
		check_views "$T_DIR/mx.db" peak_alloc 100 1000000 100 1000000
		check_views "$T_DIR/mx.db" attached_alloc 14 22000 10 10000
		assert_eq "1|1010000" "$(q "$T_DIR/mx.db" "SELECT at_max, max_live_bytes FROM heapprof_dump;")" \
			"the dump is at the peak of 1010000 live bytes"
		# --dump peak picks it, in every command that takes --dump.
		"$HP" report "$T_DIR/mx.db" --dump peak >"$T_DIR/mxp.out" 2>&1
		assert_match "^  dump at max    state at the peak of live bytes: 986\.33 KiB \(1010000 B\) at " \
			"$(grep '^  dump at max' "$T_DIR/mxp.out")" "report --dump peak"
		"$HP" check "$T_DIR/mx.db" --dump peak 'space(peak_alloc) == 1000000' >"$T_DIR/mxc.out" 2>&1
		assert_eq 0 "$?" "check --dump peak: peak_alloc's 1000000 B live at the peak ($(tail -n 1 "$T_DIR/mxc.out"))"
	}
# Without dumps at the peak: --dump peak is an error naming the process,
# --dump end the last dump.
hp_record nomx -i 1 --no-peak -o "$T_DIR/nomx.db" -- "$PROGS/known"
"$HP" pprof "$T_DIR/nomx.db" --dump peak -o "$T_DIR/nomx.pb.gz" >"$T_DIR/nomx.out" 2>&1
assert_eq 1 "$?" "pprof --dump peak of a profile without one: exit 1"
assert_match "has no dump at its peak \(recorded with --no-peak, or by an older heapprof\)$" "$(cat "$T_DIR/nomx.out")" \
	"pprof --dump peak: says why"
"$HP" pprof "$T_DIR/nomx.db" --dump end -o "$T_DIR/nomx.pb.gz" >"$T_DIR/nomx2.out" 2>&1
assert_match "dump 1 of 1" "$(cat "$T_DIR/nomx2.out")" "pprof --dump end: the last dump"

# ---------------------------------------------------------------------------
t_begin "a second session naming the same process is refused for it and says so"
start_target cc
start_record cc1 -p "$TPID" -i 1 -o "$T_DIR/cc1.db"
R1=$RPID
if wait_until 20 "profiling line" grep_q "$T_DIR/cc1.err" "profiling"; then
	hp_record cc2 -p "$TPID" -d 5 -o "$T_DIR/cc2.db"
	assert_eq 1 "$REC_RC" "second session's exit status"
	assert_match "pid $TPID \(sess_target\): not profiled: .*\(rejected_concurrent\)" \
		"$(cat "$T_DIR/cc2.err")" "second session says why"
	# Profiled nothing: no profile (issue 31).
	assert_eq "" "$(ls "$T_DIR"/cc2.db* 2>/dev/null)" "no profile written (nor -wal, -shm)"
	allocate cc
fi
RPID=$R1
kill -INT "$RPID"
wait_record cc1
assert_eq 0 "$REC_RC" "first session's exit status"
check_views "$T_DIR/cc1.db" attached_alloc 14 22000 10 10000
# The first session stopped the client (STOP): a later one attaches again.
hp_record cc3 -p "$TPID" -d 0.3 -o "$T_DIR/cc3.db"
assert_eq 0 "$REC_RC" "a later session's exit status"
assert_match "pid $TPID \(sess_target\): profiling" "$(cat "$T_DIR/cc3.err")" "a later session profiles it"
finish_target cc
assert_eq 0 "$TRC" "target exit status"

# ---------------------------------------------------------------------------
t_begin "record -p ends by itself when its targets are gone"
start_target eg
start_record eg -p "$TPID" -i 1 -o "$T_DIR/eg.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/eg.err" "profiling"; then
	allocate eg
fi
finish_target eg
wait_record eg
assert_eq 0 "$REC_RC" "record exit status"
check_views "$T_DIR/eg.db" attached_alloc 14 22000 10 10000
assert_eq "1|disconnect" "$(q "$T_DIR/eg.db" "SELECT h.disconnected, d.reason FROM heapprof_process h
  JOIN heapprof_dump d USING(upid) WHERE d.reason != 'peak';")" "disconnected, one last dump"

# ---------------------------------------------------------------------------
t_begin "a SIGSTOPped target does not hold the session up; a SIGKILLed one ends it"
start_target ss
start_record ss -p "$TPID" -i 1 -o "$T_DIR/ss.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/ss.err" "profiling"; then
	allocate ss
	kill -STOP "$TPID"
	run_bounded 30 "$HP" dump >/dev/null 2>&1 # reads the region, not the process
	kill -INT "$RPID"
fi
wait_record ss
assert_eq 0 "$REC_RC" "record exit status"
check_views "$T_DIR/ss.db" attached_alloc 14 22000 10 10000
assert_eq "request end" "$(q "$T_DIR/ss.db" "SELECT reason FROM heapprof_dump WHERE reason != 'peak' ORDER BY ts;" | tr '\n' ' ' | sed 's/ $//')" \
	"a dump of the stopped process, then the end"
kill -CONT "$TPID"
finish_target ss
assert_eq 0 "$TRC" "target exit status after SIGCONT"
start_target sk
start_record sk -p "$TPID" -i 1 -o "$T_DIR/sk.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/sk.err" "profiling"; then
	allocate sk
	disown "$TPID" # not a job: no "Killed" line in the output
	kill -KILL "$TPID"
fi
wait_record sk
assert_eq 0 "$REC_RC" "record exit status"
timeout 10 tail -s 0.02 --pid="$TPID" -f /dev/null || t_fail "pid $TPID survived SIGKILL"
check_views "$T_DIR/sk.db" attached_alloc 14 22000 10 10000
assert_eq 1 "$(q "$T_DIR/sk.db" "SELECT disconnected FROM heapprof_process;")" "disconnected"

# ---------------------------------------------------------------------------
t_begin "SIGKILL to the daemon mid-session: the target runs on, the profile is written"
start_target kd
start_record kd -p "$TPID" -i 1 -o "$T_DIR/kd.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/kd.err" "profiling"; then
	daemon_gone KILL
	wait_until 20 "'lost the connection' line" grep_q "$T_DIR/kd.err" "lost the connection to heapprofd"
	allocate kd
fi
kill -INT "$RPID"
wait_record kd
assert_eq 0 "$REC_RC" "record exit status"
finish_target kd
assert_eq "$BARE_RC" "$TRC" "exit status as in a bare run"
assert_eq "$(cat "$T_DIR/bare.bare.out")" "$(cat "$W/kd/out")" "stdout as in a bare run"
assert_eq "" "$(cat "$W/kd/err")" "nothing on the target's stderr"
check_views "$T_DIR/kd.db" attached_alloc 14 22000 10 10000
start_daemon

# ---------------------------------------------------------------------------
t_begin "record -p: failures say why and exit 1, no profile; a process without the client is attached (issue 21)"
# A pid that is gone: exit 1, its reason, no profile (with the daemon;
# without one, that line alone).
sh -c 'exit 0' &
GONE=$!
wait "$GONE"
hp_record ng -p "$GONE" -o "$T_DIR/ng.db"
assert_eq 1 "$REC_RC" "exit status for a gone pid"
# (Through the daemon the session's start and end have their lines too.)
assert_eq 1 "$(grep -c "not profiled" "$T_DIR/ng.err")" "one reason: $(head -c 300 "$T_DIR/ng.err")"
assert_match "pid $GONE .*not profiled: " "$(cat "$T_DIR/ng.err")" "says why"
assert_eq no "$([ -e "$T_DIR/ng.db" ] && echo yes || echo no)" "no profile file"
XDG_RUNTIME_DIR="$T_DIR/nodaemon" hp_record ngd -p "$GONE" -o "$T_DIR/ngd.db"
assert_eq 1 "$REC_RC" "exit status for a gone pid without a daemon"
assert_eq 1 "$(grep -c . "$T_DIR/ngd.err")" "one line without a daemon: $(head -c 300 "$T_DIR/ngd.err")"
assert_match "^heapprof: record: pid $GONE \(\?\): not profiled: " "$(cat "$T_DIR/ngd.err")" "says why without a daemon"
assert_eq no "$([ -e "$T_DIR/ngd.db" ] && echo yes || echo no)" "no profile file without a daemon"
# A process with a seccomp filter cannot be injected: one line, exit 1.
sleep 30 | "$PROGS/inject_target" seccomp 2>/dev/null &
SCPID=$!
TPIDS="$TPIDS $SCPID"
# (The name is read at each try: a $(...) in the arguments would be read
# once, maybe before the exec.)
comm_is() { [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]; }
wait_until 20 "inject_target" comm_is "$SCPID" inject_target
wait_until 20 "the seccomp filter" grep_q "/proc/$SCPID/status" "^Seccomp:[[:space:]]+2"
hp_record sc -p "$SCPID" -o "$T_DIR/sc.db"
assert_eq 1 "$REC_RC" "exit status for a process with a seccomp filter"
assert_eq 1 "$(grep -c "not profiled" "$T_DIR/sc.err")" "one reason: $(head -c 300 "$T_DIR/sc.err")"
assert_match "pid $SCPID \(inject_target\): not profiled: .*seccomp" "$(cat "$T_DIR/sc.err")" "says seccomp"
assert_eq no "$([ -e "$T_DIR/sc.db" ] && echo yes || echo no)" "no profile file"
kill "$SCPID" 2>/dev/null
# A plain process without the client (it was refused with (no_client)
# before issue 21) is attached now, with the daemon and without one.
sleep 30 &
SPID=$!
TPIDS="$TPIDS $SPID"
wait_until 20 "sleep" comm_is "$SPID" sleep
hp_record nc -p "$SPID" -d 0.3 -o "$T_DIR/nc.db"
assert_eq 0 "$REC_RC" "exit status for a process without the client: $(head -c 300 "$T_DIR/nc.err")"
assert_match "pid $SPID \(sleep\): profiling \(attached in .*client loaded" "$(cat "$T_DIR/nc.err")" "attached by injection"
db_valid "$T_DIR/nc.db"
XDG_RUNTIME_DIR="$T_DIR/nodaemon" hp_record nd -p "$SPID" -d 0.3 -o "$T_DIR/nd.db"
assert_eq 0 "$REC_RC" "exit status without a daemon: $(head -c 300 "$T_DIR/nd.err")"
assert_match "^heapprof: record: pid $SPID \(sleep\): profiling \(attached in " "$(head -n 1 "$T_DIR/nd.err")" \
	"attached again without a daemon (the client is loaded already)"
assert_no_match "no heapprofd is running" "$(cat "$T_DIR/nd.err")" "no daemon needed"
db_valid "$T_DIR/nd.db"
assert_eq yes "$(kill -0 "$SPID" 2>/dev/null && echo yes)" "sleep runs on"
kill "$SPID" 2>/dev/null

# ---------------------------------------------------------------------------
t_begin "--follow-fork with -- CMD: the child's own row, exact"
bare_run ff "$PROGS/forker"
hp_record ff -i 1 --follow-fork -o "$T_DIR/ff.db" -- "$PROGS/forker"
assert_eq "$BARE_RC" "$REC_RC" "exit status as in a bare run"
assert_eq "$(cat "$T_DIR/ff.bare.out")" "$(cat "$T_DIR/ff.out")" "stdout as in a bare run"
db_valid "$T_DIR/ff.db" &&
	{
		rows=$(q "$T_DIR/ff.db" "SELECT h.how, h.ppid = (SELECT pid FROM process WHERE upid = 1)
		  FROM process p JOIN heapprof_process h USING(upid) ORDER BY upid;" | tr '\n' ' ')
		assert_eq "command|0 fork|1 " "$rows" "rows: the command, then its child (ppid = parent)"
		check_views "$T_DIR/ff.db" parent_before 50 50000 50 50000
		check_views "$T_DIR/ff.db" parent_after 30 60000 20 40000
		check_views "$T_DIR/ff.db" child_only_alloc 40 120000 20 60000
		assert_eq 2 "$(q "$T_DIR/ff.db" "SELECT DISTINCT a.upid FROM heap_profile_allocation a
		  JOIN stack_profile_callsite c ON a.callsite_id = c.id
		  JOIN stack_profile_frame f ON c.frame_id = f.id WHERE f.name = 'child_only_alloc';")" \
			"child_only_alloc belongs to the child's row"
		assert_eq "5|0" "$(q "$T_DIR/ff.db" "SELECT exit_status, disconnected FROM heapprof_process WHERE upid = 1;")" \
			"the command's exit status"
	}

# ---------------------------------------------------------------------------
t_begin "--follow-fork through the daemon: -n NAME from startup, the child's own row, exact"
start_record ffd -n forker --no-running --follow-fork -i 1 -o "$T_DIR/ffd.db"
if wait_until 20 "session start" grep_q "$T_DIR/ffd.err" "session [0-9]+ started"; then
	FRC=0
	LD_PRELOAD="$LIB" run_bounded 60 "$PROGS/forker" >"$T_DIR/ffd.prog.out" 2>/dev/null || FRC=$?
	assert_eq "$BARE_RC" "$FRC" "exit status as in a bare run"
	assert_eq "$(cat "$T_DIR/ff.bare.out")" "$(cat "$T_DIR/ffd.prog.out")" "stdout as in a bare run"
fi
kill -INT "$RPID"
wait_record ffd
assert_eq 0 "$REC_RC" "record exit status after SIGINT"
db_valid "$T_DIR/ffd.db" &&
	{
		rows=$(q "$T_DIR/ffd.db" "SELECT h.how, h.from_startup, h.ppid = (SELECT pid FROM process WHERE upid = 1)
		  FROM process p JOIN heapprof_process h USING(upid) ORDER BY upid;" | tr '\n' ' ')
		assert_eq "name|1|0 fork|1|1 " "$rows" "rows: the program from startup, then its child (ppid = parent)"
		check_views "$T_DIR/ffd.db" parent_before 50 50000 50 50000
		check_views "$T_DIR/ffd.db" parent_after 30 60000 20 40000
		check_views "$T_DIR/ffd.db" child_only_alloc 40 120000 20 60000
	}

# ---------------------------------------------------------------------------
t_begin "--follow-exec with -- CMD: the new image's own row, exact"
bare_run fe "$PROGS/execer"
hp_record fe -i 1 --follow-exec -o "$T_DIR/fe.db" -- "$PROGS/execer"
assert_eq "$BARE_RC" "$REC_RC" "exit status as in a bare run"
assert_eq "$(cat "$T_DIR/fe.bare.out")" "$(cat "$T_DIR/fe.out")" "stdout as in a bare run"
db_valid "$T_DIR/fe.db" &&
	{
		assert_eq "command|0|-1 exec|0|6 " \
			"$(q "$T_DIR/fe.db" "SELECT h.how, h.disconnected, coalesce(h.exit_status, -1)
			  FROM process p JOIN heapprof_process h USING(upid) ORDER BY upid;" | tr '\n' ' ')" \
			"rows: the first image (ended at exec), the new image (exit 6)"
		assert_eq 1 "$(q "$T_DIR/fe.db" "SELECT count(DISTINCT pid) FROM process;")" "same pid"
		check_views "$T_DIR/fe.db" before_exec 20 10000 15 7500
		check_views "$T_DIR/fe.db" after_exec_alloc 10 7000 10 7000
		assert_eq "exec end" "$(q "$T_DIR/fe.db" "SELECT reason FROM heapprof_dump WHERE reason != 'peak' ORDER BY upid;" | tr '\n' ' ' | sed 's/ $//')" \
			"dump reasons"
	}

# ---------------------------------------------------------------------------
t_begin "-d with -- CMD: profiling ends, the program runs on, record returns its status"
mkdir -p "$W/cd"
start_record cd -d 1 -i 1 -o "$T_DIR/cd.db" -- "$PROGS/sess_target" "$W/cd"
if wait_until 20 "profile written" grep_q "$T_DIR/cd.err" "profile written"; then
	assert_eq yes "$(kill -0 "$RPID" 2>/dev/null && echo yes)" "record waits for the program"
	allocate cd # after the end: not in the profile
	: >"$W/cd/exit"
fi
wait_record cd
assert_eq 0 "$REC_RC" "record returns the program's status"
check_views "$T_DIR/cd.db" startup_alloc 5 10000 5 10000
assert_eq 0 "$(leaf_rows "$T_DIR/cd.db" attached_alloc)" "nothing after the end"
assert_eq "1|end|-1" "$(q "$T_DIR/cd.db" "SELECT count(*), max(d.reason), coalesce(max(h.exit_status), -1)
  FROM heapprof_dump d JOIN heapprof_process h USING(upid) WHERE d.reason != 'peak';")" "one end dump; still running then"

# ---------------------------------------------------------------------------
t_begin "--block-client: a full region grows instead of dropping samples"
hp_record bc0 -i 1 --shmem-size 1048576 -o "$T_DIR/bc0.db" -- "$PROGS/sess_many" 20000
assert_ge "$(q "$T_DIR/bc0.db" "SELECT value FROM heapprof_process_stats WHERE name = 'live_table_full';")" 1 \
	"without --block-client, 1 MiB drops live entries"
hp_record bc1 -i 1 --shmem-size 1048576 --block-client -o "$T_DIR/bc1.db" -- "$PROGS/sess_many" 20000
assert_eq 0 "$REC_RC" "exit status"
check_views "$T_DIR/bc1.db" many_alloc 20000 480000 10000 240000
assert_eq 0 "$(q "$T_DIR/bc1.db" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats
  WHERE name LIKE '%full%';")" "nothing dropped"
hp_record bc2 -i 1 --shmem-size 1048576 --block-client=50 -o "$T_DIR/bc2.db" -- "$PROGS/sess_many" 60000
assert_eq 1 "$(grep -c 'no more room (3 regions, 7340032 bytes)' "$T_DIR/bc2.err")" \
	"past 8 x --shmem-size: said once"
check_views "$T_DIR/bc2.db" many_alloc 60000 1440000 - -

# ---------------------------------------------------------------------------
t_begin "heap flags: malloc left out of --heaps stays out (custom heaps: test_heaps.sh)"
hp_record hp1 -i 1 --heaps foo -o "$T_DIR/hp1.db" -- "$PROGS/sess_many" 100
assert_eq 0 "$REC_RC" "exit status"
assert_match "libc.malloc is not selected" "$(cat "$T_DIR/hp1.err")" "says malloc is not selected"
assert_eq 0 "$(q "$T_DIR/hp1.db" "SELECT count(*) FROM heap_profile_allocation;")" "no malloc rows"
hp_record hp2 -i 1 --all-heaps --exclude-heaps libc.malloc -o "$T_DIR/hp2.db" -- "$PROGS/sess_many" 100
assert_eq 0 "$(q "$T_DIR/hp2.db" "SELECT count(*) FROM heap_profile_allocation;")" "excluded: no rows"
hp_record hp3 --heaps libc.malloc --heap-intervals 1 -o "$T_DIR/hp3.db" -- "$PROGS/sess_many" 100
check_views "$T_DIR/hp3.db" many_alloc 100 2400 50 1200
assert_eq 1 "$(q "$T_DIR/hp3.db" "SELECT sampling_interval FROM heapprof_process;")" \
	"libc.malloc's --heap-intervals entry is its interval"

# ---------------------------------------------------------------------------
t_begin "--print-config and -c: a round trip; flags after -c override it"
hp_record pc1 --print-config -i 1 -p 123,456 -d 2.5 --dump-interval 500 --dump-phase 100 \
	--dump-at-max --block-client=200 --adaptive=0.5 --adaptive-max-interval 65536 \
	--shmem-size 8388608 -o out.db
assert_eq 0 "$REC_RC" "--print-config exit status"
cp "$T_DIR/pc1.out" "$T_DIR/pc1.cfg"
hp_record pc2 -c "$T_DIR/pc1.cfg" --print-config
assert_eq "$(cat "$T_DIR/pc1.out")" "$(cat "$T_DIR/pc2.out")" "-c FILE --print-config prints the same"
REC_RC=0
timeout 30 "$HP" record -c - --print-config <"$T_DIR/pc1.cfg" >"$T_DIR/pc3.out" 2>"$T_DIR/pc3.err" || REC_RC=$?
assert_eq 0 "$REC_RC" "-c - exit status"
assert_eq "$(cat "$T_DIR/pc1.out")" "$(cat "$T_DIR/pc3.out")" "-c - prints the same"
hp_record pc4 -c "$T_DIR/pc1.cfg" -i 7 --print-config
assert_match '^sampling_interval_bytes: 7$' "$(cat "$T_DIR/pc4.out")" "-i after -c wins"
assert_match 'duration_ms: 2500' "$(cat "$T_DIR/pc1.out")" "-d 2.5 is 2500 ms"
printf 'sampling_interval_bytes: 0\n' >"$T_DIR/bad.cfg"
hp_record bad -c "$T_DIR/bad.cfg" -p 1
assert_eq 2 "$REC_RC" "a bad config: exit status 2"
assert_match "sampling_interval_bytes" "$(cat "$T_DIR/bad.err")" "the message names the field"
assert_eq 1 "$(grep -c . "$T_DIR/bad.err")" "one line"
for bad in "-d 0" "-d abc" "--dump-interval 5" "-p 0" "-p 12,,3" "--adaptive=2" "--block-client=0"; do
	# shellcheck disable=SC2086
	hp_record badflag $bad -p 99
	assert_eq 2 "$REC_RC" "exit status for '$bad'"
	flag=${bad%% *}
	flag=${flag%%=*}
	assert_match "$flag" "$(cat "$T_DIR/badflag.err")" "'$bad': the message names the flag"
	assert_eq 1 "$(grep -c . "$T_DIR/badflag.err")" "'$bad': one line"
done
# The session's config is stored in the profile.
assert_eq "$(printf 'sampling_interval_bytes: 1\npid: %s\noutput: "%s"\nduration_ms: 2000' "$(q "$T_DIR/p1.db" "SELECT pid FROM process;")" "$T_DIR/p1.db")" \
	"$(q "$T_DIR/p1.db" "SELECT value FROM heapprof_meta WHERE key = 'config';")" "heapprof_meta config"

daemon_gone TERM
t_summary
