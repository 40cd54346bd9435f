#!/usr/bin/env bash
# test_attach.sh BUILD: `heapprof record -p/-n` of processes that never
# loaded libheapprof (issue 21): the collector injects the client and the
# client routes the process's GOT/PLT slots to its hooks.
#
# Every target is started bare (no LD_PRELOAD anywhere), under a private
# XDG_RUNTIME_DIR: no daemon is found unless a case starts one.
#
# progs/attach_phase (exact numbers derived in its comment):
#   ph_malloc    30 30000 20 20000
#   ph_calloc    12 12000 0 0
#   ph_realloc   5 1500 1 500
#   ph_memalign  6 12288 4 8192
#   dlib_alloc   8 35552 8 35552    (with LIB: libsrc/dlib.c, dlopened
#                                    after the attach)
#   pre_alloc    before the attach, 6 of 8 freed in the phase: no rows
#   ch_child     4 20000 3 15000   (with ATTACH_PHASE_FORK: the forked
#                                    child's, --follow-fork)
# progs/api_attach (linked with libheapprof): pool_take 10 640 7 448 in
#   attach.pool, api_malloc 1 100 1 100.
# progs/attach_cxx: cx_new_obj() 16 1536 10 960, cx_new_arr() 5 5000 0 0,
#   cx_nothrow() 4 1200 3 900, cx_aligned() 3 384 2 256.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/attach_phase" "$PROGS/attach_cxx" \
	"$PROGS/inject_target" "$PROGS/api_attach"
. "$HERE/session_helpers.sh"
unset LD_PRELOAD

PHASE_EXPECT="ph_malloc 30 30000 20 20000
ph_calloc 12 12000 0 0
ph_realloc 5 1500 1 500
ph_memalign 6 12288 4 8192"
# The phase's totals over every row: 30+12+5+6 = 53 allocations,
# 30000+12000+1500+12288 = 55788 B; live 20+0+1+4 = 25, 28692 B.
PHASE_TOTAL="53 55788 25 28692"
CXX_EXPECT="cx_new_obj() 16 1536 10 960
cx_new_arr() 5 5000 0 0
cx_nothrow() 4 1200 3 900
cx_aligned() 3 384 2 256"
PROFILING_RE="profiling \(attached in [0-9.]+ ms, stopped [0-9.]+ ms; client loaded; [0-9]+ slots in [0-9]+ objects routed\)"

# start_prog TAG PROG [ARGS...]: PROG (attach_phase or attach_cxx) bare in
# the background, stdout in $W/TAG.pout; TPID once it printed "ready".
start_prog() {
	local tag=$1
	shift
	"$@" >"$W/$tag.pout" 2>"$W/$tag.perr" &
	TPID=$!
	TPIDS="$TPIDS $TPID"
	wait_until 20 "ready from $tag" grep_q "$W/$tag.pout" ": ready$"
}
# phase_go TAG: the first SIGUSR1; waits for "phase done".
phase_go() {
	kill -USR1 "$TPID"
	wait_until 20 "phase done from $1" grep_q "$W/$1.pout" ": phase done$"
}
# phase_end TAG: the second SIGUSR1; waits for the exit; TRC.
phase_end() {
	kill -USR1 "$TPID"
	wait_child 20 "$TPID"
	TRC=$WAIT_RC
}
# bare_phase TAG PROG [ARGS...]: a whole run without the profiler.
bare_phase() {
	local tag=$1
	shift
	start_prog "$tag" "$@"
	phase_go "$tag"
	phase_end "$tag"
	BARE_TRC=$TRC
}
# same_as_bare TAG BARETAG: the attached run's status and stdout.
same_as_bare() {
	assert_eq "$BARE_TRC" "$TRC" "$1: exit status as in a bare run"
	assert_eq "$(cat "$W/$2.pout")" "$(cat "$W/$1.pout")" "$1: stdout as in a bare run"
	assert_eq "" "$(cat "$W/$1.perr")" "$1: nothing on the program's stderr"
}
# check_expect DB "FUNC AO AS O S" lines
check_expect() {
	local fn ao as o s
	while read -r fn ao as o s; do
		[ -n "$fn" ] && check_views "$1" "$fn" "$ao" "$as" "$o" "$s"
	done <<<"$2"
}
# check_report_views TAG DB "FUNC AO AS O S" lines: heapprof report, each view.
check_report_views() {
	local tag=$1 db=$2 view rep rc col fn ao as o s val
	for view in alloc_objects alloc_space objects space; do
		rep="$T_DIR/$tag.report.$view"
		rc=0
		run_bounded 60 "$HP" report "$db" --view "$view" --top 100 >"$rep" 2>"$rep.err" || rc=$?
		if [ "$rc" != 0 ]; then
			t_fail "$tag: heapprof report --view $view: exit $rc: $(head -c 300 "$rep.err")"
			continue
		fi
		case $view in
		alloc_objects) col=2 ;; alloc_space) col=3 ;; objects) col=4 ;; space) col=5 ;;
		esac
		while read -r fn ao as o s; do
			[ -n "$fn" ] || continue
			val=$(echo "$fn $ao $as $o $s" | cut -d' ' -f"$col")
			[ "$val" = 0 ] && continue
			check_report "$tag: report --view $view" "$rep" self "$fn" "$val"
		done <<<"$3"
	done
}
# nothing_negative TAG DB: no callsite (per process) sums to a negative
# count or size, and the program's pre-attach function has no rows.
nothing_negative() {
	assert_eq 0 "$(q "$2" "SELECT count(*) FROM (SELECT sum(count) c, sum(size) s
	  FROM heap_profile_allocation GROUP BY upid, callsite_id) WHERE c < 0 OR s < 0;")" \
		"$1: callsites with negative sums"
}
total_views() {
	q "$1" "SELECT $VIEWS_SQL FROM heap_profile_allocation a;"
}
# rec_pid: the heapprof record under start_record's timeout (RPID).
rec_pid() { pgrep -x heapprof -P "$RPID" | head -n 1; }
# dumps_ge DB N: DB has N dumps or more (sqlite3 may see no table yet).
dumps_ge() {
	[ "$(sqlite3 -readonly "$1" "SELECT count(*) FROM heapprof_dump;" 2>/dev/null || echo 0)" -ge "$2" ]
}
no_file() { # TAG FILE
	assert_eq no "$([ -e "$2" ] && echo yes || echo no)" "$1: no profile file $2"
}

