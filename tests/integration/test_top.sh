#!/usr/bin/env bash
# test_top.sh BUILD: `heapprof top`.  progs/top_grow keeps blocks in
# grow_here() steadily (grow) or allocates a known amount and waits
# (fixed).  In a real terminal (tmux, 200x50): top of an unprofiled
# top_grow starts its own session, shows grow_here at the top within 2 s
# of its first screen, and its keys work (view, sort, pause, help; q and
# Ctrl-C: the terminal restored, exit status 0, its session ended, its
# temporary profile removed).  As plain text (--once, --iterations): the
# header lines, the function at the top and the exact totals at -i 1 of a
# fixed top_grow recorded by `record -- CMD` (reading beside it); beside a
# `record -p` session; the message and cleanup of its own session; the
# target exiting; SIGTERM; errors in one line.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/top_grow"
. "$HERE/session_helpers.sh"

# top's own sessions keep their temporary profile here: empty after it.
export TMPDIR="$W/tmp"
mkdir -p "$TMPDIR"

# top_grow under a name of this run's own (its command name), so that
# -n finds only our processes even when another run of this test is going.
TGNAME="topg$$"
TG="$W/$TGNAME"
cp "$PROGS/top_grow" "$TG" || t_fail "copying top_grow"

# start_grow TAG MODE [record ARGS...]: top_grow MODE in the background
# (under `heapprof record ARGS -- ` when given) until it is ready: GPID;
# BGPID the background job (record, or top_grow).
start_grow() {
	local tag=$1 mode=$2
	shift 2
	rm -f "$W/$tag.ready"
	if [ $# -gt 0 ]; then
		timeout -k 5 120 "$HP" record "$@" -o "$W/$tag.db" -- \
			"$TG" "$mode" "$W/$tag.ready" \
			>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" </dev/null &
	else
		timeout -k 5 120 "$TG" "$mode" "$W/$tag.ready" \
			>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" </dev/null &
	fi
	BGPID=$!
	TPIDS="$TPIDS $BGPID"
	GPID=""
	wait_until 30 "$tag ready" test -s "$W/$tag.ready" || return 1
	GPID=$(sed -n 's/^pid //p' "$W/$tag.ready")
	TPIDS="$TPIDS $GPID"
}

ms() { echo $(($(date +%s%N) / 1000000)); }

# wait_ms MS DESCRIPTION CMD...: polls CMD until it succeeds, within MS.
wait_ms() {
	local bound=$1 what=$2
	shift 2
	local end=$(($(ms) + bound))
	until "$@"; do
		if [ "$(ms)" -ge "$end" ]; then
			t_fail "no $what within ${bound} ms"
			return 1
		fi
		sleep 0.02
	done
}

no_tmp_left() {
	assert_eq "" "$(ls -A "$TMPDIR" | grep '^heapprof-top\.')" \
		"top's temporary directory removed"
}

# ---------------------------------------------------------------------------
t_begin "top --once beside a record -- CMD session: exact totals at -i 1"
start_grow f1 fixed -i 1
if [ -n "$GPID" ]; then
	hp_cmd o1 top -p "$GPID" --once
	assert_eq 0 "$CMD_RC" "top --once status: $(head -c 300 "$T_DIR/o1.err")"
	assert_eq "" "$(cat "$T_DIR/o1.err")" "nothing on stderr"
	out=$(cat "$T_DIR/o1.out")
	assert_eq "heapprof top - pid $GPID ($TGNAME) - every 1.0 s" \
		"$(sed -n 1p "$T_DIR/o1.out")" "header"
	assert_match '^counting for the last [0-9]+\.[0-9] s, beside its heapprof session$' \
		"$(sed -n 2p "$T_DIR/o1.out")" "since when, whose session"
	assert_match "^interval   every allocation \(exact\); heapprof's tables [0-9.]+ [KM]iB$" "$(sed -n 3p "$T_DIR/o1.out")" \
		"interval line"
	assert_match '^space +976\.56 KiB \(1000000 B\) +alloc +-$' "$(sed -n 4p "$T_DIR/o1.out")" \
		"space, exact; no rate after one reading"
	assert_match '^objects +10 +free +-$' "$(sed -n 5p "$T_DIR/o1.out")" "objects"
	assert_match '^alloc_space +981\.45 KiB \(1005000 B\) +RSS +[0-9.]+ [KM]iB \(peak [0-9.]+ [KM]iB\)$' \
		"$(sed -n 6p "$T_DIR/o1.out")" "alloc_space and RSS"
	assert_match '^alloc_objects +15 +limit +([0-9.]+ [KMG]iB \(memory\.(max|limit_in_bytes)\)|none)$' \
		"$(sed -n 7p "$T_DIR/o1.out")" "alloc_objects and limit"
	assert_eq "view: space (self)  sort: value" "$(sed -n 9p "$T_DIR/o1.out")" "view line"
	assert_match '^ +SPACE +SPACE/s +% +FUNCTION <- CALLERS$' \
		"$(sed -n 10p "$T_DIR/o1.out")" "table header"
	assert_match '^ +976\.56 KiB +- +100\.0% +keep_here <- main( |$)' \
		"$(sed -n 11p "$T_DIR/o1.out")" "keep_here at the top, called by main"
	assert_match '^ +0 B +- +0\.0% +temp_here <- main( |$)' \
		"$(sed -n 12p "$T_DIR/o1.out")" "temp_here: nothing live"
	assert_eq 13 "$(wc -l <"$T_DIR/o1.out" | tr -d ' ')" "lines (the last one empty)"
	# Everything above the table fits 80 columns (a terminal cuts a
	# line; the header's words must not be cut).
	assert_eq "" "$(sed -n 1,10p "$T_DIR/o1.out" | awk 'length($0) > 80')" \
		"the header lines fit 80 columns"

	hp_cmd o2 top -n "$TGNAME" --once --view alloc_objects --top 1
	assert_eq 0 "$CMD_RC" "top -n status: $(head -c 300 "$T_DIR/o2.err")"
	assert_match "^heapprof top - pid $GPID \($TGNAME\)" "$(head -n 1 "$T_DIR/o2.out")" \
		"-n NAME finds the process"
	assert_eq "view: alloc_objects (self)  sort: value" "$(sed -n 9p "$T_DIR/o2.out")" \
		"--view alloc_objects"
	assert_match '^ +10 +- +66\.7% +keep_here <- main' "$(sed -n 11p "$T_DIR/o2.out")" \
		"alloc_objects of keep_here: 10 of 15"
	assert_eq 12 "$(wc -l <"$T_DIR/o2.out" | tr -d ' ')" "--top 1: one function"

	# Inclusive: main holds all of it (keep_here's and temp_here's),
	# and is on top; the callers-only functions are rows too.
	hp_cmd o4 top -p "$GPID" --once --inclusive --view alloc_space
	assert_eq "view: alloc_space (inclusive)  sort: value" "$(sed -n 9p "$T_DIR/o4.out")" \
		"--inclusive"
	assert_match '^ +981\.45 KiB +- +100\.0% +main( |$)' \
		"$(grep -E '%  main( |$)' "$T_DIR/o4.out")" \
		"inclusive: main, a caller only, with all of alloc_space"
	assert_match '^ +976\.56 KiB +- +99\.5% +keep_here <- main' \
		"$(grep -E '%  keep_here' "$T_DIR/o4.out")" \
		"inclusive: keep_here, its own"
	# By count: temp_here made 5 allocations of 1000 B, keep_here 10 of
	# 100000: by alloc_space keep_here leads, by their count too (10 > 5);
	# live objects: keep_here 10, temp_here 0.
	hp_cmd o5 top -p "$GPID" --once --sort count --view alloc_space
	assert_eq "view: alloc_space (self)  sort: count" "$(sed -n 9p "$T_DIR/o5.out")" \
		"--sort count"
	assert_match 'keep_here <- main' "$(sed -n 11p "$T_DIR/o5.out")" \
		"by count: keep_here (10 objects) before temp_here (5)"

	# Two refreshes: the second has rates (nothing allocates: 0).
	hp_cmd o3 top -p "$GPID" --iterations 2 -d 0.2
	assert_eq 0 "$CMD_RC" "--iterations 2 status"
	assert_eq 2 "$(grep -c '^heapprof top - pid' "$T_DIR/o3.out")" "two refreshes"
	assert_match 'alloc +0 B/s, 0 objects/s' "$(cat "$T_DIR/o3.out")" \
		"the second refresh's rate"
	kill -TERM "$GPID"
	wait_pid_bounded 30 "$BGPID"
	assert_eq 0 "$WAIT_RC" "record of top_grow: $(tail -n 2 "$T_DIR/f1.err")"
fi
no_tmp_left

t_begin "top --iterations of an unprofiled process: its own session, ended"
start_grow g1 grow
if [ -n "$GPID" ]; then
	hp_cmd i1 top -p "$GPID" --iterations 3 -d 0.5
	assert_eq 0 "$CMD_RC" "status: $(head -c 300 "$T_DIR/i1.err")"
	assert_eq "heapprof: top: pid $GPID is not profiled: started 'heapprof record -p $GPID' (ended when top quits)" \
		"$(cat "$T_DIR/i1.err")" "the one line on stderr"
	assert_match "^counting for the last [0-9.]+ s, in top's own session" \
		"$(sed -n 2p "$T_DIR/i1.out")" "header says top's own session"
	last=$(grep -A1 'FUNCTION <- CALLERS' "$T_DIR/i1.out" | tail -n 1)
	assert_match '%  grow_here <- main' "$last" "grow_here at the top of the last refresh"
	assert_match 'alloc +[0-9.]+ MiB/s' "$(cat "$T_DIR/i1.out")" "an allocation rate in MiB/s"
	kill -0 "$GPID" 2>/dev/null || t_fail "top_grow did not survive top's session"
	assert_eq "" "$(pgrep -f "record -p $GPID -o")" "top's record ended"
	no_tmp_left
	# --once of a process nobody profiles: top's own session counts from
	# its attach, so the one screen comes one -d later, with what grew.
	hp_cmd once1 top -p "$GPID" --once -d 0.5
	assert_eq 0 "$CMD_RC" "--once status: $(head -c 300 "$T_DIR/once1.err")"
	row=$(grep -A1 'FUNCTION <- CALLERS' "$T_DIR/once1.out" | sed -n 2p)
	assert_match '^ +[0-9.]+ [KM]iB +[0-9.]+ [KM]iB/s +[0-9.]+%  grow_here <- main' "$row" \
		"--once: grow_here at the top, grown, with its rate"
	assert_eq "" "$(pgrep -f "record -p $GPID -o")" "top's record ended"
	no_tmp_left
fi

t_begin "top --once beside a record -p session"
if [ -n "$GPID" ]; then
	timeout -k 5 120 "$HP" record -p "$GPID" -o "$W/p1.db" \
		>"$T_DIR/p1.out" 2>"$T_DIR/p1.err" </dev/null &
	RECPID=$!
	TPIDS="$TPIDS $RECPID"
	# Attached first: else top would start a session of its own.
	wait_until 30 "record -p to attach" grep -qs ': profiling' "$T_DIR/p1.err"
	beside_ok() {
		"$HP" top -p "$GPID" --once >"$T_DIR/p1top.out" 2>"$T_DIR/p1top.err" &&
			grep -q '^counting .*beside its heapprof session' "$T_DIR/p1top.out" &&
			grep -A1 'FUNCTION <- CALLERS' "$T_DIR/p1top.out" | grep -q '%  grow_here <- main'
	}
	wait_until 30 "top reading beside record -p with grow_here at the top" beside_ok
	assert_eq "" "$(cat "$T_DIR/p1top.err")" "nothing on stderr (no session of top's own)"
	kill -INT "$RECPID"
	wait_pid_bounded 30 "$RECPID"
	assert_eq 0 "$WAIT_RC" "record -p: $(tail -n 2 "$T_DIR/p1.err")"
	kill -0 "$GPID" 2>/dev/null || t_fail "top_grow did not survive"
	no_tmp_left
fi

t_begin "top in a terminal (tmux): grow_here at the top within 2 s, keys"
TMUX_SOCK="$T_DIR/tmux.sock"
tm() { timeout 10 tmux -S "$TMUX_SOCK" "$@"; }
screen() { tm capture-pane -p -t top; }
on_screen() { screen | grep -qE "$1"; }
first_row() { screen | grep -A1 'FUNCTION <- CALLERS' | sed -n 2p; }
grow_first() { first_row | grep -q '%  grow_here <- main'; }
space_line() { screen | grep -E '^space '; }
if [ -n "$GPID" ] && command -v tmux >/dev/null; then
	# top twice: ended by q, then by Ctrl-C.
	cat >"$W/run_top.sh" <<EOF
for run in 1 2; do
	s1=\$(stty -g)
	"$HP" top -p $GPID
	rc=\$?
	s2=\$(stty -g)
	[ "\$s1" = "\$s2" ] && same=yes || same=no
	echo "rc=\$rc stty=\$same" >"$W/top\$run.done"
	echo "after top \$run"
	while [ ! -e "$W/go\$run" ]; do sleep 0.05; done
done
exec sleep 120
EOF
	rm -f "$W/top1.done" "$W/top2.done" "$W/go1" "$W/go2"
	tm new-session -d -x 200 -y 50 -s top \
		"env TMPDIR=$TMPDIR XDG_RUNTIME_DIR=$XDG_RUNTIME_DIR bash --norc --noprofile $W/run_top.sh" ||
		t_fail "tmux new-session"
	# The first screen once top reads the process (our session attached:
	# top_grow reading beside the last one already ended).
	wait_until 30 "top's first screen" on_screen '^heapprof top - pid'
	t0=$(ms)
	wait_ms 2000 "grow_here at the top" grow_first
	t_note "grow_here at the top $(($(ms) - t0)) ms after the first screen"
	on_screen "top's own session" || t_fail "header: not top's own session"
	on_screen '^view: space \(self\)  sort: value  \(v view' || t_fail "initial view line"
	tm send-keys -t top v
	wait_ms 2000 "view objects" on_screen '^view: objects \(self\)  sort: value'
	on_screen ' +OBJECTS +OBJECTS/s ' || t_fail "objects columns"
	tm send-keys -t top 3
	wait_ms 2000 "view alloc_space" on_screen '^view: alloc_space \(self\)  sort: value'
	tm send-keys -t top s
	wait_ms 2000 "sort rate" on_screen '^view: alloc_space \(self\)  sort: rate'
	wait_ms 2000 "grow_here first by rate" grow_first
	tm send-keys -t top i
	wait_ms 2000 "inclusive" on_screen '^view: alloc_space \(inclusive\)  sort: rate'
	tm send-keys -t top i
	tm send-keys -t top h
	wait_ms 2000 "help" on_screen '^heapprof top - keys'
	on_screen '^  p +pause' || t_fail "help lists p"
	tm send-keys -t top x
	wait_ms 2000 "back from help" on_screen '^view: alloc_space \(self\)  sort: rate'
	# Pause: the numbers stay over two refresh periods; then they move.
	tm send-keys -t top p
	wait_ms 2000 "PAUSED" on_screen ' - PAUSED$'
	a=$(space_line)
	sleep 2.2
	assert_eq "$a" "$(space_line)" "paused: the space line did not change"
	tm send-keys -t top p
	changed() { [ "$(space_line)" != "$a" ] && ! on_screen PAUSED; }
	wait_ms 3000 "the numbers moving again" changed
	tm send-keys -t top q
	wait_until 30 "top to quit" test -s "$W/top1.done"
	assert_eq "rc=0 stty=yes" "$(cat "$W/top1.done")" "q: exit status 0, terminal modes restored"
	wait_until 5 "the shell's line after top" on_screen '^after top 1'
	! on_screen '^heapprof top - pid' || t_fail "top's screen left behind (alternate screen not left)"
	assert_eq "" "$(pgrep -f "record -p $GPID -o")" "top's record ended"
	no_tmp_left
	touch "$W/go1"
	wait_until 30 "top's second screen" grow_first
	tm send-keys -t top C-c
	wait_until 30 "top to end on Ctrl-C" test -s "$W/top2.done"
	assert_eq "rc=0 stty=yes" "$(cat "$W/top2.done")" "Ctrl-C: exit status 0, terminal modes restored"
	wait_until 5 "the shell's line after top" on_screen '^after top 2'
	! on_screen '^heapprof top - pid' || t_fail "top's screen left behind after Ctrl-C"
	assert_eq "" "$(pgrep -f "record -p $GPID -o")" "top's record ended after Ctrl-C"
	no_tmp_left
	touch "$W/go2"
	tm kill-server 2>/dev/null
elif [ -n "$GPID" ]; then
	t_skip "tmux is missing"
fi

t_begin "top: the target exits: said, exit status 0, its session ended"
if [ -n "$GPID" ]; then
	"$HP" top -p "$GPID" -d 0.2 --iterations 1000 >"$T_DIR/x1.out" \
		2>"$T_DIR/x1.err" </dev/null &
	TOPPID=$!
	TPIDS="$TPIDS $TOPPID"
	wait_until 30 "top's first refresh" grep -qs '^heapprof top - pid' "$T_DIR/x1.out"
	kill -TERM "$GPID"
	wait_pid_bounded 30 "$TOPPID"
	assert_eq 0 "$WAIT_RC" "top's status: $(head -c 300 "$T_DIR/x1.err")"
	assert_eq "heapprof top: pid $GPID ($TGNAME) exited" "$(tail -n 1 "$T_DIR/x1.out")" \
		"top says the process exited"
	assert_eq "" "$(pgrep -f "record -p $GPID -o")" "top's record ended"
	no_tmp_left
fi

t_begin "top: SIGTERM ends it and its session"
start_grow g2 grow
if [ -n "$GPID" ]; then
	"$HP" top -p "$GPID" -d 0.2 --iterations 1000 >"$T_DIR/t1.out" \
		2>"$T_DIR/t1.err" </dev/null &
	TOPPID=$!
	TPIDS="$TPIDS $TOPPID"
	wait_until 30 "top's first refresh" grep -qs '^heapprof top - pid' "$T_DIR/t1.out"
	kill -TERM "$TOPPID"
	wait_pid_bounded 30 "$TOPPID"
	assert_eq 0 "$WAIT_RC" "top's status after SIGTERM"
	assert_eq "" "$(pgrep -f "record -p $GPID -o")" "top's record ended"
	kill -0 "$GPID" 2>/dev/null || t_fail "top_grow did not survive top's session"
	no_tmp_left
	kill -TERM "$GPID"
	wait_until 30 "top_grow to end" sh -c "! kill -0 $GPID 2>/dev/null"
fi

t_begin "top: errors in one line"
expect_error e1 2 'need -p PID or -n NAME' top
expect_error e2 2 '-p and -n exclude each other' top -p 1 -n x
expect_error e3 2 "invalid -d '0.01'" top -p 1 -d 0.01
# Past the kernel's largest pid: a bad value (issue 31), not a lookup.
expect_error e4 2 "invalid --pid '2147483600': too large" top -p 2147483600
expect_error e6 1 'no process with pid 4194304' top -p 4194304
expect_error e5 1 "no process of yours is named 'no-such-top'" top -n no-such-top

t_summary
