#!/usr/bin/env bash
# test_symbolize.sh BUILD: `heapprof symbolize` (offline symbolization).
# A C++ program built here with -g -O2 allocates through a template member
# function, a namespace function and a chain of two always_inline
# functions (3 times each, distinct sizes).  A stripped copy is recorded
# with -i 1; symbolizing it with the unstripped file found through each
# lookup path (HEAPPROF_BINARY_PATH steps 1, 3 and 5, index mode, a
# .gnu_debuglink debug file, the original path, debuginfod) must give the
# same exact names, source files, lines (from markers in the source) and
# inline chains.  A file with another build ID is refused with the seed's
# message and nothing is written; errors roll back; bad input gets one
# line and a non-zero status.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so"
unset HEAPPROF_BINARY_PATH HEAPPROF_SYMBOLIZER_MODE DEBUGINFOD_URLS

for tool in g++ objcopy readelf; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		t_begin "prerequisites"
		t_fail "$tool is missing"
		t_summary
	fi
done

# ---------------------------------------------------------------------------
# The program.  Each allocation line and each call line has a marker; the
# expected line numbers are read back with grep -n.
mkdir -p "$T_DIR/src" "$T_DIR/full" "$T_DIR/run"
SRC="$T_DIR/src/symprog.cc"
cat >"$SRC" <<'EOF'
// Allocations through a template member function, a namespace function and
// always_inline functions; `symprog N` does each N times.
#include <cstdio>
#include <cstdlib>

static void *volatile sink[64];
static int nsink;

static void keep(void *p)
{
	sink[nsink++ & 63] = p;
}

namespace ns {
template <typename T> struct Thing {
	__attribute__((noinline)) static T *make(int n);
};

template <typename T> T *Thing<T>::make(int n)
{
	T *p = static_cast<T *>(malloc(sizeof(T) * n)); // MARK_TEMPLATE
	keep(p);
	return p;
}

__attribute__((noinline)) void *named_alloc(unsigned long n)
{
	void *p = malloc(n); // MARK_NAMED
	keep(p);
	return p;
}

namespace detail {
static inline __attribute__((always_inline)) void *inner(unsigned long n)
{
	void *p = malloc(n); // MARK_INNER
	keep(p);
	return p;
}

static inline __attribute__((always_inline)) void *middle(unsigned long n)
{
	void *p = inner(n + 1); // MARK_MIDDLE
	keep(p);
	return p;
}
} // namespace detail

__attribute__((noinline)) void *outer(unsigned long n)
{
	void *p = detail::middle(n * 2); // MARK_OUTER
	keep(p);
	return p;
}
} // namespace ns

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 1;
	for (int i = 0; i < reps; i++) {
		ns::Thing<int>::make(25); // MARK_CALL_MAKE: 100 bytes
		ns::named_alloc(300);     // MARK_CALL_NAMED: 300 bytes
		ns::outer(1000);          // MARK_CALL_OUTER: 2001 bytes
	}
	printf("done %d\n", nsink);
	return 0;
}
EOF
line_of() { grep -n "$1" "$SRC" | head -n 1 | cut -d: -f1; }
L_TEMPLATE=$(line_of MARK_TEMPLATE)
L_NAMED=$(line_of MARK_NAMED)
L_INNER=$(line_of MARK_INNER)
L_MIDDLE=$(line_of MARK_MIDDLE)
L_OUTER=$(line_of MARK_OUTER)
L_CALL_MAKE=$(line_of MARK_CALL_MAKE)
L_CALL_NAMED=$(line_of MARK_CALL_NAMED)
L_CALL_OUTER=$(line_of MARK_CALL_OUTER)

FULL="$T_DIR/full/symprog"
STRIPPED="$T_DIR/run/symprog"
build_id_of() { readelf -n "$1" | awk '/Build ID:/ { print $3; exit }'; }

t_begin "build the program; the stripped copy keeps the build ID, no symbols"
if ! run_bounded 120 g++ -std=c++17 -g -O2 -o "$FULL" "$SRC" 2>"$T_DIR/gxx.err"; then
	t_fail "g++ failed: $(head -c 600 "$T_DIR/gxx.err")"
	t_summary
fi
objcopy --strip-all "$FULL" "$STRIPPED" || t_fail "objcopy --strip-all failed"
BID=$(build_id_of "$FULL")
assert_match '^[0-9a-f]{40}$' "$BID" "GNU build ID of the program"
assert_eq "$BID" "$(build_id_of "$STRIPPED")" "build ID of the stripped copy"
assert_no_match 'symtab|debug_info' "$(readelf -S "$STRIPPED")" "stripped copy has no .symtab/.debug_info"

