#!/bin/bash
# scripts/deb-test.sh [OUTDIR]: the Debian package, built and tried as a
# user would (issue 34): dpkg-buildpackage -us -uc -b on a clean copy of
# the committed tree, lintian (no error), then the packages installed on
# this machine, a program profiled with the installed /usr/bin/heapprof,
# an allocator built against libheapprof-dev and profiled, the man pages
# and completion found, and the packages purged, leaving no file of
# theirs behind.  Needs root (dpkg -i); installs debhelper and lintian
# when missing.  Exit 0 when every check holds.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(realpath -m "${1:-$ROOT/build/deb}")
fails=0
ok() { echo "ok   $*"; }
bad() {
	echo "FAIL $*"
	fails=$((fails + 1))
}
check() { # DESCRIPTION CMD...: ok when CMD succeeds
	local what=$1
	shift
	if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi
}
if [ "$(id -u)" != 0 ]; then
	echo "deb-test: needs root (dpkg -i); skipped"
	exit 0
fi
# What building and checking a package needs, installed when missing
# (after an `apt-get update`: a fresh machine may have no package lists,
# and nothing else may have needed them before this).
need=""
for p in debhelper lintian dpkg-dev; do
	dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' || need="$need $p"
done
mkdir -p "$(dirname "$OUT")"
if [ -n "$need" ]; then
	echo "deb-test: installing$need"
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq $need; } >"$OUT.apt.log" 2>&1; then
		echo "deb-test: cannot install$need: $(tail -n 3 "$OUT.apt.log" | tr '\n' '|')"
		exit 1
	fi
fi
PKGS="heapprof libheapprof1 libheapprof-dev"
for p in $PKGS; do
	if dpkg -s "$p" >/dev/null 2>&1; then
		echo "deb-test: $p is installed already: not touching it"
		exit 1
	fi
done

rm -rf "$OUT"
mkdir -p "$OUT/src"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# The committed tree, as a source package would have it.
git -C "$ROOT" archive --format=tar --prefix=heapprof/ HEAD | tar -x -C "$OUT/src"
COMMIT=$(git -C "$ROOT" rev-parse --short=12 HEAD)
echo "== dpkg-buildpackage -us -uc -b (commit $COMMIT)"
if (cd "$OUT/src/heapprof" && COMMIT=$COMMIT dpkg-buildpackage -us -uc -b) >"$OUT/build.log" 2>&1; then
	ok "dpkg-buildpackage -us -uc -b builds the packages"
else
	bad "dpkg-buildpackage: $(tail -n 5 "$OUT/build.log" | tr '\n' '|')"
	exit 1
fi
ls "$OUT"/src/*.deb >/dev/null 2>&1 && mv "$OUT"/src/*.deb "$OUT"/src/*.changes "$OUT"/src/*.buildinfo "$OUT/" 2>/dev/null
echo "== lintian"
lintian --tag-display-limit 0 "$OUT"/*.changes >"$OUT/lintian.log" 2>&1
errors=$(grep -c '^E: ' "$OUT/lintian.log")
if [ "$errors" = 0 ]; then
	ok "lintian: no error ($(grep -c '^W: ' "$OUT/lintian.log") warnings)"
else
	bad "lintian: $errors errors: $(grep '^E: ' "$OUT/lintian.log" | head -n 5 | tr '\n' '|')"
fi

echo "== install"
DEBS=$(ls "$OUT"/heapprof_*.deb "$OUT"/libheapprof1_*.deb "$OUT"/libheapprof-dev_*.deb)
if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $DEBS >"$OUT/install.log" 2>&1; then
	ok "the three packages install"
else
	bad "apt-get install: $(tail -n 3 "$OUT/install.log" | tr '\n' '|')"
	exit 1
fi
# Every file the packages put on the machine (checked gone at the end).
for p in $PKGS; do dpkg -L "$p"; done | sort -u >"$W/files"
while read -r f; do [ -d "$f" ] || echo "$f"; done <"$W/files" >"$W/plain"

check "/usr/bin/heapprof version names the commit" \
	sh -c "/usr/bin/heapprof version | grep -q '(commit $COMMIT)'"
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
check "the library in the multiarch directory" test -f "/usr/lib/$MA/libheapprof.so.1"
# A program nobody here wrote, profiled with every allocation recorded.
(cd "$W" && /usr/bin/heapprof record -i 1 -o "$W/sort.db" -- sh -c 'seq 1 20000 | sort -r >/dev/null') \
	>"$W/rec.out" 2>&1
check "installed heapprof record -i 1 -- sort: a profile" test -s "$W/sort.db"
rep=$(/usr/bin/heapprof report "$W/sort.db" 2>&1)
if printf '%s\n' "$rep" | grep -q '^  heap peak ' && printf '%s\n' "$rep" | grep -q 'sort'; then
	ok "its report leads with the peak and names sort"
else
	bad "its report: $(printf '%s\n' "$rep" | head -n 6 | tr '\n' '|')"
fi
# The custom allocator API from libheapprof-dev, through pkg-config.
if cc -o "$W/pool" "$ROOT/examples/pool.c" $(pkg-config --cflags --libs heapprof) 2>"$W/cc.err"; then
	/usr/bin/heapprof record -i 1 --all-heaps -o "$W/pool.db" -- "$W/pool" >"$W/pool.out" 2>&1
	n=$(/usr/bin/heapprof sql "$W/pool.db" "SELECT count(*) FROM heap_profile_allocation WHERE heap_name = 'example.pool'" --csv 2>/dev/null | tail -n 1)
	if [ "${n:-0}" -gt 0 ] 2>/dev/null; then
		ok "examples/pool.c built with pkg-config heapprof, profiled: example.pool's rows"
	else
		bad "pool profiled: no example.pool rows ($(tail -n 3 "$W/pool.out" | tr '\n' '|'))"
	fi
else
	bad "cc examples/pool.c with pkg-config heapprof: $(head -c 300 "$W/cc.err")"
fi
check "man heapprof-record finds its page" man -w heapprof-record
check "man 3 heap_profile.h finds its page" man -w 3 heap_profile.h
check "man 8 heapprofd finds its page" man -w 8 heapprofd
check "bash completion installed" test -f /usr/share/bash-completion/completions/heapprof
check "zsh completion installed" test -f /usr/share/zsh/vendor-completions/_heapprof
check "the serve agent's unit installed" test -f /lib/systemd/system/heapprof-serve@.service -o \
	-f /usr/lib/systemd/system/heapprof-serve@.service

echo "== purge"
if DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $PKGS >"$OUT/purge.log" 2>&1; then
	ok "the three packages purge"
else
	bad "apt-get purge: $(tail -n 3 "$OUT/purge.log" | tr '\n' '|')"
fi
left=$(while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done <"$W/plain")
if [ -z "$left" ]; then
	ok "no file of theirs left ($(wc -l <"$W/plain") files)"
else
	bad "files left: $(echo "$left" | head -n 5 | tr '\n' ' ')"
fi
echo "deb-test: $fails failed"
[ "$fails" = 0 ]
