#!/usr/bin/env bash
# test_heaps.sh BUILD: the custom allocator API and named heaps (issue 5's
# must-show list).  examples/pool profiled with -i 1 --all-heaps: its heap
# "example.pool" is exact per function next to libc.malloc, in SQL, in
# `heapprof report` and in `heapprof pprof --heap`; heap selection
# (--heaps, --all-heaps, --exclude-heaps, --heap-intervals) records
# nothing of an unselected heap, in the client as in the profile; enable
# and disable callbacks run with the session's interval, from
# registerHeap under `record -- CMD` and from the "heapprof-cb" thread on
# a late attach through a private heapprofd; reportSample is taken as is,
# reportAllocation sampled without bias; misuse of the API fails softly
# with one line per kind; errno survives the first stack unwind; the
# CLI's limits; a fork child's own heap rows and callbacks; a program not
# linked with the library finds the API with dlsym when preloaded.
#
# Programs (expected numbers derived in their comments): examples/pool.c,
# progs/api_callbacks.c, api_sample.c, api_misuse.c, api_errno.c,
# api_fork.c, api_forkcb.c, heaps_dlsym.c.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
POOL="$BUILD/examples/pool"
t_require "$HP" "$BUILD/libheapprof.so" "$POOL" "$PROGS/api_callbacks" \
	"$PROGS/api_sample" "$PROGS/api_misuse" "$PROGS/api_fork" "$PROGS/api_errno" \
	"$PROGS/api_forkcb" "$PROGS/heaps_dlsym"

# A private daemon for the late-attach cases.
. "$HERE/session_helpers.sh"

# heap_where HEAP [UPID]: the SQL condition on allocation rows `a`.
heap_where() {
	local w
	w="a.heap_name = '$(sql_quote "$1")'"
	[ -n "${2:-}" ] && w="$w AND a.upid = $2"
	printf '%s' "$w"
}

# heap_incl DB HEAP FUNC [UPID]: incl_views within heap HEAP (of one
# process); heap_leaf: leaf_views likewise.
heap_incl() { incl_views "$1" "$3" "$(heap_where "$2" "${4:-}")"; }
heap_leaf() { leaf_views "$1" "$3" "" "$(heap_where "$2" "${4:-}")"; }

# heap_total DB HEAP [UPID]: the four views of the whole heap.
heap_total() {
	sqlq "$1" "SELECT $VIEWS_SQL FROM heap_profile_allocation a
	  WHERE $(heap_where "$2" "${3:-}");"
}

# heap_rows DB HEAP: allocation rows of HEAP.
heap_rows() {
	sqlq "$1" "SELECT count(*) FROM heap_profile_allocation a WHERE $(heap_where "$2");"
}

# check_heap incl|leaf DB HEAP FUNC "AO AS O S" [UPID]: exact.
check_heap() {
	local got
	got=$("heap_$1" "$2" "$3" "$4" "${6:-}") || return 1
	assert_eq "$5" "$got" "$3: $1 $4 (alloc_objects alloc_space objects space)"
}

# heap_intervals DB: "name|interval" of every heap of every process.
heap_intervals() {
	sqlq "$1" "SELECT name || '|' || sampling_interval FROM heapprof_heap
	  ORDER BY upid, heap_id;" | tr '\n' ' ' | sed 's/ $//'
}

stat_of() { # DB NAME: heapprof_process_stats value (summed over processes)
	sqlq "$1" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$2';"
}

# Expected, examples/pool.c with -i 1 (see its comment):
# example.pool, inclusive: load_nodes 1000 x 48 B kept; parse_tokens 500 x
# 32 B, 250 freed; leaf pool_alloc (the function that called the API) is
# both.  libc.malloc: make_names 200 x 100 B; pool_grow 4 x 16384 B (3 under
# load_nodes, 1 under parse_tokens); stdout's buffer 4096 B.
check_pool_heap() { # DB
	check_heap incl "$1" example.pool load_nodes "1000 48000 1000 48000"
	check_heap incl "$1" example.pool parse_tokens "500 16000 250 8000"
	check_heap leaf "$1" example.pool pool_alloc "1500 64000 1250 56000"
	assert_eq "1500 64000 1250 56000" "$(heap_total "$1" example.pool)" "example.pool totals"
	check_heap incl "$1" example.pool make_names "0 0 0 0"
	assert_eq 0 "$(q "$1" "SELECT count(*) FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  WHERE a.heap_name = 'example.pool' AND f.name <> 'pool_alloc';")" \
		"example.pool rows whose leaf is not pool_alloc"
}
check_pool_malloc() { # DB
	check_heap leaf "$1" libc.malloc make_names "200 20000 200 20000"
	check_heap leaf "$1" libc.malloc pool_grow "4 65536 4 65536"
	check_heap incl "$1" libc.malloc load_nodes "3 49152 3 49152"
	check_heap incl "$1" libc.malloc parse_tokens "1 16384 1 16384"
	check_heap leaf "$1" libc.malloc pool_alloc "0 0 0 0"
}

