#!/usr/bin/perl
# accuracy.pl HEAPPROF WORKLOAD DESC KEY=FILE...
#
# Prints the accuracy tables of one workload (bench/accuracy.sh runs the
# profiles). KEY is one of:
#   exact      heapprof record -i 1 (the reference)
#   default    heapprof record (-i 4096, DWARF)
#   exactfp    heapprof record -i 1 --unwind fp (the reference of fp)
#   fp         heapprof record --unwind fp
#   heaptrack  heaptrack's .zst trace
#   gperftools the last .heap file gperftools wrote (the one at exit)
#   jemalloc   the .heap file jemalloc wrote at exit (prof_final)
#   massif     massif's output file
# and FILE is the profile, or "!" and why there is none.
#
# 1. Sampled against exact: the call stacks of the exact profile with the
#    most bytes allocated (top 10, top 50); for each, the relative error
#    of the sampled profile's estimate of its bytes; the mean and the
#    largest absolute error. The same for bytes in use at exit (top 10 by
#    bytes in use) when the exact profile has at least 1 MiB in use then.
#    And the error of the totals (bytes and allocations). A stack is its
#    frames from the root, each "module!function" (the module's file
#    name; the ELF address in the module when the function has no name),
#    so two runs' stacks match whatever their load addresses.
# 2. Totals: the allocations and bytes allocated each profiler reports,
#    against heapprof -i 1.
use strict;
use warnings;
use POSIX qw(floor);

my ($heapprof, $wl, $desc, @args) = @ARGV;
die "usage: accuracy.pl HEAPPROF WORKLOAD DESC KEY=FILE...\n" unless defined $desc;
my %file;
for (@args) {
	my ($k, $v) = /^([a-z]+)=(.*)$/s or die "accuracy.pl: bad argument '$_'\n";
	$file{$k} = $v;
}
my @TOP = (10, 50);
my $INUSE_MIN = 1 << 20;

# ---- reading heapprof profiles ----------------------------------------

# Splits RFC 4180 CSV text (heapprof sql --csv) into rows of fields.
sub parse_csv {
	my ($text) = @_;
	my (@rows, @row);
	my $field = '';
	my $pos = 0;
	my $len = length $text;
	while ($pos < $len) {
		if (substr($text, $pos, 1) eq '"') {
			# Quoted: up to the lone closing quote; "" is one quote.
			$pos++;
			while (1) {
				my $q = index($text, '"', $pos);
				die "accuracy.pl: unterminated quote in CSV\n" if $q < 0;
				$field .= substr($text, $pos, $q - $pos);
				if (substr($text, $q + 1, 1) eq '"') {
					$field .= '"';
					$pos = $q + 2;
				} else {
					$pos = $q + 1;
					last;
				}
			}
		}
		my $c = substr($text, $pos, 1);
		if ($c eq ',') {
			push @row, $field;
			$field = '';
			$pos++;
		} elsif ($c eq "\n" || $c eq "\r" || $pos >= $len) {
			push @row, $field;
			push @rows, [@row];
			@row = ();
			$field = '';
			$pos++ if $pos < $len;
			$pos++ if $c eq "\r" && substr($text, $pos, 1) eq "\n";
		} else {
			my $end = $pos;
			$end++ while $end < $len && substr($text, $end, 1) !~ /[,\r\n]/;
			$field .= substr($text, $pos, $end - $pos);
			$pos = $end;
		}
	}
	push @row, $field if length $field || @row;
	push @rows, [@row] if @row;
	return @rows;
}

