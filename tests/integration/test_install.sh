#!/usr/bin/env bash
# test_install.sh BUILD: `make install` / `make uninstall` of BUILD into a
# prefix under the test dir, and a program built the way a user builds
# one: `cc prog.c $(pkg-config --cflags --libs heapprof)`.  The installed
# files and links, heapprof.pc's flags and version, the library's soname;
# examples/pool.c built against the prefix runs bare exactly as it should
# (its line on stdout, nothing on stderr, exit 0) and, under the installed
# `heapprof record -i 1 --all-heaps`, gives the exact counts of its heap;
# a program both linked with -lheapprof and preloaded by `heapprof record`
# maps one copy of the library (same soname), also when the two are found
# under different paths; DESTDIR stages without changing the prefix;
# uninstall leaves no file behind.
#
# make runs with `-o all`: install ships what BUILD holds (built by the
# caller), it never rebuilds it from a source tree that may be mid-edit.
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/heapprofd" "$BUILD/libheapprof.so" \
	"$BUILD/libheapprof.so.1" "$BUILD/examples/pool" "$ROOT/heapprof.pc.in"

# Nothing of a surrounding session or build may leak in: no preload, no
# library override, a private (empty) daemon socket dir, and no make
# jobserver of a calling make.
unset LD_PRELOAD HEAPPROF_LIB PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR \
	MAKEFLAGS MFLAGS MAKELEVEL
export XDG_RUNTIME_DIR="$T_DIR/xdg"
mkdir -m 700 "$XDG_RUNTIME_DIR"

PREFIX="$T_DIR/prefix"
POOL_LINE="pool: 1000 nodes, 250 tokens kept, 3+1 chunks, 200 names"
CC=${CC:-cc}

# hp_make TAG TARGET VAR=VALUE...: make in the source tree, bounded;
# output in $T_DIR/TAG.make; status in MAKE_RC.
hp_make() {
	local tag=$1
	shift
	MAKE_RC=0
	run_bounded 120 make -C "$ROOT" --no-print-directory -o all \
		BUILD="$BUILD" "$@" >"$T_DIR/$tag.make" 2>&1 || MAKE_RC=$?
	[ "$MAKE_RC" = 0 ] || sed -e 's/^/    | /' "$T_DIR/$tag.make" | tail -n 15 >&2
}

# soname FILE / needed FILE / runpath FILE: from the dynamic section.
soname() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p'; }
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' | grep heapprof; }
runpath() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }

# Every file and link under DIR, relative, sorted.
tree_of() { (cd "$1" 2>/dev/null && find . \( -type f -o -type l \) | sort); }

# ---------------------------------------------------------------------------
t_begin "build dir: versioned library, link, API programs use its soname"
assert_eq libheapprof.so.1 "$(soname "$BUILD/libheapprof.so.1")" "soname of $BUILD/libheapprof.so.1"
[ -L "$BUILD/libheapprof.so" ] || t_fail "$BUILD/libheapprof.so is not a symbolic link"
assert_eq libheapprof.so.1 "$(readlink "$BUILD/libheapprof.so")" "$BUILD/libheapprof.so points to"
assert_eq libheapprof.so.1 "$(needed "$BUILD/examples/pool")" "DT_NEEDED of examples/pool"
bare_run bpool "$BUILD/examples/pool"
assert_eq 0 "$BARE_RC" "examples/pool from the build dir (rpath \$ORIGIN/..): exit status"
assert_eq "$POOL_LINE" "$(cat "$T_DIR/bpool.bare.out")" "examples/pool from the build dir: stdout"

# ---------------------------------------------------------------------------
t_begin "make install PREFIX: the files, links and pkg-config file"
hp_make install install PREFIX="$PREFIX"
assert_eq 0 "$MAKE_RC" "make install status"
# The per-ABI tree record preloads through (Makefile, ABI_FILES), where
# the build has one.
ABI=""
if [ -e "$BUILD/heapprof-abi/lib/x86_64-linux-gnu/libheapprof.so.1" ]; then
	ABI="./lib/heapprof-abi/lib/i386-linux-gnu/libheapprof.so.1
