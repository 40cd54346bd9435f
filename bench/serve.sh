#!/bin/bash
# bench/serve.sh BUILD_DIR
#
# What `heapprof serve` costs over time (issue 23, docs/FLEET.md "What it
# costs"): the agent runs for DURATION seconds over
#   * a churner: bench/serve_churn copied as $CHURN_NAME, started for
#     CHURN_SECONDS, then started again under the same name as soon as it
#     exits, for the whole run (a new pid every few seconds);
#   * STEADY_COUNT long-lived processes: the same program copied as
#     $STEADY_NAME, running for the whole run at the same rate;
# with `heapprof serve -n CHURN_NAME,STEADY_NAME --listen 127.0.0.1:0`
# (the port read from its first stdout line).  Meanwhile, as a Prometheus
# and a pprof scraper would, curl gets /metrics every second and
# /debug/pprof/heap?name=STEADY_NAME every 10 s (?pid= of the first one
# when there are several); and every SAMPLE seconds (10) the agent is
# measured: the CPU time of its whole process tree (serve and every
# descendant: the `heapprof record` sessions it runs; utime + stime of the
# live ones plus cutime + cstime, which holds the time of the descendants
# already reaped), and the sum of VmRSS (and of Pss) over the tree.
#
# By default the programs are started bare and no heapprofd runs: the
# agent alone, attaching to each new process by ptrace (docs/ATTACH.md).
# BENCH_SERVE_PRELOAD=1 starts them with LD_PRELOAD=libheapprof.so and
# runs a heapprofd (private XDG_RUNTIME_DIR), as on a machine set up to
# profile programs from their start; the daemon is not in serve's tree:
# its RSS and CPU are given apart.
#
# Printed: a row per SAMPLE (t, processes in the agent's tree, their RSS
# and PSS in MiB, CPU % of one core over the interval, the targets and
# processes profiled as /metrics said last, scrapes ok/failed so far),
# then the summary: RSS in the first minute against the last, CPU %
# mean, the churner's starts against the distinct churner pids /metrics
# showed with a heap (heapprof_live_bytes{pid=...}), the agent's RSS per
# profiled process, serve's temporary directory's size, and the lines of
# its stderr and of the sessions' logs (copied from its directory every
# second, as they come and go) that say something went wrong.
#
# Environment:
#   DURATION=S              the run (default 600; the summary's "first
#                           minute" and "last minute" need >= 120)
#   SAMPLE=S                seconds between measurements (default 10)
#   CHURN_SECONDS=S         a churner's life (default 5)
#   RATE=N                  allocations a second of each program (20000)
#   STEADY_COUNT=N          long-lived processes (default 1)
#   BENCH_SERVE_PRELOAD=0|1 see above (default 0)
#   SERVE_ARGS="..."        options for heapprof serve (default "-i 4096",
#                           the interval docs/FLEET.md's figures were
#                           measured at; serve's own default is 524288)
#   BENCH_WORK=DIR          scratch and logs (default BUILD/bench-work)
# Results: the table and summary on stdout, kept in
# BUILD/bench-results/serve-*.txt, the samples in serve-*.tsv.
set -u
export LC_ALL=C

die() {
	echo "bench/serve: $*" >&2
	exit 2
}

[ $# -eq 1 ] || die "usage: bench/serve.sh BUILD_DIR"
[ -d "$1" ] || die "$1: no such build directory (run make first)"
BUILD=$(cd "$1" && pwd)
HP=$BUILD/heapprof
CHURN_BIN=$BUILD/bench/serve_churn
for f in "$HP" "$BUILD/libheapprof.so" "$CHURN_BIN"; do
	[ -e "$f" ] || die "$f is missing (make BUILD=$1 all $1/bench/serve_churn)"
done
command -v curl >/dev/null 2>&1 || die "curl is needed (apt-get install curl)"
DURATION=${DURATION:-600}
SAMPLE=${SAMPLE:-10}
CHURN_SECONDS=${CHURN_SECONDS:-5}
RATE=${RATE:-20000}
STEADY_COUNT=${STEADY_COUNT:-1}
PRELOAD=${BENCH_SERVE_PRELOAD:-0}
SERVE_ARGS=${SERVE_ARGS--i 4096}
for v in DURATION SAMPLE RATE STEADY_COUNT; do
	case ${!v} in '' | *[!0-9]* | 0) die "$v must be a positive integer" ;; esac
