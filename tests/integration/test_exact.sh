#!/usr/bin/env bash
# test_exact.sh BUILD: with -i 1 every allocation is recorded exactly, so the
# four views per function of the known programs must match the arithmetic of
# their code, through SQL and through `heapprof report`; stacks are complete
# (also through code without frame pointers), names resolve and demangle,
# the exit status is the program's, and --unwind fp gives the same numbers.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/known" "$PROGS/known_cxx"

# Expected views for progs/known.c: KNOWN_EXPECT in helpers.sh.
# Functions that never call the allocator themselves: no rows as a leaf.
# do_failed_alloc calls it, but every call fails.
KNOWN_NOT_LEAF="main do_threads thread_main do_deep recurse do_failed_alloc"

# progs/known_cxx.cc (demangled names):
# do_new()               30 x new Obj48 = operator new(48), 10 deleted:
#                        30, 1440; 20, 960
# do_new_array()         20 x new char[1000], all deleted: 20, 20000; 0, 0
# do_new_array_cookie()  4 x new WithDtor[10] = operator new[](10*16 + 8
#                        cookie = 168), 2 deleted: 4, 672; 2, 336
# do_nothrow_new()       15 x new (nothrow) Obj200, 5 deleted:
#                        15, 3000; 10, 2000
# do_aligned_new()       8 x new Aligned64 (192 B, align 64), 3 deleted;
#                        4 x operator new(1024, align 128), 4 deleted;
#                        2 x new Aligned64[3] (576 B), live:
#                        8+4+2 = 14, 1536+4096+1152 = 6784;
#                        5+0+2 = 7, 960+0+1152 = 2112
# do_cxx_malloc()        5 x malloc(64), live: 5, 320; 5, 320
# do_new_fail()          new char[huge] throws bad_alloc through the hooks,
#                        nothrow new of huge returns nullptr, aligned new of
#                        huge throws: no rows at all
CXX_EXPECT="
do_new() 30 1440 20 960
do_new_array() 20 20000 0 0
do_new_array_cookie() 4 672 2 336
do_nothrow_new() 15 3000 10 2000
do_aligned_new() 14 6784 7 2112
do_cxx_malloc() 5 320 5 320
"

# Allocator entry points (and the profiler's hooks, which carry the same
# names) must never be the leaf: the leaf is the allocator's caller, and an
# allocator calling another one internally (operator new -> malloc, new[] ->
# new, aligned new -> aligned_alloc) must not be counted twice.
ALLOCATOR_LEAF_SQL="f.name IN ('malloc','calloc','realloc','free',
  'reallocarray','posix_memalign','aligned_alloc','memalign','valloc',
  'pvalloc','__libc_malloc','__libc_calloc','__libc_realloc','__libc_memalign')
  OR f.name LIKE 'operator new%' OR f.name LIKE 'operator delete%'
  OR f.name LIKE '_Znw%' OR f.name LIKE '_Zna%' OR f.name LIKE '_ZdlPv%'"

check_expect_table() { # DB TABLE
	local db=$1 fn ao as o s
	while read -r fn ao as o s; do
		[ -n "$fn" ] || continue
		check_views "$db" "$fn" "$ao" "$as" "$o" "$s"
	done <<<"$2"
}

check_known_common() { # DB: checks shared by the dwarf and fp profiles
	local db=$1
	check_expect_table "$db" "$KNOWN_EXPECT"
	local v ao as o s
	v=$(leaf_views "$db" do_pvalloc)
	read -r ao as o s <<<"$v"
	assert_eq 2 "$ao" "do_pvalloc alloc_objects"
	assert_eq 0 "$o" "do_pvalloc objects"
	assert_eq 0 "$s" "do_pvalloc space"
	case "$as" in
	200 | 8192) ;;
	*) t_fail "do_pvalloc alloc_space: expected 200 (requested) or 8192 (pages), got '$as'" ;;
	esac
	local fn n
	for fn in $KNOWN_NOT_LEAF; do
		n=$(leaf_rows "$db" "$fn")
		assert_eq 0 "$n" "rows with leaf frame $fn (it never calls the allocator)"
	done
}

# ---------------------------------------------------------------------------
KDB="$T_DIR/known.db"
t_begin "known -i 1: runs, exit status 7 propagated, output unchanged"
bare_run known "$PROGS/known"
hp_record known -i 1 -o "$KDB" -- "$PROGS/known"
assert_eq 7 "$BARE_RC" "bare known exit status"
assert_eq 7 "$REC_RC" "heapprof record exit status" || show_err known
assert_eq "$(cat "$T_DIR/known.bare.out")" "$(cat "$T_DIR/known.out")" "stdout under the profiler"
db_valid "$KDB"
KNOWN_OK=$?

