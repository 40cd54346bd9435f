#!/usr/bin/env bash
# test_flamegraph.sh BUILD: `heapprof flamegraph` writes one self-contained
# HTML page: no network reference, the profile's data embedded with the
# stacks and exact numbers of progs/known (see test_exact.sh), offline
# symbols expanded into inline chains, unnamed frames as module+0xrelpc,
# bad input and unwritable outputs rejected without a partial file, 1M
# callsites written quickly; then the page is opened in headless Chromium
# (tests/browser/check_flamegraph.js, driven over the DevTools pipe) which
# must make no request but the page itself, log no error, show do_malloc
# with its exact bytes and objects, zoom, focus, switch dumps, and render a
# non-trivial screenshot.  known is recorded with an event trace, so the
# page also has its allocation events: the browser checks the inverted
# graph, a focus's callers and callees, the hide box, threads, the size
# chart, a window dragged on the timeline and the state kept in the URL
# against the profile's own numbers (SQL, `heapprof report`, `heapprof
# flamegraph --from/--to`); a copy without the trace and with a second dump
# checks a window as the difference of dumps.
#
# HEAPPROF_FLAMEGRAPH_SCREENSHOT=FILE keeps a copy of the screenshot.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/known"
BROWSER_DIR="$HERE/../browser"

HAVE_NODE=0
command -v node >/dev/null 2>&1 && HAVE_NODE=1

# fg TAG ARGS...: `heapprof flamegraph ARGS...`, bounded; stderr in
# $T_DIR/TAG.fgerr; status in FG_RC.
fg() {
	local tag=$1
	shift
	FG_RC=0
	run_bounded 120 "$HP" flamegraph "$@" >"$T_DIR/$tag.fgout" 2>"$T_DIR/$tag.fgerr" || FG_RC=$?
}

# sqlw DB SQL: change a copy of a profile (sqlq is read-only).
sqlw() {
	local out rc=0
	out=$(timeout -k 5 60 sqlite3 -batch "$1" "$2" 2>&1 </dev/null) || rc=$?
	[ "$rc" = 0 ] || t_fail "sqlite3 failed ($rc) on $1: $out"
	return "$rc"
}

# hpsql DB SQL: `heapprof sql` (which reads the trace's heapprof_event),
# one row a line, columns separated by '|'; fails the test on an error.
hpsql() {
	local out rc=0
	out=$(run_bounded 60 "$HP" sql "$1" '.headers off' '.mode list' "$2" 2>&1) || rc=$?
	[ "$rc" = 0 ] || t_fail "heapprof sql failed ($rc) on $1: $out"
	printf '%s\n' "$out"
}

# folded PAGE [VIEW [PROC [HEAP [DUMP]]]]: the page's stacks as folded lines
# (tests/browser/fg_folded.js); fails the test if its data is malformed.
folded() {
	local out rc=0
	out=$(timeout -k 5 60 node "$BROWSER_DIR/fg_folded.js" "$@" 2>&1) || rc=$?
	if [ "$rc" != 0 ]; then
		t_fail "fg_folded.js $*: $out"
		return 1
	fi
	printf '%s\n' "$out"
}

# folded_value FOLDED STACK: the value of the line for exactly STACK.
folded_value() {
	printf '%s\n' "$1" | awk -v s="$2" '{ v = $NF; $NF = ""; sub(/ $/, ""); if ($0 == s) print v }'
}

