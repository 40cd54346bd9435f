#!/bin/sh
# The quick start's first command (make demo): profile the bundled example,
# print its report and say where the profile is.
set -e
BUILD=${1:-build}
OUT=${DEMO_OUT:-heapprof.demo.db}
rm -f "$OUT"
echo "== heapprof record -o $OUT -- $BUILD/examples/demo"
"$BUILD/heapprof" record -o "$OUT" -- "$BUILD/examples/demo"
echo
echo "== heapprof report $OUT"
"$BUILD/heapprof" report "$OUT"
echo
echo "The profile is $OUT (a SQLite database). Try:"
echo "  $BUILD/heapprof report $OUT --view alloc_space"
echo "  $BUILD/heapprof sql $OUT \"select * from heapprof_dump\""
