#!/usr/bin/env bash
# test_pprof.sh BUILD: `heapprof pprof` and `heapprof diff`.  Profiles of
# the known programs with -i 1 have exact values per function (see
# test_exact.sh), so `go tool pprof -top` on the exported files must show
# exactly them in each of the four sample types; mappings carry the right
# build IDs and addresses (pprof symbolizes a name-less export from the
# binary itself, to the line of the allocator call); diffs of two dumps and
# of two files show the exact growth, as text and through go tool pprof.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/known" "$PROGS/known_cxx" \
	"$PROGS/waiter"

# Expected views of known: KNOWN_EXPECT in helpers.sh.

# go tool pprof (helpers.sh): GO_OK=0 when Go is missing, and the checks
# that need it are skipped.
need_go() {
	if [ "$GO_OK" != 1 ]; then
		t_skip "go is missing (scripts/deps.sh --test installs golang-go)"
		return 1
	fi
	return 0
}

# check_top TAG FUNC EXPECTED: FUNC's flat value in $T_DIR/TAG.top; an
# expected 0 may also be a missing row.
check_top() {
	local got
	got=$(top_flat "$T_DIR/$1.top" "$2")
	[ "$3" = 0 ] && [ -z "$got" ] && return 0
	assert_eq "$3" "$got" "$1: go tool pprof flat value of $2"
}

# ---------------------------------------------------------------------------
KDB="$T_DIR/known.db"
t_begin "pprof: known -i 1 exports one profile"
hp_record known -i 1 -o "$KDB" -- "$PROGS/known"
assert_eq 7 "$REC_RC" "heapprof record exit status" || show_err known
db_valid "$KDB"
KPID=$(sqlq "$KDB" "SELECT pid FROM process;")
hp_cmd pp-default pprof "$KDB"
assert_eq 0 "$CMD_RC" "heapprof pprof exit status: $(head -c 300 "$T_DIR/pp-default.err")"
KPB="$T_DIR/known.pb.gz"
[ -s "$KPB" ] || t_fail "default output $KPB missing"
gzip -t "$KPB" 2>/dev/null || t_fail "$KPB is not gzip"
assert_match "^wrote $KPB: process $KPID, heap libc.malloc, dump 2 of 2, [0-9]+ samples$" \
	"$(cat "$T_DIR/pp-default.out")" "pprof's report line"
hp_cmd pp-o pprof "$KDB" -o "$T_DIR/named.pb.gz"
assert_eq 0 "$CMD_RC" "pprof -o exit status"
cmp -s "$KPB" "$T_DIR/named.pb.gz" || t_fail "-o FILE differs from the default output"
mkdir -p "$T_DIR/outdir"
hp_cmd pp-dir pprof "$KDB" -o "$T_DIR/outdir"
[ -s "$T_DIR/outdir/known.pb.gz" ] || t_fail "-o DIR: outdir/known.pb.gz missing"

t_begin "pprof: go tool pprof -top shows the exact values of the four types"
if need_go; then
	for si in space alloc_space objects alloc_objects; do
		pprof_top "known-$si" "$KPB" "$si" || continue
		assert_match "^Type: $si$" "$(cat "$T_DIR/known-$si.top")" "Type line"
		# pprof takes the first mapping for the main binary.
		assert_match "^File: known$" "$(cat "$T_DIR/known-$si.top")" "File line: the executable"
		while read -r fn ao as o s; do
			[ -n "$fn" ] || continue
			case $si in
			space) want=$s ;;
			alloc_space) want=$as ;;
			objects) want=$o ;;
			alloc_objects) want=$ao ;;
			esac
			check_top "known-$si" "$fn" "$want"
		done <<<"$KNOWN_EXPECT"
	done
	# Cumulative through the stack: main holds everything below it.
	incl=$(incl_views "$KDB" do_deep)
	read -r _ _ _ deep_space <<<"$incl"
	awk '/^ *flat +flat%/ { b = 1; next } b && $6 == "do_deep" { v = $4; sub(/B$/, "", v); print v }' \
		"$T_DIR/known-space.top" >"$T_DIR/deep.cum"
	assert_eq "$deep_space" "$(cat "$T_DIR/deep.cum")" "cum space of do_deep"
fi

