/*
 * `heapprof sql FILE [QUERY] [--csv]`: run SQL on a profile, opened
 * read-only, and print each statement's result as an aligned text table
 * (numbers right-aligned) or as CSV.  The profile keeps Perfetto's table
 * names, and Perfetto's experimental_flamegraph table-valued function is
 * registered, so the queries of Perfetto's heapprofd documentation run as
 * is.  Without QUERY the query is read from stdin, or, when stdin is a
 * terminal, an interactive shell (libedit) reads statements until .quit
 * (docs/SQL.md).
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
	const char *query; /* NULL: read stdin */
	int csv;
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
	fputs("usage: heapprof sql FILE [QUERY] [--csv]\n"
	      "\n"
	      "Run QUERY (one or more SQL statements) on the profile FILE,\n"
	      "opened read-only, and print each result as a table.  Without\n"
	      "QUERY, the query is read from standard input; when that is a\n"
	      "terminal, an interactive shell starts (.help lists its\n"
	      "commands).  experimental_flamegraph(ts, upid, 'native') gives\n"
	      "the call tree of a process at a dump (docs/SQL.md).\n"
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
		} else if (npos == 1) {
			o->query = a;
			npos++;
		} else {
			hp_err(SUBSYS,
			       "unexpected argument '%s' (quote the "
			       "query as one argument)",
			       a);
			return 2;
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

static void print_table(const struct table *t)
{
	size_t *width = calloc(t->ncols ? t->ncols : 1, sizeof(*width));

	if (!width) {
		hp_err(SUBSYS, "out of memory");
		return;
	}
	for (size_t r = 0; r < t->nrows; r++)
		for (int c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			size_t w = text_width(s ? s : "NULL");
			if (w > width[c])
				width[c] = w;
		}
	for (size_t r = 0; r < t->nrows; r++) {
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

static void print_csv(const struct table *t)
{
	for (size_t r = 0; r < t->nrows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			if (c)
				putchar(',');
			put_csv_field(t->cells[r * t->ncols + c]);
		}
		putchar('\n');
	}
}

/* Step st to the end, printing its rows if it has columns.  0 or -1. */
static int run_statement(sqlite3 *db, sqlite3_stmt *st, int csv, int *printed)
{
	struct table t;
	int rc;

	if (sqlite3_column_count(st) == 0) {
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			;
		if (rc == SQLITE_DONE)
			return 0;
		hp_err(SUBSYS, "%s", sqlite3_errmsg(db));
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
		hp_err(SUBSYS, "%s", sqlite3_errmsg(db));
		return -1;
	}
	if ((*printed)++)
		putchar('\n'); /* blank line between result sets */
	if (csv)
		print_csv(&t);
	else
		print_table(&t);
	table_free(&t);
	return 0;
}

/*
 * Run every statement of sql in order; 0, -1 after the first error, or -2
 * if sql holds no statement (an error unless allow_empty).
 */
static int run_all(sqlite3 *db, const char *sql, int csv, int allow_empty)
{
	const char *tail = sql;
	int printed = 0, nstmts = 0;

	while (tail && *tail) {
		sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(db, tail, -1, &st, &tail) != SQLITE_OK) {
			hp_err(SUBSYS, "%s", sqlite3_errmsg(db));
			return -1;
		}
		if (!st)
			continue; /* whitespace or a comment */
		nstmts++;
		int err = run_statement(db, st, csv, &printed);
		sqlite3_finalize(st);
		if (err)
			return -1;
	}
	if (!nstmts && !allow_empty) {
		hp_err(SUBSYS, "empty query");
		return -2;
	}
	return 0;
}

/* ---- the interactive shell ---------------------------------------------- */

#define PROMPT      "heapprof> "
#define CONT_PROMPT "     ...> "
#define HISTORY_MAX 1000

struct shell {
	sqlite3 *db;
	int csv;
	char *history; /* file, or NULL */
};

enum { DOT_OK, DOT_QUIT };

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
	      ".mode table|csv    output format; .mode alone prints it\n"
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

static void dot_tables(struct shell *sh, const char *pattern)
{
	int n = 0;

	each_text_row(sh->db,
	              "SELECT name FROM sqlite_master WHERE type IN"
	              " ('table', 'view') AND name NOT LIKE 'sqlite\\_%'"
	              " ESCAPE '\\' AND (?1 IS NULL OR name LIKE ?1)"
	              " ORDER BY name",
	              pattern, put_line, &n);
	if (!pattern ||
	    sqlite3_strlike(pattern, "experimental_flamegraph", 0) == 0)
		printf("experimental_flamegraph  (table-valued function:"
		       " experimental_flamegraph(ts, upid, 'native'))\n");
}

static void dot_schema(struct shell *sh, const char *table)
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
		return;
	if (fg)
		printf("-- table-valued function; its hidden columns are its"
		       " arguments\n%s;\n",
		       flamegraph_vtab_schema);
	else if (!n)
		hp_err(SUBSYS, "no such table: %s", table);
}