./lib/heapprof-abi/lib/x86_64-linux-gnu/libheapprof.so.1
./lib/heapprof-abi/lib32/libheapprof.so.1
"
	[ -e "$BUILD/heapprof-abi/lib/i386-linux-gnu/libheapprof.so.1" ] ||
		ABI="./lib/heapprof-abi/lib/x86_64-linux-gnu/libheapprof.so.1
"
fi
EXPECT_FILES="./bin/heapprof
./bin/heapprofd
./include/heapprof/heap_profile.h
./include/heapprof/heapprof.h
${ABI}./lib/libheapprof.so
./lib/libheapprof.so.1
./lib/pkgconfig/heapprof.pc
./lib/systemd/system/heapprof-serve@.service
./share/bash-completion/completions/heapprof
./share/bash-completion/completions/heapprofd
./share/man/man1/heapprof-check.1
./share/man/man1/heapprof-daemon.1
./share/man/man1/heapprof-diff.1
./share/man/man1/heapprof-dump.1
./share/man/man1/heapprof-flamegraph.1
./share/man/man1/heapprof-pprof.1
./share/man/man1/heapprof-record.1
./share/man/man1/heapprof-report.1
./share/man/man1/heapprof-serve.1
./share/man/man1/heapprof-snapshot.1
./share/man/man1/heapprof-sql.1
./share/man/man1/heapprof-symbolize.1
./share/man/man1/heapprof-top.1
./share/man/man1/heapprof.1
./share/man/man3/heap_profile.h.3
./share/man/man8/heapprofd.8
./share/zsh/site-functions/_heapprof"
assert_eq "$EXPECT_FILES" "$(tree_of "$PREFIX")" "installed files"
assert_eq heapprof "$(readlink "$PREFIX/bin/heapprofd")" "bin/heapprofd link"
assert_eq libheapprof.so.1 "$(readlink "$PREFIX/lib/libheapprof.so")" "lib/libheapprof.so link"
if [ ! -f "$PREFIX/lib/libheapprof.so.1" ] || [ -L "$PREFIX/lib/libheapprof.so.1" ]; then
	t_fail "lib/libheapprof.so.1 is not a plain file"
fi
assert_eq libheapprof.so.1 "$(soname "$PREFIX/lib/libheapprof.so.1")" "installed soname"
cmp -s "$BUILD/libheapprof.so.1" "$PREFIX/lib/libheapprof.so.1" ||
	t_fail "lib/libheapprof.so.1 differs from $BUILD/libheapprof.so.1"
cmp -s "$BUILD/heapprof" "$PREFIX/bin/heapprof" || t_fail "bin/heapprof differs from $BUILD/heapprof"
for h in heap_profile.h heapprof.h; do
	cmp -s "$ROOT/include/heapprof/$h" "$PREFIX/include/heapprof/$h" ||
		t_fail "include/heapprof/$h differs from the source"
done
assert_eq "755 755 644 644" \
	"$(stat -c %a "$PREFIX/bin/heapprof" "$PREFIX/lib/libheapprof.so.1" \
		"$PREFIX/include/heapprof/heap_profile.h" "$PREFIX/lib/pkgconfig/heapprof.pc" | tr '\n' ' ' | sed 's/ $//')" \
	"modes of heapprof, libheapprof.so.1, heap_profile.h, heapprof.pc"
assert_no_match '@[A-Z]+@' "$(cat "$PREFIX/lib/pkgconfig/heapprof.pc")" "heapprof.pc has no placeholder left"
assert_match "^prefix=$PREFIX\$" "$(cat "$PREFIX/lib/pkgconfig/heapprof.pc")" "heapprof.pc prefix"

VERSION=$("$PREFIX/bin/heapprof" version | awk '{print $2}')
assert_match '^[0-9]+\.[0-9]+\.[0-9]+' "$VERSION" "installed heapprof version"

