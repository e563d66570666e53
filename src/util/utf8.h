/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8.h - cutting UTF-8 text at a byte count without splitting a character:
 * the messages and log fields that hold at most so many bytes of a name, a key
 * or a whole message. Half a character is no text: jansson refuses it, and a
 * reader sees U+FFFD where the name had a character. Pure: no I/O, no
 * allocation.
 */
#ifndef FG_UTF8_H
#define FG_UTF8_H

#include <stddef.h>

/* The bytes of s (NUL-terminated) to keep when keeping at most max: max, less
 * the start of a character the cut at max would split (up to 3 bytes). An int,
 * for the precision of "%.*s". */
int utf8_cut_len(const char *s, size_t max);

/* Ends s (NUL-terminated) before a last character that is cut short, as
 * snprintf leaves one at the end of a full buffer; a whole one stays. */
void utf8_trim_cut(char *s);

#endif
