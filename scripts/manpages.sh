#!/bin/sh
# scripts/manpages.sh HEAPPROF OUTDIR: the man pages, made from the --help
# texts of the heapprof binary given, so that the two cannot drift:
#   heapprof(1)            `heapprof help`
#   heapprof-COMMAND(1)    `heapprof COMMAND --help`, one per command
#   heapprofd(8)           `heapprof daemon --help`
#   heap_profile.h(3)      include/heapprof/heap_profile.h's comments: the
#                          first one the description, each declaration's
#                          the entry for it
# A usage text becomes SYNOPSIS; an option line ("  -o, --output FILE  what
# it does", its continuation lines indented further) a tagged paragraph;
# other lines DESCRIPTION text.  tests/integration/test_man.sh checks that
# groff reads every page without a warning and that every option of a
# --help text is in its page.
set -eu
HP=$1
OUT=$2
HEADER=$(dirname "$0")/../include/heapprof/heap_profile.h
mkdir -p "$OUT"
VERSION=$("$HP" version | awk '{print $2}')
# The date of the source, not of the build: a rebuild makes the same pages.
DATE=$(git -C "$(dirname "$0")/.." log -1 --format=%cs 2>/dev/null || echo "")
[ -n "$DATE" ] || DATE=$(date -u +%Y-%m-%d)

# One line on what each command does (the NAME section).
summary() {
	case $1 in
	record) echo "run a program under the heap profiler, or profile running processes" ;;
	report) echo "summary, process memory and top call stacks of a profile" ;;
	pprof) echo "export a profile as gzipped pprof files" ;;
	flamegraph) echo "write a self-contained interactive flame graph page" ;;
	diff) echo "call stacks that grew or shrank between two profiles or dumps" ;;
	check) echo "a memory gate for CI: rules over a profile" ;;
	symbolize) echo "add source lines and inlined frames to a profile" ;;
	sql) echo "run SQL on a profile" ;;
	daemon) echo "the per-user daemon heapprofd" ;;
	dump) echo "ask the sessions recording through heapprofd for a dump" ;;
	snapshot) echo "every live block of a running process, or a profile's snapshots" ;;
	top) echo "a live view of a running process's heap" ;;
	serve) echo "an agent: Prometheus metrics and pprof heap profiles over HTTP" ;;
	esac
}
COMMANDS="record report pprof flamegraph diff check symbolize sql daemon dump snapshot top serve"

# roff from a --help text on stdin.
to_roff() {
	awk '
	function esc(s) {
		gsub(/\\/, "\\e", s)
		return s
	}
	function line(s) {
		s = esc(s)
		if (s ~ /^[.\047]/)
			s = "\\&" s
		print s
	}
	function tag(s) {
		s = esc(s)
		gsub(/-/, "\\-", s)
		print ".TP"
		print "\\fB" s "\\fR"
	}
	BEGIN { mode = "syn"; started = 0 }
	mode == "syn" {
		if ($0 == "") {
			print ".fi"
			mode = "text"
			print ".SH DESCRIPTION"
			fresh = 1
			next
		}
		if (!started) {
			print ".SH SYNOPSIS"
			print ".nf"
			started = 1
		}
		s = $0
		sub(/^usage: /, "", s)
		sub(/^ +/, "", s)
		line(s)
		next
	}
	$0 == "" { inopt = 0; fresh = 1; next }
	# An option: a dash within 8 columns (long-only options are indented
	# under the long ones of "-x, --xx"), or a word within 4 ("RULE").
	# Its tag ends at two spaces, or after the option words and their
	# upper-case arguments.
	{
		ind = match($0, /[^ ]/) - 1
		isopt = ind >= 1 && (ind <= 4 || (ind <= 8 && substr($0, ind + 1, 1) == "-"))
	}
	isopt {
		s = $0
		sub(/^ +/, "", s)
		k = split(s, w, " ")
		tw = ""
		for (i = 1; i <= k; i++) {
			if (w[i] ~ /^-/ || (i > 1 && w[i] ~ /^[A-Z][A-Z0-9_,.:|%=+\[\]-]*$/))
				tw = tw (tw == "" ? "" : " ") w[i]
			else
				break
		}
		n = match(s, /  +/)
		tg = n ? substr(s, 1, n - 1) : s
		# The two-space tag, unless it runs on into words past the
		# the option ("-d, --duration SECONDS end after this.  With"),
		# or there is none.
		t = tg
		if (tw != "" && length(tg) > length(tw) &&
		    index(substr(tg, length(tw) + 2), " "))
			t = tw
		d = substr(s, length(t) + 1)
		sub(/^ +/, "", d)
		tag(t)
		if (d != "")
			line(d)
		inopt = 1
		fresh = 0
		next
	}
	ind > 8 && inopt {
		s = $0
		sub(/^ +/, "", s)
		line(s)
		next
	}
	{
		if (fresh || inopt)
			print ".PP"
		inopt = 0
		fresh = 0
		s = $0
		sub(/^ +/, "", s)
		line(s)
	}
	END { if (mode == "syn" && started) print ".fi" }
	'
}

