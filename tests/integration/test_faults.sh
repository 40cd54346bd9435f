#!/usr/bin/env bash
# test_faults.sh BUILD: faults of the profiler's own side (issue 8,
# Deliver 2), each while a program runs under it:
#   (a) the collector SIGKILLed mid-session: `heapprof record -- CMD`
#       itself (also with --block-client and a full region, so the client
#       asks a dead collector for room), and a `record -p` session;
#   (b) the collector SIGSTOPped for 10 s while the program allocates hard
#       (and with a streaming trace that fills while nobody reads it);
#   (c) heapprofd killed and restarted mid-session: the program runs on, a
#       new session attaches to it through the new daemon;
#   (d) the program SIGKILLed after several dumps: a valid database with
#       every dump before the kill, each exact;
#   (e) shared tables full (live table, stack table): the program runs
#       unchanged, the profile says how much was dropped, exactly;
#   (f) the disk full while writing the profile (a small tmpfs; RLIMIT_FSIZE
#       if mounting is not allowed): one line, status 1, earlier dumps
#       intact;
#   (g) -o somewhere unwritable: one line before the program runs, the
#       program not run, nothing replaced.
# The program is progs/fault_target, driven through files so every step is
# waited on with a bound; its output and status are compared with a bare
# run.  Exact numbers with -i 1 are derived in fault_target.c.
# Sessions here run with --no-peak: the dumps they count and number are
# the session's own (the peak's dump, and its folding: test_peak.sh).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
FT="$PROGS/fault_target"
REAPER="$PROGS/fault_reaper"
t_require "$HP" "$BUILD/libheapprof.so" "$FT" "$REAPER" "$PROGS/manystacks"
LIB="$BUILD/libheapprof.so"
. "$HERE/session_helpers.sh"

MOUNTS=""
faults_cleanup() {
	local m
	for m in $MOUNTS; do umount -l "$m" 2>/dev/null; done
	session_cleanup
}
trap faults_cleanup EXIT

# fdir TAG: a fresh directory for one run of fault_target; D.
fdir() {
	D="$W/$1"
	rm -rf "$D"
	mkdir -p "$D"
}

# bare TAG MODE [N]: fault_target run without the profiler (every step
# released in advance); BARE_OUT_<TAG> file and BARE_RC.
bare() {
	local tag=$1
	shift
	fdir "bare-$tag"
	: >"$D/go"
	: >"$D/exit"
	local s
	for s in 1 2 3 4 5 6; do : >"$D/go$s"; done
	bare_run "$tag" "$FT" "$D" "$@"
}

ppid_of() { awk '{print $4}' "/proc/$1/stat" 2>/dev/null; }
state_of() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; }
ndumps() { sqlite3 -readonly "$1" "SELECT count(*) FROM heapprof_dump;" 2>/dev/null; }
dumps_at_least() { [ "$(ndumps "$1")" -ge "$2" ] 2>/dev/null; }

# no_foreign_stderr FILE: nothing on stderr but heapprof's own lines.
no_foreign_stderr() {
	local other
	other=$(grep -v '^heapprof' "$1")
	assert_eq "" "$other" "the program wrote nothing to stderr"
}

# stat_of DB NAME: a heapprof_process_stats counter (summed over processes).
stat_of() {
	q "$1" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$2';"
}

bare churn churn 2000000
BARE_CHURN_OUT=$(cat "$T_DIR/churn.bare.out")
assert_eq 7 "$BARE_RC" "bare fault_target churn: status"
bare churn200k churn 200000
BARE_CHURN200K_OUT=$(cat "$T_DIR/churn200k.bare.out")
bare full full 20000
BARE_FULL_OUT=$(cat "$T_DIR/full.bare.out")
bare full100k full 100000
BARE_FULL100K_OUT=$(cat "$T_DIR/full100k.bare.out")
bare steps steps 3
BARE_STEPS_OUT=$(cat "$T_DIR/steps.bare.out")

# ---------------------------------------------------------------------------
t_begin "(a) record -- CMD SIGKILLed mid-session: the program runs on unchanged; the dumps before are kept"
fdir a1
DB="$T_DIR/a1.db"
"$REAPER" "$D/reaped" "$HP" record --no-peak -i 1 --dump-interval 20 -o "$DB" -- "$FT" "$D" churn 2000000 \
	>"$D/out" 2>"$D/err" </dev/null &
