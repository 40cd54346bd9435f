#!/usr/bin/env bash
# test_cli.sh BUILD: bad input gets a one-line error and a non-zero exit
# (never a crash: status < 128), bad record options fail before the command
# runs, and SIGUSR1 to `heapprof record` adds a dump.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/known" "$PROGS/waiter" "$PROGS/sigexit"

# expect_error TAG WANT_STATUS CMD...: runs CMD (bounded, in $T_DIR/cwd);
# WANT_STATUS is a number or "any" (non-zero and < 128).  Checks exactly one
# non-empty line on stderr.  Sets ERR_TEXT to that stderr.
mkdir -p "$T_DIR/cwd"
expect_error() {
	local tag=$1 want=$2
	shift 2
	local rc=0
	(cd "$T_DIR/cwd" && exec timeout -k 5 60 "$@") \
		>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" </dev/null || rc=$?
	ERR_TEXT=$(cat "$T_DIR/$tag.err")
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		t_fail "$tag: timed out: $*"
		return 1
	fi
	if [ "$want" = any ]; then
		if [ "$rc" = 0 ] || [ "$rc" -ge 128 ]; then
			t_fail "$tag: expected a non-zero status < 128, got $rc (stderr: $(head -c 300 "$T_DIR/$tag.err"))"
		fi
	else
		assert_eq "$want" "$rc" "$tag: exit status (stderr: $(head -c 300 "$T_DIR/$tag.err"))"
	fi
	local n
	n=$(grep -c . "$T_DIR/$tag.err")
	if [ "$n" != 1 ]; then
		t_fail "$tag: expected a one-line error on stderr, got $n lines: $(head -n 5 "$T_DIR/$tag.err" | tr '\n' '|')"
	fi
	if grep -qiE 'segmentation|core dumped|assert|abort' "$T_DIR/$tag.err"; then
		t_fail "$tag: looks like a crash: $(head -c 300 "$T_DIR/$tag.err")"
	fi
	return 0
}

# A command that proves it ran by creating a file.
RAN="$T_DIR/ran"
not_ran() { # TAG
	if [ -e "$RAN" ]; then
		t_fail "$1: the command ran although the options were bad"
		rm -f "$RAN"
	fi
}

# ---------------------------------------------------------------------------
t_begin "record -i: 0, negative, non-numeric are rejected with status 2"
for v in 0 -5 abc 12abc "" 0x; do
	tag="interval-${v:-empty}"
	expect_error "$tag" 2 "$HP" record -i "$v" -o "$T_DIR/$tag.db" -- /usr/bin/touch "$RAN"
	not_ran "$tag"
done
expect_error interval-long 2 "$HP" record --interval=0 -o "$T_DIR/il.db" -- /usr/bin/touch "$RAN"
not_ran interval-long
assert_match 'interval|-i' "$ERR_TEXT" "the message names the interval"

t_begin "record: sizes take K, M, G (KiB, MiB, GiB), multiples of 1024, on the command line and in a config"
# cfg_line FIELD ARGS...: FIELD's line of `record ARGS... --print-config`.
cfg_line() {
	local f=$1
	shift
	(cd "$T_DIR/cwd" && timeout -k 5 30 "$HP" record "$@" --print-config -- true) 2>/dev/null </dev/null |
		grep "^$f: "
}
assert_eq "sampling_interval_bytes: 4096" "$(cfg_line sampling_interval_bytes -i 4k)" "-i 4k"
assert_eq "sampling_interval_bytes: 4096" "$(cfg_line sampling_interval_bytes -i 4K)" "-i 4K"
assert_eq "sampling_interval_bytes: 4096" "$(cfg_line sampling_interval_bytes --interval=4KiB)" "--interval=4KiB"
assert_eq "sampling_interval_bytes: 1" "$(cfg_line sampling_interval_bytes -i 1B)" "-i 1B"
assert_eq "shmem_size_bytes: 67108864" "$(cfg_line shmem_size_bytes --shmem-size 64M)" "--shmem-size 64M"
assert_eq "shmem_size_bytes: 67108864" "$(cfg_line shmem_size_bytes --shmem-size 64m)" "--shmem-size 64m"
assert_eq "shmem_size_bytes: 2147483648" "$(cfg_line shmem_size_bytes --shmem-size 2GiB)" "--shmem-size 2GiB"
assert_eq "trace_buffer_bytes: 1048576" "$(cfg_line trace_buffer_bytes --trace --trace-buffer 1MiB)" "--trace-buffer 1MiB"
assert_eq "adaptive_sampling_max_sampling_interval_bytes: 65536" \
	"$(cfg_line adaptive_sampling_max_sampling_interval_bytes --adaptive --adaptive-max-interval 64k)" "--adaptive-max-interval 64k"
