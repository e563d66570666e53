/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prefer.c - reads a Prefer header line (RFC 7240 2: preferences separated by
 * ',', each a token with an optional value, then parameters after ';') for its
 * first return preference. It must not look at requests: the caller passes
 * each of a request's Prefer lines, in order, until one names it.
 */
#include "http/prefer.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* Skips optional white space (SP, HTAB). */
static const char *skip_ows(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Reads a token or a quoted string at p into [*start, *start + *len) (the
 * quotes left out; a quoted string's escapes are kept, which no value
 * compared here contains); returns what follows. */
static const char *read_word(const char *p, const char **start, size_t *len)
{
    if (*p == '"') {
        const char *q = ++p;
        while (*q != '\0' && *q != '"')
            q += q[0] == '\\' && q[1] != '\0' ? 2 : 1;
        *start = p;
        *len = (size_t)(q - p);
        return *q == '"' ? q + 1 : q;
    }
    *start = p;
    *len = strcspn(p, " \t=;,\"");
    return p + *len;
}

static bool word_is(const char *start, size_t len, const char *expected)
{
    return len == strlen(expected) && strncasecmp(start, expected, len) == 0;
}

enum prefer_return prefer_return_of(const char *value)
{
    const char *p = value != NULL ? value : "";
    while (*p != '\0') {
        const char *name, *word = "";
        size_t name_len, word_len = 0;
        p = read_word(skip_ows(p), &name, &name_len);
        p = skip_ows(p);
        if (*p == '=')
            p = read_word(skip_ows(p + 1), &word, &word_len);
        if (word_is(name, name_len, "return"))
            return word_is(word, word_len, "minimal") ? PREFER_RETURN_MINIMAL : PREFER_RETURN_OTHER;
        while (*p != '\0' && *p != ',') /* parameters of this preference, or junk */
            p = *p == '"' ? read_word(p, &word, &word_len) : p + 1;
        if (*p == ',')
            p++;
    }
    return PREFER_RETURN_NONE;
}
