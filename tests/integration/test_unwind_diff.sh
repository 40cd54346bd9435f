#!/usr/bin/env bash
# test_unwind_diff.sh BUILD: the unwind oracle's differential test.
#
# libheapprof-oracle.so is the client built with -DHP_UNWIND_ORACLE
# (src/client/oracle.c): after every capture it unwinds again with libgcc's
# _Unwind_Backtrace, compares, and at exit prints
#   heapprof: unwind oracle: N captures, E exact, M mismatches, S skipped
# (then the first mismatches, frame by frame).  Each progs/ud_* program
# stresses what a stack capture with caches gets wrong: C++ exceptions,
# longjmp/siglongjmp, swapcontext coroutines, alloca, recursion past
# --max-frames, allocating signal handlers (also on an alternate stack, and
# one that interrupted the sigreturn trampoline), frames probed a page at a
# time (-fstack-clash-protection),
# threads, plugins dlopened and dlclosed over and over (also a different
# one where the first was), tail calls at -O2.  For each, under
# `HEAPPROF_LIB=libheapprof-oracle.so heapprof record -i 1`:
#   * the exit status and stdout are the bare run's
#   * the oracle line says 0 mismatches, and it checked at least as many
#     captures as the program counted allocations ("allocations N")
#   * its "count FUNC ao as o s" lines equal the profile (check_counts)
#   * each "caller FUNC PARENT" line: every callsite whose leaf is FUNC has
#     PARENT as its second frame; each "stack FUNC F1 .." line: its first
#     frames are those (tail calls)
#   * nothing was reentrant_skipped or nested_recorded (the oracle
#     allocates nothing) and no unwind failed
# Lines a program prints to stderr (numbers that depend on timing) count
# too.  HEAPPROF_UD_ONLY=exc,deep runs some of the programs.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
ORACLE="$BUILD/libheapprof-oracle.so"
t_require "$HP" "$ORACLE" "$PROGS/ud_exc" "$PROGS/ud_jmp" "$PROGS/ud_coro" \
	"$PROGS/ud_alloca" "$PROGS/ud_deep" "$PROGS/ud_signal" "$PROGS/ud_threads" \
	"$PROGS/ud_dlopen" "$PROGS/ud_tail" "$PROGS/ud_sigtramp" "$PROGS/ud_probe"

ORACLE_RE='^heapprof: unwind oracle: ([0-9]+) captures, ([0-9]+) exact, ([0-9]+) mismatches, ([0-9]+) skipped$'
HP_TIMEOUT=60

# stat_of DB NAME: a counter of heapprof_process_stats (0 without a row).
stat_of() {
	sqlq "$1" "SELECT coalesce(sum(value), 0) FROM heapprof_process_stats WHERE name = '$2';"
}

# callers_of DB FUNC: the distinct names of the second frame of the
# callsites with rows whose leaf frame is FUNC ("-" for none: a one-frame
# stack), one a line; through `heapprof sql` on Perfetto's tables.
callers_of() {
	hp_sql_csv "$1" "SELECT DISTINCT coalesce(pf.name, '-')
	  FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  LEFT JOIN stack_profile_callsite p ON p.id = c.parent_id
	  LEFT JOIN stack_profile_frame pf ON pf.id = p.frame_id
	  WHERE f.name = '$(sql_quote "$2")' ORDER BY 1;" | sed 's/^"\(.*\)"$/\1/'
}