done
case $CHURN_SECONDS in '' | *[!0-9.]*) die "CHURN_SECONDS must be a number" ;; esac
case $PRELOAD in 0 | 1) ;; *) die "BENCH_SERVE_PRELOAD must be 0 or 1" ;; esac
[ -n "${EPOCHREALTIME:-}" ] || die "bash 5 or later is needed (EPOCHREALTIME)"
WORK=${BENCH_WORK:-$BUILD/bench-work}/serve
RESDIR=$BUILD/bench-results
CHURN_NAME=hpb_churn
STEADY_NAME=hpb_steady
TICKS=$(getconf CLK_TCK)

# Nothing of a profiler may be in the programs but what this script puts
# there; no daemon but its own may be found.
unset LD_PRELOAD MALLOC_CONF HEAPPROFILE HEAPCHECK DEBUGINFOD_URLS
for v in $(env | sed -n 's/^\(HEAPPROF_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done
rm -rf "$WORK"
mkdir -p "$WORK/xdg" "$WORK/tmp" "$WORK/scrape" "$RESDIR" || die "cannot create $WORK"
chmod 700 "$WORK/xdg"
export XDG_RUNTIME_DIR=$WORK/xdg
export TMPDIR=$WORK/tmp
cp "$CHURN_BIN" "$WORK/$CHURN_NAME" && cp "$CHURN_BIN" "$WORK/$STEADY_NAME" ||
	die "cannot copy $CHURN_BIN"
STAMP=$(date +%Y%m%d-%H%M%S)
TSV=$RESDIR/serve-$STAMP.tsv
REPORT=$RESDIR/serve-$STAMP.txt
: >"$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
progress() { echo "bench/serve: $*" >&2; }

SPID="" DPID="" LOOP_PID="" STEADY_PIDS=""
cleanup() {
	[ -n "$LOOP_PID" ] && kill -TERM "$LOOP_PID" 2>/dev/null
	[ -n "$SPID" ] && kill -TERM "$SPID" 2>/dev/null
	for p in $STEADY_PIDS; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "$DPID" ] && "$HP" daemon --stop >/dev/null 2>&1
}
trap 'cleanup; exit 130' INT TERM

start_prog() { # NAME SECONDS: in the background, preloaded or not
	if [ "$PRELOAD" = 1 ]; then
		LD_PRELOAD=$BUILD/libheapprof.so "$WORK/$1" "$2" "$RATE" </dev/null >/dev/null 2>>"$WORK/progs.err" &
	else
		"$WORK/$1" "$2" "$RATE" </dev/null >/dev/null 2>>"$WORK/progs.err" &
	fi
}

# ---- the process tree of serve ----------------------------------------------

