#!/bin/bash
# bench/attach.sh BUILD_DIR
#
# How long attaching to a running process takes (issue 21,
# docs/ATTACH.md): `heapprof record -p PID` against `heaptrack -p PID`
# (gdb), on a process that never loaded either profiler:
# bench/attach_target idle (one thread blocked in read) and busy (4
# threads, the main one among them, in a malloc/free storm on 2 cores: no
# thread ever sleeps).  Every target is started bare: no LD_PRELOAD, and a
# private XDG_RUNTIME_DIR so that no heapprofd is found and record injects
# the client itself.  docs/PERFORMANCE.md, "Attaching to a running
# process".
#
# One repetition, for each workload, runs the tools in turn (the first
# one rotates), each on a fresh target:
#   heapprof   record -p PID: the wall time from just before the fork of
#              `heapprof record -p PID` to the moment its "profiling" line
#              is read from its stderr (a pipe read as the line comes),
#              and the "attached in" / "stopped" figures that line gives;
#              the session is held BENCH_ATTACH_HOLD_MS, ended by SIGINT,
#              and the target must still run;
#   heapprof re-attach: a second record -p on the same target (the client
#              is already loaded; its first session ended): must work,
#              timed the same way;
#   heaptrack  heaptrack -o F -p PID: the wall time from just before its
#              fork to the moment its "injection finished" line is read
#              (the script prints it when gdb has called heaptrack_inject
#              in the target and detached: the target is recording); then
#              the session is held as above and ended: SIGINT to the
#              script, then the gdb command of its EXIT trap (which dash
#              does not run on SIGINT: heaptrack_stop, detach), and the
#              target must still run.
# Then the target gets SIGTERM and must print "RESULT ... errors=0
# eintr=0" and exit 0 (its blocks kept their contents; the idle read was
# neither broken nor interrupted).
#
# How long the target was stopped: heapprof prints a figure ("stopped Y
# ms": the injected thread's own stop, from its stop at the safe point to
# its detach; threads tried before it were each stopped for a check
# only).  The busy target also measures it from
# inside: each thread notes the longest gap between two of its clock
# checks (a few microseconds apart when it runs), and the table gives the
# longest gap of any thread in the attach window (from the tool's start
# to its line) next to the same figure for a window of BENCH_ATTACH_HOLD_MS
# just before, untouched (the scheduler's own gaps: 4 threads on 2
# cores).  An idle target's thread is blocked anyway: nothing to observe.
#
# Environment:
#   BENCH_ATTACH_RUNS=N     repetitions (default 10; BENCH_QUICK=1: 2)
#   BENCH_ATTACH_WORKLOADS="idle busy"
#   BENCH_ATTACH_TOOLS="heapprof heaptrack"
#   BENCH_ATTACH_HOLD_MS=M  how long each session records before it is
#                           ended, and the baseline window (default 150)
#   BENCH_ATTACH_TIMEOUT=S  limit for one attach (default 5: heaptrack's
#                           gdb takes about 1 s when it works; a call of
#                           dlopen it made that has not returned by then
#                           is deadlocked, see docs/PERFORMANCE.md)
#   BENCH_WORK=DIR          scratch and logs (default BUILD/bench-work)
# Results: the table on stdout, kept with the raw numbers in
# BUILD/bench-results/attach-*.tsv (workload tool rep status wall_ms
# attached_ms stopped_ms gap_base_ms gap_attach_ms end_ms note) and
# attach-*.txt.
set -u
export LC_ALL=C

die() {
	echo "bench/attach: $*" >&2
	exit 2
}