# ---------------------------------------------------------------------------
PROF="$T_DIR/stripped.db"
t_begin "record the stripped copy with -i 1"
hp_record rec -i 1 -o "$PROF" -- "$STRIPPED" 3
assert_eq 0 "$REC_RC" "record status" || show_err rec
db_valid "$PROF" || t_summary

# q DB SQL: one-column CSV result of `heapprof sql` (a column expression
# spanning lines needs an alias: the header is the expression's text).
q() { hp_sql_csv "$1" "$2"; }

# The leaf frame id of the callsite that allocated exactly COUNT objects and
# BYTES bytes in all (positive rows): leaf_frame DB COUNT BYTES.
leaf_frame() {
	q "$1" "SELECT c.frame_id FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id WHERE a.count > 0
	  GROUP BY c.id HAVING sum(a.count) = $2 AND sum(a.size) = $3"
}
# The frame of that callsite's caller: caller_frame DB COUNT BYTES.
caller_frame() {
	q "$1" "SELECT p.frame_id FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_callsite p ON c.parent_id = p.id WHERE a.count > 0
	  GROUP BY c.id HAVING sum(a.count) = $2 AND sum(a.size) = $3"
}
# The symbol rows of a frame, by id: name|source_file|line_number.
symbols_of() {
	q "$1" "SELECT s.name || '|' || s.source_file || '|' || s.line_number AS v
	  FROM stack_profile_frame f JOIN stack_profile_symbol s
	  ON s.symbol_set_id = f.symbol_set_id WHERE f.id = $2 ORDER BY s.id"
}
# Every symbol of the program's frames, for comparing runs.
SYMDUMP_SQL="SELECT f.rel_pc || '|' || s.name || '|' || s.source_file || '|' ||
  s.line_number AS v FROM stack_profile_frame f
  JOIN stack_profile_mapping m ON f.mapping = m.id
  JOIN stack_profile_symbol s ON s.symbol_set_id = f.symbol_set_id
  WHERE m.build_id = '$BID' ORDER BY f.rel_pc, s.id"
# Counts: symbol rows, distinct sets, frames pointing at a set, orphan sets.
COUNTS_SQL="SELECT (SELECT count(*) FROM stack_profile_symbol) || ' ' ||
  (SELECT count(DISTINCT symbol_set_id) FROM stack_profile_symbol) || ' ' ||
  (SELECT count(*) FROM stack_profile_frame WHERE symbol_set_id IS NOT NULL)
  || ' ' || (SELECT count(*) FROM stack_profile_symbol WHERE symbol_set_id NOT
  IN (SELECT symbol_set_id FROM stack_profile_frame
      WHERE symbol_set_id IS NOT NULL)) AS v"

F_MAKE=$(leaf_frame "$PROF" 3 300)
F_NAMED=$(leaf_frame "$PROF" 3 900)
F_OUTER=$(leaf_frame "$PROF" 3 6003)
C_MAKE=$(caller_frame "$PROF" 3 300)
C_NAMED=$(caller_frame "$PROF" 3 900)
C_OUTER=$(caller_frame "$PROF" 3 6003)

t_begin "the stripped recording has unnamed frames and no symbols"
for f in "$F_MAKE" "$F_NAMED" "$F_OUTER" "$C_MAKE"; do
	assert_match '^[0-9]+$' "$f" "frame id of a known callsite" || break
	assert_eq "" "$(q "$PROF" "SELECT name FROM stack_profile_frame WHERE id = $f")" \
		"frame $f has no name before symbolize"
done
assert_eq 0 "$(q "$PROF" "SELECT count(*) FROM stack_profile_symbol")" "no symbols yet"

