#!/usr/bin/env bash
# test_startup.sh BUILD: allocations made before heapprof's constructor
# attached (issue 19, item 1; src/client/early.c).
#
#   ctor       libsrc/startup_lib.c's constructor allocates before ours
#              runs (the loader initializes the program's libraries before
#              LD_PRELOAD'ed ones): its blocks are in the profile, exact
#              (also at the default interval: they are kept before any
#              interval is known), with stacks through the loader's
#              _dl_init, frees before the attach matched, and the counters
#              say how many came before the attach
#   overflow   40,000 blocks before the attach, more than heapprof keeps
#              (32,768): the rest are counted, and the report says so
#   churn      100,000 malloc/free pairs before the attach: kept up to the
#              room, exact, in linear time
#   dlsym      blocks of a library constructor that heapprof's own
#              constructor frees (glibc's dlsym error): freed in the profile
#   cxx        a C++ program: libstdc++'s emergency pool, allocated by its
#              constructor, is in the profile
#   heaptrack  `-i 1` allocation counts equal heaptrack's on real programs
#              (apt-cache --version and show bash, git, python3, a C++
#              program, a Rust one built with Debian's rustc when it is
#              installed, and the ctor program), less heaptrack's own libstdc++ pool
#              where the program does not load libstdc++ itself; skipped
#              without heaptrack.  apt-cache show's own count moves from
#              run to run: its startup allocations exact, its total within
#              0.05%
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP"

stat_of() {
	sqlq "$1" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$2';"
}

SLIB="$T_DIR/libstartup_lib.so"
SPROG="$T_DIR/startup_main"
if ! gcc -shared -fPIC -O0 -g -fno-inline -o "$SLIB" "$HERE/libsrc/startup_lib.c" 2>"$T_DIR/sl.cc.err" ||
	! gcc -std=gnu11 -O0 -g -fno-inline -o "$SPROG" "$HERE/libsrc/startup_main.c" \
		-Wl,--no-as-needed -L"$T_DIR" -lstartup_lib -Wl,-rpath,"$T_DIR" 2>>"$T_DIR/sl.cc.err"; then
	t_begin "build startup_main"
	t_fail "cannot build: $(head -c 300 "$T_DIR/sl.cc.err")"
	t_summary
fi

# The library's blocks, n = 100 (startup_lib.c): sl_ctor_alloc is a
# calloc(100, 8) that stays and 100 x malloc(100), 40 freed in the
# constructor; sl_ctor_calloc one calloc(10, 40); sl_ctor_realloc a
# malloc(64) that realloc makes 640 (the first counts as freed).
check_ctor_blocks() {
	local db=$1
	check_views "$db" sl_ctor_alloc 101 10800 61 6800
	check_views "$db" sl_ctor_calloc 1 400 1 400
	check_views "$db" sl_ctor_realloc 2 704 1 640
}

for mode in i1 default; do
	t_begin "ctor ($mode): a library constructor's blocks before the attach, exact, with their stacks"
	opts=()
	[ "$mode" = i1 ] && opts=(-i 1)
	bare_run "ctor-$mode" "$SPROG"
	hp_record "ctor-$mode" "${opts[@]}" -o "$T_DIR/ctor-$mode.db" -- "$SPROG"
	db="$T_DIR/ctor-$mode.db"
	if assert_eq 0 "$REC_RC" "record's exit status" &&
		assert_eq "live 62" "$(cat "$T_DIR/ctor-$mode.out")" "the program's output"; then
		check_ctor_blocks "$db"
		# main's own, after the attach: sampled as usual
		[ "$mode" = i1 ] && check_views "$db" main_alloc 10 500 10 500
		# 101 + 1 + 2: every allocation before the attach is the
		# library's; none was lost.
		assert_eq 104 "$(stat_of "$db" startup_recorded)" "startup_recorded"
		assert_eq 0 "$(stat_of "$db" startup_missed)" "startup_missed"
		for cs in $(leaf_callsites "$db" sl_ctor_alloc); do
			st=$(stack_of "$db" "$cs" | tr '\n' ' ')
			case " $st " in
			*" sl_ctor_alloc sl_ctor "*" _dl_init "*) ;;
			*) t_fail "sl_ctor_alloc's stack does not go through the constructor and _dl_init: $st" ;;
			esac
		done
		"$HP" report "$db" >"$T_DIR/ctor-$mode.report" 2>&1
		grep -q '^  before attach  104 allocations made before heapprof.s constructor' \
			"$T_DIR/ctor-$mode.report" ||
			t_fail "the report does not say 104 allocations came before the attach: $(grep 'before attach' "$T_DIR/ctor-$mode.report")"
	fi
done