[ $# -eq 1 ] || die "usage: bench/attach.sh BUILD_DIR"
[ -d "$1" ] || die "$1: no such build directory (run make first)"
BUILD=$(cd "$1" && pwd)
HP=$BUILD/heapprof
TARGET=$BUILD/bench/attach_target
for f in "$HP" "$BUILD/libheapprof.so" "$TARGET"; do
	[ -e "$f" ] || die "$f is missing (make BUILD=$1 all $1/bench/attach_target)"
done
[ "${BENCH_QUICK:-0}" = 0 ] && DEF_RUNS=10 || DEF_RUNS=2
RUNS=${BENCH_ATTACH_RUNS:-$DEF_RUNS}
WORKLOADS=${BENCH_ATTACH_WORKLOADS:-idle busy}
TOOLS=${BENCH_ATTACH_TOOLS:-heapprof heaptrack}
HOLD_MS=${BENCH_ATTACH_HOLD_MS:-150}
ATT_TIMEOUT=${BENCH_ATTACH_TIMEOUT:-5}
WORK=${BENCH_WORK:-$BUILD/bench-work}/attach
RESDIR=$BUILD/bench-results
case $RUNS in '' | *[!0-9]* | 0) die "BENCH_ATTACH_RUNS must be a positive integer" ;; esac
case $HOLD_MS in '' | *[!0-9]*) die "BENCH_ATTACH_HOLD_MS must be an integer" ;; esac
case $ATT_TIMEOUT in '' | *[!0-9]* | 0) die "BENCH_ATTACH_TIMEOUT must be a positive integer" ;; esac
for w in $WORKLOADS; do
	case $w in idle | busy) ;; *) die "unknown workload '$w' (idle busy)" ;; esac
done
for t in $TOOLS; do
	case $t in heapprof | heaptrack) ;; *) die "unknown tool '$t' (heapprof heaptrack)" ;; esac
done
# EPOCHREALTIME: bash 5.
[ -n "${EPOCHREALTIME:-}" ] || die "bash 5 or later is needed (EPOCHREALTIME)"

# Nothing of a profiler may be in the targets; no daemon may be found.
unset LD_PRELOAD MALLOC_CONF HEAPPROFILE HEAPCHECK DEBUGINFOD_URLS
for v in $(env | sed -n 's/^\(HEAPPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done
rm -rf "$WORK"
mkdir -p "$WORK/xdg" "$WORK/logs" "$RESDIR" || die "cannot create $WORK"
chmod 700 "$WORK/xdg"
export XDG_RUNTIME_DIR=$WORK/xdg
STAMP=$(date +%Y%m%d-%H%M%S)
TSV=$RESDIR/attach-$STAMP.tsv
REPORT=$RESDIR/attach-$STAMP.txt
: >"$TSV"
: >"$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
progress() { echo "bench/attach: $*" >&2; }

# heaptrack -p needs gdb and, under Yama, ptrace_scope 0.
HT_SKIP=""
if ! command -v heaptrack >/dev/null 2>&1; then
	HT_SKIP="heaptrack not installed"
elif ! command -v gdb >/dev/null 2>&1; then
	HT_SKIP="gdb not installed (heaptrack -p injects through gdb)"
elif [ -r /proc/sys/kernel/yama/ptrace_scope ] &&
	[ "$(cat /proc/sys/kernel/yama/ptrace_scope)" != 0 ]; then
	HT_SKIP="Yama ptrace_scope is $(cat /proc/sys/kernel/yama/ptrace_scope) (heaptrack -p refuses anything but 0)"
fi

ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"; }

# CPU use of the whole machine: busy and total jiffies from /proc/stat.
cpu_jiffies() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }

# ---- the target ----------------------------------------------------------

TPID="" TOUT=""
# start_target WL: starts it, waits for READY (and, idle, for its read).
start_target() {
	TOUT=$WORK/target.out
	: >"$TOUT"
	"$TARGET" "$1" >"$TOUT" 2>"$WORK/target.err" </dev/null &
	TPID=$!
	local i
	for i in $(seq 1 1000); do
		grep -q '^READY' "$TOUT" && break
		kill -0 "$TPID" 2>/dev/null || return 1
		sleep 0.005
	done
	grep -q '^READY' "$TOUT" || return 1
	if [ "$1" = idle ]; then
		for i in $(seq 1 200); do
			[ "$(awk '{ print $3 }' "/proc/$TPID/stat" 2>/dev/null)" = S ] && return 0
			sleep 0.005
		done
		return 1
	fi
	return 0
}