if [ "$KNOWN_OK" = 0 ]; then
	t_begin "known -i 1: process and dump metadata"
	KPID=$(sed -n 's/^known: pid \([0-9]*\)$/\1/p' "$T_DIR/known.err" | head -n1)
	assert_eq 1 "$(sqlq "$KDB" "SELECT count(*) FROM process;")" "one process"
	assert_eq "$KPID" "$(sqlq "$KDB" "SELECT pid FROM process;")" "process.pid is the program's pid"
	assert_match 'known$' "$(sqlq "$KDB" "SELECT name FROM process;")" "process.name"
	assert_eq "1|dwarf|64|7" \
		"$(sqlq "$KDB" "SELECT sampling_interval, unwind, max_frames, exit_status FROM heapprof_process;")" \
		"heapprof_process sampling_interval|unwind|max_frames|exit_status"
	assert_eq "peak,end" "$(sqlq "$KDB" "SELECT group_concat(reason) FROM (SELECT reason FROM heapprof_dump ORDER BY ts, id);")" \
		"two dumps: the peak's, then the end's"
	assert_eq 0 "$(sqlq "$KDB" "SELECT count(*) FROM heap_profile_allocation a
	  WHERE a.ts NOT IN (SELECT ts FROM heapprof_dump);")" \
		"every allocation row belongs to a dump ts"
	assert_eq 0 "$(sqlq "$KDB" "SELECT count(*) FROM heap_profile_allocation
	  WHERE NOT ((count > 0 AND size >= 0) OR (count < 0 AND size <= 0));")" \
		"rows are allocations (count > 0) or frees (count < 0), sizes of the same sign"

	t_begin "known -i 1: process stats agree with the rows"
	# With -i 1 every allocation is a sample: the client's counters of
	# samples and matched frees equal the rows' totals (stats that are
	# absent are not checked).
	tot_alloc=$(sqlq "$KDB" "SELECT coalesce(sum(count), 0) FROM heap_profile_allocation WHERE count > 0;")
	tot_free=$(sqlq "$KDB" "SELECT coalesce(-sum(count), 0) FROM heap_profile_allocation WHERE count < 0;")
	for pair in samples:$tot_alloc frees_matched:$tot_free \
		stack_table_full:0 live_table_full:0 module_table_full:0 unwind_errors:0; do
		st=${pair%%:*}
		v=$(sqlq "$KDB" "SELECT value FROM heapprof_process_stats WHERE name = '$st';")
		[ -n "$v" ] && assert_eq "${pair##*:}" "$v" "heapprof_process_stats $st"
	done

	t_begin "known -i 1: exact four views per function (SQL, dwarf)"
	check_known_common "$KDB"

	t_begin "known -i 1: no allocator or profiler frames; names resolve"
	assert_eq 0 "$(sqlq "$KDB" "SELECT count(*) FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  WHERE $ALLOCATOR_LEAF_SQL;")" "rows whose leaf is an allocator function"
	assert_eq 0 "$(sqlq "$KDB" "SELECT count(*) FROM stack_profile_frame f
	  JOIN stack_profile_mapping m ON f.mapping = m.id
	  WHERE m.name LIKE '%libheapprof%';")" "frames in libheapprof.so"
	# Every frame in the program's own mapping has a name.
	assert_eq 0 "$(sqlq "$KDB" "SELECT count(*) FROM stack_profile_frame f
	  JOIN stack_profile_mapping m ON f.mapping = m.id
	  WHERE m.name LIKE '%/progs/known' AND (f.name IS NULL OR f.name = '');")" \
		"unnamed frames in the known binary"
	assert_match "/progs/known$" "$(sqlq "$KDB" "SELECT m.name FROM stack_profile_frame f
	  JOIN stack_profile_mapping m ON f.mapping = m.id WHERE f.name = 'do_malloc' LIMIT 1;")" \
		"mapping of do_malloc"
	bid=$(sqlq "$KDB" "SELECT m.build_id FROM stack_profile_frame f
	  JOIN stack_profile_mapping m ON f.mapping = m.id WHERE f.name = 'do_malloc' LIMIT 1;")
	want_bid=$(readelf -n "$PROGS/known" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -n1)
	if [ -n "$want_bid" ]; then
		assert_eq "$want_bid" "$bid" "build_id of the known mapping"
	fi

	t_begin "known -i 1: stacks complete (dwarf)"
	for fn in do_malloc do_calloc do_realloc do_posix_memalign do_memalign deep_alloc; do
		for cs in $(leaf_callsites "$KDB" "$fn"); do
			st=$(stack_of "$KDB" "$cs")
			assert_eq "$fn" "$(printf '%s\n' "$st" | head -n1)" "leaf of callsite $cs"
			if ! printf '%s\n' "$st" | grep -qx main; then
				t_fail "callsite $cs ($fn): no main frame in stack: $(printf '%s' "$st" | tr '\n' ' ')"
			fi
		done
	done
	for cs in $(leaf_callsites "$KDB" do_malloc); do
		st=$(stack_of "$KDB" "$cs")
		assert_eq "do_malloc main" "$(printf '%s\n' "$st" | head -n2 | tr '\n' ' ' | sed 's/ $//')" \
			"first two frames of do_malloc's stack"
	done
	for cs in $(leaf_callsites "$KDB" thread_alloc); do
		st=$(stack_of "$KDB" "$cs")
		assert_eq "thread_alloc thread_main" "$(printf '%s\n' "$st" | head -n2 | tr '\n' ' ' | sed 's/ $//')" \
			"first two frames of thread_alloc's stack"
	done
	# deep_alloc <- recurse x 20 <- do_deep <- main
	cs_list=$(leaf_callsites "$KDB" deep_alloc)
	assert_eq 1 "$(printf '%s\n' "$cs_list" | grep -c .)" "one callsite for deep_alloc"
	for cs in $cs_list; do
		st=$(stack_of "$KDB" "$cs")
		assert_eq 20 "$(printf '%s\n' "$st" | grep -cx recurse)" "recurse frames in deep_alloc's stack"
		assert_eq "deep_alloc $(printf 'recurse %.0s' $(seq 20))do_deep main" \
			"$(printf '%s\n' "$st" | head -n 23 | tr '\n' ' ' | sed 's/ $//')" \
			"deep_alloc's stack"
	done

	t_begin "known -i 1: heapprof sql agrees with sqlite3; seed query runs"
	want=$(sqlq "$KDB" "SELECT sum(count), sum(size), count(*) FROM heap_profile_allocation;" | tr '|' ',')
	got=$(hp_sql_csv "$KDB" "SELECT sum(count), sum(size), count(*) FROM heap_profile_allocation")
	assert_eq "$want" "$got" "totals via heapprof sql --csv"
	got=$(hp_sql_csv "$KDB" "SELECT f.name, sum(a.size) FROM heap_profile_allocation a JOIN stack_profile_callsite c ON (a.callsite_id = c.id) JOIN stack_profile_frame f ON (c.frame_id = f.id) WHERE f.name = 'do_malloc' GROUP BY f.name")
	assert_eq "do_malloc,60000" "$got" "do_malloc space via heapprof sql --csv"
	# The seed's first example query, verbatim.
	SEED_Q1="select a.callsite_id, a.ts, a.upid, f.name, f.rel_pc, m.build_id, m.name as mapping_name,
sum(a.size) as space_size, sum(a.count) as space_count
from heap_profile_allocation a join
stack_profile_callsite c ON (a.callsite_id = c.id) join
stack_profile_frame f ON (c.frame_id = f.id) join
stack_profile_mapping m ON (f.mapping = m.id)
group by 1, 2, 3, 4, 5, 6, 7 order by space_size desc;"
	out=$(run_bounded 60 "$HP" sql "$KDB" "$SEED_Q1" 2>&1)
	rc=$?
	assert_eq 0 "$rc" "seed query 1 exit status" && {
		assert_match 'do_malloc' "$out" "seed query 1 output"
		assert_match '60000' "$out" "seed query 1 output has do_malloc's space"
	}
	out=$(run_bounded 60 "$HP" sql "$KDB" "$SEED_Q1" --csv 2>&1)
	assert_match '^callsite_id,ts,upid,name,rel_pc,build_id,mapping_name,space_size,space_count' \
		"$(printf '%s\n' "$out" | head -n1)" "seed query 1 --csv header"

	# sqlq_hp SQL: the rows of `heapprof sql --csv` on the known profile,
	# without the header (keep column names one line: alias expressions
	# that span lines), fields separated by '|'.
	sqlq_hp() {
		hp_sql_csv "$KDB" "$1" | tr ',' '|'
	}

	t_begin "known -i 1: seed query 2 (experimental_flamegraph)"
	# Perfetto's columns, in Perfetto's order.
	FG_COLS="id,ts,depth,name,map_name,count,cumulative_count,size,cumulative_size,alloc_count,cumulative_alloc_count,alloc_size,cumulative_alloc_size,parent_id,source_file,line_number"
	ts=$(sqlq "$KDB" "SELECT max(ts) FROM heapprof_dump;")
	upid=$(sqlq "$KDB" "SELECT upid FROM process LIMIT 1;")
	FG="experimental_flamegraph($ts,$upid,'native')"
	out=$(run_bounded 60 "$HP" sql "$KDB" "select * from $FG limit 0" --csv 2>&1)
	assert_eq "$FG_COLS" "$out" "select * from experimental_flamegraph: columns"
	# The seed's second example query, verbatim (its ts is Perfetto's: with
	# ours it selects every dump or none; either way it must run).
	SEED_Q2="select name, map_name, cumulative_size
from experimental_flamegraph(8300973884377,1,'native')
order by abs(cumulative_size) desc;"
	rc=0
	out=$(run_bounded 60 "$HP" sql "$KDB" "$SEED_Q2" --csv 2>&1) || rc=$?
	assert_eq 0 "$rc" "seed query 2 exit status (output: $(printf '%s' "$out" | head -c 300))"
	assert_eq "name,map_name,cumulative_size" "$(printf '%s\n' "$out" | head -n1)" "seed query 2 --csv header"
	rc=0
	out=$(run_bounded 60 "$HP" sql "$KDB" "$SEED_Q2" 2>&1) || rc=$?
	assert_eq 0 "$rc" "seed query 2 (table) exit status"
	assert_match '^name +map_name +cumulative_size$' "$(printf '%s\n' "$out" | head -n1)" "seed query 2 table header"
	# Seed query 1, verbatim: its columns.
	out=$(run_bounded 60 "$HP" sql "$KDB" "$SEED_Q1" --csv 2>&1)
	assert_eq "callsite_id,ts,upid,name,rel_pc,build_id,mapping_name,space_size,space_count" \
		"$(printf '%s\n' "$out" | head -n1)" "seed query 1 columns"
	# The seed's query at our last dump.
	got=$(hp_sql_csv "$KDB" "select name, map_name, cumulative_size
from $FG
order by abs(cumulative_size) desc;")
	dm=$(printf '%s\n' "$got" | awk -F, '$1 == "do_malloc" { s += $NF } END { print s + 0 }')
	assert_eq 60000 "$dm" "cumulative_size of do_malloc"
	assert_eq "do_malloc,60000" "$(printf '%s\n' "$got" | grep '^do_malloc,' | cut -d, -f1,3)" \
		"one do_malloc node"
	assert_match "^do_malloc,[^,]*/progs/known," "$got" "map_name of do_malloc"
	# Ordered by size: the main thread's chain down to main comes first.
	assert_eq "$(printf '%s\n' "$got" | grep '^main,' | cut -d, -f3)" \
		"$(printf '%s\n' "$got" | head -n1 | cut -d, -f3)" "largest cumulative_size is main's"

	t_begin "known -i 1: experimental_flamegraph exact values per function"
	# Self values of each allocating function (its nodes' count, size,
	# alloc_count, alloc_size) and its cumulative_size: they have no callees.
	fgv=$(hp_sql_csv "$KDB" "select name, sum(alloc_count), sum(alloc_size),
	  sum(count), sum(size), sum(cumulative_alloc_count), sum(cumulative_alloc_size),
	  sum(cumulative_count), sum(cumulative_size), count(*)
	  from $FG group by name")
	while read -r fn ao as o s; do
		[ -n "$fn" ] || continue
		row=$(printf '%s\n' "$fgv" | grep "^$fn," | cut -d, -f2-)
		assert_eq "$ao,$as,$o,$s,$ao,$as,$o,$s,1" "$row" \
			"$fn: alloc_count,alloc_size,count,size, the same cumulative, nodes"
	done <<<"$KNOWN_EXPECT"
	# Callers: nothing of their own, cumulative = what their callees keep.
	assert_eq "0,0,0,0,100,30000,46,14000,1" "$(printf '%s\n' "$fgv" | grep '^thread_main,' | cut -d, -f2-)" \
		"thread_main: self 0, cumulative alloc_count,alloc_size,count,size, nodes"
	assert_eq "0,0,0,0,3,2331,3,2331,1" "$(printf '%s\n' "$fgv" | grep '^do_deep,' | cut -d, -f2-)" \
		"do_deep: self 0, cumulative, nodes"
	# recurse: one node per depth (20 nodes), each holding deep_alloc's 2331.
	assert_eq "0,0,0,0,60,46620,60,46620,20" "$(printf '%s\n' "$fgv" | grep '^recurse,' | cut -d, -f2-)" \
		"recurse: 20 nodes of cumulative 3 objects, 2331 B"
	# main: exactly the stacks through main (as SQL over the callsites says).
	read -r ao as o s <<<"$(incl_views "$KDB" main)"
	assert_eq "0,0,0,0,$ao,$as,$o,$s,1" "$(printf '%s\n' "$fgv" | grep '^main,' | cut -d, -f2-)" \
		"main: self 0, cumulative = the callsites through main"
	assert_ge "$s" $((60000 + 10000 + 40960 + 3000 + 5000 + 2331)) "cumulative_size of main"
	# deep_alloc sits under 20 recurse nodes, do_deep, main: depth of main + 22.
	assert_eq 22 "$(sqlq_hp "select d.depth - m.depth from $FG d, $FG m
	  where d.name = 'deep_alloc' and m.name = 'main'")" "depth of deep_alloc below main"

	t_begin "known -i 1: report --callers and --callees (merged at the function, recursion once)"
	"$HP" report "$KDB" --callers recurse >"$T_DIR/callers.out" 2>&1
	assert_eq 0 "$?" "report --callers status"
	assert_match '^    callers of recurse: 2\.28 KiB \(2331 B\) \([0-9.]+% of the heap\) on 1 stack; self 0 B$' \
		"$(grep '^    callers of' "$T_DIR/callers.out")" "callers: the stacks through recurse, once"
	assert_eq "recurse do_deep main" \
		"$(grep -A3 '^    callers of' "$T_DIR/callers.out" | tail -n 3 | awk '{ print $6 }' | tr '\n' ' ' | sed 's/ $//')" \
		"callers of recurse: do_deep, then main (the outermost recurse: recursion counted once)"
	"$HP" report "$KDB" --callees do_deep >"$T_DIR/callees.out" 2>&1
	assert_eq 0 "$?" "report --callees status"
	assert_eq 20 "$(grep -c ' recurse  (known)$' "$T_DIR/callees.out")" "callees of do_deep: 20 recurse levels"
	assert_match '^ +2\.28 KiB \(2331 B\) +[0-9.]+% {44}deep_alloc  \(known\)$' \
		"$(grep 'deep_alloc' "$T_DIR/callees.out")" "deep_alloc under the 20 recurse levels, with its 2331 B"
	read -r ao as o s <<<"$(incl_views "$KDB" main)"
	assert_match "^    callees of main: .*\\($s B\\) .* on [0-9]+ stacks; self 0 B\$" \
		"$(grep '^    callees of' <("$HP" report "$KDB" --callees main 2>&1))" \
		"callees of main: its inclusive space, as SQL over the callsites says"
	"$HP" report "$KDB" --callers recurze >"$T_DIR/callers2.out" 2>&1
	assert_eq "2 heapprof: report: --callers: 'recurze' matches no function in $KDB" \
		"$? $(cat "$T_DIR/callers2.out")" "a function that is not there: exit 2, one line"

	t_begin "known -i 1: experimental_flamegraph tree is consistent"
	# Every node: cumulative = self + the cumulative of its children.
	chk="with f as materialized (select * from $FG),
	  k as (select parent_id p, sum(cumulative_count) cc, sum(cumulative_size) cs,
	    sum(cumulative_alloc_count) cac, sum(cumulative_alloc_size) cas
	    from f where parent_id is not null group by parent_id)
	  select count(*) from f left join k on k.p = f.id
	  where f.cumulative_count != f.count + coalesce(k.cc, 0)
	     or f.cumulative_size != f.size + coalesce(k.cs, 0)
	     or f.cumulative_alloc_count != f.alloc_count + coalesce(k.cac, 0)
	     or f.cumulative_alloc_size != f.alloc_size + coalesce(k.cas, 0)"
	assert_eq 0 "$(sqlq_hp "$chk")" "nodes whose cumulative values are not self + children"
	assert_eq 0 "$(sqlq_hp "with f as materialized (select * from $FG)
	  select count(*) from f left join f p on p.id = f.parent_id
	  where (f.parent_id is null and f.depth != 0)
	     or (f.parent_id is not null and (p.id is null or f.depth != p.depth + 1
	         or f.parent_id >= f.id))")" "nodes with a bad parent or depth"
	assert_eq "$(sqlq_hp "select count(*) from $FG")" "$(sqlq_hp "select count(distinct id) from $FG")" \
		"ids are unique"
	assert_eq 0 "$(sqlq_hp "with f as materialized (select * from $FG)
	  select count(*) from (select parent_id, name, map_name from f
	    group by 1, 2, 3 having count(*) > 1)")" "siblings with the same name and mapping"
	# Roots: the process's totals; every stack of known starts at _start
	# (main thread) or in libc's thread start.
	want=$(sqlq "$KDB" "SELECT sum(count), sum(size), sum(max(count, 0)), sum(max(size, 0))
	  FROM heap_profile_allocation WHERE upid = $upid AND ts <= $ts;")
	assert_eq "$want" "$(sqlq_hp "select sum(cumulative_count), sum(cumulative_size),
	  sum(cumulative_alloc_count), sum(cumulative_alloc_size) from $FG where parent_id is null")" \
		"roots: cumulative count,size,alloc_count,alloc_size = the process's totals"
	nroots=$(sqlq_hp "select count(*) from $FG where parent_id is null")
	assert_ge "$nroots" 2 "root count (main thread and the threads)"
	assert_le "$nroots" 3 "root count (main thread and the threads)"
	assert_eq 1 "$(sqlq_hp "select count(*) from $FG where parent_id is null and name = '_start'")" "one _start root"
	assert_eq "$ts|$ts" "$(sqlq_hp "select min(ts), max(ts) from $FG")" "ts column is the ts argument"
	# Not symbolized offline: no source file or line.
	assert_eq 0 "$(sqlq_hp "select count(*) from $FG where source_file is not null or line_number is not null")" \
		"source_file/line_number without offline symbols"

	t_begin "known -i 1: experimental_flamegraph arguments"
	assert_eq 0 "$(sqlq_hp "select count(*) from experimental_flamegraph(0,$upid,'native')")" "rows before the first dump"
	assert_eq 0 "$(sqlq_hp "select count(*) from experimental_flamegraph($ts,999,'native')")" "rows of an unknown upid"
	assert_eq "$(sqlq_hp "select count(*) from $FG")" \
		"$(sqlq_hp "select count(*) from experimental_flamegraph($ts,$upid,'native','libc.malloc')")" \
		"heap_name 'libc.malloc' (the only heap): the same nodes"
	assert_eq 0 "$(sqlq_hp "select count(*) from experimental_flamegraph($ts,$upid,'native','nosuchheap')")" \
		"rows of an unknown heap"
	assert_eq 60000 "$(sqlq_hp "select cumulative_size from experimental_flamegraph where ts_in = $ts
	  and upid = $upid and profile_type = 'native' and name = 'do_malloc'")" "arguments as hidden columns"
	for bad in "experimental_flamegraph($ts,$upid,'java')" "experimental_flamegraph($ts,$upid,'perf')" \
		"experimental_flamegraph($ts,$upid,NULL)" "experimental_flamegraph($ts,$upid)" \
		"experimental_flamegraph" "experimental_flamegraph('x',$upid,'native')"; do
		rc=0
		out=$(run_bounded 60 "$HP" sql "$KDB" "select * from $bad" 2>&1) || rc=$?
		assert_eq 1 "$rc" "exit status of: select * from $bad"
		assert_eq 1 "$(printf '%s\n' "$out" | grep -c .)" "one line of error for $bad: $out"
		assert_match '^heapprof: sql: experimental_flamegraph: ' "$out" "error message for $bad"
	done
	out=$(run_bounded 60 "$HP" sql "$KDB" "select * from experimental_flamegraph($ts,$upid,'java')" 2>&1)
	assert_match "unsupported profile type 'java'" "$out" "invalid profile type error"

	t_begin "known -i 1: report shows the exact numbers per view"
	# view -> field of check_views' order: alloc_objects alloc_space objects space
	for view in alloc_objects alloc_space objects space; do
		rep="$T_DIR/report.$view"
		rc=0
		run_bounded 60 "$HP" report "$KDB" --view "$view" --top 100 >"$rep" 2>"$rep.err" || rc=$?
		if [ "$rc" != 0 ]; then
			t_fail "heapprof report --view $view: exit $rc: $(head -c 300 "$rep.err")"
			continue
		fi
		case $view in
		alloc_objects) col=2 ;; alloc_space) col=3 ;; objects) col=4 ;; space) col=5 ;;
		esac
		# Self and inclusive of each leaf function: its exact value (rows
		# with 0 in this view may be left out of the report).
		while read -r fn ao as o s; do
			[ -n "$fn" ] || continue
			val=$(echo "$fn $ao $as $o $s" | cut -d' ' -f"$col")
			[ "$val" = 0 ] && continue
			check_report "report --view $view" "$rep" self "$fn" "$val"
			check_report "report --view $view" "$rep" inclusive "$fn" "$val"
		done <<<"$KNOWN_EXPECT"
		# Inclusive of callers: recursion counted once; main as in SQL.
		val=$(echo "x 3 2331 3 2331" | cut -d' ' -f"$col")
		check_report "report --view $view" "$rep" inclusive recurse "$val"
		check_report "report --view $view" "$rep" inclusive do_deep "$val"
		val=$(echo "x 100 30000 46 14000" | cut -d' ' -f"$col")
		check_report "report --view $view" "$rep" inclusive thread_main "$val"
		val=$(echo "x $(incl_views "$KDB" main)" | cut -d' ' -f"$col")
		check_report "report --view $view" "$rep" inclusive main "$val"
	done
	# The default view is space.
	run_bounded 60 "$HP" report "$KDB" >"$T_DIR/report.default" 2>&1
	check_report "report (default view)" "$T_DIR/report.default" self do_malloc 60000
	# --top N limits the tables to N rows.
	run_bounded 60 "$HP" report "$KDB" --view alloc_objects --top 2 >"$T_DIR/report.top2" 2>&1
	check_report "report --top 2" "$T_DIR/report.top2" self do_malloc 100
	assert_eq "" "$(report_row "$T_DIR/report.top2" self do_calloc)" "report --top 2: third function (do_calloc) listed"
