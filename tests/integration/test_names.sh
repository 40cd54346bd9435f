#!/usr/bin/env bash
# test_names.sh BUILD: the names a C, C++ or Rust developer reads (issue 19).
#  * A program started through a symbolic link is named by the link (as
#    Debian's redis-server, a link to redis-check-rdb), with the file it
#    resolves to in stack_profile_mapping.resolved_name.
#  * A library loaded by a relative path (dlopen("./libdlib.so"), or found
#    through LD_LIBRARY_PATH=.) gets its absolute path: its frames are named
#    at record time, and `heapprof symbolize` finds it from anywhere.
#  * --unwind fp on code without frame pointers: the report says why the
#    stacks are one frame deep.
#  * Rust (when rustc is installed): demangled names without hashes in the
#    report, the flame graph page, pprof and SQL; no frame named after a
#    data symbol (rust_metadata_std_<hash>, Rust's dylibs).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/known" "$PROGS/dlopener" \
	"$PROGS/nofp"

# The directory holding T_DIR, with every link resolved (what the kernel
# and realpath give).
T_REAL=$(cd -P "$T_DIR" && pwd)

# frame_mapping DB FUNC: the mapping name of the frames named FUNC.
frame_mapping() {
	sqlq "$1" "SELECT DISTINCT m.name FROM stack_profile_frame f
	  JOIN stack_profile_mapping m ON f.mapping = m.id
	  WHERE f.name = '$(sql_quote "$2")';"
}

# ---------------------------------------------------------------------------
t_begin "a program started through a symbolic link is named by the link"
mkdir -p "$T_DIR/real" "$T_DIR/bin"
cp "$PROGS/known" "$T_DIR/real/known-real"
ln -s ../real/known-real "$T_DIR/bin/known-link"
# By its absolute path, then by a relative one from its directory.
hp_record link -i 1 -o "$T_DIR/link.db" -- "$T_DIR/bin/known-link"
assert_eq 7 "$REC_RC" "exit status of known" || show_err link
(cd "$T_DIR/bin" && hp_record link2 -i 1 -o "$T_DIR/link2.db" -- ./known-link
	exit "$REC_RC")
assert_eq 7 "$?" "exit status of ./known-link" || show_err link2
for db in link link2; do
	assert_eq "$T_REAL/bin/known-link" "$(frame_mapping "$T_DIR/$db.db" do_malloc)" \
		"$db: mapping of do_malloc"
	assert_eq "$T_REAL/real/known-real" "$(sqlq "$T_DIR/$db.db" "SELECT resolved_name
	  FROM stack_profile_mapping WHERE name = '$T_REAL/bin/known-link';")" \
		"$db: its resolved_name"
	# Not a link: no resolved_name.
	assert_eq 0 "$(sqlq "$T_DIR/$db.db" "SELECT count(*) FROM stack_profile_mapping
	  WHERE resolved_name = name;")" "$db: resolved_name only where it differs"
done
# The report's module column, the pprof's mapping file.
"$HP" report "$T_DIR/link.db" >"$T_DIR/link.report" 2>&1
assert_match 'do_malloc +known-link' "$(cat "$T_DIR/link.report")" "report: module of do_malloc"
assert_no_match 'known-real' "$(cat "$T_DIR/link.report")" "report: the link's target is not named"
"$HP" pprof "$T_DIR/link.db" -o "$T_DIR/link.pb.gz" >/dev/null 2>&1
assert_eq 1 "$(zcat "$T_DIR/link.pb.gz" | grep -a -c "$T_REAL/bin/known-link")" \
	"pprof: the mapping's file is the link"

# ---------------------------------------------------------------------------
t_begin "a library loaded by a relative path gets its absolute path"
mkdir -p "$T_DIR/dl"
if ! gcc -shared -fPIC -O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls \
	-o "$T_DIR/dl/libdlib.so" "$HERE/libsrc/dlib.c" 2>"$T_DIR/dlib.cc.err"; then
	t_fail "cannot build libdlib.so: $(head -c 200 "$T_DIR/dlib.cc.err")"
