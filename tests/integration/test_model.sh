#!/usr/bin/env bash
# test_model.sh BUILD: one model of the heap behind every view
# (docs/ARCHITECTURE.md, "The heap model").  A program with four static
# functions named helper (two in two files of the program, one in each of
# two libraries; libsrc/model_*.c), a custom heap, a named snapshot and a
# forked child is profiled exactly with a trace, sampled, and symbolized
# offline; model_views.py reads each profile through the SQL table
# experimental_flamegraph, the page's data, pprof (go tool pprof -raw),
# report (self and inclusive), check and diff, and every view must give
# the same numbers per node and per function, in the four views, for each
# process, heap and dump; the exact profile also gives the program's
# numbers.  The same program, running under `heapprof serve`, is read
# through top, /metrics and /debug/pprof/heap: the same numbers again.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
. "$HERE/session_helpers.sh"
. "$HERE/serve_helpers.sh"
t_require "$HP" "$BUILD/libheapprof.so"

L="$HERE/libsrc"
M="$T_DIR/model"
mkdir -p "$M/work"

# ---------------------------------------------------------------------------
t_begin "model: the program of four static helpers builds and runs bare"
built=1
for spec in a:300:300:300 b:400:400:100; do
	IFS=: read -r n size count keep <<<"$spec"
	if ! gcc -g -O1 -shared -fPIC -DLIB_NAME="model_lib_$n" \
		-DLIB_SIZE="$size" -DLIB_COUNT="$count" -DLIB_KEEP="$keep" \
		-o "$M/libmodel_$n.so" "$L/model_lib.c" 2>"$T_DIR/lib$n.cc.err"; then
		t_fail "cannot build libmodel_$n.so: $(head -c 200 "$T_DIR/lib$n.cc.err")"
		built=0
	fi
done
if [ "$built" = 1 ] && ! gcc -g -O1 -I"$HERE/../../include" -o "$M/model_main" \
	"$L/model_main.c" "$L/model_f1.c" "$L/model_f2.c" -L"$M" -lmodel_a \
	-lmodel_b -L"$BUILD" -lheapprof -Wl,-rpath,"$M" -Wl,-rpath,"$BUILD" \
	2>"$T_DIR/main.cc.err"; then
	t_fail "cannot build model_main: $(head -c 200 "$T_DIR/main.cc.err")"
	built=0
fi
if [ "$built" = 1 ]; then
	bare_run model "$M/model_main"
	assert_eq 0 "$BARE_RC" "model_main exit status, bare"
fi

# views TAG DB [EXPECT...]: every view of DB agrees (model_views.py).
views() {
	local tag=$1 db=$2 out rc=0
	shift 2
	local go=()
	[ "$GO_OK" = 1 ] && go=(--go)
	out=$(GOCACHE="$T_DIR/gocache" run_bounded 600 python3 "$HERE/model_views.py" \
		"$HP" "$db" "$M/work" "${go[@]}" "$@" 2>&1) || rc=$?
	printf '%s\n' "$out" >"$T_DIR/$tag.views"
	assert_eq 0 "$rc" "$tag: every view agrees: $(head -n 8 "$T_DIR/$tag.views")"
	assert_match "^checked: [0-9]+ comparisons over 2 processes, 0 mismatches$" \
		"$(tail -n 1 "$T_DIR/$tag.views")" "$tag: the summary"
	[ "$GO_OK" = 1 ] || t_note "go is missing: pprof not compared"
}

# ---------------------------------------------------------------------------
t_begin "model: exact, with a trace, two processes, a custom heap: every view agrees and is exact"
if [ "$built" = 1 ]; then
	hp_record exact -i 1 --all-heaps --follow-fork --trace streaming \
		-o "$M/exact.db" -- "$M/model_main"
	assert_eq 0 "$REC_RC" "record exit status" || show_err exact
	# Without offline symbols the program's two helpers are one function
	# (same module, same name, no source file): 50 x 100 + 10 x 200.
	views exact "$M/exact.db" \
		'helper@libmodel_a.so:space=90000' 'helper@libmodel_a.so:alloc_objects=300' \
		'helper@libmodel_b.so:space=40000' 'helper@libmodel_b.so:alloc_space=160000' \
		'helper@model_main:space=7000' 'helper@model_main:alloc_objects=3000'
fi

t_begin "model: symbolized offline, the four helpers are four functions in every view"
if [ "$built" = 1 ] && [ -s "$M/exact.db" ]; then
	cp "$M/exact.db" "$M/sym.db"
	hp_cmd sym symbolize "$M/sym.db"
	assert_eq 0 "$CMD_RC" "symbolize exit status: $(head -c 300 "$T_DIR/sym.err")"
	views sym "$M/sym.db" \
		'helper@model_main@model_f1.c:space=5000' \
		'helper@model_main@model_f2.c:space=2000' \
		'helper@model_main@model_f1.c:alloc_space=100000' \
		'helper@model_main@model_f2.c:alloc_objects=2000' \
		'helper@libmodel_a.so@model_lib.c:space=90000' \
		'helper@libmodel_b.so@model_lib.c:objects=100'
fi

t_begin "model: sampled (-i 512): every view gives the same estimates"
if [ "$built" = 1 ]; then
	hp_record sampled -i 512 --all-heaps --follow-fork -o "$M/sampled.db" \
		-- "$M/model_main"
	assert_eq 0 "$REC_RC" "record exit status" || show_err sampled
	views sampled "$M/sampled.db"
fi

t_begin "model: a live process through top, /metrics and /debug/pprof/heap: the same functions and numbers"
if [ "$built" = 1 ]; then
	W="$M/live"
	rm -f "$W".*
	timeout -k 5 240 "$M/model_main" "$W" "$W.ready" "$W.go2" \
		>"$T_DIR/live.out" 2>&1 </dev/null &
	TPIDS="$TPIDS $!"
	LPID=""
	wait_until 30 "model_main started" test -s "$W.pid" &&
		LPID=$(cat "$W.pid")
	TPIDS="$TPIDS $LPID"
	if [ -n "$LPID" ] && start_serve live -p "$LPID" -i 1; then
		APID=$LPID
		if wait_until 60 "serve attached" attached; then
			touch "$W.go"
			wait_until 60 "model_main allocated" test -s "$W.ready"
			go=()
			[ "$GO_OK" = 1 ] && go=(--go)
			rc=0
			out=$(GOCACHE="$T_DIR/gocache" run_bounded 300 python3 \
				"$HERE/model_views.py" "$HP" --live "$LPID" "$SURL" \
				"$M/work" "${go[@]}" \
				'helper (libmodel_a.so):space=90000' \
				'helper (libmodel_b.so):objects=100' \
				'helper (model_main):alloc_objects=3000' 2>&1) || rc=$?
			printf '%s\n' "$out" >"$T_DIR/live.views"
			assert_eq 0 "$rc" "live: every view agrees: $(head -n 8 "$T_DIR/live.views")"
			assert_match "^checked: [0-9]+ comparisons of a live process, 0 mismatches$" \
				"$(tail -n 1 "$T_DIR/live.views")" "live: the summary"
		else
			t_fail "serve did not attach to model_main: $(tail -n 5 "$T_DIR/live.err")"
		fi
		touch "$W.go" "$W.go2"
		stop_serve live
	else
		t_fail "model_main or serve did not start: $(tail -n 5 "$T_DIR/live.err" 2>/dev/null)"
	fi
	touch "$W.go" "$W.go2"
fi

t_summary