assert_eq "heap_sampling_intervals: 8192
heap_sampling_intervals: 1048576" \
	"$(cfg_line heap_sampling_intervals --heaps libc.malloc,x --heap-intervals 8k,1M)" "--heap-intervals 8k,1M"
printf 'sampling_interval_bytes: 16k\nshmem_size_bytes: 128MiB\ntrace_mode: ring\ntrace_buffer_bytes: 2M\n' >"$T_DIR/sizes.cfg"
assert_eq "sampling_interval_bytes: 16384" "$(cfg_line sampling_interval_bytes -c "$T_DIR/sizes.cfg")" "config: 16k"
assert_eq "shmem_size_bytes: 134217728" "$(cfg_line shmem_size_bytes -c "$T_DIR/sizes.cfg")" "config: 128MiB"
assert_eq "trace_buffer_bytes: 2097152" "$(cfg_line trace_buffer_bytes -c "$T_DIR/sizes.cfg")" "config: 2M"

t_begin "record: bad sizes are one line and status 2, before the command runs"
UNIT_WHY="unknown unit: want a number of bytes, optionally with K, M or G (or KiB, MiB, GiB), multiples of 1024"
expect_error size-4q 2 "$HP" record -i 4q -o "$T_DIR/s.db" -- /usr/bin/touch "$RAN"
not_ran size-4q
assert_eq "heapprof: record: invalid -i/--interval '4q': $UNIT_WHY" "$ERR_TEXT" "-i 4q"
expect_error size-neg 2 "$HP" record --shmem-size -64M -o "$T_DIR/s.db" -- /usr/bin/touch "$RAN"
not_ran size-neg
assert_eq "heapprof: record: invalid --shmem-size '-64M': must be positive" "$ERR_TEXT" "--shmem-size -64M"
expect_error size-ovf 2 "$HP" record -i 99999999999999999G -o "$T_DIR/s.db" -- /usr/bin/touch "$RAN"
not_ran size-ovf
assert_eq "heapprof: record: invalid -i/--interval '99999999999999999G': too large" "$ERR_TEXT" "-i 99999999999999999G"
expect_error size-range 2 "$HP" record --shmem-size 2T -o "$T_DIR/s.db" -- /usr/bin/touch "$RAN"
not_ran size-range
assert_eq "heapprof: record: invalid --shmem-size '2T': $UNIT_WHY" "$ERR_TEXT" "--shmem-size 2T"
expect_error size-big 2 "$HP" record --shmem-size 2048G -o "$T_DIR/s.db" -- /usr/bin/touch "$RAN"
not_ran size-big
assert_match "^heapprof: record: invalid --shmem-size '2048G': out of range: [0-9]+ to 1099511627776$" "$ERR_TEXT" "--shmem-size 2048G"
expect_error size-mb 2 "$HP" record --shmem-size 64MB -o "$T_DIR/s.db" -- /usr/bin/touch "$RAN"
not_ran size-mb
assert_eq "heapprof: record: invalid --shmem-size '64MB': ambiguous unit: use K, M or G (or KiB, MiB, GiB), multiples of 1024" \
	"$ERR_TEXT" "--shmem-size 64MB"
