#!/usr/bin/env bash
# test_procs.sh BUILD: multi-process sessions tell the whole story.
#  - what a process started and the session did not follow (an exec, child
#    processes) is in the profile and the report, with the flag to use;
#  - the program's environment is its own: no LD_PRELOAD or HEAPPROF_*
#    from record unless following needs them;
#  - pprof writes one file per process, a pre-exec and post-exec image of
#    one pid included, and --pid picks a pid or one process of it;
#  - the report lists processes as a tree, each under the name it had.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so" "$PROGS/execer" "$PROGS/forker" "$PROGS/exec_chain" \
	"$PROGS/hostile_dumpspawn"

q() { sqlq "$@"; }
# What record sets in its command's environment (src/session/launch.c).
RECORD_VARS="LD_PRELOAD|HEAPPROF_SOCKET|HEAPPROF_SECCOMP_FILTERS|HEAPPROF_FOLLOW"
W="$T_DIR/w"
mkdir -p "$W"
# A script sqlite3 runs: it allocates (a 1 MB blob), the shell hardly.
printf 'create table t(x);\ninsert into t values(randomblob(1000000));\nselect length(x) from t;\n' >"$W/script.sql"

# ---------------------------------------------------------------------------
t_begin "the command followed through its exec by default: sh -c 'exec sqlite3 ...' (a wrapper) profiles sqlite3"
hp_record dx -o "$T_DIR/dx.db" -- sh -c "exec sqlite3 :memory: < '$W/script.sql'"
assert_eq 0 "$REC_RC" "exit status"
assert_eq 1000000 "$(cat "$T_DIR/dx.out")" "sqlite3 ran, its output as bare"
assert_eq "sh|command|1 sqlite3|exec|1 " \
	"$(q "$T_DIR/dx.db" "SELECT p.name, h.how, h.exec_not_followed IS NULL
	  FROM process p JOIN heapprof_process h USING(upid) ORDER BY upid;" | tr '\n' ' ')" \
	"rows: the shell, then sqlite3 as its new image; no exec noted"
assert_ge "$(q "$T_DIR/dx.db" "SELECT coalesce(sum(size), 0) FROM heap_profile_allocation WHERE upid = 2 AND size > 0;")" \
	1000000 "sqlite3's row holds the 1 MB blob"
assert_eq "" "$(grep -v '^heapprof: profile written' "$T_DIR/dx.err")" "nothing said not followed"

t_begin "the command followed through each function of the exec family (progs/exec_chain): its new image exact; a forked child's exec not followed"
for mode in execv execvp execl execlp execle execve execvpe fexecve; do
	hp_record ec-$mode -i 1 -o "$T_DIR/ec-$mode.db" -- "$PROGS/exec_chain" "$mode"
	assert_eq "0 final" "$REC_RC $(cat "$T_DIR/ec-$mode.out")" "$mode: exit status, output" || continue
	assert_eq "$PROGS/exec_chain|command exec_chain|exec " \
		"$(q "$T_DIR/ec-$mode.db" "SELECT p.name, h.how FROM process p JOIN heapprof_process h USING(upid) ORDER BY upid;" | tr '\n' ' ')" \
		"$mode: rows: the command, then its new image"
	assert_eq "7 1400 5 1000" "$(leaf_views "$T_DIR/ec-$mode.db" ec_final "" "a.upid = 2")" "$mode: ec_final in the new image (exact)"
	assert_eq "3 300 3 300" "$(leaf_views "$T_DIR/ec-$mode.db" ec_first "" "a.upid = 1")" "$mode: ec_first in the first image"
done
hp_record ecf -i 1 -o "$T_DIR/ecf.db" -- "$PROGS/exec_chain" fork
assert_eq "0 final parent" "$REC_RC $(cat "$T_DIR/ecf.out" | tr '\n' ' ' | sed 's/ $//')" "fork: exit status, output"
assert_eq "1|1" "$(q "$T_DIR/ecf.db" "SELECT count(*), max(children_not_followed) FROM heapprof_process;")" \
	"fork: one row, children noted as not followed"
assert_eq "5 250 5 250" "$(leaf_views "$T_DIR/ecf.db" ec_parent)" "fork: the parent's ec_parent (exact)"
assert_eq "0" "$(q "$T_DIR/ecf.db" "SELECT count(*) FROM stack_profile_frame WHERE name = 'ec_final';")" \
	"fork: nothing of the child's exec"

