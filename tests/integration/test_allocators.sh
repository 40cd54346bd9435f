#!/usr/bin/env bash
# test_allocators.sh BUILD: other allocators and odd sizes (issue 19,
# item 3).
#
#   jemalloc   progs/alloc_tiny's 1,000,000 blocks of 8 bytes under
#              Debian's libjemalloc2 (LD_PRELOAD), -i 1: none dropped as
#              "live table full" (jemalloc packs them 16 to 128 bytes; the
#              table's buckets took 128 bytes of address space each and
#              overflowed at a fifth of its size), every one exact; the
#              report says glibc's mallinfo2 does not apply (it read 0 B)
#   glibc      the same program on glibc's malloc: nothing dropped, and the
#              mallinfo2 rows are there
#   zero       progs/alloc_zero's 10 malloc(0) and 5 new char[0]: recorded
#              as asked (0 B) and counted (zero_size_allocations), and the
#              report says so
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$PROGS/alloc_tiny" "$PROGS/alloc_zero"

stat_of() {
	sqlq "$1" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$2';"
}

JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
N=1000000

t_begin "jemalloc: 1,000,000 tiny blocks at -i 1, none dropped; mallinfo2 said not to apply"
if [ ! -e "$JEMALLOC" ]; then
	t_skip "$JEMALLOC is missing (apt-get install libjemalloc2)"
else
	# jemalloc goes to the program only (the heapprof command may be a
	# sanitizer build, whose runtime must come first): the shell adds it
	# after record's own library and execs the program (followed).
	hp_record jemalloc -i 1 --follow-exec -o "$T_DIR/jemalloc.db" -- \
		sh -c 'LD_PRELOAD="$LD_PRELOAD:$1" exec "$2" "$3"' sh "$JEMALLOC" "$PROGS/alloc_tiny" $N
	db="$T_DIR/jemalloc.db"
	if assert_eq 0 "$REC_RC" "record's exit status" &&
		assert_eq $N "$(cat "$T_DIR/jemalloc.out")" "the program's output"; then
		assert_eq 0 "$(stat_of "$db" live_table_full)" "live_table_full"
		check_views "$db" tiny_alloc $N $((8 * N)) $N $((8 * N))
		"$HP" report "$db" >"$T_DIR/jemalloc.report" 2>&1
		assert_match "malloc in use +- +does not apply: the program's malloc is not glibc's" \
			"$(cat "$T_DIR/jemalloc.report")" "the report's mallinfo2 rows"
		if grep -q 'mallinfo2: blocks in use' "$T_DIR/jemalloc.report"; then
			t_fail "the report shows glibc's mallinfo2 figures for a jemalloc program"
		fi
	fi
fi

t_begin "glibc: the same blocks, none dropped; mallinfo2's figures shown"
hp_record glibc -i 1 -o "$T_DIR/glibc.db" -- "$PROGS/alloc_tiny" $N
db="$T_DIR/glibc.db"
if assert_eq 0 "$REC_RC" "record's exit status"; then
	assert_eq 0 "$(stat_of "$db" live_table_full)" "live_table_full"
	check_views "$db" tiny_alloc $N $((8 * N)) $N $((8 * N))
	"$HP" report "$db" >"$T_DIR/glibc.report" 2>&1
	assert_match 'malloc in use +[0-9.]+ MiB .* mallinfo2: blocks in use' \
		"$(cat "$T_DIR/glibc.report")" "the report's mallinfo2 rows"
fi

t_begin "zero: allocations of 0 bytes recorded as asked and counted"
hp_record zero -i 1 -o "$T_DIR/zero.db" -- "$PROGS/alloc_zero"
db="$T_DIR/zero.db"
if assert_eq 0 "$REC_RC" "record's exit status"; then
	check_views "$db" zero_malloc 10 0 0 0
	check_views "$db" zero_new 5 0 0 0
	check_views "$db" some_alloc 3 48 3 48
	assert_eq 15 "$(stat_of "$db" zero_size_allocations)" "zero_size_allocations"
	assert_match 'zero-size +15 allocations of 0 bytes' \
		"$("$HP" report "$db" 2>&1)" "the report's zero-size line"
fi

t_summary
