#!/usr/bin/env bash
# test_incidents.sh BUILD: memory incidents (issue 22, docs/INCIDENTS.md).
# progs/inc_grow puts itself in a memory cgroup of 64 MiB made here and
# grows 1 MiB every 10 ms in grow_here() until the OOM killer kills it:
#   - under `record -- CMD`, by default: a "memory" dump as its RSS
#     crosses 80% of the limit (before the kill), and the last dump marked
#     "oom-kill", both with grow_here at the top; the limit, usage and peak
#     beside each; the report says "killed by the OOM killer at ..."; the
#     exit status is the bare one (137);
#   - --memory-dump 50%: the memory dump at half the limit;
#   - --no-memory-dumps: no memory dump, the last one still marked;
#   - attached with record -p while it waits, then grows: the same two;
#   - --pressure-dumps: a shell's dd children writing through the page
#     cache keep the cgroup at its limit without an OOM kill: a
#     "pressure" dump;
#   - Debian's python3 keeping 1 MiB bytearrays in the cgroup: the same
#     two dumps, its bytearray frames named.
# cgroup v1's memory controller or v2's, whichever this machine lets us
# write; skipped, with the reason, where neither is.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
GROW="$PROGS/inc_grow"
t_require "$HP" "$BUILD/libheapprof.so" "$GROW"
. "$HERE/session_helpers.sh"
unset LD_PRELOAD
LIMIT=$((64 << 20))

# make_cgroup TAG [swap]: a fresh memory cgroup of LIMIT bytes under our
# own: CG (its directory), CGV (1 or 2); returns 1 with WHY when none can
# be made.  Without swap, memory+swap is limited too where v1 has it.
make_cgroup() {
	local own v1 v2
	CG="" CGV="" WHY=""
	own=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup | head -n 1)
	v1=/sys/fs/cgroup/memory$own
	if [ -n "$own" ] && [ -w "$v1" ] && [ -e "$v1/memory.limit_in_bytes" ]; then
		CG="$v1/hpinc-$$-$1"
		if mkdir "$CG" 2>/dev/null && echo "$LIMIT" >"$CG/memory.limit_in_bytes"; then
			# No swap to run to instead of the OOM killer (but not
			# for the pressure case: with memory+swap limited too,
			# v1 reclaims the page cache without a failed charge).
			[ "${2:-}" != swap ] && [ -e "$CG/memory.memsw.limit_in_bytes" ] &&
				echo "$LIMIT" >"$CG/memory.memsw.limit_in_bytes" 2>/dev/null
			CGV=1
			return 0
		fi
		rmdir "$CG" 2>/dev/null
	fi
	own=$(sed -n 's/^0::\(.*\)$/\1/p' /proc/self/cgroup)
	for v2 in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ -e "$v2/cgroup.controllers" ] || continue
		# A child of the root, which may hold processes and still
		# hand the memory controller down.
		if grep -qw memory "$v2/cgroup.controllers" &&
			echo +memory >"$v2/cgroup.subtree_control" 2>/dev/null; then
			CG="$v2/hpinc-$$-$1"
			if mkdir "$CG" 2>/dev/null && echo "$LIMIT" >"$CG/memory.max" &&
				echo 0 >"$CG/memory.swap.max" 2>/dev/null; then
				CGV=2
				return 0
			fi
			rmdir "$CG" 2>/dev/null
		fi
	done
	WHY="no writable memory cgroup (v1: ${v1:-none}; v2: the memory controller cannot be handed to a child)"
	return 1
}
drop_cgroup() { [ -n "$CG" ] && rmdir "$CG" 2>/dev/null; CG=""; }

# dump_reasons DB: "reason reason ..." in order.
# The incidents' dumps (the peak's, which every session writes beside
# them, is test_peak.sh's).
dump_reasons() { q "$1" "SELECT reason FROM heapprof_dump WHERE reason != 'peak' ORDER BY ts, id;" | tr '\n' ' ' | sed 's/ $//'; }
# top_fn DB REASON: the function with the most live bytes at that dump.
top_fn() {
	q "$1" "SELECT f.name FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  WHERE a.ts <= (SELECT ts FROM heapprof_dump WHERE reason = '$2')
	  GROUP BY f.name ORDER BY sum(a.size) DESC LIMIT 1;"
}
# mem_at DB REASON NAME: heapprof_dump_memory's NAME at that dump.
mem_at() {
	q "$1" "SELECT value FROM heapprof_dump_memory WHERE name = '$3' AND
	  ts = (SELECT ts FROM heapprof_dump WHERE reason = '$2');"
}

# the bare run: killed by the OOM killer, status 137
t_begin "bare: inc_grow in a 64 MiB memory cgroup is killed by the OOM killer"
if ! make_cgroup bare; then
	t_skip "$WHY"
	t_summary
	exit $?
fi
# (timeout, not run_bounded: a SIGKILL is this run's expected end.)
rc=0
timeout 60 "$GROW" "$CG" >"$T_DIR/bare.out" 2>&1 </dev/null || rc=$?
assert_eq 137 "$rc" "bare exit status (SIGKILL)"
assert_eq "inc_grow: ready" "$(cat "$T_DIR/bare.out")" "bare output"
BARE_RC=$rc
drop_cgroup

