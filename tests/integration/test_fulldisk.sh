#!/usr/bin/env bash
# test_fulldisk.sh BUILD: a full disk costs the profile, never the program
# (issue 31, deliverable 7).  The profile goes to a small tmpfs mounted
# here ($FULL), filled with dd from the test:
#   - full before `record -- CMD` starts (no room at all, and 8, 32 and
#     128 KiB left): the command runs as bare (output, status, files,
#     nothing of heapprof in its environment or its memory); one line
#     "heapprof: no profile: FULL/p.db: No space left on device; ... runs
#     unprofiled"; record's status is the command's, or 1 for a command
#     that exited 0 (as for any profile not written whole); nothing left
#     in FULL (no p.db, -wal, -shm, -journal);
#   - the same under `ulimit -f` below a new profile (no mount needed);
#   - full before `record -p PID`: one line, status 1, nothing left, and
#     the process never touched (no library in its maps) and as bare;
#   - filled between two dumps of `record -i 1 -- CMD` (SIGUSR1 after each
#     step of progs/fault_target; then a dump of 1024 new stacks): the
#     program as bare; one line with the true numbers ("the first K of 4
#     dumps are kept, the last L lost", K the dumps in the file); no -wal
#     or -shm left; the file passes integrity_check, each dump it kept is
#     exact, `heapprof report` reads it;
#   - the same with --dump-interval (dumps failing while the program
#     runs), and with --trace (the events kept, in the file and in both
#     lines);
#   - filled during a `record -p` session through heapprofd: `heapprof
#     dump` says "0 processes dumped ..., 1 error", the session's line the
#     true numbers, the process runs on after the session as bare;
#   - `heapprof snapshot --db FULL/s.db` (and `-o FULL/s.pb.gz`) of a
#     profiled process: one line, status 1, nothing left, the process and
#     its session unharmed.
# Skipped, with the reason, where tmpfs cannot be mounted.
# Sessions here run with --no-peak: the dumps they count and number are
# the session's own (the peak's dump, and its folding: test_peak.sh).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
FT="$PROGS/fault_target"
t_require "$HP" "$BUILD/libheapprof.so" "$FT"
. "$HERE/session_helpers.sh"
unset LD_PRELOAD

FULL="$T_DIR/full"
MOUNTED=0
fulldisk_cleanup() {
	[ "$MOUNTED" = 1 ] && umount -l "$FULL" 2>/dev/null
	session_cleanup
}
trap fulldisk_cleanup EXIT

# mount_tmpfs KIB: a fresh, empty tmpfs of KIB KiB at $FULL.
mount_tmpfs() {
	[ "$MOUNTED" = 1 ] && umount -l "$FULL"
	MOUNTED=0
	mkdir -p "$FULL"
	mount -t tmpfs -o "size=${1}k" tmpfs "$FULL" 2>/dev/null || return 1
	MOUNTED=1
}

# mount_full KIB FREE_KIB: the same, filled with $FULL/filler until
# FREE_KIB KiB are left (0: until dd finds no room).
mount_full() {
	mount_tmpfs "$1" && fill_full "$2"
}

# fill_full [FREE_KIB]: fill $FULL (more) until FREE_KIB KiB are left.
fill_full() {
	local free=${1:-0} avail
	if [ "$free" = 0 ]; then
		dd if=/dev/zero of="$FULL/filler" bs=4k oflag=append conv=notrunc 2>/dev/null
		dd if=/dev/zero of="$FULL/filler2" bs=512 2>/dev/null
		return 0
	fi
	avail=$(df -k --output=avail "$FULL" | tail -n 1 | tr -d ' ')
	dd if=/dev/zero of="$FULL/filler" bs=1k count=$((avail - free)) 2>/dev/null
}

# left_in_full: what is in $FULL but the fillers.
left_in_full() {
	find "$FULL" -mindepth 1 ! -name 'filler*' -printf '%f\n' | sort | tr '\n' ' '
}