t_begin "pprof: sample types, period, default type, mappings with build IDs"
if need_go; then
	if gopprof -symbolize=none -raw "$KPB" >"$T_DIR/known.raw"; then
		raw=$(cat "$T_DIR/known.raw")
		assert_match '^space/bytes\[dflt\] alloc_space/bytes objects/count alloc_objects/count$' \
			"$raw" "sample types in order, space the default"
		assert_match '^PeriodType: space bytes$' "$raw" "period type"
		assert_match '^Period: 1$' "$raw" "period = the sampling interval (-i 1)"
		assert_match '^Time: 2[0-9]{3}-' "$raw" "time of the dump"
		# Every module of the profile, with its range, offset and ID.
		while IFS='|' read -r start end off name bid; do
			line=$(printf '%s\n' "$raw" | sed -n '/^Mappings/,$p' |
				grep -F " $name " | head -n 1)
			want=$(printf '0x%x/0x%x/0x%x %s %s' "$start" "$end" "$off" "$name" "$bid")
			assert_match "^[0-9]+: $want \[FN\]$" "$line" "mapping of $name"
		done < <(sqlq "$KDB" "SELECT start, \"end\", exact_offset, name, build_id
		  FROM stack_profile_mapping WHERE build_id IS NOT NULL AND \"end\" > start;")
		want_bid=$(readelf -n "$PROGS/known" 2>/dev/null |
			sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -n1)
		[ -n "$want_bid" ] && assert_match "/progs/known $want_bid \[FN\]$" "$raw" \
			"build ID of the known binary (readelf)"
	else
		t_fail "go tool pprof -raw failed: $(head -c 400 "$T_DIR/gopprof.err")"
	fi
fi

t_begin "pprof: addresses are return address - 1 in the right mapping"
# Without names, pprof symbolizes the locations itself from the binary at
# the mapping's path: right function, and the line of the malloc call (not
# the line after it).
NDB="$T_DIR/noname.db"
cp "$KDB" "$NDB"
sqlite3 "$NDB" "UPDATE stack_profile_frame SET name = NULL, system_name = NULL;"
hp_cmd pp-noname pprof "$NDB"
assert_eq 0 "$CMD_RC" "pprof of the name-less copy"
if need_go; then
	if gopprof -top -lines -nodecount=10000 -nodefraction=0 -unit=B \
		-sample_index=space "$T_DIR/noname.pb.gz" >"$T_DIR/noname.top"; then
		line=$(grep -n 'malloc_keep\[i\] = malloc(1000);' "$HERE/progs/known.c" | cut -d: -f1)
		assert_eq 60000 "$(top_flat "$T_DIR/noname.top" "do_malloc tests/integration/progs/known.c:$line")" \
			"do_malloc at known.c:$line (the malloc call), symbolized by pprof"
		# main's frame: the call of do_malloc, not the statement after
		# it (where the return address is).
		line=$(grep -n '^	do_malloc();$' "$HERE/progs/known.c" | cut -d: -f1)
		cum=$(awk -v fn="main tests/integration/progs/known.c:$line" '
		  /^ *flat +flat%/ { b = 1; next }
		  b { l = $0; sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +/, "", l)
		      if (l == fn) { v = $4; sub(/B$/, "", v); print v; exit } }' "$T_DIR/noname.top")
		assert_eq 60000 "$cum" "cum of main at known.c:$line (the do_malloc() call)"
	else
		t_fail "go tool pprof -lines failed: $(head -c 400 "$T_DIR/gopprof.err")"
	fi
fi

t_begin "pprof: C++ functions carry demangled and mangled names"
CDB="$T_DIR/cxx.db"
hp_record cxx -i 1 -o "$CDB" -- "$PROGS/known_cxx"
assert_eq 9 "$REC_RC" "known_cxx exit status" || show_err cxx
hp_cmd pp-cxx pprof "$CDB"
assert_eq 0 "$CMD_RC" "pprof of known_cxx"
mangled=$(sqlq "$CDB" "SELECT system_name FROM stack_profile_frame WHERE name = 'do_new()' LIMIT 1;")
assert_eq _Z6do_newv "$mangled" "system name of do_new() in the profile"
gzip -dc "$T_DIR/cxx.pb.gz" | grep -aq "_Z6do_newv" ||
	t_fail "the mangled name _Z6do_newv is not in the pprof file"
if need_go; then
	pprof_top cxx "$T_DIR/cxx.pb.gz" space &&
		check_top cxx "do_new()" 960 && check_top cxx "do_aligned_new()" 2112
	# pprof's own demangler works from system_name (our name has "()").
	gopprof -symbolize=demangle=full -top -nodecount=10000 -nodefraction=0 \
		-unit=B "$T_DIR/cxx.pb.gz" >"$T_DIR/cxx-dm.top" || t_fail "pprof -symbolize=demangle=full"
	assert_eq 960 "$(top_flat "$T_DIR/cxx-dm.top" do_new)" "do_new demangled by pprof from _Z6do_newv"
