/*
 * `heapprof sql FILE [QUERY] [--csv]`: run SQL on a profile, opened
 * read-only, and print each statement's result as an aligned text table
 * (numbers right-aligned) or as CSV.  The profile keeps Perfetto's table
 * names, and Perfetto's experimental_flamegraph table-valued function is
 * registered, so the queries of Perfetto's heapprofd documentation run as
 * is.  Without QUERY the query is read from stdin, or, when stdin is a
 * terminal, an interactive shell (libedit) reads statements until .quit
 * (docs/SQL.md).  QUERY, stdin and the shell are read the same way, line
 * by line: a line starting with '.' at the start of a statement is a dot
 * command (.tables, .schema, .mode, ...), as in the sqlite3 shell.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "profile/flamegraph_vtab.h"
#include "profile/reader.h"
#include "util/err.h"

#define SUBSYS "sql"

struct sql_opts {
	const char *file;
	const char **queries; /* QUERY arguments, in order (owned array) */
	int nqueries;         /* 0: read stdin */
	int csv;
};

/* Output formats (.mode); table and column are the same. */
enum sql_mode { MODE_TABLE, MODE_CSV, MODE_LIST, MODE_LINE };

static const char *const mode_names[] = {"table", "csv", "list", "line"};

/* What the statements run on and how their results print. */
struct shell {
	sqlite3 *db;
	enum sql_mode mode;
	int headers;   /* .headers on|off */
	int printed;   /* result sets printed (a blank line between them) */
	char *history; /* file, or NULL */
};

/* One result set, buffered so column widths are known before printing. */
struct table {
	int ncols;
	char **cells; /* row-major, header row first; NULL cell = SQL NULL */
	size_t nrows; /* including the header */
	size_t cap;
	int *numeric; /* per column: every non-NULL value is a number */
};

static void sql_usage(FILE *f)
{
	fputs("usage: heapprof sql FILE [QUERY...] [--csv]\n"
	      "\n"
	      "Run QUERY (SQL statements and dot commands such as .tables,\n"
	      ".schema, .mode csv, .headers off; several QUERY arguments run\n"
	      "in turn) on the profile FILE, opened read-only, and print each\n"
	      "result as a table.  Without QUERY, the query is read from\n"
	      "standard input; when that is a terminal, an interactive shell\n"
	      "starts.  '.help' lists the dot commands.\n"
	      "experimental_flamegraph(ts, upid, 'native') gives the call\n"
	      "tree of a process at a dump (docs/SQL.md).\n"
	      "\n"
	      "  --csv    print CSV (RFC 4180 quoting) instead of a table\n"
	      "\n"
	      "Example:\n"
	      "  heapprof sql prof.db 'select name, sum(size) from"
	      " heap_profile_allocation a\n"
	      "    join stack_profile_callsite c on a.callsite_id = c.id\n"
	      "    join stack_profile_frame f on c.frame_id = f.id"
	      " group by 1 order by 2 desc'\n",
	      f);
}

/* "--word" or "-x"; not an SQL comment like "-- text" or "--\nselect". */
static int looks_like_option(const char *a)
{
	if (a[0] != '-' || !a[1])
		return 0;
	if (a[1] != '-')
		return a[2] == '\0';
	return a[2] && !strpbrk(a, " \t\r\n");
}