static int dot_command(struct shell *sh, char *line)
{
	char *w[4];
	int n = split_words(line, w, 4);

	if (n == 0)
		return DOT_OK;
	if (!strcmp(w[0], ".quit") || !strcmp(w[0], ".exit") ||
	    !strcmp(w[0], ".q")) {
		return DOT_QUIT;
	} else if (!strcmp(w[0], ".help")) {
		dot_help();
	} else if (!strcmp(w[0], ".tables") && n <= 2) {
		dot_tables(sh, n > 1 ? w[1] : NULL);
	} else if (!strcmp(w[0], ".schema") && n <= 2) {
		dot_schema(sh, n > 1 ? w[1] : NULL);
	} else if (!strcmp(w[0], ".mode") && n == 1) {
		printf("%s\n", sh->csv ? "csv" : "table");
	} else if (!strcmp(w[0], ".mode") && n == 2) {
		if (!strcmp(w[1], "csv"))
			sh->csv = 1;
		else if (!strcmp(w[1], "table"))
			sh->csv = 0;
		else
			hp_err(SUBSYS, "unknown mode '%s' (table or csv)",
			       w[1]);
	} else if (!strcmp(w[0], ".tables") || !strcmp(w[0], ".schema") ||
	           !strcmp(w[0], ".mode")) {
		hp_err(SUBSYS, "too many arguments to %s (.help)", w[0]);
	} else {
		hp_err(SUBSYS, "unknown command '%s' (.help lists them)", w[0]);
	}
	return DOT_OK;
}

/* Whether line holds only blanks. */
static int blank(const char *line)
{
	return line[strspn(line, " \t\r\n")] == '\0';
}

/* Run one complete entry; Ctrl-C interrupts it. */
static void shell_run_sql(struct shell *sh, const char *sql)
{
	interrupt_db = sh->db;
	run_all(sh->db, sql, sh->csv, 1);
	fflush(stdout);
	interrupt_db = NULL;
	got_sigint = 0;
}

/* Append line and a newline to the pending statement; -1 out of memory. */
static int append_line(char **buf, size_t *len, size_t *cap, const char *line)
{
	size_t n = strlen(line);

	if (*len + n + 2 > *cap) {
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

static int shell(sqlite3 *db, const char *file, int csv)
{
	struct shell sh = {.db = db, .csv = csv, .history = history_path()};
	struct sigaction sa, old_sa;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint; /* no SA_RESTART: read(2) must return */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_sa);
	rl_readline_name = "heapprof";
	rl_catch_signals = 0;
	rl_getc_function = shell_getc;
	using_history();
	stifle_history(HISTORY_MAX);
	if (sh.history)
		read_history(sh.history);
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
		if (!len && line[strspn(line, " \t")] == '.') {
			add_history(line);
			int r = dot_command(&sh, line);
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
		int err = append_line(&buf, &len, &cap, line);
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
		shell_run_sql(&sh, buf);
		len = 0;
	}
	if (sh.history)
		write_history(sh.history);
	sigaction(SIGINT, &old_sa, NULL);
	free(sh.history);
	free(buf);
	return rc;
}

int cmd_sql(int argc, char **argv)
{
	struct sql_opts o;
	char *owned = NULL;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	sqlite3 *db = reader_open(o.file, SUBSYS);
	if (!db)
		return 1;
	rc = flamegraph_vtab_register(db);
	if (rc != SQLITE_OK) {
		hp_err(SUBSYS, "registering experimental_flamegraph: %s",
		       sqlite3_errstr(rc));
		sqlite3_close(db);
		return 1;
	}
	if (!o.query && isatty(STDIN_FILENO)) {
		rc = shell(db, o.file, o.csv);
		sqlite3_close(db);
		return rc;
	}
	if (!o.query) {
		owned = read_stdin();
		if (!owned) {
			sqlite3_close(db);
			return 1;
		}
		o.query = owned;
	}
	rc = run_all(db, o.query, o.csv, 0);
	sqlite3_close(db);
	free(owned);
	if (fflush(stdout) != 0) {
		hp_err(SUBSYS, "writing output failed");
		return 1;
	}
	return rc == 0 ? 0 : rc == -2 ? 2 : 1;
}
