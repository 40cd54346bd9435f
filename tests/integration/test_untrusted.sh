#!/usr/bin/env bash
# test_untrusted.sh BUILD: what heapprof is handed from outside is never
# trusted (issue 31, "Never trust an input"; docs/CHECK.md, CONFIG.md,
# FLEET.md).
#
#   files    every text file heapprof reads (check -f RULES, record -c,
#            serve -c, serve --token-file): a FIFO (no writer: an open for
#            reading would wait for ever), a link to one, a directory, a
#            device are refused at once (10 s bound) with one line "...:
#            not a regular file (a FIFO)"; a file past its bound (1 MiB;
#            64 KiB for a token) is refused; a token file group or others
#            may use is refused naming the file and its mode, 0600 and
#            0400 serve.
#   bytes    a rule line with a NUL is refused naming the line (it was cut
#            there: "space >= 0\0..." passed); a rule's control bytes are
#            escaped in its message (\x1b), never echoed; serve's and
#            record's configs refuse them too.
#   sizes    a check limit past 2^53 (8 PiB, held as a double) is an error,
#            not "limit -8.00 EiB"; a pid past the kernel's 4194304 is an
#            error, not pid 1 (4294967297 in a pid_t).
#   serve    progs/top_grow copied and stripped (no name for its own
#            functions), profiled at -i 1 by serve's session, keeps
#            1000000 B in keep_here: ?pid=+N, ?pid=N%00, ?pid with no
#            value, a key twice, a control byte are 400; /metrics%00.txt
#            and the like 404; /debug/pprof/symbol answers as Go's
#            net/http/pprof (GET "num_symbols: 1"; POST and GET ?ADDR+ADDR
#            "0xADDR NAME" for the named locations of the profile just
#            served, each once, nothing for the others); `go tool pprof
#            -top URL` with no flag at all exits 0 showing the 976.56kB
#            and every function heapprof named (it POSTs the unnamed
#            addresses to /debug/pprof/symbol: a 405 there failed it); the
#            same for Debian's own stripped python3.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/top_grow" "$PROGS/check_gate"
. "$HERE/session_helpers.sh"
. "$HERE/serve_helpers.sh"

# shown TEXT...: TEXT for a failure message, control bytes made visible
# (cat -v), so that a test of them cannot act on the terminal itself.
shown() {
	printf '%s' "$*" | LC_ALL=C cat -v | head -c 400
}

# quick TAG ARGS...: heapprof ARGS, which must end at once: 10 s (a FIFO
# opened for reading would hold it for ever); status QRC, stderr TAG.err.
quick() {
	local tag=$1
	shift
	QRC=0
	timeout -k 2 10 "$HP" "$@" >"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" \
		</dev/null || QRC=$?
	if [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then
		t_fail "heapprof $(shown "$*") did not end within 10 s"
	fi
}

# refused TAG STATUS REGEX ARGS...: quick; exit STATUS, one line on
# stderr matching REGEX, no raw control byte in it.
refused() {
	local tag=$1 want=$2 re=$3
	shift 3
	local cmd err
	quick "$tag" "$@"
	cmd=$(shown "$*")
	err=$(shown "$(cat "$T_DIR/$tag.err")")
	assert_eq "$want" "$QRC" "exit status of heapprof $cmd"
	assert_eq 1 "$(wc -l <"$T_DIR/$tag.err" | tr -d ' ')" \
		"stderr lines of heapprof $cmd: $err"
	assert_match "$re" "$(head -n 1 "$T_DIR/$tag.err")" \
		"message of heapprof $cmd" 2>&1 | LC_ALL=C cat -v >&2
	if LC_ALL=C grep -q '[[:cntrl:]]' "$T_DIR/$tag.err"; then
		t_fail "a raw control byte in the message of heapprof $cmd: $err"
	fi
}

hp_record gate -i 1 -o "$T_DIR/gate.db" -- "$PROGS/check_gate"
[ "$REC_RC" = 0 ] || { t_begin "prerequisites"; t_fail "record check_gate: $REC_RC"; show_err gate; }
GATE="$T_DIR/gate.db"

# ---------------------------------------------------------------------------
t_begin "files: a FIFO, a link to one, a directory, a device are refused at once, in one line"
mkfifo "$W/fifo"
ln -s fifo "$W/fifo-link"
mkdir "$W/dir"
for f in "$W/fifo" "$W/fifo-link" "$W/dir" /dev/null; do
	case "$f" in
	*fifo*) kind="a FIFO" ;;
	*dir) kind="a directory" ;;
	*) kind="a character device" ;;
	esac
	refused cf 2 "^heapprof: check: $f: not a regular file \($kind\)$" \
		check "$GATE" -f "$f"
	refused rc 2 "^heapprof: record: config $f: not a regular file \($kind\)$" \
		record -c "$f" -o "$T_DIR/r.db" -- /bin/true
	refused sc 2 "^heapprof: serve: --config $f: not a regular file \($kind\)$" \
		serve -c "$f"
	refused st 2 "^heapprof: serve: --token-file $f: not a regular file \($kind\)$" \
		serve -p 1 --listen 127.0.0.1:0 --token-file "$f"
