#!/usr/bin/env bash
# test_snapshot.sh BUILD: `heapprof snapshot`.  progs/snap_known allocates
# a known set of blocks under `heapprof record -i 1`, lists each live
# block's address, size and thread, and waits: a snapshot taken from the
# outside (running, and stopped with SIGSTOP) holds exactly those blocks
# among the ones its functions allocated; --with-tags labels each block;
# --contents-dir copies each block's bytes (the program wrote a known
# pattern); errors are one line.  progs/api_snapshot takes two named
# snapshots from inside: --list shows them, diff of the two shows exactly
# the phase between them, --name writes one as pprof.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/snap_known" \
	"$PROGS/api_snapshot"
. "$HERE/session_helpers.sh"

# snap_known under a name of this run's own (its command name), so that
# -n finds only our processes even when another run of this test is going.
SKNAME="snapk$$"
SK="$W/$SKNAME"
cp "$PROGS/snap_known" "$SK" || t_fail "copying snap_known"

# The functions of snap_known that allocate, as an SQL list.
KNOWN_FUNCS="'alloc_small', 'alloc_big', 'thread_alloc'"

# blocks_of DB: "0xADDRESS SIZE TID" of the blocks in DB whose leaf frame
# is one of snap_known's functions, sorted.
blocks_of() {
	sqlq "$1" "SELECT printf('0x%x', b.address) || ' ' || b.size || ' ' || b.tid
	  FROM heapprof_block b
	  JOIN stack_profile_callsite c ON c.id = b.callsite_id
	  JOIN stack_profile_frame f ON f.id = c.frame_id
	  WHERE f.name IN ($KNOWN_FUNCS);" | sort
}

# start_known TAG [ptracer]: snap_known under `record -i 1` in the
# background, until it has listed its blocks: KPID (the program), RPID
# (record), $W/TAG.addr, expected blocks in $W/TAG.want (sorted).
start_known() {
	local tag=$1
	rm -f "$W/$tag.addr" "$W/$tag.go"
	timeout -k 5 120 "$HP" record -i 1 -o "$W/$tag.rec.db" -- \
		"$SK" "$W/$tag.addr" "$W/$tag.go" ${2:-} \
		>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" </dev/null &
	RPID=$!
	TPIDS="$TPIDS $RPID"
	KPID=""
	wait_until 60 "address list of $tag" test -s "$W/$tag.addr" || return 1
	KPID=$(sed -n 's/^pid //p' "$W/$tag.addr")
	TPIDS="$TPIDS $KPID"
	grep -v '^pid ' "$W/$tag.addr" | sort >"$W/$tag.want"
}

# stop_known TAG: lets it exit and waits for record.
stop_known() {
	touch "$W/$1.go"
	wait_child 60 "$RPID"
	assert_eq 0 "$WAIT_RC" "record of $1 exit status: $(tail -n 3 "$T_DIR/$1.err")"
}

# ---------------------------------------------------------------------------
t_begin "snapshot -p: exactly the program's live blocks"
start_known k1 ptracer
if [ -n "$KPID" ]; then
	assert_eq 16 "$(wc -l <"$W/k1.want" | tr -d ' ')" "snap_known lists 16 blocks"
	hp_cmd s1 snapshot -p "$KPID"
	assert_eq 0 "$CMD_RC" "snapshot exit status: $(head -c 300 "$T_DIR/s1.err")"
	S1DB="$W/heapprof.snapshot.$KPID.db"
	S1PB="$W/heapprof.snapshot.$KPID.pb.gz"
	db_valid "$S1DB"
	[ -s "$S1PB" ] || t_fail "no default pprof $S1PB"
	assert_eq "$(cat "$W/k1.want")" "$(blocks_of "$S1DB")" \
		"blocks of snap_known's functions (address size tid)"
	out=$(cat "$T_DIR/s1.out")
	assert_match "^snapshot of pid $KPID \($SKNAME\): [0-9]+ blocks, .*, 0 in flight; interval: every allocation$" \
		"$out" "summary line"
	nb=$(sqlq "$S1DB" "SELECT count(*) FROM heapprof_block;")
	assert_match "^snapshot of pid $KPID \($SKNAME\): $nb blocks," "$out" \
		"summary counts every block in the database"
	assert_eq "snapshot|snapshot|0" \
		"$(sqlq "$S1DB" "SELECT reason, name, blocks_in_flight FROM heapprof_dump;")" \
		"dump row: reason, name, in flight"
	assert_eq "$KPID|$SKNAME|snapshot|1" \
		"$(sqlq "$S1DB" "SELECT p.pid, p.name, h.how, h.sampling_interval FROM process p JOIN heapprof_process h USING (upid);")" \
		"process row"
	# Sizes and counts per function, exact.
	assert_eq "alloc_big|2|205000
