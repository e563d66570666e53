/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit_filter.c - reads the arguments of the audit query and checks those
 * its routes' descriptions leave to it (after_id, lease_kind, until_ms, the range); since_ms
 * and limit have passed their bounds (http/strict.h). It must not build SQL.
 */
#include "store/audit/audit_filter.h"

#include <string.h>

#include "util/integer.h"

/* Reads a decimal integer argument in [min, max]; absent leaves *out alone. */
static int int_arg(const char *name, const char *text, long long min, long long max, long long *out,
                   struct fg_error *err)
{
    if (text == NULL)
        return 0;
    if (integer_parse(text, min, max, out) != INTEGER_OK)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameter '%s' must be an integer from %lld to %lld", name, min, max);
    return 0;
}

int audit_filter_parse(const char *resource, const char *lock_name, const char *lease_kind,
                       const char *since_ms, const char *limit, const char *after_id,
                       struct audit_filter *out, struct fg_error *err)
{
    long long after = 0;
    if (int_arg("after_id", after_id, 0, INT64_MAX, &after, err) != 0)
        return -1;
    if (lease_kind != NULL && strcmp(lease_kind, "lock") != 0 &&
        strcmp(lease_kind, "semaphore") != 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameter 'lease_kind' must be lock or semaphore");
    out->resource = resource;
    out->lock_name = lock_name;
    out->lease_kind = lease_kind;
    out->owner = NULL;
    out->until_ms = 0;
    out->since_ms = integer_read(since_ms, 0);
    out->after_id = after;
    out->limit = (int)integer_read(limit, AUDIT_LIMIT_DEFAULT);
    return 0;
}

int audit_filter_narrow(const char *owner, const char *until_ms, struct audit_filter *f,
                        struct fg_error *err)
{
    long long until = 0;
    if (int_arg("until_ms", until_ms, 1, AUDIT_TIME_MAX_MS, &until, err) != 0)
        return -1;
    if (until != 0 && until <= f->since_ms)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameter 'until_ms' must be later than since_ms");
    f->owner = owner;
    f->until_ms = until;
    return 0;
}

int audit_window_parse(const char *since_ms, const char *until_ms, int64_t now_ms,
                       struct audit_window *out, struct fg_error *err)
{
    long long until = now_ms, since;
    if (int_arg("until_ms", until_ms, 1, AUDIT_TIME_MAX_MS, &until, err) != 0)
        return -1;
    /* By default the last hour, from the epoch at most (until_ms within its first hour). */
    since = integer_read(since_ms,
                         until > AUDIT_WINDOW_DEFAULT_MS ? until - AUDIT_WINDOW_DEFAULT_MS : 0);
    if (since >= until || until - since > AUDIT_WINDOW_MAX_MS)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameters 'since_ms' and 'until_ms' must make a range of 1 ms to "
                       "%d ms",
                       AUDIT_WINDOW_MAX_MS);
    out->since_ms = since;
    out->until_ms = until;
    return 0;
}