# folded DB: the dumps the file itself holds (without its -wal), read
# without locks so that the read never holds a checkpoint back.
folded() {
	sqlite3 -readonly "file:$1?immutable=1" "SELECT count(*) FROM heapprof_dump;" 2>/dev/null
}
folded_is() { [ "$(folded "$1")" = "$2" ]; }
folded_ge() { [ "$(folded "$1")" -ge "$2" ] 2>/dev/null; }

# rec_bg TAG ARGS...: `heapprof record ARGS` in the background, RPID its
# own pid (signalled by the test); bounded by wait_rec.
rec_bg() {
	local tag=$1
	shift
	"$HP" record --no-peak "$@" >"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" </dev/null &
	RPID=$!
}
wait_rec() { # TAG: REC_RC
	wait_child 120 "$RPID"
	REC_RC=$WAIT_RC
}

# heapprof_lines FILE: the lines heapprof wrote.
heapprof_lines() { grep '^heapprof' "$1"; }

# fdir TAG: a fresh directory for one run of fault_target; D.
fdir() {
	D="$W/$1"
	rm -rf "$D"
	mkdir -p "$D"
}

# bare_steps TAG N EXIT: fault_target steps N without the profiler (every
# step released in advance), FT_WIDE=10; BARE_OUT.
bare_steps() {
	fdir "bare-$1"
	local s
	: >"$D/go"
	: >"$D/exit"
	for s in 1 2 3 4 5 6; do : >"$D/go$s"; done
	FT_WIDE=10 FT_EXIT=$3 bare_run "$1" "$FT" "$D" steps "$2"
	BARE_OUT=$(cat "$T_DIR/$1.bare.out")
}

# step_through N [AFTER_STEP_FN]: drives fault_target in $D through N
# steps, calling AFTER_STEP_FN S after step S (before releasing it), then
# waits for its done file (after its 1024 new stacks); it then waits for
# $D/exit.
step_through() {
	local n=$1 fn=${2:-:} s
	wait_until 30 "ready" test -s "$D/ready" || return 1
	: >"$D/go"
	for s in $(seq 1 "$n"); do
		wait_until 30 "step $s" test -e "$D/step$s" || return 1
		"$fn" "$s" || return 1
		: >"$D/go$s"
	done
	wait_until 60 "the program's done file" test -s "$D/done"
}

# The command: its output, its stderr, heapprof in its memory and its
# environment (nothing, bare), a file it makes, its status.
# shellcheck disable=SC2016 # expanded by the command's shell
CMD_SH='echo out; echo err >&2; grep -c libheapprof /proc/self/maps;
env | grep -c -e ^LD_PRELOAD= -e ^HEAPPROF_SOCKET= -e ^HEAPPROF_SECCOMP -e ^HEAPPROF_FOLLOW=
echo made >"$1/made"; exit "$2"'

# ---------------------------------------------------------------------------
t_begin "ulimit -f below a new profile: the command runs as bare, one line naming the limit, nothing left"
mkdir -p "$W/fs-b" "$W/fs-r" "$W/fs-out"
read -r BARE_RC REC_RC < <(
	ulimit -f 40
	bare_run fsize sh -c "$CMD_SH" sh "$W/fs-b" 5
	hp_record fsize --no-peak -o "$W/fs-out/p.db" -- sh -c "$CMD_SH" sh "$W/fs-r" 5
	echo "$BARE_RC $REC_RC"
)
assert_eq 5 "$BARE_RC" "bare status"
assert_eq 5 "$REC_RC" "record's status: the command's"
assert_eq "$(cat "$T_DIR/fsize.bare.out")" "$(cat "$T_DIR/fsize.out")" "stdout as bare"
assert_eq "made" "$(cat "$W/fs-r/made" 2>/dev/null)" "the file it makes"
assert_eq "heapprof: no profile: $W/fs-out/p.db: the file size limit was hit (ulimit -f: 40.00 KiB); sh runs unprofiled" \
	"$(heapprof_lines "$T_DIR/fsize.err")" "one line"