fi

# ---------------------------------------------------------------------------
t_begin "known -i 1 --unwind fp: same numbers"
FDB="$T_DIR/known-fp.db"
hp_record known-fp -i 1 --unwind fp -o "$FDB" -- "$PROGS/known"
assert_eq 7 "$REC_RC" "exit status" || show_err known-fp
if db_valid "$FDB"; then
	assert_eq "fp" "$(sqlq "$FDB" "SELECT unwind FROM heapprof_process;")" "heapprof_process.unwind"
	check_known_common "$FDB"
	for cs in $(leaf_callsites "$FDB" do_malloc); do
		st=$(stack_of "$FDB" "$cs")
		assert_eq "do_malloc main" "$(printf '%s\n' "$st" | head -n2 | tr '\n' ' ' | sed 's/ $//')" \
			"fp: first two frames of do_malloc's stack"
	done
	for cs in $(leaf_callsites "$FDB" thread_alloc); do
		st=$(stack_of "$FDB" "$cs")
		assert_eq "thread_alloc thread_main" "$(printf '%s\n' "$st" | head -n2 | tr '\n' ' ' | sed 's/ $//')" \
			"fp: first two frames of thread_alloc's stack"
	done
	for cs in $(leaf_callsites "$FDB" deep_alloc); do
		st=$(stack_of "$FDB" "$cs")
		assert_eq 20 "$(printf '%s\n' "$st" | grep -cx recurse)" "fp: recurse frames in deep_alloc's stack"
	done
