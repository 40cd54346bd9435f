#!/usr/bin/perl
# summarize.pl RESULTS.tsv NOTES.tsv WORKLOAD "MODES"
#
# Prints the table of one workload from the raw results bench/run.sh
# wrote (one line per run: workload mode rep status seconds maxrss_kib
# cpu_seconds output_bytes why). Medians over the successful runs of each
# mode; ratios and extra memory against the bare median, and for the
# profilers of another allocator (jemalloc, gperftools' tcmalloc) against
# that allocator bare too; and the "added time" comparisons: heapprof -i 1
# (every allocation) with heaptrack, gperftools and massif, and heapprof's
# default sampler with jemalloc's at the same interval.
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
	'i1'            => 'heapprof record -i 1',
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

my (%ok, %fail, %skip, %why);
open(my $fh, '<', $tsv) or die "summarize.pl: $tsv: $!\n";
while (<$fh>) {
	chomp;
	my ($w, $m, $rep, $st, $s, $rss, $cpu, $bytes, $why) = split /\t/;
	next unless $w eq $wl;
	if ($st =~ /^skipped/) {
		$skip{$m} = $st;
	} elsif ($st eq 'exit:0') {
		push @{ $ok{$m} }, [$s, $rss, $cpu, $bytes];
	} else {
		push @{ $fail{$m} }, $st;
		$why{$m} //= $why if defined $why && length $why;
	}
}
close $fh;

my $desc = '';
if (open(my $nf, '<', $notes)) {
	while (<$nf>) {
		chomp;
		my ($w, $d) = split /\t/, $_, 2;
		$desc = $d if $w eq $wl;
	}
}

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

my %med;
for my $m (@modes) {
	next unless $ok{$m};
	$med{$m} = {
		s   => median(col($m, 0)),
		rss => median(col($m, 1)),
		cpu => median(col($m, 2)),
		out => median(col($m, 3)),
		min => (sort { $a <=> $b } col($m, 0))[0],
		max => (sort { $b <=> $a } col($m, 0))[0],
	};
}
my $bare = $med{bare};

print "== $wl: $desc ==\n";
my $fmt = "%-32s %5s %9s %17s %7s %7s %9s %7s %8s  %s\n";
printf $fmt, 'mode', 'runs', 'median s', 'min-max s', 'x bare', '(min)',
  '+RSS MiB', 'CPU s', 'out MiB', 'notes';
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
	my $ratio = $bare && $bare->{s} > 0 ? sprintf('%.2f', $d->{s} / $bare->{s}) : '-';
	# The same ratio between the fastest runs: on a machine shared with
	# other load, interference only ever adds time.
	my $rmin = $bare && $bare->{min} > 0 ? sprintf('%.2f', $d->{min} / $bare->{min}) : '-';
	my $rss = $bare ? sprintf('%+.1f', ($d->{rss} - $bare->{rss}) / 1024) : '-';
	$rss = sprintf('%.1f', $d->{rss} / 1024) . ' abs' if $m eq 'bare';
	my $out = ($m eq 'bare' || $m eq 'idle' || $m =~ /-bare$/) ? '-' : sprintf('%.1f', $d->{out} / 1048576);
	my $line = sprintf $fmt, $name, "$nok/$nall", sprintf('%.3f', $d->{s}),
	  sprintf('%.3f-%.3f', $d->{min}, $d->{max}), $ratio, $rmin, $rss,
	  sprintf('%.2f', $d->{cpu}), $out, $f ? "failed: $f" : '';
	$line =~ s/\s+$//;
	print "$line\n";
}

# The profilers on an allocator of their own against that allocator bare:
# their own cost, without the allocators' difference.
for my $m (grep { $own{$_} && $med{$_} } @modes) {
	my $o = $med{ $own{$m} } or next;
	next unless $o->{s} > 0 && $o->{min} > 0;
	printf "own allocator: %s x%.2f (min x%.2f) of %s, %+.3f s; peak RSS %+.1f MiB over it\n",
	  $short{$m}, $med{$m}{s} / $o->{s}, $med{$m}{min} / $o->{min},
	  $short{ $own{$m} }, $med{$m}{s} - $o->{s}, ($med{$m}{rss} - $o->{rss}) / 1024;
}

# What peer $p adds to the time of running its allocator bare (to bare
# when it has no allocator of its own, or that was not measured), and the
# text saying so.
sub peer_added {
	my ($p) = @_;
	my $base = $own{$p} && $med{ $own{$p} } ? $own{$p} : 'bare';
	my $h = $med{$p}{s} - $med{$base}{s};
	my $txt = sprintf('%s %+.3f s', $short{$p}, $h);
	$txt .= sprintf(' over %s (%+.3f s over bare)', $short{$base}, $med{$p}{s} - $bare->{s})
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

# Added time: what each profiler costs on top of running bare, for each
# heapprof mode that records every allocation against the peers that do
# too, and for heapprof's default sampler against jemalloc's sampler at
# the same interval.
if ($bare) {
	for my $mine (grep { $med{$_} } 'i1', 'trace', 'trace-ring') {
		my $hp = $med{$mine}{s} - $bare->{s};
		my $ml = $mine eq 'i1' ? 'heapprof -i 1' : "heapprof $mine";
		my @peers = ('heaptrack', 'heaptrack-raw');
		push @peers, 'gperftools', 'massif' if $mine eq 'i1';
		for my $p (grep { my $p = $_; grep { $_ eq $p } @modes } @peers) {
			if (!$med{$p}) {
				printf "added time: %s %+.3f s; %s has no successful run\n",
				  $ml, $hp, $label{$p};
				next;
			}
			my ($h, $txt) = peer_added($p);
			printf "added time: %s %+.3f s, %s -> %s\n", $ml, $hp, $txt,
			  quotient($ml, $hp, $p eq 'heaptrack-raw' ? 'heaptrack' : $p, $h);
		}
	}
	if ($med{default} && grep { $_ eq 'jemalloc' } @modes) {
		my $hp = $med{default}{s} - $bare->{s};
		my $ml = sprintf('heapprof %+.3f s', $hp);
		$ml .= sprintf(' (--unwind fp %+.3f s)', $med{fp}{s} - $bare->{s}) if $med{fp};
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