# The busy target's gap window: SIGUSR1 ends it; GAP_MS is its longest
# gap (empty for idle, or if no line came within 2 s: the storm stopped).
GAP_MS=""
gap_window() {
	GAP_MS=""
	[ "$WL" = busy ] || return 0
	local before i
	before=$(grep -c '^GAP' "$TOUT")
	kill -USR1 "$TPID" 2>/dev/null || return 1
	for i in $(seq 1 400); do
		if [ "$(grep -c '^GAP' "$TOUT")" -gt "$before" ]; then
			GAP_MS=$(grep '^GAP' "$TOUT" | tail -1 | sed -n 's/^GAP max_ms=\([0-9.]*\).*/\1/p')
			return 0
		fi
		sleep 0.005
	done
	return 1
}

# Does the target still run?  (For busy: it answers SIGUSR1.)  Sets TWHY.
target_alive() {
	local st
	st=$(awk '{ print $3 }' "/proc/$TPID/stat" 2>/dev/null)
	case $st in
	'' | Z | X)
		TWHY="target died"
		return 1
		;;
	t | T)
		TWHY="target left stopped (state $st)"
		return 1
		;;
	esac
	if [ "$WL" = busy ] && ! gap_window; then
		TWHY="target's storm no longer runs (no answer to SIGUSR1)"
		return 1
	fi
	return 0
}

# end_target: SIGTERM, then its RESULT line must say errors=0 eintr=0.
end_target() {
	local i rc
	[ -n "$TPID" ] || return 0
	kill -TERM "$TPID" 2>/dev/null
	for i in $(seq 1 200); do
		kill -0 "$TPID" 2>/dev/null || break
		sleep 0.01
	done
	if kill -0 "$TPID" 2>/dev/null; then
		kill -KILL "$TPID" 2>/dev/null
		wait "$TPID" 2>/dev/null
		TPID=""
		TWHY="target did not end on SIGTERM"
		return 1
	fi
	wait "$TPID"
	rc=$?
	TPID=""
	if [ "$rc" != 0 ] || ! grep -q '^RESULT .* errors=0 eintr=0$' "$TOUT"; then
		TWHY="target ended with status $rc: $(grep '^RESULT' "$TOUT" || echo 'no RESULT line')"
		return 1
	fi
	return 0
}

# ---- one attach ------------------------------------------------------------