expect_error size-frac 2 "$HP" record -i 1.5k -o "$T_DIR/s.db" -- /usr/bin/touch "$RAN"
not_ran size-frac
assert_eq "heapprof: record: invalid -i/--interval '1.5k': not a whole number of bytes" "$ERR_TEXT" "-i 1.5k"
printf 'shmem_size_bytes: 4q\n' >"$T_DIR/badsize.cfg"
expect_error size-cfg 2 "$HP" record -c "$T_DIR/badsize.cfg" -o "$T_DIR/s.db" -- /usr/bin/touch "$RAN"
not_ran size-cfg
assert_eq "heapprof: record: config $T_DIR/badsize.cfg:1: field 'shmem_size_bytes': $UNIT_WHY ('4q')" \
	"$ERR_TEXT" "config shmem_size_bytes: 4q"

t_begin "record --unwind xyz, --max-frames 0/abc, unknown option: rejected"
expect_error unwind any "$HP" record --unwind xyz -o "$T_DIR/u.db" -- /usr/bin/touch "$RAN"
not_ran unwind
assert_match 'unwind|xyz' "$ERR_TEXT" "the message names the option"
expect_error maxf0 any "$HP" record --max-frames 0 -o "$T_DIR/m.db" -- /usr/bin/touch "$RAN"
not_ran maxf0
expect_error maxfabc any "$HP" record --max-frames abc -o "$T_DIR/m2.db" -- /usr/bin/touch "$RAN"
not_ran maxfabc
expect_error bogusopt any "$HP" record --bogus-option -o "$T_DIR/b.db" -- /usr/bin/touch "$RAN"
not_ran bogusopt

t_begin "help texts: no stale statements (custom heaps exist; dumps by a snapshot's name)"
rc=0
help=$("$HP" record --help 2>&1) || rc=$?
assert_eq 0 "$rc" "record --help status"
assert_no_match 'until the custom allocator' "$help" "record --help: custom heaps exist"
assert_match '^      --all-heaps        every heap the program registers, and libc\.malloc$' "$help" "record --help: --all-heaps"
assert_match '^      --heaps A,B        profile exactly these heaps \(default: libc\.malloc\)$' "$help" "record --help: --heaps"
assert_match 'multiples of 1024: 4k, 64M' "$help" "record --help: size suffixes"
assert_match 'FILE@NAME for its snapshot named NAME' "$("$HP" diff --help 2>&1)" "diff --help: snapshot names"
assert_match '^  report FILE .*\[--dump N\|NAME\|peak\|end\]' "$("$HP" help 2>&1)" "heapprof help: report --dump NAME|peak|end"

t_begin "record without a command: rejected"
expect_error nocmd1 any "$HP" record
expect_error nocmd2 any "$HP" record --
expect_error nocmd3 any "$HP" record -i 1 -o "$T_DIR/nc.db"

t_begin "record of a nonexistent command: status 127, clear message"
expect_error noexist 127 "$HP" record -o "$T_DIR/ne.db" -- "$T_DIR/no-such-program"
assert_match 'no-such-program' "$ERR_TEXT" "the message names the command"
expect_error noexist-path 127 "$HP" record -o "$T_DIR/ne2.db" -- heapprof-no-such-command-xyz
assert_match 'heapprof-no-such-command-xyz' "$ERR_TEXT" "the message names the command"

t_begin "record -o into a missing directory: error before the command runs"
expect_error badout any "$HP" record -o "$T_DIR/no/such/dir/x.db" -- /usr/bin/touch "$RAN"
not_ran badout

# ---------------------------------------------------------------------------
# A good profile to corrupt.
GOOD="$T_DIR/good.db"
hp_record good -i 1 -o "$GOOD" -- "$PROGS/known" deep-only

t_begin "report on a missing file: error, file not created"
expect_error rep-missing any "$HP" report "$T_DIR/missing.db"
[ -e "$T_DIR/missing.db" ] && t_fail "report created $T_DIR/missing.db"

t_begin "report on a non-SQLite file: error"
printf 'this is not a database\n%.0s' $(seq 200) >"$T_DIR/text.db"
expect_error rep-text any "$HP" report "$T_DIR/text.db"
head -c 65536 /dev/urandom >"$T_DIR/random.db"
expect_error rep-random any "$HP" report "$T_DIR/random.db"