fi

# ---------------------------------------------------------------------------
t_begin "known --max-frames 3: stacks cut, leaf numbers unchanged"
MDB="$T_DIR/known-mf.db"
hp_record known-mf -i 1 --max-frames 3 -o "$MDB" -- "$PROGS/known" deep-only
assert_eq 7 "$REC_RC" "exit status" || show_err known-mf
if db_valid "$MDB"; then
	assert_eq 3 "$(sqlq "$MDB" "SELECT max_frames FROM heapprof_process;")" "heapprof_process.max_frames"
	check_views "$MDB" deep_alloc 3 2331 3 2331
	# Leaf first: deep_alloc, recurse, recurse (at most one extra frame
	# marking the cut is tolerated).
	for cs in $(leaf_callsites "$MDB" deep_alloc); do
		st=$(stack_of "$MDB" "$cs")
		assert_le "$(printf '%s\n' "$st" | grep -c .)" 4 "frames in deep_alloc's stack"
		assert_eq "deep_alloc recurse recurse" "$(printf '%s\n' "$st" | head -n3 | tr '\n' ' ' | sed 's/ $//')" \
			"kept frames are the innermost"
	done
	tr=$(sqlq "$MDB" "SELECT value FROM heapprof_process_stats WHERE name = 'truncated_stacks';")
	[ -n "$tr" ] && assert_ge "$tr" 1 "heapprof_process_stats truncated_stacks"