t_begin "man pages: installed, read by groff without a warning, rendered by man -l, every option of each --help text in its page"
MANDIR="$PREFIX/share/man"
if ! command -v groff >/dev/null 2>&1 || ! command -v man >/dev/null 2>&1; then
	t_skip "groff or man is missing (apt-get install groff-base man-db)"
else
	for page in "$MANDIR"/man1/*.1 "$MANDIR"/man3/heap_profile.h.3 "$MANDIR"/man8/heapprofd.8; do
		w=$(groff -man -ww -z "$page" 2>&1)
		assert_eq "" "$w" "groff -man -ww: $(basename "$page")"
		out=$(MANWIDTH=100 man -l "$page" 2>&1)
		assert_match "^NAME" "$(printf '%s\n' "$out" | sed -n 3p)" "man -l $(basename "$page") renders"
	done
	# Each command's page holds every option its --help names (the page
	# is made from it: this catches a line the generator lost).
	for c in record report pprof flamegraph diff check symbolize sql daemon dump snapshot top serve; do
		text=$(MANWIDTH=200 man -l "$MANDIR/man1/heapprof-$c.1" 2>&1 | tr -s ' ' | sed 's/‐//g')
		miss=""
		for o in $("$PREFIX/bin/heapprof" "$c" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
			printf '%s\n' "$text" | grep -qF -- "$o" || miss="$miss $o"
		done
		assert_eq "" "$miss" "heapprof-$c(1): the options of heapprof $c --help"
	done
	for f in AHeapInfo_create AHeapInfo_setEnabledCallback AHeapInfo_setDisabledCallback \
		AHeapProfile_registerHeap AHeapProfile_reportAllocation AHeapProfile_reportSample \
		AHeapProfile_reportFree AHeapProfileEnableCallbackInfo_getSamplingInterval; do
		assert_match "$f" "$(MANWIDTH=300 man -l "$MANDIR/man3/heap_profile.h.3" 2>&1 | sed 's/‐//g')" "heap_profile.h(3): $f"
	done
fi

t_begin "completion: bash's complete and zsh's for heapprof rec<TAB>, report --vi<TAB>, their values, options and files; bash's -p and -n"
# complete_words WORD...: what the installed bash completion offers for
# the last word (the one being completed), one per line, sorted.
complete_words() {
	PATH="$PREFIX/bin:$PATH" bash -c '
		. "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_heapprof
		printf "%s\n" "${COMPREPLY[@]}" | sort' \
		sh "$PREFIX/share/bash-completion/completions/heapprof" "$@"
}
assert_match "^complete -F _heapprof heapprof" \
	"$(bash -c '. "$1"; complete -p heapprof' sh "$PREFIX/share/bash-completion/completions/heapprof")" \
	"bash: complete -F _heapprof for heapprof"
assert_eq "record" "$(complete_words heapprof rec)" "heapprof rec<TAB>"
assert_eq "--view" "$(complete_words heapprof report --vi)" "heapprof report --vi<TAB>"
assert_eq "alloc_objects
alloc_space" "$(complete_words heapprof report x.db --view al)" "heapprof report --view al<TAB>"
assert_eq "--no-follow-exec
--no-memory-dumps
--no-peak
--no-running
--no-startup" "$(complete_words heapprof record --no-)" "heapprof record --no-<TAB>: from its --help"
assert_eq "peak" "$(complete_words heapprof flamegraph x.db --dump pe)" "heapprof flamegraph --dump pe<TAB>"
assert_eq "$$" "$(complete_words heapprof top -p "$$" | grep -x "$$")" "heapprof top -p PID<TAB>: running pids"
assert_eq "bash" "$(complete_words heapprof top -n bas | grep -x bash)" "heapprof top -n NAME<TAB>: running names"
mkdir -p "$T_DIR/cw"
: >"$T_DIR/cw/a.db"
: >"$T_DIR/cw/b.txt"
assert_eq "$T_DIR/cw/a.db" "$(complete_words heapprof report "$T_DIR/cw/")" "heapprof report <TAB>: profiles (*.db)"
# zsh_words LINE: the line as zsh's completion leaves it after LINE<TAB>.
zsh_words() {
	rm -f "$T_DIR/zsh.out"
	PATH="$PREFIX/bin:$PATH" zsh -f "$(dirname "$0")/zsh_complete.zsh" \
		"$PREFIX/share/zsh/site-functions" "$T_DIR/zsh.out" "$1" >/dev/null 2>&1
	cat "$T_DIR/zsh.out" 2>/dev/null
}
if command -v zsh >/dev/null 2>&1; then
	zsh -n "$PREFIX/share/zsh/site-functions/_heapprof"
	assert_eq 0 "$?" "zsh -n _heapprof"
	assert_eq "heapprof record " "$(zsh_words "heapprof rec")" "zsh: heapprof rec<TAB>"
	assert_eq "heapprof report --view " "$(zsh_words "heapprof report --vi")" "zsh: heapprof report --vi<TAB>"
	assert_eq "heapprof report x.db --view alloc_space " "$(zsh_words "heapprof report x.db --view alloc_s")" "zsh: --view alloc_s<TAB>"
	assert_eq "heapprof flamegraph x.db --dump peak " "$(zsh_words "heapprof flamegraph x.db --dump pe")" "zsh: --dump pe<TAB>"
	assert_eq "heapprof report $T_DIR/cw/a.db " "$(zsh_words "heapprof report $T_DIR/cw/")" "zsh: heapprof report DIR/<TAB>: profiles (*.db)"
	assert_eq "heapprof record --no-peak " "$(zsh_words "heapprof record --no-p")" "zsh: heapprof record --no-p<TAB>: from its --help"
else
	t_skip "zsh is missing (apt-get install zsh): its completion not driven"
fi
assert_match "^#compdef heapprof heapprofd" "$(head -n 1 "$PREFIX/share/zsh/site-functions/_heapprof")" "zsh: #compdef"

t_begin "the serve agent's systemd unit: installed with its prefix, systemd-analyze verify and security"
UNIT="$PREFIX/lib/systemd/system/heapprof-serve@.service"
assert_match "^ExecStart=$PREFIX/bin/heapprof serve -n %i " "$(grep '^ExecStart=' "$UNIT")" "ExecStart: the installed heapprof"
if ! command -v systemd-analyze >/dev/null 2>&1; then
	t_skip "systemd-analyze is missing (apt-get install systemd)"
else
	# An instance of the template, as systemctl would name it.
	cp "$UNIT" "$T_DIR/heapprof-serve@myapp.service"
	out=$(systemd-analyze verify --man=no "$T_DIR/heapprof-serve@myapp.service" 2>&1)
	assert_eq "0 " "$? $out" "systemd-analyze verify: no complaint"
	sec=$(systemd-analyze security --offline=yes "$T_DIR/heapprof-serve@myapp.service" 2>&1 | tail -n 1)
	level=$(printf '%s\n' "$sec" | sed -n 's/.*: \([0-9.]*\) .*/\1/p')
	assert_match "^[0-9.]+$" "$level" "systemd-analyze security: an exposure level ($sec)"
	t_note "systemd-analyze security: $sec"
	assert_le "${level:-10}" 4.0 "systemd-analyze security: exposure at most 4.0 (OK)"