done
assert_eq p "$(stat -c %A "$W/fifo" | cut -c1)" "the FIFO is still one"
assert_eq "" "$(ls "$T_DIR" | grep '^r\.db')" "no profile made"

t_begin "files: past their bound (1 MiB; 64 KiB for a token) refused"
pad() { # FILE BYTES: FILE grown with comment lines to BYTES or more
	while [ "$(stat -c %s "$1")" -lt "$2" ]; do
		printf '# %1000s\n' pad >>"$1"
		printf '# %1000s\n' pad >>"$1"
		printf '# %1000s\n' pad >>"$1"
		printf '# %1000s\n' pad >>"$1"
	done
}
printf 'space >= 0\n' >"$W/big.rules"
pad "$W/big.rules" $((1024 * 1024 + 1))
refused bigr 2 "^heapprof: check: $W/big.rules: larger than 1 MiB$" \
	check "$GATE" -f "$W/big.rules"
printf 'pid: %s\nlisten: 127.0.0.1:0\n' 1 >"$W/big.conf"
pad "$W/big.conf" $((1024 * 1024 + 1))
refused bigs 2 "^heapprof: serve: --config $W/big.conf: larger than 1 MiB$" \
	serve -c "$W/big.conf"
printf 'max_frames: 5\n' >"$W/big.cfg"
pad "$W/big.cfg" $((1024 * 1024 + 1))
refused bigc 2 "^heapprof: record: config $W/big.cfg: larger than 1 MiB$" \
	record -c "$W/big.cfg" -o "$T_DIR/r.db" -- /bin/true
printf 'tok-%s\n' "$$" >"$W/big.token"
pad "$W/big.token" $((64 * 1024 + 1))
chmod 600 "$W/big.token"
refused bigt 2 "^heapprof: serve: --token-file $W/big.token: larger than 64 KiB$" \
	serve -p 1 --listen 127.0.0.1:0 --token-file "$W/big.token"

t_begin "token file: refused when group or others may use it, its name and mode said"
printf 'tok-%s\n' "$$" >"$W/token"
for m in 644 640 604 660 620 602 610 601; do
	chmod "$m" "$W/token"
	refused tp$m 2 "^heapprof: serve: --token-file $W/token: permissions 0$m are too open: .*chmod 600" \
		serve -p 1 --listen 127.0.0.1:0 --token-file "$W/token"
done
printf 'a\001b\n' >"$W/ctl.token"
chmod 600 "$W/ctl.token"
refused tc 2 "^heapprof: serve: --token-file $W/ctl.token: a control byte in the first line \(\\\\x01\)$" \
	serve -p 1 --listen 127.0.0.1:0 --token-file "$W/ctl.token"

# ---------------------------------------------------------------------------
t_begin "bytes: a rule line with a NUL is refused naming the line; control bytes escaped, never echoed"
printf '# gate\nspace >= 0\0 and then anything\n' >"$W/nul.rules"
refused nul 2 "^heapprof: check: $W/nul.rules:2: a NUL byte in the line" \
	check "$GATE" -f "$W/nul.rules"
refused ctl 2 "^heapprof: check: bad rule 'space <= 1\\\\x1b\[2J\\\\x01': a control byte \(\\\\x1b\)$" \
	check "$GATE" $'space <= 1\x1b[2J\x01'
printf 'space >= 0\nspace <= 1\033]0;title\007\n' >"$W/ctl.rules"
refused ctlf 2 "^heapprof: check: $W/ctl.rules:2: bad rule 'space <= 1\\\\x1b\]0;title\\\\x07': a control byte" \
	check "$GATE" -f "$W/ctl.rules"