/* 0 ok, 1 --help printed, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, struct sql_opts *o)
{
	int no_more_opts = 0;
	int npos = 0;

	memset(o, 0, sizeof(*o));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!no_more_opts && !strcmp(a, "--")) {
			no_more_opts = 1;
		} else if (!no_more_opts && !strcmp(a, "--csv")) {
			o->csv = 1;
		} else if (!no_more_opts &&
		           (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
			sql_usage(stdout);
			return 1;
		} else if (!no_more_opts && looks_like_option(a)) {
			char hint[128];
			hp_err(SUBSYS, "unknown option '%s'%s", a,
			       opt_hint(a, sql_usage, hint, sizeof(hint)));
			return 2;
		} else if (npos == 0) {
			o->file = a;
			npos++;
		} else {
			if (!o->queries)
				o->queries = calloc((size_t)argc,
				                    sizeof(*o->queries));
			if (!o->queries) {
				hp_err(SUBSYS, "out of memory");
				return 2;
			}
			o->queries[o->nqueries++] = a;
		}
	}
	if (!o->file) {
		hp_err(SUBSYS, "missing FILE (see heapprof sql --help)");
		return 2;
	}
	return 0;
}

/* Read all of stdin; NULL on error (message printed). */
static char *read_stdin(void)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);

	while (buf) {
		if (len + 1 >= cap) {
			char *b = realloc(buf, cap * 2);
			if (!b)
				break;
			buf = b;
			cap *= 2;
		}
		size_t n = fread(buf + len, 1, cap - len - 1, stdin);
		len += n;
		if (n == 0) {
			if (ferror(stdin)) {
				hp_err(SUBSYS, "reading the query from stdin "
				               "failed");
				free(buf);
				return NULL;
			}
			buf[len] = '\0';
			return buf;
		}
	}
	free(buf);
	hp_err(SUBSYS, "out of memory");
	return NULL;
}

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->numeric);
	memset(t, 0, sizeof(*t));
}

/* Text of a blob: lowercase hex. */
static char *blob_text(const unsigned char *p, int n)
{
	static const char digits[] = "0123456789abcdef";
	char *s = malloc(2 * (size_t)n + 1);

	if (!s)
		return NULL;
	for (int i = 0; i < n; i++) {
		s[2 * i] = digits[p[i] >> 4];
		s[2 * i + 1] = digits[p[i] & 15];
	}
	s[2 * n] = '\0';
	return s;
}

/* Copy of column col of the current row; *oom set on allocation failure. */
static char *cell_text(sqlite3_stmt *st, int col, int *oom)
{
	char *s = NULL;

	switch (sqlite3_column_type(st, col)) {
	case SQLITE_NULL:
		return NULL;
	case SQLITE_BLOB:
		s = blob_text(sqlite3_column_blob(st, col),
		              sqlite3_column_bytes(st, col));
		break;
	default:
		s = strdup((const char *)sqlite3_column_text(st, col));
		break;
	}
	if (!s)
		*oom = 1;
	return s;
}

static int table_add_row(struct table *t)
{
	if (t->nrows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		char **c = realloc(t->cells, cap * t->ncols * sizeof(*c));
		if (!c)
			return -1;
		t->cells = c;
		t->cap = cap;
	}
	memset(&t->cells[t->nrows * t->ncols], 0, t->ncols * sizeof(char *));
	t->nrows++;
	return 0;
}

static int table_init(struct table *t, sqlite3_stmt *st)
{
	memset(t, 0, sizeof(*t));
	t->ncols = sqlite3_column_count(st);
	t->numeric = calloc(t->ncols, sizeof(*t->numeric));
	if (!t->numeric || table_add_row(t) < 0)
		return -1;
	for (int c = 0; c < t->ncols; c++) {
		const char *name = sqlite3_column_name(st, c);
		t->cells[c] = strdup(name ? name : "");
		if (!t->cells[c])
			return -1;
		t->numeric[c] = -1; /* unknown until a non-NULL value */
	}
	return 0;
}

/* Append the current row of st; -1 out of memory. */
static int table_push(struct table *t, sqlite3_stmt *st)
{
	int oom = 0;

	if (table_add_row(t) < 0)
		return -1;
	char **row = &t->cells[(t->nrows - 1) * t->ncols];
	for (int c = 0; c < t->ncols; c++) {
		int type = sqlite3_column_type(st, c);
		row[c] = cell_text(st, c, &oom);
		if (type == SQLITE_NULL)
			continue;
		int num = type == SQLITE_INTEGER || type == SQLITE_FLOAT;
		t->numeric[c] =
		        t->numeric[c] == -1 ? num : (t->numeric[c] && num);
	}
	return oom ? -1 : 0;
}