t_begin "report on an empty SQLite database: error"
: >"$T_DIR/zero.db"
expect_error rep-zero any "$HP" report "$T_DIR/zero.db"
sqlite3 "$T_DIR/other.db" "CREATE TABLE t(a); INSERT INTO t VALUES (1);"
expect_error rep-other any "$HP" report "$T_DIR/other.db"

t_begin "report on a corrupt profile: error, no crash"
if db_valid "$GOOD"; then
	cp "$GOOD" "$T_DIR/noframes.db"
	sqlite3 "$T_DIR/noframes.db" "DROP TABLE stack_profile_frame;"
	expect_error rep-noframes any "$HP" report "$T_DIR/noframes.db"
	# Truncated: either still readable (status 0) or a clean error.
	size=$(stat -c %s "$GOOD")
	head -c $((size / 2)) "$GOOD" >"$T_DIR/trunc.db"
	rc=0
	run_bounded 60 "$HP" report "$T_DIR/trunc.db" >"$T_DIR/trunc.out" 2>"$T_DIR/trunc.err" || rc=$?
	assert_le "$rc" 127 "report on a truncated profile: status"
	# Garbage in the middle of the file.
	cp "$GOOD" "$T_DIR/garbled.db"
	dd if=/dev/urandom of="$T_DIR/garbled.db" bs=1024 seek=2 count=4 conv=notrunc 2>/dev/null
	rc=0
	run_bounded 60 "$HP" report "$T_DIR/garbled.db" >"$T_DIR/garbled.out" 2>"$T_DIR/garbled.err" || rc=$?
	assert_le "$rc" 127 "report on a garbled profile: status"
	rc=0
	run_bounded 60 "$HP" sql "$T_DIR/garbled.db" "SELECT count(*) FROM heap_profile_allocation" \
		>"$T_DIR/garbled2.out" 2>"$T_DIR/garbled2.err" || rc=$?
	assert_le "$rc" 127 "sql on a garbled profile: status"
fi

t_begin "report --view / --top with bad values: error"
expect_error rep-view any "$HP" report "$GOOD" --view bogus
expect_error rep-top any "$HP" report "$GOOD" --top abc

t_begin "sql with a bad query or a missing file: error"
expect_error sql-bad any "$HP" sql "$GOOD" "SELEC nonsense FROM nowhere"
expect_error sql-notable any "$HP" sql "$GOOD" "SELECT * FROM no_such_table"
expect_error sql-missing any "$HP" sql "$T_DIR/missing2.db" "SELECT 1"
[ -e "$T_DIR/missing2.db" ] && t_fail "sql created $T_DIR/missing2.db"

t_begin "sql does not modify the profile"
if [ -f "$GOOD" ]; then
	cp "$GOOD" "$T_DIR/ro.db"
	before=$(md5sum <"$T_DIR/ro.db")
	timeout -k 5 60 "$HP" sql "$T_DIR/ro.db" "DELETE FROM heap_profile_allocation" >/dev/null 2>&1 </dev/null
	assert_eq "$before" "$(md5sum <"$T_DIR/ro.db")" "profile checksum after a DELETE through heapprof sql"
fi

t_begin "unknown subcommand: status 2"
rc=0
run_bounded 30 "$HP" no-such-subcommand >/dev/null 2>&1 || rc=$?
assert_eq 2 "$rc" "exit status"
expect_error unknown-cmd 2 "$HP" no-such-subcommand
assert_eq "heapprof: unknown command 'no-such-subcommand' (heapprof help lists them)" "$ERR_TEXT" "no suggestion when nothing is close"

t_begin "heapprof help COMMAND: the command's own --help"
for c in record report pprof flamegraph diff check symbolize sql daemon dump snapshot top serve; do
	a=$("$HP" help "$c" 2>&1)
	ra=$?
	b=$("$HP" "$c" --help 2>&1)
	assert_eq "0 $b" "$ra $a" "heapprof help $c"
done
out=$("$HP" help recrd 2>&1)
assert_eq 2 "$?" "help of an unknown command: status 2"
assert_eq "heapprof: unknown command 'recrd' (heapprof help lists them); did you mean 'record'?" "$out" \
	"help of an unknown command: one line, a suggestion"