# attach_once TOOL: attaches TOOL to $TPID, holds, ends the session.  Sets
# STATUS, WALL, ATT, STOP, GAP_BASE, GAP_ATT, END, WHY.
attach_once() {
	local tool=$1 fifo=$WORK/line.fifo log=$WORK/logs/$WL.$2.$REP.log
	local pat fail t0 t1 t2 line apid i
	STATUS=ok WALL="" ATT="" STOP="" GAP_BASE="" GAP_ATT="" END="" WHY=""
	rm -f "$fifo" "$WORK/ht."*
	mkfifo "$fifo" || die "mkfifo $fifo"
	: >"$log"
	# The untouched window before.
	gap_window
	sleep_ms "$HOLD_MS"
	gap_window
	GAP_BASE=$GAP_MS
	t0=$EPOCHREALTIME
	if [ "$tool" = heapprof ]; then
		"$HP" record -p "$TPID" -o "$WORK/hp.db" >/dev/null 2>"$fifo" </dev/null &
		pat=": profiling ("
		fail=": not profiled: "
	else
		# Job control for this one: heaptrack in a process group of
		# its own, with SIGINT not ignored (a shell without it starts
		# background jobs with SIGINT ignored), so that SIGINT to the
		# group is a Ctrl-C.
		set -m
		heaptrack -o "$WORK/ht.$TPID" -p "$TPID" >"$fifo" 2>&1 </dev/null &
		set +m
		pat="injection finished"
		fail="^Cannot attach\|^Could not find\|^GDB is not installed\|ptrace: Operation not permitted"
	fi
	apid=$!
	exec 4<"$fifo"
	t1=""
	while IFS= read -r -t "$ATT_TIMEOUT" line <&4; do
		case $line in
		*"$pat"*)
			t1=$EPOCHREALTIME
			echo "$line" >>"$log"
			break
			;;
		esac
		echo "$line" >>"$log"
		if echo "$line" | grep -q "$fail"; then
			break
		fi
	done
	if [ -n "$t1" ]; then
		WALL=$(ms_between "$t0" "$t1")
		gap_window
		GAP_ATT=$GAP_MS
		if [ "$tool" = heapprof ]; then
			ATT=$(echo "$line" | sed -n 's/.*attached in \([0-9.]*\) ms.*/\1/p')
			STOP=$(echo "$line" | sed -n 's/.*stopped \([0-9.]*\) ms.*/\1/p')
		fi
		sleep_ms "$HOLD_MS"
	else
		STATUS=failed
		WHY=$(grep -v '^$' "$log" | tail -1 | tr '\t' ' ' | cut -c1-120)
		if [ -z "$WHY" ] || ! echo "$WHY" | grep -q "$fail"; then
			WHY="no '$pat' line within ${ATT_TIMEOUT} s"
			STATUS=timeout
		fi
	fi
	# End the session: SIGINT.  heapprof: to record.  heaptrack: to its
	# script only; a Ctrl-C at a terminal reaches its whole group, its
	# interpreter dies first and the target then dies of SIGPIPE on its
	# next write (seen here: status 141).  When gdb's call has not
	# returned (a timeout), SIGINT to the group: gdb interrupts it.
	t2=$EPOCHREALTIME
	if [ "$tool" = heapprof ] || [ "$STATUS" = ok ]; then
		kill -INT "$apid" 2>/dev/null
	else
		kill -INT -- "-$apid" 2>/dev/null
	fi
	for i in $(seq 1 1000); do
		kill -0 "$apid" 2>/dev/null || break
		sleep 0.01
	done
	if kill -0 "$apid" 2>/dev/null; then
		kill -KILL -- "-$apid" 2>/dev/null
		[ "$STATUS" = ok ] && STATUS=failed WHY="$tool did not end on SIGINT within 10 s"
	fi
	wait "$apid" 2>/dev/null
	# The rest of what it printed.
	while IFS= read -r -t 1 line <&4; do echo "$line" >>"$log"; done
	# heaptrack's script sets an EXIT trap that stops the recording in
	# the target with gdb (heaptrack_stop) and detaches; dash, Debian's
	# /bin/sh, does not run it when SIGINT ends the script.  The same
	# gdb command, run here, while its interpreter still reads.
	if [ "$tool" = heaptrack ] && [ "$STATUS" = ok ] && [ -d "/proc/$TPID" ] &&
		! grep -q 'removing heaptrack injection' "$log"; then
		timeout -k 2 20 gdb --batch-silent -n -iex="set auto-solib-add off" -p "$TPID" \
			--eval-command="sharedlibrary libheaptrack_inject" \
			--eval-command="call (void) heaptrack_stop()" \
			--eval-command="detach" >>"$log" 2>&1 </dev/null ||
			echo "bench: heaptrack's stop command failed: $?" >>"$log"
	fi
	END=$(ms_between "$t2" "$EPOCHREALTIME")
	# What is left of heaptrack's group: its interpreter and compressor
	# (or the interpreter waiting on its fifo when the injection failed).
	[ "$tool" = heaptrack ] && kill -KILL -- "-$apid" 2>/dev/null
	# gdb's own words when the call did not return (heaptrack).
	if [ "$STATUS" = timeout ]; then
		local said
		said=$(grep -m2 -E 'signaled while|No symbol|SIGSEGV|Cannot|error' "$log" | tr '\n\t' '  ' | cut -c1-160)
		[ -n "$said" ] && WHY="$WHY; after SIGINT it said: $said"
	fi
	exec 4<&-
	rm -f "$fifo" "/tmp/heaptrack_fifo$apid" "$WORK/hp.db" "$WORK/ht."*
	# heapprof's session must have ended cleanly.
	if [ "$STATUS" = ok ] && [ "$tool" = heapprof ] && ! grep -q 'profile written to' "$log"; then
		STATUS=failed WHY="no 'profile written' line: $(tail -1 "$log" | cut -c1-100)"
	fi
	if ! target_alive; then
		[ "$STATUS" = ok ] && STATUS=failed
		WHY="${WHY:+$WHY; }$TWHY"
	fi
	return 0
}

