#!/usr/bin/env bash
# test_safety.sh BUILD: the target safety suite (docs/safety/safety.md).
#
# Every case is a program that does something dangerous for a profiler
# living inside it (fork, clone, signal handlers, destructors, dlclose,
# longjmp, exceptions, odd malloc calls, unusual builds).  Each case runs
# the program bare twice, then under `heapprof record` HEAPPROF_SAFETY_RUNS
# times (default 20) in each of its modes (default interval, -i 1, and for
# some -i 1 --unwind fp), every run bounded by `timeout`.  A run must end
# with the bare run's exit status, stdout and stderr (heapprof's own lines,
# which all start with "heapprof: ", are taken out of the recorded stderr
# first), and leave a profile that `heapprof report` reads.  At -i 1 the
# "count FUNC ao as o s" lines the program prints must equal the profile's
# four views of the callsites whose leaf frame is FUNC.
#
# Counted over the whole file and printed on one line at the end:
#   crash  the recorded run died of a signal (or its stderr has a sanitizer
#          report) when the bare run did not
#   hang   a run hit its timeout (status 124/137)
#   diff   another exit status, stdout or stderr than the bare run
# Any of them non-zero fails the test.
#
# Env: HEAPPROF_SAFETY_RUNS (runs per mode, default 20),
# HEAPPROF_SAFETY_TIMEOUT (seconds per run, default 60).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/safe_procs" "$PROGS/safe_threads" \
	"$PROGS/safe_dtors" "$PROGS/safe_longjmp" "$PROGS/safe_exc" \
	"$PROGS/safe_static_libgcc" "$PROGS/safe_mallocapi" "$PROGS/safe_fponly" \
	"$PROGS/safe_dlcycle"

RUNS=${HEAPPROF_SAFETY_RUNS:-20}
TMO=${HEAPPROF_SAFETY_TIMEOUT:-60}
if ! t_is_num "$RUNS" || [ "$RUNS" -lt 1 ]; then
	t_begin "HEAPPROF_SAFETY_RUNS"
	t_fail "HEAPPROF_SAFETY_RUNS must be a positive integer, got '$RUNS'"
	t_summary
fi

CASES=0
NRUNS=0
CRASHES=0
HANGS=0
DIFFS=0
SAN_RE='(AddressSanitizer|LeakSanitizer|ThreadSanitizer|UndefinedBehaviorSanitizer|runtime error:)'

# safety_case NAME WANT_STATUS MODES -- CMD [ARGS]: MODES is a comma list
# of default, i1, fp (-i 1 --unwind fp), follow (-i 1 --follow-fork).  Counts per case are checked at
# i1 and fp (not with SC_NOCOUNT=1); extra checks on the last profile of
# a mode: $T_DIR/NAME.MODE.db (and its report, NAME.MODE.report).
safety_case() {
	local name=$1 want=$2 modes=$3
	shift 4
	t_begin "$name: $RUNS runs x {$modes} == bare"
	CASES=$((CASES + 1))
	local b r mode rc fails=0 opts tag err
	# Bare, twice: the program itself must be deterministic.
	for b in 1 2; do
		rc=0
		timeout -k 5 "$TMO" "$@" >"$T_DIR/$name.bare$b.out" 2>"$T_DIR/$name.bare$b.err" </dev/null || rc=$?
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			t_fail "bare run $b timed out: $*"
			return 1
		fi
		assert_eq "$want" "$rc" "bare run $b: exit status" || return 1
	done
	if ! cmp -s "$T_DIR/$name.bare1.out" "$T_DIR/$name.bare2.out" ||
		! cmp -s "$T_DIR/$name.bare1.err" "$T_DIR/$name.bare2.err"; then
		t_fail "the program's output differs between two bare runs (not deterministic)"
		return 1
	fi
	for ((r = 1; r <= RUNS; r++)); do
		for mode in ${modes//,/ }; do
			case $mode in
			default) opts=() ;;
			i1) opts=(-i 1) ;;
			fp) opts=(-i 1 --unwind fp) ;;
			follow) opts=(-i 1 --follow-fork) ;;
			*)
				t_fail "unknown mode $mode"
				return 1
				;;
			esac
			tag="$name.$mode"
			NRUNS=$((NRUNS + 1))
			rc=0
			timeout -k 5 "$TMO" "$HP" record "${opts[@]}" -o "$T_DIR/$tag.db" -- "$@" \
				>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" </dev/null || rc=$?
			grep -v '^heapprof: ' "$T_DIR/$tag.err" >"$T_DIR/$tag.perr"
			err=""
			if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
				HANGS=$((HANGS + 1))
				err="hang (timeout ${TMO}s, status $rc)"
			elif { [ "$rc" -ge 128 ] && [ "$want" -lt 128 ]; } ||
				grep -Eq "$SAN_RE" "$T_DIR/$tag.err"; then
				CRASHES=$((CRASHES + 1))
				err="crash (status $rc)"
			elif [ "$rc" != "$want" ] ||
				! cmp -s "$T_DIR/$name.bare1.out" "$T_DIR/$tag.out" ||
				! cmp -s "$T_DIR/$name.bare1.err" "$T_DIR/$tag.perr"; then
				DIFFS=$((DIFFS + 1))
				err="output differs (status $rc, want $want): $(diff "$T_DIR/$name.bare1.out" "$T_DIR/$tag.out" | head -n 6 | tr '\n' ' ') $(diff "$T_DIR/$name.bare1.err" "$T_DIR/$tag.perr" | head -n 6 | tr '\n' ' ')"
			fi
			if [ -n "$err" ]; then
				fails=$((fails + 1))
				t_fail "run $r, $mode: $err"
				sed -e 's/^/    | /' "$T_DIR/$tag.err" | tail -n 8 >&2
				# (keep the evidence of the first failure)
				[ -e "$T_DIR/$tag.failed.db" ] || cp "$T_DIR/$tag.db" "$T_DIR/$tag.failed.db" 2>/dev/null
				# Stop repeating a case that keeps failing.
				[ "$fails" -lt 3 ] || return 1
				continue
			fi
			if ! timeout -k 5 60 "$HP" report "$T_DIR/$tag.db" >"$T_DIR/$tag.report" 2>"$T_DIR/$tag.report.err" </dev/null; then
				t_fail "run $r, $mode: heapprof report fails: $(head -c 300 "$T_DIR/$tag.report.err")"
				fails=$((fails + 1))
				continue
			fi
			if [ "$mode" != default ] && [ "${SC_NOCOUNT:-0}" != 1 ]; then
				check_counts "run $r, $mode" "$T_DIR/$tag.db" "$T_DIR/$tag.out" || fails=$((fails + 1))
			fi
			# Stop repeating a case that keeps failing.
			[ "$fails" -lt 3 ] || return 1
		done
	done
	[ "$fails" = 0 ] || return 1
	# The last profile of each mode: a valid database.
	for mode in ${modes//,/ }; do
		db_valid "$T_DIR/$name.$mode.db" || return 1
	done
	return 0
}

