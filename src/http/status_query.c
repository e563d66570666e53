/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status_query.c - reads and checks the query of a lease's status route, the
 * watch's parameters included, from its texts. It must not start a watch or
 * read a lease: the handlers do (handlers_lease.c, handlers_watch.c).
 */
#include "http/status_query.h"

#include <limits.h>
#include <string.h>

#include "fglimits.h"
#include "util/integer.h"

/* Reads text, the value of query parameter name, into *out within [min, max];
 * absent (NULL) leaves *out as it is. */
static int number(const char *name, const char *text, long long min, long long max, long long *out,
                  struct fg_error *err)
{
    if (text == NULL)
        return 0;
    if (integer_parse(text, min, max, out) != INTEGER_OK)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameter '%s' must be an integer from %lld to %lld", name, min, max);
    return 0;
}

/* Reads text, the watched lease's fence, into *out: 1 to 2^63 - 1, written
 * as a token writes it (integer_parse_exact); absent (NULL) leaves *out as it
 * is. */
static int fence_number(const char *text, long long *out, struct fg_error *err)
{
    if (text == NULL)
        return 0;
    if (integer_parse_exact(text, 1, LLONG_MAX, out) != INTEGER_OK)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameter 'fence' must be an integer from 1 to %lld without "
                       "leading zeros",
                       LLONG_MAX);
    return 0;
}

/* number, with the bounds of the route's table for name. */
static int bounded(const struct member_bound *bounds, const char *name, const char *text,
                   long long *out, struct fg_error *err)
{
    const struct member_bound *b = strict_bound(bounds, name);
    return number(name, text, b->min, b->max, out, err);
}

int status_query_parse(const struct status_query_text *text, const struct member_bound *bounds,
                       struct status_query *out, struct fg_error *err)
{
    *out = (struct status_query){.wait_ms = WATCH_WAIT_DEFAULT_MS};
    if (text->watch != NULL && strcmp(text->watch, "true") != 0 &&
        strcmp(text->watch, "false") != 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD, "query parameter 'watch' must be true or false");
    out->watch = text->watch != NULL && strcmp(text->watch, "true") == 0;
    if (fence_number(text->fence, &out->fence, err) != 0)
        return -1;
    if (out->watch && text->fence == NULL)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameter 'fence' is required with watch=true");
    if (bounded(bounds, "wait_ms", text->wait_ms, &out->wait_ms, err) != 0 ||
        bounded(bounds, "waiters", text->waiters, &out->waiters, err) != 0)
        return -1;
    return 0;
}