bare_phase bare "$PROGS/attach_phase"

# ---------------------------------------------------------------------------
t_begin "record -p -i 1 of a bare process in sigsuspend: the phase exact, blocks from before the attach nowhere, runs on as bare"
start_prog a1 "$PROGS/attach_phase"
start_record a1 -p "$TPID" -i 1 -o "$T_DIR/a1.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/a1.err" "pid $TPID \(attach_phase\): profiling"; then
	assert_match "^heapprof: record: pid $TPID \(attach_phase\): $PROFILING_RE$" \
		"$(head -n 1 "$T_DIR/a1.err")" "the profiling line"
	assert_match "libheapprof" "$(grep libheapprof "/proc/$TPID/maps" | head -n 1)" "the client is mapped now"
	phase_go a1
fi
kill -INT "$RPID"
wait_record a1
assert_eq 0 "$REC_RC" "record exit status after SIGINT"
assert_eq 1 "$(grep -c "profiling" "$T_DIR/a1.err")" "one profiling line"
# The program runs on (idle hooks) after the session, then exits as bare.
assert_eq yes "$(kill -0 "$TPID" 2>/dev/null && echo yes)" "the program runs on after the session"
phase_end a1
same_as_bare a1 bare
if db_valid "$T_DIR/a1.db"; then
	check_expect "$T_DIR/a1.db" "$PHASE_EXPECT"
	check_report_views a1 "$T_DIR/a1.db" "$PHASE_EXPECT"
	assert_eq 0 "$(leaf_rows "$T_DIR/a1.db" pre_alloc)" "pre_alloc rows"
	nothing_negative a1 "$T_DIR/a1.db"
	assert_eq "$PHASE_TOTAL" "$(total_views "$T_DIR/a1.db")" \
		"every row of the profile is the phase's (nothing from before the attach)"
	assert_eq "$TPID|attach_phase|pid|0" "$(q "$T_DIR/a1.db" "SELECT p.pid, p.name, h.how, h.from_startup
	  FROM process p JOIN heapprof_process h USING(upid);")" "process row"
fi

# ---------------------------------------------------------------------------
t_begin "attached again: a second session of the same process (client already loaded)"
start_prog a2 "$PROGS/attach_phase"
hp_record a2a -p "$TPID" -d 0.3 -i 1 -o "$T_DIR/a2a.db"
assert_eq 0 "$REC_RC" "first session's exit status"
start_record a2 -p "$TPID" -i 1 -o "$T_DIR/a2.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/a2.err" "pid $TPID \(attach_phase\): profiling"; then
	assert_no_match "client loaded" "$(cat "$T_DIR/a2.err")" "the client is not loaded twice"
	assert_eq 1 "$(grep -c 'r-xp.*libheapprof' "/proc/$TPID/maps")" "one client mapped"
	phase_go a2
fi
kill -INT "$RPID"
wait_record a2
assert_eq 0 "$REC_RC" "second session's exit status"
phase_end a2
same_as_bare a2 bare
check_expect "$T_DIR/a2.db" "$PHASE_EXPECT"
assert_eq "$PHASE_TOTAL" "$(total_views "$T_DIR/a2.db")" "the second profile: the phase only"
assert_eq "0 0 0 0" "$(total_views "$T_DIR/a2a.db")" "the first profile: nothing (the program waited)"

# ---------------------------------------------------------------------------
t_begin "--follow-fork: a child the attached process forks has its own exact row (forked), the parent's rows are the phase's"
start_prog ff env ATTACH_PHASE_FORK=1 "$PROGS/attach_phase"
start_record ff -p "$TPID" -i 1 --follow-fork -o "$T_DIR/ff.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/ff.err" "pid $TPID \(attach_phase\): profiling"; then
	phase_go ff
fi
kill -INT "$RPID"
wait_record ff
assert_eq 0 "$REC_RC" "record exit status"
phase_end ff
same_as_bare ff bare
if db_valid "$T_DIR/ff.db"; then
	check_expect "$T_DIR/ff.db" "$PHASE_EXPECT"
	check_views "$T_DIR/ff.db" ch_child 4 20000 3 15000
	assert_eq "pid|0
fork|1" "$(q "$T_DIR/ff.db" "SELECT h.how, h.ppid = $TPID FROM heapprof_process h ORDER BY upid;")" \
		"the attached process, then its child (forked, its parent the attached one)"
	assert_eq 0 "$(q "$T_DIR/ff.db" "SELECT count(*) FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  JOIN process p ON a.upid = p.upid WHERE f.name = 'ch_child' AND p.pid = $TPID;")" \
		"nothing of the child's in the parent's rows"
fi

# ---------------------------------------------------------------------------
t_begin "a program linked with the custom allocator API, no collector at its start: record -p without a daemon, its heap exact"
start_prog ap "$PROGS/api_attach"
start_record ap -p "$TPID" -i 1 --all-heaps -o "$T_DIR/ap.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/ap.err" "pid $TPID \(api_attach\): profiling"; then
	assert_match "profiling \(attached in [0-9.]+ ms, stopped [0-9.]+ ms\)$" "$(head -n 1 "$T_DIR/ap.err")" \
		"the library it linked is used: nothing loaded, nothing routed"
	kill -USR1 "$TPID"
	wait_until 20 "phase done" grep_q "$W/ap.pout" ": phase done$"
fi
kill -INT "$RPID"
wait_record ap
assert_eq 0 "$REC_RC" "record exit status"
kill -USR1 "$TPID"
wait_child 20 "$TPID"
assert_eq 0 "$WAIT_RC" "the program's exit status"
if db_valid "$T_DIR/ap.db"; then
	check_views "$T_DIR/ap.db" pool_take 10 640 7 448
	check_views "$T_DIR/ap.db" api_malloc 1 100 1 100
	assert_eq "attach.pool" "$(q "$T_DIR/ap.db" "SELECT DISTINCT a.heap_name FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id WHERE f.name = 'pool_take';")" "pool_take's heap"
fi

