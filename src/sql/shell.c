/*
 * The SQL shell of `heapprof sql` (docs/SQL.md): statements run on a
 * profile and their results printed (sql/table.h), and the dot commands
 * (.tables, .schema, .mode, ...) as in the sqlite3 shell.  A QUERY, stdin
 * and the interactive shell (libedit) are read the same way, line by
 * line: a line starting with '.' at the start of a statement is a dot
 * command.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "sql/flamegraph_vtab.h"
#include "sql/shell.h"
#include "util/err.h"
#include "util/suggest.h"

#define SUBSYS "sql"

/* .mode's names, in enum sql_mode's order. */
static const char *const mode_names[] = {"table", "csv", "list", "line"};

/* Step st to the end, printing its rows if it has columns.  0 or -1. */
static int run_statement(struct sql_shell *sh, sqlite3_stmt *st)
{
	struct sql_table t;
	int rc;

	if (sqlite3_column_count(st) == 0) {
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			;
		if (rc == SQLITE_DONE)
			return 0;
		hp_err(SUBSYS, "%s", sqlite3_errmsg(sh->db));
		return -1;
	}
	if (sql_table_init(&t, st) < 0) {
		sql_table_free(&t);
		hp_err(SUBSYS, "out of memory");
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (sql_table_push(&t, st) < 0) {
			sql_table_free(&t);
			hp_err(SUBSYS, "out of memory");
			return -1;
		}
	}
	if (rc != SQLITE_DONE) {
		sql_table_free(&t);
		hp_err(SUBSYS, "%s", sqlite3_errmsg(sh->db));
		return -1;
	}
	if (sh->printed++)
		putchar('\n'); /* blank line between result sets */
	sql_table_print(&t, sh->mode, sh->headers);
	sql_table_free(&t);
	return 0;
}

/* Run every statement of sql in order; 0, or -1 after the first error.
 * *nstmts counts the statements run. */
static int run_all(struct sql_shell *sh, const char *sql, int *nstmts)
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

static int dot_tables(struct sql_shell *sh, const char *pattern)
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

static int dot_schema(struct sql_shell *sh, const char *table)
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
static int dot_indexes(struct sql_shell *sh, const char *table)
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

static int dot_mode(struct sql_shell *sh, const char *m)
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
		sh->mode = SQL_MODE_TABLE;
		return DOT_OK;
	}
	hp_err(SUBSYS, "unknown mode '%s' (table, column, csv, list or line)",
	       m);
	return DOT_ERR;
}

static int dot_headers(struct sql_shell *sh, const char *v)
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
static int dot_command(struct sql_shell *sh, char *line)
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
	        hp_suggest(w[0], names, sizeof(names) / sizeof(*names));
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
int sql_shell_run_script(struct sql_shell *sh, const char *text, int *nunits,
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
static void shell_run_sql(struct sql_shell *sh, const char *sql)
{
	int n = 0;

	interrupt_db = sh->db;
	sh->printed = 0;
	run_all(sh, sql, &n);
	fflush(stdout);
	interrupt_db = NULL;
	got_sigint = 0;
}

int sql_shell_interactive(struct sql_shell *sh, const char *file)
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
