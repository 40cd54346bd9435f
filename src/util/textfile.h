/*
 * The small text files an operator names on the command line: a session
 * config (`record -c`), serve's config (`serve -c`) and token file
 * (`serve --token-file`), check's rule files (`check -f`).  Each is read
 * whole, from a regular file only, up to a bound; what is wrong with one
 * comes back as a reason for the caller's one-line message (nothing here
 * prints).
 */
#ifndef HEAPPROF_UTIL_TEXTFILE_H
#define HEAPPROF_UTIL_TEXTFILE_H

#include <stddef.h>

/* hp_text_read's flags */
#define HP_TEXT_STDIN 1u /* "-" is stdin (any kind of file: a pipe) */
#define HP_TEXT_PRIVATE                                                        \
	2u /* a secret: refused when group or others have                      \
	      any permission on it, as ssh refuses a                           \
	      private key */

/* Longest reason hp_text_read gives, with the NUL. */
#define HP_TEXT_WHY_MAX 256

/*
 * Read path whole into *out (malloc'd, a NUL after its *len bytes, which
 * may hold NUL bytes themselves: the caller looks for them, per line).
 * Refused, with -1 and a reason in why (HP_TEXT_WHY_MAX bytes):
 *   - anything but a regular file or a link to one ("not a regular file
 *     (a FIFO)"): a FIFO would block the reader until a writer came, a
 *     device or a directory means nothing as text.  Nothing is opened in a
 *     way that could block or act (O_NONBLOCK, O_NOCTTY; checked again on
 *     the descriptor);
 *   - more than max bytes ("larger than 1 MiB"), counted as read, so a
 *     file that grows while read (or a /proc file, size 0) is bounded too;
 *   - with HP_TEXT_PRIVATE, a mode giving group or others any permission
 *     ("permissions 0644 are too open: ...");
 *   - what open(2) or read(2) said (strerror).
 */
int hp_text_read(const char *path, size_t max, unsigned flags, char **out,
                 size_t *len, char *why);

/*
 * s[0..n) for a message: each control byte (below 0x20, and 0x7f) as
 * \xNN and a backslash as \\, so that what a file or a request holds
 * cannot move the cursor, clear a terminal or cut a line, and reads back
 * unambiguously; cut with "..." to fit len bytes.  Returns buf.
 */
char *hp_text_escape(char *buf, size_t len, const char *s, size_t n);

/* The first control byte in s[0..n) other than those in allowed (e.g.
 * "\t"), or NULL. */
const char *hp_text_control(const char *s, size_t n, const char *allowed);

#endif