t_begin "exec not followed (--no-follow-exec): sh -c 'exec sqlite3 ...' says so at the end, in the profile and the report"
hp_record ex --no-follow-exec -o "$T_DIR/ex.db" -- sh -c "exec sqlite3 :memory: < '$W/script.sql'"
assert_eq 0 "$REC_RC" "exit status"
assert_eq 1000000 "$(cat "$T_DIR/ex.out")" "sqlite3 ran"
assert_eq "$(command -v sqlite3 | xargs readlink -f)||1" \
	"$(q "$T_DIR/ex.db" "SELECT exec_not_followed, children_not_followed, (SELECT count(*) FROM process) FROM heapprof_process;")" \
	"one row: the image it exec'd, no children"
"$HP" report "$T_DIR/ex.db" >"$T_DIR/ex.rep" 2>&1
assert_eq "  not followed   exec'd $(command -v sqlite3 | xargs readlink -f): use --follow-exec to profile it" \
	"$(grep '^  not followed' "$T_DIR/ex.rep")" "the report says so, in one line"
assert_match "^heapprof: record: pid [0-9]+ \(sh\) exec'd $(command -v sqlite3 | xargs readlink -f), which was not profiled" \
	"$(grep "exec'd" "$T_DIR/ex.err")" "record says so when it ends"

t_begin "exec not followed: a program that renames itself (prctl) and exits did not exec"
hp_record rn -o "$T_DIR/rn.db" -- perl -e '$0 = "renamed-worker"; open my $f, "<", "/proc/self/comm"; print <$f>'
assert_eq "renamed-worker" "$(cat "$T_DIR/rn.out")" "its name changed"
assert_eq "|" "$(q "$T_DIR/rn.db" "SELECT exec_not_followed, children_not_followed FROM heapprof_process;")" \
	"nothing noted"
assert_no_match "not followed" "$("$HP" report "$T_DIR/rn.db")" "no hint"

t_begin "children not followed: sh -c 'sqlite3 < FILE' (dash vforks) says so"
hp_record ch -o "$T_DIR/ch.db" -- sh -c "sqlite3 :memory: < '$W/script.sql'"
assert_eq 0 "$REC_RC" "exit status"
assert_eq "|1" "$(q "$T_DIR/ch.db" "SELECT exec_not_followed, children_not_followed FROM heapprof_process;")" \
	"the row says it started children"
"$HP" report "$T_DIR/ch.db" >"$T_DIR/ch.rep" 2>&1
assert_eq "  not followed   started child processes: use --follow-fork to profile them" \
	"$(grep '^  not followed' "$T_DIR/ch.rep")" "the report says so, in one line"
assert_match "^heapprof: record: 1 profiled process started child processes, which were not profiled \(pid [0-9]+; --follow-fork profiles them\)$" \
	"$(grep "child processes" "$T_DIR/ch.err")" "record says so when it ends"

t_begin "children not followed: a fork() child (forker), with allocations in the parent"
hp_record fk -i 1 -o "$T_DIR/fk.db" -- "$PROGS/forker"
assert_eq "|1" "$(q "$T_DIR/fk.db" "SELECT exec_not_followed, children_not_followed FROM heapprof_process;")" \
	"the row says it started children"
assert_match "not followed   started child processes" "$("$HP" report "$T_DIR/fk.db")" \
	"the report says so beside the parent's allocations"

t_begin "--follow-fork follows the child a vfork started (sh -c 'sqlite3 < FILE')"
hp_record ff -o "$T_DIR/ff.db" --follow-fork -- sh -c "sqlite3 :memory: < '$W/script.sql'"
assert_eq 0 "$REC_RC" "exit status"
assert_eq "sh|command|0|1 sqlite3|fork|1|1 " \
	"$(q "$T_DIR/ff.db" "SELECT p.name, h.how, h.ppid = (SELECT pid FROM process WHERE upid = 1),
	  h.children_not_followed IS NULL FROM process p JOIN heapprof_process h USING(upid) ORDER BY upid;" | tr '\n' ' ')" \
	"rows: the shell, then sqlite3 as its followed child; nothing said not followed"
assert_ge "$(q "$T_DIR/ff.db" "SELECT coalesce(sum(size), 0) FROM heap_profile_allocation WHERE upid = 2 AND size > 0;")" \
	1000000 "sqlite3's row holds the 1 MB blob"
assert_no_match "not followed" "$("$HP" report "$T_DIR/ff.db")" "no hint when following"

t_begin "--follow-exec: the exec is followed, not noted"
hp_record fe -o "$T_DIR/fe.db" --follow-exec -- sh -c "exec sqlite3 :memory: < '$W/script.sql'"
assert_eq "sh|command|1 sqlite3|exec|1 " \
	"$(q "$T_DIR/fe.db" "SELECT p.name, h.how, h.exec_not_followed IS NULL
	  FROM process p JOIN heapprof_process h USING(upid) ORDER BY upid;" | tr '\n' ' ')" \
	"rows: the shell, then sqlite3 as its new image; no exec noted"