# More than the 32,768 blocks heapprof keeps before the attach: 40,001
# allocations in sl_ctor_alloc and 3 more after them; the first 32,768
# are kept (the calloc and 32,767 mallocs, of which the first 16,000 are
# freed), the other 7,236 counted.
t_begin "overflow: blocks past what is kept before the attach are counted and reported"
STARTUP_LIB_BLOCKS=40000 hp_record overflow -i 1 -o "$T_DIR/overflow.db" -- "$SPROG"
db="$T_DIR/overflow.db"
if assert_eq 0 "$REC_RC" "record's exit status"; then
	assert_eq 32768 "$(stat_of "$db" startup_recorded)" "startup_recorded"
	assert_eq 7236 "$(stat_of "$db" startup_missed)" "startup_missed"
	check_views "$db" sl_ctor_alloc 32768 $((320000 + 32767 * 100)) 16768 $((320000 + 16767 * 100))
	assert_eq 0 "$(leaf_rows "$db" sl_ctor_calloc)" "rows of sl_ctor_calloc (past the room)"
	"$HP" report "$db" >"$T_DIR/overflow.report" 2>&1
	grep -q '; 7236 not recorded (more than heapprof keeps before it attaches' "$T_DIR/overflow.report" ||
		t_fail "the report does not count what was not kept: $(grep 'before attach' "$T_DIR/overflow.report")"
fi

# 100,000 x free(malloc(32)) in the constructor after its 104 blocks: the
# first 32,664 are kept (each freed at once), the rest counted; a free
# takes its block out of the table (a cluster that only grew made this
# loop quadratic: 3 s where bare takes 1 ms).
t_begin "churn: malloc/free in a loop before the attach, kept up to the room, exact"
STARTUP_LIB_CHURN=100000 hp_record churn -i 1 -o "$T_DIR/churn.db" -- "$SPROG"
db="$T_DIR/churn.db"
if assert_eq 0 "$REC_RC" "record's exit status"; then
	check_ctor_blocks "$db"
	check_views "$db" sl_ctor_churn 32664 $((32664 * 32)) 0 0
	assert_eq 32768 "$(stat_of "$db" startup_recorded)" "startup_recorded"
	assert_eq $((100000 - 32664)) "$(stat_of "$db" startup_missed)" "startup_missed"
fi

# A library constructor's failed dlsym leaves glibc's error blocks for the
# thread's next dlsym, which comes in heapprof's own constructor, after
# blocks stopped being kept: that free must still count (they were shown
# live at exit).
t_begin "dlsym: blocks allocated before the attach and freed by heapprof's constructor are freed"
STARTUP_LIB_DLSYM=1 hp_record dlsym -i 1 -o "$T_DIR/dlsym.db" -- "$SPROG"
db="$T_DIR/dlsym.db"
if assert_eq 0 "$REC_RC" "record's exit status"; then
	check_ctor_blocks "$db"
	read -r ao as o s <<<"$(incl_views "$db" sl_ctor_dlsym)"
	assert_ge "$ao" 1 "allocations under sl_ctor_dlsym"
	assert_eq "0 0" "$o $s" "objects and space under sl_ctor_dlsym at exit"
fi

# A C++ program: libstdc++ allocates its emergency exception pool in its
# constructor, before ours.
CXXPROG="$T_DIR/startup_cxx"
t_begin "cxx: libstdc++'s emergency pool, allocated before the attach, is in the profile"
if ! printf '%s\n' '#include <string>' '#include <vector>' '#include <cstdio>' \
	'int main() { std::vector<std::string> v; for (int i = 0; i < 100; i++) v.push_back(std::string(40, 120)); std::printf("%zu\n", v.size()); }' |
	g++ -x c++ -O0 -g -o "$CXXPROG" - 2>"$T_DIR/cxx.cc.err"; then
	t_fail "cannot build: $(head -c 300 "$T_DIR/cxx.cc.err")"
else
	hp_record cxx -i 1 -o "$T_DIR/cxx.db" -- "$CXXPROG"
	db="$T_DIR/cxx.db"
	if assert_eq 0 "$REC_RC" "record's exit status"; then
		n=$(stat_of "$db" startup_recorded)
		[ "$n" -ge 1 ] || t_fail "startup_recorded is $n"
		# The pool's block: one allocation of at least 64 KiB whose
		# stack passes through _dl_init.
		got=$(sqlq "$db" "WITH RECURSIVE up(leaf, id, n) AS (
		    SELECT DISTINCT a.callsite_id, a.callsite_id, 0 FROM heap_profile_allocation a
		    WHERE a.count > 0 AND a.size >= 65536
		    UNION ALL SELECT up.leaf, c.parent_id, up.n + 1 FROM up
		    JOIN stack_profile_callsite c ON c.id = up.id
		    WHERE c.parent_id IS NOT NULL AND up.n < 100)
		  SELECT count(DISTINCT up.leaf) FROM up JOIN stack_profile_callsite c ON c.id = up.id
		  JOIN stack_profile_frame f ON f.id = c.frame_id WHERE f.name = '_dl_init';")
		assert_eq 1 "$got" "blocks of 64 KiB or more allocated under _dl_init (libstdc++'s pool)"
	fi
fi