t_begin "record's summary on a terminal: what was left, where, what to run next; none for scripts"
if command -v script >/dev/null; then
	# script(1) gives record a terminal (the summary's condition).
	run_bounded 60 script -qec "'$HP' record -i 1 -o '$T_DIR/sum.db' -- '$PROGS/check_gate'" /dev/null \
		>"$T_DIR/sum.tty" 2>&1
	tr -d '\r' <"$T_DIR/sum.tty" >"$T_DIR/sum.out"
	# check_gate: its peak is at its end, keep_fn's 4096 x 2000 B
	# and leak_fn's; they are left at exit, and the buffer of its stdout
	# (a terminal); 64 MiB in grow_fn and the rest allocated.
	assert_match "^heapprof:   pid [0-9]+ \(check_gate\): peak 7\.81 MiB at \+[0-9.]+ s, 100% in keep_fn; 7\.81 MiB left at exit, 100% in keep_fn; 71\.81 MiB allocated in all$" \
		"$(grep '^heapprof:   pid' "$T_DIR/sum.out")" "the peak, what was left at exit, and where"
	assert_eq "heapprof: next: heapprof report $T_DIR/sum.db; heapprof flamegraph $T_DIR/sum.db" \
		"$(grep '^heapprof: next:' "$T_DIR/sum.out")" "the next commands"
	hp_record sumpipe -i 1 -o "$T_DIR/sum2.db" -- "$PROGS/check_gate"
	assert_eq "heapprof: profile written to $T_DIR/sum2.db" "$(grep '^heapprof: ' "$T_DIR/sumpipe.err")" \
		"stderr not a terminal: the one line, as before"
else
	t_skip "script(1) is missing"
fi

t_begin "unknown command or option: did you mean ...?"
for typo in recrod:record reocrd:record rec:record repot:report snapshto:snapshot sq:sql dif:diff flamegrpah:flamegraph; do
	expect_error "dym-${typo%%:*}" 2 "$HP" "${typo%%:*}" x
	assert_eq "heapprof: unknown command '${typo%%:*}' (heapprof help lists them); did you mean '${typo#*:}'?" \
		"$ERR_TEXT" "heapprof ${typo%%:*}"
done
# "re" is the start of record and report: no guess.
expect_error dym-re 2 "$HP" re
assert_eq "heapprof: unknown command 're' (heapprof help lists them)" "$ERR_TEXT" "heapprof re"
expect_error dym-intervl 2 "$HP" record --intervl 5 -- /usr/bin/touch "$RAN"
not_ran dym-intervl
assert_eq "heapprof: record: unknown option '--intervl'; did you mean '--interval'?" "$ERR_TEXT" "record --intervl"
expect_error dym-shmem 2 "$HP" record --shmem-sise=64M -- /usr/bin/touch "$RAN"
not_ran dym-shmem
assert_eq "heapprof: record: unknown option '--shmem-sise=64M'; did you mean '--shmem-size'?" "$ERR_TEXT" "record --shmem-sise=64M"
expect_error dym-tpo 2 "$HP" report "$GOOD" --tpo 5
assert_eq "heapprof: report: unknown option '--tpo'; did you mean '--top'?" "$ERR_TEXT" "report --tpo"
expect_error dym-cvs 2 "$HP" sql "$GOOD" --cvs
assert_eq "heapprof: sql: unknown option '--cvs'; did you mean '--csv'?" "$ERR_TEXT" "sql --cvs"
expect_error dym-fg 2 "$HP" flamegraph "$GOOD" --outptu x.html
assert_eq "heapprof: flamegraph: unknown option '--outptu'; did you mean '--output'?" "$ERR_TEXT" "flamegraph --outptu"
expect_error dym-none 2 "$HP" report "$GOOD" --xyzzy
assert_eq "heapprof: report: unknown option '--xyzzy'" "$ERR_TEXT" "no suggestion when nothing is close"