# Runs QUERY on profile DB; the rows without the header.
sub sql {
	my ($db, $query) = @_;
	open(my $ph, '-|', $heapprof, 'sql', $db, $query, '--csv')
	  or die "accuracy.pl: cannot run $heapprof: $!\n";
	local $/;
	my $text = <$ph>;
	close $ph or die "accuracy.pl: heapprof sql $db failed\n";
	my @rows = parse_csv($text // '');
	shift @rows;
	return @rows;
}

# Reads a heapprof profile: per stack (symbolized path), the bytes and
# objects allocated and in use at the end; and the totals.
sub read_heapprof {
	my ($db) = @_;
	my %frame;
	for my $r (sql($db, 'select f.id, f.name, f.rel_pc, m.name from stack_profile_frame f '
		  . 'left join stack_profile_mapping m on m.id = f.mapping')) {
		my ($id, $name, $rel_pc, $module) = @$r;
		$module = '?' unless defined $module && length $module;
		$module =~ s{.*/}{};
		$name = sprintf('0x%x', $rel_pc || 0) unless defined $name && length $name;
		$frame{$id} = "$module!$name";
	}
	my (%parent, %fid);
	for my $r (sql($db, 'select id, parent_id, frame_id from stack_profile_callsite')) {
		$parent{ $r->[0] } = $r->[1];
		$fid{ $r->[0] } = $r->[2];
	}
	my %path;
	my $path_of;
	$path_of = sub {
		my ($cs) = @_;
		return $path{$cs} if exists $path{$cs};
		# Iterative from the leaf up, so a deep stack does not recurse.
		my @chain;
		my $c = $cs;
		while (defined $c && length $c && !exists $path{$c}) {
			push @chain, $c;
			$c = $parent{$c};
		}
		my $p = defined $c && length $c ? $path{$c} : '';
		for my $x (reverse @chain) {
			my $f = $frame{ $fid{$x} // '' } // '[unknown]';
			$p = length $p ? "$p;$f" : $f;
			$path{$x} = $p;
		}
		return $path{$cs};
	};
	my (%st, %leaf, %tot);
	for my $r (sql($db, 'select callsite_id, sum(max(count, 0)), sum(max(size, 0)), '
		  . 'sum(count), sum(size) from heap_profile_allocation group by callsite_id')) {
		my ($cs, $ac, $ab, $lc, $lb) = @$r;
		my $p = length($cs) ? $path_of->($cs) : '[unknown]';
		my $l = length($cs) ? $frame{ $fid{$cs} // '' } // '[unknown]' : '[unknown]';
		my $s = $st{$p} //= { ac => 0, ab => 0, lc => 0, lb => 0 };
		my $f = $leaf{$l} //= { ac => 0, ab => 0, lc => 0, lb => 0 };
		my %v = (ac => $ac, ab => $ab, lc => $lc, lb => $lb);
		for (keys %v) {
			$s->{$_} += $v{$_};
			$f->{$_} += $v{$_};
			$tot{$_} += $v{$_};
		}
	}
	$tot{$_} //= 0 for qw(ac ab lc lb);
	return (\%st, \%leaf, \%tot);
}

# ---- reading the peers' totals ----------------------------------------

# heaptrack: heaptrack_print's summary has the allocation calls; the
# bytes come from its size histogram (size, count per line).
sub heaptrack_totals {
	my ($f) = @_;
	my $hist = "$f.hist";
	open(my $ph, '-|', 'heaptrack_print', '-f', $f, '-p', '0', '-a', '0', '-T', '0',
		'-l', '0', '-s', '0', '-n', '0', '-H', $hist)
	  or return (undef, undef, "cannot run heaptrack_print: $!");
	my $calls;
	while (<$ph>) {
		$calls = $1 if /^calls to allocation functions: (\d+)/;
	}
	close $ph;
	return (undef, undef, 'heaptrack_print failed') unless defined $calls;
	my $bytes;
	if (open(my $hf, '<', $hist)) {
		$bytes = 0;
		while (<$hf>) {
			my ($size, $n) = split;
			$bytes += $size * $n if defined $n;
		}
		close $hf;
	}
	unlink $hist;
	return ($calls, $bytes, "heaptrack_print's allocation calls; bytes: its size histogram");
}

# gperftools: "heap profile: INUSE_OBJS: INUSE_BYTES [ALLOC_OBJS: ALLOC_BYTES] @ heapprofile"
sub gperftools_totals {
	my ($f) = @_;
	open(my $fh, '<', $f) or return (undef, undef, "$f: $!");
	my $h = <$fh>;
	close $fh;
	return (undef, undef, 'no "heap profile:" header')
	  unless defined $h && $h =~ /^heap profile:\s*(\d+):\s*(\d+)\s*\[\s*(\d+):\s*(\d+)\]/;
	return ($3, $4, 'header of the profile at exit');
}

# jemalloc (heap_v2/PERIOD): per stack "t*: CUROBJS: CURBYTES [ACCUMOBJS:
# ACCUMBYTES]" counts the sampled allocations; each is scaled to an
# estimate as jeprof does it: by 1 / (1 - exp(-AVG / PERIOD)), AVG the
# stack's mean sampled size.
sub jemalloc_totals {
	my ($f) = @_;
	open(my $fh, '<', $f) or return (undef, undef, "$f: $!");
	my $first = <$fh> // '';
	my ($period) = $first =~ m{^heap_v2/(\d+)} or return (undef, undef, 'not a heap_v2 profile');
	my ($objs, $bytes, $samples) = (0, 0, 0);
	my $in_stack = 0;
	while (<$fh>) {
		if (/^@/) {
			$in_stack = 1;
		} elsif ($in_stack && /^\s*t\*:\s*\d+:\s*\d+\s*\[\s*(\d+):\s*(\d+)\s*\]/) {
			my ($n, $b) = ($1, $2);
			$in_stack = 0;
			next unless $n > 0;
			my $scale = 1 / (1 - exp(-($b / $n) / $period));
			$objs += $n * $scale;
			$bytes += $b * $scale;
			$samples += $n;
		} elsif (/^MAPPED_LIBRARIES/) {
			last;
		}
	}
	close $fh;
	return (floor($objs + 0.5), floor($bytes + 0.5),
		"estimate: $samples samples scaled as jeprof does");
}

# ---- the tables -------------------------------------------------------

sub rel { my ($est, $ex) = @_; return $ex ? ($est - $ex) / $ex : undef; }
sub pct { my ($x) = @_; return defined $x ? sprintf('%+.2f%%', 100 * $x) : '-'; }
sub apct { my ($x) = @_; return defined $x ? sprintf('%.1f%%', 100 * $x) : '-'; }

# Mean and max |relative error| of the estimates in $smp of the $k
# entries of $ex with the largest $key, among those of at least $min;
# the number of them $smp lacks, how many there were, and the smallest.
sub top_err {
	my ($ex, $smp, $key, $k, $min) = @_;
	my @top = grep { $ex->{$_}{$key} >= $min && $ex->{$_}{$key} > 0 }
	  sort { $ex->{$b}{$key} <=> $ex->{$a}{$key} || $a cmp $b } keys %$ex;
	splice(@top, $k) if @top > $k;
	return (undef, undef, 0, 0, 0) unless @top;
	my ($sum, $max, $missing) = (0, 0, 0);
	for my $p (@top) {
		my $est = $smp->{$p} ? $smp->{$p}{$key} : 0;
		$missing++ unless $smp->{$p};
		my $e = abs(($est - $ex->{$p}{$key}) / $ex->{$p}{$key});
		$sum += $e;
		$max = $e if $e > $max;
	}
	return ($sum / @top, $max, $missing, scalar @top, $ex->{ $top[-1] }{$key});
}

print "== accuracy: $wl: $desc ==\n";

my %prof;
for my $k (qw(exact default exactfp fp)) {
	next unless defined $file{$k} && $file{$k} !~ /^!/;
	my ($st, $leaf, $tot) = eval { read_heapprof($file{$k}) };
	if (!$st) {
		chomp(my $e = $@ || 'unknown error');
		$file{$k} = "!cannot read $file{$k}: $e";
		next;
	}
	my ($iv) = eval { map { $_->[0] } sql($file{$k}, 'select max(sampling_interval) from heapprof_process') };
	$prof{$k} = { st => $st, leaf => $leaf, tot => $tot, interval => $iv };
}

my %label = (
	exact      => 'heapprof record -i 1',
	default    => 'heapprof record (-i 4096)',
	exactfp    => 'heapprof -i 1 --unwind fp',
	fp         => 'heapprof --unwind fp',
	heaptrack  => 'heaptrack',
	gperftools => 'gperftools HEAPPROFILE',
	jemalloc   => 'jemalloc prof (sample 4096)',
	massif     => 'valgrind --tool=massif',
);

# Table 1: sampled against exact.
my $fmt1 = "%-34s %7s %7s %15s %15s %7s %19s %9s %9s\n";

# Stacks with fewer bytes than this many sampling intervals are left
# out: with fewer than 64 expected samples (a standard deviation above
# 12.5%) a sampled profile does not claim to resolve them.
my $MIN_SAMPLES = 64;

# One row: the sampled profile $s against the exact $e, by whole stack
# ('st') or by leaf function ('leaf').
sub compare_row {
	my ($name, $s, $e, $by) = @_;
	my ($sst, $est) = ($prof{$s}{$by}, $prof{$e}{$by});
	my $interval = $prof{$s}{interval} || 4096;
	my $min = $MIN_SAMPLES * $interval;
	my (@cells, $missing, $sd);
	for my $k (@TOP) {
		my ($mean, $max, $miss, $n, $smallest) = top_err($est, $sst, 'ab', $k, $min);
		push @cells, defined $mean ? sprintf('%s / %s', apct($mean), apct($max)) : '-';
		$missing = "$miss/$n";
		# The scale of the sampling error: the estimate for B bytes
		# in allocations below the interval I has a standard
		# deviation of sqrt(I B), sqrt(I / B) relative; B = the
		# smallest of the top 10.
		$sd //= $smallest > 0 ? apct(sqrt($interval / $smallest)) : '-';
	}
	my $inuse;
	if ($prof{$e}{tot}{lb} >= $INUSE_MIN) {
		my ($mean, $max, $miss, $n) = top_err($est, $sst, 'lb', 10, $min);
		$inuse = defined $mean ? sprintf('%s / %s', apct($mean), apct($max)) . ($n < 10 ? " ($n)" : '') : '-';
	} else {
		$inuse = sprintf('(%.0f KiB)', $prof{$e}{tot}{lb} / 1024);
	}
	printf $fmt1, $name, scalar(keys %$est), $sd, @cells, $missing, $inuse,
	  pct(rel($prof{$s}{tot}{ab}, $prof{$e}{tot}{ab})),
	  pct(rel($prof{$s}{tot}{ac}, $prof{$e}{tot}{ac}));
}

my @pairs = grep { defined $file{ $_->[0] } }
  (['default', 'exact', 'default vs -i 1'], ['fp', 'exactfp', '--unwind fp vs -i 1 --unwind fp']);
if (@pairs) {
	print "heapprof's sampled profiles against the exact ones: |relative error| of the estimated bytes,\n"
	  . "mean / max over the exact profile's top N call stacks (or leaf functions) by bytes allocated,\n"
	  . "of those with at least $MIN_SAMPLES sampling intervals of bytes\n";
	printf $fmt1, 'sampled against exact', 'stacks', 'sd<=', 'top10 alloc', 'top50 alloc',
	  'miss/n', 'top10 in use', 'bytes', 'allocs';
	for my $pr (@pairs) {
		my ($s, $e, $name) = @$pr;
		if (!$prof{$s} || !$prof{$e}) {
			my $k = !$prof{$s} ? $s : $e;
			(my $why = $file{$k} // '!not run') =~ s/^!//;
			printf "%-34s no comparison: %s: %s\n", $name, $label{$k}, $why;
			next;
		}
		compare_row($name, $s, $e, 'st');
		compare_row('  the same by leaf function', $s, $e, 'leaf');
	}
	print "\n";
}

# Table 2: totals against heapprof -i 1.
my $ref = $prof{exact} ? $prof{exact}{tot} : undef;
print "allocation totals against heapprof -i 1:\n";
my $fmt = "%-28s %12s %18s %16s %18s  %s\n";
printf $fmt, 'profiler', 'allocations', 'vs -i 1', 'bytes allocated', 'vs -i 1', 'notes';
for my $k (qw(exact exactfp default fp heaptrack gperftools jemalloc massif)) {
	next unless defined $file{$k};
	my ($n, $b, $note);
	if ($file{$k} =~ /^!(.*)/s) {
		$note = $1;
	} elsif ($prof{$k}) {
		($n, $b) = ($prof{$k}{tot}{ac}, $prof{$k}{tot}{ab});
		$note = $k eq 'exact' ? 'the reference' : $k =~ /^exact/ ? 'exact' : 'estimate';
	} elsif ($k eq 'heaptrack') {
		($n, $b, $note) = heaptrack_totals($file{$k});
	} elsif ($k eq 'gperftools') {
		($n, $b, $note) = gperftools_totals($file{$k});
	} elsif ($k eq 'jemalloc') {
		($n, $b, $note) = jemalloc_totals($file{$k});
	} elsif ($k eq 'massif') {
		$note = 'reports no allocation count or total';
	}
	my $vs = sub {
		my ($x, $r) = @_;
		return '-' unless defined $x && $ref && $k ne 'exact';
		return sprintf('%+d (%s)', $x - $r, pct(rel($x, $r)));
	};
	printf $fmt, $label{$k}, $n // '-', $vs->($n, $ref ? $ref->{ac} : 0),
	  $b // '-', $vs->($b, $ref ? $ref->{ab} : 0), $note // '';
}
print "\n";