else
	# dlopen("./libdlib.so") from its directory; then dlopen("libdlib.so")
	# found through LD_LIBRARY_PATH=. (the loader names it "./libdlib.so"
	# too).  The library is closed before the program exits.
	(cd "$T_DIR/dl" && hp_record dlrel -i 1 -o "$T_DIR/dlrel.db" -- \
		"$PROGS/dlopener" ./libdlib.so
		exit "$REC_RC")
	assert_eq 15 "$?" "dlopen(./libdlib.so): exit status" || show_err dlrel
	(cd "$T_DIR/dl" && LD_LIBRARY_PATH=. hp_record dlpath -i 1 \
		-o "$T_DIR/dlpath.db" -- "$PROGS/dlopener" libdlib.so
		exit "$REC_RC")
	assert_eq 15 "$?" "LD_LIBRARY_PATH=.: exit status" || show_err dlpath
	for db in dlrel dlpath; do
		assert_eq "$T_REAL/dl/libdlib.so" "$(frame_mapping "$T_DIR/$db.db" dlib_alloc)" \
			"$db: mapping of dlib_alloc"
		for cs in $(leaf_callsites "$T_DIR/$db.db" dlib_alloc); do
			assert_eq "dlib_alloc dlib_middle dlib_entry call_lib main" \
				"$(stack_of "$T_DIR/$db.db" "$cs" | head -n5 | tr '\n' ' ' | sed 's/ $//')" \
				"$db: dlib_alloc's stack, named at record time"
		done
		assert_eq 0 "$(sqlq "$T_DIR/$db.db" "SELECT count(*) FROM stack_profile_mapping
		  WHERE name LIKE '.%';")" "$db: no relative mapping name"
		assert_eq "8 35552 8 35552" "$(leaf_views "$T_DIR/$db.db" dlib_alloc)" \
			"$db: dlib_alloc's views"
	done
	# heapprof symbolize finds the library by its recorded path, from any
	# directory: dlib_alloc gets its source file and line.
	(cd / && "$HP" symbolize "$T_DIR/dlrel.db" >"$T_DIR/sym.out" 2>"$T_DIR/sym.err")
	assert_eq 0 "$?" "symbolize: exit status ($(head -c 300 "$T_DIR/sym.err"))"
	assert_no_match 'Could not find .*libdlib' "$(cat "$T_DIR/sym.err")" \
		"symbolize: libdlib.so found"
	assert_match '^dlib\.c\|[0-9]+$' "$(sqlq "$T_DIR/dlrel.db" "SELECT DISTINCT
	  replace(s.source_file, rtrim(s.source_file, replace(s.source_file, '/', '')), '')
	  || '|' || s.line_number
	  FROM stack_profile_frame f JOIN stack_profile_symbol s USING (symbol_set_id)
	  WHERE f.name = 'dlib_alloc' AND s.name = 'dlib_alloc';")" \
		"symbolize: dlib_alloc's file and line"
fi

# ---------------------------------------------------------------------------
t_begin "a relative library path after a chdir: from /proc/PID/maps, kept once the process is gone"
# The program changes directory, then dlopen("./libdlib.so"): the working
# directory it attached with does not lead to the library.  A named
# snapshot is written while it runs (the path comes from its maps); the
# dump at its exit, which finds a new stack in the library, must name the
# library the same way.
cat >"$T_DIR/chdl.c" <<'EOF'
#include <dlfcn.h>
#include <heapprof/heapprof.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2 || chdir(argv[1]) != 0)
		return 1;
	void *h = dlopen("./libdlib.so", RTLD_NOW);
	int (*entry)(int) = h ? (int (*)(int))dlsym(h, "dlib_entry") : NULL;
	if (!entry)
		return 2;
	entry(3);
	if (heapprof_take_named_snapshot("loaded") != 0)
		return 3;
	/* A stack first seen after the snapshot: dlib_alloc <- main. */
	void (*alloc)(void) = (void (*)(void))dlsym(h, "dlib_alloc");
	if (!alloc)
		return 4;
	alloc();
	printf("chdl: done\n");
	return 0;
}
EOF
if [ ! -f "$T_DIR/dl/libdlib.so" ] ||
	! gcc -O0 -g -I"$HERE/../../include" -o "$T_DIR/chdl" "$T_DIR/chdl.c" \
		-L"$BUILD" -lheapprof -Wl,-rpath,"$BUILD" -ldl 2>"$T_DIR/chdl.cc.err"; then
	t_fail "cannot build chdl: $(head -c 300 "$T_DIR/chdl.cc.err")"
