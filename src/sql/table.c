/*
 * A result set of `heapprof sql`, buffered so that column widths are known
 * before printing, and the output formats it prints in (.mode): an aligned
 * text table (numbers right-aligned), CSV (RFC 4180), a list ('|' between
 * fields) or one "column = value" line per field.  Blobs print as
 * lowercase hex.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/table.h"
#include "util/err.h"

#define SUBSYS "sql"

void sql_table_free(struct sql_table *t)
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

static int table_add_row(struct sql_table *t)
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

int sql_table_init(struct sql_table *t, sqlite3_stmt *st)
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
int sql_table_push(struct sql_table *t, sqlite3_stmt *st)
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
static void print_table(const struct sql_table *t, int headers)
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
static void print_delimited(const struct sql_table *t, int headers, int csv)
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
static void print_lines(const struct sql_table *t)
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

void sql_table_print(const struct sql_table *t, enum sql_mode mode, int headers)
{
	switch (mode) {
	case SQL_MODE_TABLE:
		print_table(t, headers);
		break;
	case SQL_MODE_CSV:
	case SQL_MODE_LIST:
		print_delimited(t, headers, mode == SQL_MODE_CSV);
		break;
	case SQL_MODE_LINE:
		print_lines(t);
		break;
	}
}