# ---------------------------------------------------------------------------
t_begin "an attached process that exits ends the session by itself: exact to its end, disconnected"
start_prog ex "$PROGS/attach_phase"
start_record ex -p "$TPID" -i 1 -o "$T_DIR/ex.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/ex.err" "pid $TPID \(attach_phase\): profiling"; then
	phase_go ex
	phase_end ex
	same_as_bare ex bare
fi
wait_record ex
assert_eq 0 "$REC_RC" "record exit status"
if db_valid "$T_DIR/ex.db"; then
	# At its end the program freed everything it still held: the phase's
	# live blocks are gone (-1 rows), and it made 100 more blocks of 64..163
	# B in main, all freed: 100, 64*100 + 99*100/2 = 11350; 0, 0.  The two
	# pre_alloc blocks left and the 6 freed in the phase: nowhere.
	check_views "$T_DIR/ex.db" ph_malloc 30 30000 0 0
	check_views "$T_DIR/ex.db" ph_memalign 6 12288 0 0
	check_views "$T_DIR/ex.db" ph_realloc 5 1500 0 0
	check_views "$T_DIR/ex.db" main 100 11350 0 0
	assert_eq 0 "$(leaf_rows "$T_DIR/ex.db" pre_alloc)" "pre_alloc rows"
	nothing_negative ex "$T_DIR/ex.db"
	assert_eq "1|peak