printf 'pid: %s\ntop: 5\033[2J\n' 1 >"$W/ctl.conf"
refused ctls 2 "^heapprof: serve: $W/ctl.conf:2: a control byte \(\\\\x1b\): not a text config$" \
	serve -c "$W/ctl.conf" --listen 127.0.0.1:0
printf 'heaps: "a\001b"\n' >"$W/ctl.cfg"
refused ctlc 2 "^heapprof: record: config $W/ctl.cfg:1: a control byte \(\\\\x01\): not a text config$" \
	record -c "$W/ctl.cfg" -o "$T_DIR/r.db" -- /bin/true
printf 'space >= 0\r\n# crlf\r\n' >"$W/crlf.rules"
quick crlf check "$GATE" -f "$W/crlf.rules"
assert_eq 0 "$QRC" "a CRLF rule file still reads: $(cat "$T_DIR/crlf.err")"

# ---------------------------------------------------------------------------
t_begin "sizes that do not fit are errors, never wrapped numbers"
for r in 'space <= 9223372036854775808' 'space <= 16777216G' \
	'objects <= 18446744073709551000' 'alloc_space grows <= 9007199254740993'; do
	refused big 2 "^heapprof: check: bad rule '$r': bad limit '[0-9G]*': too large \(at most 9007199254740992, 8 PiB\)$" \
		check "$GATE" --baseline "$GATE" "$r"
done
quick lim check "$GATE" 'space <= 8388608G' 'objects <= 9007199254740992'
assert_eq 0 "$QRC" "limits of 2^53 hold: $(cat "$T_DIR/lim.err")"
assert_match 'limit 8\.00 PiB \(9007199254740992 B\)$' "$(cat "$T_DIR/lim.out")" \
	"2^53 bytes printed as it is"
assert_match 'limit 9007199254740992$' "$(cat "$T_DIR/lim.out")" \
	"2^53 objects printed as it is"
refused pidw 2 "^heapprof: serve: invalid --pid '4294967297': too large \(pids go up to 4194304\)$" \
	serve -p 4294967297 --listen 127.0.0.1:0
printf 'pid: 4294967297\nlisten: 127.0.0.1:0\n' >"$W/pid.conf"
refused pidc 2 "^heapprof: serve: invalid --pid '4294967297': too large" \
	serve -c "$W/pid.conf"
refused pidt 2 "^heapprof: top: invalid --pid '4294967297': too large" \
	top --once -p 4294967297

# ---------------------------------------------------------------------------
# The stripped copy of top_grow: keep_here, main, _start nameless; the C
# library's frames named.
SSNAME="svs$$"
APID=""
cp "$PROGS/top_grow" "$W/$SSNAME" && strip "$W/$SSNAME" &&
	start_alloc s "$W/$SSNAME"

t_begin "token file: 0600 and 0400 serve; POST /debug/pprof/symbol asks for the token too"
for m in 600 400; do
	chmod "$m" "$W/token"
	if [ -n "$APID" ] && start_serve tok$m -p "$APID" --token-file "$W/token"; then
		http "$SURL/metrics" -H "Authorization: Bearer tok-$$" >/dev/null
		assert_eq 200 "$HTTP_CODE" "mode $m: /metrics with the token"
		http "$SURL/debug/pprof/symbol" -X POST --data-binary 0x1 >/dev/null
		assert_eq 401 "$HTTP_CODE" "mode $m: POST /debug/pprof/symbol without the token"
		http "$SURL/debug/pprof/symbol" -X POST --data-binary 0x1 \
			-H "Authorization: Bearer tok-$$" >"$T_DIR/got"
		assert_eq 200 "$HTTP_CODE" "mode $m: POST /debug/pprof/symbol with the token"
		assert_eq "num_symbols: 1" "$(cat "$T_DIR/got")" "mode $m: its answer"
		stop_serve tok$m
	else
		t_fail "serve with a token file of mode $m did not start: $(cat "$T_DIR/tok$m.err" 2>/dev/null)"
	fi
done

SURL=""
if [ -n "$APID" ] && start_serve s1 -p "$APID" -i 1; then
	wait_until 30 "the agent's session on $APID in /metrics" attached
	touch "$W/s.go"
	wait_until 30 "live bytes 1000000" live_is 1000000
fi

