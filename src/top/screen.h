/*
 * `heapprof top`'s screen (docs/TOP.md): two readings of a process's heap
 * (inspect/top_read.h) drawn as totals, rates and a table of functions,
 * on a terminal (its alternate screen, no echo, keys one at a time) or as
 * plain text.  The loop that reads, waits and takes keys is top.c's.
 */
#ifndef HEAPPROF_TOP_SCREEN_H
#define HEAPPROF_TOP_SCREEN_H

#include <stdbool.h>
#include <sys/types.h>

#include "inspect/top_read.h"
#include "top/top.h"

/* The views' names, in enum top_view's order. */
extern const char *const screen_view_names[TOP_NVIEWS];

struct screen {
	const struct top_config *o;
	struct top_reader *r;
	pid_t pid;
	char comm[64];
	bool own; /* our own session */
	bool tty; /* interactive */
	enum top_view view;
	enum top_sort sort;
	bool inclusive, paused, help;
	struct top_reading cur, prev;
	bool have_cur, have_prev;
	int rows, cols;
};

/* Draws sc: cur (with the rates since prev when have_prev), or the keys'
 * help; on a terminal from its top left corner, else as a block of
 * lines ended by an empty one. */
void screen_show(struct screen *sc);

/* The alternate screen, no echo, keys as typed (Ctrl-C still a signal);
 * screen_tty_leave restores the terminal as it was. */
void screen_tty_enter(void);
void screen_tty_leave(void);

#endif
