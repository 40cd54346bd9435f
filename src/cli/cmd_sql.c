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
 * This file reads the command line; the shell is sql/shell.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "sql/flamegraph_vtab.h"
#include "store/reader.h"
#include "sql/shell.h"
#include "util/err.h"

#define SUBSYS "sql"

struct sql_opts {
	const char *file;
	const char **queries; /* QUERY arguments, in order (owned array) */
	int nqueries;         /* 0: read stdin */
	int csv;
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

int cmd_sql(int argc, char **argv)
{
	struct sql_opts o;
	char *owned = NULL;
	int rc = parse_args(argc, argv, &o);

	if (rc) {
		free(o.queries);
		return rc == 1 ? 0 : 2;
	}
	sqlite3 *db = rd_open(o.file, SUBSYS);
	if (!db) {
		free(o.queries);
		return 1;
	}
	struct sql_shell sh = {.db = db,
	                       .mode = o.csv ? SQL_MODE_CSV : SQL_MODE_TABLE,
	                       .headers = 1};
	rc = flamegraph_vtab_register(db);
	if (rc != SQLITE_OK) {
		hp_err(SUBSYS, "registering experimental_flamegraph: %s",
		       sqlite3_errstr(rc));
		sqlite3_close(db);
		free(o.queries);
		return 1;
	}
	if (!o.nqueries && isatty(STDIN_FILENO)) {
		rc = sql_shell_interactive(&sh, o.file);
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
		rc = sql_shell_run_script(&sh, owned, &nunits, &quit);
	for (int i = 0; i < o.nqueries && rc == 0 && !quit; i++)
		rc = sql_shell_run_script(&sh, o.queries[i], &nunits, &quit);
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
