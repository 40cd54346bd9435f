#!/usr/bin/perl
# summarize.pl RESULTS.tsv NOTES.tsv WORKLOAD "MODES"
#
# Prints the table of one workload from the raw results bench/run.sh
# wrote (one line per run: workload mode rep status seconds maxrss_kib
# cpu_seconds output_bytes why requests_per_s) and its notes (workload,
# description, metric). Medians over the successful runs of each mode;
# ratios and extra memory against the bare median, and for the profilers
# of another allocator (jemalloc, gperftools' tcmalloc) against that
# allocator bare too; and the "added time" comparisons: heapprof -i 1
# (every allocation) with heaptrack, gperftools and massif, and heapprof's
# default sampler with jemalloc's at the same interval.
#
# What is compared is the workload's metric (%metrics below): the wall
# time of a run ("time", lower is better: ratio profiled / bare is the
# slowdown), or the requests per second a server served ("rps", higher is
# better: ratio profiled / bare is the throughput kept). The "added"
# comparisons use the cost of one unit of work: the run's seconds, or the
# microseconds per request (1 / throughput).
use strict;
use warnings;

my ($tsv, $notes, $wl, $modes) = @ARGV;
die "usage: summarize.pl RESULTS.tsv NOTES.tsv WORKLOAD MODES\n"
  unless defined $modes;
my @modes = split ' ', $modes;

my %label = (
	'bare'          => 'bare',
	'idle'          => 'idle (LD_PRELOAD, no collector)',
	'default'       => 'heapprof record (-i 4096)',
	'nopeak'        => 'heapprof record --no-peak',
	'i1'            => 'heapprof record -i 1',
	'i1-nopeak'     => 'heapprof record -i 1 --no-peak',
	'fp'            => 'heapprof record --unwind fp',
	'trace'         => 'heapprof -i 1 --trace (stream)',
	'trace-ring'    => 'heapprof -i 1 --trace ring',
	'heaptrack'     => 'heaptrack',
	'heaptrack-raw' => 'heaptrack --raw',
	'jemalloc-bare' => 'jemalloc bare (LD_PRELOAD)',
	'jemalloc'      => 'jemalloc prof (sample 4096)',
	'tcmalloc-bare' => 'tcmalloc bare (LD_PRELOAD)',
	'gperftools'    => 'gperftools HEAPPROFILE',
	'massif'        => 'valgrind --tool=massif',
);
# The profilers that run on an allocator of their own, and that allocator
# bare: the profiler's own cost is the difference.
my %own = ('jemalloc' => 'jemalloc-bare', 'gperftools' => 'tcmalloc-bare');
# Names in the comparison lines.
my %short = (
	'heaptrack'     => 'heaptrack',
	'heaptrack-raw' => 'heaptrack --raw',
	'jemalloc'      => 'jemalloc prof',
	'gperftools'    => 'gperftools',
	'massif'        => 'massif',
	'jemalloc-bare' => 'jemalloc bare',
	'tcmalloc-bare' => 'tcmalloc bare',
);

# The metrics: which column of a run is compared, whether more is
# better, the table's headings, and the cost of a unit of work for the
# "added" lines.
my %metrics = (
	time => {
		col    => 0,
		higher => 0,
		fmt    => '%.3f',
		head   => ['median s', 'min-max s', 'x bare', '(min)'],
		widths => [9, 17, 7, 7],
		own    => 'x%.2f (min x%.2f)',
		cost   => sub { $_[0] },
		cfmt   => '%+.3f s',
		added  => 'added time',
	},
	rps => {
		col    => 4,
		higher => 1,
		fmt    => '%.0f',
		head   => ['median req/s', 'min-max req/s', 'tput/bare', '(max)'],
		widths => [13, 19, 9, 7],
		own    => 'throughput %.2f (max %.2f)',
		cost   => sub { $_[0] > 0 ? 1e6 / $_[0] : 0 },
		cfmt   => '%+.3f us/req',
		added  => 'added time per request',
		# The whole run's wall time too: start, benchmark, stop and
		# the profile written.
		wall   => 1,
		intro  => "throughput of the server: requests/s, higher is better; tput/bare = profiled / bare "
		  . "requests/s (median), (max) = the same for the best runs; wall s = the whole run "
		  . "(start, benchmark, stop, profile written)",
	},
);