XPID=$!
if wait_until 30 "ready" test -s "$D/ready"; then
	TP=$(cat "$D/ready")
	REC=$(ppid_of "$TP")
	wait_until 30 "two dumps" dumps_at_least "$DB" 2
	BEFORE=$(ndumps "$DB")
	kill -KILL "$REC"
	wait_until 10 "record gone" sh -c "! kill -0 $REC 2>/dev/null"
	: >"$D/go"
	# The program finishes its work with its collector gone.
	wait_until 60 "the program's done file" test -s "$D/done"
	: >"$D/exit"
fi
wait_child 60 "$XPID"
assert_eq 137 "$WAIT_RC" "record's status (killed)"
assert_eq "$TP exit 7" "$(grep "^$TP " "$D/reaped")" "the program's own status, as in a bare run"
assert_eq "$BARE_CHURN_OUT" "$(cat "$D/out")" "stdout as in a bare run"
no_foreign_stderr "$D/err"
if db_valid "$DB"; then
	AFTER=$(ndumps "$DB")
	assert_ge "$AFTER" "$BEFORE" "dumps in the file >= dumps seen before the kill ($BEFORE)"
	for ts in $(q "$DB" "SELECT ts FROM heapprof_dump ORDER BY ts;"); do
		check_views "$DB" before_alloc 10 10000 10 10000 "$ts"
	done
	rc=0
	run_bounded 60 "$HP" report "$DB" >/dev/null 2>"$T_DIR/a1.report.err" || rc=$?
	assert_eq 0 "$rc" "heapprof report reads it ($(head -c 200 "$T_DIR/a1.report.err"))"
fi

t_begin "(a) record -- CMD SIGKILLed, --block-client and a full region: the client asks a dead collector for room, and goes on"
fdir a2
DB="$T_DIR/a2.db"
"$REAPER" "$D/reaped" "$HP" record --no-peak -i 1 --shmem-size 1048576 --block-client -o "$DB" -- "$FT" "$D" full 20000 \
	>"$D/out" 2>"$D/err" </dev/null &
XPID=$!
if wait_until 30 "ready" test -s "$D/ready"; then
	TP=$(cat "$D/ready")
	REC=$(ppid_of "$TP")
	kill -KILL "$REC"
	wait_until 10 "record gone" sh -c "! kill -0 $REC 2>/dev/null"
	: >"$D/go"
	wait_until 60 "the program's done file" test -s "$D/done"
	: >"$D/exit"
fi
wait_child 60 "$XPID"
assert_eq "$TP exit 7" "$(grep "^$TP " "$D/reaped")" "the program's own status"
assert_eq "$BARE_FULL_OUT" "$(cat "$D/out")" "stdout as in a bare run"
no_foreign_stderr "$D/err"
assert_eq ok "$(q "$DB" "PRAGMA integrity_check;")" "the profile is a valid database"

start_daemon
t_begin "(a) a record -p session (the collector of a heapprofd session) SIGKILLed: the program runs on unchanged"
fdir a3
LD_PRELOAD="$LIB" "$FT" "$D" churn 200000 >"$D/out" 2>"$D/err" &
TP=$!
TPIDS="$TPIDS $TP"
wait_until 30 "ready" test -s "$D/ready"
"$HP" record --no-peak -p "$TP" -i 1 -o "$T_DIR/a3.db" >"$T_DIR/a3.out" 2>"$T_DIR/a3.err" </dev/null &
RPID=$!
disown "$RPID"
if wait_until 20 "profiling line" grep_q "$T_DIR/a3.err" "profiling"; then
	kill -KILL "$RPID"
	wait_until 10 "record gone" sh -c "! kill -0 $RPID 2>/dev/null"
fi
: >"$D/go"
wait_until 60 "the program's done file" test -s "$D/done"
: >"$D/exit"
wait_child 60 "$TP"
assert_eq 7 "$WAIT_RC" "the program's status"
assert_eq "$BARE_CHURN200K_OUT" "$(cat "$D/out")" "stdout as in a bare run"
assert_eq "" "$(cat "$D/err")" "nothing on the program's stderr"
rc=0
run_bounded 30 "$HP" daemon --status >/dev/null 2>&1 || rc=$?
assert_eq 0 "$rc" "heapprofd still serves (daemon --status)"