else
	hp_record chdl -i 1 -o "$T_DIR/chdl.db" -- "$T_DIR/chdl" "$T_DIR/dl"
	assert_eq 0 "$REC_RC" "chdl: exit status" || show_err chdl
	assert_eq 2 "$(sqlq "$T_DIR/chdl.db" "SELECT count(*) FROM heapprof_dump WHERE reason != 'peak';")" \
		"two dumps: the snapshot and the end (and the peak's)"
	assert_eq "$T_REAL/dl/libdlib.so" "$(sqlq "$T_DIR/chdl.db" "SELECT group_concat(name)
	  FROM stack_profile_mapping WHERE name LIKE '%libdlib.so';")" \
		"one mapping for libdlib.so, by its absolute path"
	assert_eq "$T_REAL/dl/libdlib.so" "$(frame_mapping "$T_DIR/chdl.db" dlib_alloc)" \
		"mapping of dlib_alloc"
	assert_eq 1 "$(sqlq "$T_DIR/chdl.db" "SELECT count(*) FROM stack_profile_frame
	  WHERE name = 'dlib_alloc';")" "one frame for dlib_alloc's return address"
	# 8 x malloc(4444) through dlib_entry, 8 more from main, all live.
	assert_eq "16 71104 16 71104" "$(leaf_views "$T_DIR/chdl.db" dlib_alloc)" \
		"dlib_alloc's views, both stacks named"
	assert_eq "dlib_alloc main" "$(for cs in $(leaf_callsites "$T_DIR/chdl.db" dlib_alloc); do
		stack_of "$T_DIR/chdl.db" "$cs" | head -n 2 | tr '\n' ' '; echo; done |
		grep -v dlib_middle | sed 's/ $//')" "the stack first seen at the end"
fi

# ---------------------------------------------------------------------------
t_begin "--unwind fp on code without frame pointers: the report says so"
mkdir -p "$T_DIR/fp"
if ! gcc -O2 -fomit-frame-pointer -g -o "$T_DIR/fp/nofp" "$HERE/progs/nofp.c" \
	2>"$T_DIR/fp.cc.err"; then
	t_fail "cannot build nofp: $(head -c 200 "$T_DIR/fp.cc.err")"
else
	note='stacks +[0-9.]+ frames deep on average: the program was likely built without frame pointers; use the default --unwind dwarf'
	hp_record fpno -i 1 --unwind fp -o "$T_DIR/fpno.db" -- "$T_DIR/fp/nofp"
	assert_eq 13 "$REC_RC" "nofp under --unwind fp: exit status" || show_err fpno
	"$HP" report "$T_DIR/fpno.db" >"$T_DIR/fpno.report" 2>&1
	assert_match "$note" "$(cat "$T_DIR/fpno.report")" "the note under --unwind fp"
	# The same program unwound with DWARF: full stacks, no note.
	hp_record fpdw -i 1 -o "$T_DIR/fpdw.db" -- "$T_DIR/fp/nofp"
	"$HP" report "$T_DIR/fpdw.db" >"$T_DIR/fpdw.report" 2>&1
	assert_no_match 'frames deep on average' "$(cat "$T_DIR/fpdw.report")" \
		"no note with --unwind dwarf"
	# A program with frame pointers (-O0) under --unwind fp: no note.
	hp_record fpyes -i 1 --unwind fp -o "$T_DIR/fpyes.db" -- "$PROGS/known"
	"$HP" report "$T_DIR/fpyes.db" >"$T_DIR/fpyes.report" 2>&1
	assert_no_match 'frames deep on average' "$(cat "$T_DIR/fpyes.report")" \
		"no note for a program with frame pointers"
fi