/* Columns a UTF-8 string takes on a terminal (one per code point). */
static size_t text_width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

/* Table cells show control characters as '?', so rows stay one line. */
static void put_cell(const char *s, size_t width, int right)
{
	size_t w = text_width(s);

	if (right)
		for (size_t i = w; i < width; i++)
			putchar(' ');
	for (; *s; s++)
		putchar((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
	if (!right)
		for (size_t i = w; i < width; i++)
			putchar(' ');
}

/* headers: the header row, its rule and the "(N rows)" line. */
static void print_table(const struct table *t, int headers)
{
	size_t *width = calloc(t->ncols ? t->ncols : 1, sizeof(*width));

	if (!width) {
		hp_err(SUBSYS, "out of memory");
		return;
	}
	for (size_t r = headers ? 0 : 1; r < t->nrows; r++)
		for (int c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			size_t w = text_width(s ? s : "NULL");
			if (w > width[c])
				width[c] = w;
		}
	for (size_t r = headers ? 0 : 1; r < t->nrows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			int last = c == t->ncols - 1;
			int right = t->numeric[c] == 1;
			if (c)
				fputs("  ", stdout);
			/* No trailing blanks after a left-aligned last cell. */
			put_cell(s ? s : "NULL", last && !right ? 0 : width[c],
			         right);
		}
		putchar('\n');
		if (r == 0) {
			for (int c = 0; c < t->ncols; c++) {
				if (c)
					fputs("  ", stdout);
				for (size_t i = 0; i < width[c]; i++)
					putchar('-');
			}
			putchar('\n');
		}
	}
	if (headers)
		printf("(%zu row%s)\n", t->nrows - 1, t->nrows == 2 ? "" : "s");
	free(width);
}

/* RFC 4180: quote fields holding a comma, quote, CR or LF; double quotes. */
static void put_csv_field(const char *s)
{
	if (!s)
		return;
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, stdout);
		return;
	}
	putchar('"');
	for (; *s; s++) {
		if (*s == '"')
			putchar('"');
		putchar(*s);
	}
	putchar('"');
}

/* csv (RFC 4180) or list (the sqlite3 shell's: '|' between fields, no
 * quoting, NULL empty). */
static void print_delimited(const struct table *t, int headers, int csv)
{
	for (size_t r = headers ? 0 : 1; r < t->nrows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			if (c)
				putchar(csv ? ',' : '|');
			if (csv)
				put_csv_field(s);
			else if (s)
				fputs(s, stdout);
		}
		putchar('\n');
	}
}

/* One "column = value" line per field, the names right-aligned, a blank
 * line between rows (the sqlite3 shell's line mode; no header row). */
static void print_lines(const struct table *t)
{
	size_t w = 0;

	for (int c = 0; c < t->ncols; c++)
		if (text_width(t->cells[c]) > w)
			w = text_width(t->cells[c]);
	for (size_t r = 1; r < t->nrows; r++) {
		if (r > 1)
			putchar('\n');
		for (int c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			put_cell(t->cells[c], w, 1);
			fputs(" = ", stdout);
			put_cell(s ? s : "NULL", 0, 0);
			putchar('\n');
		}
	}
}

/* Step st to the end, printing its rows if it has columns.  0 or -1. */
static int run_statement(struct shell *sh, sqlite3_stmt *st)
{
	struct table t;
	int rc;

	if (sqlite3_column_count(st) == 0) {
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			;
		if (rc == SQLITE_DONE)
			return 0;
		hp_err(SUBSYS, "%s", sqlite3_errmsg(sh->db));
		return -1;
	}
	if (table_init(&t, st) < 0) {
		table_free(&t);
		hp_err(SUBSYS, "out of memory");
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (table_push(&t, st) < 0) {
			table_free(&t);
			hp_err(SUBSYS, "out of memory");
			return -1;
		}
	}
	if (rc != SQLITE_DONE) {
		table_free(&t);
		hp_err(SUBSYS, "%s", sqlite3_errmsg(sh->db));
		return -1;
	}
	if (sh->printed++)
		putchar('\n'); /* blank line between result sets */
	switch (sh->mode) {
	case MODE_TABLE:
		print_table(&t, sh->headers);
		break;
	case MODE_CSV:
	case MODE_LIST:
		print_delimited(&t, sh->headers, sh->mode == MODE_CSV);
		break;
	case MODE_LINE:
		print_lines(&t);
		break;
	}
	table_free(&t);
	return 0;
}

