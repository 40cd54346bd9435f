#!/usr/bin/env bash
# test_readers.sh BUILD: what the commands that read a profile are given
# besides a profile, and what a profile is on disk while and after
# `record` writes it (issue 18, cases 15 and 16).
#
#   * A FIFO, a directory, /dev/null, a socket, a link to a FIFO: every
#     reading command (report, sql, pprof, flamegraph, diff on either
#     side and with --dumps, snapshot --list and --name, symbolize)
#     refuses it at once (bounded: a FIFO used to block them for ever in
#     open(2)), with status 1 and one line "heapprof: CMD: FILE: not a
#     regular file (a FIFO)", and leaves nothing beside it; a link to a
#     profile reads.
#   * The .db file alone: `record -i 1 --dump-interval 100` of
#     progs/waiter (10 x 1000 B live from phase1_alloc while it waits on
#     a FIFO), the .db copied without its -wal file while record runs,
#     and again after record was SIGKILLed: each copy reads in `heapprof
#     report` with every dump committed so far (as many as the original
#     file with its -wal holds), each dump exact (10 objects, 10000 B).
#     Both copies are made with the recorder stopped (SIGSTOP) at a
#     moment when the file alone holds every dump committed: a copy, or a
#     kill, that falls in the few milliseconds in which a dump is copied
#     from the log into the file catches the file half-written (refused as
#     damaged; the file with its -wal still holds everything).  The
#     killed copy also reads on a read-only file system (a tmpfs
#     remounted ro), where no -shm file can be made beside it.
#   * Profiles whose data is only in the -wal (as heapprof before issue 18
#     left them until record ended): read in place; copied alone, refused
#     with a message naming the -wal; an empty file with a -wal beside it
#     is refused without SQLite deleting that -wal; a -wal SQLite cannot
#     apply is named.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/known" "$PROGS/waiter"

REC=""
WPID=""
RO=""
readers_cleanup() {
	[ -n "$REC" ] && kill -KILL "$REC" 2>/dev/null
	[ -n "$WPID" ] && kill -KILL "$WPID" 2>/dev/null
	[ -n "$RO" ] && umount -l "$RO" 2>/dev/null
	t_cleanup
}
trap readers_cleanup EXIT

# rx TEXT: TEXT as a regex that matches itself.
rx() { printf '%s' "$1" | sed -e 's/[][\.*^$+?(){}|/]/\\&/g'; }

GOOD="$T_DIR/good.db"
hp_record good -i 1 -o "$GOOD" -- "$PROGS/known" deep-only
if ! db_valid "$GOOD"; then
	t_fail "no good profile; the cases cannot run"
	t_summary
fi

# reader_cases F: "SUBSYS|ARGS..." for every command that reads a profile,
# with F in the profile's place (args separated by tabs).
reader_cases() {
	local f=$1 o="$T_DIR/out"
	printf '%s\n' \
		"report|report	$f" \
		"sql|sql	$f	SELECT 1" \
		"pprof|pprof	$f	-o	$o.pb.gz" \
		"flamegraph|flamegraph	$f	-o	$o.html" \
		"diff|diff	$f	$GOOD" \
		"diff|diff	$GOOD	$f" \
		"diff|diff	$f	--dumps	1,1" \
		"snapshot|snapshot	--list	$f" \
		"snapshot|snapshot	--name	x	$f	-o	$o.pb.gz" \
		"symbolize|symbolize	$f"
}

# refused F KIND: every reading command refuses F: status 1 within the
# bound, one line "heapprof: SUBSYS: F: not a regular file (KIND)", and no
# SQLite side file created beside F.
refused() {
	local f=$1 kind=$2 line sub args rc lines
	while IFS= read -r line; do
		sub=${line%%|*}
		IFS=$'\t' read -r -a args <<<"${line#*|}"
		rc=0
		timeout -k 5 10 "$HP" "${args[@]}" </dev/null >"$T_DIR/case.out" 2>"$T_DIR/case.err" || rc=$?
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			t_fail "heapprof ${args[*]}: hung, killed after 10 s"
			continue
		fi
		assert_eq 1 "$rc" "status of heapprof ${args[*]}"
		lines=$(wc -l <"$T_DIR/case.err" | tr -d ' ')
		assert_eq 1 "$lines" "stderr lines of heapprof ${args[*]}: $(head -c 300 "$T_DIR/case.err")"
		assert_match "^heapprof: $sub: $(rx "$f"): not a regular file \\($kind\\)\$" \
			"$(head -n 1 "$T_DIR/case.err")" "message of heapprof ${args[*]}"
	done < <(reader_cases "$f")
	local s
	for s in -wal -shm -journal; do
		[ -e "$f$s" ] && t_fail "a reader created $f$s"
	done
	return 0
}