fi

t_begin "pkg-config: version and flags of the installed heapprof.pc"
if ! command -v pkg-config >/dev/null 2>&1; then
	t_fail "pkg-config is missing (scripts/deps.sh --test installs pkgconf)"
else
	export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
	assert_eq "$VERSION" "$(pkg-config --modversion heapprof 2>&1)" "pkg-config --modversion = heapprof version"
	assert_eq "-I$PREFIX/include" "$(pkg-config --cflags heapprof 2>&1 | sed 's/ *$//')" "pkg-config --cflags"
	assert_eq "-L$PREFIX/lib -lheapprof" "$(pkg-config --libs heapprof 2>&1 | sed 's/ *$//')" "pkg-config --libs"
fi

# ---------------------------------------------------------------------------
# examples/pool.c built as a user would, against the prefix only (the
# source tree's include/ is not on the command line).
IPOOL="$T_DIR/pool"
t_begin "examples/pool.c built with pkg-config: links libheapprof.so.1"
# shellcheck disable=SC2046
if "$CC" -std=gnu11 -O1 -g -fno-inline -o "$IPOOL" "$ROOT/examples/pool.c" \
	$(pkg-config --cflags --libs heapprof) -Wl,-rpath,"$PREFIX/lib" \
	>"$T_DIR/cc.out" 2>&1; then
	assert_eq libheapprof.so.1 "$(needed "$IPOOL")" "DT_NEEDED of the built pool"
	assert_eq "$PREFIX/lib" "$(runpath "$IPOOL")" "RUNPATH of the built pool"
	assert_match "libheapprof\.so\.1 => $PREFIX/lib/libheapprof\.so\.1 " \
		"$(ldd "$IPOOL" 2>&1)" "ld.so finds the installed library"