# Allocation counts against heaptrack's (heaptrack_print's "calls to
# allocation functions"), -i 1.  heaptrack's own library brings
# libstdc++, whose pool heaptrack counts: one more than ours when the
# program does not load libstdc++ itself.
ht_calls() {
	rm -f "$T_DIR"/ht.*
	run_bounded 120 heaptrack -o "$T_DIR/ht" "$@" >/dev/null 2>&1 || return 1
	local f
	f=$(ls "$T_DIR"/ht.* 2>/dev/null | head -n 1)
	[ -n "$f" ] || return 1
	heaptrack_print "$f" 2>/dev/null | sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p'
}

loads_libstdcxx() {
	ldd "$1" 2>/dev/null | grep -q 'libstdc++'
}

# ht_case TAG RUNS CMD...: equal counts.  A program whose own count moves
# from run to run (apt-cache's varies by a few dozen) gets RUNS tries of
# each, interleaved: some run of ours must equal some run of heaptrack's.
ht_case() {
	local tag=$1 runs=$2
	shift 2
	t_begin "heaptrack: $tag: -i 1 counts every allocation heaptrack counts"
	if ! command -v heaptrack >/dev/null 2>&1 || ! command -v heaptrack_print >/dev/null 2>&1; then
		t_skip "heaptrack is not installed (apt-get install heaptrack)"
		return
	fi
	if [ ! -x "$1" ]; then
		t_skip "$1 is not installed"
		return
	fi
	local extra=1 want got wants="" gots="" i
	loads_libstdcxx "$1" && extra=0
	for i in $(seq "$runs"); do
		want=$(ht_calls "$@")
		if [ -z "$want" ]; then
			t_fail "heaptrack gave no count for $*"
			return
		fi
		hp_record "ht-$tag" -i 1 -o "$T_DIR/ht-$tag.db" -- "$@"
		got=$(stat_of "$T_DIR/ht-$tag.db" samples)
		wants="$wants $((want - extra))"
		gots="$gots $got"
		case " $wants " in *" $got "*) return 0 ;; esac
		case " $gots " in *" $((want - extra)) "*) return 0 ;; esac
	done
	t_fail "allocations: ours$gots, heaptrack's less its own pool ($extra)$wants"
}

ht_case ctor 1 "$SPROG"
ht_case cxx 1 "$CXXPROG"
ht_case apt-cache-version 1 /usr/bin/apt-cache --version
# apt-cache show bash: its count moves between runs (ours by 3, under
# heaptrack by up to 125: heaptrack's own timer thread allocates in the
# process too), so not to the allocation; what the issue saw missing,
# the 13 allocations of its libraries' constructors, is checked exactly.
t_begin "heaptrack: apt-cache-show: the allocations before the attach, and the total within 0.05%"
if ! command -v heaptrack >/dev/null 2>&1 || ! command -v heaptrack_print >/dev/null 2>&1; then
	t_skip "heaptrack is not installed (apt-get install heaptrack)"
elif [ ! -x /usr/bin/apt-cache ]; then
	t_skip "/usr/bin/apt-cache is not installed"
else
	hp_record apt-show -i 1 -o "$T_DIR/apt-show.db" -- /usr/bin/apt-cache show bash
	hp_record apt-version -i 1 -o "$T_DIR/apt-version.db" -- /usr/bin/apt-cache --version
	early=$(stat_of "$T_DIR/apt-version.db" startup_recorded)
	assert_ge "$early" 1 "apt-cache --version: allocations before the attach"
	assert_eq "$early" "$(stat_of "$T_DIR/apt-show.db" startup_recorded)" \
		"apt-cache show: allocations before the attach (as --version's)"
	want=$(ht_calls /usr/bin/apt-cache show bash)
	got=$(stat_of "$T_DIR/apt-show.db" samples)
	if [ -z "$want" ]; then
		t_fail "heaptrack gave no count"
	elif [ $(((got > want ? got - want : want - got) * 2000)) -gt "$want" ]; then
		t_fail "allocations: ours $got, heaptrack's $want: more than 0.05% apart"
	fi
fi
# A Rust program built with Debian's rustc (strings, a vector, a map).
RPROG="$T_DIR/startup_rust"
if [ -x /usr/bin/rustc ]; then
	cat >"$T_DIR/startup_rust.rs" <<'RS'
use std::collections::HashMap;
fn build(n: usize) -> Vec<String> { (0..n).map(|i| format!("item-{}", i)).collect() }
fn main() {
    let v = build(1000);
    let mut m = HashMap::new();
    for s in &v { m.insert(s.clone(), s.len()); }
    println!("{} {}", v.len(), m.len());
}
RS
	/usr/bin/rustc -g -o "$RPROG" "$T_DIR/startup_rust.rs" 2>"$T_DIR/rust.cc.err" || rm -f "$RPROG"
fi
if [ -x /usr/bin/rustc ] && [ ! -x "$RPROG" ]; then
	t_begin "heaptrack: rust: build"
	t_fail "rustc failed: $(head -c 300 "$T_DIR/rust.cc.err")"
fi
ht_case rust 1 "$RPROG"
ht_case git 1 /usr/bin/git --version
ht_case python3 1 /usr/bin/python3 -c pass

t_summary