# ---------------------------------------------------------------------------
t_begin "a FIFO: every reader refuses it at once, in one line"
mkfifo "$T_DIR/fifo.db"
refused "$T_DIR/fifo.db" "a FIFO"

t_begin "a link to a FIFO: refused the same way"
ln -s "$T_DIR/fifo.db" "$T_DIR/fifolink.db"
refused "$T_DIR/fifolink.db" "a FIFO"

t_begin "a directory: refused"
mkdir "$T_DIR/dir.db"
refused "$T_DIR/dir.db" "a directory"

t_begin "/dev/null: refused"
refused /dev/null "a character device"

t_begin "a socket: refused"
if command -v python3 >/dev/null 2>&1 &&
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
		"$T_DIR/sock.db" && [ -S "$T_DIR/sock.db" ]; then
	refused "$T_DIR/sock.db" "a socket"
else
	t_skip "no python3 to make a socket"
fi

t_begin "a link to a profile still reads"
ln -s "$GOOD" "$T_DIR/goodlink.db"
rc=0
run_bounded 60 "$HP" report "$T_DIR/goodlink.db" >"$T_DIR/link.out" 2>"$T_DIR/link.err" || rc=$?
assert_eq 0 "$rc" "report through a link ($(head -c 200 "$T_DIR/link.err"))"
assert_match '^Process [0-9]+ ' "$(head -n 1 "$T_DIR/link.out")" "report through a link"
rc=0
out=$(run_bounded 60 "$HP" sql "$T_DIR/goodlink.db" "SELECT count(*) FROM heapprof_dump" --csv 2>&1) || rc=$?
assert_eq 0 "$rc" "sql through a link ($out)"
assert_eq "$(sqlq "$GOOD" "SELECT count(*) FROM heapprof_dump;")" "$(printf '%s\n' "$out" | tail -n 1)" "dumps read through a link"

# ---------------------------------------------------------------------------
# The .db alone.
W="$T_DIR/rec"
mkdir -p "$W/probe" "$W/running" "$W/killed"
mkfifo "$W/ready" "$W/go"
DB="$W/x.db"

# alone_dumps: the dumps of a copy of $DB made now without its -wal, as
# heapprof reads it (empty if it does not read as a profile).
alone_dumps() {
	rm -f "$W/probe/x.db" "$W/probe/x.db-wal" "$W/probe/x.db-shm"
	cp "$DB" "$W/probe/x.db" 2>/dev/null || return 0
	timeout -k 5 30 "$HP" sql "$W/probe/x.db" "SELECT count(*) FROM heapprof_dump" --csv \
		2>/dev/null </dev/null | tail -n 1
}
# all_dumps: the dumps of $DB with its -wal.
all_dumps() {
	timeout -k 5 30 sqlite3 -readonly "$DB" "SELECT count(*) FROM heapprof_dump;" 2>/dev/null </dev/null
}
# stop_quiet N: stops the recorder (SIGSTOP) once it has committed at
# least N dumps, at a moment when the file alone holds all of them; leaves
# it stopped.  ALL: their number.  A stop may fall in the few ms in which
# a dump is committed and copied into the file: up to 5 such stops are
# let go (SIGCONT) and tried again.  Any checkpoint would do it some time
# (before issue 18, one after 4 MB of log, many dumps later): the 5 tries
# are what ties it to each dump.
stop_quiet() {
	local n=$1 end=$((SECONDS + 60)) alone="" tries=0
	while [ "$SECONDS" -lt "$end" ] && [ "$tries" -lt 5 ]; do
		kill -STOP "$REC"
		ALL=$(all_dumps)
		if [ -n "$ALL" ] && [ "$ALL" -ge "$n" ]; then
			alone=$(alone_dumps)
			[ "$alone" = "$ALL" ] && return 0
			tries=$((tries + 1))
		fi
		kill -CONT "$REC"
		sleep 0.02
	done
	t_fail "$DB alone did not hold the dumps committed (>= $n) at $tries stops of the recorder: last $ALL committed, a copy alone read '$alone' ($(timeout 30 "$HP" sql "$W/probe/x.db" "SELECT 1" 2>&1 </dev/null | head -c 300))"
	return 1
}