/* Run every statement of sql in order; 0, or -1 after the first error.
 * *nstmts counts the statements run. */
static int run_all(struct shell *sh, const char *sql, int *nstmts)
{
	const char *tail = sql;

	while (tail && *tail) {
		sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(sh->db, tail, -1, &st, &tail) !=
		    SQLITE_OK) {
			hp_err(SUBSYS, "%s", sqlite3_errmsg(sh->db));
			return -1;
		}
		if (!st)
			continue; /* whitespace or a comment */
		(*nstmts)++;
		int err = run_statement(sh, st);
		sqlite3_finalize(st);
		if (err)
			return -1;
	}
	return 0;
}

/* ---- dot commands: the shell's, QUERY's and stdin's ---------------------- */

enum { DOT_OK, DOT_QUIT, DOT_ERR };

/* Split line (modified) into at most max words; the number of words. */
static int split_words(char *line, char **w, int max)
{
	int n = 0;
	char *save = NULL;

	for (char *t = strtok_r(line, " \t\r\n", &save); t && n < max;
	     t = strtok_r(NULL, " \t\r\n", &save))
		w[n++] = t;
	return n;
}

static void dot_help(void)
{
	fputs(".help              this text\n"
	      ".tables [PATTERN]  list the tables (LIKE PATTERN)\n"
	      ".schema [TABLE]    show CREATE statements (of TABLE, or all)\n"
	      ".indexes [TABLE]   list the indexes (of TABLE, or all)\n"
	      ".mode [MODE]       output format: table (or column), csv,\n"
	      "                   list (| between fields) or line (one\n"
	      "                   'column = value' a line); alone: print it\n"
	      ".headers on|off    header row (and table's row count)\n"
	      ".quit, .exit       leave (also Ctrl-D)\n"
	      "\n"
	      "Anything else is SQL, run when a statement ends with ';'.\n"
	      "Ctrl-C stops a running query.  Besides the tables,\n"
	      "experimental_flamegraph(ts, upid, 'native'[, heap_name])\n"
	      "gives the call tree of a process at a dump.\n",
	      stdout);
}

/* Run a query whose rows are one text column, printing each via put. */
static int each_text_row(sqlite3 *db, const char *sql, const char *arg,
                         void (*put)(const char *, void *), void *ctx)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		hp_err(SUBSYS, "%s", sqlite3_errmsg(db));
		return -1;
	}
	if (arg)
		sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);
		put(t ? (const char *)t : "", ctx);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		hp_err(SUBSYS, "%s", sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}

static void put_line(const char *s, void *ctx)
{
	int *n = ctx;
	(*n)++;
	printf("%s\n", s);
}

static void put_statement(const char *s, void *ctx)
{
	int *n = ctx;
	(*n)++;
	printf("%s;\n", s);
}

static int dot_tables(struct shell *sh, const char *pattern)
{
	int n = 0;

	if (each_text_row(sh->db,
	                  "SELECT name FROM sqlite_master WHERE type IN"
	                  " ('table', 'view') AND name NOT LIKE 'sqlite\\_%'"
	                  " ESCAPE '\\' AND (?1 IS NULL OR name LIKE ?1)"
	                  " ORDER BY name",
	                  pattern, put_line, &n) < 0)
		return DOT_ERR;
	if (!pattern ||
	    sqlite3_strlike(pattern, "experimental_flamegraph", 0) == 0)
		printf("experimental_flamegraph  (table-valued function:"
		       " experimental_flamegraph(ts, upid, 'native'))\n");
	return DOT_OK;
}

