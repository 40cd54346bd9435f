#!/bin/sh
# Runs every fuzzer built by `make fuzz` for SECONDS each (default 30) on a
# scratch copy of its seed corpus (fuzz/corpus/NAME; the repository's
# corpus is never written), as many at once as there are cores, and
# prints per fuzzer the executions, the seconds, the corpus it ended with
# and the crashes (crash, leak, timeout and out-of-memory reports).
# Harnesses that write profiles do so under the scratch directory
# ($TMPDIR).  Exits 1 if any fuzzer found one; its input is kept in
# BUILD/fuzz/artifacts/.
#   scripts/fuzz.sh BUILD [SECONDS [NAME...]]
set -u
build=${1:-build}
secs=${2:-30}
[ $# -ge 2 ] && shift 2 || shift $#
names=${*:-$(ls fuzz/fuzz_*.c | sed 's|fuzz/fuzz_||; s|\.c$||')}
art=$build/fuzz/artifacts
mkdir -p "$art"
# In memory when it can be: the harnesses write profiles with SQLite.
scratch=${TMPDIR:-/tmp}
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && scratch=/dev/shm
work=$(mktemp -d "$scratch/heapprof-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
# The harnesses' profiles go there too (gone even after a crash).
export TMPDIR=$work
fail=0
# One fuzzer per core at a time (FUZZ_JOBS): each runs for SECONDS of
# wall time whatever else runs, so 2 cores halve the stage's time.
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
# one NAME: runs it and writes its row (and 1 if it failed) to $work/NAME.res.
one() {
	n=$1
	bin=$build/fuzz/fuzz_$n
	if [ ! -x "$bin" ]; then
		echo "heapprof: fuzz: $bin is not built (make fuzz)" >&2
		echo "$n - - - 1" >"$work/$n.res"
		return
	fi
	mkdir -p "$work/$n"
	cp fuzz/corpus/"$n"/* "$work/$n/" 2>/dev/null
	# -timeout: an input that takes 10 s is a hang; -rss_limit_mb: one
	# that needs 2 GiB is an out-of-memory bug.  Artifacts are named
	# by the fuzzer, so parallel runs do not share a name.
	t0=$(date +%s)
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	  -print_final_stats=1 -artifact_prefix="$art/$n-" \
	  "$work/$n" >"$work/$n.log" 2>&1
	rc=$?
	took=$(($(date +%s) - t0))
	crashes=$(ls "$art" | grep -c "^$n-" || true)
	crashes=$((crashes - $(cat "$work/$n.before")))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$n.log")
	[ $rc -ne 0 ] && [ $crashes -eq 0 ] && crashes=1
	echo "$n ${execs:-?} ${took:-?} $(ls "$work/$n" | wc -l) $crashes" >"$work/$n.res"
}
for n in $names; do
	ls "$art" | grep -c "^$n-" >"$work/$n.before" || true
done
i=0
for n in $names; do
	one "$n" &
	i=$((i + 1))
	[ $((i % jobs)) -eq 0 ] && wait
done
wait
printf '%-8s %12s %8s %8s %8s\n' fuzzer execs seconds corpus crashes
for n in $names; do
	read -r name execs took corpus crashes <"$work/$n.res" ||
		{ name=$n execs=? took=? corpus=? crashes=1; }
	printf '%-8s %12s %8s %8s %8s\n' "$name" "$execs" "$took" "$corpus" "$crashes"
	if [ "$crashes" != 0 ]; then
		fail=1
		[ -f "$work/$n.log" ] || continue
		cp "$work/$n.log" "$art/$n.log"
		grep -m3 -E 'ERROR|SUMMARY|runtime error' "$work/$n.log" >&2
		echo "heapprof: fuzz: $n failed; log $art/$n.log" >&2
	fi
done
exit $fail