# check_copy TAG FILE N: FILE reads in report with N dumps, each exact:
# phase1_alloc's four views (alloc_objects alloc_space objects space) at
# every dump (through heapprof sql, which reads where sqlite3 cannot).
check_copy() {
	local tag=$1 f=$2 n=$3 rc=0 views
	run_bounded 60 "$HP" report "$f" >"$T_DIR/$tag.report" 2>"$T_DIR/$tag.err" || rc=$?
	assert_eq 0 "$rc" "$tag: heapprof report on the copy ($(head -c 300 "$T_DIR/$tag.err"))" || return 1
	assert_match "^  dumps +$n; showing dump $n " "$(grep '^  dumps ' "$T_DIR/$tag.report")" "$tag: dumps in the report"
	check_report "$tag" "$T_DIR/$tag.report" self phase1_alloc 10000
	views=$(hp_sql_csv "$f" "SELECT (SELECT $VIEWS_SQL
	    FROM heap_profile_allocation a
	    JOIN stack_profile_callsite c ON a.callsite_id = c.id
	    JOIN stack_profile_frame f ON c.frame_id = f.id
	    WHERE f.name = 'phase1_alloc' AND a.ts <= d.ts) AS v
	  FROM heapprof_dump d ORDER BY d.ts") || return 1
	assert_eq "$n" "$(printf '%s\n' "$views" | grep -c .)" "$tag: dumps in the copy"
	assert_eq "" "$(printf '%s\n' "$views" | grep -v '^10 10000 10 10000$')" \
		"$tag: phase1_alloc at every dump (10 10000 10 10000)"
}

t_begin "the .db alone, copied while record runs: every dump so far, exact"
# In a subshell that reports its status in a file: bash would print
# "Killed" when it reaps a job that died of SIGKILL.
(
	"$HP" record -i 1 --dump-interval 100 -o "$DB" -- "$PROGS/waiter" "$W/ready" "$W/go" \
		>"$W/rec.out" 2>"$W/rec.err" </dev/null &
	echo $! >"$W/rec.pid"
	rc=0
	wait $! || rc=$?
	echo "$rc" >"$W/rec.rc"
) 2>/dev/null &
SUB=$!
READY=$(timeout 30 cat "$W/ready")
REC=$(cat "$W/rec.pid")
assert_eq ready "$READY" "waiter ready (phase 1 done)"
WPID=$(pgrep -P "$REC" -x waiter)
if [ "$READY" = ready ] && stop_quiet 2; then
	N1=$ALL
	cp "$DB" "$W/running/x.db"
	kill -CONT "$REC"
	[ -e "$W/running/x.db-wal" ] && t_fail "the -wal file was copied"
	check_copy running "$W/running/x.db" "$N1"
fi

t_begin "the .db alone after record was SIGKILLed: every dump, exact"
if [ "$READY" != ready ]; then
	t_fail "no recording to kill"
elif stop_quiet $((${N1:-2} + 1)); then
	N2=$ALL
	kill -KILL "$REC"
	wait_pid_bounded 30 "$SUB"
	assert_eq 137 "$(cat "$W/rec.rc" 2>/dev/null)" "record's status (SIGKILL)"
	REC=""
	[ -s "$DB-wal" ] || t_note "no -wal left beside $DB"
	cp "$DB" "$W/killed/x.db"
	assert_eq "$N2" "$(all_dumps)" "dumps in the original with its -wal"
	check_copy killed "$W/killed/x.db" "$N2"