fi

# ---------------------------------------------------------------------------
# waiter: phase1_alloc 10 x malloc(1000), "ready", SIGUSR1 -> dump 1 (we
# wait until it is written), then phase2_alloc 20 x malloc(500) and 4 of
# phase 1's blocks freed.  Dump 1: phase1 10 objects, 10000 B live; dump 2:
# phase1 6 / 6000, phase2 20 / 10000.
t_begin "waiter: two dumps (SIGUSR1, end)"
WDB="$T_DIR/waiter.db"
READY="$T_DIR/ready.fifo"
GO="$T_DIR/go.fifo"
mkfifo "$READY" "$GO"
"$HP" record -i 1 -o "$WDB" -- "$PROGS/waiter" "$READY" "$GO" \
	>"$T_DIR/waiter.out" 2>"$T_DIR/waiter.err" </dev/null &
HP_PID=$!
line=$(timeout 60 cat "$READY")
W_OK=0
if [ "$line" != ready ]; then
	t_fail "waiter did not get ready (got '$line')"
	kill -KILL "$HP_PID" 2>/dev/null
	timeout 5 sh -c ': >"$1"' sh "$GO" 2>/dev/null
	wait "$HP_PID" 2>/dev/null
else
	kill -USR1 "$HP_PID"
	wait_dumps "$WDB" 1
	timeout 60 sh -c ': >"$1"' sh "$GO" || t_fail "could not release waiter"
	wait_pid_bounded 60 "$HP_PID"
	assert_eq 12 "$WAIT_RC" "heapprof record exit status"
	assert_eq 2 "$(sqlq "$WDB" "SELECT count(*) FROM heapprof_dump WHERE reason != 'peak';")" "dumps" && W_OK=1
	D1=$(sqlq "$WDB" "SELECT min(ts) FROM heapprof_dump WHERE reason != 'peak';")
	check_views "$WDB" phase1_alloc 10 10000 10 10000 "$D1"
	check_views "$WDB" phase2_alloc 0 0 0 0 "$D1"
fi
WPID=$(sqlq "$WDB" "SELECT pid FROM process;")

t_begin "pprof --all, --dump N: one file per dump, named by pid and dump"
if [ "$W_OK" = 1 ]; then
	hp_cmd pp-all pprof "$WDB" --all
	assert_eq 0 "$CMD_RC" "pprof --all: $(head -c 300 "$T_DIR/pp-all.err")"
	# The signal's dump, the peak's (phase 2 raised it), the end's.
	F1="$T_DIR/waiter.$WPID.dump1.pb.gz"
	FP="$T_DIR/waiter.$WPID.dump2.pb.gz"
	F2="$T_DIR/waiter.$WPID.dump3.pb.gz"
	[ -s "$F1" ] && [ -s "$FP" ] && [ -s "$F2" ] || t_fail "--all: $F1 / $FP / $F2 missing: $(ls "$T_DIR")"
	assert_eq 3 "$(wc -l <"$T_DIR/pp-all.out" | tr -d ' ')" "--all: lines written"
	hp_cmd pp-allp pprof "$WDB" --all -o "$T_DIR/pfx"
	[ -s "$T_DIR/pfx.$WPID.dump3.pb.gz" ] || t_fail "--all -o PREFIX"
	hp_cmd pp-d1 pprof "$WDB" --dump 1 -o "$T_DIR/d1.pb.gz"
	assert_eq 0 "$CMD_RC" "pprof --dump 1"
	hp_cmd pp-dl pprof "$WDB" --dump -1 --pid "$WPID" -o "$T_DIR/dlast.pb.gz"
	assert_eq 0 "$CMD_RC" "pprof --dump -1 --pid"
	cmp -s "$F2" "$T_DIR/dlast.pb.gz" || t_fail "--dump -1 differs from --all's dump 3"
	if need_go; then
		pprof_top w1 "$T_DIR/d1.pb.gz" space &&
			check_top w1 phase1_alloc 10000 && check_top w1 phase2_alloc 0
		pprof_top w1o "$F1" objects && check_top w1o phase1_alloc 10
		pprof_top w2 "$F2" space &&
			check_top w2 phase1_alloc 6000 && check_top w2 phase2_alloc 10000
		pprof_top w2a "$F2" alloc_objects &&
			check_top w2a phase1_alloc 10 && check_top w2a phase2_alloc 20
	fi
fi

