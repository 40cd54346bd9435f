#!/usr/bin/env bash
# test_badinput.sh BUILD: table-driven bad input for the command line, the
# config file and the profile readers (issue 8, Deliver 4; the daemon's
# socket is test_daemon.sh's).  Every flag that takes a value, of every
# command, with invalid values; every config field likewise, and config
# files that are missing, a directory, binary, oversize, with unknown and
# duplicate keys; truncated, corrupted and foreign files given to every
# command that reads a profile.
#
# Each case must exit non-zero below 128 (no crash, no sanitizer report),
# within a bound (no hang), with exactly one line on stderr that names the
# problem (a regex per case: the flag, the field or the file); `record`
# must not run its command, and no input file may change (md5 before and
# after).  The last line counts them:
#   badinput: cases N, crashes 0, hangs 0, multi-line or silent errors 0
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/known"

CASES=0 CRASHES=0 HANGS=0 SILENT=0 UNNAMED=0 CHANGED=0
CWD="$T_DIR/cwd"
mkdir -p "$CWD"
RAN="$T_DIR/ran"
# No daemon may answer: `dump` and `record -p` cases must fail on their
# arguments, not reach someone's heapprofd.
export XDG_RUNTIME_DIR="$T_DIR/xdg"
mkdir -m 700 "$XDG_RUNTIME_DIR"