alloc_small|6|528
thread_alloc|8|856" \
		"$(sqlq "$S1DB" "SELECT f.name, count(*), sum(b.size) FROM heapprof_block b
		  JOIN stack_profile_callsite c ON c.id = b.callsite_id
		  JOIN stack_profile_frame f ON f.id = c.frame_id
		  WHERE f.name IN ($KNOWN_FUNCS) GROUP BY f.name ORDER BY f.name;")" \
		"blocks per function"
	# The blocks' stacks agree with the counters written beside them.
	assert_eq "6 528" "$(leaf_views "$S1DB" alloc_small | cut -d' ' -f3,4)" \
		"per-stack counters of alloc_small"
fi

t_begin "snapshot -p: pprof of the live blocks"
if [ -n "$KPID" ] && [ "$GO_OK" = 1 ]; then
	pprof_top s1 "$S1PB" space
	assert_eq 528 "$(top_flat "$T_DIR/s1.top" alloc_small)" "space of alloc_small"
	assert_eq 205000 "$(top_flat "$T_DIR/s1.top" alloc_big)" "space of alloc_big"
	assert_eq 856 "$(top_flat "$T_DIR/s1.top" thread_alloc)" "space of thread_alloc"
	pprof_top s1o "$S1PB" objects
	assert_eq 6 "$(top_flat "$T_DIR/s1o.top" alloc_small)" "objects of alloc_small"
	assert_eq 8 "$(top_flat "$T_DIR/s1o.top" thread_alloc)" "objects of thread_alloc"
	gopprof -symbolize=none -raw "$S1PB" >"$T_DIR/s1.raw" || t_fail "pprof -raw"
	assert_no_match 'address:' "$(cat "$T_DIR/s1.raw")" "no labels without --with-tags"
elif [ -n "$KPID" ]; then
	t_skip "go is missing"
fi

t_begin "snapshot --with-tags: a sample per block, labelled"
if [ -n "$KPID" ]; then
	hp_cmd s1t snapshot -p "$KPID" --with-tags --db "$W/tags.db" -o "$W/tags.pb.gz"
	assert_eq 0 "$CMD_RC" "snapshot --with-tags: $(head -c 300 "$T_DIR/s1t.err")"
	if [ "$GO_OK" = 1 ]; then
		gopprof -symbolize=none -raw "$W/tags.pb.gz" >"$T_DIR/tags.raw" ||
			t_fail "pprof -raw of the tagged profile"
		raw=$(cat "$T_DIR/tags.raw")
		nb=$(sqlq "$W/tags.db" "SELECT count(*) FROM heapprof_block WHERE heap_name = 'libc.malloc';")
		assert_eq "$nb" "$(grep -c 'address:\[0x' "$T_DIR/tags.raw")" \
			"one address label per block"
		assert_eq "$nb" "$(grep -Ec 'thread:\[[0-9]+\] timestamp:\[[0-9]+ nanoseconds\]' "$T_DIR/tags.raw")" \
			"thread and timestamp labels per block"
		while read -r addr size tid; do
			# The sample: its values (size bytes, 1 object) and its
			# labels on the next two lines.
			got=$(awk -v a="address:[$addr]" '
			    /^ +-?[0-9]+ +-?[0-9]+ +-?[0-9]+ +-?[0-9]+:/ { v = $1 " " $3 }
			    index($0, a) { getline; print v, $1; exit }' "$T_DIR/tags.raw")
			assert_eq "$size 1 thread:[$tid]" "$got" "sample of block $addr"
		done <"$W/k1.want"
		ts=$(sqlq "$W/tags.db" "SELECT ts FROM heapprof_block WHERE address = $(head -n 1 "$W/k1.want" | cut -d' ' -f1);")
		assert_match "timestamp:\[$ts nanoseconds\]" "$raw" "timestamp label = the block's ts"
		gopprof -tags "$W/tags.pb.gz" >"$T_DIR/tags.tags" || t_fail "pprof -tags"
		assert_match '^ *address: Total' "$(cat "$T_DIR/tags.tags")" "pprof -tags lists addresses"
		assert_match '^ *thread: Total' "$(cat "$T_DIR/tags.tags")" "pprof -tags lists threads"
	else
		t_skip "go is missing"
	fi
fi

t_begin "snapshot --contents-dir: each block's bytes"
if [ -n "$KPID" ]; then
	hp_cmd s1c snapshot -p "$KPID" --db "$W/cont.db" -o "$W/cont.pb.gz" \
		--contents-dir "$W/contents"
	if grep -q 'ptrace access denied' "$T_DIR/s1c.err"; then
		# ptracer was asked for: only a stricter policy refuses it.
		assert_eq 1 "$CMD_RC" "exit status when the memory cannot be read"
		t_skip "this system refuses ptrace access: $(head -c 200 "$T_DIR/s1c.err")"
	else
		assert_eq 0 "$CMD_RC" "snapshot --contents-dir: $(head -c 300 "$T_DIR/s1c.err")"
		assert_eq 700 "$(stat -c %a "$W/contents")" "contents dir mode"
		nb=$(sqlq "$W/cont.db" "SELECT count(*) FROM heapprof_block;")
		assert_match "^wrote the contents of $nb blocks to $W/contents/$" \
			"$(tail -n 1 "$T_DIR/s1c.out")" "contents line"
		assert_eq "$nb" "$(find "$W/contents" -type f | wc -l | tr -d ' ')" \
			"one file per block"
		k=0
		while read -r addr size tid; do
			f="$W/contents/$addr"
			perl -e 'my ($k, $n) = @ARGV;
			    print pack("C*", map { (31 * $k + $_) & 255 } 0 .. $n - 1)' \
				"$k" "$size" >"$T_DIR/expect.bin"
			cmp -s "$f" "$T_DIR/expect.bin" ||
				t_fail "contents of block $k ($addr, $size B) differ"
			k=$((k + 1))
		done < <(grep -v '^pid ' "$W/k1.addr")
		assert_eq 16 "$k" "blocks compared"
	fi
fi

t_begin "snapshot -p of a stopped process: the same blocks"
if [ -n "$KPID" ]; then
	kill -STOP "$KPID"
	wait_until 20 "stopped state" sh -c "grep -q '^State:.*T' /proc/$KPID/status"
	hp_cmd s2 snapshot -p "$KPID" --db "$W/stopped.db" -o "$W/stopped.pb.gz"
	assert_eq 0 "$CMD_RC" "snapshot of the stopped process: $(head -c 300 "$T_DIR/s2.err")"
	assert_eq "$(cat "$W/k1.want")" "$(blocks_of "$W/stopped.db")" \
		"blocks of the stopped process"
	assert_match ', 0 in flight;' "$(cat "$T_DIR/s2.out")" "nothing in flight"
	# Stopped: the whole table is the same as the first snapshot's.
	assert_eq "$(sqlq "$S1DB" "SELECT address, size, tid, ts FROM heapprof_block ORDER BY address;")" \
		"$(sqlq "$W/stopped.db" "SELECT address, size, tid, ts FROM heapprof_block ORDER BY address;")" \
		"every block as in the first snapshot"
	kill -CONT "$KPID"
fi

t_begin "snapshot --list / --name of a snapshot database"
if [ -n "$KPID" ]; then
	hp_cmd l1 snapshot --list "$S1DB"
	assert_eq 0 "$CMD_RC" "--list: $(head -c 300 "$T_DIR/l1.err")"
	nb=$(sqlq "$S1DB" "SELECT count(*) || ' ' || sum(size) FROM heapprof_block;")
	assert_match "^$KPID +1 +snapshot +[0-9.]+ s +${nb% *} +${nb#* } +0$" \
		"$(tail -n 1 "$T_DIR/l1.out")" "--list row"
	hp_cmd n1 snapshot --name snapshot "$S1DB" -o "$W/n1.pb.gz"
	assert_eq 0 "$CMD_RC" "--name: $(head -c 300 "$T_DIR/n1.err")"
	assert_match "^wrote $W/n1.pb.gz: process $KPID, snapshot 'snapshot' \(dump 1 of 1\), [0-9]+ samples, from its blocks$" \
		"$(cat "$T_DIR/n1.out")" "--name output line"
	# Same samples as the pprof written with the snapshot (times aside).
	if [ "$GO_OK" = 1 ]; then
		pprof_top n1 "$W/n1.pb.gz" space
		assert_eq 528 "$(top_flat "$T_DIR/n1.top" alloc_small)" "--name: space of alloc_small"
	fi
fi

t_begin "snapshot -n NAME"
if [ -n "$KPID" ]; then
	hp_cmd nm1 snapshot -n "$SKNAME" --db "$W/byname.db" -o "$W/byname.pb.gz"
	assert_eq 0 "$CMD_RC" "-n $SKNAME: $(head -c 300 "$T_DIR/nm1.err")"
	assert_match "^snapshot of pid $KPID " "$(cat "$T_DIR/nm1.out")" "-n found the process"
	K1RPID=$RPID
	start_known k2
	K2PID=$KPID
	KPID=$(sed -n 's/^pid //p' "$W/k1.addr")
	if [ -n "$K2PID" ]; then
		expect_error nm2 1 "^heapprof: snapshot: 2 processes named '$SKNAME' are profiled \(pids ($KPID, $K2PID|$K2PID, $KPID)\): choose one with -p$" \
			snapshot -n "$SKNAME"
		stop_known k2
	fi
	RPID=$K1RPID
fi
expect_error nm3 1 "^heapprof: snapshot: no process of yours named 'no_such_prog' is profiled by heapprof \(profile it with 'heapprof record -i 1 -p PID' or 'heapprof record -i 1 -- CMD'\)$" \
	snapshot -n no_such_prog

t_begin "snapshot: not ours to read"
if [ -n "$KPID" ] && [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	CMD_RC=0
	(cd "$T_DIR" && run_bounded 60 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$HP" snapshot -p "$KPID" --db /nonexistent/x.db) \
		>"$T_DIR/perm.out" 2>"$T_DIR/perm.err" || CMD_RC=$?
	assert_eq 1 "$CMD_RC" "exit status as another user"
	assert_match "^heapprof: snapshot: cannot read the descriptors of pid $KPID \($SKNAME\): permission denied \(run as the same user as the process, or with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH\)$" \
		"$(cat "$T_DIR/perm.err")" "message as another user"
else
	t_skip "needs root and setpriv to run as another user"
fi
[ -n "$KPID" ] && stop_known k1

t_begin "snapshot of a process attached by record -p; refused after"
start_daemon
rm -f "$W/att.addr" "$W/att.go"
LD_PRELOAD="$BUILD/libheapprof.so" "$SK" "$W/att.addr" "$W/att.go" \
	>"$T_DIR/att.prog.out" 2>&1 </dev/null &
APID=$!
TPIDS="$TPIDS $APID"
if wait_until 60 "address list of att" test -s "$W/att.addr"; then
	start_record att -i 1 -p "$APID" -o "$W/att.db"
	wait_until 60 "attach of $APID" grep_q "$T_DIR/att.err" "pid $APID \\($SKNAME\\): profiling"
	hp_cmd at1 snapshot -p "$APID" --db "$W/att-snap.db" -o "$W/att-snap.pb.gz"
	assert_eq 0 "$CMD_RC" "snapshot of an attached process: $(head -c 300 "$T_DIR/at1.err")"
	# Its blocks were allocated before the attach: not tracked.
	assert_eq "" "$(blocks_of "$W/att-snap.db")" "no block of snap_known's from before the attach"
	# Its region with a broken magic, while the session runs (the
	# collector keeps the geometry it wrote and never reads the magic
	# again): a snapshot refuses it.
	rfd=$(find "/proc/$APID/fd" -lname '/memfd:heapprof-region*' -printf '%f\n' | head -n 1)
	if [ -n "$rfd" ] && printf 'XXXXXXXX' | dd of="/proc/$APID/fd/$rfd" conv=notrunc status=none 2>/dev/null; then
		expect_error at3 1 "^heapprof: snapshot: pid $APID \\($SKNAME\\): its heapprof region is corrupt \\(bad magic or layout version\\); cannot read it$" \
			snapshot -p "$APID" --db "$W/att-snap3.db"
	else
		t_fail "cannot find or write the region of $APID"
	fi
	kill -INT "$RPID"
	wait_record att
	# The session over, its regions are unmapped in the process and
	# their descriptors closed (issue 30): nothing of heapprof's is left
	# to read.  It still runs with libheapprof: the way back is record
	# -p, not a restart under record -- CMD.
	assert_eq "" "$(find "/proc/$APID/fd" -lname '/memfd:heapprof-region*' -printf '%f\n')" "no region descriptor left in $APID after the session"
	expect_error at2 1 "^heapprof: snapshot: pid $APID \\($SKNAME\\) is not profiled by heapprof: it has no heapprof region \\(it has libheapprof loaded: profile it with 'heapprof record -i 1 -p $APID' \\(or -n $SKNAME\\) and take the snapshot while that session runs\\)$" \
		snapshot -p "$APID" --db "$W/att-snap2.db"
	expect_error at2n 1 "^heapprof: snapshot: no process of yours named '$SKNAME' is profiled by heapprof \\(it has libheapprof loaded: profile it with 'heapprof record -i 1 -n $SKNAME' and take the snapshot while that session runs\\)$" \
		snapshot -n "$SKNAME" --db "$W/att-snap2n.db"
fi
touch "$W/att.go"
wait_child 60 "$APID"

t_begin "snapshot --contents-dir: custom heap blocks are skipped"
rm -f "$W/hold.ready" "$W/hold.go"
timeout -k 5 120 "$HP" record -i 1 --heaps libc.malloc,snap.heap -o "$W/hold.rec.db" -- \
	"$PROGS/api_snapshot" hold "$W/hold.ready" "$W/hold.go" \
	>"$T_DIR/hold.out" 2>"$T_DIR/hold.err" </dev/null &
RPID=$!
TPIDS="$TPIDS $RPID"
if wait_until 60 "hold's ready file" test -s "$W/hold.ready"; then
	HPID=$(sed -n 's/^pid //p' "$W/hold.ready")
	hp_cmd ho snapshot -p "$HPID" --db "$W/hold.db" -o "$W/hold.pb.gz" \
		--contents-dir "$W/hold-contents"
	assert_eq 0 "$CMD_RC" "snapshot: $(head -c 300 "$T_DIR/ho.err")"
	assert_eq "3|300" "$(sqlq "$W/hold.db" "SELECT count(*), sum(size) FROM heapprof_block WHERE heap_name = 'snap.heap';")" \
		"the custom heap's blocks are in the snapshot"
	nb=$(sqlq "$W/hold.db" "SELECT count(*) FROM heapprof_block WHERE heap_name = 'libc.malloc';")
	assert_match "^wrote the contents of $nb blocks? to $W/hold-contents/; skipped 3 blocks of custom heaps \\(their addresses are ids, not memory\\)$" \
		"$(tail -n 1 "$T_DIR/ho.out")" "contents line"
	assert_eq "$nb" "$(find "$W/hold-contents" -type f | wc -l | tr -d ' ')" \
		"files of the libc blocks only"
	for id in 0x1 0x2 0x3; do
		[ -e "$W/hold-contents/$id" ] && t_fail "a file for custom heap id $id"
	done
	hp_cmd ho2 snapshot -p "$HPID" --db "$W/hold2.db" -o "$W/hold2.pb.gz" --heap snap.heap
	assert_eq 0 "$CMD_RC" "snapshot --heap snap.heap"
	if [ "$GO_OK" = 1 ]; then
		pprof_top ho2 "$W/hold2.pb.gz" space
		assert_eq 300 "$(top_flat "$T_DIR/ho2.top" hold)" "--heap snap.heap: 300 bytes in hold"
	fi
fi
touch "$W/hold.go"
wait_child 60 "$RPID"
assert_eq 0 "$WAIT_RC" "record of api_snapshot hold"

t_begin "snapshot: errors"
sleep 30 &
SPID=$!
TPIDS="$TPIDS $SPID"
wait_until 20 "sleep's exec" sh -c "grep -qx sleep /proc/$SPID/comm"
expect_error e-notprof 1 "^heapprof: snapshot: pid $SPID \(sleep\) is not profiled by heapprof: it has no heapprof region \(profile it with 'heapprof record -i 1 -p PID' or 'heapprof record -i 1 -- CMD'\)$" \
	snapshot -p "$SPID"
kill "$SPID" 2>/dev/null
wait "$SPID" 2>/dev/null
# With libheapprof loaded but no session: record -p/-n, not a restart.
SLNAME="slp$$"
cp /bin/sleep "$W/$SLNAME"
LD_PRELOAD="$BUILD/libheapprof.so" "$W/$SLNAME" 30 </dev/null >/dev/null 2>&1 &
SPID=$!
TPIDS="$TPIDS $SPID"
wait_until 20 "$SLNAME's exec" sh -c "grep -qx $SLNAME /proc/$SPID/comm && grep -q libheapprof /proc/$SPID/maps"
expect_error e-notprof-lib 1 "^heapprof: snapshot: pid $SPID \\($SLNAME\\) is not profiled by heapprof: it has no heapprof region \\(it has libheapprof loaded: profile it with 'heapprof record -i 1 -p $SPID' \\(or -n $SLNAME\\) and take the snapshot while that session runs\\)$" \
	snapshot -p "$SPID"
expect_error e-notprof-libn 1 "^heapprof: snapshot: no process of yours named '$SLNAME' is profiled by heapprof \\(it has libheapprof loaded: profile it with 'heapprof record -i 1 -n $SLNAME' and take the snapshot while that session runs\\)$" \
	snapshot -n "$SLNAME"
expect_error e-notprof-n 1 "^heapprof: snapshot: no process of yours named 'nosuch$$' is profiled by heapprof \\(profile it with 'heapprof record -i 1 -p PID' or 'heapprof record -i 1 -- CMD'\\)$" \
	snapshot -n "nosuch$$"
kill "$SPID" 2>/dev/null
wait "$SPID" 2>/dev/null
# Beyond pid_max: never a process.
NOPID=$(($(cat /proc/sys/kernel/pid_max) + 1))
expect_error e-nopid 1 "^heapprof: snapshot: no process with pid $NOPID$" snapshot -p "$NOPID"
expect_error e-noargs 2 '^heapprof: snapshot: need -p PID, -n NAME' snapshot
expect_error e-badpid 2 "^heapprof: snapshot: invalid pid 'abc'$" snapshot -p abc
expect_error e-both 2 'exclude each other' snapshot -p 1 -n x
expect_error e-mix 2 'not both' snapshot -p 1 --list
expect_error e-nofile 2 'missing FILE' snapshot --name x
expect_error e-opt 2 "unknown option '--bogus'" snapshot --bogus
expect_error e-nodb 1 'No such file' snapshot --list "$T_DIR/nope.db"
[ -n "${S1DB:-}" ] && expect_error e-noname 1 "no snapshot named 'nosuch' \(heapprof snapshot --list .* shows them\)$" \
	snapshot --name nosuch "$S1DB"
hp_cmd help snapshot --help
assert_eq 0 "$CMD_RC" "snapshot --help"
assert_match '^usage: heapprof snapshot -p PID' "$(cat "$T_DIR/help.out")" "--help text"

# ---------------------------------------------------------------------------
# diff_row FILE SECTION FUNC: "CHANGE RELATIVE A B" of FUNC's row in the
# report section "Top N SECTION by VIEW".
diff_row() {
	awk -v sec="$2" -v fn="$3" '
	/^  Top [0-9]+ / { insec = index($0, " " sec " by ") > 0; next }
	insec && /^ +[0-9]+ +[-+][0-9]+ / && $6 == fn { print $2, $3, $4, $5; exit }' "$1"
}

t_begin "named snapshots: the API under record -i 1"
ADB="$W/api.db"
hp_record api -i 1 -o "$ADB" -- "$PROGS/api_snapshot"
assert_eq 0 "$REC_RC" "record of api_snapshot" || show_err api
assert_eq "before=0 after=0 invalid=-22" "$(cat "$T_DIR/api.out" | grep '^before=')" \
	"the API's return values"
assert_eq "snapshot|before
snapshot|after" \
	"$(sqlq "$ADB" "SELECT reason, name FROM heapprof_dump WHERE name IS NOT NULL ORDER BY ts;")" \
	"named dumps"

t_begin "named snapshots: --list"
hp_cmd al snapshot --list "$ADB"
assert_eq 0 "$CMD_RC" "--list: $(head -c 300 "$T_DIR/al.err")"
list=$(cat "$T_DIR/al.out")
assert_match '^PID +DUMP +NAME +TIME +BLOCKS +BYTES +IN FLIGHT$' "$list" "--list header"
row_b=$(awk '$3 == "before"' "$T_DIR/al.out")
row_a=$(awk '$3 == "after"' "$T_DIR/al.out")
# (Numbered among the process's dumps: a peak's may come before each.)
assert_match '^[0-9]+ +[0-9]+ +before +[0-9.]+ s +[0-9]+ +[0-9]+ +[0-9]+$' "$row_b" "before row"
assert_match '^[0-9]+ +[0-9]+ +after +[0-9.]+ s +[0-9]+ +[0-9]+ +[0-9]+$' "$row_a" "after row"
assert_eq 1 "$(awk -v b="$(awk '{print $2}' <<<"$row_b")" -v a="$(awk '{print $2}' <<<"$row_a")" 'BEGIN { print (a > b) }')" \
	"after comes after before"
read -r _ _ _ _ _ bb bbytes _ <<<"$row_b"
read -r _ _ _ _ _ ab abytes _ <<<"$row_a"
assert_eq "1 11000" "$((ab - bb)) $((abytes - bbytes))" \
	"after - before: +5 -4 blocks, +15000 -4000 bytes"
assert_eq "$bb $bbytes" \
	"$(sqlq "$ADB" "SELECT count(*) || ' ' || sum(b.size) FROM heapprof_block b JOIN heapprof_dump d ON d.id = b.dump_id WHERE d.name = 'before';")" \
	"--list agrees with heapprof_block"

t_begin "named snapshots: diff before,after"
hp_cmd ad diff "$ADB" --dumps before,after
assert_eq 0 "$CMD_RC" "diff --dumps before,after: $(head -c 300 "$T_DIR/ad.err")"
assert_eq "+15000 new 0 15000" "$(diff_row "$T_DIR/ad.out" "growing stacks" alloc_phase2)" \
	"alloc_phase2 grew by phase 2"
assert_eq "-4000 -40.0% 10000 6000" "$(diff_row "$T_DIR/ad.out" "shrinking stacks" alloc_phase1)" \
	"alloc_phase1 shrank by the 4 frees"

t_begin "named snapshots: --name"
hp_cmd an snapshot --name after "$ADB" -o "$W/after.pb.gz"
assert_eq 0 "$CMD_RC" "--name after: $(head -c 300 "$T_DIR/an.err")"
assert_match "^wrote $W/after.pb.gz: process [0-9]+, snapshot 'after' \(dump [0-9]+ of [0-9]+\), [0-9]+ samples, from its blocks$" \
	"$(cat "$T_DIR/an.out")" "--name output"
hp_cmd an2 snapshot --name before "$ADB"
assert_eq 0 "$CMD_RC" "--name before, default output"
[ -s "$W/api.before.pb.gz" ] || t_fail "default output api.before.pb.gz missing"
if [ "$GO_OK" = 1 ]; then
	pprof_top an "$W/after.pb.gz" space
	assert_eq 15000 "$(top_flat "$T_DIR/an.top" alloc_phase2)" "after: alloc_phase2"
	assert_eq 6000 "$(top_flat "$T_DIR/an.top" alloc_phase1)" "after: alloc_phase1"
	hp_cmd ant snapshot --name after "$ADB" -o "$W/after-tags.pb.gz" --with-tags
	gopprof -symbolize=none -raw "$W/after-tags.pb.gz" >"$T_DIR/after.raw" ||
		t_fail "pprof -raw"
	assert_eq 11 "$(grep -A 2 -E '^ +(1000|3000) +(1000|3000) +1 +1:' "$T_DIR/after.raw" | grep -c 'address:\[0x')" \
		"--with-tags: 6 + 5 labelled blocks of 1000 and 3000 bytes"
fi

t_begin "named snapshots: unprofiled, the API returns -ENOTCONN"
bare_run api "$PROGS/api_snapshot"
assert_eq 0 "$BARE_RC" "api_snapshot without heapprof"
assert_eq "before=-107 after=-107 invalid=-22" "$(cat "$T_DIR/api.bare.out")" \
	"return values without heapprof"

t_summary