t_begin "pprof: bad input fails with one line"
expect_error e-nofile 2 'missing FILE' pprof
expect_error e-opt 2 "unknown option '--bogus'" pprof "$KDB" --bogus
expect_error e-dump0 2 "invalid --dump '0'" pprof "$KDB" --dump 0
expect_error e-dumpname 1 "has no snapshot named 'x'" pprof "$KDB" --dump x
expect_error e-both 2 'exclude each other' pprof "$KDB" --dump 1 --all
expect_error e-val 2 "needs a value" pprof "$KDB" --pid
expect_error e-range 1 'has 2 dumps; dump 3 is out of range' pprof "$KDB" --dump 3
expect_error e-pid 1 'no process with pid 1$' pprof "$KDB" --pid 1
expect_error e-heap 1 "no heap 'nosuch'" pprof "$KDB" --heap nosuch
expect_error e-missing 1 'No such file' pprof "$T_DIR/nope.db"
printf 'not a database at all, not even close; just some text here\n' >"$T_DIR/junk.db"
expect_error e-junk 1 'junk.db' pprof "$T_DIR/junk.db"
expect_error e-outdir 1 'nodir/x.pb.gz' pprof "$KDB" -o "$T_DIR/nodir/x.pb.gz"
hp_cmd pp-help pprof --help
assert_eq 0 "$CMD_RC" "pprof --help"
assert_match '^usage: heapprof pprof FILE' "$(cat "$T_DIR/pp-help.out")" "pprof --help text"

# ---------------------------------------------------------------------------
# diff_row FILE SECTION FUNC: "CHANGE RELATIVE A B" of FUNC's row in the
# report section "Top N SECTION by VIEW" (e.g. "growing stacks").
diff_row() {
	awk -v sec="$2" -v fn="$3" '
	/^  Top [0-9]+ / { insec = index($0, " " sec " by ") > 0; next }
	insec && /^ +[0-9]+ +[-+][0-9]+ / && $6 == fn { print $2, $3, $4, $5; exit }' "$1"
}
# total_row FILE VIEW: "A B CHANGE RELATIVE" of the totals table.
total_row() {
	awk -v v="$2" '$1 == v && NF == 5 { print $2, $3, $4, $5; exit }' "$1"
}

t_begin "diff: two dumps of one profile, text report"
if [ "$W_OK" = 1 ]; then
	hp_cmd diff-w diff "$WDB" --dumps 1,2 -o "$T_DIR/wdiff.pb.gz"
	assert_eq 0 "$CMD_RC" "diff exit status: $(head -c 300 "$T_DIR/diff-w.err")"
	R="$T_DIR/diff-w.out"
	assert_eq "+10000 new 0 10000" "$(diff_row "$R" "growing stacks" phase2_alloc)" \
		"growing stack phase2_alloc (space)"
	assert_eq "-4000 -40.0% 10000 6000" "$(diff_row "$R" "shrinking stacks" phase1_alloc)" \
		"shrinking stack phase1_alloc (space)"
	assert_eq "+10000 new 0 10000" "$(diff_row "$R" "growing functions (self)" phase2_alloc)" \
		"growing function phase2_alloc"
	assert_eq "-4000 -40.0% 10000 6000" "$(diff_row "$R" "shrinking functions (self)" phase1_alloc)" \
		"shrinking function phase1_alloc"
	assert_eq "" "$(diff_row "$R" "growing stacks" phase1_alloc)" "phase1_alloc is not growing"
	# The callers of the stack are shown under it.
	assert_match '^ +<- main \(waiter\)$' "$(cat "$R")" "caller line"
	# Totals against SQL.
	D2=$(sqlq "$WDB" "SELECT max(ts) FROM heapprof_dump;")
	for v in "space:sum(size)" "objects:sum(count)" \
		"alloc_space:sum(max(size,0))" "alloc_objects:sum(max(count,0))"; do
		name=${v%%:*}
		a=$(sqlq "$WDB" "SELECT coalesce(${v#*:},0) FROM heap_profile_allocation WHERE ts <= $D1;")
		b=$(sqlq "$WDB" "SELECT coalesce(${v#*:},0) FROM heap_profile_allocation WHERE ts <= $D2;")
		read -r ga gb gc _ <<<"$(total_row "$R" "$name")"
		assert_eq "$a $b $(printf '%+d' $((b - a)))" "$ga $gb $gc" "totals of $name"
	done
	hp_cmd diff-wo diff "$WDB" --dumps 1,-1 --view objects
	assert_eq "+20 new 0 20" "$(diff_row "$T_DIR/diff-wo.out" "growing stacks" phase2_alloc)" \
		"growing stack phase2_alloc (objects)"
	assert_eq "-4 -40.0% 10 6" "$(diff_row "$T_DIR/diff-wo.out" "shrinking stacks" phase1_alloc)" \
		"shrinking stack phase1_alloc (objects)"
	hp_cmd diff-at diff "$WDB@1" "$WDB@2"
	assert_eq 0 "$CMD_RC" "diff FILE@1 FILE@2"
	hp_cmd diff-w2 diff "$WDB" --dumps 1,2
	cmp -s "$T_DIR/diff-at.out" "$T_DIR/diff-w2.out" ||
		t_fail "FILE@1 FILE@2 and FILE --dumps 1,2 differ"
