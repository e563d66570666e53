/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redact.c - hiding the password of a URL or connection string, and every
 * occurrence of a known secret in a message, before either is printed. It
 * must not decide what is secret beyond the password of a connection string
 * (callers name other secrets).
 */
#include "util/redact.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MASK "***"

/* Appends n bytes of s to out (at *len, cap bytes), as many as fit. */
static void put(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + 1 >= cap)
        return;
    if (n > cap - 1 - *len)
        n = cap - 1 - *len;
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = '\0';
}

/* Length of the value of a "password=" at s: up to the next separator, or a
 * single-quoted libpq value with its backslash escapes. */
static size_t value_len(const char *s, bool in_uri)
{
    if (!in_uri && s[0] == '\'') {
        size_t i = 1;
        while (s[i] != '\0' && s[i] != '\'')
            i += s[i] == '\\' && s[i + 1] != '\0' ? 2 : 1;
        return s[i] == '\'' ? i + 1 : i;
    }
    return strcspn(s, in_uri ? "&#" : " \t\r\n");
}

/* Copies s to out, each "password=<value>" (a parameter of a URI's query, or
 * a word of a key/value string) masked. */
static void put_masked_params(char *out, size_t cap, size_t *len, const char *s, bool in_uri)
{
    static const char key[] = "password";
    while (*s != '\0') {
        bool starts = in_uri ? (s[-1] == '?' || s[-1] == '&') : true;
        const char *p = s;
        if (!in_uri)
            while (*p == ' ' || *p == '\t')
                p++;
        if (starts && strncasecmp(p, key, sizeof key - 1) == 0) {
            const char *eq = p + sizeof key - 1;
            while (!in_uri && (*eq == ' ' || *eq == '\t'))
                eq++;
            if (*eq == '=') {
                eq++;
                while (!in_uri && (*eq == ' ' || *eq == '\t'))
                    eq++;
                put(out, cap, len, s, (size_t)(eq - s));
                put(out, cap, len, MASK, sizeof MASK - 1);
                s = eq + value_len(eq, in_uri);
                continue;
            }
        }
        size_t word = in_uri ? strcspn(s, "&") : strcspn(p, " \t") + (size_t)(p - s);
        if (word == 0)
            word = 1;
        put(out, cap, len, s, word);
        s += word;
    }
}

void redact_url(const char *url, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    const char *sep = strstr(url, "://");
    if (sep == NULL) { /* a libpq key/value string */
        put_masked_params(out, cap, &len, url, false);
        return;
    }
    const char *authority = sep + 3;
    size_t authority_len = strcspn(authority, "/?#");
    const char *at = NULL;
    for (size_t i = 0; i < authority_len; i++)
        at = authority[i] == '@' ? authority + i : at;
    put(out, cap, &len, url, (size_t)(authority - url));
    const char *rest = authority;
    if (at != NULL) {
        const char *colon = memchr(authority, ':', (size_t)(at - authority));
        if (colon != NULL) {
            put(out, cap, &len, authority, (size_t)(colon - authority) + 1);
            put(out, cap, &len, MASK, sizeof MASK - 1);
        } else if (strncmp(url, "postgres", 8) == 0) {
            put(out, cap, &len, authority, (size_t)(at - authority));
        } else {
            put(out, cap, &len, MASK, sizeof MASK - 1);
        }
        rest = at;
    }
    const char *query = strchr(rest, '?');
    if (query == NULL) {
        put(out, cap, &len, rest, strlen(rest));
        return;
    }
    put(out, cap, &len, rest, (size_t)(query - rest) + 1);
    put_masked_params(out, cap, &len, query + 1, true);
}

void redact_scrub(char *text, const char *secret)
{
    if (secret == NULL || secret[0] == '\0')
        return;
    size_t n = strlen(secret), mask = n < sizeof MASK - 1 ? n : sizeof MASK - 1;
    for (char *hit = strstr(text, secret); hit != NULL; hit = strstr(hit + mask, secret)) {
        memset(hit, '*', mask);
        memmove(hit + mask, hit + n, strlen(hit + n) + 1);
    }
}