# ---------------------------------------------------------------------------
t_begin "(b) the collector SIGSTOPped for 10 s: the program finishes meanwhile; afterwards the session ends and the profile is exact"
fdir b1
DB="$T_DIR/b1.db"
"$HP" record --no-peak -i 1 -o "$DB" -- "$FT" "$D" churn 2000000 >"$D/out" 2>"$D/err" </dev/null &
RPID=$!
STOPPED_OK=0
if wait_until 30 "ready" test -s "$D/ready"; then
	kill -STOP "$RPID"
	t0=$SECONDS
	: >"$D/go"
	if wait_until 10 "the program's done file while the collector is stopped" test -s "$D/done"; then
		assert_eq T "$(state_of "$RPID")" "record is still stopped when the program is done"
		STOPPED_OK=1
	fi
	# The fault lasts 10 s, whatever the program does meanwhile.
	left=$((10 - (SECONDS - t0)))
	[ "$left" -gt 0 ] && sleep "$left"
	: >"$D/exit"
	kill -CONT "$RPID"
fi
wait_child 60 "$RPID"
assert_eq 7 "$WAIT_RC" "record returns the program's status"
assert_eq 1 "$STOPPED_OK" "the program was done within 10 s of a stopped collector"
assert_eq "$BARE_CHURN_OUT" "$(cat "$D/out")" "stdout as in a bare run"
no_foreign_stderr "$D/err"
if db_valid "$DB"; then
	check_views "$DB" before_alloc 10 10000 10 10000
	check_views "$DB" churn_alloc 2000000 128000000 2000 128000
	for st in stack_table_full live_table_full module_table_full unwind_errors; do
		assert_eq 0 "$(stat_of "$DB" "$st")" "$st: nothing dropped"
	done
	assert_eq end "$(q "$DB" "SELECT group_concat(reason) FROM heapprof_dump;")" "one dump, at the end"
fi

t_begin "(b) the collector SIGSTOPped with a streaming trace: kept + dropped = every event, exactly"
fdir b2
DB="$T_DIR/b2.db"
"$HP" record --no-peak -i 1 --trace --trace-buffer 65536 -o "$DB" -- "$FT" "$D" churn 200000 >"$D/out" 2>"$D/err" </dev/null &
RPID=$!
if wait_until 30 "ready" test -s "$D/ready"; then
	kill -STOP "$RPID"
	t0=$SECONDS
	: >"$D/go"
	if wait_until 10 "the program's done file while the collector is stopped" test -s "$D/done"; then
		assert_eq T "$(state_of "$RPID")" "record is still stopped when the program is done"
	fi
	left=$((10 - (SECONDS - t0)))
	[ "$left" -gt 0 ] && sleep "$left"
	: >"$D/exit"
	kill -CONT "$RPID"