t_begin "serve: malformed query values are 400, malformed paths 404"
if [ -n "$SURL" ]; then
	for q in "pid=+$APID" "pid=$APID%00" "pid=%20$APID" "pid=$APID%20" \
		"pid=0x$APID" "pid=$APID&pid=$APID" "pid" "pid=$APID&heap" \
		"pid=$APID&heap=a%01b" "name=a%00b" "name=$SSNAME%0a" \
		"pid=$APID&x%1b=1" "pid=99999999999999999999" "pid=4194305"; do
		http "$SURL/debug/pprof/heap?$q" >"$T_DIR/q.body"
		assert_eq 400 "$HTTP_CODE" \
			"?$q: $(head -c 100 "$T_DIR/q.body" | LC_ALL=C tr -c '[:print:]' .)"
	done
	for u in /metrics%00.txt /metrics%00 /metrics%0a /metrics/ \
		/debug/pprof/heap%00 "/debug/pprof/heap%00?pid=$APID" \
		/debug/pprof/symbol%00 /debug/pprof/ /debug/pprof/heap/x; do
		http "$SURL$u" >/dev/null
		assert_eq 404 "$HTTP_CODE" "path $u"
	done
	http "$SURL/metrics" -X POST -d a=b >/dev/null
	assert_eq 405 "$HTTP_CODE" "POST /metrics"
	http "$SURL/debug/pprof/heap?pid=$APID&unknown=1" >/dev/null
	assert_eq 200 "$HTTP_CODE" "a key of someone else's is let be"
	http "$SURL/debug/pprof/heap?name=$SSNAME" >/dev/null
	assert_eq 200 "$HTTP_CODE" "?name= of the program"
	scrape
	assert_eq 1000000 "$(metric heapprof_live_bytes "$APID")" "/metrics after them"
else
	t_fail "serve did not start: $(cat "$T_DIR/s1.err" 2>/dev/null)"
fi

t_begin "serve: /debug/pprof/symbol answers as Go's net/http/pprof, with heapprof's names"
if [ -n "$SURL" ] && need_go; then
	http "$SURL/debug/pprof/symbol" >"$T_DIR/got"
	assert_eq 200 "$HTTP_CODE" "GET: status"
	assert_eq "num_symbols: 1" "$(cat "$T_DIR/got")" "GET"
	http "$SURL/debug/pprof/heap?pid=$APID" >/dev/null
	assert_eq 200 "$HTTP_CODE" "the profile"
	cp "$T_DIR/http.body" "$T_DIR/heap.pb.gz"
	# its locations: "  N: 0xADDR M=K [NAME ...]"
	gopprof -symbolize=none -raw "$T_DIR/heap.pb.gz" >"$T_DIR/heap.raw" ||
		t_fail "pprof -raw: $(head -c 300 "$T_DIR/gopprof.err")"
	awk '/^Locations/ { l = 1; next } /^[A-Z]/ { l = 0 }
	     l && $1 ~ /^[0-9]+:$/ && NF >= 4 { print $2, $4 }' \
		"$T_DIR/heap.raw" >"$T_DIR/named"
	awk '/^Locations/ { l = 1; next } /^[A-Z]/ { l = 0 }
	     l && $1 ~ /^[0-9]+:$/ && NF == 3 { print $2 }' \
		"$T_DIR/heap.raw" >"$T_DIR/unnamed"
	assert_match '__libc_start_main' "$(cat "$T_DIR/named")" \
		"the C library's frames are named"
	# the stripped program's own frames are named as every view names
	# them, module+0xADDR (the symbol server answers them too)
	assert_eq 0 "$(wc -l <"$T_DIR/unnamed")" "every frame has a name"
	assert_match "^0x[0-9a-f]+ $SSNAME\+0x[0-9a-f]+\$" "$(cat "$T_DIR/named")" \
		"the stripped program's own frames as module+0xADDR"
	# every address, named or not, junk, one asked twice, a decimal one
	named1=$(head -n 1 "$T_DIR/named" | cut -d' ' -f1)
	ask=$( (cut -d' ' -f1 "$T_DIR/named" "$T_DIR/unnamed"; echo junk
		echo "$named1"; echo 0; echo 0x; printf '%d\n' "$named1") |
		paste -sd+)
	{ echo "num_symbols: 1"; cat "$T_DIR/named"; } >"$T_DIR/want"
	http "$SURL/debug/pprof/symbol" -X POST --data-binary "$ask" \
		>"$T_DIR/got"
	assert_eq 200 "$HTTP_CODE" "POST: status"
	assert_eq "$(cat "$T_DIR/want")" "$(cat "$T_DIR/got")" \
		"POST $ask: each named address once, with its name"
	http "$SURL/debug/pprof/symbol?$ask" >"$T_DIR/got"
	assert_eq "$(cat "$T_DIR/want")" "$(cat "$T_DIR/got")" \
		"GET ?$ask: the same"
	{ head -c 200000 /dev/zero | tr '\0' '7'; printf '+%s' "$named1"; } \
		>"$T_DIR/long.ask"
	http "$SURL/debug/pprof/symbol" -X POST --data-binary "@$T_DIR/long.ask" \
		>"$T_DIR/got"
	assert_eq "num_symbols: 1