# ---------------------------------------------------------------------------
t_begin "SIGUSR1 to heapprof record adds a dump"
# waiter: phase1_alloc (10 x malloc(1000), live), writes "ready" to a FIFO,
# blocks until the GO FIFO is opened and closed, then phase2_alloc (20 x
# malloc(500), live), frees 4 of phase 1's blocks, exit 12.  SIGUSR1 is sent
# after "ready", so the first dump has all of phase 1's allocations; what
# happens after may or may not be in it, but the last dump has everything
# (a free after the first dump is a negative row at the last one).
READY="$T_DIR/ready.fifo"
GO="$T_DIR/go.fifo"
mkfifo "$READY" "$GO"
SDB="$T_DIR/usr1.db"
"$HP" record -i 1 -o "$SDB" -- "$PROGS/waiter" "$READY" "$GO" \
	>"$T_DIR/usr1.out" 2>"$T_DIR/usr1.err" </dev/null &
HP_PID=$!
line=$(timeout 60 cat "$READY")
if [ "$line" != ready ]; then
	t_fail "waiter did not get ready (got '$line'); stderr: $(head -c 300 "$T_DIR/usr1.err")"
	kill -KILL "$HP_PID" 2>/dev/null
	# Unblock anything still waiting on the FIFOs.
	timeout 5 sh -c ': >"$1"' sh "$GO" 2>/dev/null
	wait "$HP_PID" 2>/dev/null
else
	kill -USR1 "$HP_PID"
	# The first dump is taken while waiter waits: exact, and from /proc.
	wait_dumps "$SDB" 1
	timeout 60 sh -c ': >"$1"' sh "$GO" || t_fail "could not release waiter through $GO"
	wait_pid_bounded 60 "$HP_PID"
	assert_eq 12 "$WAIT_RC" "heapprof record exit status" ||
		sed -e 's/^/    | /' "$T_DIR/usr1.err" | tail -n 10
	if db_valid "$SDB"; then
		# The signal's dump and the end's (the peak's beside them:
		# test_peak.sh).
		assert_eq 2 "$(sqlq "$SDB" "SELECT count(*) FROM heapprof_dump WHERE reason != 'peak';")" "dumps"
		d1=$(sqlq "$SDB" "SELECT min(ts) FROM heapprof_dump WHERE reason != 'peak';")
		d2=$(sqlq "$SDB" "SELECT max(ts) FROM heapprof_dump WHERE reason != 'peak';")
		assert_eq end "$(sqlq "$SDB" "SELECT reason FROM heapprof_dump ORDER BY ts DESC LIMIT 1;")" \
			"reason of the last dump"
		assert_eq signal "$(sqlq "$SDB" "SELECT reason FROM heapprof_dump WHERE reason != 'peak' ORDER BY ts LIMIT 1;")" \
			"reason of the first dump"
		if [ -n "$d1" ] && [ "$d1" != "$d2" ]; then
			# At the first dump: all of phase 1's allocations, 6..10 live.
			check_views "$SDB" phase1_alloc 10 10000 - - "$d1"
			read -r _ _ o1 s1 <<<"$(leaf_views "$SDB" phase1_alloc "$d1")"
			assert_ge "$o1" 6 "phase1_alloc objects at the first dump"
			assert_le "$o1" 10 "phase1_alloc objects at the first dump"
			assert_eq $((o1 * 1000)) "$s1" "phase1_alloc space at the first dump"
			# At the end: phase 1 (4 freed) and phase 2.
			check_views "$SDB" phase1_alloc 10 10000 6 6000 "$d2"
			check_views "$SDB" phase2_alloc 20 10000 20 10000 "$d2"
			p2=$(leaf_views "$SDB" phase2_alloc "$d1" | cut -d' ' -f1)
			assert_le "$p2" 20 "phase2_alloc objects at the first dump"
			# Deltas: no row of the last dump is an allocation of phase 1.
			assert_eq 0 "$(sqlq "$SDB" "SELECT count(*) FROM heap_profile_allocation a
			  JOIN stack_profile_callsite c ON a.callsite_id = c.id
			  JOIN stack_profile_frame f ON c.frame_id = f.id
			  WHERE f.name = 'phase1_alloc' AND a.ts = $d2 AND a.count > 0;")" \
				"positive phase1_alloc rows at the last dump (nothing new was allocated there)"
			assert_eq 0 "$(sqlq "$SDB" "SELECT count(*) FROM heap_profile_allocation
			  WHERE ts NOT IN (SELECT ts FROM heapprof_dump);")" \
				"rows belong to a dump ts"
		else
			t_fail "dump timestamps: first '$d1', last '$d2'"
		fi
	fi