# Every other module with frames (libc...) and its build ID: "path|hex".
OTHER_MODS=$(q "$PROF" "SELECT DISTINCT m.name || '|' || m.build_id
  FROM stack_profile_mapping m WHERE m.id IN (SELECT mapping FROM
  stack_profile_frame) AND m.name LIKE '/%' AND m.build_id != '$BID'")

# sym TAG DB [ENV=VAL...]: heapprof symbolize -v DB under env; out/err in
# $T_DIR/TAG.out/.err, status in SYM_RC.
sym() {
	local tag=$1 db=$2
	shift 2
	SYM_RC=0
	run_bounded 120 env "$@" "$HP" symbolize -v "$db" \
		>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" || SYM_RC=$?
}

# check_symbols DB TAG: the exact symbols of the known frames.
check_symbols() {
	local db=$1 tag=$2
	assert_eq "ns::Thing<int>::make(int)|$SRC|$L_TEMPLATE" \
		"$(symbols_of "$db" "$F_MAKE")" "$tag: template function symbol"
	assert_eq "ns::named_alloc(unsigned long)|$SRC|$L_NAMED" \
		"$(symbols_of "$db" "$F_NAMED")" "$tag: namespace function symbol"
	# Innermost inlined function first, the function it was inlined into
	# last, each at the line it executes (callers: the call site).
	assert_eq "ns::detail::inner|$SRC|$L_INNER
ns::detail::middle|$SRC|$L_MIDDLE
ns::outer(unsigned long)|$SRC|$L_OUTER" \
		"$(symbols_of "$db" "$F_OUTER")" "$tag: inline chain"
	assert_eq "main|$SRC|$L_CALL_MAKE" "$(symbols_of "$db" "$C_MAKE")" "$tag: caller of make"
	assert_eq "main|$SRC|$L_CALL_NAMED" "$(symbols_of "$db" "$C_NAMED")" "$tag: caller of named_alloc"
	assert_eq "main|$SRC|$L_CALL_OUTER" "$(symbols_of "$db" "$C_OUTER")" "$tag: caller of outer"
	assert_eq "symprog.cc" "$(q "$db" "SELECT DISTINCT replace(s.source_file, rtrim(s.source_file, replace(s.source_file, '/', '')), '') AS v
	  FROM stack_profile_frame f JOIN stack_profile_symbol s ON s.symbol_set_id = f.symbol_set_id
	  WHERE f.id = $F_OUTER")" "$tag: source file basename"
	# Every frame of the program but _start (crt1 has no DWARF) has a set.
	assert_eq 0 "$(q "$db" "SELECT count(*) FROM stack_profile_frame f
	  JOIN stack_profile_mapping m ON f.mapping = m.id WHERE m.build_id = '$BID'
	  AND f.name != '_start' AND f.symbol_set_id IS NULL")" "$tag: program frames without symbols"
}

# check_names DB TAG: names filled in from the symbol table.
check_names() {
	local db=$1 tag=$2
	assert_match '^ns::Thing<int>::make\(int\)' \
		"$(q "$db" "SELECT name FROM stack_profile_frame WHERE id = $F_MAKE")" "$tag: template frame name"
	assert_eq "ns::named_alloc(unsigned long)|_ZN2ns11named_allocEm" \
		"$(q "$db" "SELECT name || '|' || system_name FROM stack_profile_frame WHERE id = $F_NAMED")" \
		"$tag: namespace function frame name, system_name"
	assert_eq "ns::outer(unsigned long)" \
		"$(q "$db" "SELECT name FROM stack_profile_frame WHERE id = $F_OUTER")" "$tag: frame name of the inlining function"
	assert_eq "main" "$(q "$db" "SELECT name FROM stack_profile_frame WHERE id = $C_MAKE")" "$tag: caller frame name"
	assert_eq 0 "$(q "$db" "SELECT count(*) FROM stack_profile_frame f
	  JOIN stack_profile_mapping m ON f.mapping = m.id
	  WHERE m.build_id = '$BID' AND f.name IS NULL")" "$tag: unnamed program frames left"
}

# check_not_found TAG: a "Could not find" line for every other module.
check_not_found() {
	local tag=$1 mod
	while IFS= read -r mod; do
		[ -n "$mod" ] || continue
		assert_eq 1 "$(grep -cFx "Could not find ${mod%%|*} (Build ID: ${mod#*|})." "$T_DIR/$tag.err")" \
			"$tag: Could not find line for ${mod%%|*}"
	done <<<"$OTHER_MODS"
}

# ---------------------------------------------------------------------------
t_begin "binary path step 3 (basename): names, files, lines, inline chain"
mkdir -p "$T_DIR/bp3"
cp "$FULL" "$T_DIR/bp3/symprog"
cp "$PROF" "$T_DIR/s3.db"
sym s3 "$T_DIR/s3.db" HEAPPROF_BINARY_PATH="$T_DIR/bp3"
assert_eq 0 "$SYM_RC" "status (stderr: $(head -c 300 "$T_DIR/s3.err"))"
assert_eq 1 "$(grep -cFx "$STRIPPED: using $T_DIR/bp3/symprog (binary path)" "$T_DIR/s3.out")" \
	"reports the file used: $(cat "$T_DIR/s3.out")"
assert_match "^$T_DIR/s3.db: [0-9]+ of [0-9]+ frames symbolized \([0-9]+ source locations\), [0-9]+ frame names added; 1 of [0-9]+ modules found$" \
	"$(cat "$T_DIR/s3.out")" "summary line"
assert_no_match "Could not find $STRIPPED" "$(cat "$T_DIR/s3.err")" "the program was found"
check_not_found s3
check_symbols "$T_DIR/s3.db" step3
check_names "$T_DIR/s3.db" step3
db_valid "$T_DIR/s3.db"
REF_DUMP=$(q "$T_DIR/s3.db" "$SYMDUMP_SQL")
REF_COUNTS=$(q "$T_DIR/s3.db" "$COUNTS_SQL")
assert_match '^[1-9][0-9]* [1-9][0-9]* [1-9][0-9]* 0$' "$REF_COUNTS" "symbols, sets, frames with sets, orphans"

t_begin "symbols join the allocations (Perfetto-style query)"
# Bytes per innermost symbol of the leaf frames: the inlined function gets
# the inline chain's allocations, exactly.
assert_eq "ns::Thing<int>::make(int)|3|300" "$(q "$T_DIR/s3.db" "SELECT s.name || '|' ||
  sum(a.count) || '|' || sum(a.size) AS v FROM heap_profile_allocation a
  JOIN stack_profile_callsite c ON a.callsite_id = c.id
  JOIN stack_profile_frame f ON c.frame_id = f.id
  JOIN stack_profile_symbol s ON s.symbol_set_id = f.symbol_set_id
  WHERE a.count > 0 AND s.line_number = $L_TEMPLATE GROUP BY s.name")" "template"
assert_eq "ns::detail::inner|3|6003" "$(q "$T_DIR/s3.db" "SELECT s.name || '|' ||
  sum(a.count) || '|' || sum(a.size) AS v FROM heap_profile_allocation a
  JOIN stack_profile_callsite c ON a.callsite_id = c.id
  JOIN stack_profile_frame f ON c.frame_id = f.id
  JOIN stack_profile_symbol s ON s.symbol_set_id = f.symbol_set_id
  WHERE a.count > 0 AND s.id = (SELECT min(id) FROM stack_profile_symbol
    WHERE symbol_set_id = f.symbol_set_id) AND s.line_number = $L_INNER
  GROUP BY s.name")" "innermost inlined function"

t_begin "heapprof report shows demangled names, file:line and inlined frames"
"$HP" report "$T_DIR/s3.db" --top 5 >"$T_DIR/s3.report" 2>"$T_DIR/s3.report.err"
assert_eq 0 "$?" "report status"
REP=$(cat "$T_DIR/s3.report")
# The top self entry is the innermost inlined function at its malloc line;
# its path goes through the function it was inlined into (marked) and the
# real function that inlined both, each at its call line.
assert_match "1 +5\.86 KiB \(6003 B\) +[0-9.]+% +ns::detail::inner +symprog +symprog\.cc:$L_INNER" "$REP" "top self entry"
assert_match "<- ns::detail::middle +\(symprog symprog\.cc:$L_MIDDLE\) inlined" "$REP" "inlined caller"
assert_match "<- ns::outer\(unsigned long\) +\(symprog symprog\.cc:$L_OUTER\)\$" "$(grep -F 'ns::outer' "$T_DIR/s3.report" | head -n 1)" "real caller, not marked inlined"
assert_match "<- main +\(symprog symprog\.cc:$L_CALL_OUTER\)" "$REP" "main at the call line"
assert_match "ns::Thing<int>::make\(int\) +symprog +symprog\.cc:$L_TEMPLATE" "$REP" "template member, demangled, with its line"

t_begin "idempotent: a second run replaces, same rows"
sym s3b "$T_DIR/s3.db" HEAPPROF_BINARY_PATH="$T_DIR/bp3"
assert_eq 0 "$SYM_RC" "status of the second run"
assert_eq "$REF_COUNTS" "$(q "$T_DIR/s3.db" "$COUNTS_SQL")" "row counts after the second run"
assert_eq "$REF_DUMP" "$(q "$T_DIR/s3.db" "$SYMDUMP_SQL")" "symbols after the second run"
assert_match ', 0 frame names added;' "$(cat "$T_DIR/s3b.out")" "names are not added twice"
check_names "$T_DIR/s3.db" rerun

t_begin "binary path step 1 (absolute path under the dir) wins over step 3"
mkdir -p "$T_DIR/bp1$(dirname "$STRIPPED")"
cp "$FULL" "$T_DIR/bp1$STRIPPED"
# A different build at the basename: never reached.
run_bounded 120 g++ -std=c++17 -g -O2 -Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567 \
	-o "$T_DIR/bp1/symprog" "$SRC" || t_fail "g++ (other build ID) failed"
cp "$PROF" "$T_DIR/s1.db"
sym s1 "$T_DIR/s1.db" HEAPPROF_BINARY_PATH="$T_DIR/nonexistent:$T_DIR/bp1"
assert_eq 0 "$SYM_RC" "status"
assert_eq 1 "$(grep -cFx "$STRIPPED: using $T_DIR/bp1$STRIPPED (binary path)" "$T_DIR/s1.out")" \
	"the absolute-path copy is used: $(cat "$T_DIR/s1.out")"
check_symbols "$T_DIR/s1.db" step1
assert_eq "$REF_DUMP" "$(q "$T_DIR/s1.db" "$SYMDUMP_SQL")" "same symbols as step 3"

t_begin "binary path step 5 (.build-id/xx/rest.debug, a debug-only file)"
mkdir -p "$T_DIR/bp5/.build-id/${BID:0:2}"
DEBUGFILE="$T_DIR/bp5/.build-id/${BID:0:2}/${BID:2}.debug"
objcopy --only-keep-debug "$FULL" "$DEBUGFILE" || t_fail "objcopy --only-keep-debug failed"
cp "$PROF" "$T_DIR/s5.db"
sym s5 "$T_DIR/s5.db" HEAPPROF_BINARY_PATH="$T_DIR/bp5"
assert_eq 0 "$SYM_RC" "status"
assert_eq 1 "$(grep -cFx "$STRIPPED: using $DEBUGFILE (binary path)" "$T_DIR/s5.out")" \
	"the .build-id debug file is used: $(cat "$T_DIR/s5.out")"
check_symbols "$T_DIR/s5.db" step5
check_names "$T_DIR/s5.db" step5
assert_eq "$REF_DUMP" "$(q "$T_DIR/s5.db" "$SYMDUMP_SQL")" "same symbols as step 3"

t_begin "a stripped file pairs with its .gnu_debuglink debug file"
mkdir -p "$T_DIR/pair"
objcopy --only-keep-debug "$FULL" "$T_DIR/pair/symprog.debug"
(cd "$T_DIR/pair" && objcopy --strip-all --add-gnu-debuglink=symprog.debug "$FULL" symprog) ||
	t_fail "objcopy --add-gnu-debuglink failed"
assert_eq "$BID" "$(build_id_of "$T_DIR/pair/symprog")" "build ID of the debuglinked copy"
cp "$PROF" "$T_DIR/sp.db"
sym sp "$T_DIR/sp.db" HEAPPROF_BINARY_PATH="$T_DIR/pair"
assert_eq 0 "$SYM_RC" "status"
assert_eq 1 "$(grep -cFx "$STRIPPED: using $T_DIR/pair/symprog (binary path)" "$T_DIR/sp.out")" \
	"the stripped file is the module: $(cat "$T_DIR/sp.out")"
check_symbols "$T_DIR/sp.db" debuglink
assert_eq "$REF_DUMP" "$(q "$T_DIR/sp.db" "$SYMDUMP_SQL")" "same symbols as step 3"

t_begin "a stripped file pairs with a .build-id debug file in another binary-path dir"
mkdir -p "$T_DIR/onlystripped"
cp "$STRIPPED" "$T_DIR/onlystripped/symprog"
cp "$PROF" "$T_DIR/sb.db"
sym sb "$T_DIR/sb.db" HEAPPROF_BINARY_PATH="$T_DIR/onlystripped:$T_DIR/bp5"
assert_eq 0 "$SYM_RC" "status"
assert_eq 1 "$(grep -cFx "$STRIPPED: using $T_DIR/onlystripped/symprog (binary path)" "$T_DIR/sb.out")" \
	"the first match, the stripped file, is the module: $(cat "$T_DIR/sb.out")"
check_symbols "$T_DIR/sb.db" build-id-debug
assert_eq "$REF_DUMP" "$(q "$T_DIR/sb.db" "$SYMDUMP_SQL")" "same symbols as step 3"

t_begin "index mode: found by build ID anywhere below, best copy, symlink loop"
mkdir -p "$T_DIR/idx/deep/a/b/c"
cp "$FULL" "$T_DIR/idx/deep/a/b/c/renamed-binary"
cp "$STRIPPED" "$T_DIR/idx/stripped-copy" # same build ID, no DWARF
ln -s ../.. "$T_DIR/idx/deep/a/b/loop"
ln -s "$T_DIR/idx" "$T_DIR/idx/deep/self"
printf 'not an ELF file\n' >"$T_DIR/idx/deep/text.so"
cp "$PROF" "$T_DIR/si.db"
sym si "$T_DIR/si.db" HEAPPROF_BINARY_PATH="$T_DIR/idx" HEAPPROF_SYMBOLIZER_MODE=index
assert_eq 0 "$SYM_RC" "status (stderr: $(head -c 300 "$T_DIR/si.err"))"
assert_eq 1 "$(grep -cFx "$STRIPPED: using $T_DIR/idx/deep/a/b/c/renamed-binary (index)" "$T_DIR/si.out")" \
	"the copy with DWARF is used: $(cat "$T_DIR/si.out")"
check_symbols "$T_DIR/si.db" index
check_names "$T_DIR/si.db" index
check_not_found si
assert_eq "$REF_DUMP" "$(q "$T_DIR/si.db" "$SYMDUMP_SQL")" "same symbols as step 3"

t_begin "without HEAPPROF_BINARY_PATH: the recorded path, if its build ID matches"
UNSTRIPPED_DB="$T_DIR/full.db"
hp_record recfull -i 1 -o "$UNSTRIPPED_DB" -- "$FULL" 3
assert_eq 0 "$REC_RC" "record status" || show_err recfull
sym so "$UNSTRIPPED_DB"
assert_eq 0 "$SYM_RC" "status"
assert_eq 1 "$(grep -cFx "$FULL: using $FULL (original path)" "$T_DIR/so.out")" \
	"the original file is used: $(cat "$T_DIR/so.out")"
assert_eq "$REF_DUMP" "$(q "$UNSTRIPPED_DB" "$SYMDUMP_SQL")" "same symbols as step 3"
# The stripped recording's own file has no DWARF: names only, no symbols.
cp "$PROF" "$T_DIR/sn.db"
sym sn "$T_DIR/sn.db"
assert_eq 0 "$SYM_RC" "status (stripped original)"
assert_eq "" "$(q "$T_DIR/sn.db" "$SYMDUMP_SQL")" "no symbols from a stripped file"
assert_match "$STRIPPED: no DWARF in $STRIPPED" "$(cat "$T_DIR/sn.err")" "says the file has no DWARF"

t_begin "debuginfod (DEBUGINFOD_URLS, a local server) when the file is gone"
if ! command -v python3 >/dev/null 2>&1; then
	t_skip "python3 missing (it serves the debuginfod requests)"
else
	mkdir -p "$T_DIR/dsrv/buildid/$BID" "$T_DIR/gone"
	cp "$FULL" "$T_DIR/dsrv/buildid/$BID/executable"
	cat >"$T_DIR/dsrv.py" <<'EOF'
import functools, http.server, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
srv = http.server.ThreadingHTTPServer(
    ("127.0.0.1", 0), functools.partial(Quiet, directory=sys.argv[1]))
with open(sys.argv[2], "w") as f:
    f.write("%d\n" % srv.server_address[1])
srv.serve_forever()
EOF
	mkfifo "$T_DIR/port.fifo"
	# Opened read-write, the FIFO never blocks the open; read -t bounds
	# the wait for the server's port.
	exec 9<>"$T_DIR/port.fifo"
	timeout 300 python3 "$T_DIR/dsrv.py" "$T_DIR/dsrv" "$T_DIR/port.fifo" &
	SRV_PID=$!
	PORT=""
	read -r -t 20 -u 9 PORT || t_fail "the local server did not start"
	exec 9<&-
	if [ -n "$PORT" ]; then
		cp "$STRIPPED" "$T_DIR/gone/symprog"
		hp_record recgone -i 1 -o "$T_DIR/gone.db" -- "$T_DIR/gone/symprog" 3
		rm -f "$T_DIR/gone/symprog"
		sym sd "$T_DIR/gone.db" DEBUGINFOD_URLS="http://127.0.0.1:$PORT" \
			DEBUGINFOD_CACHE_PATH="$T_DIR/dcache" DEBUGINFOD_TIMEOUT=20
		assert_eq 0 "$SYM_RC" "status (stderr: $(head -c 300 "$T_DIR/sd.err"))"
		assert_match "^$T_DIR/gone/symprog: using .*/executable \(debuginfod\)$" \
			"$(cat "$T_DIR/sd.out")" "the file from debuginfod is used"
		assert_eq "$REF_DUMP" "$(q "$T_DIR/gone.db" "$SYMDUMP_SQL")" "same symbols as step 3"
		# With a binary path, debuginfod is not asked for the module.
		mkdir -p "$T_DIR/empty"
		cp "$PROF" "$T_DIR/sd2.db"
		sym sd2 "$T_DIR/sd2.db" HEAPPROF_BINARY_PATH="$T_DIR/empty" \
			DEBUGINFOD_URLS="http://127.0.0.1:$PORT" DEBUGINFOD_CACHE_PATH="$T_DIR/dcache2"
		assert_eq 1 "$SYM_RC" "status: nothing found"
		assert_eq 1 "$(grep -cFx "Could not find $STRIPPED (Build ID: $BID)." "$T_DIR/sd2.err")" \
			"Could not find the program"
	fi
	kill "$SRV_PID" 2>/dev/null
	wait "$SRV_PID" 2>/dev/null
fi

# ---------------------------------------------------------------------------
t_begin "a file with another build ID is refused, nothing written"
mkdir -p "$T_DIR/wrong"
run_bounded 120 g++ -std=c++17 -g -O2 -Wl,--build-id=0xdeadbeefdeadbeefdeadbeefdeadbeefdeadbeef \
	-o "$T_DIR/wrong/symprog" "$SRC" || t_fail "g++ (wrong build ID) failed"
assert_eq deadbeefdeadbeefdeadbeefdeadbeefdeadbeef "$(build_id_of "$T_DIR/wrong/symprog")" "rebuilt build ID"
cp "$PROF" "$T_DIR/sw.db"
BEFORE=$(sqlite3 "$T_DIR/sw.db" .dump)
sym sw "$T_DIR/sw.db" HEAPPROF_BINARY_PATH="$T_DIR/wrong"
assert_eq 1 "$SYM_RC" "status: no module found"
assert_eq 1 "$(grep -cFx "Could not find $STRIPPED (Build ID: $BID)." "$T_DIR/sw.err")" \
	"the seed's message: $(head -c 400 "$T_DIR/sw.err")"
assert_match "$T_DIR/wrong/symprog has Build ID deadbeefdeadbeefdeadbeefdeadbeefdeadbeef, not $BID" \
	"$(cat "$T_DIR/sw.err")" "names the mismatching file"
check_not_found sw
assert_eq "$BEFORE" "$(sqlite3 "$T_DIR/sw.db" .dump)" "profile unchanged"
assert_eq 0 "$(q "$T_DIR/sw.db" "SELECT count(*) FROM stack_profile_symbol")" "no symbols"

t_begin "a module not found keeps its earlier symbols"
cp "$T_DIR/s3.db" "$T_DIR/keep.db"
sym keep "$T_DIR/keep.db" HEAPPROF_BINARY_PATH="$T_DIR/wrong"
assert_eq 1 "$SYM_RC" "status"
assert_eq "$REF_COUNTS" "$(q "$T_DIR/keep.db" "$COUNTS_SQL")" "row counts kept"
assert_eq "$REF_DUMP" "$(q "$T_DIR/keep.db" "$SYMDUMP_SQL")" "symbols kept"

t_begin "an error while writing rolls everything back"
# A symbol table that rejects every row with a line number: the first
# insert fails after frame names were already updated in the transaction.
cp "$PROF" "$T_DIR/rb.db"
sqlite3 "$T_DIR/rb.db" "DROP TABLE stack_profile_symbol;
  CREATE TABLE stack_profile_symbol(id INTEGER PRIMARY KEY, type TEXT,
  symbol_set_id INT, name TEXT, source_file TEXT,
  line_number INT CHECK (line_number IS NULL));"
BEFORE=$(sqlite3 "$T_DIR/rb.db" .dump)
sym rb "$T_DIR/rb.db" HEAPPROF_BINARY_PATH="$T_DIR/bp3"
assert_eq 1 "$SYM_RC" "status"
assert_match '^heapprof: symbolize: .*rb\.db: writing symbols: CHECK constraint failed' \
	"$(grep '^heapprof:' "$T_DIR/rb.err")" "the error"
assert_eq "$BEFORE" "$(sqlite3 "$T_DIR/rb.db" .dump)" "profile unchanged"
db_valid "$T_DIR/rb.db"

# ---------------------------------------------------------------------------
# expect_error TAG WANT_STATUS CMD...: one non-empty line on stderr, the
# status (a number, or "any": non-zero and < 128), no crash.
expect_error() {
	local tag=$1 want=$2
	shift 2
	local rc=0
	run_bounded 60 "$@" >"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" || rc=$?
	ERR_TEXT=$(cat "$T_DIR/$tag.err")
	if [ "$want" = any ]; then
		if [ "$rc" = 0 ] || [ "$rc" -ge 128 ]; then
			t_fail "$tag: expected a non-zero status < 128, got $rc ($ERR_TEXT)"
		fi
	else
		assert_eq "$want" "$rc" "$tag: exit status ($ERR_TEXT)"
	fi
	assert_eq 1 "$(grep -c . "$T_DIR/$tag.err")" "$tag: one line on stderr: $ERR_TEXT"
	assert_match '^heapprof: symbolize: ' "$ERR_TEXT" "$tag: message prefix"
	assert_no_match 'egmentation|core dumped|Assertion|Aborted' "$ERR_TEXT" "$tag: no crash"
}

t_begin "usage and --help"
rc=0
"$HP" symbolize --help >"$T_DIR/help.out" 2>&1 || rc=$?
assert_eq 0 "$rc" "--help status"
assert_match '^usage: heapprof symbolize' "$(head -n 1 "$T_DIR/help.out")" "--help text"
assert_match 'HEAPPROF_BINARY_PATH' "$(cat "$T_DIR/help.out")" "--help names the variables"
expect_error noarg 2 "$HP" symbolize
expect_error badopt 2 "$HP" symbolize --bogus "$PROF"
expect_error twofiles 2 "$HP" symbolize "$PROF" "$PROF"
expect_error badmode 2 env HEAPPROF_BINARY_PATH="$T_DIR/bp3" HEAPPROF_SYMBOLIZER_MODE=fuzzy "$HP" symbolize "$PROF"
assert_match 'fuzzy' "$ERR_TEXT" "names the mode"
expect_error indexnopath 2 env HEAPPROF_SYMBOLIZER_MODE=index "$HP" symbolize "$PROF"

t_begin "bad files: missing, directory, text, random, empty, other database"
expect_error missing 1 "$HP" symbolize "$T_DIR/missing.db"
assert_match 'missing\.db' "$ERR_TEXT" "names the file"
[ -e "$T_DIR/missing.db" ] && t_fail "symbolize created $T_DIR/missing.db"
expect_error dir 1 "$HP" symbolize "$T_DIR/src"
printf 'this is not a database\n%.0s' $(seq 200) >"$T_DIR/text.db"
expect_error text 1 "$HP" symbolize "$T_DIR/text.db"
head -c 65536 /dev/urandom >"$T_DIR/random.db"
cp "$T_DIR/random.db" "$T_DIR/random.orig"
expect_error random 1 "$HP" symbolize "$T_DIR/random.db"
cmp -s "$T_DIR/random.db" "$T_DIR/random.orig" || t_fail "symbolize changed a random file"
: >"$T_DIR/zero.db"
expect_error zero 1 "$HP" symbolize "$T_DIR/zero.db"
sqlite3 "$T_DIR/other.db" "CREATE TABLE t(a); INSERT INTO t VALUES (1);"
expect_error other 1 "$HP" symbolize "$T_DIR/other.db"

t_begin "a read-only profile is refused and left alone"
cp "$PROF" "$T_DIR/ro.db"
chmod 444 "$T_DIR/ro.db"
BEFORE=$(sqlite3 -readonly "$T_DIR/ro.db" .dump)
expect_error ro 1 env HEAPPROF_BINARY_PATH="$T_DIR/bp3" "$HP" symbolize "$T_DIR/ro.db"
assert_match 'read-only' "$ERR_TEXT" "says read-only"
assert_eq "$BEFORE" "$(sqlite3 -readonly "$T_DIR/ro.db" .dump)" "profile unchanged"

t_begin "a truncated profile: an error or a clean run, never a crash"
size=$(stat -c %s "$PROF")
head -c $((size / 2)) "$PROF" >"$T_DIR/trunc.db"
rc=0
run_bounded 60 env HEAPPROF_BINARY_PATH="$T_DIR/bp3" "$HP" symbolize "$T_DIR/trunc.db" \
	>"$T_DIR/trunc.out" 2>"$T_DIR/trunc.err" || rc=$?
if [ "$rc" -ge 128 ]; then
	t_fail "status $rc on a truncated profile: $(head -c 300 "$T_DIR/trunc.err")"
fi
assert_no_match 'egmentation|core dumped|Assertion|Aborted' "$(cat "$T_DIR/trunc.err")" "no crash"

t_summary
