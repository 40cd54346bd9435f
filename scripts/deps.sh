#!/bin/sh
# Installs the Debian packages heapprof needs, only when something is missing.
#   scripts/deps.sh         what building and running heapprof needs
#   scripts/deps.sh --test  also what the test suite needs: Go (`go tool
#                           pprof` reads the exported profiles), Chromium
#                           (the flame graph page is checked in it
#                           headless), Node.js (drives Chromium),
#                           rustc (a Rust program is profiled) and
#                           pkg-config (a program is built against an
#                           installed heapprof.pc), libc6-i386 (a 32-bit
#                           program's loader), heaptrack and git
#                           (allocation counts compared with heaptrack's),
#                           tmux (a terminal for heapprof top),
#                           prometheus (scrapes heapprof serve),
#                           groff, man-db, systemd and zsh (the man
#                           pages, the serve unit and the zsh completion
#                           checked as installed)
#   scripts/deps.sh --lint  also clang-tidy 14 and cppcheck (make lint)
#   scripts/deps.sh --fuzz  also clang and libFuzzer (make fuzz)
set -e
need=""
have_hdr() { [ -e "/usr/include/$1" ] || [ -e "/usr/include/x86_64-linux-gnu/$1" ]; }
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v g++ >/dev/null 2>&1 || need="$need g++"
command -v make >/dev/null 2>&1 || need="$need make"
have_hdr elfutils/libdwfl.h || need="$need libdw-dev"
have_hdr elfutils/debuginfod.h || need="$need libdebuginfod-dev"
have_hdr libelf.h || need="$need libelf-dev"
have_hdr sqlite3.h || need="$need libsqlite3-dev"
have_hdr zlib.h || need="$need zlib1g-dev"
# the event trace's chunks (src/store/evchunk.c)
have_hdr zstd.h || need="$need libzstd-dev"
have_hdr protobuf-c/protobuf-c.h || need="$need libprotobuf-c-dev"
have_hdr editline/readline.h || need="$need libedit-dev"
have_hdr libiberty/demangle.h || need="$need libiberty-dev"
# heapprof serve's HTTP server
have_hdr microhttpd.h || need="$need libmicrohttpd-dev"
command -v protoc-c >/dev/null 2>&1 || need="$need protobuf-c-compiler"
command -v sqlite3 >/dev/null 2>&1 || need="$need sqlite3"
if [ "${1:-}" = --test ]; then
	command -v go >/dev/null 2>&1 || need="$need golang-go"
	command -v chromium >/dev/null 2>&1 || need="$need chromium"
	command -v node >/dev/null 2>&1 || need="$need nodejs"
	command -v pkg-config >/dev/null 2>&1 || need="$need pkgconf"
	# test_startup.sh compares allocation counts with heaptrack's, on
	# git among others
	command -v heaptrack >/dev/null 2>&1 || need="$need heaptrack"
	command -v git >/dev/null 2>&1 || need="$need git"
	# Rust programs built and profiled (test_names.sh, test_startup.sh:
	# Debian's rustc, whatever else PATH may find first)
	[ -x /usr/bin/rustc ] || need="$need rustc"
	# heapprof top driven in a terminal (test_top.sh)
	command -v tmux >/dev/null 2>&1 || need="$need tmux"
	# Debian's prometheus scraping heapprof serve's /metrics
	# (test_serve_prometheus.sh)
	command -v prometheus >/dev/null 2>&1 || need="$need prometheus"
	# test_install.sh: the man pages read by groff and man, the serve
	# unit checked by systemd-analyze, the zsh completion driven in zsh
	command -v groff >/dev/null 2>&1 || need="$need groff-base"
	command -v man >/dev/null 2>&1 || need="$need man-db"
	command -v systemd-analyze >/dev/null 2>&1 || need="$need systemd"
	command -v zsh >/dev/null 2>&1 || need="$need zsh"
	# a 32-bit program started by a profiled one (test_hostile.sh)
	[ "$(uname -m)" != x86_64 ] || [ -e /lib/ld-linux.so.2 ] ||
		need="$need libc6-i386"
fi
if [ "${1:-}" = --lint ]; then
	command -v clang-tidy-14 >/dev/null 2>&1 || need="$need clang-tidy-14"
	command -v cppcheck >/dev/null 2>&1 || need="$need cppcheck"
fi
if [ "${1:-}" = --fuzz ]; then
	command -v clang >/dev/null 2>&1 || need="$need clang"
	ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a \
	  >/dev/null 2>&1 || need="$need libclang-rt-14-dev"
fi
if [ -n "$need" ]; then
	echo "heapprof: installing Debian packages:$need"
	if [ "$(id -u)" != 0 ]; then
		echo "heapprof: run as root, or install them first: apt-get install$need" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
