#!/bin/sh
# The quick start's first command (make demo): profile the bundled example,
# print its report, write its flame graph page and say where they are.
set -e
BUILD=${1:-build}
OUT=${DEMO_OUT:-heapprof.demo.db}
HTML=${OUT%.db}.html
rm -f "$OUT" "$HTML"
echo "== heapprof record -o $OUT -- $BUILD/examples/demo"
"$BUILD/heapprof" record -o "$OUT" -- "$BUILD/examples/demo"
echo
echo "== heapprof report $OUT"
"$BUILD/heapprof" report "$OUT"
echo
echo "== heapprof flamegraph $OUT -o $HTML"
"$BUILD/heapprof" flamegraph "$OUT" -o "$HTML"
echo
echo "The profile is $OUT (a SQLite database); its flame graph is $HTML"
echo "(one file, works offline: open it in a browser). Try:"
echo "  $BUILD/heapprof report $OUT --view alloc_space"
echo "  $BUILD/heapprof pprof $OUT && go tool pprof -top ${OUT%.db}.pb.gz"
echo "  $BUILD/heapprof sql $OUT \"select * from heapprof_dump\""