t_begin "record -- CMD (defaults): a memory dump at 80% of the limit before the kill, the last dump marked oom-kill, grow_here in both"
make_cgroup def
rc=0
timeout 120 "$HP" record -o "$T_DIR/def.db" -- "$GROW" "$CG" >"$T_DIR/def.out" 2>"$T_DIR/def.err" </dev/null || rc=$?
assert_eq "$BARE_RC" "$rc" "record's exit status as bare (137)"
assert_eq "inc_grow: ready" "$(cat "$T_DIR/def.out")" "output as bare"
drop_cgroup
if db_valid "$T_DIR/def.db"; then
	assert_eq "memory oom-kill" "$(dump_reasons "$T_DIR/def.db")" "dump reasons"
	assert_eq grow_here "$(top_fn "$T_DIR/def.db" memory)" "top function at the memory dump"
	assert_eq grow_here "$(top_fn "$T_DIR/def.db" oom-kill)" "top function at the OOM kill"
	assert_eq "$LIMIT" "$(mem_at "$T_DIR/def.db" memory memory_limit)" "limit beside the memory dump"
	assert_eq "$LIMIT" "$(mem_at "$T_DIR/def.db" oom-kill memory_limit)" "limit beside the OOM kill dump"
	rss=$(mem_at "$T_DIR/def.db" memory rss)
	assert_ge "$rss" $((LIMIT / 100 * 80)) "RSS at the memory dump: at least 80% of the limit"
	assert_ge $((LIMIT)) "$rss" "RSS at the memory dump: not past the limit"
	assert_match "pid [0-9]+: RSS .*, [0-9]+% of its memory limit 64.00 MiB: dump" "$(cat "$T_DIR/def.err")" "record says the memory dump"
	assert_match "pid [0-9]+: killed by the OOM killer at .* of its 64.00 MiB limit" "$(cat "$T_DIR/def.err")" "record says the OOM kill"
	rep=$(run_bounded 60 "$HP" report "$T_DIR/def.db" 2>&1)
	assert_match "OOM kill +killed by the OOM killer at [0-9.]+ MiB of its 64.00 MiB limit \(cgroup v$CGV\)" "$rep" "report: the OOM kill"
	assert_match "memory +dump [0-9]+ +at \+[0-9.]+ s: RSS [0-9.]+ MiB of its 64.00 MiB limit" "$rep" "report: the memory dump"
	assert_no_match "leaks" "$(echo "$rep" | grep '^  dumps')" "report: an OOM kill is no exit (no leaks line)"
	assert_match "memory limit +64.00 MiB" "$rep" "report: the limit beside the heap"
fi

t_begin "sh -c 'exec CMD' (a wrapper, as pyenv's shims are): the program it becomes is followed by default: its memory dump and the oom-kill mark, not the shell's"
make_cgroup sh
rc=0
timeout 120 "$HP" record -o "$T_DIR/sh.db" -- sh -c "exec '$GROW' '$CG'" \
	>"$T_DIR/sh.out" 2>"$T_DIR/sh.err" </dev/null || rc=$?
assert_eq "$BARE_RC" "$rc" "record's exit status as bare (137)"
assert_eq "inc_grow: ready" "$(cat "$T_DIR/sh.out")" "output as bare"
drop_cgroup
if db_valid "$T_DIR/sh.db"; then
	assert_eq "1|sh|command 2|inc_grow|exec" "$(q "$T_DIR/sh.db" "SELECT h.upid, p.name, h.how
	  FROM process p JOIN heapprof_process h USING(upid) ORDER BY h.upid;" | tr '\n' ' ' | sed 's/ $//')" \
		"the shell's row, then its new image's (followed through exec)"
	assert_eq "exec" "$(q "$T_DIR/sh.db" "SELECT group_concat(reason, ' ') FROM heapprof_dump WHERE upid = 1 AND reason != 'peak';")" \
		"the shell's dumps: its image's end at the exec"
	assert_eq "memory oom-kill" "$(q "$T_DIR/sh.db" "SELECT group_concat(reason, ' ') FROM (SELECT reason FROM heapprof_dump WHERE upid = 2 AND reason != 'peak' ORDER BY ts, id);")" \
		"the program's dumps: the memory dump and the oom-kill mark"
	assert_eq grow_here "$(top_fn "$T_DIR/sh.db" oom-kill)" "top function at the OOM kill"
	assert_match "pid [0-9]+: killed by the OOM killer" "$(cat "$T_DIR/sh.err")" "record says the OOM kill"
fi