# ---------------------------------------------------------------------------
PDB="$T_DIR/pool.db"
t_begin "pool -i 1 --all-heaps: example.pool exact per function, next to libc.malloc"
bare_run pool "$POOL"
hp_record pool -i 1 --all-heaps -o "$PDB" -- "$POOL"
assert_eq 0 "$REC_RC" "record exit status" || show_err pool
assert_eq "$(cat "$T_DIR/pool.bare.out")" "$(cat "$T_DIR/pool.out")" "stdout as in a bare run"
if db_valid "$PDB"; then
	check_pool_heap "$PDB"
	check_pool_malloc "$PDB"
	assert_eq "libc.malloc example.pool" \
		"$(q "$PDB" "SELECT DISTINCT heap_name FROM heap_profile_allocation ORDER BY heap_name = 'example.pool', 1;" | tr '\n' ' ' | sed 's/ $//')" \
		"the heaps of the rows"
	assert_eq "0|libc.malloc|1 1|example.pool|1" \
		"$(q "$PDB" "SELECT heap_id || '|' || name || '|' || sampling_interval FROM heapprof_heap ORDER BY heap_id;" | tr '\n' ' ' | sed 's/ $//')" \
		"heapprof_heap: heap_id|name|sampling_interval"
	# The client recorded 1500 pool reports, 200 + 4 + 1 mallocs.
	assert_eq 1705 "$(stat_of "$PDB" samples)" "samples"
	assert_eq 250 "$(stat_of "$PDB" frees_matched)" "frees_matched"
fi

t_begin "pool: heapprof report has a section per heap"
if run_bounded 60 "$HP" report "$PDB" >"$T_DIR/pool.report" 2>"$T_DIR/pool.report.err"; then
	# The per-dump summary of each heap: "  heap NAME (every allocation)
	# at this dump:" (its interval, 1 here), then indented lines
	# "space ... (N B)", "objects N".
	heap_block() { # NAME
		awk -v h="  heap $1 (every allocation) at this dump:" '
		$0 == h { on = 1; next }
		on && /^    / { print; next }
		on { exit }' "$T_DIR/pool.report"
	}
	blk=$(heap_block example.pool)
	assert_match '^ +space +.*\(56000 B\)' "$blk" "example.pool space at this dump"
	assert_match '^ +alloc_space +.*\(64000 B\)' "$blk" "example.pool alloc_space"
	assert_match '^ +objects +1250 ' "$blk" "example.pool objects"
	assert_match '^ +alloc_objects +1500 ' "$blk" "example.pool alloc_objects"
	blk=$(heap_block libc.malloc)
	assert_match '^ +space +.*\(89632 B\)' "$blk" "libc.malloc space at this dump (65536 + 20000 + 4096)"
	assert_match '^ +objects +205 ' "$blk" "libc.malloc objects"
	# The top tables of the example.pool section.
	awk '/^  Heap example.pool, view/ { on = 1 } /^  Heap / && !/example.pool/ { on = 0 } on' \
		"$T_DIR/pool.report" >"$T_DIR/pool.report.pool"
	assert_match 'Heap example.pool, view space' "$(cat "$T_DIR/pool.report.pool")" "example.pool section"
	check_report pool "$T_DIR/pool.report.pool" self pool_alloc 56000
	check_report pool "$T_DIR/pool.report.pool" inclusive load_nodes 48000
	check_report pool "$T_DIR/pool.report.pool" inclusive parse_tokens 8000
	assert_eq "" "$(report_row "$T_DIR/pool.report.pool" self pool_grow)" \
		"no pool_grow (a malloc caller) in the example.pool section"
else
	t_fail "heapprof report failed: $(head -c 400 "$T_DIR/pool.report.err")"
fi

t_begin "pool: heapprof pprof --heap example.pool has the heap's exact totals"
PPB="$T_DIR/pool-heap.pb.gz"
rc=0
run_bounded 60 "$HP" pprof "$PDB" --heap example.pool -o "$PPB" >"$T_DIR/pp.out" 2>"$T_DIR/pp.err" || rc=$?
assert_eq 0 "$rc" "pprof exit status: $(head -c 300 "$T_DIR/pp.err")"
assert_match "^wrote $PPB: process [0-9]+, heap example.pool, dump 2 of 2, 2 samples$" \
	"$(cat "$T_DIR/pp.out")" "pprof's line: 2 samples (the load_nodes and parse_tokens stacks)"
# --all-heaps: one file per heap; example.pool's is the same file.
mkdir -p "$T_DIR/ppall"
rc=0
run_bounded 60 "$HP" pprof "$PDB" --all-heaps -o "$T_DIR/ppall" >"$T_DIR/ppall.out" 2>"$T_DIR/ppall.err" || rc=$?
assert_eq 0 "$rc" "pprof --all-heaps exit status: $(head -c 300 "$T_DIR/ppall.err")"
assert_eq "libc.malloc example.pool" \
	"$(sed -n 's/^wrote .*, heap \([^,]*\), dump 2 of 2, [0-9]* samples$/\1/p' "$T_DIR/ppall.out" | tr '\n' ' ' | sed 's/ $//')" \
	"pprof --all-heaps: one file per heap"
