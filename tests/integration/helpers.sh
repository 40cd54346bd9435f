# tests/integration/helpers.sh: profile helpers for the integration tests
# (sourced after tests/lib.sh and t_setup_build).

# hp_record TAG RECORD_ARGS...: `heapprof record RECORD_ARGS...`, bounded;
# stdout/stderr in $T_DIR/TAG.out / TAG.err; status in REC_RC.
hp_record() {
	local tag=$1
	shift
	REC_RC=0
	run_bounded "${HP_TIMEOUT:-120}" "$HP" record "$@" \
		>"$T_DIR/$tag.out" 2>"$T_DIR/$tag.err" || REC_RC=$?
}

# bare_run TAG CMD...: the program without the profiler, bounded; stdout and
# stderr in $T_DIR/TAG.bare.out / .bare.err; status in BARE_RC.
bare_run() {
	local tag=$1
	shift
	BARE_RC=0
	run_bounded "${HP_TIMEOUT:-120}" "$@" \
		>"$T_DIR/$tag.bare.out" 2>"$T_DIR/$tag.bare.err" || BARE_RC=$?
}

# show_err TAG: the last lines of a recorded run's stderr, for a failure.
show_err() {
	[ -f "$T_DIR/$1.err" ] && sed -e 's/^/    | /' "$T_DIR/$1.err" | tail -n 15
	return 0
}

sql_quote() {
	printf '%s' "$1" | sed "s/'/''/g"
}

# leaf_views DB FUNC [TS]: "alloc_objects alloc_space objects space" of the
# callsites whose leaf frame is named FUNC, summed over all rows (or the rows
# up to dump time TS).  The seed's query: allocation -> callsite -> frame.
leaf_views() {
	local name tsw=""
	name=$(sql_quote "$2")
	[ -n "${3:-}" ] && tsw="AND a.ts <= $3"
	sqlq "$1" "SELECT
	    coalesce(sum(CASE WHEN a.count > 0 THEN a.count ELSE 0 END), 0)
	    || ' ' || coalesce(sum(CASE WHEN a.size > 0 THEN a.size ELSE 0 END), 0)
	    || ' ' || coalesce(sum(a.count), 0)
	    || ' ' || coalesce(sum(a.size), 0)
	  FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  WHERE f.name = '$name' $tsw;"
}

# check_views DB FUNC ALLOC_OBJECTS ALLOC_SPACE OBJECTS SPACE [TS]: exact.
# A value of "-" is not checked.
check_views() {
	local db=$1 fn=$2 v ao as o s
	v=$(leaf_views "$db" "$fn" "${7:-}") || return 1
	read -r ao as o s <<<"$v"
	local ok=0
	[ "$3" = - ] || assert_eq "$3" "$ao" "$fn alloc_objects" || ok=1
	[ "$4" = - ] || assert_eq "$4" "$as" "$fn alloc_space" || ok=1
	[ "$5" = - ] || assert_eq "$5" "$o" "$fn objects" || ok=1
	[ "$6" = - ] || assert_eq "$6" "$s" "$fn space" || ok=1
	return $ok
}

# leaf_rows DB FUNC: number of allocation rows whose leaf frame is FUNC.
leaf_rows() {
	sqlq "$1" "SELECT count(*) FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  WHERE f.name = '$(sql_quote "$2")';"
}

# leaf_callsites DB FUNC: ids of the callsites with rows whose leaf is FUNC.
leaf_callsites() {
	sqlq "$1" "SELECT DISTINCT a.callsite_id FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  WHERE f.name = '$(sql_quote "$2")' ORDER BY 1;"
}