static int dot_schema(struct shell *sh, const char *table)
{
	int n = 0;
	int fg = !table ||
	         sqlite3_strlike(table, "experimental_flamegraph", 0) == 0;

	if (each_text_row(sh->db,
	                  "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"
	                  " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
	                  " AND (?1 IS NULL OR tbl_name LIKE ?1)"
	                  " ORDER BY tbl_name, type = 'index', name",
	                  table, put_statement, &n) < 0)
		return DOT_ERR;
	if (fg) {
		printf("-- table-valued function; its hidden columns are its"
		       " arguments\n%s;\n",
		       flamegraph_vtab_schema);
	} else if (!n) {
		hp_err(SUBSYS, "no such table: %s", table);
		return DOT_ERR;
	}
	return DOT_OK;
}

/* The indexes (of the tables LIKE table), one a line, as .tables. */
static int dot_indexes(struct shell *sh, const char *table)
{
	int n = 0;

	if (each_text_row(sh->db,
	                  "SELECT name FROM sqlite_master WHERE type = 'index'"
	                  " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
	                  " AND (?1 IS NULL OR tbl_name LIKE ?1)"
	                  " ORDER BY name",
	                  table, put_line, &n) < 0)
		return DOT_ERR;
	return DOT_OK;
}

static int dot_mode(struct shell *sh, const char *m)
{
	if (!m) {
		printf("%s\n", mode_names[sh->mode]);
		return DOT_OK;
	}
	for (int i = 0; i < (int)(sizeof(mode_names) / sizeof(*mode_names));
	     i++)
		if (!strcmp(m, mode_names[i])) {
			sh->mode = (enum sql_mode)i;
			return DOT_OK;
		}
	if (!strcmp(m, "column")) {
		sh->mode = MODE_TABLE;
		return DOT_OK;
	}
	hp_err(SUBSYS, "unknown mode '%s' (table, column, csv, list or line)",
	       m);
	return DOT_ERR;
}

static int dot_headers(struct shell *sh, const char *v)
{
	if (!v) {
		printf("%s\n", sh->headers ? "on" : "off");
		return DOT_OK;
	}
	if (!strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "yes")) {
		sh->headers = 1;
		return DOT_OK;
	}
	if (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no")) {
		sh->headers = 0;
		return DOT_OK;
	}
	hp_err(SUBSYS, "invalid .headers '%s' (on or off)", v);
	return DOT_ERR;
}

/* One dot command line (modified): DOT_OK, DOT_QUIT or DOT_ERR (its
 * message printed). */
static int dot_command(struct shell *sh, char *line)
{
	static const char *const names[] = {".help",    ".tables",  ".schema",
	                                    ".indexes", ".indices", ".mode",
	                                    ".headers", ".quit",    ".exit"};
	char *w[4];
	int n = split_words(line, w, 4);
	const char *arg = n > 1 ? w[1] : NULL;

	if (n == 0)
		return DOT_OK;
	if (!strcmp(w[0], ".quit") || !strcmp(w[0], ".exit") ||
	    !strcmp(w[0], ".q"))
		return DOT_QUIT;
	int known = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		known |= !strcmp(w[0], names[i]);
	if (known && n > 2) {
		hp_err(SUBSYS, "too many arguments to %s (.help)", w[0]);
		return DOT_ERR;
	}
	if (!strcmp(w[0], ".help")) {
		dot_help();
		return DOT_OK;
	}
	if (!strcmp(w[0], ".tables"))
		return dot_tables(sh, arg);
	if (!strcmp(w[0], ".schema"))
		return dot_schema(sh, arg);
	if (!strcmp(w[0], ".indexes") || !strcmp(w[0], ".indices"))
		return dot_indexes(sh, arg);
	if (!strcmp(w[0], ".mode"))
		return dot_mode(sh, arg);
	if (!strcmp(w[0], ".headers"))
		return dot_headers(sh, arg);
	const char *near =
	        opt_suggest(w[0], names, sizeof(names) / sizeof(*names));
	hp_err(SUBSYS, "unknown command '%s' (.help lists them)%s%s%s", w[0],
	       near ? "; did you mean '" : "", near ? near : "",
	       near ? "'?" : "");
	return DOT_ERR;
}