# ---------------------------------------------------------------------------
# Processes: fork, exec, vfork, posix_spawn, raw clone.
for m in fork forkexec vfork clonevm rawfork; do
	safety_case "procs-$m" 21 default,i1,fp -- "$PROGS/safe_procs" "$m"
done
# --follow-fork: each of the 20 children gets its own row (counts are per
# process here, so the parent-only count lines are not checked).
if SC_NOCOUNT=1 safety_case procs-fork-follow 21 follow -- "$PROGS/safe_procs" fork; then
	db="$T_DIR/procs-fork-follow.follow.db"
	assert_eq 21 "$(sqlq "$db" "SELECT count(*) FROM process;")" "processes in the profile"
	# pc_child in each child: 30 x malloc(64 (i + 1)), the 15 even i freed
	# (64 x (1 + 3 + .. + 29) = 64 x 225): live 64 x 240.
	check_views "$db" pc_child $((20 * 30)) $((20 * 64 * 465)) $((20 * 15)) $((20 * 64 * 240))
fi
# --follow-fork when a library's atfork child handler, which runs before
# the profiler's, allocates in the child.
AFLIB="$T_DIR/libsafe_atfork.so"
AFPROG="$T_DIR/safe_atfork"
if ! gcc -shared -fPIC -O1 -o "$AFLIB" "$HERE/libsrc/safe_atfork_lib.c" 2>"$T_DIR/af.cc.err" ||
	! gcc -std=gnu11 -O0 -g -fno-inline -o "$AFPROG" "$HERE/libsrc/safe_atfork_main.c" \
		-Wl,--no-as-needed -L"$T_DIR" -lsafe_atfork -Wl,-rpath,"$T_DIR" 2>>"$T_DIR/af.cc.err"; then
	t_begin "build safe_atfork"
	t_fail "cannot build: $(head -c 300 "$T_DIR/af.cc.err")"
elif SC_NOCOUNT=1 safety_case atfork-follow 29 i1,follow -- "$AFPROG"; then
	check_counts "-i 1" "$T_DIR/atfork-follow.i1.db" "$T_DIR/atfork-follow.i1.out"
	assert_eq 0 "$(leaf_rows "$T_DIR/atfork-follow.i1.db" af_child)" "af_child rows without --follow-fork"
	db="$T_DIR/atfork-follow.follow.db"
	assert_eq 6 "$(sqlq "$db" "SELECT count(*) FROM process;")" "processes with --follow-fork"
	check_views "$db" af_parent 20 6000 15 4500
	check_views "$db" af_child 50 5000 25 2500
