#!/usr/bin/perl
# alloc.pl ROUNDS
#
# The perl benchmark workload: an allocation-heavy, deterministic script
# of the kind perl is used for (parse text records, index them in hashes,
# sort, build strings, drop old entries). Debian's perl takes its memory
# from the system malloc, so every string, array and hash body below goes
# through the profiled allocator. Prints RESULT lines that must be the
# same under every profiler.
use strict;
use warnings;

my $rounds = shift // 40;
die "usage: alloc.pl ROUNDS\n" unless $rounds =~ /^\d+$/ && $rounds >= 1;

my $state = 4242;
sub rnd {
	my ($n) = @_;
	$state = ($state * 1103515245 + 12345) % 2147483648;
	return ($state >> 8) % $n;
}

my @words = map { join('', map { chr(97 + rnd(26)) } 1 .. 3 + rnd(8)) }
  1 .. 2000;

my %index;      # word -> [ record ids ]
my %records;    # id -> { fields }
my $next_id = 0;
my $checksum = 0;

for my $round (1 .. $rounds) {
	# Make and parse a batch of text records.
	my @lines;
	for (1 .. 2500) {
		my @f = map { $words[rnd(scalar @words)] } 1 .. 2 + rnd(6);
		push @lines, join(',', $next_id++, rnd(100000), @f);
	}
	for my $line (@lines) {
		my ($id, $val, @tags) = split /,/, $line;
		(my $title = join(' ', @tags)) =~ s/(\w+)/\u$1/g;
		$records{$id} = { val => $val, tags => \@tags, title => $title };
		push @{ $index{$_} }, $id for @tags;
	}

	# Query: the heaviest tags of this round.
	my %weight;
	for my $w (keys %index) {
		my $sum = 0;
		$sum += ($records{$_} ? $records{$_}{val} : 0) for @{ $index{$w} };
		$weight{$w} = $sum;
	}
	my @top = (sort { $weight{$b} <=> $weight{$a} || $a cmp $b }
		keys %weight)[0 .. 4];
	$checksum = ($checksum * 31 + length(join('|', @top))) % 1000000007;

	# Build a report string piece by piece, then throw it away.
	my $report = '';
	for my $id (sort { $a <=> $b } keys %records) {
		next if $id % 7;
		$report .= sprintf("%d:%s;", $id, $records{$id}{title});
	}
	$checksum = ($checksum * 31 + length($report)) % 1000000007;

	# Expire the oldest records and prune the index.
	my $cutoff = $next_id - 10000;
	for my $id (keys %records) {
		delete $records{$id} if $id < $cutoff;
	}
	for my $w (keys %index) {
		my @keep = grep { $_ >= $cutoff } @{ $index{$w} };
		if (@keep) {
			$index{$w} = \@keep;
		} else {
			delete $index{$w};
		}
	}
}

printf "RESULT perl rounds=%d records=%d words=%d checksum=%d\n",
  $rounds, scalar(keys %records), scalar(keys %index), $checksum;
