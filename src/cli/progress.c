/*
 * The progress line (progress.h).  One line, rewritten with \r and padded
 * over what was there; cleared with spaces, so that no terminal escape is
 * needed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "cli/progress.h"
#include "collector/collector.h"
#include "store/trace_read.h"
#include "util/clock.h"

static struct {
	const char *cmd;
	uint64_t start_ms;
	bool tty;
	int shown; /* the length of the line on the terminal, 0: none */
} pg;

/* 3.2M, 712k, 950 */
static void count(char *buf, size_t len, int64_t n)
{
	if (n >= 1000000)
		snprintf(buf, len, "%.1fM", (double)n / 1e6);
	else if (n >= 10000)
		snprintf(buf, len, "%.0fk", (double)n / 1e3);
	else
		snprintf(buf, len, "%lld", (long long)n);
}

void progress_show(const char *what, int64_t done, int64_t total)
{
	if (!pg.tty)
		return;
	if (done < 0) {
		if (pg.shown)
			fprintf(stderr, "\r%*s\r", pg.shown, "");
		pg.shown = 0;
		return;
	}
	if (hp_mono_ms() - pg.start_ms < 1000)
		return;
	char d[32], t[32], line[200];
	count(d, sizeof(d), done);
	count(t, sizeof(t), total);
	int n = total > 0 ? snprintf(line, sizeof(line),
	                             "heapprof: %s: %s: %s of %s events",
	                             pg.cmd, what, d, t)
	                  : snprintf(line, sizeof(line),
	                             "heapprof: %s: %s: %s events", pg.cmd,
	                             what, d);
	fprintf(stderr, "\r%s%*s", line, pg.shown > n ? pg.shown - n : 0, "");
	fflush(stderr);
	pg.shown = n;
}

static void on_trace(void *arg, int64_t done, int64_t total)
{
	(void)arg;
	progress_show("reading trace", done, total);
}

void progress_trace(const char *cmd)
{
	pg.cmd = cmd;
	pg.start_ms = hp_mono_ms();
	pg.tty = isatty(STDERR_FILENO);
	if (pg.tty)
		tr_set_progress(on_trace, NULL);
}

/* The line once the final read itself has run a second: the session ran
 * for long before it. */
static void on_final(void *arg, int64_t done, int64_t total)
{
	(void)arg;
	if (done == 65536)
		pg.start_ms = hp_mono_ms();
	progress_show("writing trace", done, total);
}

void progress_record(void)
{
	progress_trace("record");
	if (pg.tty)
		collector_set_trace_progress(on_final, NULL);
}