else
	t_fail "cc with pkg-config flags failed: $(head -c 600 "$T_DIR/cc.out")"
fi

t_begin "pool linked with -lheapprof, nothing profiling it: its line, empty stderr, exit 0"
if [ -x "$IPOOL" ]; then
	bare_run ipool "$IPOOL"
	assert_eq 0 "$BARE_RC" "exit status"
	assert_eq "$POOL_LINE" "$(cat "$T_DIR/ipool.bare.out")" "stdout"
	assert_eq "" "$(cat "$T_DIR/ipool.bare.err")" "stderr"
else
	t_fail "no pool binary"
fi

t_begin "installed heapprof record -i 1 --all-heaps: exact counts of example.pool"
PDB="$T_DIR/pool.db"
if [ -x "$IPOOL" ]; then
	HP="$PREFIX/bin/heapprof" hp_record ipool -i 1 --all-heaps -o "$PDB" -- "$IPOOL"
	assert_eq 0 "$REC_RC" "record status" || show_err ipool
	assert_eq "$POOL_LINE" "$(cat "$T_DIR/ipool.out")" "stdout under the profiler"
	db_valid "$PDB" && {
		# heap: allocations, bytes allocated, objects live, bytes live.
		HEAP_SQL="SELECT heap_name || ' ' ||
		    sum(CASE WHEN count > 0 THEN count ELSE 0 END) || ' ' ||
		    sum(CASE WHEN size > 0 THEN size ELSE 0 END) || ' ' ||
		    sum(count) || ' ' || sum(size)
		  FROM heap_profile_allocation GROUP BY heap_name ORDER BY heap_name"
		got=$(HP="$PREFIX/bin/heapprof" hp_sql_csv "$PDB" "$HEAP_SQL")
		assert_match '^example\.pool 1500 64000 1250 56000$' "$got" \
			"example.pool: 1500 allocations, 64000 B, 1250 / 56000 B live (heapprof sql)"
		# libc.malloc is there too: make_names and pool_grow, exact.
		assert_match '^libc\.malloc ' "$got" "libc.malloc next to it"
		check_views "$PDB" make_names 200 20000 200 20000
		check_views "$PDB" pool_grow 4 65536 4 65536
		# The pool's objects are charged to pool_alloc, the API's caller.
		check_views "$PDB" pool_alloc 1500 64000 1250 56000
	}
else
	t_fail "no pool binary"
fi