# header NAME SECTION TITLE
header() {
	printf '.TH %s %s "%s" "heapprof %s" "heapprof manual"\n' \
		"$(echo "$1" | tr 'a-z' 'A-Z')" "$2" "$DATE" "$VERSION"
	printf '.SH NAME\n%s \\- %s\n' "$(echo "$1" | sed 's/-/\\-/g')" "$3"
}

see_also() {
	printf '.SH SEE ALSO\n'
	printf '%s' "$1" | sed 's/-/\\-/g'
	printf '\n.PP\nThe documentation in /usr/share/doc/heapprof, and\n'
	printf '.UR https://perfetto.dev/docs/data-sources/native-heap-profiler\n'
	printf "Perfetto's heapprofd\n.UE ,\nwhose tables the profiles keep.\n"
}

pages="heapprof(1)"
for c in $COMMANDS; do
	pages="$pages, heapprof-$c(1)"
done
pages="$pages, heapprofd(8), heap_profile.h(3)"
pages_bold=$(echo "$pages" | sed 's/\([a-z_.-]*\)(\([0-9]\))/\\fB\1\\fR(\2)/g')

for c in $COMMANDS; do
	{
		header "heapprof-$c" 1 "$(summary "$c")"
		"$HP" "$c" --help | to_roff
		see_also "\\fBheapprof\\fR(1)"
	} >"$OUT/heapprof-$c.1"
done

{
	header heapprof 1 "a native heap profiler for Linux"
	"$HP" help | to_roff
	printf '.PP\nEach command has its own page: heapprof\\-\\fICOMMAND\\fR(1).\n'
	see_also "$pages_bold"
} >"$OUT/heapprof.1"

{
	header heapprofd 8 "the per-user heapprof daemon"
	"$HP" daemon --help | to_roff
	printf '.PP\nRun as \\fBheapprofd\\fR, it is \\fBheapprof daemon\\fR.\n'
	see_also "\\fBheapprof\\fR(1), \\fBheapprof\\-record\\fR(1), \\fBheapprof\\-dump\\fR(1)"
} >"$OUT/heapprofd.8"

# heap_profile.h(3): the header's comments, as they are.
{
	header heap_profile.h 3 "heapprof's custom allocator API (heapprofd's)"
	printf '.SH SYNOPSIS\n.nf\n.B #include <heapprof/heap_profile.h>\n.fi\n'
	printf '.PP\nLink with \\fB\\-lheapprof\\fR (pkg\\-config heapprof).\n'
	awk '
	function esc(s) {
		gsub(/\\/, "\\e", s)
		if (s ~ /^[.\047]/)
			s = "\\&" s
		return s
	}
	# A comment line without its " * " (or "/* ", " */").
	function text(s) {
		if (s ~ /^ *\*\/$/)
			return ""
		sub(/^\/\* ?/, "", s)
		sub(/^ \* ?/, "", s)
		sub(/ ?\*\/$/, "", s)
		return s
	}
	function flush_comment(    i, ex) {
		ex = 0
		for (i = 1; i <= nc; i++) {
			if (c[i] == "") {
				if (ex) { print ".fi"; ex = 0 }
				print ".PP"
			} else if (c[i] ~ /^    /) {
				if (!ex) { print ".PP"; print ".nf"; ex = 1 }
				print esc(c[i])
			} else {
				if (ex) { print ".fi"; ex = 0 }
				print esc(c[i])
			}
		}
		if (ex)
			print ".fi"
	}
	/^\/\*/ { incom = 1; nc = 0 }
	incom {
		c[++nc] = text($0)
		if ($0 ~ /\*\/$/) {
			incom = 0
			if (!first_done) {
				print ".SH DESCRIPTION"
				flush_comment()
				print ".SH FUNCTIONS AND CONSTANTS"
				first_done = 1
				nc = 0
			}
			pending = 1
		}
		next
	}
	pending && /^(#define|[A-Za-z])/ && !/^(#ifndef|#endif|#ifdef|#include|extern|typedef|}|#define HEAPPROF_HEAP_PROFILE_H)/ {
		decl = $0
		while (decl !~ /[;)]$/ && decl !~ /^#define/ && (getline more) > 0) {
			sub(/^ +/, " ", more)
			decl = decl more
		}
		sub(/^#define /, "", decl)
		gsub(/ +/, " ", decl)
		print ".TP"
		print "\\fB" esc(decl) "\\fR"
		flush_comment()
		pending = 0
		next
	}
	/^(typedef|#ifdef|#endif|extern|})/ { pending = 0 }
	' "$HEADER"
	printf '.SH EXAMPLE\nRecord a program whose pools report their blocks:\n.PP\n.nf\n'
	printf 'heapprof record \\-\\-heaps example.pool \\-\\- ./program\n'
	printf 'heapprof record \\-\\-all\\-heaps \\-o p.db \\-\\- ./program\n.fi\n'
	see_also "\\fBheapprof\\fR(1), \\fBheapprof\\-record\\fR(1)"
} >"$OUT/heap_profile.h.3"