f=$(sed -n 's/^wrote \(.*\): .*, heap example.pool, .*/\1/p' "$T_DIR/ppall.out")
if [ -n "$f" ] && [ -f "$f" ]; then
	cmp -s "$f" "$PPB" || t_fail "--all-heaps's example.pool file ($f) differs from --heap example.pool's"
else
	t_fail "--all-heaps: no example.pool file ($f)"
fi
rc=0
run_bounded 60 "$HP" pprof "$PDB" --heap no.such.heap -o "$T_DIR/none.pb.gz" >/dev/null 2>"$T_DIR/pp2.err" || rc=$?
assert_eq 1 "$rc" "pprof --heap of a heap the profile does not have fails"
assert_eq "heapprof: pprof: $PDB: no heap 'no.such.heap' in any process" "$(cat "$T_DIR/pp2.err")" \
	"pprof --heap no.such.heap: the message"
if command -v go >/dev/null 2>&1; then
	mkdir -p "$T_DIR/home" "$T_DIR/gocache"
	gopprof() {
		env HOME="$T_DIR/home" GOCACHE="$T_DIR/gocache" GOFLAGS= \
			GOTOOLCHAIN=local GOPROXY=off PPROF_TMPDIR="$T_DIR/home" \
			timeout -k 5 120 go tool pprof "$@" 2>"$T_DIR/gopprof.err" </dev/null
	}
	# "FLAT CUM" of FUNC in -top output (unit B removed).
	top_fc() {
		awk -v fn="$2" '/^ *flat +flat%/ { b = 1; next }
		b && $6 == fn { f = $1; c = $4; sub(/B$/, "", f); sub(/B$/, "", c); print f, c; exit }' "$1"
	}
	for spec in "alloc_objects 1500 1000 500" "alloc_space 64000 48000 16000" \
		"objects 1250 1000 250" "space 56000 48000 8000"; do
		read -r si tot ln pt <<<"$spec"
		if gopprof -symbolize=none -top -nodecount=10000 -nodefraction=0 -edgefraction=0 \
			-unit=B -sample_index="$si" "$PPB" >"$T_DIR/pool-$si.top"; then
			assert_eq "$tot $tot" "$(top_fc "$T_DIR/pool-$si.top" pool_alloc)" "$si: pool_alloc flat, cum"
			assert_eq "$ln" "$(top_fc "$T_DIR/pool-$si.top" load_nodes | cut -d' ' -f2)" "$si: load_nodes cum"
			assert_eq "$pt" "$(top_fc "$T_DIR/pool-$si.top" parse_tokens | cut -d' ' -f2)" "$si: parse_tokens cum"
			assert_eq "" "$(top_fc "$T_DIR/pool-$si.top" make_names)" "$si: no make_names (malloc's)"
		else
			t_fail "go tool pprof -top ($si) failed: $(head -c 400 "$T_DIR/gopprof.err")"
		fi
	done
	if gopprof -symbolize=none -raw "$PPB" >"$T_DIR/pool.raw"; then
		assert_match '^Period: 1$' "$(cat "$T_DIR/pool.raw")" "period = the heap's interval"
	else
		t_fail "go tool pprof -raw failed: $(head -c 400 "$T_DIR/gopprof.err")"
	fi
else
	t_note "go is missing: pprof contents not read back"
fi

# ---------------------------------------------------------------------------
t_begin "--all-heaps --exclude-heaps example.pool: nothing of the pool; malloc exact"
hp_record ex -i 1 --all-heaps --exclude-heaps example.pool -o "$T_DIR/ex.db" -- "$POOL"
assert_eq 0 "$REC_RC" "record exit status" || show_err ex
if db_valid "$T_DIR/ex.db"; then
	assert_eq 0 "$(heap_rows "$T_DIR/ex.db" example.pool)" "example.pool rows"
	check_pool_malloc "$T_DIR/ex.db"
	assert_eq "libc.malloc|1 example.pool|0" "$(heap_intervals "$T_DIR/ex.db")" \
		"heapprof_heap: example.pool registered, not profiled (0)"
	# Not recorded by the client at all (not only dropped at the dump).
	assert_eq 205 "$(stat_of "$T_DIR/ex.db" samples)" "samples: the mallocs only"
fi