# ---------------------------------------------------------------------------
# A program linked with -lheapprof and preloaded by `heapprof record`:
# ld.so matches the DT_NEEDED name against the preloaded library's soname,
# so one copy is mapped (two would mean two hook sets and two clients).
# It prints the libheapprof files it maps and reports one block.
t_begin "linked and preloaded: one copy of the library"
MAPS_C="$T_DIR/maps.c"
MAPS="$T_DIR/maps"
cat >"$MAPS_C" <<'EOF'
#include <heapprof/heap_profile.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	uint32_t h = AHeapProfile_registerHeap(AHeapInfo_create("test.maps"));
	AHeapProfile_reportAllocation(h, 0x1000, 100);
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	while (f && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		if (path && strstr(path, "libheapprof"))
			fputs(path, stdout);
	}
	return 0;
}
EOF
# shellcheck disable=SC2046
if "$CC" -std=gnu11 -O1 -g -o "$MAPS" "$MAPS_C" \
	$(pkg-config --cflags --libs heapprof) -Wl,-rpath,"$PREFIX/lib" \
	>"$T_DIR/cc2.out" 2>&1; then
	bare_run maps "$MAPS"
	assert_eq "$PREFIX/lib/libheapprof.so.1" "$(sort -u "$T_DIR/maps.bare.out")" "bare: mapped from the prefix"
	# The installed heapprof preloads $PREFIX/lib/libheapprof.so.
	MDB="$T_DIR/maps.db"
	HP="$PREFIX/bin/heapprof" hp_record maps -i 1 --all-heaps -o "$MDB" -- "$MAPS"
	assert_eq 0 "$REC_RC" "record status" || show_err maps
	assert_eq "$PREFIX/lib/libheapprof.so.1" "$(sort -u "$T_DIR/maps.out")" \
		"installed heapprof record: one library mapped"
	assert_eq "1 100" "$(sqlq "$MDB" "SELECT sum(count) || ' ' || sum(size)
	  FROM heap_profile_allocation WHERE heap_name = 'test.maps';")" \
		"test.maps: one block of 100 B, counted once"
	# The build's heapprof preloads $BUILD/libheapprof.so.1, while the
	# program's rpath leads to the prefix: the preloaded one serves both.
	MDB2="$T_DIR/maps2.db"
	hp_record maps2 -i 1 --all-heaps -o "$MDB2" -- "$MAPS"
	assert_eq 0 "$REC_RC" "record status (build's heapprof)" || show_err maps2
	assert_eq "$(readlink -f "$BUILD/libheapprof.so.1")" "$(sort -u "$T_DIR/maps2.out")" \
		"build's heapprof record: only the preloaded library mapped"
	assert_eq "1 100" "$(sqlq "$MDB2" "SELECT sum(count) || ' ' || sum(size)
	  FROM heap_profile_allocation WHERE heap_name = 'test.maps';")" \
		"test.maps through the build's library: one block of 100 B"
else
	t_fail "cc of maps.c failed: $(head -c 600 "$T_DIR/cc2.out")"
fi

# ---------------------------------------------------------------------------
t_begin "make install DESTDIR: staged under DESTDIR, prefix without it"
STAGE="$T_DIR/stage"
hp_make stage install DESTDIR="$STAGE" PREFIX=/opt/hp
assert_eq 0 "$MAKE_RC" "make install DESTDIR status"
assert_eq "$(printf '%s\n' "$EXPECT_FILES" | sed 's|^\./|./opt/hp/|')" "$(tree_of "$STAGE")" "staged files"
assert_match '^prefix=/opt/hp$' "$(cat "$STAGE/opt/hp/lib/pkgconfig/heapprof.pc" 2>/dev/null)" "staged heapprof.pc prefix"
hp_make unstage uninstall DESTDIR="$STAGE" PREFIX=/opt/hp
assert_eq 0 "$MAKE_RC" "make uninstall DESTDIR status"
assert_eq "" "$(tree_of "$STAGE")" "nothing left in the stage"

# ---------------------------------------------------------------------------
t_begin "make uninstall PREFIX: no heapprof file left"
# Something of another package in the shared directories stays.
: >"$PREFIX/lib/pkgconfig/other.pc"
: >"$PREFIX/bin/other"
hp_make uninstall uninstall PREFIX="$PREFIX"
assert_eq 0 "$MAKE_RC" "make uninstall status"
assert_eq "./bin/other
./lib/pkgconfig/other.pc" "$(tree_of "$PREFIX")" "files left: only the other package's"
[ -d "$PREFIX/include/heapprof" ] && t_fail "include/heapprof is still there"
hp_make uninstall2 uninstall PREFIX="$PREFIX"
assert_eq 0 "$MAKE_RC" "a second make uninstall succeeds"

t_summary