# ---------------------------------------------------------------------------
# Rust: rustc -g builds tests/integration/progs/rust_names.rs here.
RUSTC=$(command -v rustc 2>/dev/null || true)
t_begin "Rust: demangled names in the report, flame graph, pprof and SQL"
if [ -z "$RUSTC" ]; then
	t_skip "skipped: rustc not installed (scripts/deps.sh --test installs it)"
else
	mkdir -p "$T_DIR/rs"
	if ! "$RUSTC" -g -o "$T_DIR/rs/rust_names" "$HERE/progs/rust_names.rs" \
		2>"$T_DIR/rs.cc.err"; then
		t_fail "rustc failed: $(head -c 300 "$T_DIR/rs.cc.err")"
	else
		db="$T_DIR/rs.db"
		hp_record rs -i 1 -o "$db" -- "$T_DIR/rs/rust_names"
		assert_eq 0 "$REC_RC" "rust_names: exit status" || show_err rs
		assert_eq 12704 "$(cat "$T_DIR/rs.out")" "rust_names: its output"
		# The program's own functions, by their Rust paths.
		for fn in rust_names::store::table::fill rust_names::store::build \
			rust_names::main; do
			assert_eq 1 "$(sqlq "$db" "SELECT count(DISTINCT f.name) FROM stack_profile_frame f
			  WHERE f.name = '$fn';")" "a frame named $fn"
		done
		# The Vec growth path of std (its path varies with rustc:
		# alloc::raw_vec::finish_grow, <alloc::raw_vec::RawVecInner>::finish_grow).
		assert_ge "$(sqlq "$db" "SELECT count(*) FROM stack_profile_frame
		  WHERE name GLOB '*alloc::raw_vec::*finish_grow*';")" 1 \
			"a frame named alloc::raw_vec::...finish_grow"
		# No mangled name, no hash, no data symbol.
		assert_eq "" "$(sqlq "$db" "SELECT f.name FROM stack_profile_frame f
		  JOIN stack_profile_mapping m ON f.mapping = m.id
		  WHERE m.name LIKE '%/rust_names' AND (f.name GLOB '_ZN*' OR f.name GLOB '_R*'
		    OR f.name GLOB '*::h[0-9a-f][0-9a-f][0-9a-f][0-9a-f]*'
		    OR f.name GLOB '*\$LT\$*' OR f.name LIKE 'rust_metadata_%') LIMIT 5;")" \
			"no mangled or hashed names"
		# The rows are allocated under fill <- build <- main.
		assert_ge "$(sqlq "$db" "SELECT count(*) FROM stack_profile_callsite c
		  JOIN stack_profile_frame f ON c.frame_id = f.id
		  JOIN stack_profile_callsite c1 ON c.parent_id = c1.id
		  JOIN stack_profile_frame f1 ON c1.frame_id = f1.id
		  JOIN stack_profile_callsite c2 ON c1.parent_id = c2.id
		  JOIN stack_profile_frame f2 ON c2.frame_id = f2.id
		  WHERE f.name = 'rust_names::store::table::fill'
		    AND f1.name = 'rust_names::store::build'
		    AND f2.name = 'rust_names::main';")" 1 "fill <- build <- main"
		"$HP" report "$db" --view alloc_space --top 50 >"$T_DIR/rs.report" 2>&1
		rep=$(cat "$T_DIR/rs.report")
		assert_match 'rust_names::store::table::fill' "$rep" "report: fill"
		assert_match 'alloc::raw_vec::[^ ]*finish_grow' "$rep" "report: finish_grow"
		assert_no_match '::h[0-9a-f]{16}|_ZN|rust_metadata_' "$rep" "report: no hash, mangled name or data symbol"
		"$HP" flamegraph "$db" -o "$T_DIR/rs.html" >/dev/null 2>&1
		assert_ge "$(grep -c 'rust_names::store::table::fill' "$T_DIR/rs.html")" 1 \
			"flame graph: fill"
		assert_eq 0 "$(grep -Ec '::h[0-9a-f]{16}|rust_metadata_' "$T_DIR/rs.html")" \
			"flame graph: no hash or data symbol"
		"$HP" pprof "$db" -o "$T_DIR/rs.pb.gz" >/dev/null 2>&1
		assert_eq 1 "$(zcat "$T_DIR/rs.pb.gz" | grep -a -c 'rust_names::store::table::fill')" \
			"pprof: fill in the string table"
		assert_eq 0 "$(zcat "$T_DIR/rs.pb.gz" | grep -a -Ec '::h[0-9a-f]{16}|rust_metadata_')" \
			"pprof: no hash or data symbol"
		# heapprof symbolize: DWARF names (rustc nests every function in
		# its module's namespace, where dwarf_getscopes does not look),
		# and fill's lines: its two push calls.
		"$HP" symbolize "$db" >"$T_DIR/rs.sym.out" 2>"$T_DIR/rs.sym.err"
		assert_eq 0 "$?" "symbolize: exit status ($(head -c 300 "$T_DIR/rs.sym.err"))"
		src="$HERE/progs/rust_names.rs"
		want="$(grep -n 'row.push(j as u64)' "$src" | cut -d: -f1) $(grep -n 'rows.push(row)' "$src" | cut -d: -f1)"
		assert_eq "$want" "$(sqlq "$db" "SELECT DISTINCT s.line_number FROM stack_profile_frame f
		  JOIN stack_profile_symbol s USING (symbol_set_id)
		  WHERE s.name = 'rust_names::store::table::fill' AND s.source_file LIKE '%rust_names.rs'
		  ORDER BY 1;" | tr '\n' ' ' | sed 's/ $//')" "symbolize: fill's lines"
		assert_eq 0 "$(sqlq "$db" "SELECT count(*) FROM stack_profile_frame f
		  JOIN stack_profile_symbol s USING (symbol_set_id)
		  JOIN stack_profile_mapping m ON f.mapping = m.id
		  WHERE m.name LIKE '%/rust_names' AND s.name IS NULL;")" \
			"symbolize: every source location of the program has a function"
		assert_ge "$(sqlq "$db" "SELECT count(*) FROM stack_profile_symbol
		  WHERE name = 'alloc::vec::Vec<T,A>::push';")" 1 "symbolize: Vec::push inlined"
		ts=$(sqlq "$db" "SELECT max(ts) FROM heapprof_dump;")
		assert_eq 1 "$("$HP" sql "$db" "SELECT count(*) AS n FROM
		  experimental_flamegraph($ts, 1, 'native')
		  WHERE name = 'rust_names::store::table::fill';" --csv | tail -n1)" \
			"SQL: experimental_flamegraph names fill"
	fi