fi
# --follow-fork cannot follow a child no atfork handler announced: it
# stays unprofiled and out of the parent's rows.
if safety_case procs-rawfork-follow 21 follow -- "$PROGS/safe_procs" rawfork; then
	assert_eq 1 "$(sqlq "$T_DIR/procs-rawfork-follow.follow.db" "SELECT count(*) FROM process;")" \
		"processes in the profile (the raw fork children are not followed)"
fi

# stack_names DB FUNC: the frames of FUNC's first callsite, leaf first,
# space separated.
stack_names() {
	local cs
	cs=$(leaf_callsites "$1" "$2" | head -n1)
	[ -n "$cs" ] || return 0
	stack_of "$1" "$cs" | tr '\n' ' ' | sed 's/ $//'
}

# ---------------------------------------------------------------------------
# Threads created and exiting at a high rate (joinable and detached), key
# destructors.
safety_case threads 22 default,i1,fp -- "$PROGS/safe_threads"

# Allocation in a signal handler, atexit, a destructor function, a C++
# static destructor, thread_local destructors.
safety_case dtors 23 default,i1,fp -- "$PROGS/safe_dtors"

# setjmp/longjmp out of deep allocating code, out of a signal handler,
# out of qsort's callback.
safety_case longjmp 24 default,i1,fp -- "$PROGS/safe_longjmp"

# C++ exceptions through allocating frames, RAII frees while unwinding.
safety_case exceptions 25 default,i1,fp -- "$PROGS/safe_exc"

# The same with the program's own static libgcc unwinder and libstdc++.
if safety_case static-libgcc 25 default,i1,fp -- "$PROGS/safe_static_libgcc"; then
	assert_no_match 'libgcc_s|libstdc' "$(ldd "$PROGS/safe_static_libgcc" 2>&1)" \
		"safe_static_libgcc uses no shared libgcc or libstdc++"
fi

# The corners of the malloc API.
safety_case mallocapi 26 default,i1,fp -- "$PROGS/safe_mallocapi"

# Frame pointers only: the program's code has no unwind tables.
if safety_case fponly 27 default,i1,fp -- "$PROGS/safe_fponly"; then
	assert_eq "fo_leaf fo_c fo_b fo_a main" \
		"$(stack_names "$T_DIR/fponly.fp.db" fo_leaf | cut -d' ' -f1-5)" \
		"fo_leaf's stack with --unwind fp"
	assert_eq "fo_leaf fo_c fo_b fo_a main" \
		"$(stack_names "$T_DIR/fponly.i1.db" fo_leaf | cut -d' ' -f1-5)" \
		"fo_leaf's stack with --unwind dwarf (no tables: the unwinder falls back to frame pointers)"
fi

# dlopen/dlclose of plugins that allocate; they are unloaded when the
# profile is written.
LIBA="$T_DIR/libsafe_dla.so"
LIBB="$T_DIR/libsafe_dlb.so"
for x in A B; do
	lib=$LIBA
	[ "$x" = B ] && lib=$LIBB
	if ! gcc -shared -fPIC -O2 -g -fno-optimize-sibling-calls -DSDL_$x -o "$lib" \
		"$HERE/libsrc/safe_dl.c" 2>"$T_DIR/dl.cc.err"; then
		t_begin "build the dlopen plugins"
		t_fail "cannot build $lib: $(head -c 300 "$T_DIR/dl.cc.err")"
	fi
done
if safety_case dlcycle 28 default,i1,fp -- "$PROGS/safe_dlcycle" together "$LIBA" "$LIBB"; then
	for f in sdla_alloc sdlb_alloc; do
		assert_eq "$f ${f%_alloc}_middle" \
			"$(stack_names "$T_DIR/dlcycle.i1.db" "$f" | cut -d' ' -f1-2)" \
			"$f's stack after its library was unloaded"
		assert_match " $f +libsafe_dl" "$(cat "$T_DIR/dlcycle.i1.report")" \
			"the report names $f and its library"
	done
fi
# Known limitation (docs/safety/safety.md): a library loaded where another
# was unloaded has the same PCs; stacks are keyed by PCs and modules by
# address, so B's allocations are recorded under A's names.  The program
# must still run unchanged; the counts are not checked.
SC_NOCOUNT=1 safety_case dlcycle-swap 28 default,i1 -- "$PROGS/safe_dlcycle" swap "$LIBA" "$LIBB"

# ---------------------------------------------------------------------------
t_end
echo "safety: cases $CASES, runs $NRUNS, crashes $CRASHES, hangs $HANGS, output differences $DIFFS"
t_begin "safety summary: 0 crashes, 0 hangs, 0 output differences"
assert_eq "0 0 0" "$CRASHES $HANGS $DIFFS" "crashes hangs differences"
t_summary
