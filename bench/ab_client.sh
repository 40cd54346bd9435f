#!/bin/bash
# bench/ab_client.sh BUILD OLD_LIB [NEW_LIB]: two client libraries under the
# same `heapprof record` (HEAPPROF_LIB), interleaved: bare, old and new at
# the default interval and at -i 1, BENCH_AB_RUNS (3) times per workload,
# one line per run ("workload mode run seconds"), then the medians.  For
# before/after numbers of a change to the client (docs/PERFORMANCE.md).
# The inputs are the ones `make bench` generated (BUILD/bench-work).
# Environment: BENCH_AB_WORKLOADS (default: malloc1 sqlite3 cc1 perl python3).
set -u
B=$(cd "${1:?usage: bench/ab_client.sh BUILD OLD_LIB [NEW_LIB]}" && pwd)
OLD=${2:?usage: bench/ab_client.sh BUILD OLD_LIB [NEW_LIB]}
NEW=${3:-$B/libheapprof.so.1}
HERE=$(cd "$(dirname "$0")" && pwd)
W=$B/bench-work
R=$B/bench/runone
CC1=$(gcc -print-prog-name=cc1)
for f in "$OLD" "$NEW" "$R" "$B/heapprof" "$W/sql-200000.sql" "$W/big-300.c"; do
	[ -e "$f" ] || { echo "ab_client: $f is missing (run make bench once)" >&2; exit 2; }
done
out=$(mktemp)
trap 'rm -f "$out" "$out.db"' EXIT
for w in ${BENCH_AB_WORKLOADS:-malloc1 sqlite3 cc1 perl python3}; do
	case $w in
	malloc1) cmd=("$B/bench/mallocbench" 1 4000000) ;;
	sqlite3) cmd=(/usr/bin/sqlite3 :memory: ".read $W/sql-200000.sql") ;;
	cc1) cmd=("$CC1" -quiet -O1 "$W/big-300.c" -o /dev/null) ;;
	perl) cmd=(/usr/bin/perl "$HERE/alloc.pl" 10) ;;
	python3) cmd=(/usr/bin/python3 -s "$HERE/alloc.py" 8) ;;
	*) echo "ab_client: unknown workload $w" >&2; exit 2 ;;
	esac
	for ((r = 1; r <= ${BENCH_AB_RUNS:-3}; r++)); do
		for m in bare old-def new-def old-i1 new-i1; do
			case $m in
			bare) pre=() ;;
			old-def) pre=(env "HEAPPROF_LIB=$OLD" "$B/heapprof" record -o "$out.db" --) ;;
			new-def) pre=(env "HEAPPROF_LIB=$NEW" "$B/heapprof" record -o "$out.db" --) ;;
			old-i1) pre=(env "HEAPPROF_LIB=$OLD" "$B/heapprof" record -i 1 -o "$out.db" --) ;;
			new-i1) pre=(env "HEAPPROF_LIB=$NEW" "$B/heapprof" record -i 1 -o "$out.db" --) ;;
			esac
			rm -f "$out.db"
			secs=$(PYTHONHASHSEED=0 PYTHONMALLOC=malloc PERL_HASH_SEED=0 \
				"$R" -- "${pre[@]}" "${cmd[@]}" 2>&1 >/dev/null |
				sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' | tail -n 1)
			echo "$w $m $r $secs" | tee -a "$out"
		done
	done
done
echo "medians:"
awk '{ k = $1 " " $2; v[k] = v[k] " " $4 } END { for (k in v) print k, v[k] }' "$out" |
	sort | while read -r w m vals; do
	med=$(tr ' ' '\n' <<<"$vals" | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
	echo "$w $m $med"
done