# tree_pids PID: PID and its descendants, from the ppid field of
# /proc/*/stat (the field after the parenthesised name, which may hold
# spaces).
tree_pids() {
	perl -e '
		my $root = shift; my %kids;
		for my $f (glob "/proc/[0-9]*/stat") {
			open(my $h, "<", $f) or next; my $s = <$h>; close $h;
			next unless defined $s && $s =~ /^(\d+) \(.*\) \S+ (\d+)/s;
			push @{$kids{$2}}, $1;
		}
		my @q = ($root); my @out;
		while (@q) { my $p = shift @q; push @out, $p; push @q, @{$kids{$p} // []}; }
		print "@out\n";' "$1"
}

# tree_sample PID: "NPROC TICKS RSS_KB PSS_KB": ticks = utime + stime +
# cutime + cstime over the live tree.
tree_sample() {
	perl -e '
		my ($n, $t, $rss, $pss) = (0, 0, 0, 0);
		for my $p (@ARGV) {
			open(my $h, "<", "/proc/$p/stat") or next; my $s = <$h>; close $h;
			$s =~ s/^.*\) //s; my @f = split / /, $s;
			# after the name: state=0 ppid=1 ... utime=11 stime=12 cutime=13 cstime=14
			$t += $f[11] + $f[12] + $f[13] + $f[14];
			$n++;
			if (open(my $st, "<", "/proc/$p/status")) {
				while (<$st>) { $rss += $1 if /^VmRSS:\s+(\d+)/; }
				close $st;
			}
			if (open(my $sm, "<", "/proc/$p/smaps_rollup")) {
				while (<$sm>) { $pss += $1 if /^Pss:\s+(\d+)/; }
				close $sm;
			}
		}
		print "$n $t $rss $pss\n";' "$@"
}

# ---- start ---------------------------------------------------------------------

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
say "== heapprof serve over time: bench/serve.sh, $(date -u '+%Y-%m-%d %H:%M UTC') =="
say "machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, kernel $(uname -r), $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo 'no git')"
say "run:     ${DURATION} s; $CHURN_NAME restarted every ${CHURN_SECONDS} s, $STEADY_COUNT x $STEADY_NAME for the whole run, ${RATE} allocations/s each; $([ "$PRELOAD" = 1 ] && echo 'preloaded, heapprofd running' || echo 'bare, no heapprofd')"
say "scrapes: /metrics every 1 s, /debug/pprof/heap every 10 s; agent measured every ${SAMPLE} s"
say "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the start"

if [ "$PRELOAD" = 1 ]; then
	"$HP" daemon >"$WORK/daemon.out" 2>&1 || die "heapprof daemon failed: $(cat "$WORK/daemon.out")"
	DPID=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$WORK/daemon.out" | head -1)
	[ -n "$DPID" ] || die "no heapprofd after heapprof daemon"
fi

for _ in $(seq 1 "$STEADY_COUNT"); do
	start_prog "$STEADY_NAME" 0
	STEADY_PIDS="$STEADY_PIDS $!"
done
STEADY1=${STEADY_PIDS# }
STEADY1=${STEADY1%% *}

# The churner loop: one at a time, its pid noted before it runs.
: >"$WORK/churn.pids"
(
	trap 'kill -TERM $c 2>/dev/null; exit 0' TERM
	while :; do
		start_prog "$CHURN_NAME" "$CHURN_SECONDS"
		c=$!
		echo "$c $EPOCHREALTIME" >>"$WORK/churn.pids"
		wait "$c"
	done
) &
LOOP_PID=$!

# shellcheck disable=SC2086
"$HP" serve -n "$CHURN_NAME,$STEADY_NAME" --listen 127.0.0.1:0 $SERVE_ARGS \
	>"$WORK/serve.out" 2>"$WORK/serve.err" </dev/null &
SPID=$!
URL=""
for _ in $(seq 1 200); do
	URL=$(sed -n 's|^heapprof serve: listening on \(http://[0-9.:]*\)/.*|\1|p' "$WORK/serve.out")
	[ -n "$URL" ] && break
	kill -0 "$SPID" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$URL" ]; then
	cleanup
	die "serve did not say where it listens: $(head -c 400 "$WORK/serve.err")"
fi
# The agent's directory: its sessions' profiles and logs.
SDIR=$(sed -n 's|.*; sessions in \(.*\)$|\1|p' "$WORK/serve.out")
mkdir -p "$WORK/logs"
say "agent:   $HP serve -n $CHURN_NAME,$STEADY_NAME --listen 127.0.0.1:0 $SERVE_ARGS (pid $SPID, $URL)"
say ""

if [ "$STEADY_COUNT" = 1 ]; then
	PPROF_Q="name=$STEADY_NAME"
else
	PPROF_Q="pid=$STEADY1"
fi

# ---- the run ---------------------------------------------------------------------

m_ok=0 m_fail=0 p_ok=0 p_fail=0 p_bytes=0
targets="-" profiled="-"
: >"$WORK/seen.pids"
printf 't_s\tprocs\trss_kb\tpss_kb\tcpu_ticks\tcpu_pct\ttargets\tprofiled\tmetrics_ok\tmetrics_failed\tpprof_ok\tpprof_failed\tchurn_started\tchurn_seen\tdaemon_rss_kb\tdaemon_ticks\tserve_rss_kb\tdir_kb\n' >"$TSV"
fmt='%6s %6s %8s %8s %7s %8s %9s %13s %11s %8s %8s\n'
printf "$fmt" t procs "RSS MiB" "PSS MiB" "CPU %" targets profiled "metrics ok/f" "pprof ok/f" "seen/run" "dir KiB" | tee -a "$REPORT"

daemon_sample() {
	if [ -n "$DPID" ] && [ -r "/proc/$DPID/stat" ]; then
		tree_sample "$DPID" | awk '{ print $3, $2 }'
	else
		echo "- -"
	fi
}

T0=$EPOCHREALTIME
# shellcheck disable=SC2046 # the pids, one word each
read -r _ ticks0 _ _ < <(tree_sample $(tree_pids "$SPID"))
prev_ticks=$ticks0 prev_t=$T0
tick=0
serve_died=""
while :; do
	tick=$((tick + 1))
	# the next whole second since T0
	wait_s=$(awk -v t0="$T0" -v now="$EPOCHREALTIME" -v k="$tick" 'BEGIN { d = t0 + k - now; printf "%.3f", (d > 0 ? d : 0) }')
	sleep "$wait_s"
	if ! kill -0 "$SPID" 2>/dev/null; then
		serve_died="serve exited at ${tick} s: $(wait "$SPID"; echo "status $?")"
		progress "$serve_died"
		break
	fi
	f=$WORK/scrape/metrics
	code=$(curl -s -m 5 -o "$f" -w '%{http_code}' "$URL/metrics" </dev/null)
	if [ "$code" = 200 ]; then
		m_ok=$((m_ok + 1))
		targets=$(sed -n 's/^heapprof_targets //p' "$f")
		profiled=$(sed -n 's/^heapprof_profiled //p' "$f")
		sed -n "s/^heapprof_live_bytes{pid=\"\([0-9]*\)\",comm=\"$CHURN_NAME\".*/\1/p" "$f" >>"$WORK/seen.pids"
	else
		m_fail=$((m_fail + 1))
		echo "$tick metrics $code" >>"$WORK/scrape/failures"
	fi
	[ -n "$SDIR" ] && cp -p "$SDIR"/*.log "$WORK/logs/" 2>/dev/null
	if [ $((tick % 10)) = 0 ]; then
		g=$WORK/scrape/heap.pb.gz
		code=$(curl -s -m 30 -o "$g" -w '%{http_code}' "$URL/debug/pprof/heap?$PPROF_Q" </dev/null)
		if [ "$code" = 200 ] && gzip -t "$g" 2>/dev/null; then
			p_ok=$((p_ok + 1))
			p_bytes=$(stat -c %s "$g")
		else
			p_fail=$((p_fail + 1))
			echo "$tick pprof $code $(head -c 200 "$g" | tr -c '[:print:]' ' ')" >>"$WORK/scrape/failures"
		fi
	fi
	if [ $((tick % SAMPLE)) = 0 ]; then
		now=$EPOCHREALTIME
		# shellcheck disable=SC2046
		read -r n ticks rss pss < <(tree_sample $(tree_pids "$SPID"))
		cpu=$(awk -v a="$prev_ticks" -v b="$ticks" -v t0="$prev_t" -v t1="$now" -v hz="$TICKS" \
			'BEGIN { printf "%.1f", (b - a) / hz / (t1 - t0) * 100 }')
		prev_ticks=$ticks prev_t=$now
		started=$(wc -l <"$WORK/churn.pids")
		seen=$(sort -u "$WORK/seen.pids" | wc -l)
		read -r drss dticks < <(daemon_sample)
		srss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$SPID/status" 2>/dev/null)
		dkb=$(du -sk "$WORK/tmp" 2>/dev/null | cut -f1)
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tick" "$n" "$rss" "$pss" "$ticks" "$cpu" \
			"$targets" "$profiled" "$m_ok" "$m_fail" "$p_ok" "$p_fail" "$started" "$seen" "$drss" "$dticks" "${srss:-0}" "${dkb:-0}" >>"$TSV"
		printf "$fmt" "$tick" "$n" "$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')" \
			"$(awk -v k="$pss" 'BEGIN { printf "%.1f", k / 1024 }')" "$cpu" "$targets" "$profiled" \
			"$m_ok/$m_fail" "$p_ok/$p_fail" "$seen/$started" "${dkb:-?}" | tee -a "$REPORT"
	fi
	[ "$tick" -ge "$DURATION" ] && break
done
T1=$EPOCHREALTIME

# ---- the end -----------------------------------------------------------------------

# What the agent's tree is at the end, one line a process.
tree_now=""
if [ -z "$serve_died" ]; then
	for p in $(tree_pids "$SPID"); do
		rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$p/status" 2>/dev/null)
		cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-90)
		tree_now="$tree_now  pid $p: RSS $(awk -v k="${rss:-0}" 'BEGIN { printf "%.1f", k / 1024 }') MiB: $cmd"$'\n'
	done
fi
tmp_kb=$(du -sk "$WORK/tmp" 2>/dev/null | cut -f1)

kill -TERM "$LOOP_PID" 2>/dev/null
wait "$LOOP_PID" 2>/dev/null
LOOP_PID=""
serve_rc=""
if [ -z "$serve_died" ]; then
	kill -TERM "$SPID" 2>/dev/null
	for _ in $(seq 1 300); do
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$SPID" 2>/dev/null; then
		serve_rc="still running 30 s after SIGTERM: killed"
		kill -KILL "$SPID" 2>/dev/null
	fi
	wait "$SPID"
	serve_rc="${serve_rc:-status $?}"
fi
SPID=""
for p in $STEADY_PIDS; do kill -TERM "$p" 2>/dev/null; done
wait 2>/dev/null
STEADY_PIDS=""
[ -n "$DPID" ] && "$HP" daemon --stop >/dev/null 2>&1
left=$(ls -A "$WORK/tmp" 2>/dev/null | tr '\n' ' ')

say ""
perl -e '
my ($tsv, $dur, $sample, $hz) = @ARGV;
open(my $f, "<", $tsv) or die; <$f>;
my @r; while (<$f>) { chomp; my @x = split /\t/; push @r, {t => $x[0], n => $x[1], rss => $x[2], pss => $x[3],
	ticks => $x[4], cpu => $x[5], targets => $x[6], prof => $x[7], started => $x[12], seen => $x[13],
	drss => $x[14], dticks => $x[15], srss => $x[16], dir => $x[17]}; }
exit 0 unless @r;
my $last_t = $r[-1]{t};
sub mean { my @x = grep { defined && $_ ne "-" && $_ ne "" } @_; return undef unless @x; my $s = 0; $s += $_ for @x; return $s / @x; }
sub mib { defined $_[0] ? sprintf("%.1f", $_[0] / 1024) : "-" }
my @first = grep { $_->{t} <= 60 } @r;
my @lastm = grep { $_->{t} > $last_t - 60 } @r;
my @cpu = map { $_->{cpu} } @r;
printf "agent RSS (sum over its tree), minute 1 vs the last minute: %s MiB vs %s MiB (mean of the samples; min %s, max %s over the run)\n",
	mib(mean(map { $_->{rss} } @first)), mib(mean(map { $_->{rss} } @lastm)),
	mib((sort { $a <=> $b } map { $_->{rss} } @r)[0]), mib((sort { $a <=> $b } map { $_->{rss} } @r)[-1]);
printf "agent PSS, same:                                             %s MiB vs %s MiB\n",
	mib(mean(map { $_->{pss} } @first)), mib(mean(map { $_->{pss} } @lastm));
printf "agent CPU, %% of one core: mean %.2f (minute 1 %.2f, last minute %.2f, max sample %.1f); %.1f s of CPU in %d s\n",
	mean(@cpu), mean(map { $_->{cpu} } @first), mean(map { $_->{cpu} } @lastm), (sort { $a <=> $b } @cpu)[-1],
	($r[-1]{ticks}) / $hz, $last_t;
my $prof = mean(map { $_->{prof} } @lastm);
my $rl = mean(map { $_->{rss} } @lastm);
my $nl = mean(map { $_->{n} } @lastm);
my $sl = mean(map { $_->{srss} } @lastm);
printf "processes profiled (last minute, mean of /metrics): %.1f; agent RSS per profiled process: %s MiB; agent processes: %.1f\n",
	$prof // 0, ($prof ? mib($rl / $prof) : "-"), $nl // 0;
printf "of which serve itself: %s MiB (minute 1 %s MiB); the rest per other process of the tree: %s MiB\n",
	mib($sl), mib(mean(map { $_->{srss} } @first)), ($nl && $nl > 1 ? mib(($rl - $sl) / ($nl - 1)) : "-");
printf "serve'"'"'s directory (sessions'"'"' profiles): minute 1 %.0f KiB, last minute %.0f KiB, max %.0f KiB\n",
	mean(map { $_->{dir} } @first), mean(map { $_->{dir} } @lastm), (sort { $a <=> $b } map { $_->{dir} } @r)[-1];
if (defined mean(map { $_->{drss} } @r)) {
	my ($d0, $d1) = ($r[0]{dticks}, $r[-1]{dticks});
	printf "heapprofd (not in the tree): RSS minute 1 %s MiB, last minute %s MiB; CPU %.2f%% of one core\n",
		mib(mean(map { $_->{drss} } @first)), mib(mean(map { $_->{drss} } @lastm)),
		($d1 - $d0) / $hz / (($last_t - $r[0]{t}) || 1) * 100;
}
' "$TSV" "$DURATION" "$SAMPLE" "$TICKS" | tee -a "$REPORT"
# The churners started more than 3 s before the last scrape had time to
# be seen; the one or two after are left out of the ratio.
sort -u "$WORK/seen.pids" >"$WORK/seen.sorted"
read -r started counted seen < <(awk -v end="$T1" 'NR == FNR { seen[$1] = 1; next }
	{ n++; if ($2 < end - 3) { c++; if ($1 in seen) s++ } }
	END { print n + 0, c + 0, s + 0 }' "$WORK/seen.sorted" "$WORK/churn.pids")
say "churner: $started started, $seen of the $counted started more than 3 s before the end seen with a heap in /metrics ($(awk -v a="$seen" -v b="$counted" 'BEGIN { printf "%.0f", b ? 100 * a / b : 0 }')%)"
say "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the end"
say "scrapes: /metrics $m_ok ok, $m_fail failed; /debug/pprof/heap?$PPROF_Q $p_ok ok, $p_fail failed (last profile $p_bytes bytes)"
[ -s "$WORK/scrape/failures" ] && say "failed scrapes (first 5):" && head -5 "$WORK/scrape/failures" | sed 's/^/  /' | tee -a "$REPORT"
say "serve's temporary directory at the end: ${tmp_kb:-?} KiB; left after it ended: ${left:-nothing}"
[ -n "$tree_now" ] && say "the agent's processes at the end:" && printf '%s' "$tree_now" | tee -a "$REPORT"
say "serve: ${serve_died:-ended on SIGTERM, $serve_rc}"
errs=$(grep -v '^$' "$WORK/serve.err" | wc -l)
say "serve's stderr: $errs lines$([ "$errs" -gt 0 ] && echo ', first 5:')"
[ "$errs" -gt 0 ] && head -5 "$WORK/serve.err" | sed 's/^/  /' | tee -a "$REPORT"
[ -n "$SDIR" ] && cp -p "$SDIR"/*.log "$WORK/logs/" 2>/dev/null
nlogs=$(find "$WORK/logs" -name '*.log' | wc -l)
pat='error\|fail\|cannot\|not profiled\|warning'
bad=$(cat "$WORK"/logs/*.log 2>/dev/null | grep -ci "$pat")
say "sessions' logs: $nlogs copied, $bad lines that say error/fail/cannot/not profiled/warning$([ "$bad" -gt 0 ] && echo ', first 5:')"
[ "$bad" -gt 0 ] && cat "$WORK"/logs/*.log | grep -i "$pat" | head -5 | sed 's/^/  /' | tee -a "$REPORT"
[ -s "$WORK/progs.err" ] && say "the programs' stderr: $(head -c 300 "$WORK/progs.err")"
say "total time: $(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.0f", b - a }') s; logs in $WORK"
say "raw numbers: $TSV"