fi
wait_child 60 "$RPID"
assert_eq 7 "$WAIT_RC" "record returns the program's status"
assert_eq "$BARE_CHURN200K_OUT" "$(cat "$D/out")" "stdout as in a bare run"
if db_valid "$DB"; then
	check_views "$DB" churn_alloc 200000 12800000 200 12800
	read -r pa pf pab pfb <<<"$(q "$DB" "SELECT coalesce(sum(CASE WHEN count > 0 THEN count END), 0)
	  || ' ' || coalesce(-sum(CASE WHEN count < 0 THEN count END), 0)
	  || ' ' || coalesce(sum(CASE WHEN size > 0 THEN size END), 0)
	  || ' ' || coalesce(-sum(CASE WHEN size < 0 THEN size END), 0)
	  FROM heap_profile_allocation;")"
	read -r ka kf kab kfb <<<"$(hpq "$DB" "SELECT count(CASE WHEN kind = 'alloc' THEN 1 END)
	  || ' ' || count(CASE WHEN kind = 'free' THEN 1 END)
	  || ' ' || coalesce(sum(CASE WHEN kind = 'alloc' THEN size END), 0)
	  || ' ' || coalesce(sum(CASE WHEN kind = 'free' THEN size END), 0)
	  FROM heapprof_event;")"
	IFS='|' read -r ev da df dab dfb inc <<<"$(q "$DB" "SELECT events, dropped_allocs, dropped_frees,
	  dropped_alloc_bytes, dropped_free_bytes, incomplete FROM heapprof_trace;")"
	assert_eq "$((ka + kf))" "$ev" "heapprof_trace.events = rows"
	assert_eq "$pa" "$((ka + da))" "allocations: kept + dropped = all"
	assert_eq "$pf" "$((kf + df))" "frees: kept + dropped = all"
	assert_eq "$pab" "$((kab + dab))" "allocated bytes: kept + dropped = all"
	assert_eq "$pfb" "$((kfb + dfb))" "freed bytes: kept + dropped = all"
	assert_eq 0 "$inc" "incomplete events"
	assert_ge "$((da + df))" 1 "events were dropped while nobody read the buffer"
	t_note "kept $ev events, dropped $da allocations and $df frees while the collector was stopped"
	assert_match "trace \(streaming\): $ev events kept, $((da + df)) dropped" "$(cat "$D/err")" \
		"record's summary line says the same numbers"
fi

t_begin "(b) heapprofd SIGSTOPped for 10 s: a program that starts meanwhile (client preloaded) runs unchanged"
# Its hello at startup is answered by no one: the client gives up after a
# bounded wait and the program runs unprofiled.  Also with a session that
# wants the program by name.
"$HP" record --no-peak -n fault_target -o "$T_DIR/bd.db" >"$T_DIR/bd.out" 2>"$T_DIR/bd.err" </dev/null &
RPID=$!
wait_until 20 "session line" grep_q "$T_DIR/bd.err" "session"
kill -STOP "$DPID"
t0=$SECONDS
for i in 1 2; do
	fdir "bd$i"
	: >"$D/go"
	: >"$D/exit"
	s_ns=$(date +%s%N)
	rc=0
	LD_PRELOAD="$LIB" run_bounded 30 "$FT" "$D" churn 200000 >"$D/out" 2>"$D/err" || rc=$?
	e_ns=$(date +%s%N)
	assert_eq 7 "$rc" "program $i: status"
	assert_eq "$BARE_CHURN200K_OUT" "$(cat "$D/out")" "program $i: stdout as in a bare run"
	assert_eq "" "$(cat "$D/err")" "program $i: nothing on its stderr"
	t_note "program $i ran in $(((e_ns - s_ns) / 1000000)) ms with heapprofd stopped (4 ms bare)"
done
left=$((10 - (SECONDS - t0)))
[ "$left" -gt 0 ] && sleep "$left"
kill -CONT "$DPID"
rc=0
run_bounded 30 "$HP" daemon --status >/dev/null 2>&1 || rc=$?
assert_eq 0 "$rc" "heapprofd serves again after SIGCONT"
kill -INT "$RPID"
wait_child 60 "$RPID"
assert_le "$WAIT_RC" 1 "the waiting session ends on SIGINT (0, or 1: nothing profiled)"

# ---------------------------------------------------------------------------
t_begin "(c) heapprofd killed and restarted mid-session: the program runs on; the session ends well; a new session attaches"
fdir c
LD_PRELOAD="$LIB" "$FT" "$D" steps 3 >"$D/out" 2>"$D/err" &
TP=$!
TPIDS="$TPIDS $TP"
wait_until 30 "ready" test -s "$D/ready"
"$HP" record --no-peak -p "$TP" -i 1 -o "$T_DIR/c1.db" >"$T_DIR/c1.out" 2>"$T_DIR/c1.err" </dev/null &
RPID=$!
if wait_until 20 "profiling line" grep_q "$T_DIR/c1.err" "profiling"; then
	daemon_gone KILL
	start_daemon
	wait_until 20 "'lost the connection' line" grep_q "$T_DIR/c1.err" "lost the connection to heapprofd"
	: >"$D/go"
	wait_until 30 "step 1" test -e "$D/step1"
	kill -INT "$RPID"