record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$WL" "$1" "$REP" "$STATUS" \
		"$WALL" "$ATT" "$STOP" "$GAP_BASE" "$GAP_ATT" "$END" "$WHY" >>"$TSV"
	progress "$(printf '%-4s %-18s run %2d/%d  %-6s %8s ms%s%s' "$WL" "$1" "$REP" "$RUNS" "$STATUS" \
		"${WALL:--}" "${STOP:+  (stopped $STOP ms)}" "${WHY:+  $WHY}")"
}

# run_tool TOOL: a fresh target, TOOL attached (and heapprof again), the
# target ended.
run_tool() {
	local tool=$1 ok
	if [ "$tool" = heaptrack ] && [ -n "$HT_SKIP" ]; then
		STATUS="skipped" WALL="" ATT="" STOP="" GAP_BASE="" GAP_ATT="" END="" WHY=$HT_SKIP
		record heaptrack
		return
	fi
	if ! start_target "$WL"; then
		STATUS=failed WALL="" ATT="" STOP="" GAP_BASE="" GAP_ATT="" END=""
		WHY="target did not start: $(head -c 200 "$WORK/target.err" | tr '\n' ' ')"
		record "$tool"
		[ -n "$TPID" ] && kill -KILL "$TPID" 2>/dev/null && wait "$TPID" 2>/dev/null
		TPID=""
		return
	fi
	attach_once "$tool" first
	ok=$STATUS
	if [ "$tool" = heapprof ]; then
		record heapprof
		if [ "$ok" = ok ]; then
			attach_once heapprof again
			ok=$STATUS
			record heapprof-reattach
		fi
	fi
	if ! end_target; then
		if [ "$tool" = heaptrack ]; then
			[ "$STATUS" = ok ] && STATUS=failed
			WHY="${WHY:+$WHY; }$TWHY"
			record heaptrack
		else
			STATUS=failed WALL="" ATT="" STOP="" GAP_BASE="" GAP_ATT="" END="" WHY=$TWHY
			record heapprof-target-end
		fi
		return
	fi
	[ "$tool" = heaptrack ] && record heaptrack
	return 0
}

# ---- the machine and the runs ------------------------------------------------

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
ht_ver=$(heaptrack --version 2>/dev/null | head -1)
gdb_ver=$(gdb --version 2>/dev/null | head -1)
say "== attaching to a running process: bench/attach.sh, $(date -u '+%Y-%m-%d %H:%M UTC') =="
say "machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, kernel $(uname -r)"
say "peers:   ${ht_ver:-heaptrack not installed}, ${gdb_ver:-gdb not installed}${HT_SKIP:+ (heaptrack skipped: $HT_SKIP)}"
say "runs:    $RUNS per workload and tool, a fresh target each, tools in turn (first one rotated); sessions held ${HOLD_MS} ms"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
read -r busy0 total0 < <(cpu_jiffies)
T0=$EPOCHREALTIME