fi

t_begin "diff: pprof output follows -diff_base"
if [ "$W_OK" = 1 ] && need_go; then
	pprof_top wd "$T_DIR/wdiff.pb.gz" space &&
		check_top wd phase2_alloc 10000 && check_top wd phase1_alloc -4000
	pprof_top wdo "$T_DIR/wdiff.pb.gz" objects &&
		check_top wdo phase2_alloc 20 && check_top wdo phase1_alloc -4
	pprof_top wda "$T_DIR/wdiff.pb.gz" alloc_space &&
		check_top wda phase2_alloc 10000 && check_top wda phase1_alloc 0
	gopprof -symbolize=none -raw "$T_DIR/wdiff.pb.gz" >"$T_DIR/wdiff.raw" ||
		t_fail "pprof -raw of the diff"
	assert_match 'pprof::base:\[true\]' "$(cat "$T_DIR/wdiff.raw")" "base samples labelled"
	# Only A's samples carry the label, all negated: phase1 at dump 1.
	assert_match '^ +-10000 +-10000 +-10 +-10: ' "$(cat "$T_DIR/wdiff.raw")" \
		"A's phase1_alloc sample negated"
fi

t_begin "diff: two files, stacks matched by function names"
DDB="$T_DIR/deep.db"
hp_record deep -i 1 -o "$DDB" -- "$PROGS/known" deep-only
assert_eq 7 "$REC_RC" "known deep-only exit status" || show_err deep
hp_cmd diff-f diff "$DDB" "$KDB" --top 100 -o "$T_DIR/fdiff.pb.gz"
assert_eq 0 "$CMD_RC" "diff of two files: $(head -c 300 "$T_DIR/diff-f.err")"
R="$T_DIR/diff-f.out"
assert_eq "+60000 new 0 60000" "$(diff_row "$R" "growing stacks" do_malloc)" "do_malloc grew"
assert_eq "+40960 new 0 40960" "$(diff_row "$R" "growing stacks" do_posix_memalign)" \
	"do_posix_memalign grew"
# deep_alloc's stack (main's call site differs between the runs) matches:
# no change, in no list.
assert_no_match 'deep_alloc' "$(cat "$R")" "deep_alloc (same stack in both files)"
for v in "space:sum(size)" "objects:sum(count)"; do
	name=${v%%:*}
	a=$(sqlq "$DDB" "SELECT coalesce(${v#*:},0) FROM heap_profile_allocation;")
	b=$(sqlq "$KDB" "SELECT coalesce(${v#*:},0) FROM heap_profile_allocation;")
	read -r ga gb gc _ <<<"$(total_row "$R" "$name")"
	assert_eq "$a $b $(printf '%+d' $((b - a)))" "$ga $gb $gc" "totals of $name"
done
if need_go; then
	pprof_top fd "$T_DIR/fdiff.pb.gz" space &&
		check_top fd do_malloc 60000 && check_top fd deep_alloc 0 &&
		check_top fd do_realloc 10000
fi

t_begin "diff: bad input fails with one line"
expect_error d-one 2 'need two profiles' diff "$KDB"
expect_error d-three 2 "unexpected argument" diff "$KDB" "$KDB" "$KDB"
expect_error d-view 2 "invalid --view 'bogus'" diff "$KDB" "$KDB" --view bogus
expect_error d-dumps 2 "invalid --dumps '1'" diff "$KDB" --dumps 1
expect_error d-at0 2 "invalid dump in" diff "$KDB@0" "$KDB"
expect_error d-range 1 'dump 5 is out of range' diff "$WDB" --dumps 1,5
expect_error d-missing 1 'No such file' diff "$T_DIR/nope.db" "$KDB"
expect_error d-pid 1 'no process with pid 1$' diff "$KDB" "$KDB" --pid 1
expect_error d-heap 1 "no heap 'nosuch'" diff "$KDB" "$KDB" --heap nosuch
hp_cmd d-help diff --help
assert_eq 0 "$CMD_RC" "diff --help"
assert_match '^usage: heapprof diff A B' "$(cat "$T_DIR/d-help.out")" "diff --help text"

t_summary