fi
t_begin "the .db alone on a read-only file system: reads (no -shm can be made beside it)"
if [ -z "${N2:-}" ]; then
	t_fail "no copy of the killed recording"
elif ! mkdir -p "$W/ro" || ! mount -t tmpfs -o size=4m tmpfs "$W/ro" 2>/dev/null; then
	t_skip "mount -t tmpfs is not allowed here"
else
	RO="$W/ro"
	cp "$W/killed/x.db" "$RO/x.db"
	if mount -o remount,ro "$RO" 2>/dev/null; then
		check_copy readonly "$RO/x.db" "$N2"
	else
		t_skip "cannot remount the tmpfs read-only"
	fi
fi

# Let the waiter finish (it is nobody's child now).
[ -n "$REC" ] && kill -KILL "$REC" 2>/dev/null
timeout 10 sh -c ': >"$1"' sh "$W/go" 2>/dev/null
if [ -n "$WPID" ]; then
	timeout 20 sh -c 'while kill -0 "$1" 2>/dev/null; do sleep 0.02; done' sh "$WPID" ||
		kill -KILL "$WPID" 2>/dev/null
fi

# ---------------------------------------------------------------------------
# A profile as heapprof before issue 18 left a killed recording: its data
# only in the -wal (the CLI keeps it there: no checkpoint at close).
O="$T_DIR/old"
mkdir -p "$O/inplace" "$O/copy" "$O/empty" "$O/badwal"
sqlite3 "$GOOD" .dump >"$O/dump.sql"
sqlite3 -cmd ".dbconfig no_ckpt_on_close on" -cmd "PRAGMA journal_mode=WAL" \
	"$O/inplace/p.db" <"$O/dump.sql" >/dev/null

t_begin "an old profile with its data in the -wal: reads in place"
if [ -s "$O/inplace/p.db-wal" ]; then
	rc=0
	run_bounded 60 "$HP" report "$O/inplace/p.db" >"$O/inplace.out" 2>"$O/inplace.err" || rc=$?
	assert_eq 0 "$rc" "report in place ($(head -c 300 "$O/inplace.err"))"
else
	t_fail "setup: no data in $O/inplace/p.db-wal"
fi

t_begin "an old profile copied without its -wal: the message says where the data is"
cp "$O/inplace/p.db" "$O/copy/p.db"
expect_error oldcopy 1 "$(rx "$O/copy/p.db"): not a heapprof profile \\(no [a-z_]+ table\\).*-wal file beside the original" \
	report "$O/copy/p.db"

t_begin "an empty file with a -wal beside it: refused, the -wal kept"
: >"$O/empty/p.db"
cp "$O/inplace/p.db-wal" "$O/empty/p.db-wal"
SUM=$(md5sum <"$O/empty/p.db-wal")
while IFS= read -r line; do
	IFS=$'\t' read -r -a args <<<"${line#*|}"
	expect_error empty 1 "$(rx "$O/empty/p.db"): not a heapprof profile \\(an empty file\\), though p\\.db-wal beside it holds [0-9]+ bytes" \
		"${args[@]}"
done < <(reader_cases "$O/empty/p.db")
assert_eq "$SUM" "$(md5sum <"$O/empty/p.db-wal" 2>/dev/null)" "the -wal beside the empty file, unchanged"

t_begin "a -wal SQLite cannot apply: named"
cp "$O/inplace/p.db" "$O/inplace/p.db-wal" "$O/badwal/"
# The header's checksum (bytes 24-31) wrong: SQLite ignores the whole log.
printf '\377\377\377\377\377\377\377\377' | dd of="$O/badwal/p.db-wal" bs=1 seek=24 conv=notrunc 2>/dev/null
expect_error badwal 1 "$(rx "$O/badwal/p.db"): not a heapprof profile \\(no [a-z_]+ table\\), though p\\.db-wal beside it holds [0-9]+ bytes of write-ahead log that SQLite did not apply" \
	report "$O/badwal/p.db"

t_summary