tools=()
for t in $TOOLS; do tools+=("$t"); done
n=${#tools[@]}
for REP in $(seq 1 "$RUNS"); do
	for WL in $WORKLOADS; do
		for i in $(seq 0 $((n - 1))); do
			run_tool "${tools[$(((i + REP - 1) % n))]}"
		done
	done
done

T1=$EPOCHREALTIME
read -r busy1 total1 < <(cpu_jiffies)
cpu_busy=$(awk -v b=$((busy1 - busy0)) -v t=$((total1 - total0)) 'BEGIN { printf "%.0f", t ? 100 * b / t : 0 }')
say "load:    $LOAD0 (1/5/15 min) at start, $(cut -d' ' -f1-3 /proc/loadavg) at end; all CPUs ${cpu_busy}% busy during the run (this benchmark included)"
say ""
perl -e '
use strict;
my ($tsv) = @ARGV;
my (%v, %order, @wls);
open(my $f, "<", $tsv) or die;
while (<$f>) {
	chomp;
	my ($wl, $tool, $rep, $st, $wall, $att, $stop, $gb, $ga, $end, $why) = split /\t/, $_, -1;
	push @wls, $wl unless grep { $_ eq $wl } @wls;
	$order{$wl}{$tool} //= scalar keys %{$order{$wl}};
	my $r = $v{$wl}{$tool} //= {n => 0, ok => 0, wall => [], att => [], stop => [], gb => [], ga => [], end => [], why => {}};
	$r->{n}++;
	if ($st ne "ok") { $r->{why}{"$st: $why"}++; next; }
	$r->{ok}++;
	push @{$r->{wall}}, $wall;
	push @{$r->{att}}, $att if $att ne "";
	push @{$r->{stop}}, $stop if $stop ne "";
	push @{$r->{gb}}, $gb if $gb ne "";
	push @{$r->{ga}}, $ga if $ga ne "";
	push @{$r->{end}}, $end if $end ne "";
}
sub quant { my ($p, @x) = @_; return undef unless @x; @x = sort { $a <=> $b } @x;
	if ($p == 0.5) { my $n = @x; return $n % 2 ? $x[($n - 1) / 2] : ($x[$n / 2 - 1] + $x[$n / 2]) / 2; }
	my $k = int($p * @x + 0.999999); $k = 1 if $k < 1; return $x[$k - 1]; }
sub f { defined $_[0] ? sprintf("%.1f", $_[0]) : "-" }
sub mmx { my @x = @_; return "-" unless @x; my @s = sort { $a <=> $b } @x; return f(quant(0.5, @x)) . " / " . f($s[-1]); }
for my $wl (@wls) {
	print "$wl target: wall time from the tool'"'"'s start to its line (ms)\n";
	printf "%-18s %5s %8s %8s %8s %9s  %-14s %-14s %-14s\n", "tool", "ok", "median", "p90", "max", "ht/hp", "stopped", "gap attach", "gap before";
	printf "%-18s %5s %8s %8s %8s %9s  %-14s %-14s %-14s\n", "", "", "", "", "", "(median)", "med / max", "med / max", "med / max";
	my $hp = quant(0.5, @{($v{$wl}{heapprof} // {wall => []})->{wall}});
	for my $tool (sort { $order{$wl}{$a} <=> $order{$wl}{$b} } keys %{$v{$wl}}) {
		my $r = $v{$wl}{$tool};
		my $m = quant(0.5, @{$r->{wall}});
		my $ratio = "";
		$ratio = sprintf("%.1fx", $m / $hp) if $tool eq "heaptrack" && defined $m && $hp;
		my $stop = @{$r->{stop}} ? mmx(@{$r->{stop}}) : ($tool eq "heaptrack" ? "n/a" : "-");
		my $ga = $wl eq "busy" ? mmx(@{$r->{ga}}) : "n/a";
		my $gb = $wl eq "busy" ? mmx(@{$r->{gb}}) : "n/a";
		printf "%-18s %5s %8s %8s %8s %9s  %-14s %-14s %-14s\n", $tool, "$r->{ok}/$r->{n}",
			f($m), f(quant(0.9, @{$r->{wall}})), f(@{$r->{wall}} ? (sort { $a <=> $b } @{$r->{wall}})[-1] : undef),
			$ratio, $stop, $ga, $gb;
	}
	for my $tool (sort keys %{$v{$wl}}) {
		my $r = $v{$wl}{$tool};
		printf "  %s: printed \"attached in\" median %s ms, max %s ms\n", $tool,
			f(quant(0.5, @{$r->{att}})), f((sort { $a <=> $b } @{$r->{att}})[-1]) if @{$r->{att}};
	}
	for my $tool (sort keys %{$v{$wl}}) {
		my $r = $v{$wl}{$tool};
		printf "  %s: session end (SIGINT to exit) median %s ms\n", $tool, f(quant(0.5, @{$r->{end}})) if @{$r->{end}};
	}
	for my $tool (sort keys %{$v{$wl}}) {
		for my $w (sort keys %{$v{$wl}{$tool}{why}}) {
			printf "  %s: %d x %s\n", $tool, $v{$wl}{$tool}{why}{$w}, $w;
		}
	}
	print "\n";
}
' "$TSV" | tee -a "$REPORT"
say "stopped: heapprof's printed figure (the injected thread's own stop, to its detach); gap: busy target only, the longest time any of its threads went without running, in the attach window and in an untouched window of ${HOLD_MS} ms before it"
say "total time: $(ms_between "$T0" "$T1" | awk '{ printf "%.0f", $1 / 1000 }') s"
say "raw numbers: $TSV"