t_begin "--heaps libc.malloc: nothing of the pool"
hp_record hm -i 1 --heaps libc.malloc -o "$T_DIR/hm.db" -- "$POOL"
assert_eq 0 "$REC_RC" "record exit status" || show_err hm
if db_valid "$T_DIR/hm.db"; then
	assert_eq 0 "$(heap_rows "$T_DIR/hm.db" example.pool)" "example.pool rows"
	check_pool_malloc "$T_DIR/hm.db"
	assert_eq 205 "$(stat_of "$T_DIR/hm.db" samples)" "samples: the mallocs only"
	run_bounded 60 "$HP" report "$T_DIR/hm.db" >"$T_DIR/hm.report" 2>&1
	assert_match "^  not selected   example.pool \(registered by the program" \
		"$(cat "$T_DIR/hm.report")" "report names the registered heap it did not record"
fi

t_begin "--heaps example.pool: nothing of malloc; the pool exact"
hp_record hpo -i 1 --heaps example.pool -o "$T_DIR/hpo.db" -- "$POOL"
assert_eq 0 "$REC_RC" "record exit status" || show_err hpo
assert_match "libc.malloc is not selected" "$(cat "$T_DIR/hpo.err")" "says malloc is not selected"
if db_valid "$T_DIR/hpo.db"; then
	assert_eq 0 "$(heap_rows "$T_DIR/hpo.db" libc.malloc)" "libc.malloc rows"
	check_pool_heap "$T_DIR/hpo.db"
	assert_eq 1500 "$(stat_of "$T_DIR/hpo.db" samples)" "samples: the pool reports only"
fi

t_begin "--heaps some.other.heap: nothing recorded at all"
hp_record hso -i 1 --heaps some.other.heap -o "$T_DIR/hso.db" -- "$POOL"
assert_eq 0 "$REC_RC" "record exit status" || show_err hso
if db_valid "$T_DIR/hso.db"; then
	assert_eq 0 "$(q "$T_DIR/hso.db" "SELECT count(*) FROM heap_profile_allocation;")" "allocation rows"
	assert_eq 0 "$(stat_of "$T_DIR/hso.db" samples)" "samples"
	assert_eq "libc.malloc|0 example.pool|0" "$(heap_intervals "$T_DIR/hso.db")" \
		"heapprof_heap: neither heap profiled"
fi

# ---------------------------------------------------------------------------
t_begin "two heaps, two intervals: --heaps libc.malloc,example.pool --heap-intervals 4096,1"
hp_record two --heaps libc.malloc,example.pool --heap-intervals 4096,1 -o "$T_DIR/two.db" -- "$POOL"
assert_eq 0 "$REC_RC" "record exit status" || show_err two
if db_valid "$T_DIR/two.db"; then
	check_pool_heap "$T_DIR/two.db"
	assert_eq "libc.malloc|4096 example.pool|1" "$(heap_intervals "$T_DIR/two.db")" \
		"heapprof_heap: each heap's interval"
	# 16 KiB chunks are at least the interval: exact at 4096 too.
	check_heap leaf "$T_DIR/two.db" libc.malloc pool_grow "4 65536 4 65536"
	assert_eq 4096 "$(q "$T_DIR/two.db" "SELECT sampling_interval FROM heapprof_process;")" \
		"heapprof_process.sampling_interval is malloc's"
	run_bounded 60 "$HP" report "$T_DIR/two.db" >"$T_DIR/two.report" 2>&1
	assert_match "^  heap libc.malloc \(sampled every 4.00 KiB \(4096 B\)\) at this dump:" \
		"$(cat "$T_DIR/two.report")" "report: malloc's interval in its heading"
	assert_match "^  heap example.pool \(every allocation\) at this dump:" \
		"$(cat "$T_DIR/two.report")" "report: the pool's interval in its heading"
fi

# ---------------------------------------------------------------------------
t_begin "callbacks with record -- CMD: selected heaps enabled inside registerHeap, with their intervals"
CBLOG="$T_DIR/cb.log"
hp_record cb --heaps cb.a,cb.b --heap-intervals 1,8192 -o "$T_DIR/cb.db" -- \
	"$PROGS/api_callbacks" "$CBLOG" run
assert_eq 0 "$REC_RC" "record exit status" || show_err cb
# Enabled before registerHeap returned (registered HEAP 1), on the
# registering thread; cb.c never; no disable callback at exit.
assert_eq "enabled cb.a 1 main
registered cb.a 1
enabled cb.b 8192 main
registered cb.b 1
registered cb.c 0
reported 10 3 0
exit" "$(cat "$CBLOG" 2>/dev/null)" "the program's log"
if db_valid "$T_DIR/cb.db"; then
	check_heap leaf "$T_DIR/cb.db" cb.a a_alloc "10 50000 6 30000"
	check_heap leaf "$T_DIR/cb.db" cb.b b_alloc "3 30000 3 30000"
	assert_eq 0 "$(heap_rows "$T_DIR/cb.db" cb.c)" "cb.c rows"
	assert_eq 0 "$(heap_rows "$T_DIR/cb.db" libc.malloc)" "libc.malloc rows"
	assert_eq "libc.malloc|0 cb.a|1 cb.b|8192 cb.c|0" "$(heap_intervals "$T_DIR/cb.db")" \
		"heapprof_heap intervals"