my (%ok, %fail, %skip, %why);
open(my $fh, '<', $tsv) or die "summarize.pl: $tsv: $!\n";
while (<$fh>) {
	chomp;
	my ($w, $m, $rep, $st, $s, $rss, $cpu, $bytes, $why, $rate) = split /\t/;
	next unless $w eq $wl;
	if ($st =~ /^skipped/) {
		$skip{$m} = $st;
	} elsif ($st eq 'exit:0') {
		push @{ $ok{$m} }, [$s, $rss, $cpu, $bytes, $rate || 0];
	} else {
		push @{ $fail{$m} }, $st;
		$why{$m} //= $why if defined $why && length $why;
	}
}
close $fh;

my $desc = '';
my $metric = 'time';
if (open(my $nf, '<', $notes)) {
	while (<$nf>) {
		chomp;
		my ($w, $d, $mt) = split /\t/, $_, 3;
		next unless $w eq $wl;
		$desc = $d;
		$metric = $mt if $mt && $metrics{$mt};
	}
}
my $M = $metrics{$metric};

sub median {
	my @v = sort { $a <=> $b } @_;
	return undef unless @v;
	my $n = @v;
	return $n % 2 ? $v[$n / 2] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2;
}

sub col {
	my ($m, $i) = @_;
	return map { $_->[$i] } @{ $ok{$m} || [] };
}

# "exit:141 x5" style summary of failures.
sub failures {
	my ($m) = @_;
	my %n;
	$n{$_}++ for @{ $fail{$m} || [] };
	return join(', ', map { "$_ x$n{$_}" } sort keys %n);
}

# Per mode: v, the median of the metric; best and worst, its best and
# worst run (the fastest, or the most requests/s); cost, the cost of a
# unit of work at the median; s, the median wall time.
my %med;
for my $m (@modes) {
	next unless $ok{$m};
	my @v = sort { $a <=> $b } col($m, $M->{col});
	my $v = median(@v);
	$med{$m} = {
		v     => $v,
		best  => $M->{higher} ? $v[-1] : $v[0],
		worst => $M->{higher} ? $v[0] : $v[-1],
		cost  => $M->{cost}->($v),
		s     => median(col($m, 0)),
		rss   => median(col($m, 1)),
		cpu   => median(col($m, 2)),
		out   => median(col($m, 3)),
	};
}
my $bare = $med{bare};

print "== $wl: $desc ==\n";
print "$M->{intro}\n" if $M->{intro};
my @w = @{ $M->{widths} };
my $fmt = "%-32s %5s %$w[0]s %$w[1]s %$w[2]s %$w[3]s %9s %7s "
  . ($M->{wall} ? '%8s ' : '') . "%8s  %s\n";
printf $fmt, 'mode', 'runs', @{ $M->{head} }, '+RSS MiB', 'CPU s',
  ($M->{wall} ? ('wall s') : ()), 'out MiB', 'notes';
for my $m (@modes) {
	my $name = $label{$m} // $m;
	if ($skip{$m}) {
		printf "%-32s %s\n", $name, $skip{$m};
		next;
	}
	my $nok = scalar @{ $ok{$m} || [] };
	my $nall = $nok + scalar @{ $fail{$m} || [] };
	my $f = failures($m);
	if (!$nok) {
		printf "%-32s %5s  FAILED: %s (logs: bench-work/logs/%s.%s.*)\n",
		  $name, "0/$nall", $f || 'no runs', $wl, $m;
		printf "%-32s %5s  %s\n", '', '', $why{$m} if $why{$m};
		next;
	}
	my $d = $med{$m};
	my $ratio = $bare && $bare->{v} > 0 ? sprintf('%.2f', $d->{v} / $bare->{v}) : '-';
	# The same ratio between the best runs: on a machine shared with
	# other load, interference only ever adds time (takes throughput).
	my $rbest = $bare && $bare->{best} > 0 ? sprintf('%.2f', $d->{best} / $bare->{best}) : '-';
	my $rss = $bare ? sprintf('%+.1f', ($d->{rss} - $bare->{rss}) / 1024) : '-';
	$rss = sprintf('%.1f', $d->{rss} / 1024) . ' abs' if $m eq 'bare';
	my $out = ($m eq 'bare' || $m eq 'idle' || $m =~ /-bare$/) ? '-' : sprintf('%.1f', $d->{out} / 1048576);
	my ($lo, $hi) = sort { $a <=> $b } $d->{best}, $d->{worst};
	my $line = sprintf $fmt, $name, "$nok/$nall", sprintf($M->{fmt}, $d->{v}),
	  sprintf("$M->{fmt}-$M->{fmt}", $lo, $hi), $ratio, $rbest, $rss,
	  sprintf('%.2f', $d->{cpu}), ($M->{wall} ? (sprintf('%.3f', $d->{s})) : ()),
	  $out, $f ? "failed: $f" : '';
	$line =~ s/\s+$//;
	print "$line\n";
}