fi
wait_child 60 "$RPID"
assert_eq 0 "$WAIT_RC" "the first session's status"
if db_valid "$T_DIR/c1.db"; then
	check_views "$T_DIR/c1.db" step_alloc 100 10000 100 10000
fi
"$HP" record --no-peak -p "$TP" -i 1 -o "$T_DIR/c2.db" >"$T_DIR/c2.out" 2>"$T_DIR/c2.err" </dev/null &
RPID=$!
if wait_until 20 "profiling line of the second session" grep_q "$T_DIR/c2.err" "profiling"; then
	: >"$D/go1"
	wait_until 30 "step 2" test -e "$D/step2"
	kill -INT "$RPID"
fi
wait_child 60 "$RPID"
assert_eq 0 "$WAIT_RC" "the second session's status (through the new daemon)" ||
	sed -e 's/^/    | /' "$T_DIR/c2.err"
if db_valid "$T_DIR/c2.db"; then
	check_views "$T_DIR/c2.db" step_alloc 100 10000 100 10000
fi
: >"$D/go2"
wait_until 30 "step 3" test -e "$D/step3"
: >"$D/go3"
: >"$D/exit"
wait_child 60 "$TP"
assert_eq 7 "$WAIT_RC" "the program's status"
assert_eq "$BARE_STEPS_OUT" "$(cat "$D/out")" "stdout as in a bare run"
assert_eq "" "$(cat "$D/err")" "nothing on the program's stderr"

# ---------------------------------------------------------------------------
t_begin "(d) the program SIGKILLed after three dumps: a valid database with every dump, each exact"
fdir d
DB="$T_DIR/d.db"
"$HP" record --no-peak -i 1 -o "$DB" -- "$FT" "$D" steps 5 >"$D/out" 2>"$D/err" </dev/null &
RPID=$!
if wait_until 30 "ready" test -s "$D/ready"; then
	TP=$(cat "$D/ready")
	: >"$D/go"
	for s in 1 2 3; do
		wait_until 30 "step $s" test -e "$D/step$s" || break
		kill -USR1 "$RPID"
		wait_until 30 "dump $s" dumps_at_least "$DB" "$s" || break
		: >"$D/go$s"
	done
	wait_until 30 "step 4" test -e "$D/step4"
	kill -KILL "$TP"
fi
wait_child 60 "$RPID"
assert_eq 137 "$WAIT_RC" "record returns 128 + SIGKILL, as the program's status"
if db_valid "$DB"; then
	assert_eq "4" "$(ndumps "$DB")" "three dumps on SIGUSR1 and the last one"
	s=0
	for ts in $(q "$DB" "SELECT ts FROM heapprof_dump ORDER BY ts;"); do
		s=$((s + 1))
		check_views "$DB" step_alloc $((100 * s)) $((10000 * s)) $((100 * s)) $((10000 * s)) "$ts"
		check_views "$DB" before_alloc 10 10000 10 10000 "$ts"
	done
	assert_eq 137 "$(q "$DB" "SELECT coalesce(exit_status, -1) FROM heapprof_process;")" \
		"heapprof_process.exit_status"
fi

# ---------------------------------------------------------------------------
t_begin "(e) the live table full: the program runs unchanged; what was dropped is said, exactly"
fdir e1
: >"$D/go"
: >"$D/exit"
DB="$T_DIR/e1.db"
hp_record e1 --no-peak --no-peak -i 1 --shmem-size 1048576 -o "$DB" -- "$FT" "$D" full 100000
assert_eq 7 "$REC_RC" "record returns the program's status"
assert_eq "$BARE_FULL100K_OUT" "$(cat "$T_DIR/e1.out")" "stdout as in a bare run"
if db_valid "$DB"; then
	lf=$(stat_of "$DB" live_table_full)
	lfb=$(stat_of "$DB" live_table_full_bytes)
	assert_ge "$lf" 1 "live_table_full: the table did fill"
	# Nothing is freed: every allocation is counted (alloc views exact), and
	# the live ones recorded plus the ones dropped are all of them.
	check_views "$DB" full_alloc 100000 2400000 - -
	read -r ao as o s <<<"$(q "$DB" "SELECT coalesce(sum(CASE WHEN count > 0 THEN count END), 0)
	  || ' ' || coalesce(sum(CASE WHEN size > 0 THEN size END), 0)
	  || ' ' || sum(count) || ' ' || sum(size) FROM heap_profile_allocation;")"
	assert_eq "$ao" "$((o + lf))" "live objects recorded + live_table_full = allocations"
	assert_eq "$as" "$((s + lfb))" "live bytes recorded + live_table_full_bytes = allocated bytes"
	assert_eq "$ao" "$(stat_of "$DB" samples)" "samples = allocations recorded"
	assert_match 'live[ _]table' "$(run_bounded 60 "$HP" report "$DB" 2>&1)" "heapprof report says the live table was full"
	# The dropped blocks count as freed at once: the live views fall short.
	assert_match 'counted as freed at once, so space and objects understate live memory' \
		"$(run_bounded 60 "$HP" report "$DB" 2>&1)" "heapprof report says which way the views are off"