assert_eq "" "$(ls -A "$W/fs-out")" "nothing left"

if ! mount_full 256 0; then
	t_begin "a full disk (tmpfs)"
	t_skip "mount -t tmpfs is not permitted here (needs root)"
	t_summary
fi

# ---------------------------------------------------------------------------
for free in 0 8 32 128; do
	for code in 0 7; do
		t_begin "full at the start ($free KiB left), the command exits $code: it runs as bare, one line, nothing left"
		mount_full 256 "$free" || t_fail "mount"
		mkdir -p "$W/b-$free-$code" "$W/r-$free-$code"
		bare_run "s$free-$code" sh -c "$CMD_SH" sh "$W/b-$free-$code" "$code"
		hp_record "s$free-$code" --no-peak -o "$FULL/p.db" -- sh -c "$CMD_SH" sh "$W/r-$free-$code" "$code"
		assert_eq "$code" "$BARE_RC" "bare status"
		want=$code
		[ "$code" = 0 ] && want=1
		assert_eq "$want" "$REC_RC" "record's status (the command's; 1 when it exited 0: no profile)"
		assert_eq "$(printf 'out\n0\n0')" "$(cat "$T_DIR/s$free-$code.bare.out")" "bare: nothing of heapprof in it"
		assert_eq "$(cat "$T_DIR/s$free-$code.bare.out")" "$(cat "$T_DIR/s$free-$code.out")" "stdout as bare (no library, no variable)"
		assert_eq "err" "$(grep -v '^heapprof' "$T_DIR/s$free-$code.err")" "the command's stderr as bare"
		assert_eq "made" "$(cat "$W/r-$free-$code/made" 2>/dev/null)" "the file it makes, as bare"
		assert_eq "heapprof: no profile: $FULL/p.db: No space left on device; sh runs unprofiled" \
			"$(heapprof_lines "$T_DIR/s$free-$code.err")" "one line, saying what happened to the profile"
		assert_eq "" "$(left_in_full)" "nothing left in the full file system"
	done
done

# ---------------------------------------------------------------------------
t_begin "full before record -p: one line, status 1, nothing left, the process untouched and as bare"
bare_steps p0 1 7
mount_full 256 0 || t_fail "mount"
fdir p0
FT_WIDE=10 "$FT" "$D" steps 1 >"$T_DIR/p0.tout" 2>"$T_DIR/p0.terr" &
TPID=$!
TPIDS="$TPIDS $TPID"
if wait_until 30 "ready" test -s "$D/ready"; then
	hp_record p0 --no-peak -i 1 -p "$TPID" -o "$FULL/p.db"
	assert_eq 1 "$REC_RC" "record's status"
	assert_eq "heapprof: no profile: $FULL/p.db: No space left on device; no process was attached" \
		"$(cat "$T_DIR/p0.err")" "one line"
	assert_eq "" "$(left_in_full)" "nothing left"
	assert_eq 0 "$(grep -c libheapprof "/proc/$TPID/maps")" "no library loaded into it"
	step_through 1
	: >"$D/exit"
fi
wait_child 60 "$TPID"
assert_eq 7 "$WAIT_RC" "its status, as bare"
assert_eq "$BARE_OUT" "$(cat "$T_DIR/p0.tout")" "its output, as bare"
assert_eq "" "$(cat "$T_DIR/p0.terr")" "nothing on its stderr"