# The profilers on an allocator of their own against that allocator bare:
# their own cost, without the allocators' difference.
for my $m (grep { $own{$_} && $med{$_} } @modes) {
	my $o = $med{ $own{$m} } or next;
	next unless $o->{v} > 0 && $o->{best} > 0;
	printf "own allocator: %s $M->{own} of %s, $M->{cfmt}; peak RSS %+.1f MiB over it\n",
	  $short{$m}, $med{$m}{v} / $o->{v}, $med{$m}{best} / $o->{best},
	  $short{ $own{$m} }, $med{$m}{cost} - $o->{cost}, ($med{$m}{rss} - $o->{rss}) / 1024;
}

# What peer $p adds to the cost of running its allocator bare (to bare
# when it has no allocator of its own, or that was not measured), and the
# text saying so.
sub peer_added {
	my ($p) = @_;
	my $base = $own{$p} && $med{ $own{$p} } ? $own{$p} : 'bare';
	my $h = $med{$p}{cost} - $med{$base}{cost};
	my $txt = sprintf("%s $M->{cfmt}", $short{$p}, $h);
	$txt .= sprintf(" over %s ($M->{cfmt} over bare)", $short{$base}, $med{$p}{cost} - $bare->{cost})
	  if $base ne 'bare';
	return ($h, $txt);
}

sub quotient {
	my ($mine, $hp, $p, $h) = @_;
	return 'ratio undefined' if $h <= 0;
	return "$mine added nothing measurable" if $hp <= 0;
	return sprintf('heapprof/%s = %.2f (%s adds %.1fx as much)',
		$p, $hp / $h, $short{$p}, $h / $hp);
}

# Added time: what each profiler costs on top of running bare (per run,
# or per request), for each heapprof mode that records every allocation
# against the peers that do too, and for heapprof's default sampler
# against jemalloc's sampler at the same interval.
if ($bare) {
	for my $mine (grep { $med{$_} } 'i1', 'trace', 'trace-ring') {
		my $hp = $med{$mine}{cost} - $bare->{cost};
		my $ml = $mine eq 'i1' ? 'heapprof -i 1' : "heapprof $mine";
		my @peers = ('heaptrack', 'heaptrack-raw');
		push @peers, 'gperftools', 'massif' if $mine eq 'i1';
		for my $p (grep { my $p = $_; grep { $_ eq $p } @modes } @peers) {
			if (!$med{$p}) {
				printf "%s: %s $M->{cfmt}; %s has no successful run\n",
				  $M->{added}, $ml, $hp, $label{$p};
				next;
			}
			my ($h, $txt) = peer_added($p);
			printf "%s: %s $M->{cfmt}, %s -> %s\n", $M->{added}, $ml, $hp, $txt,
			  quotient($ml, $hp, $p eq 'heaptrack-raw' ? 'heaptrack' : $p, $h);
		}
	}
	if ($med{default} && grep { $_ eq 'jemalloc' } @modes) {
		my $hp = $med{default}{cost} - $bare->{cost};
		my $ml = sprintf("heapprof $M->{cfmt}", $hp);
		$ml .= sprintf(" (--unwind fp $M->{cfmt})", $med{fp}{cost} - $bare->{cost}) if $med{fp};
		if (!$med{jemalloc}) {
			print "default sampler: $ml; $label{jemalloc} has no successful run\n";
		} else {
			my ($h, $txt) = peer_added('jemalloc');
			printf "default sampler: %s, %s -> %s\n", $ml, $txt,
			  quotient('heapprof', $hp, 'jemalloc', $h);
		}
	}
}
print "\n";