fi

t_begin "(e) the stack table full: the program runs unchanged; the dropped stacks' samples are counted under one pseudo-frame"
DB="$T_DIR/e2.db"
bare_run e2 "$PROGS/manystacks" 65536
hp_record e2 --no-peak --no-peak -i 1 --shmem-size 1048576 -o "$DB" -- "$PROGS/manystacks" 65536
assert_eq "$BARE_RC" "$REC_RC" "record returns the program's status"
assert_eq "$(sed 's/ end_ns=.*//' "$T_DIR/e2.bare.out")" "$(sed 's/ end_ns=.*//' "$T_DIR/e2.out")" \
	"stdout as in a bare run (but the clock)"
if db_valid "$DB"; then
	sf=$(stat_of "$DB" stack_table_full)
	sfb=$(stat_of "$DB" stack_table_full_bytes)
	assert_ge "$sf" 1 "stack_table_full: the table did fill"
	assert_eq "$sf $sfb" "$(q "$DB" "SELECT sum(a.count) || ' ' || sum(a.size) FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  WHERE f.name = '[stack table full]' AND a.count > 0;")" \
		"the '[stack table full]' frame holds exactly what stack_table_full(_bytes) says"
	# 65536 allocations of manystacks, its calloc and stdout's buffer.
	assert_eq 65538 "$(q "$DB" "SELECT sum(count) FROM heap_profile_allocation WHERE count > 0;")" \
		"every allocation is counted"
	assert_eq 65538 "$(stat_of "$DB" samples)" "samples"
fi

# ---------------------------------------------------------------------------
t_begin "(f) the disk full while writing the profile: one line, status 1, the dumps before intact"
SMALL="$T_DIR/small"
mkdir -p "$SMALL"
# RLIMIT_FSIZE (ulimit -f) is no substitute: it limits the shared region
# (a memfd, at least 1 MiB) as well, and a profile stays smaller than the
# region that fed it, so the disk never fills first.  Without mount: skip.
FULL_OK=0
if mount -t tmpfs -o size=1m tmpfs "$SMALL" 2>/dev/null; then
	MOUNTS="$MOUNTS $SMALL"
	FULL_OK=1
else
	t_skip "mount -t tmpfs is not allowed here"
fi
if [ "$FULL_OK" = 1 ]; then
	fdir f
	DB="$SMALL/f.db"
	FT_WIDE=16 FT_EXIT=0 "$HP" record --no-peak -i 1 -o "$DB" -- "$FT" "$D" steps 2 >"$D/out" 2>"$D/err" </dev/null &
	RPID=$!
	if wait_until 30 "ready" test -s "$D/ready"; then
		: >"$D/go"
		for s in 1 2; do
			wait_until 30 "step $s" test -e "$D/step$s" || break
			kill -USR1 "$RPID"
			wait_until 30 "dump $s" dumps_at_least "$DB" "$s" || break
			: >"$D/go$s"
		done
		# Now 65536 stacks: the last dump does not fit.
		wait_until 60 "the program's done file" test -s "$D/done"
		: >"$D/exit"
	fi
	wait_child 120 "$RPID"
	assert_eq 1 "$WAIT_RC" "record's status (the program exited 0)"
	assert_eq 1 "$(wc -l <"$D/err")" "one line on stderr: $(head -c 400 "$D/err" | tr '\n' '|')"
	assert_match "^heapprof: profile $SMALL/f\.db is incomplete: No space left on device: the first 2 of 3 dumps are kept, the last 1 lost\$" \
		"$(cat "$D/err")" "it names the file, the reason and what the file kept"
	assert_eq "f.db" "$(ls "$SMALL")" "no -wal or -shm left beside it"
	assert_eq "fault_target: steps 65936" "$(cat "$D/out")" "the program's output"
	if db_valid "$DB"; then
		assert_eq 2 "$(ndumps "$DB")" "the two dumps before the disk filled"
		s=0
		for ts in $(q "$DB" "SELECT ts FROM heapprof_dump ORDER BY ts;"); do
			s=$((s + 1))
			check_views "$DB" step_alloc $((100 * s)) $((10000 * s)) $((100 * s)) $((10000 * s)) "$ts"
		done
		rc=0
		run_bounded 60 "$HP" report "$DB" >/dev/null 2>"$T_DIR/f.report.err" || rc=$?
		assert_eq 0 "$rc" "heapprof report reads it ($(head -c 200 "$T_DIR/f.report.err"))"
	fi
