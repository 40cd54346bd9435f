/*
 * The SQL shell of `heapprof sql` (docs/SQL.md): SQL statements and dot
 * commands (.help lists them) run on a profile, each result set printed
 * to stdout in the shell's mode.  Errors are said on stderr as
 * "sql: ...".
 */
#ifndef HEAPPROF_SQL_SHELL_H
#define HEAPPROF_SQL_SHELL_H

#include <sqlite3.h>

#include "sql/table.h"

/* What the statements run on and how their results print. */
struct sql_shell {
	sqlite3 *db;
	enum sql_mode mode;
	int headers;   /* .headers on|off */
	int printed;   /* result sets printed (a blank line between them) */
	char *history; /* file, or NULL */
};

/*
 * Run text (a QUERY, or stdin) as the interactive shell reads what is
 * typed: line by line, a line starting with '.' at the start of a
 * statement is a dot command; SQL runs once the lines so far end a
 * complete statement, and what is left at the end of text runs as it is
 * (no ';' needed).  *nunits counts the statements and dot commands run;
 * *quit is set by .quit.  0, or -1 after the first error (message
 * printed; nothing after it runs).
 */
int sql_shell_run_script(struct sql_shell *sh, const char *text, int *nunits,
                         int *quit);

/*
 * The interactive shell on a terminal (libedit, history in
 * $HOME/.heapprof_history) until .quit or Ctrl-D; file is the profile's
 * name for the greeting.  Ctrl-C stops the running query or drops the
 * line being typed.  0, or 1 when out of memory.
 */
int sql_shell_interactive(struct sql_shell *sh, const char *file);

#endif