fi

# ---------------------------------------------------------------------------
t_begin "process memory beside the profile at each dump (RSS, mallinfo2)"
# The same run: the SIGUSR1 dump was taken while waiter ran, so RSS comes
# from /proc/PID/status; the end dump after it exited, from the process's
# own reading in the library destructor (statm and mallinfo2).
if [ -n "${d1:-}" ] && [ -n "${d2:-}" ] && [ "$d1" != "$d2" ]; then
	mem() { sqlq "$SDB" "SELECT value FROM heapprof_dump_memory WHERE ts = $1 AND name = '$2' AND source = '$3';"; }
	rss1=$(mem "$d1" rss proc)
	peak1=$(mem "$d1" rss_peak proc)
	anon1=$(mem "$d1" rss_anon proc)
	assert_ge "${rss1:-0}" 100000 "RSS at the SIGUSR1 dump (from /proc)"
	assert_ge "${peak1:-0}" "${rss1:-0}" "peak RSS >= RSS at the SIGUSR1 dump"
	assert_le "${anon1:-0}" "${rss1:-0}" "anonymous RSS <= RSS"
	assert_eq "" "$(mem "$d1" malloc_in_use exit)" "no mallinfo2 while the process runs"
	rss2=$(mem "$d2" rss exit)
	inuse=$(mem "$d2" malloc_in_use exit)
	mfree=$(mem "$d2" malloc_free exit)
	msys=$(mem "$d2" malloc_system exit)
	assert_ge "${rss2:-0}" 100000 "RSS at exit"
	# 6 x 1000 + 20 x 500 bytes are live at exit, each with a malloc header.
	assert_ge "${inuse:-0}" 16000 "mallinfo2 in use at exit"
	assert_ge "${msys:-0}" "$(( ${inuse:-0} + ${mfree:-0} ))" "mallinfo2: from the OS >= in use + free"
	"$HP" report "$SDB" >"$T_DIR/usr1.report" 2>&1
	assert_match "memory of the process at this dump \(read by the process at exit\)" \
		"$(cat "$T_DIR/usr1.report")" "report: memory section"
	space2=$(sqlq "$SDB" "SELECT sum(size) FROM heap_profile_allocation WHERE ts <= $d2;")
	assert_ge "${inuse:-0}" "${space2:-0}" "mallinfo2 in use >= the exact profiled heap"
	assert_match "profiled heap +[0-9.]+ KiB \\(${space2:-x} B\\) +libc.malloc space, exact" \
		"$(cat "$T_DIR/usr1.report")" "report: exact profiled heap beside malloc's figures"
	assert_match "malloc in use" "$(cat "$T_DIR/usr1.report")" "report: mallinfo2"
	"$HP" report "$SDB" --dump 1 >"$T_DIR/usr1.report1" 2>&1
	assert_match "RSS, peak" "$(cat "$T_DIR/usr1.report1")" "report --dump 1: peak RSS from /proc"
else
	t_skip "the SIGUSR1 run above failed"
fi

# ---------------------------------------------------------------------------
t_begin "exit() from a signal handler: RSS at exit, no mallinfo2 (its locks)"
MDB="$T_DIR/sigexit.db"
hp_record sigexit -i 1 -o "$MDB" -- "$PROGS/sigexit"
assert_eq 3 "$REC_RC" "exit status from the handler's exit(3)" || show_err sigexit
assert_eq allocated "$(cat "$T_DIR/sigexit.out")" "program output"
if db_valid "$MDB"; then
	assert_ge "$(sqlq "$MDB" "SELECT value FROM heapprof_dump_memory WHERE name = 'rss' AND source = 'exit';")" 100000 "RSS read at exit"
	assert_eq 0 "$(sqlq "$MDB" "SELECT count(*) FROM heapprof_dump_memory WHERE name LIKE 'malloc%';")" \
		"no mallinfo2 from a signal handler"
	check_views "$MDB" main 1 1000 1 1000
fi

t_summary
