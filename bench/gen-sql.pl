#!/usr/bin/perl
# gen-sql.pl ROWS > workload.sql
#
# Writes the SQL script of the sqlite3 benchmark workload: three tables
# filled with about ROWS rows of deterministic pseudo-random data by
# individual INSERT statements in transactions of 5000, then indexes,
# joins and group-bys, an update and deletes. Lines starting with RESULT in
# the output are the checked results (the same under every profiler).
use strict;
use warnings;

my $rows = shift // 200000;
die "usage: gen-sql.pl ROWS\n" unless $rows =~ /^\d+$/ && $rows >= 100;

my $state = 20240601;
sub rnd {    # LCG, 31 bits; deterministic on every perl
	my ($n) = @_;
	$state = ($state * 1103515245 + 12345) % 2147483648;
	return ($state >> 8) % $n;
}

my @cities = qw(Lisbon Oslo Quito Hanoi Perth Lagos Lima Tunis Riga Kyiv
  Dakar Accra Porto Turin Graz Bergen Malmo Aarhus Split Bari);
my @status = qw(new paid shipped delivered cancelled returned);
my @words  = qw(alpha bravo charlie delta echo foxtrot golf hotel india
  juliet kilo lima mike november oscar papa quebec romeo sierra tango);

sub note {
	my $n = 1 + rnd(8);
	return join(' ', map { $words[rnd(scalar @words)] } 1 .. $n);
}

my $ncust  = int($rows / 10);
my $norder = int($rows / 2);
my $nitem  = $rows - $ncust - $norder;

print <<'SQL';
PRAGMA cache_size = -65536;
CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
  city TEXT NOT NULL, created INTEGER NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL,
  amount REAL NOT NULL, status TEXT NOT NULL, note TEXT);
CREATE TABLE item (order_id INTEGER NOT NULL, sku TEXT NOT NULL,
  qty INTEGER NOT NULL, price REAL NOT NULL);
SQL

my $in_tx = 0;
my $count = 0;
sub row {
	my ($sql) = @_;
	if (!$in_tx) { print "BEGIN;\n"; $in_tx = 1; }
	print $sql;
	if (++$count % 5000 == 0) { print "COMMIT;\n"; $in_tx = 0; }
}

for my $id (1 .. $ncust) {
	my $name = $words[rnd(scalar @words)] . '_' . $words[rnd(scalar @words)] . "_$id";
	row(sprintf("INSERT INTO customer VALUES(%d,'%s','%s',%d);\n",
		$id, $name, $cities[rnd(scalar @cities)], 1600000000 + rnd(100000000)));
}
for my $id (1 .. $norder) {
	row(sprintf("INSERT INTO orders VALUES(%d,%d,%d.%02d,'%s','%s');\n",
		$id, 1 + rnd($ncust), rnd(2000), rnd(100),
		$status[rnd(scalar @status)], note()));
}
for my $i (1 .. $nitem) {
	row(sprintf("INSERT INTO item VALUES(%d,'SKU-%05d',%d,%d.%02d);\n",
		1 + rnd($norder), rnd(20000), 1 + rnd(9), rnd(300), rnd(100)));
}
print "COMMIT;\n" if $in_tx;

print <<'SQL';
CREATE INDEX orders_customer ON orders(customer_id);
CREATE INDEX orders_status ON orders(status, amount);
CREATE INDEX item_order ON item(order_id);
CREATE INDEX item_sku ON item(sku);
CREATE INDEX customer_city ON customer(city);
SELECT 'RESULT count', (SELECT count(*) FROM customer),
  (SELECT count(*) FROM orders), (SELECT count(*) FROM item);
SELECT 'RESULT city', c.city, count(*), printf('%.2f', sum(o.amount))
  FROM customer c JOIN orders o ON o.customer_id = c.id
  GROUP BY c.city ORDER BY c.city;
SELECT 'RESULT status', status, count(*), printf('%.2f', avg(amount))
  FROM orders GROUP BY status ORDER BY status;
SELECT 'RESULT top', c.name, printf('%.2f', sum(i.qty * i.price))
  FROM customer c JOIN orders o ON o.customer_id = c.id
  JOIN item i ON i.order_id = o.id
  GROUP BY c.id ORDER BY sum(i.qty * i.price) DESC, c.id LIMIT 10;
SELECT 'RESULT sku', sku, sum(qty) FROM item GROUP BY sku
  ORDER BY sum(qty) DESC, sku LIMIT 5;
SELECT 'RESULT words', count(DISTINCT note), max(length(note)) FROM orders;
CREATE TEMP TABLE city_totals AS
  SELECT c.city, o.status, count(*) AS n, sum(o.amount) AS total
  FROM customer c JOIN orders o ON o.customer_id = c.id
  GROUP BY c.city, o.status;
SELECT 'RESULT pivot', count(*), printf('%.2f', sum(total)) FROM city_totals;
BEGIN;
UPDATE orders SET amount = amount * 1.1, note = note || ' repriced'
  WHERE status = 'new';
DELETE FROM item WHERE order_id IN
  (SELECT id FROM orders WHERE status IN ('cancelled', 'returned'));
DELETE FROM orders WHERE status IN ('cancelled', 'returned');
DELETE FROM customer WHERE id NOT IN (SELECT customer_id FROM orders);
COMMIT;
SELECT 'RESULT after', (SELECT count(*) FROM customer),
  (SELECT count(*) FROM orders), (SELECT count(*) FROM item),
  printf('%.2f', (SELECT sum(amount) FROM orders));
SQL