# ---------------------------------------------------------------------------
# check_kept TAG DB [steps [late]]: the line's numbers are the file's; no
# -wal or -shm; the file whole, each dump kept exact (before_alloc, but
# attached late; with steps, dump S holds step S too), report reads it.
# Sets KEPT.
check_kept() {
	local tag=$1 db=$2 line n s ts rc
	line=$(heapprof_lines "$T_DIR/$tag.err" | tail -n 1)
	assert_eq "" "$(left_in_full | sed 's/^p\.db $//')" "nothing beside p.db (no -wal, -shm, -journal)"
	db_valid "$db" || return 1
	KEPT=$(q "$db" "SELECT count(*) FROM heapprof_dump;")
	n=$(printf '%s\n' "$line" | sed -n 's/.* \([0-9]*\) of \([0-9]*\) dumps.*/\2/p')
	assert_match "^heapprof: profile $db is incomplete: No space left on device: the first $KEPT of $n dumps are kept, the last $((n - KEPT)) lost" \
		"$line" "the line: the dumps the file kept, and the later ones lost"
	assert_ge "$((n - KEPT))" 1 "a dump was lost"
	s=0
	for ts in $(q "$db" "SELECT ts FROM heapprof_dump ORDER BY ts;"); do
		s=$((s + 1))
		[ "${4:-}" = late ] ||
			check_views "$db" before_alloc 10 10000 10 10000 "$ts"
		[ "${3:-}" = steps ] && [ "$s" -le 3 ] &&
			check_views "$db" step_alloc $((100 * s)) $((10000 * s)) $((100 * s)) $((10000 * s)) "$ts"
	done
	rc=0
	run_bounded 60 "$HP" report "$db" >/dev/null 2>"$T_DIR/$tag.report.err" || rc=$?
	assert_eq 0 "$rc" "heapprof report reads it ($(head -c 200 "$T_DIR/$tag.report.err"))"
}

# After step 2: wait for dump 2 in the file, then fill the disk.
usr1_dump() {
	kill -USR1 "$RPID"
	wait_until 30 "dump $1 in the file" folded_is "$DB" "$1" || return 1
	[ "$1" = 2 ] && fill_full
	return 0
}
# After step 3 (the disk full): one more dump asked for.
usr1_after() {
	if [ "$1" = 3 ]; then
		kill -USR1 "$RPID"
		return 0
	fi
	usr1_dump "$1"
}

for code in 0 7; do
	t_begin "filled between dumps of record -- CMD (exit $code): as bare, one line with the true numbers, a whole file"
	bare_steps m$code 3 "$code"
	mount_tmpfs 2048 || t_fail "mount"
	fdir m$code
	DB="$FULL/p.db"
	FT_WIDE=10 FT_EXIT=$code rec_bg m$code -i 1 -o "$DB" -- "$FT" "$D" steps 3
	step_through 3 usr1_after
	: >"$D/exit"
	wait_rec m$code
	want=$code
	[ "$code" = 0 ] && want=1
	assert_eq "$want" "$REC_RC" "record's status"
	assert_eq "$BARE_OUT" "$(cat "$T_DIR/m$code.out")" "the program's output, as bare"
	assert_eq 1 "$(heapprof_lines "$T_DIR/m$code.err" | wc -l)" "one line: $(tr '\n' '|' <"$T_DIR/m$code.err")"
	assert_eq "" "$(grep -v '^heapprof' "$T_DIR/m$code.err")" "nothing on the program's stderr"
	check_kept m$code "$DB" steps && {
		assert_ge "$KEPT" 2 "the dumps before the disk filled are kept"
		assert_match " of 4 dumps" "$(cat "$T_DIR/m$code.err")" "4 dumps asked for (3 signals, the end)"
	}
done