# stack_of DB CALLSITE: frame names from the leaf to the root, one a line,
# following parent_id; fails the test if depths are not consecutive down to 0.
stack_of() {
	local out
	out=$(sqlq "$1" "WITH RECURSIVE s(id, depth, parent_id, frame_id, n) AS (
	    SELECT id, depth, parent_id, frame_id, 0 FROM stack_profile_callsite
	    WHERE id = $2
	    UNION ALL
	    SELECT c.id, c.depth, c.parent_id, c.frame_id, s.n + 1
	    FROM s JOIN stack_profile_callsite c ON c.id = s.parent_id
	    WHERE s.n < 1000)
	  SELECT s.depth || '|' || coalesce(f.name, '') FROM s
	  LEFT JOIN stack_profile_frame f ON f.id = s.frame_id ORDER BY s.n;") ||
		return 1
	# Depths must go N, N-1, ..., 0.
	local bad
	bad=$(printf '%s\n' "$out" | awk -F'|' '
	    NR == 1 { prev = $1; next }
	    { if ($1 != prev - 1) { print "depth " $1 " after " prev; exit } prev = $1 }
	    END { if (prev != 0) print "root depth " prev " is not 0" }')
	if [ -n "$bad" ]; then
		t_fail "callsite $2: inconsistent depths ($bad): $(printf '%s' "$out" | tr '\n' ' ')"
	fi
	printf '%s\n' "$out" | cut -d'|' -f2-
}

# hp_sql_csv DB QUERY: `heapprof sql DB QUERY --csv` without its header line.
hp_sql_csv() {
	local out rc=0
	out=$(timeout -k 5 60 "$HP" sql "$1" "$2" --csv 2>&1 </dev/null) || rc=$?
	if [ "$rc" != 0 ]; then
		t_fail "heapprof sql failed ($rc): $2: $(printf '%s' "$out" | head -c 400)"
		return 1
	fi
	printf '%s\n' "$out" | tail -n +2
}

# report_value REPORT_FILE FUNC: the numbers on the first line of the report
# that names FUNC (as a whole name), one a line; "(60000" and "1,234" are
# read as 60000 and 1234.
report_numbers() {
	awk -v fn="$2" '
	function isid(c) { return c ~ /[A-Za-z0-9_:]/ }
	{
		line = $0
		p = index(line, fn)
		while (p > 0) {
			before = p > 1 ? substr(line, p - 1, 1) : " "
			after = substr(line, p + length(fn), 1)
			if (!isid(before) && (after == "" || !isid(after) || fn ~ /\)$/)) {
				n = split($0, tok, /[ \t|]+/)
				for (i = 1; i <= n; i++) {
					t = tok[i]
					gsub(/[(),]/, "", t)
					if (t ~ /^-?[0-9]+(\.[0-9]+)?$/) print t
				}
				exit
			}
			q = index(substr(line, p + 1), fn)
			p = q ? p + q : 0
		}
	}' "$1"
}

# check_report_value REPORT_FILE FUNC VALUE MSG: VALUE is one of the numbers
# on the report's first line naming FUNC.
check_report_value() {
	local nums
	nums=$(report_numbers "$1" "$2")
	if [ -z "$nums" ]; then
		t_fail "$4: no line naming '$2' in the report"
		return 1
	fi
	if printf '%s\n' "$nums" | grep -qx -- "$3"; then
		return 0
	fi
	t_fail "$4: expected $3 on the line of '$2', got: $(grep -F -m1 -- "$2" "$1")"
	return 1
}

# db_valid DB: the file is an SQLite database that passes integrity_check
# and has the profile tables.
db_valid() {
	local r
	[ -s "$1" ] || {
		t_fail "profile $1 missing or empty"
		return 1
	}
	r=$(sqlq "$1" "PRAGMA integrity_check;") || return 1
	assert_eq ok "$r" "integrity_check of $1" || return 1
	local tbl
	for tbl in stack_profile_mapping stack_profile_frame stack_profile_callsite \
		heap_profile_allocation process heapprof_process heapprof_dump; do
		r=$(sqlq "$1" "SELECT count(*) FROM sqlite_master WHERE type IN ('table','view') AND name = '$tbl';") || return 1
		assert_eq 1 "$r" "table $tbl in $1" || return 1
	done
	return 0
}