fi

t_begin "callbacks: no session, no callback"
bare_run cbb "$PROGS/api_callbacks" "$T_DIR/cbb.log" run
assert_eq 0 "$BARE_RC" "exit status"
assert_eq "registered cb.a 0
registered cb.b 0
registered cb.c 0
reported 0 0 0
exit" "$(cat "$T_DIR/cbb.log" 2>/dev/null)" "the program's log"
assert_eq "" "$(cat "$T_DIR/cbb.bare.out" "$T_DIR/cbb.bare.err")" "no output"

# start_cb_target TAG LOG wait|closefds: api_callbacks in the background,
# driven through files in D=$W/TAG; TPID once it is ready.
start_cb_target() {
	D="$W/$1"
	mkdir -p "$D"
	"$PROGS/api_callbacks" "$2" "$3" "$D" >"$D/out" 2>"$D/err" &
	TPID=$!
	TPIDS="$TPIDS $TPID"
	wait_until 20 "ready from api_callbacks" test -e "$D/ready"
}

t_begin "callbacks on a late attach: enabled and disabled from heapprof-cb, once per session"
# (The session's end reaches the program as STOP or a closed connection;
# heapprof-cb notices within 200 ms even though the program is idle.)
start_daemon
LLOG="$T_DIR/late.log"
if start_cb_target late "$LLOG" wait; then
	# Ended once the enable callbacks ran (a -d session could end
	# before a busy machine ran the heapprof-cb thread at all).
	start_record late1 -p "$TPID" --all-heaps -i 4096 -o "$T_DIR/late1.db"
	wait_until 20 "enable callbacks" grep_q "$LLOG" "^enabled cb.c "
	kill -INT "$RPID"
	wait_record late1
	assert_eq 0 "$REC_RC" "first session's exit status"
	wait_until 20 "disable callbacks" grep_q "$LLOG" "^disabled cb.c "
	assert_eq "registered cb.a 0
registered cb.b 0
registered cb.c 0
enabled cb.a 4096 heapprof-cb
enabled cb.b 4096 heapprof-cb
enabled cb.c 4096 heapprof-cb
disabled cb.a heapprof-cb
disabled cb.b heapprof-cb
disabled cb.c heapprof-cb" "$(cat "$LLOG")" "log after the first session"
	db_valid "$T_DIR/late1.db" &&
		assert_eq "libc.malloc|4096 cb.a|4096 cb.b|4096 cb.c|4096" \
			"$(heap_intervals "$T_DIR/late1.db")" "first session: heapprof_heap intervals"

	# A second session, of cb.b alone at interval 1: enabled again; a
	# round of reports while it runs is exact for cb.b, nothing else.
	start_record late2 -p "$TPID" --heaps cb.b --heap-intervals 1 -o "$T_DIR/late2.db"
	if wait_until 20 "second enable" grep_q "$LLOG" "^enabled cb.b 1 "; then
		: >"$D/go"
		wait_until 20 "a round of reports" test -e "$D/allocated"
	fi
	kill -INT "$RPID"
	wait_record late2
	assert_eq 0 "$REC_RC" "second session's exit status"
	wait_until 20 "second disable" count_is "$LLOG" "^disabled cb.b " 2
	if db_valid "$T_DIR/late2.db"; then
		check_heap leaf "$T_DIR/late2.db" cb.b b_alloc "3 30000 3 30000"
		assert_eq 0 "$(q "$T_DIR/late2.db" "SELECT count(*) FROM heap_profile_allocation
		  WHERE heap_name <> 'cb.b';")" "rows of other heaps"
		assert_eq "libc.malloc|0 cb.a|0 cb.b|1 cb.c|0" "$(heap_intervals "$T_DIR/late2.db")" \
			"second session: heapprof_heap intervals"
	fi
fi
: >"$D/exit"
wait_child 40 "$TPID"
assert_eq 0 "$WAIT_RC" "target exit status"
assert_eq "registered cb.a 0
registered cb.b 0
registered cb.c 0
enabled cb.a 4096 heapprof-cb
enabled cb.b 4096 heapprof-cb
enabled cb.c 4096 heapprof-cb
disabled cb.a heapprof-cb
disabled cb.b heapprof-cb
disabled cb.c heapprof-cb
enabled cb.b 1 heapprof-cb
reported 0 3 0
disabled cb.b heapprof-cb
exit" "$(cat "$LLOG")" "the whole log: each callback once per session, none at exit"
assert_eq "" "$(cat "$D/out" "$D/err")" "nothing on the target's stdout or stderr"
daemon_gone TERM

t_begin "callbacks reach a program that closed every descriptor (heapprof-cb's eventfd with them)"
start_daemon
CLOG="$T_DIR/closed.log"
if start_cb_target closed "$CLOG" closefds; then
	start_record closed -p "$TPID" --heaps cb.a -i 4096 -o "$T_DIR/closed.db"
	wait_until 20 "the enable callback" grep_q "$CLOG" "^enabled cb.a 4096 heapprof-cb"
	kill -INT "$RPID"
	wait_record closed
	wait_until 20 "the disable callback" grep_q "$CLOG" "^disabled cb.a heapprof-cb"