$(head -n 1 "$T_DIR/named")" "$(cat "$T_DIR/got")" \
		"a 200000-digit word skipped, the next answered"
fi

t_begin "serve: go tool pprof -top URL, no flag, reads the stripped program's profile with heapprof's names"
if [ -n "$SURL" ] && need_go; then
	rc=0
	gopprof -top "$SURL/debug/pprof/heap?pid=$APID" >"$T_DIR/top" || rc=$?
	assert_eq 0 "$rc" "go tool pprof's status: $(head -c 400 "$T_DIR/gopprof.err")"
	assert_match '976\.56kB total$' "$(cat "$T_DIR/top")" "keep_here's 1000000 B"
	# every function of the profile, by what was allocated (the ones
	# whose blocks were all freed hold no inuse_space)
	gopprof -top -sample_index=alloc_space -nodefraction=0 \
		"$SURL/debug/pprof/heap?pid=$APID" >"$T_DIR/top.alloc" || rc=$?
	assert_eq 0 "$rc" "go tool pprof's status: $(head -c 400 "$T_DIR/gopprof.err")"
	while read -r _ name; do
		assert_match " $(printf '%s' "$name" | sed 's/[+.]/\\&/g')\$" \
			"$(cat "$T_DIR/top.alloc")" "$name in -top"
	done <"$T_DIR/named"
	assert_no_match 'symbol' "$(cat "$T_DIR/gopprof.err")" \
		"no symbol error on pprof's stderr"
fi
[ -n "$SURL" ] && stop_serve s1

t_begin "serve: go tool pprof -top URL of Debian's stripped python3"
PY=$(readlink -f /usr/bin/python3 2>/dev/null)
if ! need_go; then
	:
elif [ -z "$PY" ] || [ ! -x "$PY" ]; then
	t_skip "no /usr/bin/python3"
elif ! command -v readelf >/dev/null || readelf -S --wide "$PY" | grep -q ' \.symtab '; then
	t_skip "$PY is not stripped (or readelf is missing)"
else
	cat >"$W/py.py" <<'EOF'
import os, sys, time
open(sys.argv[1] + ".tmp", "w").write("pid %d\n" % os.getpid())
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
end = time.time() + 120
while not os.path.exists(sys.argv[2]) and time.time() < end:
    time.sleep(0.02)
keep = [bytearray(100000) for i in range(50)]
open(sys.argv[3], "w").write("kept\n")
while time.time() < end:
    time.sleep(0.1)
EOF
	timeout -k 5 150 /usr/bin/python3 "$W/py.py" "$W/py.ready" "$W/py.go" \
		"$W/py.kept" >"$T_DIR/py.out" 2>&1 </dev/null &
	TPIDS="$TPIDS $!"
	PPID_=""
	wait_until 30 "python3 ready" test -s "$W/py.ready" &&
		PPID_=$(sed -n 's/^pid //p' "$W/py.ready")
	TPIDS="$TPIDS $PPID_"
	if [ -n "$PPID_" ] && start_serve py -p "$PPID_"; then
		py_profiled() {
			http "$SURL/debug/pprof/heap" | grep -q "^$PPID_	.*	profiled\$"
		}
		wait_until 60 "python3 profiled" py_profiled
		touch "$W/py.go"
		wait_until 30 "python3's blocks kept" test -s "$W/py.kept"
		rc=0
		gopprof -top "$SURL/debug/pprof/heap?pid=$PPID_" >"$T_DIR/pytop" || rc=$?
		assert_eq 0 "$rc" "go tool pprof's status: $(head -c 400 "$T_DIR/gopprof.err")"
		for name in Py_BytesMain __libc_start_main; do
			assert_match " $name\$" "$(cat "$T_DIR/pytop")" "$name in -top"
		done
		stop_serve py
	fi
fi

t_summary
