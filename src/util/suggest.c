/* "Did you mean": the closest of a few known words to a mistyped one, for
 * the command line's commands and options and the SQL shell's dot
 * commands. */
#include <stdint.h>
#include <string.h>

#include "util/suggest.h"

/* Optimal string alignment distance (Damerau-Levenshtein with adjacent
 * transpositions), capped: words longer than 63 bytes are never close. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t d[64][64];

	if (la >= 64 || lb >= 64)
		return SIZE_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t m = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < m)
				m = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < m)
				m = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < m)
				m = d[i - 2][j - 2] + 1;
			d[i][j] = m;
		}
	return d[la][lb];
}

const char *hp_suggest(const char *word, const char *const *cands, size_t n)
{
	const char *w = word + strspn(word, "-");
	size_t wlen = strlen(w);
	size_t limit = wlen <= 4 ? 1 : 2;
	const char *best = NULL, *prefix = NULL;
	size_t best_d = SIZE_MAX;
	int nprefix = 0;

	if (!wlen)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *c = cands[i] + strspn(cands[i], "-");
		size_t d = edit_distance(w, c);
		if (d <= limit && d < best_d) {
			best = cands[i];
			best_d = d;
		}
		if (wlen >= 2 && !strncmp(c, w, wlen)) {
			prefix = cands[i];
			nprefix++;
		}
	}
	if (best)
		return best;
	return nprefix == 1 ? prefix : NULL;
}
