/* SPDX-License-Identifier: Apache-2.0 */
/*
 * query_args.c - decodes the arguments of a request's query once, for every
 * route alike, and checks their names against the route's. It never
 * interprets a value (the handlers and the route's bounds do) and never
 * talks to the HTTP library (the server hands it the raw texts).
 */
#include "http/query_args.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/fgjson.h"
#include "util/names.h"
#include "util/utf8.h"

/* Longest part of a parameter's name a detail quotes. */
#define SHOWN_NAME_MAX 60

enum query_text query_args_decode(const char *raw, char *out, size_t *out_len)
{
    size_t n = 0;
    for (const char *at = raw; *at != '\0'; at++) {
        int byte = (unsigned char)*at;
        if (byte == '+') {
            byte = ' ';
        } else if (byte == '%') {
            int high = name_hex_value(at[1]), low = high < 0 ? -1 : name_hex_value(at[2]);
            if (high < 0 || low < 0)
                return QUERY_TEXT_BAD_ESCAPE;
            byte = high * 16 + low;
            at += 2;
        }
        if (byte == 0)
            return QUERY_TEXT_NUL;
        out[n++] = (char)byte;
    }
    out[n] = '\0';
    for (size_t at = 0, len; at < n; at += len)
        if ((len = utf8_sequence_len((const unsigned char *)out + at, n - at)) == 0)
            return QUERY_TEXT_NOT_UTF8;
    *out_len = n;
    return QUERY_TEXT_OK;
}

struct query_args *query_args_new(size_t n, size_t text_bytes)
{
    size_t head = offsetof(struct query_args, args) + n * sizeof(struct query_arg);
    FG_ASSERT(n < SIZE_MAX / sizeof(struct query_arg) && text_bytes < SIZE_MAX - head);
    struct query_args *q = malloc(head + text_bytes);
    FG_ASSERT(q != NULL);
    q->n = 0;
    q->cap = n;
    q->text = (char *)q + head;
    q->text_end = q->text + text_bytes;
    return q;
}

void query_args_free(struct query_args *q)
{
    free(q);
}

/* Decodes raw into the room left in q and points *out at it. */
static enum query_text take_text(struct query_args *q, const char *raw, const char **out)
{
    size_t len;
    FG_ASSERT(strlen(raw) < (size_t)(q->text_end - q->text));
    enum query_text got = query_args_decode(raw, q->text, &len);
    if (got == QUERY_TEXT_OK) {
        *out = q->text;
        q->text += len + 1;
    }
    return got;
}

/* Fails with the 400 of got, a fault of the text of the parameter name (its
 * name as sent when the name is at fault, else its name decoded). */
static int text_refused(enum query_text got, const char *name, struct fg_error *err)
{
    int shown = utf8_cut_len(name, SHOWN_NAME_MAX);
    if (got == QUERY_TEXT_BAD_ESCAPE)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameter '%.*s' has a malformed percent-escape", shown, name);
    if (got == QUERY_TEXT_NUL)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "query parameter '%.*s' must not contain NUL",
                       shown, name);
    return fg_fail(err, FG_ERR_INVALID_FIELD, "query parameter '%.*s' must be UTF-8 text", shown,
                   name);
}

int query_args_add(struct query_args *q, const char *raw_name, const char *raw_value,
                   struct fg_error *err)
{
    FG_ASSERT(q->n < q->cap);
    if (raw_name[0] == '\0' && (raw_value == NULL || raw_value[0] == '\0'))
        return 0; /* an empty segment between '&'s (?a=1&&b=2, a trailing '&') is no parameter */
    struct query_arg *arg = &q->args[q->n];
    enum query_text got = take_text(q, raw_name, &arg->name);
    if (got != QUERY_TEXT_OK)
        return text_refused(got, raw_name, err);
    arg->value = NULL;
    /* An empty value is none: decoding never empties a value, so raw tells. */
    if (raw_value != NULL && raw_value[0] != '\0' &&
        (got = take_text(q, raw_value, &arg->value)) != QUERY_TEXT_OK)
        return text_refused(got, arg->name, err);
    q->n++;
    return 0;
}

int query_args_check(const struct query_args *q, const char *const *listed, struct fg_error *err)
{
    for (size_t i = 0; q != NULL && i < q->n; i++) {
        const char *name = q->args[i].name;
        int shown = utf8_cut_len(name, SHOWN_NAME_MAX);
        if (!fgjson_listed(listed, name))
            return fg_fail(err, FG_ERR_INVALID_FIELD, "query parameter '%.*s' is unknown", shown,
                           name);
        /* Listed names are few, so a repeat comes within the first few. */
        for (size_t j = 0; j < i; j++)
            if (strcmp(q->args[j].name, name) == 0)
                return fg_fail(err, FG_ERR_INVALID_FIELD, "query parameter '%.*s' given twice",
                               shown, name);
    }
    return 0;
}

const struct query_arg *query_args_find(const struct query_args *q, const char *name)
{
    for (size_t i = 0; q != NULL && i < q->n; i++)
        if (strcmp(q->args[i].name, name) == 0)
            return &q->args[i];
    return NULL;
}
