/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8.c - where UTF-8 text may be cut: before the lead byte of a character
 * whose continuation bytes a cut at a byte count would leave out. Only the end
 * of a text is looked at; whether the rest is UTF-8 is for its reader
 * (util/names.c checks what clients send).
 */
#include "util/utf8.h"

#include <limits.h>
#include <string.h>

#include "util/error.h"

/* The bytes of a character whose lead byte is lead (1 for ASCII, and for a
 * byte that leads none: it is left as it is). */
static size_t sequence_len(unsigned char lead)
{
    return lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}

/* n, less the bytes of a last character of s[0, n) that is cut short. */
static size_t whole_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t at = n, continuing = 0;
    while (at > 0 && continuing < 3 && (u[at - 1] & 0xC0) == 0x80) {
        at--;
        continuing++;
    }
    if (at == 0)
        return n; /* no lead byte: not a character cut short */
    return sequence_len(u[at - 1]) > continuing + 1 ? at - 1 : n;
}

int utf8_cut_len(const char *s, size_t max)
{
    FG_ASSERT(max <= INT_MAX);
    size_t n = strnlen(s, max);
    return (int)(n < max ? n : whole_len(s, max));
}

void utf8_trim_cut(char *s)
{
    s[whole_len(s, strlen(s))] = '\0';
}