fi

# ---------------------------------------------------------------------------
t_begin "record without -o writes heapprof.<cmd>.<pid>.db in the current dir"
mkdir -p "$T_DIR/defname"
rc=0
(cd "$T_DIR/defname" && exec timeout -k 5 120 "$HP" record -i 1 -- "$PROGS/known" deep-only) \
	>"$T_DIR/defname.out" 2>"$T_DIR/defname.err" </dev/null || rc=$?
assert_eq 7 "$rc" "exit status"
dpid=$(sed -n 's/^known: pid \([0-9]*\)$/\1/p' "$T_DIR/defname.err" | head -n1)
assert_eq "heapprof.known.$dpid.db" "$(cd "$T_DIR/defname" && ls)" "files written"
[ -f "$T_DIR/defname/heapprof.known.$dpid.db" ] &&
	check_views "$T_DIR/defname/heapprof.known.$dpid.db" deep_alloc 3 2331 3 2331

# ---------------------------------------------------------------------------
CDB="$T_DIR/known_cxx.db"
t_begin "known_cxx -i 1: exit status 9, exact views per function (demangled)"
bare_run known_cxx "$PROGS/known_cxx"
hp_record known_cxx -i 1 -o "$CDB" -- "$PROGS/known_cxx"
assert_eq 9 "$BARE_RC" "bare exit status"
assert_eq 9 "$REC_RC" "heapprof record exit status" || show_err known_cxx
assert_eq "$(cat "$T_DIR/known_cxx.bare.out")" "$(cat "$T_DIR/known_cxx.out")" "stdout under the profiler"
if db_valid "$CDB"; then
	check_expect_table "$CDB" "$CXX_EXPECT"
	assert_eq 9 "$(sqlq "$CDB" "SELECT exit_status FROM heapprof_process;")" "heapprof_process.exit_status"

	assert_eq 0 "$(leaf_rows "$CDB" "do_new_fail()")" "rows of do_new_fail() (failed allocations)"

	t_begin "known_cxx -i 1: no double counting inside operator new, no mangled names"
	bad=$(sqlq "$CDB" "SELECT f.name || ' ' || sum(a.count) FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  WHERE $ALLOCATOR_LEAF_SQL GROUP BY f.name;")
	assert_eq "" "$bad" "leaf frames that are allocator functions"
	assert_eq 0 "$(sqlq "$CDB" "SELECT count(*) FROM stack_profile_frame f
	  JOIN stack_profile_mapping m ON f.mapping = m.id
	  WHERE m.name LIKE '%/progs/known_cxx' AND f.name LIKE '\_Z%' ESCAPE '\\';")" \
		"mangled names in the known_cxx binary"
	for fn in "do_new()" "do_aligned_new()"; do
		for cs in $(leaf_callsites "$CDB" "$fn"); do
			st=$(stack_of "$CDB" "$cs")
			assert_eq "$fn main" "$(printf '%s\n' "$st" | head -n2 | tr '\n' ' ' | sed 's/ $//')" \
				"first two frames of $fn's stack"
		done
	done

	t_begin "known_cxx -i 1: report shows demangled names and exact numbers"
	run_bounded 60 "$HP" report "$CDB" --view alloc_objects --top 100 >"$T_DIR/cxx.report" 2>&1
	while read -r fn ao as o s; do
		[ -n "$fn" ] || continue
		check_report "report --view alloc_objects" "$T_DIR/cxx.report" self "$fn" "$ao"
	done <<<"$CXX_EXPECT"
	run_bounded 60 "$HP" report "$CDB" --view space --top 100 >"$T_DIR/cxx.report.space" 2>&1
	check_report "report --view space" "$T_DIR/cxx.report.space" self "do_aligned_new()" 2112
	check_report "report --view space" "$T_DIR/cxx.report.space" self "do_new()" 960
