#!/bin/sh
# Runs every fuzzer built by `make fuzz` for SECONDS each (default 30) on a
# scratch copy of its seed corpus (fuzz/corpus/NAME; the repository's
# corpus is never written), one after the other, and prints per fuzzer the
# executions, the seconds, the corpus it ended with and the crashes
# (crash, leak, timeout and out-of-memory reports).  Harnesses that
# write profiles do so under the scratch directory ($TMPDIR).  Exits 1 if any
# fuzzer found one; its input is kept in BUILD/fuzz/artifacts/.
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
printf '%-8s %12s %8s %8s %8s\n' fuzzer execs seconds corpus crashes
for n in $names; do
	bin=$build/fuzz/fuzz_$n
	if [ ! -x "$bin" ]; then
		echo "heapprof: fuzz: $bin is not built (make fuzz)" >&2
		fail=1
		continue
	fi
	mkdir -p "$work/$n"
	cp fuzz/corpus/"$n"/* "$work/$n/" 2>/dev/null
	before=$(ls "$art" | grep -c "^$n-" || true)
	# -timeout: an input that takes 10 s is a hang; -rss_limit_mb: one
	# that needs 2 GiB is an out-of-memory bug.
	t0=$(date +%s)
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	  -print_final_stats=1 -artifact_prefix="$art/$n-" \
	  "$work/$n" >"$work/$n.log" 2>&1
	rc=$?
	took=$(($(date +%s) - t0))
	after=$(ls "$art" | grep -c "^$n-" || true)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$n.log")
	crashes=$((after - before))
	[ $rc -ne 0 ] && [ $crashes -eq 0 ] && crashes=1
	printf '%-8s %12s %8s %8s %8s\n' "$n" "${execs:-?}" "${took:-?}" \
	  "$(ls "$work/$n" | wc -l)" "$crashes"
	if [ $crashes -ne 0 ]; then
		fail=1
		cp "$work/$n.log" "$art/$n.log"
		grep -m3 -E 'ERROR|SUMMARY|runtime error' "$work/$n.log" >&2
		echo "heapprof: fuzz: $n failed; log $art/$n.log" >&2
	fi
done
exit $fail