# ---------------------------------------------------------------------------
t_begin "filled while record --dump-interval 20 runs: as bare, the line's numbers are the file's"
bare_steps iv 2 7
mount_tmpfs 2048 || t_fail "mount"
fdir iv
DB="$FULL/p.db"
# After step 1: a dump in the file, then the disk full while the program
# makes step 2 and its 1024 stacks, dumped every 20 ms.
fill_after_dump() {
	[ "$1" = 1 ] || return 0
	wait_until 30 "a dump in the file" folded_ge "$DB" 1 || return 1
	fill_full
}
FT_WIDE=10 rec_bg iv -i 1 --dump-interval 20 -o "$DB" -- "$FT" "$D" steps 2
step_through 2 fill_after_dump
: >"$D/exit"
wait_rec iv
assert_eq 7 "$REC_RC" "record's status: the program's"
assert_eq "$BARE_OUT" "$(cat "$T_DIR/iv.out")" "the program's output, as bare"
assert_eq 1 "$(heapprof_lines "$T_DIR/iv.err" | wc -l)" "one line: $(tr '\n' '|' <"$T_DIR/iv.err")"
check_kept iv "$DB" && assert_ge "$KEPT" 1 "the dumps before are kept"

# ---------------------------------------------------------------------------
t_begin "filled while record --trace runs: the events kept are the file's, in both lines"
bare_steps tr 3 7
mount_tmpfs 4096 || t_fail "mount"
fdir tr
DB="$FULL/p.db"
FT_WIDE=10 rec_bg tr -i 1 --trace -o "$DB" -- "$FT" "$D" steps 3
step_through 3 usr1_after
: >"$D/exit"
wait_rec tr
assert_eq 7 "$REC_RC" "record's status: the program's"
assert_eq "$BARE_OUT" "$(cat "$T_DIR/tr.out")" "the program's output, as bare"
# The disk fills after dump 2; whether step 3's events then find room
# depends on what SQLite can reuse (a WAL rewritten from its start after a
# checkpoint, free pages in the file) and on when the chunk is written: the
# compact encoding made the events small.  Either way the lines must give
# the file's own count: events not written are counted in both lines; when
# every event found room, neither line speaks of a lost event.
if check_kept tr "$DB" steps; then
	ev=$(hpq "$DB" "SELECT count(*) FROM heapprof_event;")
	trline=$(heapprof_lines "$T_DIR/tr.err" | head -n 1)
	last=$(heapprof_lines "$T_DIR/tr.err" | tail -n 1)
	case $trline in
	*"not written to the profile")
		t_note "the trace: events not written (the disk full before their chunk)"
		assert_match "; $ev of [0-9]+ trace events kept$" "$last" \
			"the last line: the events in the file"
		assert_match "^heapprof: record: pid [0-9]+: trace \(streaming\): $ev events kept, 0 dropped, 0 overwritten, [1-9][0-9]* not written to the profile$" \
			"$trline" "the trace's line: the events in the file, the others not written"
		;;
	*)
		t_note "the trace: every event found room; a dump was lost"
		assert_match "^heapprof: record: pid [0-9]+: trace \(streaming\): $ev events kept, 0 dropped, 0 overwritten$" \
			"$trline" "the trace's line: every event read is in the file"
		assert_no_match "trace events" "$last" "the last line: no event lost, none said lost"
		assert_match "dumps are kept" "$last" "the last line: the dumps lost"
		;;
	esac
	assert_eq 2 "$(heapprof_lines "$T_DIR/tr.err" | wc -l)" "two lines: the trace's, the profile's"
fi