# ud_case NAME [RECORD_OPTS] -- CMD [ARGS]: the checks above; the profile
# stays in $T_DIR/NAME.db.  Returns 1 when the run itself went wrong.
ud_case() {
	local name=$1
	shift
	local opts=()
	while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	t_begin "$name: the capture equals libgcc's unwind; counts and callers exact"
	bare_run "$name" "$@"
	HEAPPROF_LIB="$ORACLE" hp_record "$name" -i 1 "${opts[@]}" -o "$T_DIR/$name.db" -- "$@"
	assert_eq "$BARE_RC" "$REC_RC" "exit status under the oracle (bare: $BARE_RC)" || {
		show_err "$name"
		return 1
	}
	if ! cmp -s "$T_DIR/$name.bare.out" "$T_DIR/$name.out"; then
		t_fail "stdout differs under the profiler: $(diff "$T_DIR/$name.bare.out" "$T_DIR/$name.out" | head -n 10 | tr '\n' ' ')"
	fi
	db_valid "$T_DIR/$name.db" || return 1

	# What the program says about itself, from stdout and stderr.
	local facts="$T_DIR/$name.facts"
	grep -hE '^(count|caller|stack|allocations) ' "$T_DIR/$name.out" "$T_DIR/$name.err" >"$facts"
	local allocs
	allocs=$(sed -n 's/^allocations \([0-9]*\)$/\1/p' "$facts" | head -n1)
	assert_ne "" "$allocs" "the program's 'allocations N' line" || return 1

	# The oracle's verdict: one line.
	local lines cap ex mis sk
	lines=$(grep -E '^heapprof: unwind oracle: [0-9]+ captures' "$T_DIR/$name.err")
	assert_eq 1 "$(printf '%s\n' "$lines" | grep -cE "$ORACLE_RE")" \
		"one oracle line on stderr: $lines" || {
		show_err "$name"
		return 1
	}
	read -r cap ex mis sk <<<"$(printf '%s\n' "$lines" | sed -E "s/$ORACLE_RE/\1 \2 \3 \4/")"
	if ! assert_eq 0 "$mis" "mismatches between the capture and libgcc's unwind ($lines)"; then
		# The kept mismatches' differing frames (all of them in
		# $T_DIR/NAME.err, with HEAPPROF_TEST_KEEP=1).
		grep -E '^heapprof: (  !|unwind oracle: mismatch)' "$T_DIR/$name.err" |
			head -n 30 | sed -e 's/^/    | /' >&2
	fi
	assert_ge "$cap" "$allocs" "captures checked >= the program's allocations"
	assert_eq "$cap" "$((ex + mis + sk))" "captures = exact + mismatches + skipped"
	[ "$sk" = 0 ] || t_note "$name: $sk captures skipped (not unwound by the capture)"
	t_note "$name: $cap captures, $ex exact, $mis mismatches, $sk skipped"

	check_counts "$name" "$T_DIR/$name.db" "$facts"
	local fn parent want got
	while read -r _ fn parent; do
		got=$(callers_of "$T_DIR/$name.db" "$fn" | tr '\n' '|' | sed 's/|$//')
		assert_eq "$parent" "$got" "callers of $fn in the profile"
	done < <(grep '^caller ' "$facts")
	local cs n
	while read -r _ fn want; do
		n=$(($(printf '%s\n' "$want" | wc -w) + 1))
		got=$(leaf_callsites "$T_DIR/$name.db" "$fn")
		assert_ne "" "$got" "callsites of $fn" || continue
		for cs in $got; do
			assert_eq "$fn $want" \
				"$(stack_of "$T_DIR/$name.db" "$cs" | head -n "$n" | tr '\n' ' ' | sed 's/ $//')" \
				"first $n frames of callsite $cs of $fn"
		done
	done < <(grep '^stack ' "$facts")
	assert_eq 0 "$(stat_of "$T_DIR/$name.db" reentrant_skipped)" \
		"reentrant_skipped (an allocation under the recorder: the oracle or the unwinder allocated)"
	assert_eq 0 "$(stat_of "$T_DIR/$name.db" nested_recorded)" \
		"nested_recorded (an allocation under the recorder: the oracle or the unwinder allocated)"
	assert_eq 0 "$(stat_of "$T_DIR/$name.db" unwind_errors)" "unwind_errors"
	return 0
}

# HEAPPROF_UD_ONLY=exc,deep: only those programs (ud_NAME).
want_case() {
	[ -z "${HEAPPROF_UD_ONLY:-}" ] && return 0
	case ",$HEAPPROF_UD_ONLY," in *",$1,"*) return 0 ;; esac
	return 1
}

