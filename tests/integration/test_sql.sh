#!/usr/bin/env bash
# test_sql.sh BUILD: the interactive `heapprof sql` shell, driven through a
# pseudo-terminal with script(1) (util-linux): multi-line statements, the
# dot commands, an error followed by a working query, .quit and Ctrl-D,
# history; and that a query piped on stdin (not a terminal) still runs
# without the shell.
#
# All input is written at once; the terminal echoes it before the shell
# reads it, so the checks look for result lines that no input line holds
# (a whole line "answer", not "as answer").
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/known"

if ! command -v script >/dev/null 2>&1; then
	t_begin "prerequisites"
	t_fail "script(1) is missing (apt-get install util-linux)"
	t_summary
fi

KDB="$T_DIR/known.db"
t_begin "sql shell: profile to query"
hp_record known -i 1 -o "$KDB" -- "$PROGS/known"
assert_eq 7 "$REC_RC" "heapprof record exit status" || show_err known
db_valid "$KDB" || t_summary

# shell NAME [ARGS...] <input: run `heapprof sql KDB ARGS...` on a terminal
# fed with stdin; its output (CRs dropped) in $T_DIR/NAME.out, status in
# SH_RC.  HOME is $T_DIR, for the history file.
shell() {
	local name=$1 cmd
	shift
	cmd=$(printf '%q ' "$HP" sql "$KDB" "$@")
	SH_RC=0
	HOME=$T_DIR TERM=dumb timeout -k 5 30 script -q -e -c "$cmd" /dev/null \
		>"$T_DIR/$name.raw" 2>&1 || SH_RC=$?
	if [ "$SH_RC" = 124 ] || [ "$SH_RC" = 137 ]; then
		t_fail "the shell did not finish within 30 s"
	fi
	tr -d '\r' <"$T_DIR/$name.raw" >"$T_DIR/$name.out"
	SH_OUT=$(cat "$T_DIR/$name.out")
}

# has_line REGEX MSG: a whole line of the last shell's output matches.
has_line() {
	if ! grep -Eq -- "^$1\$" "$T_DIR/$SH_NAME.out"; then
		t_fail "$2: no line /^$1\$/ in: $(head -c 1500 "$T_DIR/$SH_NAME.out")"
		return 1
	fi
}

ts=$(sqlq "$KDB" "SELECT max(ts) FROM heapprof_dump;")

t_begin "sql shell: multi-line query, .tables, error then a query, .quit"
SH_NAME=main
shell main <<EOF
select count(*) as ndumps,
  max(reason) as why
  from heapprof_dump;
.tables
selec oops;
select 40 + 2 as answer;
select name, cumulative_size
  from experimental_flamegraph($ts, 1, 'native')
  where name = 'do_malloc';
.quit
select 'after' || 'quit' as never;
EOF
assert_eq 0 "$SH_RC" "exit status after .quit"
has_line 'heapprof> .*' "prompt"
has_line ' *\.\.\.> .*' "continuation prompt of a multi-line statement"
has_line 'ndumps +why' "multi-line query: header"
has_line ' +2 +peak' "multi-line query: row (the peak's dump and the end's)"
has_line '\(1 row\)' "row count line"
for t in heap_profile_allocation stack_profile_callsite stack_profile_frame \
	stack_profile_mapping stack_profile_symbol process heapprof_dump; do
	has_line "$t" ".tables lists $t"
done
has_line 'experimental_flamegraph .*' ".tables mentions experimental_flamegraph"
has_line 'heapprof: sql: near "selec": syntax error' "error message"
has_line 'answer' "query after the error: header"
has_line ' *42' "query after the error: value"
has_line 'do_malloc +60000' "experimental_flamegraph in the shell"
assert_no_match 'afterquit' "$SH_OUT" "nothing runs after .quit"