/* Whether line holds only blanks. */
static int blank(const char *line)
{
	return line[strspn(line, " \t\r\n")] == '\0';
}

/* Whether p[0..n) is blank or a whole-line "--" comment: nothing to run
 * (and a dot command may follow it). */
static int nothing_n(const char *p, size_t n)
{
	size_t i = 0;

	while (i < n && strchr(" \t\r", p[i]))
		i++;
	return i == n || (i + 1 < n && p[i] == '-' && p[i + 1] == '-');
}

/* A dot command line: '.' first, after blanks. */
static int is_dot(const char *line)
{
	return line[strspn(line, " \t")] == '.';
}

/* Append line and a newline to the pending statement; -1 out of memory. */
static int append_line(char **buf, size_t *len, size_t *cap, const char *line,
                       size_t n)
{
	if (!*buf || *len + n + 2 > *cap) {
		size_t c = (*len + n + 2) * 2;
		char *b = realloc(*buf, c);
		if (!b)
			return -1;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, line, n);
	*len += n;
	(*buf)[(*len)++] = '\n';
	(*buf)[*len] = '\0';
	return 0;
}

/*
 * QUERY or stdin, read as the shell reads what is typed: line by line, a
 * line starting with '.' at the start of a statement is a dot command;
 * SQL runs once the lines so far end a complete statement, and what is
 * left at the end of text runs as it is (no ';' needed).  *nunits counts
 * the statements and dot commands run; *quit is set by .quit.  0, or -1
 * after the first error (message printed; nothing after it runs).
 */
static int run_script(struct shell *sh, const char *text, int *nunits,
                      int *quit)
{
	char *buf = NULL, *line = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;

	for (const char *p = text; *p && !*quit && rc == 0;) {
		size_t n = strcspn(p, "\n");
		if (!len && is_dot(p)) {
			free(line);
			line = strndup(p, n);
			if (!line) {
				hp_err(SUBSYS, "out of memory");
				rc = -1;
				break;
			}
			(*nunits)++;
			int r = dot_command(sh, line);
			if (r == DOT_ERR)
				rc = -1;
			*quit = r == DOT_QUIT;
		} else if (len || !nothing_n(p, n)) {
			if (append_line(&buf, &len, &cap, p, n) < 0) {
				hp_err(SUBSYS, "out of memory");
				rc = -1;
				break;
			}
			if (sqlite3_complete(buf)) {
				rc = run_all(sh, buf, nunits);
				len = 0;
			}
		}
		p += n + (p[n] == '\n');
	}
	if (rc == 0 && !*quit && len)
		rc = run_all(sh, buf, nunits);
	free(line);
	free(buf);
	return rc;
}

/* ---- the interactive shell ---------------------------------------------- */

#define PROMPT      "heapprof> "
#define CONT_PROMPT "     ...> "
#define HISTORY_MAX 1000

/*
 * Ctrl-C: stops the running query (sqlite3_interrupt), or drops the line
 * being typed (shell_getc makes readline return, the flag says why).
 */
static sqlite3 *volatile interrupt_db;
static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
	(void)sig;
	got_sigint = 1;
	if (interrupt_db)
		sqlite3_interrupt(interrupt_db);
}

/* libedit's character reader: as read(2), but gives up on Ctrl-C. */
static int shell_getc(FILE *f)
{
	unsigned char c;

	for (;;) {
		if (got_sigint)
			return EOF;
		ssize_t n = read(fileno(f), &c, 1);
		if (n == 1)
			return c;
		if (n == 0 || errno != EINTR)
			return EOF;
	}
}

/* $HOME/.heapprof_history, if HOME is set; NULL otherwise. */
static char *history_path(void)
{
	const char *home = getenv("HOME");
	char *p = NULL;

	if (!home || !*home)
		return NULL;
	if (asprintf(&p, "%s/.heapprof_history", home) < 0)
		return NULL;
	/* Only if the file, or the directory for a new one, is writable. */
	if (access(p, W_OK) == 0 ||
	    (errno == ENOENT && access(home, W_OK) == 0))
		return p;
	free(p);
	return NULL;
}

