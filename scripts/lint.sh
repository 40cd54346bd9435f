#!/bin/sh
# scripts/lint.sh [BUILD]: clang-tidy (checks in .clang-tidy) and cppcheck
# over the project's C code in src/, with the build's flags.  Any finding
# fails it (exit 1); each tool's findings are printed.  BUILD (default
# build) holds the generated pprof header (make BUILD=... all makes it).
# tests/unit is left out: test code that breaks rules on purpose (.c files
# included, freed twice, left uninitialized) would need a suppression per
# test; it runs under ASan+UBSan and TSan instead.
# docs/safety/sanitizers.md says what is checked and why.
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build}
TIDY=${CLANG_TIDY:-clang-tidy-14}
command -v "$TIDY" >/dev/null 2>&1 || TIDY=clang-tidy
FLAGS="-std=c11 -D_GNU_SOURCE -Isrc -Iinclude -I$BUILD/gen"
FILES=$(git ls-files 'src/*.c')
fail=0

echo "== clang-tidy ($($TIDY --version | sed -n 's/.*version \([0-9.]*\).*/\1/p' | head -n 1))"
# One file per job, as many jobs as cores (CI's time: 2 cores, half the
# wait); each file's findings kept apart and printed in the files' order.
JOBS=${LINT_JOBS:-$(nproc 2>/dev/null || echo 1)}
out_dir=$(mktemp -d "${TMPDIR:-/tmp}/heapprof-lint.XXXXXX") || exit 1
trap 'rm -rf "$out_dir"' EXIT
trap 'exit 130' INT TERM
export TIDY FLAGS out_dir
# --quiet: only findings; the "N warnings generated" chatter (from
# system headers, filtered out) goes to stderr.
printf '%s\n' $FILES | xargs -P "$JOBS" -I{} sh -c \
	'"$TIDY" --quiet "$1" -- $FLAGS 2>/dev/null >"$out_dir/$(printf %s "$1" | tr / _)"' \
	sh {}
n=0
for f in $FILES; do
	out=$(cat "$out_dir/$(printf %s "$f" | tr / _)" 2>/dev/null)
	if [ -n "$out" ]; then
		printf '%s\n' "$out"
		n=$((n + $(printf '%s\n' "$out" | grep -cE '(warning|error):')))
	fi
done
echo "clang-tidy: $n findings"
[ "$n" = 0 ] || fail=1

echo "== cppcheck ($(cppcheck --version))"
# System headers are not ours to check (missingIncludeSystem), and
# neither is protoc-c's generated header: without libprotobuf-c's
# version macro it stops at its own version #error, so it is left out
# (pprof.c is checked without it).
if ! cppcheck -q -j "$JOBS" --enable=warning,performance,portability --inline-suppr \
	--error-exitcode=1 --std=c11 -D_GNU_SOURCE -D__linux__ -D__x86_64__ \
	-D__GNUC__ -Isrc -Iinclude \
	--suppress=missingIncludeSystem \
	--template='{file}:{line}: {severity}: {message} [{id}]' \
	$FILES; then
	fail=1
	echo "cppcheck: findings (above)"
else
	echo "cppcheck: 0 findings"
fi
[ "$fail" = 0 ] && echo "lint: clean"
exit "$fail"