fi
: >"$D/exit"
wait_child 40 "$TPID"
assert_eq 0 "$WAIT_RC" "target exit status"
assert_eq "registered cb.a 0
registered cb.b 0
registered cb.c 0
enabled cb.a 4096 heapprof-cb
disabled cb.a heapprof-cb
exit" "$(cat "$CLOG")" "the log: one enable, one disable, nothing else written into it"
assert_eq "" "$(cat "$D/out" "$D/err")" "nothing on the target's stdout or stderr"
daemon_gone TERM

t_begin "callbacks in fork children: a followed child is enabled on its own thread; an unfollowed one gets none"
hp_record fcb --follow-fork --all-heaps -i 1 -o "$T_DIR/fcb.db" -- "$PROGS/api_forkcb"
assert_eq 0 "$REC_RC" "record exit status" || show_err fcb
assert_eq "enabled parent 1
enabled child 1
child: enabled" "$(cat "$T_DIR/fcb.out")" "followed: the child's own enable callback, none at exit"
if db_valid "$T_DIR/fcb.db"; then
	assert_eq "1 10 1 10" "$(heap_total "$T_DIR/fcb.db" fk.heap \
		"$(q "$T_DIR/fcb.db" "SELECT upid FROM heapprof_process WHERE how = 'command';")")" \
		"the parent's fk.heap"
	assert_eq "2 50 2 50" "$(heap_total "$T_DIR/fcb.db" fk.heap \
		"$(q "$T_DIR/fcb.db" "SELECT upid FROM heapprof_process WHERE how = 'fork';")")" \
		"the child's fk.heap, both blocks"
fi
# Unfollowed, the child waits 300 ms: far longer than a followed child
# takes to get its callback, so one that should not come would show.
hp_record fcn --all-heaps -i 1 -o "$T_DIR/fcn.db" -- "$PROGS/api_forkcb" 300
assert_eq 0 "$REC_RC" "record exit status" || show_err fcn
assert_eq "enabled parent 1
child: not enabled" "$(cat "$T_DIR/fcn.out")" "not followed: no callback in the child"

# ---------------------------------------------------------------------------
t_begin "reportSample under -i 4096: taken as is, exact"
hp_record rs --all-heaps -i 4096 -o "$T_DIR/rs.db" -- "$PROGS/api_sample" sample 1000 3000
assert_eq 0 "$REC_RC" "record exit status" || show_err rs
assert_eq "recorded 1000" "$(cat "$T_DIR/rs.out")" "every reportSample returned true"
db_valid "$T_DIR/rs.db" &&
	check_heap leaf "$T_DIR/rs.db" samp.heap sample_report "1000 3000000 1000 3000000"

t_begin "reportAllocation under -i 4096: 1000000 x 64 B estimated within bounds"
# Poisson sampling per byte at I = 4096 over B = 64e6 bytes: the bytes
# estimate has variance <= I * B (sigma = 512000 = 0.8%); the object count
# (each sample counts 1/p, p = 1 - exp(-64/4096)) has variance
# <= N * I / s = 1e6 * 64 (sigma = 8000 = 0.8%).  5% is 6.25 sigma: a
# correct sampler fails it with probability < 1e-9.  Every block is freed
# right after its report: what was charged comes back exactly.
hp_record ra --all-heaps -i 4096 -o "$T_DIR/ra.db" -- "$PROGS/api_sample" alloc 1000000 64
assert_eq 0 "$REC_RC" "record exit status" || show_err ra
assert_match '^recorded [0-9]+$' "$(cat "$T_DIR/ra.out")" "the program's line"
if db_valid "$T_DIR/ra.db"; then
	read -r ao as o s <<<"$(heap_leaf "$T_DIR/ra.db" samp.heap many_alloc)"
	assert_within "$as" 64000000 3200000 "alloc_space (+-5%)"
	assert_within "$ao" 1000000 50000 "alloc_objects (+-5%)"
	assert_eq "0 0" "$o $s" "objects space after every free"
	# Sampled, not recorded one by one: about 64e6 / 4096 = 15625 samples.
	k=$(sed -n 's/^recorded //p' "$T_DIR/ra.out")
	assert_within "$k" 15625 2000 "reports that returned true"
	assert_eq 0 "$(stat_of "$T_DIR/ra.db" live_table_full)" "live_table_full"
fi