fi

t_begin "known_cxx -i 1 --unwind fp: same numbers"
CFDB="$T_DIR/known_cxx-fp.db"
hp_record known_cxx-fp -i 1 --unwind fp -o "$CFDB" -- "$PROGS/known_cxx"
assert_eq 9 "$REC_RC" "exit status" || show_err known_cxx-fp
db_valid "$CFDB" && check_expect_table "$CFDB" "$CXX_EXPECT"

# ---------------------------------------------------------------------------
t_begin "nofp (-O2 -fomit-frame-pointer): dwarf unwinds the whole stack"
NOFP="$T_DIR/nofp-O2"
if ! gcc -std=gnu11 -O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls \
	-o "$NOFP" "$HERE/progs/nofp.c" 2>"$T_DIR/nofp.cc.err"; then
	t_skip "cannot build nofp.c: $(head -c 200 "$T_DIR/nofp.cc.err")"
else
	NDB="$T_DIR/nofp.db"
	hp_record nofp -i 1 -o "$NDB" -- "$NOFP"
	assert_eq 13 "$REC_RC" "exit status" || show_err nofp
	if db_valid "$NDB"; then
		# nofp_leaf: 7 x malloc(333), live.
		check_views "$NDB" nofp_leaf 7 2331 7 2331
		for cs in $(leaf_callsites "$NDB" nofp_leaf); do
			st=$(stack_of "$NDB" "$cs")
			assert_eq "nofp_leaf $(printf 'nofp_recurse %.0s' $(seq 10))nofp_outer main" \
				"$(printf '%s\n' "$st" | head -n 13 | tr '\n' ' ' | sed 's/ $//')" \
				"nofp_leaf's stack"
		done
	fi
	# Frame-pointer unwinding through code without frame pointers: the
	# stack beyond the leaf may be short or wrong, but the program runs
	# unchanged and the leaf (the allocator's caller) is exact.
	NFDB="$T_DIR/nofp-fp.db"
	hp_record nofp-fp -i 1 --unwind fp -o "$NFDB" -- "$NOFP"
	assert_eq 13 "$REC_RC" "--unwind fp: exit status" || show_err nofp-fp
	db_valid "$NFDB" && check_views "$NFDB" nofp_leaf 7 2331 7 2331
fi

t_summary