/* Run one complete entry; Ctrl-C interrupts it.  Errors were printed
 * and the shell goes on. */
static void shell_run_sql(struct shell *sh, const char *sql)
{
	int n = 0;

	interrupt_db = sh->db;
	sh->printed = 0;
	run_all(sh, sql, &n);
	fflush(stdout);
	interrupt_db = NULL;
	got_sigint = 0;
}

static int shell(struct shell *sh, const char *file)
{
	struct sigaction sa, old_sa;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;

	sh->history = history_path();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint; /* no SA_RESTART: read(2) must return */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_sa);
	rl_readline_name = "heapprof";
	rl_catch_signals = 0;
	rl_getc_function = shell_getc;
	using_history();
	stifle_history(HISTORY_MAX);
	if (sh->history)
		read_history(sh->history);
	printf("heapprof sql: %s (read-only).  .help for help, .quit to "
	       "leave.\n",
	       file);
	for (;;) {
		fflush(stdout);
		got_sigint = 0;
		char *line = readline(len ? CONT_PROMPT : PROMPT);
		if (got_sigint) { /* Ctrl-C: drop the statement being typed */
			free(line);
			len = 0;
			fputs("^C\n", stdout);
			continue;
		}
		if (!line) { /* Ctrl-D: an unfinished statement is dropped */
			putchar('\n');
			break;
		}
		if (!len && is_dot(line)) {
			add_history(line);
			int r = dot_command(sh, line);
			free(line);
			fflush(stdout);
			if (r == DOT_QUIT)
				break;
			continue;
		}
		if (!len && blank(line)) {
			free(line);
			continue;
		}
		int err = append_line(&buf, &len, &cap, line, strlen(line));
		free(line);
		if (err) {
			hp_err(SUBSYS, "out of memory");
			rc = 1;
			break;
		}
		if (!sqlite3_complete(buf))
			continue;
		buf[len - 1] = '\0'; /* the last newline */
		add_history(buf);
		shell_run_sql(sh, buf);
		len = 0;
	}
	if (sh->history)
		write_history(sh->history);
	sigaction(SIGINT, &old_sa, NULL);
	free(sh->history);
	free(buf);
	return rc;
}

int cmd_sql(int argc, char **argv)
{
	struct sql_opts o;
	char *owned = NULL;
	int rc = parse_args(argc, argv, &o);

	if (rc) {
		free(o.queries);
		return rc == 1 ? 0 : 2;
	}
	sqlite3 *db = reader_open(o.file, SUBSYS);
	if (!db) {
		free(o.queries);
		return 1;
	}
	struct shell sh = {
	        .db = db, .mode = o.csv ? MODE_CSV : MODE_TABLE, .headers = 1};
	rc = flamegraph_vtab_register(db);
	if (rc != SQLITE_OK) {
		hp_err(SUBSYS, "registering experimental_flamegraph: %s",
		       sqlite3_errstr(rc));
		sqlite3_close(db);
		free(o.queries);
		return 1;
	}
	if (!o.nqueries && isatty(STDIN_FILENO)) {
		rc = shell(&sh, o.file);
		sqlite3_close(db);
		return rc;
	}
	if (!o.nqueries) {
		owned = read_stdin();
		if (!owned) {
			sqlite3_close(db);
			return 1;
		}
	}
	int nunits = 0, quit = 0;
	rc = 0;
	if (owned)
		rc = run_script(&sh, owned, &nunits, &quit);
	for (int i = 0; i < o.nqueries && rc == 0 && !quit; i++)
		rc = run_script(&sh, o.queries[i], &nunits, &quit);
	sqlite3_close(db);
	free(owned);
	free(o.queries);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	if (rc == 0 && nunits == 0) {
		hp_err(SUBSYS, "empty query");
		return 2;
	}
	return rc == 0 ? 0 : 1;
}