# ---------------------------------------------------------------------------
MISUSE_EXPECT='create(NULL): NULL
create(""): NULL
create(64 bytes): NULL
create("libc.malloc"): NULL
create(63 bytes): non-NULL
created: 63
create("h64"): NULL
create("h65"): NULL
setEnabledCallback(NULL): NULL
setDisabledCallback(NULL): NULL
getSamplingInterval(NULL): 0
registerHeap(NULL): 0
registerHeap(not an info): 0
registered: 62 heaps, 0 bad ids
registerHeap(same info) again: same id
reportAllocation(0): 0
reportSample(0): 0
reportAllocation(999): 0
reportSample(999): 0
reportAllocation(64): 0
reportSample(64): 0
reportAllocation(unregistered): 0
reportSample(unregistered): 0
reportAllocation(registered): as expected
errno kept: yes'
NAME63=$(printf 'y%.0s' $(seq 63))

t_begin "API misuse without a session: NULL / 0 / false, one stderr line per kind"
bare_run mis "$PROGS/api_misuse" bare
assert_eq 0 "$BARE_RC" "exit status"
assert_eq "$MISUSE_EXPECT" "$(cat "$T_DIR/mis.bare.out")" "stdout"
err=$(cat "$T_DIR/mis.bare.err")
assert_eq 2 "$(printf '%s\n' "$err" | grep -c .)" "stderr lines (bad names; too many heaps): $err"
assert_eq 2 "$(printf '%s\n' "$err" | grep -c '^heapprof: AHeapInfo_create: ')" "lines prefixed heapprof:"
assert_eq 1 "$(printf '%s\n' "$err" | grep -c 'heap name')" "one line for the bad names"
assert_eq 1 "$(printf '%s\n' "$err" | grep -c 'at most 63 heaps')" "one line for too many heaps"

t_begin "API misuse under a session: bad ids still false, good ones recorded"
hp_record misp --all-heaps -i 1 -o "$T_DIR/misp.db" -- "$PROGS/api_misuse" profiled
assert_eq 0 "$REC_RC" "record exit status" || show_err misp
assert_eq "$MISUSE_EXPECT" "$(cat "$T_DIR/misp.out")" "stdout"
assert_eq 2 "$(grep -c '^heapprof: AHeapInfo_create: ' "$T_DIR/misp.err")" "the program's stderr lines"
if db_valid "$T_DIR/misp.db"; then
	# The one good report (100 B, freed) in the heap with the 63-byte name.
	check_heap leaf "$T_DIR/misp.db" "$NAME63" main "1 100 0 0"
	assert_eq 0 "$(q "$T_DIR/misp.db" "SELECT count(*) FROM heap_profile_allocation
	  WHERE heap_name NOT IN ('libc.malloc', '$NAME63');")" "rows of other custom heaps"
	assert_eq 62 "$(q "$T_DIR/misp.db" "SELECT count(*) FROM heapprof_heap
	  WHERE name <> 'libc.malloc' AND sampling_interval = 1;")" "62 registered heaps profiled"
fi

t_begin "errno kept across the first stack unwind: in a report, in malloc"
# The first sample of a process fills the unwinder's caches and scans the
# modules; neither the API nor the malloc hooks may let anything of that
# reach the program's errno.  --heaps errno.heap: the first unwind is in
# reportAllocation; --heaps libc.malloc: in malloc.
for sel in errno.heap libc.malloc; do
	hp_record er --heaps "$sel" -i 1 -o "$T_DIR/er.db" -- "$PROGS/api_errno"
	assert_eq 0 "$REC_RC" "record exit status ($sel)" || show_err er
	if [ "$sel" = errno.heap ]; then rec=recorded; else rec="not recorded"; fi
	assert_eq "reportAllocation: $rec, errno 4321
malloc: errno 4321
malloc again: errno 4321" "$(cat "$T_DIR/er.out")" "errno after each call, --heaps $sel"
done

t_begin "not linked, preloaded: dlsym finds the API under heapprof record, exact"
run_bounded 30 "$PROGS/heaps_dlsym" >"$T_DIR/dl.bare.out" 2>"$T_DIR/dl.bare.err"
assert_eq "api absent
done" "$(cat "$T_DIR/dl.bare.out")" "alone: the API is absent, the program goes on"
hp_record dl -i 1 --all-heaps -o "$T_DIR/dl.db" -- "$PROGS/heaps_dlsym"
assert_eq 0 "$REC_RC" "record exit status" || show_err dl
assert_eq "api present
done" "$(cat "$T_DIR/dl.out")" "preloaded by record: the API is there"
db_valid "$T_DIR/dl.db" &&
	check_heap incl "$T_DIR/dl.db" dl.heap dl_alloc "300 12000 200 8000"

t_begin "a linked program with no session runs as usual"
bare_run er "$PROGS/api_errno"
assert_eq 0 "$BARE_RC" "api_errno exit status"
assert_eq "reportAllocation: not recorded, errno 4321
malloc: errno 4321
malloc again: errno 4321" "$(cat "$T_DIR/er.bare.out")" "api_errno stdout"
bare_run pool2 "$POOL"
assert_eq 0 "$BARE_RC" "pool exit status"
assert_eq "pool: 1000 nodes, 250 tokens kept, 3+1 chunks, 200 names" "$(cat "$T_DIR/pool2.bare.out")" "pool stdout"
assert_eq "" "$(cat "$T_DIR/pool2.bare.err")" "pool stderr"
ldd "$POOL" 2>/dev/null | grep -q "libheapprof" || t_fail "pool is not linked with libheapprof: $(ldd "$POOL" 2>&1 | head -c 300)"