1|disconnect" "$(q "$T_DIR/ex.db" "SELECT h.disconnected, d.reason FROM heapprof_process h
	  JOIN heapprof_dump d USING(upid) ORDER BY d.ts, d.id;")" "disconnected, its peak and one last dump"
fi

# ---------------------------------------------------------------------------
t_begin "record -n NAME: two bare processes of that name, each attached, each its own exact row"
ln -s "$PROGS/attach_phase" "$W/hpattach2"
start_prog n1 "$W/hpattach2"
N1=$TPID
start_prog n2 "$W/hpattach2"
N2=$TPID
start_record nn -n hpattach2 -i 1 -o "$T_DIR/nn.db"
if wait_until 20 "two profiling lines" count_is "$T_DIR/nn.err" "\(hpattach2\): profiling" 2; then
	assert_match "pid $N1 \(hpattach2\): $PROFILING_RE" "$(cat "$T_DIR/nn.err")" "the first one"
	assert_match "pid $N2 \(hpattach2\): $PROFILING_RE" "$(cat "$T_DIR/nn.err")" "the second one"
	TPID=$N1 phase_go n1
	TPID=$N2 phase_go n2
fi
kill -INT "$RPID"
wait_record nn
assert_eq 0 "$REC_RC" "record exit status"
TPID=$N1 phase_end n1
same_as_bare n1 bare
TPID=$N2 phase_end n2
same_as_bare n2 bare
if db_valid "$T_DIR/nn.db"; then
	assert_eq "$N1 $N2 " "$(q "$T_DIR/nn.db" "SELECT p.pid FROM process p JOIN heapprof_process h USING(upid)
	  WHERE h.how = 'name' ORDER BY p.pid;" | tr '\n' ' ')" "a row for each, how = name"
	for u in $(q "$T_DIR/nn.db" "SELECT upid FROM process;"); do
		assert_eq "$PHASE_TOTAL" "$(q "$T_DIR/nn.db" "SELECT $VIEWS_SQL FROM heap_profile_allocation a WHERE a.upid = $u;")" \
			"process $u: the phase exactly"
	done
fi

# ---------------------------------------------------------------------------
t_begin "a 4-thread malloc/free storm attached and detached 5 times: the bare checksum, samples in each profile"
mkfifo "$W/storm.bare.in" "$W/storm.in"
"$PROGS/inject_target" storm <"$W/storm.bare.in" >"$W/storm.bare.out" 2>"$W/storm.bare.err" &
SBPID=$!
exec {SBFD}>"$W/storm.bare.in"
wait_until 30 "bare storm ready" grep_q "$W/storm.bare.err" "^ready$"
printf x >&"$SBFD"
exec {SBFD}>&-
wait_child 60 "$SBPID"
SB_RC=$WAIT_RC
"$PROGS/inject_target" storm <"$W/storm.in" >"$W/storm.out" 2>"$W/storm.err" &
TPID=$!
TPIDS="$TPIDS $TPID"
exec {SFD}>"$W/storm.in"
if wait_until 30 "storm ready" grep_q "$W/storm.err" "^ready$"; then
	for k in 1 2 3 4 5; do
		start_record st$k -p "$TPID" -o "$T_DIR/st$k.db"
		wait_until 30 "profiling line of session $k" grep_q "$T_DIR/st$k.err" "pid $TPID \(inject_target\): profiling"
		# A dump asked for (SIGUSR1 to record) before the end: the storm
		# ran under the hooks meanwhile.
		kill -USR1 "$(rec_pid)"
		wait_until 30 "a dump in session $k" dumps_ge "$T_DIR/st$k.db" 1
		if [ "$k" = 1 ]; then
			# Multi-threaded: the kept region descriptor sits at the
			# top of its table (client.c, keep_min_injected);
			# snapshot -p still finds it through /proc/PID/fd.
			rc=0
			run_bounded 60 "$HP" snapshot -p "$TPID" -o "$T_DIR/stsnap.db" \
				>"$T_DIR/stsnap.out" 2>"$T_DIR/stsnap.err" || rc=$?
			assert_eq 0 "$rc" "snapshot -p of the storm: $(head -c 300 "$T_DIR/stsnap.err")"
			assert_match "^snapshot of pid $TPID \(inject_target\): [0-9]+ blocks" \
				"$(cat "$T_DIR/stsnap.out" "$T_DIR/stsnap.err")" "snapshot -p of the storm: its line"
		fi
		kill -INT "$RPID"
		wait_record st$k
		assert_eq 0 "$REC_RC" "session $k exit status"
		assert_ge "$(q "$T_DIR/st$k.db" "SELECT count(*) FROM heap_profile_allocation;")" 1 \
			"session $k: samples"
		assert_eq yes "$(kill -0 "$TPID" 2>/dev/null && echo yes)" "the storm runs on after session $k"
	done
	t_note "storm sessions: $(grep -ho 'attached in [0-9.]* ms, stopped [0-9.]* ms' "$T_DIR"/st[1-5].err | tr '\n' ';')"
fi
printf x >&"$SFD"
exec {SFD}>&-
wait_child 60 "$TPID"
assert_eq "$SB_RC" "$WAIT_RC" "storm exit status as bare"
assert_eq "$(cat "$W/storm.bare.out")" "$(cat "$W/storm.out")" "storm checksum as bare"

# ---------------------------------------------------------------------------
t_begin "Debian's bash waiting for its child (wait4), attached by pid: its allocations after the wait, named frames; its output as bare"
# A shell blocked in wait4 keeps stale words on its stack (an old return
# address into free, an old signal frame's __restore_rt): the unwind sees
# its real frames only (inject.c, unwind_check).
BASH_SCRIPT='a=""; for i in $(seq 1 50); do a="$a$i"; done; cat "$1" >/dev/null; for i in $(seq 1 2000); do b[$i]="value-$i-$a"; done; echo "bash: ${#b[@]} ${#a}"'
mkfifo "$W/bash.bare.in" "$W/bash.in"
bash -c "$BASH_SCRIPT" bash "$W/bash.bare.in" >"$W/bash.bare.out" 2>&1 &
BBPID=$!
echo go >"$W/bash.bare.in"
wait_child 30 "$BBPID"
BB_RC=$WAIT_RC
bash -c "$BASH_SCRIPT" bash "$W/bash.in" >"$W/bash.out" 2>&1 &
TPID=$!
TPIDS="$TPIDS $TPID"
# bash in wait4 (system call 61) for its cat, which waits for the FIFO.
in_wait4() { [ "$(cut -d' ' -f1 "/proc/$TPID/syscall" 2>/dev/null)" = 61 ]; }
wait_until 30 "bash waiting for its child" in_wait4
start_record bs -p "$TPID" -i 1 -o "$T_DIR/bs.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/bs.err" "pid $TPID \(bash\): profiling"; then
	assert_match "pid $TPID \(bash\): $PROFILING_RE" "$(cat "$T_DIR/bs.err")" "the profiling line"
	echo go >"$W/bash.in"
fi
wait_record bs
assert_eq 0 "$REC_RC" "record exit status (the shell's exit ends it)"
wait_child 30 "$TPID"
assert_eq "$BB_RC" "$WAIT_RC" "bash's exit status as bare"
assert_eq "$(cat "$W/bash.bare.out")" "$(cat "$W/bash.out")" "bash's output as bare"
if db_valid "$T_DIR/bs.db"; then
	# 2000 array elements of bash's own (each a malloc in its code):
	# at least that many allocations, under named frames of bash's.
	assert_ge "$(total_views "$T_DIR/bs.db" | cut -d' ' -f1)" 2000 "bash's allocations after the wait"
	n=$(q "$T_DIR/bs.db" "SELECT count(DISTINCT f.name) FROM stack_profile_frame f
	  WHERE f.name IN ('xmalloc', 'sh_xmalloc', 'array_insert', 'assign_array_element', 'execute_command');")
	assert_ge "$n" 1 "named frames of bash's"
fi

# ---------------------------------------------------------------------------
t_begin "Debian's python3, started bare, attached by name: its allocations with named frames"
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
	t_skip "no $PY"
else
	ln -s "$PY" "$W/hpattachpy"
	mkdir -p "$W/py"
	cat >"$W/py.py" <<'EOF'
import os, sys, time
d = sys.argv[1]
def wait(name):
    while not os.path.exists(os.path.join(d, name)):
        time.sleep(0.01)
open(os.path.join(d, "ready"), "w").close()
wait("go")
def py_alloc():
    return [bytearray(100000) for i in range(300)]
keep = py_alloc()
open(os.path.join(d, "allocated"), "w").close()
wait("exit")
print("py: done", len(keep), sum(len(b) for b in keep))
EOF
	"$W/hpattachpy" "$W/py.py" "$W/py" >"$W/py.pout" 2>"$W/py.perr" &
	TPID=$!
	TPIDS="$TPIDS $TPID"
	wait_until 30 "python ready" test -e "$W/py/ready"
	start_record py -n hpattachpy -i 65536 -o "$T_DIR/py.db"
	if wait_until 20 "profiling line" grep_q "$T_DIR/py.err" "pid $TPID \(hpattachpy\): profiling"; then
		assert_match "pid $TPID \(hpattachpy\): $PROFILING_RE" "$(cat "$T_DIR/py.err")" "the profiling line"
		: >"$W/py/go"
		wait_until 30 "python's allocations" test -e "$W/py/allocated"
	fi
	kill -INT "$RPID"
	wait_record py
	assert_eq 0 "$REC_RC" "record exit status"
	: >"$W/py/exit"
	wait_child 30 "$TPID"
	assert_eq 0 "$WAIT_RC" "python's exit status"
	assert_eq "py: done 300 30000000" "$(cat "$W/py.pout")" "python's output"
	if db_valid "$T_DIR/py.db"; then
		# bytearray(100000) is a malloc(100001): 300 of them live,
		# 30,000,300 B, each larger than the 64 KiB interval and so
		# recorded at its size: exactly that under PyByteArray_Resize (a
		# named frame of python3's .dynsym), called from Py_BytesMain down.
		# The rest of python's live heap is sampled: only more.
		sp=$(total_views "$T_DIR/py.db" | cut -d' ' -f4)
		assert_ge "$sp" 30000300 "python's live space"
		assert_eq 30000300 "$(incl_views "$T_DIR/py.db" PyByteArray_Resize | cut -d' ' -f4)" \
			"python's live space under PyByteArray_Resize"
		assert_ge "$(incl_views "$T_DIR/py.db" Py_BytesMain | cut -d' ' -f4)" 30000300 \
			"python's live space under Py_BytesMain"
		n=$(q "$T_DIR/py.db" "SELECT count(DISTINCT f.name) FROM stack_profile_frame f
		  WHERE f.name LIKE 'Py%' OR f.name LIKE '_Py%';")
		assert_ge "$n" 5 "named frames of python3 (Py*)"
		t_note "python3: $n named Py* frames; live $sp B"
	fi
fi

# ---------------------------------------------------------------------------
t_begin "redis-server, started bare, attached by name, fed large SETs: allocations with named frames, PONG after"
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null ||
	! command -v redis-benchmark >/dev/null; then
	t_skip "redis-server, redis-cli or redis-benchmark not installed"
else
	ln -s "$(command -v redis-server)" "$W/hpattachredis"
	RPORT=$((20000 + RANDOM % 20000))
	"$W/hpattachredis" --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$W" >"$W/redis.pout" 2>&1 &
	TPID=$!
	TPIDS="$TPIDS $TPID"
	rping() { [ "$(timeout 5 redis-cli -p "$RPORT" ping 2>/dev/null)" = PONG ]; }
	wait_until 30 "redis PONG" rping || t_note "redis said: $(tail -n 3 "$W/redis.pout" | tr '\n' '|')"
	start_record rd -n hpattachredis -i 65536 -o "$T_DIR/rd.db"
	if wait_until 20 "profiling line" grep_q "$T_DIR/rd.err" "pid $TPID \(hpattachredis\): profiling"; then
		run_bounded 60 redis-benchmark -p "$RPORT" -t set -n 400 -d 100000 -r 1000 -q \
			>"$T_DIR/rd.bench" 2>&1 || t_fail "redis-benchmark: $(head -c 300 "$T_DIR/rd.bench")"
	fi
	kill -INT "$RPID"
	wait_record rd
	assert_eq 0 "$REC_RC" "record exit status"
	assert_eq yes "$(rping && echo yes)" "redis answers PING after the session"
	run_bounded 30 redis-benchmark -p "$RPORT" -t set -n 100 -d 100000 -r 1000 -q >/dev/null 2>&1 ||
		t_fail "redis-benchmark after the session"
	assert_eq yes "$(rping && echo yes)" "redis answers PING after more SETs"
	if db_valid "$T_DIR/rd.db"; then
		ao=$(total_views "$T_DIR/rd.db" | cut -d' ' -f2)
		# 400 SETs of 100,000 B: at least 40,000,000 B through malloc.
		assert_ge "$ao" 30000000 "redis alloc_space"
		nz=$(q "$T_DIR/rd.db" "SELECT count(DISTINCT f.name) FROM heap_profile_allocation a
		  JOIN stack_profile_callsite c ON a.callsite_id = c.id
		  JOIN stack_profile_frame f ON c.frame_id = f.id WHERE f.name LIKE '%malloc%';")
		assert_ge "$nz" 1 "leaf frames named like zmalloc"
		t_note "redis: alloc_space $ao B; leaves: $(q "$T_DIR/rd.db" "SELECT group_concat(DISTINCT f.name) FROM heap_profile_allocation a
		  JOIN stack_profile_callsite c ON a.callsite_id = c.id
		  JOIN stack_profile_frame f ON c.frame_id = f.id;" | head -c 200)"
	fi
	timeout 10 redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1
	wait_child 20 "$TPID"
fi

# ---------------------------------------------------------------------------
# Refusals: exit 1, exactly one stderr line with the reason, no profile,
# the process untouched (inject_target blocked in read: its line when a
# byte comes is the bare one).
# start_reader TAG PROG ARGS...: PROG blocked in read on a FIFO; TPID, RFD.
start_reader() {
	local tag=$1
	shift
	mkfifo "$W/$tag.in"
	"$@" <"$W/$tag.in" >"$W/$tag.pout" 2>"$W/$tag.perr" &
	TPID=$!
	TPIDS="$TPIDS $TPID"
	exec {RFD}>"$W/$tag.in"
	wait_until 20 "ready from $tag" grep_q "$W/$tag.perr" "^ready$"
}
# end_reader TAG WANT: a byte; its line must be WANT; exit status 0.
end_reader() {
	printf x >&"$RFD"
	exec {RFD}>&-
	wait_child 20 "$TPID"
	assert_eq 0 "$WAIT_RC" "$1: exit status as bare"
	assert_eq "$2" "$(cat "$W/$1.pout")" "$1: its output as bare"
}
# refused TAG REGEX [PREFIX...]: record -p TPID refused for REGEX.
refused() {
	local tag=$1 re=$2
	shift 2
	REC_RC=0
	run_bounded 60 "$@" "$HP" record -p "$TPID" -o "$RDIR/$tag.db" \
		>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" || REC_RC=$?
	assert_eq 1 "$REC_RC" "$tag: exit status"
	assert_eq 1 "$(wc -l <"$T_DIR/$tag.err" | tr -d ' ')" "$tag: one stderr line: $(head -c 400 "$T_DIR/$tag.err")"
	assert_match "^heapprof: record: pid $TPID \([^)]*\): not profiled: .*$re" \
		"$(head -n 1 "$T_DIR/$tag.err")" "$tag: the reason"
	no_file "$tag" "$RDIR/$tag.db"
	assert_eq yes "$(kill -0 "$TPID" 2>/dev/null && echo yes)" "$tag: still running"
	assert_eq 0 "$(awk '/^TracerPid:/ { print $2 }' "/proc/$TPID/status")" "$tag: not traced after"
	assert_no_match "libheapprof" "$(cat "/proc/$TPID/maps")" "$tag: nothing loaded"
}
RDIR="$T_DIR/refusals"
mkdir -p "$RDIR"
chmod 1777 "$RDIR" "$T_DIR"
READ_LINE="read: ret=1 errno=- byte=x"

t_begin "refused: a process of another user (record as nobody, target root's)"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	t_skip "needs root and setpriv"
else
	start_reader ou "$PROGS/inject_target" read
	# A directory nobody can reach (the harness's temporary directory is
	# root's own, 0700), with nobody's own runtime directory in it: no
	# daemon there either.
	SAVED_RDIR=$RDIR
	RDIR=$(mktemp -d /tmp/hpattach-nobody.XXXXXX)
	chmod 755 "$RDIR"
	mkdir -m 700 "$RDIR/xdg-nobody"
	chown 65534:65534 "$RDIR/xdg-nobody" "$RDIR"
	refused ou "runs as uid 0 and we are uid 65534" \
		env XDG_RUNTIME_DIR="$RDIR/xdg-nobody" setpriv --reuid=65534 --regid=65534 --clear-groups
	end_reader ou "$READ_LINE"
	rm -rf "$RDIR"
	RDIR=$SAVED_RDIR
fi

t_begin "refused: a process already traced (strace -p)"
start_reader tr "$PROGS/inject_target" read
if command -v strace >/dev/null; then
	strace -p "$TPID" -o /dev/null 2>/dev/null &
	STPID=$!
else
	t_fail "no strace"
	STPID=""
fi
traced() { [ "$(awk '/^TracerPid:/ { print $2 }' "/proc/$TPID/status")" != 0 ]; }
if [ -n "$STPID" ] && wait_until 20 "strace attached" traced; then
	REC_RC=0
	run_bounded 60 "$HP" record -p "$TPID" -o "$RDIR/tr.db" >"$T_DIR/tr.out" 2>"$T_DIR/tr.err" || REC_RC=$?
	assert_eq 1 "$REC_RC" "exit status"
	assert_eq 1 "$(wc -l <"$T_DIR/tr.err" | tr -d ' ')" "one stderr line: $(head -c 400 "$T_DIR/tr.err")"
	assert_match "^heapprof: record: pid $TPID \(inject_target\): not profiled: .*already traced by $STPID" \
		"$(head -n 1 "$T_DIR/tr.err")" "the reason"
	no_file tr "$RDIR/tr.db"
	assert_eq "$STPID" "$(awk '/^TracerPid:/ { print $2 }' "/proc/$TPID/status")" "still traced by strace only"
	kill -INT "$STPID"
	wait_child 20 "$STPID"
fi
end_reader tr "$READ_LINE"

t_begin "refused: a static binary"
if [ -x "$PROGS/inject_static" ]; then
	start_reader sta "$PROGS/inject_static" read
	refused sta "statically linked"
	end_reader sta "$READ_LINE"
else
	# The toolchain cannot link libc statically here: a static program
	# without libc (raw system calls) is static all the same.
	cat >"$W/nolibc.c" <<'EOF'
static long sys3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c)
	                 : "rcx", "r11", "memory");
	return r;
}
__attribute__((force_align_arg_pointer)) void _start(void)
{
	char c = '-';
	char msg[] = "read: byte=?\n";
	sys3(1, 2, (long)"ready\n", 6);
	while (sys3(0, 0, (long)&c, 1) == -4) /* EINTR */
		;
	msg[11] = c;
	sys3(1, 1, (long)msg, sizeof(msg) - 1);
	sys3(60, 0, 0, 0);
	for (;;)
		;
}
EOF
	if gcc -static -nostdlib -O1 -fno-stack-protector -o "$W/hpnolibc" "$W/nolibc.c" 2>"$T_DIR/nolibc.cc.err"; then
		start_reader sta "$W/hpnolibc"
		refused sta "statically linked"
		end_reader sta "read: byte=x"
	else
		t_skip "cannot link a static program: $(head -c 200 "$T_DIR/nolibc.cc.err")"
	fi
fi

t_begin "refused: a process in another mount namespace where the library is not reachable"
start_reader mn "$PROGS/inject_target" mntns "$BUILD"
sleep_ok=1
if ! kill -0 "$TPID" 2>/dev/null; then
	t_skip "cannot make a mount namespace here"
	sleep_ok=0
fi
if [ "$sleep_ok" = 1 ]; then
	refused mn "not reachable from $TPID \(its own mount namespace\)"
	end_reader mn "mntns: ret=1 errno=- byte=x"
fi

t_begin "refused: a process with a seccomp filter"
start_reader sc "$PROGS/inject_target" seccomp
refused sc "seccomp"
end_reader sc "seccomp: ret=1 errno=- byte=x"

t_begin "refused: a 32-bit process"
if echo 'int main(void){return 0;}' | gcc -m32 -x c -o "$W/m32" - 2>/dev/null; then
	cat >"$W/m32.c" <<'EOF'
#include <stdio.h>
#include <unistd.h>
int main(void)
{
	char c = '-';
	fprintf(stderr, "ready\n");
	ssize_t r = read(0, &c, 1);
	printf("read: ret=%d byte=%c\n", (int)r, c);
	return 0;
}
EOF
	gcc -m32 -o "$W/m32" "$W/m32.c"
	start_reader m32 "$W/m32"
	refused m32 "32-bit"
	end_reader m32 "read: ret=1 byte=x"
else
	t_skip "gcc -m32 cannot link here"
fi

t_begin "refused: a stopped process (SIGSTOP): no thread can be used; after SIGCONT it runs as bare"
start_prog stp "$PROGS/attach_phase"
kill -STOP "$TPID"
stopped() { grep -Eq '^State:[[:space:]]+T' "/proc/$TPID/status"; }
if wait_until 20 "stopped" stopped; then
	refused stp "could be stopped"
	assert_eq yes "$(stopped && echo yes)" "still stopped"
fi
kill -CONT "$TPID"
phase_go stp
phase_end stp
same_as_bare stp bare

t_begin "refused: a pid that does not exist"
sh -c 'exit 0' &
GONE=$!
wait "$GONE"
REC_RC=0
run_bounded 60 "$HP" record -p "$GONE" -o "$RDIR/gone.db" >"$T_DIR/gone.out" 2>"$T_DIR/gone.err" || REC_RC=$?
assert_eq 1 "$REC_RC" "exit status"
assert_eq 1 "$(wc -l <"$T_DIR/gone.err" | tr -d ' ')" "one stderr line: $(head -c 400 "$T_DIR/gone.err")"
assert_match "^heapprof: record: pid $GONE \(\?\): not profiled: " "$(head -n 1 "$T_DIR/gone.err")" "the reason"
no_file gone "$RDIR/gone.db"

# ---------------------------------------------------------------------------
t_begin "differential: the phase attached by pid and preloaded from startup (record -- PROG): equal views"
# The preloaded run is dumped (SIGUSR1 to record) where the attached one
# was: after the phase, before the program frees the rest.
start_record d2 -i 1 -o "$T_DIR/d2.db" -- "$PROGS/attach_phase"
if wait_until 20 "ready from the preloaded program" grep_q "$T_DIR/d2.out" ": ready$"; then
	DPPID=$(pgrep -x attach_phase -P "$(rec_pid)" | head -n 1)
	assert_match "^[0-9]+$" "$DPPID" "the preloaded program's pid"
	assert_match "libheapprof" "$(grep libheapprof "/proc/$DPPID/maps" | head -n 1)" "preloaded"
	kill -USR1 "$DPPID"
	wait_until 20 "phase done" grep_q "$T_DIR/d2.out" ": phase done$"
	kill -USR1 "$(rec_pid)"
	wait_until 30 "the dump SIGUSR1 asked for" dumps_ge "$T_DIR/d2.db" 1
	kill -USR1 "$DPPID"
fi
wait_record d2
assert_eq 0 "$REC_RC" "record -- PROG exit status"
assert_eq "$(cat "$W/bare.pout")" "$(cat "$T_DIR/d2.out")" "preloaded stdout as bare"
D2TS=$(q "$T_DIR/d2.db" "SELECT ts FROM heapprof_dump WHERE reason = 'signal';")
assert_match "^[0-9]+$" "$D2TS" "the preloaded run's dump after the phase"
for fn in ph_malloc ph_calloc ph_realloc ph_memalign; do
	assert_eq "$(leaf_views "$T_DIR/d2.db" "$fn" "$D2TS")" "$(leaf_views "$T_DIR/a1.db" "$fn")" \
		"$fn: preloaded vs attached (alloc_objects alloc_space objects space)"
done
# From startup, pre_alloc is seen too: 8 made, 6 freed in the phase.
check_views "$T_DIR/d2.db" pre_alloc 8 40000 2 10000 "$D2TS"

# ---------------------------------------------------------------------------
t_begin "a library dlopened after the attach, its function found with dlsym: exact"
LIBDLIB="$T_DIR/libdlib.so"
if ! gcc -shared -fPIC -O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls \
	-o "$LIBDLIB" "$HERE/libsrc/dlib.c" 2>"$T_DIR/dlib.cc.err"; then
	t_fail "cannot build libdlib.so: $(head -c 200 "$T_DIR/dlib.cc.err")"
else
	bare_phase dlbare "$PROGS/attach_phase" "$LIBDLIB"
	start_prog dl "$PROGS/attach_phase" "$LIBDLIB"
	start_record dl -p "$TPID" -i 1 -o "$T_DIR/dl.db"
	if wait_until 20 "profiling line" grep_q "$T_DIR/dl.err" "pid $TPID \(attach_phase\): profiling"; then
		phase_go dl
	fi
	kill -INT "$RPID"
	wait_record dl
	assert_eq 0 "$REC_RC" "record exit status"
	phase_end dl
	same_as_bare dl dlbare
	if ! check_views "$T_DIR/dl.db" dlib_alloc 8 35552 8 35552; then
		# Seen once in CI (all four views 0), never here in 80 runs
		# under load: what the profile holds instead, for the note.
		t_note "dlopen: totals $(total_views "$T_DIR/dl.db"); leaves: $(leaf_table "$T_DIR/dl.db" | tr '\n' ';')"
		t_note "dlopen: $(cat "$T_DIR/dl.err" | tr '\n' ';')"
		t_note "dlopen: $("$HP" report "$T_DIR/dl.db" --top 3 2>&1 | grep -i 'skip\|lost\|warn\|not recorded\|full' | tr '\n' ';')"
	fi
	check_expect "$T_DIR/dl.db" "$PHASE_EXPECT"
	for cs in $(leaf_callsites "$T_DIR/dl.db" dlib_alloc); do
		assert_eq "dlib_alloc dlib_middle dlib_entry dl_phase main" \
			"$(stack_of "$T_DIR/dl.db" "$cs" | head -n 5 | tr '\n' ' ' | sed 's/ $//')" \
			"dlib_alloc's stack"
	done
fi

# ---------------------------------------------------------------------------
t_begin "a library dlopened between two sessions (idle hooks): routed at the next attach, its process exact"
if [ -f "$LIBDLIB" ]; then
	start_prog di "$PROGS/attach_phase" "$LIBDLIB"
	hp_record di1 -p "$TPID" -i 1 -d 0.3 -o "$T_DIR/di1.db"
	assert_eq 0 "$REC_RC" "first session's exit status"
	phase_go di # the phase and the dlopen with the hooks idle
	start_record di2 -p "$TPID" -i 1 -o "$T_DIR/di2.db"
	if wait_until 20 "profiling line" grep_q "$T_DIR/di2.err" "pid $TPID \(attach_phase\): profiling"; then
		o1=$(sed -n 's/.*slots in \([0-9]*\) objects routed.*/\1/p' "$T_DIR/di1.err")
		o2=$(sed -n 's/.*slots in \([0-9]*\) objects routed.*/\1/p' "$T_DIR/di2.err")
		assert_eq "$((o1 + 1))" "$o2" "one object more routed (libdlib.so): $(cat "$T_DIR/di1.err" "$T_DIR/di2.err")"
		phase_end di
	fi
	wait_record di2
	assert_eq 0 "$REC_RC" "second session's exit status (ended by the exit)"
	same_as_bare di dlbare
	# In the second session the program frees what it made meanwhile
	# (unseen: no rows) and makes 100 blocks in main, all freed:
	# 100, 64*100 + 99*100/2 = 11350; 0, 0.
	check_views "$T_DIR/di2.db" main 100 11350 0 0
	assert_eq "100 11350 0 0" "$(total_views "$T_DIR/di2.db")" "nothing else in the second profile"
	assert_eq "0 0 0 0" "$(total_views "$T_DIR/di1.db")" "nothing in the first"
fi

# ---------------------------------------------------------------------------
t_begin "C++ operator new/delete in an attached process: exact"
bare_phase cxbare "$PROGS/attach_cxx"
start_prog cx "$PROGS/attach_cxx"
start_record cx -p "$TPID" -i 1 -o "$T_DIR/cx.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/cx.err" "pid $TPID \(attach_cxx\): profiling"; then
	assert_match "pid $TPID \(attach_cxx\): $PROFILING_RE" "$(cat "$T_DIR/cx.err")" "the profiling line"
	phase_go cx
fi
kill -INT "$RPID"
wait_record cx
assert_eq 0 "$REC_RC" "record exit status"
phase_end cx
same_as_bare cx cxbare
if db_valid "$T_DIR/cx.db"; then
	check_expect "$T_DIR/cx.db" "$CXX_EXPECT"
	check_report_views cx "$T_DIR/cx.db" "$CXX_EXPECT"
	assert_eq 0 "$(leaf_rows "$T_DIR/cx.db" "cx_pre()")" "cx_pre() rows"
	nothing_negative cx "$T_DIR/cx.db"
	# 16+5+4+3 = 28 allocations, 1536+5000+1200+384 = 8120 B; live
	# 10+0+3+2 = 15, 960+900+256 = 2116 B.
	assert_eq "28 8120 15 2116" "$(total_views "$T_DIR/cx.db")" "every row is the phase's"
fi

# ---------------------------------------------------------------------------
t_begin "dumps and snapshots of an attached process: --dump-interval, SIGUSR1 to record, heapprof snapshot -p"
start_prog ds "$PROGS/attach_phase"
start_record ds -p "$TPID" -i 1 --dump-interval 200 -o "$T_DIR/ds.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/ds.err" "pid $TPID \(attach_phase\): profiling"; then
	phase_go ds
	periodic() {
		[ "$(sqlite3 -readonly "$T_DIR/ds.db" "SELECT count(*) FROM heapprof_dump WHERE reason = 'periodic';" 2>/dev/null || echo 0)" -ge 3 ]
	}
	wait_until 30 "3 periodic dumps" periodic
	kill -USR1 "$(rec_pid)"
	requested() {
		[ "$(sqlite3 -readonly "$T_DIR/ds.db" "SELECT count(*) FROM heapprof_dump WHERE reason = 'signal';" 2>/dev/null)" = 1 ]
	}
	wait_until 30 "the dump SIGUSR1 asked for" requested
	hp_cmd snap snapshot -p "$TPID" --db "$T_DIR/snap.db" -o "$T_DIR/snap.pb.gz"
	assert_eq 0 "$CMD_RC" "snapshot exit status: $(head -c 300 "$T_DIR/snap.err")"
	assert_match "^snapshot of pid $TPID \(attach_phase\): " "$(cat "$T_DIR/snap.out")" "snapshot summary"
	# The phase's live blocks: ph_malloc 20 x 1000, ph_memalign 4 x 2048,
	# ph_realloc 1 x 500; nothing of pre_alloc (made before the attach).
	assert_eq "ph_malloc|20|20000
ph_memalign|4|8192
ph_realloc|1|500" "$(q "$T_DIR/snap.db" "SELECT f.name, count(*), sum(b.size) FROM heapprof_block b
	  JOIN stack_profile_callsite c ON c.id = b.callsite_id
	  JOIN stack_profile_frame f ON f.id = c.frame_id GROUP BY f.name ORDER BY f.name;")" \
		"the snapshot's blocks per function"
fi
kill -INT "$RPID"
wait_record ds
assert_eq 0 "$REC_RC" "record exit status"
phase_end ds
same_as_bare ds bare
if db_valid "$T_DIR/ds.db"; then
	assert_eq 1 "$(q "$T_DIR/ds.db" "SELECT count(*) FROM heapprof_dump WHERE reason = 'signal';")" "one dump for SIGUSR1"
	assert_eq 1 "$(q "$T_DIR/ds.db" "SELECT count(*) FROM heapprof_dump WHERE reason = 'end';")" "one end dump"
	# Every dump after the phase (SIGUSR1's and the end) is exact.
	for ts in $(q "$T_DIR/ds.db" "SELECT ts FROM heapprof_dump WHERE reason IN ('signal', 'end');"); do
		assert_eq "$PHASE_TOTAL" "$(q "$T_DIR/ds.db" "SELECT $VIEWS_SQL FROM heap_profile_allocation a WHERE a.ts <= $ts;")" \
			"the dump at $ts"
	done
	check_expect "$T_DIR/ds.db" "$PHASE_EXPECT"
fi

# ---------------------------------------------------------------------------
t_begin "with heapprofd running: record -p of a process without the library is attached by injection, exact; heapprof dump and dump -p add a dump; daemon --status lists it"
start_daemon
start_prog hd "$PROGS/attach_phase"
start_record hd -p "$TPID" -i 1 -o "$T_DIR/hd.db"
if wait_until 20 "profiling line" grep_q "$T_DIR/hd.err" "pid $TPID \(attach_phase\): profiling"; then
	assert_match "pid $TPID \(attach_phase\): $PROFILING_RE" "$(cat "$T_DIR/hd.err")" "attached by injection"
	phase_go hd
	run_bounded 30 "$HP" dump >"$T_DIR/hd.dump.out" 2>&1
	assert_eq 0 "$?" "heapprof dump exit status ($(cat "$T_DIR/hd.dump.out"))"
	wait_dumps "$T_DIR/hd.db" 1
	# The session told the daemon about the process it attached itself:
	# dump -p finds it (it said "no session is recording pid N"), and
	# --status lists it as the session's target.
	run_bounded 30 "$HP" dump -p "$TPID" >"$T_DIR/hd.dumpp.out" 2>&1
	assert_eq "0 heapprof: dump: 1 process dumped in 1 session" \
		"$? $(cat "$T_DIR/hd.dumpp.out")" "heapprof dump -p of the attached process"
	wait_dumps "$T_DIR/hd.db" 2
	run_bounded 30 "$HP" daemon --status >"$T_DIR/hd.status" 2>&1
	assert_match "targets: $TPID \(profiled\)" "$(cat "$T_DIR/hd.status")" \
		"daemon --status: the attached process is the session's target"
fi
kill -INT "$RPID"
wait_record hd
assert_eq 0 "$REC_RC" "record exit status"
phase_end hd
same_as_bare hd bare
if db_valid "$T_DIR/hd.db"; then
	assert_eq "peak request request end" "$(q "$T_DIR/hd.db" "SELECT reason FROM heapprof_dump ORDER BY ts, id;" | tr '\n' ' ' | sed 's/ $//')" \
		"dump reasons: the peak (reached in the phase) before the first request"
	check_expect "$T_DIR/hd.db" "$PHASE_EXPECT"
	assert_eq "$PHASE_TOTAL" "$(total_views "$T_DIR/hd.db")" "every row is the phase's"
fi
daemon_gone TERM

t_summary