t_begin "sql shell: .mode, .schema, .help, unknown command, ; alone"
SH_NAME=modes
shell modes <<'EOF'
.mode csv
select 'a,b' as q, 7 as seven;
.mode
.mode table
select 'x' || 'y' as joined;
.mode xml
.schema process
.schema experimental_flamegraph
.schema nosuchtable
.help
.bogus
;
select 'still' || 'alive' as s;
.exit
EOF
assert_eq 0 "$SH_RC" "exit status after .exit"
has_line 'q,seven' ".mode csv: header"
has_line '"a,b",7' ".mode csv: quoted row"
has_line 'csv' ".mode prints the mode"
has_line 'joined' ".mode table: header"
has_line '------' ".mode table: rule"
has_line 'xy' ".mode table: row"
has_line "heapprof: sql: unknown mode 'xml' \\(table, column, csv, list or line\\)" ".mode xml"
has_line 'CREATE TABLE process\(upid INTEGER PRIMARY KEY.*\);' ".schema process"
has_line 'CREATE TABLE experimental_flamegraph\(id INTEGER, ts INTEGER, depth INTEGER, name TEXT.*HIDDEN.*\);' \
	".schema experimental_flamegraph"
has_line 'heapprof: sql: no such table: nosuchtable' ".schema of a missing table"
has_line '\.quit, \.exit +leave.*' ".help"
has_line "heapprof: sql: unknown command '.bogus' \\(.help lists them\\)" "unknown dot command"
has_line 'stillalive' "query after the errors"
assert_no_match 'empty query' "$SH_OUT" "';' alone is not an error in the shell"

t_begin "sql shell: Ctrl-D (end of input) leaves; --csv; history"
SH_NAME=eof
rm -f "$T_DIR/.heapprof_history"
shell eof --csv <<'EOF'
select 6 * 7 as product;
select 'unfinished'
EOF
assert_eq 0 "$SH_RC" "exit status at end of input"
has_line 'product' "--csv: header"
has_line '42' "--csv: value"
assert_no_match '^unfinished$' "$(cat "$T_DIR/eof.out")" "an unfinished statement is dropped"
if [ -f "$T_DIR/.heapprof_history" ]; then
	assert_match 'product' "$(cat "$T_DIR/.heapprof_history")" "history file holds the query"
else
	t_fail "no history file $T_DIR/.heapprof_history"
fi

t_begin "sql: stdin not a terminal reads the query from stdin"
rc=0
out=$(printf 'select 40 + 2 as answer;\n' | timeout -k 5 30 "$HP" sql "$KDB" 2>&1) || rc=$?
assert_eq 0 "$rc" "exit status"
assert_eq "answer
------
    42
(1 row)" "$out" "output"
rc=0
out=$(printf 'selec oops;\n' | timeout -k 5 30 "$HP" sql "$KDB" 2>&1) || rc=$?
assert_eq 1 "$rc" "exit status of a bad query"
assert_eq 'heapprof: sql: near "selec": syntax error' "$out" "one-line error"
rc=0
out=$(printf '.tables heapprof_dump%%\nselect 6 * 7 as product;\n.mode csv\n.headers off\nselect 1, 2;\n' |
	timeout -k 5 30 "$HP" sql "$KDB" 2>&1) || rc=$?
assert_eq 0 "$rc" "dot commands from a pipe: exit status"
assert_eq "heapprof_dump
heapprof_dump_memory
product
-------
     42
(1 row)

1,2" "$out" "dot commands and statements from a pipe, in turn"

# oneshot NAME ARGS...: `heapprof sql KDB ARGS...` with stdin not a
# terminal; stdout in OUT, stderr in ERR, status in RC.
oneshot() {
	local name=$1
	shift
	RC=0
	timeout -k 5 30 "$HP" sql "$KDB" "$@" >"$T_DIR/$name.1" 2>"$T_DIR/$name.2" </dev/null || RC=$?
	OUT=$(cat "$T_DIR/$name.1")
	ERR=$(cat "$T_DIR/$name.2")
}