t_begin "--memory-dump 50%: the memory dump at half the limit"
make_cgroup half
rc=0
timeout 120 "$HP" record --memory-dump 50% -o "$T_DIR/half.db" -- "$GROW" "$CG" >/dev/null 2>"$T_DIR/half.err" </dev/null || rc=$?
assert_eq "$BARE_RC" "$rc" "exit status as bare"
drop_cgroup
if db_valid "$T_DIR/half.db"; then
	assert_eq "memory oom-kill" "$(dump_reasons "$T_DIR/half.db")" "dump reasons"
	rss=$(mem_at "$T_DIR/half.db" memory rss)
	assert_ge "$rss" $((LIMIT / 2)) "RSS at the memory dump: at least half the limit"
	assert_ge $((LIMIT / 100 * 80)) "$rss" "RSS at the memory dump: well before 80%"
fi

t_begin "--no-memory-dumps: no memory dump; the last one still marked oom-kill"
make_cgroup off
rc=0
timeout 120 "$HP" record --no-memory-dumps -o "$T_DIR/off.db" -- "$GROW" "$CG" >/dev/null 2>"$T_DIR/off.err" </dev/null || rc=$?
assert_eq "$BARE_RC" "$rc" "exit status as bare"
drop_cgroup
db_valid "$T_DIR/off.db" && assert_eq "oom-kill" "$(dump_reasons "$T_DIR/off.db")" "dump reasons"

t_begin "record -p of a bare process in the cgroup: the memory dump, then its disconnect dump marked oom-kill"
make_cgroup pid
"$GROW" "$CG" wait >"$T_DIR/pid.out" 2>&1 &
TPID=$!
wait_until 20 "inc_grow ready" grep_q "$T_DIR/pid.out" "ready"
timeout -k 5 120 "$HP" record -p "$TPID" -o "$T_DIR/pid.db" >"$T_DIR/pid.rout" 2>"$T_DIR/pid.err" </dev/null &
RPID=$!
if wait_until 20 "profiling line" grep_q "$T_DIR/pid.err" "profiling"; then
	kill -USR1 "$TPID"
fi
wait_child 60 "$TPID"
assert_eq 137 "$WAIT_RC" "the program's exit status (SIGKILL)"
wait_child 60 "$RPID"
assert_eq 0 "$WAIT_RC" "record exit status"
drop_cgroup
if db_valid "$T_DIR/pid.db"; then
	assert_eq "memory oom-kill" "$(dump_reasons "$T_DIR/pid.db")" "dump reasons"
	assert_eq grow_here "$(top_fn "$T_DIR/pid.db" oom-kill)" "top function at the OOM kill"
fi

t_begin "--pressure-dumps: a shell writing 400 MiB through the page cache of the 64 MiB cgroup over a second or more (its usage keeps reaching the limit, no OOM kill): a pressure dump, then its end"
make_cgroup pr swap
rc=0
timeout 120 "$HP" record --pressure-dumps -o "$T_DIR/pr.db" -- sh -c "
echo \$\$ >'$CG/cgroup.procs' || exit 3
i=0
while [ \$i -lt 20 ]; do
	dd if=/dev/zero of='$T_DIR/big.'\$i bs=1M count=20 status=none || exit 4
	sleep 0.05
	i=\$((i + 1))
done" >/dev/null 2>"$T_DIR/pr.err" </dev/null || rc=$?
rm -f "$T_DIR"/big.*
assert_eq 0 "$rc" "exit status (the shell finished)"
drop_cgroup
if db_valid "$T_DIR/pr.db"; then
	assert_eq "pressure end" "$(dump_reasons "$T_DIR/pr.db")" "dump reasons"
	assert_match "memory pressure in its cgroup \(its usage reached the limit\): dump" "$(cat "$T_DIR/pr.err")" "record says why"
	assert_match "pressure dump [0-9]+ +at \+[0-9.]+ s: " "$(run_bounded 60 "$HP" report "$T_DIR/pr.db" 2>&1)" "report lists the pressure dump"
fi

t_begin "Debian's python3 growing in the cgroup (a program nobody here wrote): the memory dump and the oom-kill dump, python's allocator frames at both"
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
	t_skip "no $PY"
else
	make_cgroup py
	# It puts itself in the cgroup, then keeps 1 MiB bytearrays.
	rc=0
	timeout 120 "$HP" record -o "$T_DIR/py.db" -- "$PY" -c "
import os, time
open('$CG/cgroup.procs', 'w').write(str(os.getpid()))
keep = []
while True:
    keep.append(bytearray(1 << 20))
    time.sleep(0.01)
" >/dev/null 2>"$T_DIR/py.err" </dev/null || rc=$?
	assert_eq 137 "$rc" "python's status through record (SIGKILL)"
	drop_cgroup
	if db_valid "$T_DIR/py.db"; then
		assert_eq "memory oom-kill" "$(dump_reasons "$T_DIR/py.db")" "dump reasons"
		assert_eq "$LIMIT" "$(mem_at "$T_DIR/py.db" oom-kill memory_limit)" "limit beside the OOM kill dump"
		# The 1 MiB blocks come from bytearray's resize (libpython or
		# the python3 executable, named from .dynsym).
		n=$(q "$T_DIR/py.db" "SELECT count(*) FROM stack_profile_frame WHERE name LIKE 'PyByteArray%' OR name LIKE '%bytearray%';")
		assert_ge "$n" 1 "python's bytearray frames named"
	fi
fi

t_summary
