#!/usr/bin/perl
# summarize.pl RESULTS.tsv NOTES.tsv WORKLOAD "MODES"
#
# Prints the table of one workload from the raw results bench/run.sh
# wrote (one line per run: workload mode rep status seconds maxrss_kib
# cpu_seconds output_bytes). Medians over the successful runs of each
# mode; ratios and extra memory against the bare median; and the "added
# time" comparison of heapprof -i 1 (every allocation) with heaptrack.
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
	my $out = ($m eq 'bare' || $m eq 'idle') ? '-' : sprintf('%.1f', $d->{out} / 1048576);
	my $line = sprintf $fmt, $name, "$nok/$nall", sprintf('%.3f', $d->{s}),
	  sprintf('%.3f-%.3f', $d->{min}, $d->{max}), $ratio, $rmin, $rss,
	  sprintf('%.2f', $d->{cpu}), $out, $f ? "failed: $f" : '';
	$line =~ s/\s+$//;
	print "$line\n";
}

# Added time: what each profiler costs on top of running bare, for
# each heapprof mode that records every allocation, against heaptrack.
for my $mine (grep { $med{$_} } 'i1', 'trace', 'trace-ring') {
	last unless $bare;
	my $hp = $med{$mine}{s} - $bare->{s};
	my $ml = $mine eq 'i1' ? 'heapprof -i 1' : "heapprof $mine";
	for my $ht ('heaptrack', 'heaptrack-raw') {
		next unless grep { $_ eq $ht } @modes;
		if (!$med{$ht}) {
			printf "added time: %s +%.3f s; %s has no successful run\n",
			  $ml, $hp, $label{$ht};
			next;
		}
		my $h = $med{$ht}{s} - $bare->{s};
		my $cmp;
		if ($h <= 0) {
			$cmp = 'ratio undefined';
		} elsif ($hp <= 0) {
			$cmp = "$ml added nothing measurable";
		} else {
			$cmp = sprintf('heapprof/heaptrack = %.2f (%s adds %.1fx as much)',
				$hp / $h, $label{$ht}, $h / $hp);
		}
		printf "added time: %s +%.3f s, %s +%.3f s -> %s\n",
		  $ml, $hp, $label{$ht}, $h, $cmp;
	}
}
print "\n";