t_begin "sql QUERY: dot commands in the argument, as in the shell"
oneshot tables '.tables heapprof_dump%'
assert_eq "0|heapprof_dump
heapprof_dump_memory|" "$RC|$OUT|$ERR" ".tables PATTERN"
oneshot indexes '.indexes heapprof_dump'
assert_eq "0|heapprof_dump_upid_ts|" "$RC|$OUT|$ERR" ".indexes TABLE"
oneshot schema '.schema process'
assert_eq 0 "$RC" ".schema TABLE: exit status"
assert_match '^CREATE TABLE process\(upid INTEGER PRIMARY KEY.*\);$' "$OUT" ".schema TABLE"
oneshot help '.help'
assert_eq 0 "$RC" ".help: exit status"
assert_match '^\.indexes \[TABLE\] +list the indexes' "$OUT" ".help lists .indexes"
assert_match '^\.headers on\|off ' "$OUT" ".help lists .headers"
oneshot headers '.headers off' 'select 40 + 2 as answer, 7 as b; select 3'
assert_eq "0|42  7

3|" "$RC|$OUT|$ERR" ".headers off, then two statements in one argument"
oneshot modes '.mode list' "select 1 as a, NULL as b, 'x|y' as c;" \
	'.mode line' "select 7 as a, 'long' as bbbb; select 8 as a, NULL as bbbb;" \
	'.mode csv' '.headers off' "select 'a,b', 4;" \
	'.mode column' '.headers on' '.mode' 'select 5 as five'
assert_eq "0|a|b|c
1||x|y

   a = 7
bbbb = long

   a = 8
bbbb = NULL

\"a,b\",4
table

five
----
   5
(1 row)|" "$RC|$OUT|$ERR" ".mode list, line, csv, column; several QUERY arguments in turn"
oneshot multi ".mode csv
select 6 * 7 as product;
.headers off
select 'x'
  || 'y';"
assert_eq "0|product
42

xy|" "$RC|$OUT|$ERR" "dot commands and a multi-line statement in one argument"
oneshot quit 'select 1 as x' '.quit' 'select 2 as never'
assert_eq "0|x
-
1
(1 row)|" "$RC|$OUT|$ERR" ".quit: nothing after it runs"

t_begin "sql QUERY: a bad dot command is one line, status 1, and nothing after it runs"
oneshot bogus '.bogus' 'select 1'
assert_eq "1||heapprof: sql: unknown command '.bogus' (.help lists them)" "$RC|$OUT|$ERR" "unknown dot command"
oneshot typo '.tabels'
assert_eq "1||heapprof: sql: unknown command '.tabels' (.help lists them); did you mean '.tables'?" "$RC|$OUT|$ERR" "did you mean .tables"
oneshot badmode '.mode xml' 'select 1'
assert_eq "1||heapprof: sql: unknown mode 'xml' (table, column, csv, list or line)" "$RC|$OUT|$ERR" ".mode xml"
oneshot badheaders '.headers maybe'
assert_eq "1||heapprof: sql: invalid .headers 'maybe' (on or off)" "$RC|$OUT|$ERR" ".headers maybe"
oneshot manyargs '.tables a b'
assert_eq "1||heapprof: sql: too many arguments to .tables (.help)" "$RC|$OUT|$ERR" ".tables a b"
oneshot noschema '.schema nosuchtable'
assert_eq "1||heapprof: sql: no such table: nosuchtable" "$RC|$OUT|$ERR" ".schema of a missing table"
oneshot empty '' '   '
assert_eq "2||heapprof: sql: empty query" "$RC|$OUT|$ERR" "empty QUERY arguments"

t_begin "sql shell: a bad file fails before the shell starts"
SH_NAME=badfile
KDB_SAVE=$KDB
KDB="$T_DIR/nosuch.db"
shell badfile <<'EOF'
select 1;
EOF
KDB=$KDB_SAVE
assert_eq 1 "$SH_RC" "exit status"
has_line "heapprof: sql: $T_DIR/nosuch.db: No such file or directory" "error message"
assert_no_match 'heapprof> ' "$SH_OUT" "no prompt"

t_summary