# ---------------------------------------------------------------------------
t_begin "CLI limits on heaps: exit 2, one line naming the flag"
N64=$(seq -s, -f 'h%g' 1 64)
N65=$(seq -s, -f 'h%g' 1 65)
L63=$(printf 'x%.0s' $(seq 63))
L64=$(printf 'x%.0s' $(seq 64))
cli_err() { # WANT_LINE ARGS...: record ARGS -- true fails with exit 2 and WANT_LINE
	local want=$1
	shift
	hp_record clierr "$@" -- true
	assert_eq 2 "$REC_RC" "exit status of record $(printf '%s' "$*" | head -c 80)"
	assert_eq "$want" "$(cat "$T_DIR/clierr.err")" "message of record $(printf '%s' "$*" | head -c 80)"
	assert_eq "" "$(cat "$T_DIR/clierr.out")" "stdout of record $(printf '%s' "$*" | head -c 80)"
}
cli_err "heapprof: record: invalid --heaps 'h65': too many heaps: at most 64" --heaps "$N65"
cli_err "heapprof: record: invalid --exclude-heaps 'h65': too many heaps: at most 64" \
	--all-heaps --exclude-heaps "$N65"
cli_err "heapprof: record: invalid --heaps '$L64': too long: heap names are at most 63 bytes" --heaps "$L64"
cli_err "heapprof: record: invalid --exclude-heaps '$L64': too long: heap names are at most 63 bytes" \
	--all-heaps --exclude-heaps "$L64"
cli_err "heapprof: record: field 'heap_sampling_intervals' (--heap-intervals): 1 given for 2 heaps: one per heap, in the same order" \
	--heaps a,b --heap-intervals 1
cli_err "heapprof: record: field 'heap_sampling_intervals' (--heap-intervals): 3 given for 2 heaps: one per heap, in the same order" \
	--heaps a,b --heap-intervals 1,2,3
cli_err "heapprof: record: field 'exclude_heaps' (--exclude-heaps): needs all_heaps: true (it removes heaps from all of them)" \
	--exclude-heaps a
cli_err "heapprof: record: field 'all_heaps' (--all-heaps): all_heaps and heaps exclude each other" \
	--heaps a --all-heaps
# At the limits: accepted.
hp_record cliok --print-config --heaps "$N64" -- true
assert_eq 0 "$REC_RC" "64 heaps accepted: $(head -c 200 "$T_DIR/cliok.err")"
assert_eq 64 "$(grep -c '^heaps: ' "$T_DIR/cliok.out")" "64 heaps in --print-config"
hp_record cliok --print-config --heaps "$L63" --heap-intervals 7 -- true
assert_eq 0 "$REC_RC" "a 63-byte name accepted: $(head -c 200 "$T_DIR/cliok.err")"
assert_match "^heaps: \"?$L63\"?$" "$(cat "$T_DIR/cliok.out")" "the 63-byte name in --print-config"

# ---------------------------------------------------------------------------
t_begin "--follow-fork: a fork child's custom heap rows are its own, exact"
bare_run fk "$PROGS/api_fork"
hp_record fk -i 1 --all-heaps --follow-fork -o "$T_DIR/fk.db" -- "$PROGS/api_fork"
assert_eq 0 "$REC_RC" "record exit status" || show_err fk
assert_eq "$(cat "$T_DIR/fk.bare.out")" "$(cat "$T_DIR/fk.out")" "stdout as in a bare run"
if db_valid "$T_DIR/fk.db"; then
	assert_eq "1|command 2|fork" "$(q "$T_DIR/fk.db" "SELECT upid || '|' || how FROM heapprof_process
	  ORDER BY upid;" | tr '\n' ' ' | sed 's/ $//')" "rows: the command, then its child"
	check_heap leaf "$T_DIR/fk.db" fork.heap child_report "20 4000 15 3000" 2
	check_heap leaf "$T_DIR/fk.db" fork.heap parent_report "0 0 0 0" 2
	check_heap leaf "$T_DIR/fk.db" fork.heap parent_report "10 1000 10 1000" 1
	check_heap leaf "$T_DIR/fk.db" fork.heap parent_after "5 1500 5 1500" 1
	check_heap leaf "$T_DIR/fk.db" fork.heap child_report "0 0 0 0" 1
	assert_eq "fork.heap|1" "$(q "$T_DIR/fk.db" "SELECT name || '|' || sampling_interval FROM heapprof_heap
	  WHERE upid = 2 AND name <> 'libc.malloc';")" "the child's heapprof_heap row"
fi

t_summary
