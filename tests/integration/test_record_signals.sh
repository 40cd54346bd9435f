#!/usr/bin/env bash
# test_record_signals.sh BUILD: `heapprof record -- CMD` is not hurt, and
# does not hurt the program, by signals, the file size limit and daemons
# (issue 18, "Never hurt the program, round two", cases 3, 4 and 13;
# docs/safety/safety.md).  Each case runs the program bare and under
# record and compares exit status and stdout; the profiles are checked
# exactly at -i 1 (the programs print "count FUNC ao as o s" lines):
#   group-*    the program signals its process group (kill(0, SIG)), with
#              a handler (it goes on and allocates) or without (it dies of
#              it): record survives, passes the status on, writes the
#              profile.  Both runs start in a process group of their own
#              (progs/pgrun), so that kill(0) reaches neither this script
#              nor timeout(1).
#   state      the program starts with the signal dispositions and mask it
#              has bare, also when its caller ignored or blocked some
#              (record itself ignores SIGXFSZ, SIGPIPE and SIGTTOU and
#              blocks the signals it reads from a signalfd)
#   fsize-*    `ulimit -f`: record does not die of SIGXFSZ; one line about
#              the limit, the program's status passed on
#   dfork      a double-fork daemon (fork, setsid, fork, _exit) under
#              --follow-fork: the grandchild, reparented to record, is
#              followed and the session lasts until it exits; ended early
#              (-d, SIGINT to record), record names it as still running
#   redis      redis-server --daemonize yes under --follow-fork (skipped
#              without redis-server and redis-cli)
#   tty        in a terminal (script(1)): the program's group is the
#              terminal's foreground and gets Ctrl-C, as bare
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/pgrun" "$PROGS/rec_signals" \
	"$PROGS/dfork_daemon"
. "$HERE/session_helpers.sh" # wait_until, wait_child, grep_q; cd "$W"

RS="$PROGS/rec_signals"
PG="$PROGS/pgrun"

# pg_run SECONDS CMD...: CMD under timeout(1), stdin /dev/null; its status
# in PG_RC.  Only a timeout (124) fails the test: 137 is SIGKILL here.
pg_run() {
	local secs=$1
	shift
	PG_RC=0
	timeout -k 5 "$secs" "$@" </dev/null || PG_RC=$?
	[ "$PG_RC" != 124 ] || t_fail "timed out after ${secs}s: $*"
}

# pg_bare TAG [PGRUN_OPTS] CMD...: the program bare, in a process group of
# its own (pgrun); TAG.bare.out/.bare.err, BARE_RC.
pg_bare() {
	local tag=$1
	shift
	pg_run 60 "$PG" "$@" >"$T_DIR/$tag.bare.out" 2>"$T_DIR/$tag.bare.err"
	BARE_RC=$PG_RC
}