fi

# ---------------------------------------------------------------------------
t_begin "(g) -o somewhere unwritable: one line naming it, status 1, the program not run, nothing replaced"
RAN="$T_DIR/ran"
RO="$T_DIR/ro"
mkdir -p "$RO"
if mount -t tmpfs -o size=64k,ro tmpfs "$RO" 2>/dev/null; then
	MOUNTS="$MOUNTS $RO"
else
	RO=""
fi
mkfifo "$T_DIR/fifo"
mkdir -p "$T_DIR/adir"
: >"$T_DIR/afile"
for out in /proc/version/x.db /proc/x.db /sys/x.db "$T_DIR/afile/x.db" "$T_DIR/adir" \
	/dev/full "$T_DIR/fifo" "$T_DIR/no/such/dir/x.db" ${RO:+"$RO/x.db"}; do
	rm -f "$RAN"
	rc=0
	(cd "$W" && exec timeout -k 5 30 "$HP" record --no-peak -o "$out" -- /usr/bin/touch "$RAN") \
		>"$T_DIR/g.out" 2>"$T_DIR/g.err" </dev/null || rc=$?
	assert_eq 1 "$rc" "-o $out: status"
	assert_eq 1 "$(wc -l <"$T_DIR/g.err")" "-o $out: one line ($(head -c 300 "$T_DIR/g.err" | tr '\n' '|'))"
	assert_match "$(printf '%s' "$out" | sed 's/[][\.*^$+?(){}|]/\\&/g')" "$(cat "$T_DIR/g.err")" "-o $out: the line names it"
	[ -e "$RAN" ] && t_fail "-o $out: the program ran"
done
# The readers' outputs: a failed write removes a partial file, never a
# device (as root, pprof's unlink after ENOSPC took /dev/full).
GOODDB="$T_DIR/b1.db"
if [ -s "$GOODDB" ]; then
	for cmd in "pprof $GOODDB -o" "pprof $GOODDB --all -o" "diff $GOODDB $GOODDB -o" "flamegraph $GOODDB -o"; do
		rc=0
		# shellcheck disable=SC2086 # the words of cmd
		timeout -k 5 30 "$HP" $cmd /dev/full >"$T_DIR/g.out" 2>"$T_DIR/g.err" </dev/null || rc=$?
		assert_eq 1 "$rc" "$cmd /dev/full: status"
		assert_eq 1 "$(wc -l <"$T_DIR/g.err")" "$cmd /dev/full: one line ($(head -c 300 "$T_DIR/g.err" | tr '\n' '|'))"
		assert_match '/dev/full' "$(cat "$T_DIR/g.err")" "$cmd /dev/full: the line names it"
		[ -c /dev/full ] || {
			t_fail "$cmd /dev/full replaced the device; restoring it"
			rm -f /dev/full && mknod -m 666 /dev/full c 1 7
		}
	done
fi
[ -c /dev/full ] || t_fail "/dev/full is no longer a character device"
[ -p "$T_DIR/fifo" ] || t_fail "the FIFO was replaced"
[ -d "$T_DIR/adir" ] || t_fail "the directory was replaced"

t_summary