# ---------------------------------------------------------------------------
KDB="$T_DIR/known.db"
t_begin "record known -i 1 --trace streaming, default output name"
# --no-peak: the page's numbers below are the end's (the page opens on the
# peak's dump when there is one: checked at the end, on peak_holder).
hp_record known -i 1 --trace streaming --no-peak -o "$KDB" -- "$PROGS/known"
assert_eq 7 "$REC_RC" "heapprof record exit status" || show_err known
db_valid "$KDB" || {
	t_summary
}
fg default "$KDB"
assert_eq 0 "$FG_RC" "flamegraph exit status ($(head -c 300 "$T_DIR/default.fgerr"))"
PAGE="$T_DIR/known.html"
[ -s "$PAGE" ] || t_fail "no $PAGE (FILE.db -> FILE.html)"
assert_match "written to .*known\.html" "$(cat "$T_DIR/default.fgerr")" "says where the page is"
assert_eq "" "$(cat "$T_DIR/default.fgout")" "nothing on stdout"
cp "$KDB" "$T_DIR/noext"
fg noext "$T_DIR/noext"
assert_eq 0 "$FG_RC" "a FILE without .db"
[ -s "$T_DIR/noext.html" ] || t_fail "FILE without .db: no FILE.html"
fg custom "$KDB" -o "$T_DIR/custom page.html"
assert_eq 0 "$FG_RC" "-o with a space in the name"
cmp -s "$PAGE" "$T_DIR/custom page.html" || t_fail "-o page differs from the default one"
fg stdout "$KDB" -o -
assert_eq 0 "$FG_RC" "-o - (standard output)"
cmp -s "$PAGE" "$T_DIR/stdout.fgout" || t_fail "-o - output differs from the file"
if ls "$T_DIR"/*.tmp.* >/dev/null 2>&1; then
	t_fail "temporary files left: $(ls "$T_DIR"/*.tmp.*)"
fi

t_begin "the page is self-contained: no network reference, inline CSS/JS"
if [ -s "$PAGE" ]; then
	html=$(cat "$PAGE")
	assert_match '^<!DOCTYPE html>' "$(head -n 1 "$PAGE")" "doctype"
	assert_no_match 'https?://' "$html" "no http:// or https:// anywhere"
	attrs=$(grep -Eio '(src|href|action|poster|srcset|data)[[:space:]]*=[[:space:]]*["'"'"'][^"'"'"']*' "$PAGE" | grep -vx 'href="data:,')
	assert_eq "" "$attrs" "no src/href attribute but the data: favicon"
	assert_no_match '<script[^>]*[[:space:]]src[[:space:]]*=' "$html" "no external script"
	assert_no_match '<link[^>]*stylesheet' "$html" "no external stylesheet"
	assert_no_match '@import|url\(' "$html" "no CSS import or url()"
	assert_no_match '<(iframe|img|object|embed|video|audio)[[:space:]>]' "$html" "no embedded resources"
	assert_no_match 'fetch\(|XMLHttpRequest|WebSocket|EventSource|sendBeacon|importScripts' "$html" "no network API in the script"
	assert_match "Content-Security-Policy\" content=\"default-src 'none'" "$html" "a CSP that forbids every request"
	assert_eq 2 "$(grep -oi '</script' "$PAGE" | wc -l)" "exactly two </script (data and code: '<' escaped in data)"
	assert_eq 1 "$(grep -c 'id="hp-data"' "$PAGE")" "one data block"
	assert_match '"format":"heapprof-flamegraph","version":1' "$html" "data format"
	for fn in do_malloc do_posix_memalign thread_alloc deep_alloc recurse main; do
		assert_match "\"$fn\"" "$html" "function $fn in the data"
	done
	assert_match '"name":"libc.malloc","dumps":\[\{"d":\[' "$html" "per-dump sample arrays"
	assert_match '"in_page":1' "$html" "the trace's events are in the page"
	assert_match '"ev":\{"n":[1-9][0-9]*,"t":\[' "$html" "the allocation events of the heap"
	assert_match '"sizes":\[' "$html" "the sizes of the final dump's live blocks"
	assert_no_match '@HEAPPROF_' "$html" "every template marker replaced"
fi

# ---------------------------------------------------------------------------
SQL_SPACE=$(sqlq "$KDB" "SELECT sum(size) FROM heap_profile_allocation;")
SQL_OBJECTS=$(sqlq "$KDB" "SELECT sum(count) FROM heap_profile_allocation;")
SQL_ALLOC=$(sqlq "$KDB" "SELECT sum(max(size, 0)) || ' ' || sum(max(count, 0)) FROM heap_profile_allocation;")
MAIN_PATH="_start;__libc_start_main;__libc_start_call_main;main"

t_begin "the embedded stacks carry known's exact numbers (four views)"
if [ "$HAVE_NODE" != 1 ]; then
	t_skip "node is missing (apt-get install nodejs, or scripts/deps.sh --test)"
elif [ -s "$PAGE" ]; then
	F=$(folded "$PAGE" space) && {
		assert_eq 60000 "$(folded_value "$F" "$MAIN_PATH;do_malloc")" "space of main;do_malloc"
		assert_eq 40960 "$(folded_value "$F" "$MAIN_PATH;do_posix_memalign")" "space of do_posix_memalign"
		assert_eq 14000 "$(folded_value "$F" "__GI___clone3;start_thread;thread_main;thread_alloc")" "space of thread_alloc"
		deep="$MAIN_PATH;do_deep$(printf ';recurse%.0s' $(seq 20));deep_alloc"
		assert_eq 2331 "$(folded_value "$F" "$deep")" "space of the 20-deep recursion"
		assert_eq "$SQL_SPACE" "$(printf '%s\n' "$F" | awk '{ s += $NF } END { print s }')" "space sums to SQL's"
	}
	F=$(folded "$PAGE" objects) && {
		assert_eq 60 "$(folded_value "$F" "$MAIN_PATH;do_malloc")" "objects of do_malloc"
		assert_eq 46 "$(folded_value "$F" "__GI___clone3;start_thread;thread_main;thread_alloc")" "objects of thread_alloc"
	}
	F=$(folded "$PAGE" alloc_space) && {
		assert_eq 150000 "$(folded_value "$F" "$MAIN_PATH;do_calloc")" "alloc_space of do_calloc"
		assert_eq 55000 "$(folded_value "$F" "$MAIN_PATH;do_realloc")" "alloc_space of do_realloc"
		assert_eq "${SQL_ALLOC% *}" "$(printf '%s\n' "$F" | awk '{ s += $NF } END { print s }')" "alloc_space sums to SQL's"
	}
	F=$(folded "$PAGE" alloc_objects) && {
		assert_eq 100 "$(folded_value "$F" "$MAIN_PATH;do_malloc")" "alloc_objects of do_malloc"
		assert_eq "${SQL_ALLOC#* }" "$(printf '%s\n' "$F" | awk '{ s += $NF } END { print s }')" "alloc_objects sums to SQL's"
	}
	F=$(folded "$PAGE" space) && assert_no_match '(^|;)(malloc|calloc|realloc|free);' "$F" "no allocator frame inside a stack"
fi

t_begin "the page carries the process's memory beside each dump (RSS, mallinfo2)"
if [ -s "$PAGE" ]; then
	want=$(sqlq "$KDB" "SELECT '\"mem\":{' || group_concat('\"' || name || '\":' || value, ',') || '}'
	  FROM (SELECT name, value FROM heapprof_dump_memory ORDER BY name);")
	assert_match '"rss_anon":[1-9]' "$want" "the profile has the memory rows"
	assert_eq 1 "$(grep -cF "$want" "$PAGE")" "embedded as in heapprof_dump_memory"
else
	t_skip "no page"
fi

t_begin "offline symbols: inline chains (callers first, file:line); unnamed frames as module+0xrelpc"
SDB="$T_DIR/sym.db"
cp "$KDB" "$SDB"
VALLOC_PCS=$(sqlq "$SDB" "SELECT printf('%x', rel_pc) FROM stack_profile_frame WHERE name = 'do_valloc' ORDER BY rel_pc;")
sqlw "$SDB" "UPDATE stack_profile_frame SET symbol_set_id = 9001 WHERE name = 'do_malloc';
  INSERT INTO stack_profile_symbol(type, symbol_set_id, name, source_file, line_number)
  VALUES ('s', 9001, 'inlined_helper', '/src/a</script>.c', 42), ('s', 9001, 'do_malloc', '/src/a</script>.c', 40);
  UPDATE stack_profile_frame SET name = NULL WHERE name = 'do_valloc';" >/dev/null
fg sym "$SDB"
assert_eq 0 "$FG_RC" "flamegraph of a symbolized profile ($(head -c 300 "$T_DIR/sym.fgerr"))"
assert_eq 2 "$(grep -oi '</script' "$T_DIR/sym.html" | wc -l)" "a '</script>' in a file name is escaped"
if [ "$HAVE_NODE" = 1 ] && [ -s "$T_DIR/sym.html" ]; then
	F=$(folded "$T_DIR/sym.html" space) && {
		assert_eq 60000 "$(folded_value "$F" "$MAIN_PATH;do_malloc@/src/a</script>.c:40;inlined_helper@/src/a</script>.c:42")" \
			"do_malloc's frame expanded into do_malloc (caller) then inlined_helper, with lines"
		live_pc=""
		for pc in $VALLOC_PCS; do
			v=$(folded_value "$F" "$MAIN_PATH;known+0x$pc")
			[ -n "$v" ] && live_pc="$live_pc $v"
		done
		assert_eq " 5000" "$live_pc" "the unnamed do_valloc frames as known+0x<rel_pc>"
	}
fi

t_begin "bad input: one-line error, status 1 or 2, no page"
mkdir -p "$T_DIR/bad"
printf 'not a database, just some text\n' >"$T_DIR/bad/text.db"
sqlite3 "$T_DIR/bad/other.db" "CREATE TABLE t(x);"
expect_fail() { # TAG CMD ARGS...: one line on stderr, 0 < status < 128
	local tag=$1 rc=0
	shift
	timeout -k 5 60 "$@" >"$T_DIR/bad/$tag.out" 2>"$T_DIR/bad/$tag.err" </dev/null || rc=$?
	if [ "$rc" = 0 ] || [ "$rc" -ge 124 ]; then
		t_fail "$tag: expected a failure status, got $rc"
	fi
	assert_eq 1 "$(grep -c . "$T_DIR/bad/$tag.err")" "$tag: one line on stderr ($(head -n 3 "$T_DIR/bad/$tag.err" | tr '\n' '|'))"
	assert_match '^heapprof: flamegraph: ' "$(head -n 1 "$T_DIR/bad/$tag.err")" "$tag: message prefix"
}
expect_fail missing "$HP" flamegraph "$T_DIR/bad/nothere.db"
expect_fail text "$HP" flamegraph "$T_DIR/bad/text.db"
expect_fail other "$HP" flamegraph "$T_DIR/bad/other.db"
expect_fail dir "$HP" flamegraph "$T_DIR/bad"
expect_fail nofile "$HP" flamegraph
expect_fail badopt "$HP" flamegraph --bogus "$KDB"
expect_fail twofiles "$HP" flamegraph "$KDB" "$KDB"
expect_fail noval "$HP" flamegraph "$KDB" -o
expect_fail badview "$HP" flamegraph "$KDB" --view bytes -o "$T_DIR/bad/v.html"
assert_match 'view' "$(cat "$T_DIR/bad/badview.err")" "the message names --view"
for f in nothere text other; do
	[ -e "$T_DIR/bad/$f.html" ] && t_fail "$f: a page was written"
done
[ -e "$T_DIR/bad/v.html" ] && t_fail "bad --view: a page was written"
out=$("$HP" flamegraph --help 2>&1)
assert_eq 0 "$?" "--help exit status"
assert_match 'usage: heapprof flamegraph FILE \[-o OUT.html\]' "$out" "--help text"

t_begin "unwritable -o: clear error, no partial file, an older page untouched"
expect_fail nodir "$HP" flamegraph "$KDB" -o "$T_DIR/bad/no/such/dir/x.html"
assert_match 'cannot write .*x\.html' "$(cat "$T_DIR/bad/nodir.err")" "names the output"
expect_fail isdir "$HP" flamegraph "$KDB" -o "$T_DIR/bad"
expect_fail self "$HP" flamegraph "$KDB" -o "$KDB"
db_valid "$KDB" >/dev/null || t_fail "the profile was damaged by -o FILE"
# A write that fails half-way (file size limit, SIGXFSZ ignored: EFBIG).
printf 'older page\n' >"$T_DIR/bad/old.html"
expect_fail efbig bash -c 'trap "" XFSZ; ulimit -f 16; exec "$@"' sh "$HP" flamegraph "$KDB" -o "$T_DIR/bad/old.html"
assert_match 'old\.html' "$(cat "$T_DIR/bad/efbig.err")" "the write error names the output"
assert_eq "older page" "$(cat "$T_DIR/bad/old.html")" "the older page is untouched"
expect_fail efbig2 bash -c 'trap "" XFSZ; ulimit -f 16; exec "$@"' sh "$HP" flamegraph "$KDB" -o "$T_DIR/bad/new.html"
[ -e "$T_DIR/bad/new.html" ] && t_fail "a partial page was left"
if ls "$T_DIR/bad/"*.tmp.* >/dev/null 2>&1; then
	t_fail "temporary files left: $(ls "$T_DIR/bad/"*.tmp.*)"
fi

t_begin "a broken stack table (parent loop, dangling ids) still gives a valid page"
LDB="$T_DIR/loop.db"
cp "$KDB" "$LDB"
cs_of() { echo "(SELECT c.id FROM stack_profile_callsite c JOIN stack_profile_frame f ON f.id = c.frame_id WHERE f.name = '$1' LIMIT 1)"; }
sqlw "$LDB" "UPDATE stack_profile_callsite SET parent_id = $(cs_of do_malloc) WHERE id = (SELECT parent_id FROM stack_profile_callsite WHERE id = $(cs_of do_malloc));
  UPDATE stack_profile_callsite SET parent_id = 987654 WHERE id = $(cs_of thread_main);
  UPDATE stack_profile_callsite SET frame_id = 987654 WHERE id = $(cs_of do_memalign);
  INSERT INTO heap_profile_allocation(ts, upid, heap_name, callsite_id, count, size)
  SELECT max(ts), upid, 'libc.malloc', 777777, 1, 5 FROM heapprof_dump;" >/dev/null
fg loop "$LDB"
assert_eq 0 "$FG_RC" "flamegraph exit status ($(head -c 300 "$T_DIR/loop.fgerr"))"
if [ "$HAVE_NODE" = 1 ] && [ -s "$T_DIR/loop.html" ]; then
	F=$(folded "$T_DIR/loop.html" space) && {
		assert_eq "$SQL_SPACE" "$(printf '%s\n' "$F" | awk '{ s += $NF } END { print s - 5 }')" "every byte still shown"
		assert_eq 5 "$(folded_value "$F" "[unknown callsite]")" "rows of an unknown callsite"
		assert_match ';\[unknown frame\] 3000$' "$F" "a callsite with an unknown frame"
	}
fi

t_begin "1M callsites: written quickly"
BDB="$T_DIR/big.db"
# (Without heapprof_event: a virtual table of heapprof's module, which the
# sqlite3 CLI lacks; this profile has no trace.)
sqlite3 "$KDB" .schema | grep -v 'USING heapprof_events' | sqlite3 "$BDB" ||
	t_fail "cannot create $BDB"
run_bounded 300 sqlite3 "$BDB" "ATTACH '$KDB' AS k;
  INSERT INTO heapprof_meta SELECT * FROM k.heapprof_meta;
  INSERT INTO process SELECT * FROM k.process;
  INSERT INTO heapprof_process SELECT * FROM k.heapprof_process;
  INSERT INTO heapprof_dump SELECT * FROM k.heapprof_dump;
  INSERT INTO stack_profile_mapping SELECT * FROM k.stack_profile_mapping;
  WITH RECURSIVE c(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM c WHERE id < 5000)
  INSERT INTO stack_profile_frame(id, type, name, mapping, rel_pc)
  SELECT id, 'f', 'fn_' || id, 1, id * 16 FROM c;
  WITH RECURSIVE c(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM c WHERE id < 1111110)
  INSERT INTO stack_profile_callsite(id, depth, parent_id, frame_id)
  SELECT id, 0, CASE WHEN id <= 10 THEN NULL ELSE (id - 1) / 10 END,
         1 + (id * 7919) % 5000 FROM c;
  INSERT INTO heap_profile_allocation(ts, upid, heap_name, callsite_id, count, size)
  SELECT (SELECT max(ts) FROM heapprof_dump), 1, 'libc.malloc', id, 1, 1 + id % 1000
  FROM stack_profile_callsite WHERE id > 111110;" >/dev/null || t_fail "cannot fill $BDB"
start=$(date +%s%N)
fg big "$BDB"
ms=$((($(date +%s%N) - start) / 1000000))
assert_eq 0 "$FG_RC" "flamegraph exit status ($(head -c 300 "$T_DIR/big.fgerr"))"
t_note "1,111,110 callsites (1,000,000 leaves): page written in $ms ms, $(wc -c <"$T_DIR/big.html") bytes"
# The target (later issues) is 5 s; the bound leaves room for a busy machine
# and still catches anything quadratic (hours at this size).  A sanitizer
# build is slower: TSan took 12.5 s alone and 15.6 s beside the ASan
# suite on the 2-vCPU CI machine (ASan 2.6-2.8 s, the normal build 1.8 s).
bound=15000
[ -z "${HEAPPROF_SAN:-}" ] || bound=60000
assert_le "$ms" "$bound" "milliseconds to write the page of 1M callsites"
assert_eq 1 "$(grep -c 'id="hp-data"' "$T_DIR/big.html")" "the big page has its data"
rm -f "$BDB" "$T_DIR/big.html"

# ---------------------------------------------------------------------------
t_begin "headless Chromium: no request, no error, exact numbers, controls work, screenshot"
if ! command -v chromium >/dev/null 2>&1; then
	t_skip "chromium is missing (apt-get install chromium, or scripts/deps.sh --test)"
elif [ "$HAVE_NODE" != 1 ]; then
	t_skip "node is missing (apt-get install nodejs, or scripts/deps.sh --test)"
elif [ -s "$PAGE" ]; then
	# browser PAGE PNG TAG: results as key=value lines in $T_DIR/TAG.browser
	# (HP_FG_* in the environment: the checks of the other controls)
	browser() {
		local rc=0
		run_bounded 150 node "$BROWSER_DIR/check_flamegraph.js" "$1" "$2" 120 \
			>"$T_DIR/$3.browser" 2>&1 || rc=$?
		if [ "$rc" != 0 ]; then
			t_fail "$3: check_flamegraph.js failed ($rc): $(grep -E '^(error|chromium)=|^chromium:' "$T_DIR/$3.browser" | head -n 8 | tr '\n' '|')"
		fi
	}
	get() { sed -n "s/^$2=//p" "$T_DIR/$1.browser" | head -n 1; }
	SHOT="$T_DIR/flamegraph.png"
	# A window holding do_calloc's allocations, for a link written by hand:
	# from its first allocation event to after the last event.
	CALLOC_WIN=$(hpsql "$KDB" "SELECT ((SELECT min(e.ts) FROM heapprof_event_callsite e
	    JOIN stack_profile_callsite c ON c.id = e.callsite_id
	    JOIN stack_profile_frame f ON f.id = c.frame_id
	    WHERE e.kind = 'alloc' AND f.name = 'do_calloc') - p.start_ts) || ',' ||
	  ((SELECT max(ts) FROM heapprof_event) + 1 - p.start_ts) FROM process p;")
	assert_match '^[0-9]+,[0-9]+$' "$CALLOC_WIN" "do_calloc's window from the trace"
	# The window dragged: from just before the first allocation to halfway
	# to the last, as fractions of the chart's time axis (the page's: from
	# the start or the first event to the end or the last event + 1 ns).
	# A fixed 0.3,0.7 missed every allocation under TSan, where known's
	# burst fell outside it.
	DRAG=$(hpsql "$KDB" "SELECT printf('%.4f,%.4f', max(0, fa - 0.01), min(1, max(fa + 0.02, (fa + fb) / 2)))
	  FROM (SELECT (a0 - t0) * 1.0 / (t1 - t0) AS fa, (a1 - t0) * 1.0 / (t1 - t0) AS fb
	  FROM (SELECT min(p.start_ts, (SELECT min(ts) FROM heapprof_event)) AS t0,
	    max((SELECT max(ts) FROM heapprof_event) + 1, coalesce(p.end_ts, 0)) AS t1,
	    (SELECT min(ts) FROM heapprof_event WHERE kind = 'alloc') AS a0,
	    (SELECT max(ts) FROM heapprof_event WHERE kind = 'alloc') AS a1 FROM process p));")
	assert_match '^[01]\.[0-9]{4},[01]\.[0-9]{4}$' "$DRAG" "a window around the allocations, from the trace"
	t_note "the dragged window: $DRAG of the time axis"
	HP_FG_CHECKS=hide,inverted,focus,threads,sizes,drag,url HP_FG_FOCUS=main,recurse HP_FG_DRAG=$DRAG \
		HP_FG_FRAGMENT="view=alloc_objects&focus=do_calloc&inv=1&win=$CALLOC_WIN" \
		browser "$PAGE" "$SHOT" known
	assert_eq "" "$(grep '^error=' "$T_DIR/known.browser")" "no request, console error or exception"
	assert_eq 4 "$(get known requests)" "four requests: the page, its reload and two links to it"
	assert_eq 4 "$(get known requests_page)" "each of them the page itself"
	assert_eq do_malloc "$(get known space_top)" "top function by self (space)"
	assert_eq 60000 "$(get known space_top_self)" "do_malloc's self space"
	assert_eq "$SQL_SPACE" "$(get known space_total)" "root total (space) = the sum of the rows"
	assert_eq 60000 "$(get known search_value)" "search 'do_malloc': matched bytes"
	assert_eq do_malloc "$(get known objects_top)" "top function by self (objects)"
	assert_eq 60 "$(get known objects_top_self)" "do_malloc's objects"
	assert_eq "$SQL_OBJECTS" "$(get known objects_total)" "root total (objects)"
	assert_eq 1 "$(get known tooltip)" "a tooltip on hover"
	assert_eq main "$(get known zoom)" "a click on main zooms to it"
	assert_eq all "$(get known zoom_after_escape)" "Escape resets the zoom"
	assert_eq do_malloc "$(get known focus_root)" "a click on the top row focuses on it"
	assert_eq 60000 "$(get known focus_shown)" "the focused graph holds do_malloc's bytes"
	assert_eq all "$(get known focus_cleared)" "Clear focus"
	assert_eq 1 "$(get known dumps)" "one dump in the chart"
	assert_eq 1400x1000 "$(get known screenshot_size)" "screenshot size"
	assert_ge "$(get known screenshot_bytes)" 20000 "screenshot PNG bytes"
	assert_ge "$(get known screenshot_colors)" 50 "screenshot colours (not a blank page)"
	if [ -s "$SHOT" ] && [ "$(head -c 8 "$SHOT" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
		t_fail "the screenshot is not a PNG"
	fi
	[ -n "${HEAPPROF_FLAMEGRAPH_SCREENSHOT:-}" ] && [ -s "$SHOT" ] &&
		cp "$SHOT" "$HEAPPROF_FLAMEGRAPH_SCREENSHOT"

	t_begin "the page's controls against the profile's numbers (trace of known)"
	# The hide box: the runtime's entry frames out by default, and a frame
	# in the middle of the stacks taken out without changing a total.
	assert_match '^/\^\(_start\|.*\|_PyEval_EvalFrameDefault\|' "$(get known hide_default)" "the default list, in the box"
	assert_eq main "$(get known hide_default_first)" "default: main first under the root, not _start"
	assert_eq "$SQL_SPACE" "$(get known hide_default_shown)" "default: the total unchanged"
	assert_ge "$(get known hide_default_hidden)" 4 "default: _start, libc's and the thread's entry frames hidden"
	assert_eq _start "$(get known hide_middle_first)" "hiding main: _start first again"
	assert_eq "$SQL_SPACE" "$(get known hide_middle_shown)" "hiding main: the graph's total unchanged"
	assert_eq "$SQL_SPACE" "$(get known hide_middle_total)" "hiding main: the dump's total unchanged"
	assert_eq 0 "$(get known hide_middle_in_top)" "hiding main: not in the top table"
	assert_eq _start "$(get known hide_none_first)" "nothing hidden: _start first"
	assert_eq 0 "$(get known hide_none_hidden)" "nothing hidden"
	# Inverted: the root's children are the leaf functions with their self
	# amounts, as SQL sums them per leaf frame.
	want=$(sqlq "$KDB" "SELECT group_concat(name || '=' || s, ';') FROM (SELECT f.name AS name, sum(a.size) AS s
	  FROM heap_profile_allocation a JOIN stack_profile_callsite c ON c.id = a.callsite_id
	  JOIN stack_profile_frame f ON f.id = c.frame_id GROUP BY f.name HAVING s > 0 ORDER BY f.name);")
	assert_match '(^|;)do_malloc=60000(;|$)' "$want" "SQL: do_malloc's self space"
	assert_eq "$want" "$(get known inverted_kids)" "inverted: the root's children = each leaf function's self (space)"
	assert_eq "$SQL_SPACE" "$(get known inverted_shown)" "inverted: the same total"
	# Focus: callers and callees merged over every stack, each stack once
	# (recurse calls itself 20 deep), totals as report's inclusive ones.
	hp_cmd report report "$KDB" --top 100
	for fn in main recurse; do
		incl=$(awk -v f="$fn" '/^  Top [0-9]+ by inclusive space/ { on = 1; next } /^  [^ ]/ { on = 0 }
		  on && $(NF - 1) == f { if (match($0, /\([0-9]+ B\)/)) print substr($0, RSTART + 1, RLENGTH - 4); else print $3; exit }' "$T_DIR/report.out")
		assert_match '^[1-9][0-9]*$' "$incl" "report: $fn's inclusive space"
		assert_eq "$incl" "$(get known "focus_${fn}_callers")" "focus $fn: its callers' graph holds its inclusive total"
		assert_eq "$incl" "$(get known "focus_${fn}_callees")" "focus $fn: its callees' graph too"
		assert_eq "$fn" "$(get known "focus_${fn}_callers_root")" "focus $fn: the callers' root"
	done
	assert_match '^__libc_start_call_main=[0-9]+$' "$(get known focus_main_callers_kids)" "main's one caller"
	assert_eq "recurse=2331" "$(get known focus_recurse_callers_kids)" "recurse's nearest caller is recurse, counted once"
	# Threads: each thread's live and allocated bytes, as its blocks and
	# events say.
	live=$(sqlq "$KDB" "SELECT tid || ' ' || sum(charged) FROM heapprof_block GROUP BY tid;")
	want=$(hpsql "$KDB" "SELECT tid || ' ' || sum(charged) FROM heapprof_event WHERE kind = 'alloc' GROUP BY tid;" |
		while read -r tid alloc; do
			printf '%s:%s:%s\n' "$tid" "$(printf '%s\n' "$live" | awk -v t="$tid" '$1 == t { print $2 }' | grep . || echo 0)" "$alloc"
		done | LC_ALL=C sort | paste -sd ';')
	assert_match '^[0-9]+:[0-9]+:[0-9]+;[0-9]+:' "$want" "SQL: several threads allocated"
	assert_eq "$want" "$(get known threads)" "threads: tid:space:alloc_space of each"
	# Sizes: the final dump's blocks (space), the events (alloc_*).
	bucket='{ k = 0; s = $1; while (s >= 1) { k++; s = int(s / 2) } b[k] += $2 } END { for (k = 0; k < 70; k++) if (k in b) printf "%s%d:%d", n++ ? ";" : "", k, b[k]; print "" }'
	assert_eq blocks "$(get known sizes_space_source)" "sizes (space): from the blocks"
	assert_eq "$(sqlq "$KDB" "SELECT size || ' ' || charged FROM heapprof_block;" | awk "$bucket")" "$(get known sizes_space)" "sizes (space): the blocks' buckets"
	assert_eq "$SQL_SPACE" "$(get known sizes_space_total)" "sizes (space): total"
	assert_eq events "$(get known sizes_alloc_source)" "sizes (alloc_space): from the events"
	assert_eq "$(hpsql "$KDB" "SELECT size || ' ' || charged FROM heapprof_event WHERE kind = 'alloc';" | awk "$bucket")" \
		"$(get known sizes_alloc)" "sizes (alloc_space): the events' buckets"
	assert_eq "$(hpsql "$KDB" "SELECT size || ' 1' FROM heapprof_event WHERE kind = 'alloc';" | awk "$bucket")" \
		"$(get known sizes_allocobj)" "sizes (alloc_objects): counts"
	# A window dragged on the timeline: the trace's allocations in it, as
	# `heapprof flamegraph --from/--to` has them.
	sel=$(get known drag_selection)
	assert_match '^[0-9]+,[0-9]+$' "$sel" "a window from the drag"
	assert_eq events "$(get known drag_source)" "computed from the events"
	fg drag "$KDB" --from "${sel%,*}ns" --to "${sel#*,}ns" -o "$T_DIR/drag.html"
	assert_eq 0 "$FG_RC" "flamegraph --from/--to of the dragged window ($(head -c 300 "$T_DIR/drag.fgerr"))"
	for v in space alloc_space objects alloc_objects; do
		F=$(folded "$T_DIR/drag.html" "$v") &&
			assert_eq "$(printf '%s\n' "$F" | awk '{ s += $NF } END { print s + 0 }')" "$(get known "drag_$v")" "dragged window: $v as --from/--to"
	done
	assert_ge "$(get known drag_alloc_objects)" 1 "the window holds allocations"
	assert_eq events "$(get known drag_sizes_source)" "the size chart follows the window"
	assert_eq "$SQL_SPACE" "$(get known drag_after_escape)" "Escape: the whole dump again"
	# The URL fragment: a reload keeps the state; a link opens it; a broken
	# one is ignored.
	assert_eq 1 "$(get known url_reload_same)" "reload: the same state"
	assert_match '(^#|&)view=objects(&|$)' "$(get known url_hash)" "fragment: the view"
	assert_match '(^#|&)focus=main(&|$)' "$(get known url_hash)" "fragment: the focus"
	assert_match '(^#|&)inv=1(&|$)' "$(get known url_hash)" "fragment: inverted"
	assert_eq objects "$(get known url_reload_view)" "reload: view"
	assert_eq main "$(get known url_reload_root)" "reload: focus"
	assert_eq 1 "$(get known url_reload_inverted)" "reload: inverted"
	assert_eq '/^_start$/' "$(get known url_reload_hide)" "reload: hide box"
	assert_eq do_ "$(get known url_reload_search)" "reload: search"
	fg calloc "$KDB" --from "${CALLOC_WIN%,*}ns" --to "${CALLOC_WIN#*,}ns" -o "$T_DIR/calloc.html"
	F=$(folded "$T_DIR/calloc.html" alloc_objects) && {
		assert_eq "$(printf '%s\n' "$F" | awk '{ s += $NF } END { print s + 0 }')" "$(get known frag_total)" "link: the window's alloc_objects"
		assert_eq "$(printf '%s\n' "$F" | awk '/;do_calloc / { s += $NF } END { print s + 0 }')" "$(get known frag_shown)" "link: do_calloc's callees in it"
	}
	assert_eq alloc_objects "$(get known frag_view)" "link: view"
	assert_eq do_calloc "$(get known frag_root)" "link: focus"
	assert_eq 1 "$(get known frag_inverted)" "link: inverted"
	assert_eq "$CALLOC_WIN" "$(get known frag_selection)" "link: window"
	assert_eq "$(get known frag_shown)" "$(get known frag_callers)" "link: do_calloc's callers hold the same"
	assert_eq 1 "$(get known bad_ready)" "broken fragment: the page still works"
	assert_eq space "$(get known bad_view)" "broken fragment: the first view"
	assert_eq all "$(get known bad_root)" "broken fragment: no focus"
	assert_eq 0 "$(get known bad_inverted)" "broken fragment: not inverted"
	assert_eq 1 "$(get known bad_hide_default)" "broken fragment: the default hide box"
	assert_eq "" "$(get known bad_selection)" "broken fragment: no window"

	# A second dump (in SQL: do_malloc's blocks freed, 7 more calls of
	# do_calloc kept) and a chart click; without the trace, so that a window
	# is the difference of the dumps around it.
	t_begin "two dumps, no trace: a chart click, a window between the dumps"
	D2="$T_DIR/known2.db"
	cp "$KDB" "$D2"
	sqlw "$D2" "DELETE FROM heapprof_event_chunk; DELETE FROM heapprof_trace; DELETE FROM heapprof_trace_stack;
	  DELETE FROM heapprof_event_heap; DELETE FROM heapprof_block;
	  INSERT INTO heapprof_dump(ts, upid, reason) SELECT max(ts) + 1000000, upid, 'signal' FROM heapprof_dump;
	  INSERT INTO heap_profile_allocation(ts, upid, heap_name, callsite_id, count, size)
	  SELECT (SELECT max(ts) FROM heapprof_dump), upid, heap_name, callsite_id, -60, -60000
	  FROM heap_profile_allocation WHERE callsite_id = $(cs_of do_malloc) LIMIT 1;
	  INSERT INTO heap_profile_allocation(ts, upid, heap_name, callsite_id, count, size)
	  SELECT (SELECT max(ts) FROM heapprof_dump), upid, heap_name, callsite_id, 7, 7000
	  FROM heap_profile_allocation WHERE callsite_id = $(cs_of do_calloc) LIMIT 1;" >/dev/null
	fg known2 "$D2"
	assert_no_match '"ev":|"in_page"|"sizes":' "$(cat "$T_DIR/known2.html")" "no trace, no blocks in the page"
	HP_FG_CHECKS=drag,sizes HP_FG_DRAG=dumps browser "$T_DIR/known2.html" "$T_DIR/known2.png" known2
	assert_eq "" "$(grep '^error=' "$T_DIR/known2.browser")" "two dumps: no error"
	assert_eq 2 "$(get known2 dumps)" "two dumps marked on the memory chart"
	assert_eq do_posix_memalign "$(get known2 space_top)" "last dump: top function"
	assert_eq "$(sqlq "$D2" "SELECT sum(size) FROM heap_profile_allocation;")" "$(get known2 space_total)" "last dump: root total"
	assert_eq do_malloc "$(get known2 dump1_top)" "first dump (a click on its tick): top function"
	assert_eq 60000 "$(get known2 dump1_top_self)" "first dump: do_malloc's bytes"
	assert_eq "$SQL_SPACE" "$(get known2 dump1_total)" "first dump: root total"
	# The window between the two dumps: what was allocated between them
	# (alloc_*), the stacks that grew (space, objects).
	DUMP2="(SELECT max(ts) FROM heapprof_dump)"
	assert_eq dumps "$(get known2 drag_source)" "window: from the dumps"
	assert_eq "$(sqlq "$D2" "SELECT sum(max(size, 0)) FROM heap_profile_allocation WHERE ts = $DUMP2;")" \
		"$(get known2 drag_alloc_space)" "window: alloc_space allocated between the dumps"
	assert_eq "$(sqlq "$D2" "SELECT sum(max(count, 0)) FROM heap_profile_allocation WHERE ts = $DUMP2;")" \
		"$(get known2 drag_alloc_objects)" "window: alloc_objects"
	assert_eq "$(sqlq "$D2" "SELECT sum(s) FROM (SELECT max(sum(size), 0) AS s FROM heap_profile_allocation
	  WHERE ts = $DUMP2 GROUP BY callsite_id);")" "$(get known2 drag_space)" "window: space of the stacks that grew"
	assert_eq 7000 "$(get known2 drag_space)" "window: do_calloc's 7000 bytes"
	assert_eq mean "$(get known2 sizes_space_source)" "sizes without blocks or events: the stacks' means"
	assert_eq "$SQL_SPACE" "$(get known2 sizes_space_total)" "sizes: the shown dump's total"
	assert_ge "$(printf '%s\n' "$(get known2 sizes_space)" | tr ';' '\n' | sed -n 's/^10://p')" 60000 "sizes: do_malloc's 1000-byte blocks in [512, 1024)"

	# The broken profile's page renders without an error too.
	browser "$T_DIR/loop.html" "$T_DIR/loop.png" loop
	assert_eq "" "$(grep '^error=' "$T_DIR/loop.browser")" "broken profile: no error in the page"

	# Recorded with no option: the page opens on the peak's dump, its
	# memory chart the session's samples (heap and RSS), dumps marked.
	t_begin "the page opens on the peak: peak_holder's 20 MiB, the memory chart from ten samples a second"
	hp_record ph -o "$T_DIR/ph.db" -- "$PROGS/peak_holder"
	assert_eq 0 "$REC_RC" "record's exit status"
	fg ph "$T_DIR/ph.db" -o "$T_DIR/ph.html"
	assert_eq 0 "$FG_RC" "flamegraph's exit status"
	browser "$T_DIR/ph.html" "$T_DIR/ph.png" ph
	assert_eq "" "$(grep '^error=' "$T_DIR/ph.browser")" "no error in the page"
	assert_eq 0 "$(get ph first_dump)" "the first dump in the list (the peak) is the one shown"
	assert_match "\(peak\)" "$(get ph first_dump_text)" "the dump shown: the peak"
	assert_eq peak_holder "$(get ph space_top)" "top function at the peak"
	assert_eq 20971520 "$(get ph space_top_self)" "peak_holder's 20 MiB"
	assert_eq 20971520 "$(get ph space_total)" "the graph's total: the peak"
	assert_eq samples "$(get ph timeline_source)" "memory chart: the session's samples"
	assert_eq 20971520 "$(get ph timeline_max)" "memory chart: its highest point, the peak"
	assert_ge "$(get ph timeline_rss)" 10 "memory chart: the RSS curve"
	assert_ge "$(get ph timeline_points)" 12 "memory chart: the heap's curve (samples and dumps)"
	assert_eq 2 "$(get ph dumps)" "memory chart: the two dumps marked"
fi

t_summary