# pg_record TAG [PGRUN_OPTS] -- RECORD_ARGS...: `heapprof record` in a
# process group of its own; TAG.out/.err, REC_RC.
pg_record() {
	local tag=$1 opts=()
	shift
	while [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	pg_run 60 "$PG" "${opts[@]}" "$HP" record "$@" >"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err"
	REC_RC=$PG_RC
}

# same_as_bare TAG: exit status and stdout of the recorded run as bare.
same_as_bare() {
	assert_eq "$BARE_RC" "$REC_RC" "$1: exit status as bare" || show_err "$1"
	assert_eq "$(cat "$T_DIR/$1.bare.out")" "$(cat "$T_DIR/$1.out")" "$1: stdout as bare"
}

# only_heapprof_lines TAG: record's stderr holds only its own lines.
only_heapprof_lines() {
	assert_eq "" "$(grep -v '^heapprof: ' "$T_DIR/$1.err")" "$1: stderr"
}

sig_num() { kill -l "$1"; }

# ---------------------------------------------------------------------------
# kill(0, SIG) with a handler: the program goes on and allocates; record
# is not in the program's group.  SIGUSR2 killed record (exit 140) before;
# SIGUSR1 was a dump request to record.
for sig in USR2 USR1 TERM HUP INT; do
	t_begin "group-handler $sig: kill(0, SIG$sig) with a handler: record survives, the allocations after it are in the profile, exact"
	tag=gh-$sig
	pg_bare "$tag" "$RS" group-handler "$sig"
	assert_eq 0 "$BARE_RC" "bare exit status"
	pg_record "$tag" -- -i 1 -o "$T_DIR/$tag.db" -- "$RS" group-handler "$sig"
	same_as_bare "$tag"
	only_heapprof_lines "$tag"
	assert_match "^handler ran: yes$" "$(cat "$T_DIR/$tag.out")" "the handler ran"
	db_valid "$T_DIR/$tag.db" &&
		{
			check_counts "$tag" "$T_DIR/$tag.db" "$T_DIR/$tag.out"
			assert_eq "1|end|0" "$(sqlq "$T_DIR/$tag.db" "SELECT count(*), max(d.reason), max(h.exit_status)
			  FROM heapprof_dump d JOIN heapprof_process h USING(upid) WHERE d.reason != 'peak';")" \
				"one dump (the peak's beside it), at the end; exit status 0"
		}
done

# kill(0, SIG) with the default action: the program dies of it, as bare;
# record passes the status on and writes the profile with what it
# allocated before.  SIGUSR2, SIGALRM and SIGKILL killed record before.
for sig in USR2 ALRM KILL TERM HUP INT; do
	t_begin "group-default $sig: kill(0, SIG$sig) kills the program as bare; record passes the status on and writes the profile"
	tag=gd-$sig
	want=$((128 + $(sig_num "$sig")))
	pg_bare "$tag" "$RS" group-default "$sig"
	assert_eq "$want" "$BARE_RC" "bare exit status"
	pg_record "$tag" -- -i 1 -o "$T_DIR/$tag.db" -- "$RS" group-default "$sig"
	same_as_bare "$tag"
	only_heapprof_lines "$tag"
	assert_match "profile written to" "$(cat "$T_DIR/$tag.err")" "record says the profile is written"
	db_valid "$T_DIR/$tag.db" &&
		{
			check_counts "$tag" "$T_DIR/$tag.db" "$T_DIR/$tag.out"
			assert_eq "1|$want" "$(sqlq "$T_DIR/$tag.db" "SELECT count(*), max(h.exit_status)
			  FROM heapprof_dump d JOIN heapprof_process h USING(upid) WHERE d.reason != 'peak';")" \
				"one dump (the peak's beside it); the process row has the program's status"
		}
done

# ---------------------------------------------------------------------------
t_begin "state: the program starts with the signal dispositions and mask it has bare"
# Nothing special; then USR2, XFSZ, PIPE and TTOU ignored (record ignores
# the last three itself) and USR1, CHLD, CONT blocked (record blocks them
# itself) by the caller.
for opts in "" "-i 12 -i 25 -i 13 -i 22 -b 10 -b 17 -b 18"; do
	tag=state-$(printf '%s' "$opts" | tr -d ' -')
	# shellcheck disable=SC2086 # the options, split
	pg_bare "$tag" $opts "$RS" state
	# shellcheck disable=SC2086
	pg_record "$tag" $opts -- -o "$T_DIR/$tag.db" -- "$RS" state
	same_as_bare "$tag"
	only_heapprof_lines "$tag"
done
st=$(cat "$T_DIR/state-i12i25i13i22b10b17b18.out")
for n in 12 13 22 25; do
	assert_match "^ignored:.* $n( |$)" "$st" "signal $n ignored (the test's own check)"
done
assert_match "^blocked: 10 17 18$" "$st" "signals blocked (the test's own check)"

# ---------------------------------------------------------------------------
# ulimit -f below the shared region (64 MiB): no region, the program runs
# unprofiled, the profile says so; before: record died of SIGXFSZ (153).
t_begin "fsize-region: ulimit -f 1 MiB: record survives, one line about the limit, the program's status"
tag=fs-region
read -r BARE_RC REC_RC < <(
	ulimit -f 1024
	bare_run "$tag" "$RS" churn 1000 7
	hp_record "$tag" -i 1 -o "$T_DIR/$tag.db" -- "$RS" churn 1000 7
	echo "$BARE_RC $REC_RC"
)
assert_eq 7 "$BARE_RC" "bare exit status"
same_as_bare "$tag"
err=$(cat "$T_DIR/$tag.err")
assert_eq 1 "$(grep -c 'file size limit' "$T_DIR/$tag.err")" "one line about the file size limit: $err"
assert_match "cannot create a 536870912-byte region .*: File too large \(the file size limit, ulimit -f, is 1.00 MiB.*--shmem-size.*\); it runs unprofiled" \
	"$err" "what and why"
assert_no_match "never attached" "$err" "no guess about why it never attached"
assert_match "profile written to" "$err" "the profile is written"
db_valid "$T_DIR/$tag.db" &&
	assert_eq "never attached|7" "$(sqlq "$T_DIR/$tag.db" "SELECT note, exit_status FROM heapprof_process;")" \
		"the process row: never attached, its exit status"

# The profile outgrows ulimit -f (a 1 MiB region fits; 640000 trace
# events of blocks all over the heap do not, even compressed): the write
# fails with EFBIG, said once with what became of the profile.  The
# trace's chunks and the one dump (at the end) race for the last room:
# either the dump did not fit, so no profile is left and the trace's line
# counts every event as not written, or the dump is kept with the events
# written before the limit, the rest counted as not written.  A failing
# program's status is passed on; one that succeeded gives 1, its profile
# missing or incomplete (as with a full disk, docs/safety/faults.md).
for code in 7 0; do
	t_begin "fsize-profile: the profile outgrows ulimit -f 2 MiB: one line, the program's status (exit $code)"
	tag=fs-profile-$code
	read -r BARE_RC REC_RC < <(
		ulimit -f 2048
		bare_run "$tag" "$RS" scatter 320000 "$code"
		# --no-peak: the one dump the line counts (the peak's would
		# be a second).
		hp_record "$tag" -i 1 --shmem-size 1048576 --trace --trace-buffer 65536 \
			--block-client --no-peak -o "$T_DIR/$tag.db" -- "$RS" scatter 320000 "$code"
		echo "$BARE_RC $REC_RC"
	)
	assert_eq "$code" "$BARE_RC" "bare exit status"
	want=$code
	[ "$code" = 0 ] && want=1
	assert_eq "$want" "$REC_RC" "record's exit status"
	assert_eq "$(cat "$T_DIR/$tag.bare.out")" "$(cat "$T_DIR/$tag.out")" "stdout as bare"
	err=$(cat "$T_DIR/$tag.err")
	assert_eq 1 "$(grep -c 'file size limit' "$T_DIR/$tag.err")" "one line about the file size limit: $err"
	assert_no_match "disk I/O error|File size limit exceeded" "$err" "no other words for it"
	tl=$(grep -E '^heapprof: record: pid [0-9]+: trace \(streaming\): ' "$T_DIR/$tag.err")
	kept=$(sed -n 's/.*: \([0-9]*\) events kept, 0 dropped, 0 overwritten, \([0-9]*\) not written.*/\1 \2/p' <<<"$tl")
	read -r k nw <<<"$kept"
	assert_eq 640001 "$((${k:-0} + ${nw:-0}))" "the trace's line: every event kept or counted as not written: $tl"
	if grep -q '^heapprof: no profile: ' "$T_DIR/$tag.err"; then
		assert_match "^heapprof: no profile: $T_DIR/$tag.db: the file size limit was hit \(ulimit -f: 2.00 MiB\); its one dump could not be kept$" \
			"$err" "the line"
		assert_eq 0 "$k" "no profile: no event kept"
		assert_eq "" "$(ls "$T_DIR" | grep "^$tag\.db")" "no file left (no -wal, no -shm)"
	else
		assert_match "^heapprof: profile $T_DIR/$tag.db is incomplete: the file size limit was hit \(ulimit -f: 2.00 MiB\): its 1 dump kept; $k of 640001 trace events kept$" \
			"$err" "the line"
		if db_valid "$T_DIR/$tag.db"; then
			assert_eq "1|$k" "$(hpq "$T_DIR/$tag.db" "SELECT (SELECT count(*) FROM heapprof_dump), (SELECT count(*) FROM heapprof_event);")" \
				"the file: its dump and the events it says"
			assert_eq "" "$(ls "$T_DIR" | grep "^$tag\.db-")" "no -wal, no -shm left"
		fi
	fi
done

# ---------------------------------------------------------------------------
# A double-fork daemon: the launcher forks C1 and exits once C1 has; C1
# calls setsid, forks the daemon and _exits.  The daemon allocates after
# the launcher is gone and once DIR/go exists, made here when record says
# the session goes on (or, before the fix, when record has exited).
t_begin "dfork: a double-fork daemon under --follow-fork: the grandchild is followed until it exits, exact"
mkdir -p "$W/dfork.bare" "$W/dfork"
bare_run dfork "$PROGS/dfork_daemon" "$W/dfork.bare"
assert_eq 0 "$BARE_RC" "bare exit status"
: >"$W/dfork.bare/go"
wait_until 30 "the bare daemon's output" test -e "$W/dfork.bare/daemon.out"
start_record dfork -i 1 --follow-fork -o "$T_DIR/dfork.db" -- "$PROGS/dfork_daemon" "$W/dfork"
record_done() { ! kill -0 "$RPID" 2>/dev/null; }
goes_on() { grep_q "$T_DIR/dfork.err" "session goes on while 1 followed process runs"; }
wait_until 30 "'goes on' line, or the end of record" eval 'goes_on || record_done'
if goes_on; then
	dpid=$(cat "$W/dfork/daemon.pid" 2>/dev/null)
	rpid=$(pgrep -P "$RPID" -x heapprof)
	assert_eq "$rpid" "$(ps -o ppid= -p "$dpid" | tr -d ' ')" "the daemon was reparented to record"
	assert_eq "" "$(ps -o stat= --ppid "$rpid" | grep Z)" "no zombie children of record"
	assert_match "pid $dpid\)" "$(cat "$T_DIR/dfork.err")" "the line names the daemon"
fi
: >"$W/dfork/go"
wait_record dfork
assert_eq 0 "$REC_RC" "record's exit status"
assert_eq "$(cat "$T_DIR/dfork.bare.out")" "$(cat "$T_DIR/dfork.out")" "the launcher's stdout as bare"
# Record ended after the daemon: its output is there already.
assert_eq "$(cat "$W/dfork.bare/daemon.out")" "$(cat "$W/dfork/daemon.out" 2>/dev/null)" \
	"the daemon's output as bare, when record ends"
db_valid "$T_DIR/dfork.db" &&
	{
		check_counts dfork "$T_DIR/dfork.db" "$T_DIR/dfork.out"
		check_counts dfork "$T_DIR/dfork.db" "$W/dfork/daemon.out"
		dpid=$(cat "$W/dfork/daemon.pid")
		assert_eq "fork|1" "$(sqlq "$T_DIR/dfork.db" "SELECT h.how, h.disconnected
		  FROM process p JOIN heapprof_process h USING(upid) WHERE p.pid = $dpid;")" \
			"the daemon's row: followed from its fork, ended when it exited"
		assert_eq 1 "$(sqlq "$T_DIR/dfork.db" "SELECT count(DISTINCT a.upid) FROM heap_profile_allocation a
		  JOIN process p USING(upid) JOIN stack_profile_callsite c ON a.callsite_id = c.id
		  JOIN stack_profile_frame f ON c.frame_id = f.id
		  WHERE f.name = 'daemon_alloc' AND p.pid = $dpid;")" "daemon_alloc is the daemon's"
	}
assert_no_match "still running" "$(cat "$T_DIR/dfork.err")" "nothing cut off"

# The same daemon, the session ended early (-d, or SIGINT to record once
# the launcher is gone): record says which followed process still runs;
# the daemon runs on, unprofiled, and ends as bare.
for how in -d SIGINT; do
	t_begin "dfork $how: a session ended early names the followed processes still running"
	tag=dfork$how
	mkdir -p "$W/$tag"
	if [ "$how" = -d ]; then
		start_record "$tag" -d 2 -i 1 --follow-fork -o "$T_DIR/$tag.db" -- "$PROGS/dfork_daemon" "$W/$tag"
	else
		start_record "$tag" -i 1 --follow-fork -o "$T_DIR/$tag.db" -- "$PROGS/dfork_daemon" "$W/$tag"
	fi
	wait_until 30 "'goes on' line" grep_q "$T_DIR/$tag.err" "session goes on while 1 followed process runs"
	[ "$how" = SIGINT ] && kill -INT "$(pgrep -P "$RPID" -x heapprof)"
	wait_record "$tag"
	assert_eq 0 "$REC_RC" "record's exit status"
	dpid=$(cat "$W/$tag/daemon.pid" 2>/dev/null)
	assert_match "^heapprof: record: pid $dpid \(dfork_daemon\): still running at the end of the session: profiled until now, it runs on unprofiled$" \
		"$(cat "$T_DIR/$tag.err")" "the daemon is named"
	assert_eq yes "$(kill -0 "$dpid" 2>/dev/null && echo yes)" "the daemon runs on"
	db_valid "$T_DIR/$tag.db" &&
		assert_eq "fork|0|end" "$(sqlq "$T_DIR/$tag.db" "SELECT h.how, h.disconnected, d.reason
		  FROM process p JOIN heapprof_process h USING(upid) JOIN heapprof_dump d USING(upid)
		  WHERE p.pid = $dpid AND d.reason != 'peak';")" "the daemon's row: still connected at the end, one end dump"
	: >"$W/$tag/go"
	wait_until 30 "the daemon's output" test -e "$W/$tag/daemon.out"
	assert_eq "$(cat "$W/dfork.bare/daemon.out")" "$(cat "$W/$tag/daemon.out" 2>/dev/null)" \
		"the daemon's output as bare"
done

# ---------------------------------------------------------------------------
t_begin "redis: redis-server --daemonize yes under --follow-fork: the session lasts until the daemon exits"
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	t_skip "redis-server or redis-cli is not installed"
elif ! port=$(free_port); then
	t_skip "no free port found"
else
	rd="$W/redis"
	mkdir -p "$rd"
	dpid="" # not the dfork case's
	start_record redis --follow-fork -o "$T_DIR/redis.db" -- redis-server --daemonize yes \
		--port "$port" --bind 127.0.0.1 --pidfile "$rd/redis.pid" --dir "$rd" \
		--logfile "$rd/redis.log" --save "" --appendonly no
	ping() { [ "$(timeout 5 redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; }
	if wait_until 30 "redis answering on port $port" ping; then
		dpid=$(cat "$rd/redis.pid")
		TPIDS="$TPIDS $dpid" # killed at exit if still there
		wait_until 30 "'goes on' line" grep_q "$T_DIR/redis.err" "session goes on while 1 followed process runs \(pid $dpid\)"
		assert_eq yes "$(kill -0 "$RPID" 2>/dev/null && echo yes)" "record runs while the daemon does"
		run_bounded 30 redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
	else
		echo "  redis's log:"
		sed 's/^/    /' "$rd/redis.log" 2>/dev/null | tail -n 20
		echo "  record's stderr so far:"
		sed 's/^/    /' "$T_DIR/redis.err" | tail -n 20
		dpid=""
	fi
	wait_record redis
	assert_eq 0 "$REC_RC" "record's exit status"
	assert_match "profile written to" "$(cat "$T_DIR/redis.err")" "the profile is written"
	if [ -n "${dpid:-}" ]; then
		assert_eq no "$(kill -0 "$dpid" 2>/dev/null && echo yes || echo no)" "the daemon is gone when record ends"
		db_valid "$T_DIR/redis.db" &&
			assert_eq "fork|1|1" "$(sqlq "$T_DIR/redis.db" "SELECT h.how, h.disconnected,
			  (SELECT count(*) > 0 FROM heapprof_dump d WHERE d.upid = p.upid)
			  FROM process p JOIN heapprof_process h USING(upid) WHERE p.pid = $dpid;")" \
				"the daemon's row: followed, ended when it exited, dumped"
	fi
fi

# ---------------------------------------------------------------------------
# In a terminal (script(1) makes one): the program's group is the
# terminal's foreground, as bare, and Ctrl-C (here a ^C written to the
# terminal once the program is ready) reaches it.
t_begin "tty: the program has the terminal and gets Ctrl-C, as bare"
# tty_run TAG CMD: CMD (a string) in a new terminal; ^C once it says
# ready.  TTY_RC; the terminal's text in TAG.ttyout, without script's own
# lines, carriage returns, the echoed ^C and empty lines.  script runs
# CMD through $SHELL -c; "exec" makes CMD the terminal's foreground
# process itself whatever the shell (dash, as /bin/sh, would otherwise
# stay as its parent and die of the ^C with 130).
tty_run() {
	local tag=$1 cmd=$2 out="$T_DIR/$1.tty"
	: >"$out"
	TTY_RC=0
	{
		wait_until 30 "ready from $tag" grep_q "$out" '^ready'
		printf '\003'
	} | SHELL=/bin/sh timeout -k 5 60 script -qefc "exec $cmd" "$out" >/dev/null 2>&1 || TTY_RC=$?
	tr -d '\r' <"$out" | grep -v '^Script ' | sed 's/^\^C//' | grep . >"$T_DIR/$tag.ttyout"
}
if ! command -v script >/dev/null 2>&1; then
	t_skip "script(1) is not installed"
else
	tty_run tty.bare "$RS tty"
	assert_eq 0 "$TTY_RC" "bare exit status"
	tty_run tty.rec "$HP record -i 1 -o $T_DIR/tty.db -- $RS tty"
	assert_eq 0 "$TTY_RC" "record's exit status"
	assert_eq "$(cat "$T_DIR/tty.bare.ttyout")" "$(grep -v '^heapprof: ' "$T_DIR/tty.rec.ttyout")" \
		"the program's output in the terminal as bare"
	assert_match "^foreground: yes$" "$(cat "$T_DIR/tty.rec.ttyout")" "in the foreground"
	assert_match "^got SIGINT$" "$(cat "$T_DIR/tty.rec.ttyout")" "Ctrl-C reached it"
	assert_match "^heapprof: profile written to" "$(cat "$T_DIR/tty.rec.ttyout")" "the profile is written"
	db_valid "$T_DIR/tty.db" && check_counts tty "$T_DIR/tty.db" "$T_DIR/tty.rec.ttyout"
fi

t_summary