# ---------------------------------------------------------------------------
t_begin "filled during a record -p session (heapprofd, heapprof dump): true answers, the process runs on as bare"
start_daemon
bare_steps pd 3 7
mount_tmpfs 2048 || t_fail "mount"
fdir pd
DB="$FULL/p.db"
FT_WIDE=10 FT_EXIT=7 "$FT" "$D" steps 3 >"$T_DIR/pd.tout" 2>"$T_DIR/pd.terr" &
TPID=$!
TPIDS="$TPIDS $TPID"
dump_now() {
	CMD_RC=0
	run_bounded 60 "$HP" dump >"$T_DIR/pd.dump$1.out" 2>&1 || CMD_RC=$?
}
pd_step() {
	if [ "$1" -le 2 ]; then
		dump_now "$1"
		assert_eq 0 "$CMD_RC" "heapprof dump $1: status"
		assert_eq "heapprof: dump: 1 process dumped in 1 session" "$(cat "$T_DIR/pd.dump$1.out")" "heapprof dump $1"
		[ "$1" = 2 ] && fill_full
	fi
	return 0
}
if wait_until 30 "ready" test -s "$D/ready"; then
	rec_bg pd -i 1 -p "$TPID" -o "$DB"
	wait_until 30 "record attached" grep_q "$T_DIR/pd.err" "pid $TPID \(fault_target\): profiling"
	step_through 3 pd_step
	# Its 1024 new stacks: no room.
	dump_now 3
	assert_eq 1 "$CMD_RC" "heapprof dump on the full disk: status"
	assert_eq "heapprof: dump: 0 processes dumped in 1 session, 1 error" "$(cat "$T_DIR/pd.dump3.out")" \
		"heapprof dump on the full disk says the dump was not written"
	kill -INT "$RPID"
	wait_rec pd
	assert_eq 1 "$REC_RC" "record's status (write errors)"
	assert_eq 0 "$(kill -0 "$TPID" 2>/dev/null; echo $?)" "the process runs on after the session"
	assert_eq 1 "$(grep -c '^heapprof: profile ' "$T_DIR/pd.err")" "one line about the profile: $(tr '\n' '|' <"$T_DIR/pd.err")"
	check_kept pd "$DB" steps late && {
		assert_eq 2 "$KEPT" "the two dumps before the disk filled"
		assert_match "the first 2 of 4 dumps are kept, the last 2 lost$" "$(cat "$T_DIR/pd.err")" "4 dumps: 3 asked for, the end"
	}
	: >"$D/exit"
fi
wait_child 60 "$TPID"
assert_eq 7 "$WAIT_RC" "its status, as bare"
assert_eq "$BARE_OUT" "$(cat "$T_DIR/pd.tout")" "its output, as bare"
assert_eq "" "$(cat "$T_DIR/pd.terr")" "nothing on its stderr"
daemon_gone TERM

# ---------------------------------------------------------------------------
t_begin "heapprof snapshot --db on a full disk: one line, status 1, nothing left, the process and its session unharmed"
bare_steps sn 1 7
mount_full 256 0 || t_fail "mount"
fdir sn
FT_WIDE=10 rec_bg sn -i 1 -o "$W/sn.db" -- "$FT" "$D" steps 1
snap_full() {
	hp_cmd snap snapshot -p "$(cat "$D/ready")" --db "$FULL/s.db" -o "$FULL/s.pb.gz"
	assert_eq 1 "$CMD_RC" "snapshot's status"
	assert_eq "heapprof: snapshot: no snapshot written: $FULL/s.db: No space left on device" \
		"$(cat "$T_DIR/snap.err")" "one line"
	assert_eq "" "$(left_in_full)" "nothing left"
	# Its database elsewhere, its pprof on the full disk.
	hp_cmd snap2 snapshot -p "$(cat "$D/ready")" --db "$W/s2.db" -o "$FULL/s2.pb.gz"
	assert_eq 1 "$CMD_RC" "snapshot -o on the full disk: status"
	assert_eq "heapprof: snapshot: $FULL/s2.pb.gz: writing: No space left on device" \
		"$(cat "$T_DIR/snap2.err")" "snapshot -o on the full disk: one line"
	assert_eq "" "$(left_in_full)" "no partial pprof left"
	return 0
}
step_through 1 snap_full
: >"$D/exit"
wait_rec sn
assert_eq 7 "$REC_RC" "record's status: the program's"
assert_eq "$BARE_OUT" "$(cat "$T_DIR/sn.out")" "the program's output, as bare"
assert_eq "heapprof: profile written to $W/sn.db" "$(cat "$T_DIR/sn.err")" "its own profile written"

t_summary