# bad TAG REGEX CMD...: one case.  REGEX must match the single stderr line
# (grep -E).  Files named in WATCH (space-separated) must not change.
WATCH=""
# HEAPPROF_BADINPUT_STRIDE=K runs every K-th case only (1: all, the
# default; a sanitizer build runs a third, tests/san_env.sh: every case
# starts the instrumented heapprof, seconds under ASan).
STRIDE=${HEAPPROF_BADINPUT_STRIDE:-1}
t_is_num "$STRIDE" && [ "$STRIDE" -ge 1 ] || STRIDE=1
SKIPPED=0
bad() {
	local tag=$1 want=$2
	shift 2
	CASES=$((CASES + 1))
	if [ $(((CASES - 1) % STRIDE)) != 0 ]; then
		SKIPPED=$((SKIPPED + 1))
		return
	fi
	# Few processes of the test's own per case: the suite's time was
	# four fifths forks around a heapprof call of a few ms (stderr is
	# read and counted with bash's builtins; grep only for the message).
	local sums_before="" sums_after=""
	# shellcheck disable=SC2086 # WATCH is a list of paths
	[ -z "$WATCH" ] || sums_before=$(md5sum -- $WATCH 2>&1)
	rm -f "$RAN"
	local rc=0
	(cd "$CWD" && exec timeout -k 5 30 "$@") >"$T_DIR/case.out" 2>"$T_DIR/case.err" </dev/null || rc=$?
	local text="" err line lines nonempty=0
	IFS= read -r -d '' text <"$T_DIR/case.err"
	err=${text:0:400}
	err=${err//$'\n'/|}
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		HANGS=$((HANGS + 1))
		t_fail "$tag: hung (status $rc): $*"
		return
	fi
	if [ "$rc" -ge 128 ] || [[ $text == *Sanitizer* || $text == *"runtime error:"* || $text == *"core dumped"* ]]; then
		CRASHES=$((CRASHES + 1))
		t_fail "$tag: crashed (status $rc): $* -- $err"
		return
	fi
	# As wc -l (newlines) and grep -c . (lines with a character) count.
	line=${text//[!$'\n']/}
	lines=${#line}
	while IFS= read -r line || [ -n "$line" ]; do
		[ -z "$line" ] || nonempty=$((nonempty + 1))
	done <<<"${text%$'\n'}"
	if [ "$rc" = 0 ] || [ "$lines" != 1 ] || [ "$nonempty" != 1 ]; then
		SILENT=$((SILENT + 1))
		t_fail "$tag: want a non-zero status and one line on stderr, got status $rc and $lines lines: $* -- $err"
		return
	fi
	if ! grep -qE -- "$want" "$T_DIR/case.err"; then
		UNNAMED=$((UNNAMED + 1))
		t_fail "$tag: the message does not name /$want/: $err"
	fi
	if [ -e "$RAN" ]; then
		t_fail "$tag: record ran its command despite the bad input"
	fi
	# shellcheck disable=SC2086
	[ -z "$WATCH" ] || sums_after=$(md5sum -- $WATCH 2>&1)
	if [ "$sums_before" != "$sums_after" ]; then
		CHANGED=$((CHANGED + 1))
		t_fail "$tag: an input file changed: $*"
	fi
}

# rx TEXT: TEXT as a regex that matches itself.
rx() { printf '%s' "$1" | sed -e 's/[][\.*^$+?(){}|/]/\\&/g'; }

HUGE=99999999999999999999
# Values no numeric flag accepts.
NUM_BAD=(-1 "$HUGE" abc "" 10x " 5" 5. 1e3 0x10 +5 "5 5")

# ---------------------------------------------------------------------------
t_begin "record: every flag with a value, invalid values"
# flag, the name the message uses (regex), and values beyond NUM_BAD.
rec_flag() { # FLAG NAME_RX EXTRA_BAD...
	local flag=$1 name=$2 v
	shift 2
	for v in "${NUM_BAD[@]}" "$@"; do
		bad "record $flag '$v'" "$name" "$HP" record -o "$T_DIR/r.db" "$flag" "$v" -- /usr/bin/touch "$RAN"
	done
	# The = form, once per flag.
	case $flag in --*) bad "record $flag=abc" "$name" "$HP" record -o "$T_DIR/r.db" "$flag=abc" -- /usr/bin/touch "$RAN" ;; esac
	# The value missing at the end.
	bad "record $flag (no value)" "$(rx "$flag")" "$HP" record "$flag"
}
rec_flag -i 'interval' 0 1099511627777
rec_flag --interval 'interval' 0
rec_flag --max-frames 'max-frames' 0 257
rec_flag --shmem-size 'shmem-size' 0 1048575 1099511627777
rec_flag -p 'pid' 0 4194305 1,1 1,, ,1
rec_flag --pid 'pid' 0
rec_flag -d 'duration' 0 0.0001 8640001 1s
rec_flag --duration 'duration' 0
rec_flag --dump-interval 'dump-interval' 0 9 8640000001
rec_flag --dump-phase 'dump-phase' 8640000001
rec_flag --adaptive-max-interval 'adaptive-max-interval' 0 1099511627777
rec_flag --trace-buffer 'trace-buffer' 0 65535 17179869185
rec_flag --heap-intervals 'heap-intervals' 0 1,0 1,,2
# Optional values (--flag=V only).
for v in "" 0 -1 "$HUGE" abc 10x 60001; do
	bad "record --block-client=$v" 'block-client' "$HP" record -o "$T_DIR/r.db" "--block-client=$v" -- /usr/bin/touch "$RAN"
done
for v in "" 0 -1 0% 101% 1.01 1.5 0.001 abc 10x 90%% "$HUGE"; do
	bad "record --adaptive=$v" 'adaptive' "$HP" record -o "$T_DIR/r.db" "--adaptive=$v" -- /usr/bin/touch "$RAN"
done
for v in "" xyz STREAMING stream 1; do
	bad "record --trace=$v" 'trace' "$HP" record -o "$T_DIR/r.db" "--trace=$v" -- /usr/bin/touch "$RAN"
done
# Words.
for v in "" xyz DWARF frame-pointer 1; do
	bad "record --unwind '$v'" 'unwind' "$HP" record -o "$T_DIR/r.db" --unwind "$v" -- /usr/bin/touch "$RAN"
done
LONG300=$(printf 'n%.0s' $(seq 300))
LONG64=$(printf 'h%.0s' $(seq 64))
for v in "" "," "a,,b" "$LONG300"; do
	bad "record -n '${v:0:20}'" 'name' "$HP" record -o "$T_DIR/r.db" -n "$v"
done
for flag in --heaps --exclude-heaps; do
	for v in "" "," "a,,b" "$LONG64"; do
		bad "record $flag '${v:0:20}'" "$(rx "${flag#--}")" "$HP" record -o "$T_DIR/r.db" --all-heaps "$flag" "$v" -- /usr/bin/touch "$RAN"
	done
done
MANY_HEAPS=$(seq -s, -f 'h%g' 65)
bad "record --heaps (65 heaps)" 'heaps' "$HP" record -o "$T_DIR/r.db" --heaps "$MANY_HEAPS" -- /usr/bin/touch "$RAN"
bad "record --heap-intervals (2 for 1 heap)" 'heap-intervals' "$HP" record -o "$T_DIR/r.db" --heaps a --heap-intervals 1,2 -- /usr/bin/touch "$RAN"
bad "record --exclude-heaps without --all-heaps" 'exclude-heaps' "$HP" record -o "$T_DIR/r.db" --exclude-heaps a -- /usr/bin/touch "$RAN"
bad "record --heaps with --all-heaps" 'heaps' "$HP" record -o "$T_DIR/r.db" --heaps a --all-heaps -- /usr/bin/touch "$RAN"
MANY_PIDS=$(seq -s, 1 1025)
bad "record -p (1025 pids)" 'pid' "$HP" record -p "$MANY_PIDS"
bad "record -o ''" 'output' "$HP" record -o "" -- /usr/bin/touch "$RAN"
bad "record -c ''" 'config' "$HP" record -c "" -- /usr/bin/touch "$RAN"
bad "record --trace-buffer without --trace" 'trace-buffer' "$HP" record -o "$T_DIR/r.db" --trace-buffer 65536 -- /usr/bin/touch "$RAN"
bad "record --dump-phase without --dump-interval" 'dump-phase' "$HP" record -o "$T_DIR/r.db" --dump-phase 10 -- /usr/bin/touch "$RAN"
bad "record --adaptive-max-interval without --adaptive" 'adaptive-max-interval' "$HP" record -o "$T_DIR/r.db" --adaptive-max-interval 100000 -- /usr/bin/touch "$RAN"
bad "record --adaptive-max-interval below -i" 'adaptive-max-interval' "$HP" record -o "$T_DIR/r.db" -i 4096 --adaptive --adaptive-max-interval 100 -- /usr/bin/touch "$RAN"
bad "record --no-startup without -n" 'no-startup' "$HP" record -o "$T_DIR/r.db" --no-startup -- /usr/bin/touch "$RAN"
bad "record -p with a command" 'pid|CMD' "$HP" record -p 1 -- /usr/bin/touch "$RAN"
for f in --no-startup --follow-fork --dump-at-max --all-heaps --print-config --help; do
	bad "record $f=1" "$(rx "$f")" "$HP" record "$f=1" -- /usr/bin/touch "$RAN"
done
bad "record --bogus" 'bogus' "$HP" record --bogus -- /usr/bin/touch "$RAN"
bad "record -Z" "'-Z'" "$HP" record -Z -- /usr/bin/touch "$RAN"
bad "record (nothing)" 'nothing to profile|CMD' "$HP" record
bad "record --" 'nothing to profile|CMD' "$HP" record --
bad "record -- ''" 'program|CMD|empty' "$HP" record -- ""

# ---------------------------------------------------------------------------
t_begin "config: every field with invalid values"
# cfg TAG REGEX TEXT: TEXT as a config file given to record -c.
CFG_N=0
cfg() {
	local tag=$1 want=$2 text=$3
	CFG_N=$((CFG_N + 1))
	local f="$T_DIR/c$CFG_N.cfg"
	printf '%b' "$text" >"$f"
	WATCH="$f" bad "config $tag" "$want" "$HP" record -c "$f" -o "$T_DIR/r.db" -- /usr/bin/touch "$RAN"
}
# cfg_alone TAG REGEX TEXT: the same without a command on the command line
# (fields about the targets; a `-- CMD` would replace or conflict with them).
cfg_alone() {
	local tag=$1 want=$2 text=$3
	CFG_N=$((CFG_N + 1))
	local f="$T_DIR/c$CFG_N.cfg"
	printf '%b' "$text" >"$f"
	WATCH="$f" bad "config $tag" "$want" "$HP" record -c "$f" -o "$T_DIR/r.db"
}
U64_BAD=(-1 "$HUGE" abc 10x 1.5 0x10 '"5"' true "" 1e3)
cfg_num() { # FIELD EXTRA_BAD...
	local field=$1 v
	shift
	for v in "${U64_BAD[@]}" "$@"; do
		cfg "$field: '$v'" "$field" "$field: $v\n"
	done
	cfg "$field twice" "$field" "$field: 5\n$field: 6\n"
}
cfg_num sampling_interval_bytes 0 1099511627777
cfg_num max_frames 0 257
cfg_num shmem_size_bytes 0 1048575 1099511627777
cfg_num duration_ms 8640000001
cfg_num block_client_timeout_us 0 60000001
cfg_num adaptive_sampling_max_sampling_interval_bytes 0 1099511627777
cfg_num trace_buffer_bytes 0 65535 17179869185
for v in "${U64_BAD[@]}" 0 4194305; do
	cfg_alone "pid: '$v'" 'pid' "pid: $v\n"
done
cfg_alone "pid duplicate" 'pid' "pid: 5\npid: 5\n"
for v in -1 "$HUGE" abc 10x 0 1.5 1.001 '"0.5"' 0.0001 ""; do
	cfg "adaptive_sampling_shmem_threshold: '$v'" 'adaptive_sampling_shmem_threshold' "adaptive_sampling_shmem_threshold: $v\n"
done
for v in "${U64_BAD[@]}" 0; do
	cfg "heap_sampling_intervals: '$v'" 'heap_sampling_intervals' "heaps: \"a\"\nheap_sampling_intervals: $v\n"
done
cfg "heap_sampling_intervals: 2 for 1 heap" 'heap_sampling_intervals' "heaps: \"a\"\nheap_sampling_intervals: 1\nheap_sampling_intervals: 2\n"
for field in dump_interval_ms dump_phase_ms; do
	for v in "${U64_BAD[@]}" 8640000001; do
		cfg "$field: '$v'" "$field" "continuous_dump_config { dump_interval_ms: 100 $field: $v }\n"
	done
	cfg "$field outside the block" "$field" "$field: 100\n"
done
cfg "dump_interval_ms: 9" 'dump_interval_ms' "continuous_dump_config { dump_interval_ms: 9 }\n"
cfg "dump_phase_ms without dump_interval_ms" 'dump_phase_ms' "continuous_dump_config { dump_phase_ms: 9 }\n"
cfg "continuous_dump_config: 5" 'continuous_dump_config' "continuous_dump_config: 5\n"
cfg "continuous_dump_config unterminated" 'continuous_dump_config' "continuous_dump_config {\n dump_interval_ms: 100\n"
cfg "continuous_dump_config twice" 'continuous_dump_config' "continuous_dump_config { dump_interval_ms: 100 }\ncontinuous_dump_config { dump_interval_ms: 100 }\n"
cfg "continuous_dump_config unknown inner" 'bogus' "continuous_dump_config { bogus: 1 }\n"
for field in no_startup no_running block_client dump_at_max all_heaps follow_fork follow_exec; do
	for v in yes 1 0 '"true"' TRUE "" abc; do
		cfg "$field: '$v'" "$field" "$field: $v\n"
	done
	cfg "$field twice" "$field" "$field: true\n$field: true\n"
done
for v in '""' xyz '"DWARF"' 5 '"fp' ""; do
	cfg "unwind: '$v'" 'unwind' "unwind: $v\n"
done
for v in '""' xyz '"STREAMING"' 5 '"ring' ""; do
	cfg "trace_mode: '$v'" 'trace_mode' "trace_mode: $v\n"
done
cfg "trace_buffer_bytes without trace_mode" 'trace_buffer_bytes' "trace_buffer_bytes: 65536\n"
for v in '""' abc 5 '"unterminated' "\"$LONG300\"" '"a\\q"' ""; do
	cfg_alone "process_cmdline: '${v:0:20}'" 'process_cmdline' "process_cmdline: $v\n"
done
cfg_alone "process_cmdline duplicate" 'process_cmdline' "process_cmdline: \"a\"\nprocess_cmdline: \"a\"\n"
for field in heaps exclude_heaps; do
	for v in '""' abc 5 '"unterminated' "\"$LONG64\"" ""; do
		cfg "$field: '${v:0:20}'" "$field" "all_heaps: true\n$field: $v\n"
	done
done
for v in '""' abc 5 '"unterminated' ""; do
	cfg "output: '$v'" 'output' "output: $v\n"
done
cfg "output twice" 'output' "output: \"a.db\"\noutput: \"b.db\"\n"
for v in '""' abc 5 '"unterminated' ""; do
	cfg_alone "command: '$v'" 'command' "command: $v\n"
done
cfg_alone "command with pid" 'pid|command' "command: \"/usr/bin/touch\"\ncommand: \"$RAN\"\npid: 1\n"
cfg "block_client_timeout_us without block_client" 'block_client_timeout_us' "block_client_timeout_us: 1000\n"
cfg "adaptive max without threshold" 'adaptive_sampling_max_sampling_interval_bytes' "adaptive_sampling_max_sampling_interval_bytes: 100000\n"
cfg "exclude_heaps without all_heaps" 'exclude_heaps' "exclude_heaps: \"a\"\n"
cfg "heaps with all_heaps" 'heaps' "heaps: \"a\"\nall_heaps: true\n"
cfg_alone "no_startup and no_running" 'no_running' "process_cmdline: \"x\"\nno_startup: true\nno_running: true\n"
cfg "unknown key (heapprofd's)" 'max_heapprofd_memory_kb' "max_heapprofd_memory_kb: 5\n"
cfg "unknown key" 'no_such_field' "no_such_field: 5\n"
cfg "key without a value" 'max_frames' "max_frames:\n"
cfg "key without a colon" 'max_frames' "max_frames 5\n"
cfg "a bare word" 'garbage' "garbage\n"
cfg "a stray }" '\}' "}\n"
# The file itself.
bad "config missing" 'no-such\.cfg' "$HP" record -c "$T_DIR/no-such.cfg" -o "$T_DIR/r.db" -- /usr/bin/touch "$RAN"
mkdir -p "$T_DIR/cfgdir"
bad "config a directory" 'cfgdir' "$HP" record -c "$T_DIR/cfgdir" -o "$T_DIR/r.db" -- /usr/bin/touch "$RAN"
head -c 4096 /dev/urandom >"$T_DIR/binary.cfg"
WATCH="$T_DIR/binary.cfg" bad "config binary garbage" 'binary\.cfg' "$HP" record -c "$T_DIR/binary.cfg" -o "$T_DIR/r.db" -- /usr/bin/touch "$RAN"
cp /bin/true "$T_DIR/elf.cfg"
WATCH="$T_DIR/elf.cfg" bad "config an ELF file" 'elf\.cfg' "$HP" record -c "$T_DIR/elf.cfg" -o "$T_DIR/r.db" -- /usr/bin/touch "$RAN"
{ for i in $(seq 40000); do echo "# comment line $i padding padding"; done; echo "max_frames: 5"; } >"$T_DIR/big.cfg"
WATCH="$T_DIR/big.cfg" bad "config oversize (> 1 MiB)" 'big\.cfg.*(large|MiB)' "$HP" record -c "$T_DIR/big.cfg" -o "$T_DIR/r.db" -- /usr/bin/touch "$RAN"
bad "config /dev/zero (endless)" '/dev/zero' "$HP" record -c /dev/zero -o "$T_DIR/r.db" -- /usr/bin/touch "$RAN"
printf 'max_frames: 5\x00\n' >"$T_DIR/nul.cfg"
WATCH="$T_DIR/nul.cfg" bad "config with a NUL byte" 'nul\.cfg' "$HP" record -c "$T_DIR/nul.cfg" -o "$T_DIR/r.db" -- /usr/bin/touch "$RAN"
printf 'max_frames: 5\n\xff\xfe\n' >"$T_DIR/latin.cfg"
WATCH="$T_DIR/latin.cfg" bad "config with invalid bytes" 'latin\.cfg' "$HP" record -c "$T_DIR/latin.cfg" -o "$T_DIR/r.db" -- /usr/bin/touch "$RAN"
printf 'max_frames: 5\n' >"$T_DIR/dash.cfg"
rc=0
(cd "$CWD" && timeout -k 5 30 "$HP" record -c - -o "$T_DIR/r.db" --max-frames abc -- /usr/bin/touch "$RAN") \
	<"$T_DIR/dash.cfg" >/dev/null 2>"$T_DIR/dash.err" || rc=$?
CASES=$((CASES + 1))
assert_eq 2 "$rc" "record -c - then a bad flag: status"
assert_eq 1 "$(wc -l <"$T_DIR/dash.err")" "record -c - then a bad flag: one line"

# ---------------------------------------------------------------------------
# A good profile for the readers' flag cases and as the base of bad files.
GOOD="$T_DIR/good.db"
hp_record good -i 1 --dump-interval 10 -o "$GOOD" -- "$PROGS/known" deep-only
if ! db_valid "$GOOD"; then
	t_fail "no good profile; the reader cases cannot run"
	t_summary
fi
GOOD_PID=$(sqlq "$GOOD" "SELECT pid FROM process LIMIT 1;")
NDUMPS=$(sqlq "$GOOD" "SELECT count(*) FROM heapprof_dump;")

t_begin "readers: every flag with a value, invalid values"
WATCH="$GOOD"
rd_flag() { # CMD... -- FLAG NAME_RX BAD...: each BAD value, then FLAG without one
	local pre=() v
	while [ "$1" != -- ]; do
		pre+=("$1")
		shift
	done
	shift
	local flag=$1 name=$2
	shift 2
	for v in "$@"; do
		bad "${pre[*]} $flag '$v'" "$name" "$HP" "${pre[@]}" "$flag" "$v"
	done
	bad "${pre[*]} $flag (no value)" "$(rx "$flag")" "$HP" "${pre[@]}" "$flag"
}
VIEW_BAD=("" bogus SPACE space,objects 1)
DUMP_BAD=(0 "" "$HUGE" -"$HUGE" 99 -99 no-such-snapshot "$LONG300" " 1" +1)
DUR_BAD=("" abc 10x -- 1.5 "${HUGE}s" 1.0000000001s 5m 1h "1 s" +-1s)
rd_flag report "$GOOD" -- --view 'view' "${VIEW_BAD[@]}"
rd_flag report "$GOOD" -- --top 'top' "${NUM_BAD[@]}" 0
rd_flag report "$GOOD" -- --dump 'dump|snapshot named' "${DUMP_BAD[@]}"
rd_flag report "$GOOD" -- --pid 'pid' "${NUM_BAD[@]}" 0 12345678
rd_flag report "$GOOD" -- --temporary-threshold 'temporary-threshold' "${DUR_BAD[@]}" -1ms
rd_flag pprof "$GOOD" -o "$T_DIR/p.pb.gz" -- --dump 'dump|snapshot named' "${DUMP_BAD[@]}"
rd_flag pprof "$GOOD" -o "$T_DIR/p.pb.gz" -- --pid 'pid' "${NUM_BAD[@]}" 0 12345678
rd_flag pprof "$GOOD" -o "$T_DIR/p.pb.gz" -- --heap 'heap' "" bogus.heap "$LONG300"
rd_flag pprof "$GOOD" -o "$T_DIR/p.pb.gz" -- --from 'from|trace' "${DUR_BAD[@]}" 1s
rd_flag pprof "$GOOD" -o "$T_DIR/p.pb.gz" -- --to 'to|trace' "${DUR_BAD[@]}" 1s
rd_flag pprof "$GOOD" -- -o 'output|p.pb.gz|/proc' "" /proc/version/x.pb.gz
bad "pprof --dump with --all" 'all' "$HP" pprof "$GOOD" -o "$T_DIR/p.pb.gz" --dump 1 --all
bad "pprof --heap with --all-heaps" 'heap' "$HP" pprof "$GOOD" -o "$T_DIR/p.pb.gz" --heap libc.malloc --all-heaps
rd_flag flamegraph "$GOOD" -- -o 'output|/proc' "" /proc/version/x.html
rd_flag flamegraph "$GOOD" -o "$T_DIR/f.html" -- --view 'view' "${VIEW_BAD[@]}"
rd_flag flamegraph "$GOOD" -o "$T_DIR/f.html" -- --from 'from|trace' "${DUR_BAD[@]}" 1s
rd_flag flamegraph "$GOOD" -o "$T_DIR/f.html" -- --to 'to|trace' "${DUR_BAD[@]}" 1s
rd_flag diff "$GOOD" "$GOOD" -- --view 'view' "${VIEW_BAD[@]}"
rd_flag diff "$GOOD" "$GOOD" -- --top 'top' "${NUM_BAD[@]}" 0
rd_flag diff "$GOOD" "$GOOD" -- --heap 'heap' "" bogus.heap
rd_flag diff "$GOOD" "$GOOD" -- -o 'output|/proc' "" /proc/version/x.pb.gz
rd_flag diff "$GOOD" -- --dumps 'dump|snapshot named' "" 1 , 1, ,1 1,2,3 0,1 1,0 "1,$HUGE" 1,99 "1,no-such" "$HUGE,1"
rd_flag diff "$GOOD" "$GOOD" -- --pid 'pid' "" 0 -1 abc 10x "$HUGE" 1,2,3 , 12345678 "$GOOD_PID,12345678"
for at in 0 "" "$HUGE" 99 -99 no-such; do
	bad "diff FILE@$at" "@|dump|snapshot" "$HP" diff "$GOOD@$at" "$GOOD"
done
bad "diff with one file" 'two profiles|dumps' "$HP" diff "$GOOD"
bad "diff with three files" 'argument|three|two' "$HP" diff "$GOOD" "$GOOD" "$GOOD"
# (dump 999: the good profile has one dump or a few, as its program's run
# took 10 ms or more with --dump-interval 10)
bad "diff A B --dumps" 'dump' "$HP" diff "$GOOD" "$GOOD" --dumps 1,999
for v in "" 0 -1 abc 10x "$HUGE" 4194305; do
	bad "snapshot -p '$v'" 'pid' "$HP" snapshot -p "$v"
	bad "dump -p '$v'" 'PID|pid' "$HP" dump -p "$v"
	bad "snapshot --list --pid '$v'" 'pid' "$HP" snapshot --list "$GOOD" --pid "$v"
done
bad "snapshot -p (no value)" "'-p'" "$HP" snapshot -p
bad "dump -p (no value)" "-p|PID" "$HP" dump -p
bad "snapshot -n ''" 'name' "$HP" snapshot -n ""
bad "snapshot -n (long)" 'name' "$HP" snapshot -n "$LONG300"
bad "snapshot -n (no such process)" 'no-such-process-xyz' "$HP" snapshot -n no-such-process-xyz
bad "snapshot -p (no such process)" '4194303' "$HP" snapshot -p 4194303
for v in "" "$LONG300"; do
	bad "snapshot --name '${v:0:20}'" 'name' "$HP" snapshot --name "$v" "$GOOD"
done
bad "snapshot --name no-such" 'no-such' "$HP" snapshot --name no-such "$GOOD"
bad "snapshot --list --heap" 'heap|--list' "$HP" snapshot --list "$GOOD" --heap x
bad "snapshot --list -o" '-o|--list' "$HP" snapshot --list "$GOOD" -o x
bad "snapshot -p 1 --list" 'list|-p' "$HP" snapshot -p 1 --list "$GOOD"
for flag in -o --db --contents-dir --heap; do
	bad "snapshot -p 1 $flag ''" "$(rx "$flag")|empty" "$HP" snapshot -p 1 "$flag" ""
done
bad "sql: bad SQL" 'syntax|SELEC' "$HP" sql "$GOOD" "SELEC nonsense"
bad "sql: no such table" 'no_such_table' "$HP" sql "$GOOD" "SELECT * FROM no_such_table"
bad "sql: a write" 'readonly|read-only|write' "$HP" sql "$GOOD" "DELETE FROM heapprof_dump"
bad "sql: ATTACH" 'ATTACH|attach|not authorized|read|x\.db' "$HP" sql "$GOOD" "ATTACH '$T_DIR/x.db' AS x"
# Each QUERY argument runs in turn (as sqlite3 FILE A B): a second one
# that is not SQL is a syntax error after the first has run.
bad "sql: a second QUERY that is not SQL" 'near "extra": syntax error' "$HP" sql "$GOOD" "SELECT 1" extra
bad "sql: an unknown dot command" "unknown command '\\.bogus'" "$HP" sql "$GOOD" .bogus
bad "sql: .mode xml" "unknown mode 'xml'" "$HP" sql "$GOOD" ".mode xml"
bad "sql: .headers maybe" "invalid \\.headers 'maybe'" "$HP" sql "$GOOD" ".headers maybe"
for cmd in report pprof flamegraph diff symbolize sql snapshot dump daemon; do
	bad "$cmd --bogus" 'bogus' "$HP" "$cmd" --bogus
	bad "$cmd --help=x" 'help' "$HP" "$cmd" --help=x
done
for cmd in report pprof flamegraph symbolize sql; do
	bad "$cmd (no FILE)" 'FILE|profile' "$HP" "$cmd"
done
bad "daemon --status --stop" 'status|stop' "$HP" daemon --status --stop
bad "no such command" 'no-such-command' "$HP" no-such-command
WATCH=""

# ---------------------------------------------------------------------------
t_begin "readers: truncated, corrupted and foreign files, to every command that reads a profile"
B="$T_DIR/bad"
mkdir -p "$B"
SIZE=$(stat -c %s "$GOOD")
PAGE=$(sqlq "$GOOD" "PRAGMA page_size;")
NPAGES=$((SIZE / PAGE))
for n in 1 100 1024 "$PAGE" $((SIZE / 2)) $((SIZE - PAGE)) $((SIZE - 1)); do
	head -c "$n" "$GOOD" >"$B/trunc$n.db"
done
# Overwritten: the magic, the page size, and the first bytes (the b-tree
# page header) of a page near the start, in the middle and at the end.
cp "$GOOD" "$B/magic.db"
printf 'SQLite format 4' | dd of="$B/magic.db" bs=1 seek=0 conv=notrunc 2>/dev/null
cp "$GOOD" "$B/pagesize.db"
printf '\x01\x03' | dd of="$B/pagesize.db" bs=1 seek=16 conv=notrunc 2>/dev/null
for pg in 2 $((NPAGES / 2)) $((NPAGES - 1)); do
	cp "$GOOD" "$B/page$pg.db"
	printf '\x7f\xff\x13\x00\xff\xee\x01\x02' |
		dd of="$B/page$pg.db" bs=1 seek=$(((pg - 1) * PAGE)) conv=notrunc 2>/dev/null
done
# Random bytes over a whole page in the middle.
cp "$GOOD" "$B/garbled.db"
head -c "$PAGE" /dev/urandom | dd of="$B/garbled.db" bs="$PAGE" seek=$((NPAGES / 2)) conv=notrunc 2>/dev/null
# Foreign.
: >"$B/empty.db"
printf 'this is a text file, not a profile\n' >"$B/text.db"
cp /bin/true "$B/elf.db"
head -c 65536 /dev/urandom >"$B/random.db"
sqlite3 "$B/othersqlite.db" "CREATE TABLE t(a); INSERT INTO t VALUES (1);"
mkdir -p "$B/directory.db"
run_bounded 60 "$HP" pprof "$GOOD" -o "$B/foreign.pb.gz" >/dev/null 2>&1
# A heapprof profile this version cannot read, and one missing a table.
cp "$GOOD" "$B/newer.db"
sqlite3 "$B/newer.db" "UPDATE heapprof_meta SET value = '999' WHERE key = 'format_version';"
cp "$GOOD" "$B/noframes.db"
sqlite3 "$B/noframes.db" "DROP TABLE stack_profile_frame;"
BADFILES=$(ls -d "$B"/*)
BADFILES="$BADFILES /dev/null $B/missing.db"

NFILES=0
for f in $BADFILES; do
	NFILES=$((NFILES + 1))
	name=$(rx "$(basename "$f")")
	WATCH=""
	[ -f "$f" ] && [ "$f" != /dev/null ] && WATCH="$f"
	bad "report $f" "$name" "$HP" report "$f"
	bad "report --dump 1 $f" "$name" "$HP" report "$f" --dump 1
	bad "sql $f" "$name" "$HP" sql "$f" "SELECT count(*) FROM heap_profile_allocation"
	bad "sql --csv $f" "$name" "$HP" sql "$f" "SELECT 1" --csv
	bad "pprof $f" "$name" "$HP" pprof "$f" -o "$T_DIR/o.pb.gz"
	bad "pprof --all $f" "$name" "$HP" pprof "$f" --all -o "$T_DIR/o"
	bad "pprof --from --to $f" "$name" "$HP" pprof "$f" --from 0s --to 1s -o "$T_DIR/o.pb.gz"
	bad "flamegraph $f" "$name" "$HP" flamegraph "$f" -o "$T_DIR/o.html"
	bad "diff A=$f" "$name" "$HP" diff "$f" "$GOOD"
	bad "diff B=$f" "$name" "$HP" diff "$GOOD" "$f"
	bad "diff --dumps $f" "$name" "$HP" diff "$f" --dumps 1,1
	bad "symbolize $f" "$name" "$HP" symbolize "$f"
	bad "snapshot --list $f" "$name" "$HP" snapshot --list "$f"
	bad "snapshot --name $f" "$name" "$HP" snapshot --name x "$f" -o "$T_DIR/o.pb.gz"
done
[ -e "$B/missing.db" ] && t_fail "a reader created $B/missing.db"
WATCH=""

t_begin "the good profile still reads after all this"
assert_eq "$NDUMPS" "$(sqlq "$GOOD" "SELECT count(*) FROM heapprof_dump;")" "dumps in the good profile"
rc=0
run_bounded 60 "$HP" report "$GOOD" >/dev/null 2>&1 || rc=$?
assert_eq 0 "$rc" "report on the good profile"

t_begin "counts"
assert_eq 0 "$CRASHES" "crashes"
assert_eq 0 "$HANGS" "hangs"
assert_eq 0 "$SILENT" "multi-line or silent errors"
assert_eq 0 "$UNNAMED" "errors that do not name the problem"
assert_eq 0 "$CHANGED" "inputs changed"
echo "badinput: cases $CASES (run $((CASES - SKIPPED)), stride $STRIDE), crashes $CRASHES, hangs $HANGS, multi-line or silent errors $SILENT, unnamed $UNNAMED, inputs changed $CHANGED (bad files $NFILES, config cases $CFG_N)"
t_summary