# ---------------------------------------------------------------------------
t_begin "pprof: the two images of one pid (--follow-exec) are two files, and --pid picks either"
hp_record pe -i 1 --follow-exec -o "$T_DIR/pe.db" -- sh -c "exec sqlite3 :memory: < '$W/script.sql'"
PE=$(q "$T_DIR/pe.db" "SELECT pid FROM process WHERE upid = 1;")
assert_eq "$PE|sh $PE|sqlite3 " "$(q "$T_DIR/pe.db" "SELECT pid, name FROM process ORDER BY upid;" | tr '\n' ' ')" \
	"two rows of one pid"
mkdir -p "$W/pe"
(cd "$W/pe" && "$HP" pprof "$T_DIR/pe.db" -o one.pb.gz >"$T_DIR/pe1.out" 2>"$T_DIR/pe1.err")
assert_eq "one.$PE.1.pb.gz one.$PE.2.pb.gz " "$(cd "$W/pe" && ls | tr '\n' ' ')" \
	"-o one.pb.gz: one.PID.1.pb.gz and one.PID.2.pb.gz, none replaced"
assert_match "^wrote one.$PE.2.pb.gz: process $PE.2, heap libc.malloc, dump 2 of 2, [0-9]+ samples$" \
	"$(sed -n 2p "$T_DIR/pe1.out")" "the message names the process by its id"
n2=$(sed -n 2p "$T_DIR/pe1.out" | sed 's/.*, \([0-9]*\) samples$/\1/')
hp_cmd pe2 pprof "$T_DIR/pe.db" --pid "$PE.2" -o "$W/pe2.pb.gz"
assert_eq "wrote $W/pe2.pb.gz: process $PE.2, heap libc.malloc, dump 2 of 2, $n2 samples" \
	"$(cat "$T_DIR/pe2.out")" "--pid PID.2: the new image alone"
assert_eq "$(zcat "$W/pe/one.$PE.2.pb.gz" | md5sum)" "$(zcat "$W/pe2.pb.gz" | md5sum)" "the same profile"
mkdir -p "$W/pe3"
hp_cmd pe3 pprof "$T_DIR/pe.db" --pid "$PE" -o "$W/pe3/"
assert_eq 2 "$(grep -c '^wrote ' "$T_DIR/pe3.out")" "--pid PID: both images"
hp_cmd pe5 diff "$T_DIR/pe.db" "$T_DIR/pe.db" --pid "$PE.1,$PE.2"
assert_eq 0 "$CMD_RC" "diff --pid PID.1,PID.2: $(head -c 200 "$T_DIR/pe5.err")"
assert_eq "A $PE.1 (sh) B $PE.2 (sqlite3) " \
	"$(sed -n 's/^  \([AB]\)  [^ ]*: process \([^ ]*\) \(([^)]*)\).*/\1 \2 \3/p' "$T_DIR/pe5.out" | tr '\n' ' ')" \
	"diff: the shell against its new image, by their ids"
hp_cmd pe4 pprof "$T_DIR/pe.db" --pid "$PE.3"
assert_eq 1 "$CMD_RC" "--pid PID.3: no such process"
assert_match "no process with pid $PE.3$" "$(cat "$T_DIR/pe4.err")" "says so"

# ---------------------------------------------------------------------------
# tree_of FILE: the process lines of `heapprof report FILE`, the padding
# after each id collapsed (the indentation kept).
tree_of() {
	"$HP" report "$1" | sed -n '/^Profile of/,/^$/p' | sed -n '2,$p' | sed '/^$/d' |
		sed -E 's/^( *)([^ ]+) +/\1\2 /'
}

t_begin "report: the processes as a tree, each under the name it had"
hp_record tr --follow-fork --follow-exec -o "$T_DIR/tr.db" -- \
	sh -c "sqlite3 :memory: < '$W/script.sql'; exec sqlite3 :memory: < '$W/script.sql'"