fi

t_begin "Rust with std as a shared library: no frame named after rust_metadata_"
if [ -z "$RUSTC" ]; then
	t_skip "skipped: rustc not installed (scripts/deps.sh --test installs it)"
else
	sysroot_lib="$("$RUSTC" --print sysroot)/lib"
	if ! "$RUSTC" -g -C prefer-dynamic -o "$T_DIR/rs/rust_names_dyn" \
		"$HERE/progs/rust_names.rs" 2>"$T_DIR/rsd.cc.err"; then
		t_fail "rustc -C prefer-dynamic failed: $(head -c 300 "$T_DIR/rsd.cc.err")"
	else
		db="$T_DIR/rsd.db"
		LD_LIBRARY_PATH="$sysroot_lib:$sysroot_lib/rustlib/x86_64-unknown-linux-gnu/lib" \
			hp_record rsd -i 1 -o "$db" -- "$T_DIR/rs/rust_names_dyn"
		assert_eq 0 "$REC_RC" "rust_names_dyn: exit status" || show_err rsd
		nstd=$(sqlq "$db" "SELECT count(*) FROM stack_profile_frame f
		  JOIN stack_profile_mapping m ON f.mapping = m.id WHERE m.name LIKE '%/libstd-%';")
		assert_ge "$nstd" 1 "frames in libstd-*.so"
		assert_eq 0 "$(sqlq "$db" "SELECT count(*) FROM stack_profile_frame
		  WHERE name LIKE 'rust_metadata_%';")" "no frame named rust_metadata_*"
		assert_eq 1 "$(sqlq "$db" "SELECT count(DISTINCT name) FROM stack_profile_frame
		  WHERE name = 'rust_names::store::table::fill';")" "fill named"
	fi
fi

t_summary