# ---------------------------------------------------------------------------
# C++ exceptions through allocating frames, allocations in landing pads, in
# catch blocks and right after.
want_case exc && ud_case exc -- "$PROGS/ud_exc"

# longjmp, siglongjmp out of a signal handler, siglongjmp without one.
want_case jmp && ud_case jmp -- "$PROGS/ud_jmp"

# swapcontext coroutines on 64 KiB stacks from malloc and mmap.
want_case coro && ud_case coro -- "$PROGS/ud_coro"

# alloca and VLAs in allocating frames.
want_case alloca && ud_case alloca -- "$PROGS/ud_alloca"

# Recursion 60 and 100 deep: cut at the default 64 frames (the oracle then
# compares the first 64), and whole with --max-frames 200.
if want_case deep; then
	if ud_case deep -- "$PROGS/ud_deep"; then
		assert_ge "$(stat_of "$T_DIR/deep.db" truncated_stacks)" 1 \
			"truncated_stacks at the default --max-frames"
	fi
	if ud_case deep-200 --max-frames 200 -- "$PROGS/ud_deep"; then
		assert_eq 0 "$(stat_of "$T_DIR/deep-200.db" truncated_stacks)" \
			"truncated_stacks with --max-frames 200"
	fi
fi

# SIGALRM every 100 us, handlers allocating on the thread's stack and on a
# 64 KiB alternate stack, interrupting code that allocates.
want_case signal && ud_case signal -- "$PROGS/ud_signal"

# A handler that interrupted the sigreturn trampoline (single-stepped
# there, at its first instruction and at its syscall, 100 times each).
want_case sigtramp && ud_case sigtramp -- "$PROGS/ud_sigtramp"

# Frames of 24 and 40 KB probed a page at a time (-fstack-clash-protection,
# as Debian builds): the CFA on r11 in the prologue, then back on rsp.
if want_case probe && ud_case probe -- "$PROGS/ud_probe"; then
	assert_eq 0 "$(stat_of "$T_DIR/probe.db" unwind_stopped)" "unwind_stopped"
fi

# 8 threads allocating through chains of their own depths.
want_case threads && ud_case threads -- "$PROGS/ud_threads"

# A plugin (libsrc/ud_dl.c, -O2 -fomit-frame-pointer) loaded, called and
# unloaded 30 times; then alternating with a differently laid out one,
# which lands where the first was.
if want_case dlopen; then
	LIBA="$T_DIR/libud_dla.so"
	LIBB="$T_DIR/libud_dlb.so"
	built=1
	for x in A B; do
		lib=$LIBA
		[ "$x" = B ] && lib=$LIBB
		if ! gcc -shared -fPIC -O2 -g -fomit-frame-pointer -DUD_$x -o "$lib" \
			"$HERE/libsrc/ud_dl.c" 2>"$T_DIR/ud_dl.cc.err"; then
			t_begin "build the ud_dl plugins"
			t_fail "cannot build $lib: $(head -c 300 "$T_DIR/ud_dl.cc.err")"
			built=0
		fi
	done
	if [ "$built" = 1 ]; then
		ud_case dlopen-same -- "$PROGS/ud_dlopen" same "$LIBA" "$LIBB"
		ud_case dlopen-swap -- "$PROGS/ud_dlopen" swap "$LIBA" "$LIBB"
	fi
fi

# Tail calls at -O2: the function that jumped is not on the stack.
if want_case tail && ud_case tail -- "$PROGS/ud_tail"; then
	for f in tc_wrap tc_fwd tc_chain1 tc_chain2 tc_czero; do
		assert_eq 0 "$(sqlq "$T_DIR/tail.db" "SELECT count(*) FROM stack_profile_frame f
		  JOIN stack_profile_callsite c ON c.frame_id = f.id WHERE f.name = '$f';")" \
			"frames of $f, which only tail-calls"
	done
fi

t_summary