assert_eq 0 "$REC_RC" "exit status"
P=$(q "$T_DIR/tr.db" "SELECT pid FROM process WHERE upid = 1;")
C=$(q "$T_DIR/tr.db" "SELECT pid FROM process WHERE pid != $P;")
assert_eq "  $P.1 sh (the command)
    $C sqlite3 (forked)
    $P.2 sqlite3 (exec'd)" "$(tree_of "$T_DIR/tr.db")" \
	"the shell, its vforked sqlite3, then its own new image, by start time"
assert_eq "Process $P.1 (sh) Process $C (sqlite3) Process $P.2 (sqlite3) " \
	"$("$HP" report "$T_DIR/tr.db" | grep '^Process ' | tr '\n' ' ')" "the sections in the same order, by the same ids"
hp_cmd tr2 report "$T_DIR/tr.db" --pid "$P.2"
assert_eq "Process $P.2 (sqlite3)" "$(grep '^Process ' "$T_DIR/tr2.out")" "report --pid PID.N: that process"
hp_cmd tr3 report "$T_DIR/tr.db" --pid "$P"
assert_eq 2 "$(grep -c '^Process ' "$T_DIR/tr3.out")" "report --pid PID: both images"

t_begin "report: forked children named as their parent, not by a 15-byte comm; exec'd images by theirs"
hp_record ds -i 1 --follow-fork --follow-exec -o "$T_DIR/ds.db" -- \
	"$PROGS/hostile_dumpspawn" 100 2 "$W/ds.times" exec
assert_eq 0 "$REC_RC" "exit status"
P=$(q "$T_DIR/ds.db" "SELECT pid FROM process WHERE upid = 1;")
C1=$(q "$T_DIR/ds.db" "SELECT pid FROM process WHERE upid = 2;")
C2=$(q "$T_DIR/ds.db" "SELECT pid FROM process WHERE upid = 4;")
assert_eq "  $P hostile_dumpspawn (the command)
    $C1.1 hostile_dumpspawn (forked)
      $C1.2 exe (exec'd)
    $C2.1 hostile_dumpspawn (forked)
      $C2.2 exe (exec'd)" "$(tree_of "$T_DIR/ds.db")" \
	"each child under the parent, its new image under it"

# ---------------------------------------------------------------------------
t_begin "environment: the program sees none of record's variables"
bare_run env env
hp_record env -o "$T_DIR/env.db" -- env
assert_eq 0 "$REC_RC" "exit status"
assert_eq "" "$(grep -E "^($RECORD_VARS)=" "$T_DIR/env.out")" "no LD_PRELOAD, no HEAPPROF_*"
assert_eq "$(sort "$T_DIR/env.bare.out")" "$(sort "$T_DIR/env.out")" "the environment of a bare run, exactly"
# (not under a sanitizer build of heapprof, whose runtime must be the
# first library of the heapprof command the user's LD_PRELOAD also goes to)
if [ -z "${HEAPPROF_SAN:-}" ]; then
	LD_PRELOAD=libc.so.6 hp_record envp -o "$T_DIR/envp.db" -- env
	assert_eq "LD_PRELOAD=libc.so.6" "$(grep -E "^($RECORD_VARS)=" "$T_DIR/envp.out")" \
		"the user's own LD_PRELOAD is kept as it was"
fi

t_begin "environment: children inherit nothing from record without follow flags"
hp_record envc -o "$T_DIR/envc.db" -- sh -c 'env; exec env'
assert_eq "" "$(grep -E "^($RECORD_VARS)=" "$T_DIR/envc.out")" "a child and an exec'd image: none"

t_begin "environment: with --follow-exec the chain still profiles the exec'd image"
hp_record fx -i 1 --follow-exec -o "$T_DIR/fx.db" -- sh -c "exec '$PROGS/execer'"
assert_eq "command exec exec " "$(q "$T_DIR/fx.db" "SELECT how FROM heapprof_process ORDER BY upid;" | tr '\n' ' ')" \
	"rows: sh, execer, execer's new image"
check_views "$T_DIR/fx.db" after_exec_alloc 10 7000 10 7000

t_begin "environment: perl's %ENV is a bare run's"
# Perl copies its environment into %ENV: with record's three variables it
# made 15 more allocations (perl 5.36, -i 1: 1398 instead of 1383 for
# this code), so the same %ENV is the same allocations.
export PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0
PERL_CODE='print join(",", map { "$_=$ENV{$_}" } sort keys %ENV), "\n"; my %h; $h{$_} = "x" x 100 for 1..100;'
bare_run perl perl -e "$PERL_CODE"
hp_record perl -i 1 -o "$T_DIR/perl.db" -- perl -e "$PERL_CODE"
assert_eq "$(cat "$T_DIR/perl.bare.out")" "$(cat "$T_DIR/perl.out")" "%ENV as bare"
n=$(q "$T_DIR/perl.db" "SELECT sum(count) FROM heap_profile_allocation WHERE count > 0;")
t_note "perl -i 1: $n allocations"
t_summary
