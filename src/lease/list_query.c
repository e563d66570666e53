/* SPDX-License-Identifier: Apache-2.0 */
/*
 * list_query.c - reads the arguments of the lease listings and checks the
 * names among them (limit's bounds are its route's, http/strict.h). It must
 * not talk to Redis.
 */
#include "lease/list_query.h"

#include <string.h>

#include "util/integer.h"

/* Copies a name-alphabet argument of at most NAME_MAX_LEN bytes (empty_ok: may be empty). */
static int name_arg(const char *what, const char *text, bool empty_ok, char *out,
                    struct fg_error *err)
{
    size_t len = text ? strlen(text) : 0;
    if (len == 0 && empty_ok) {
        out[0] = '\0';
        return 0;
    }
    if (!name_is_valid_lock(text, len))
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameter '%s' must be %s1 to %d bytes of A-Z a-z 0-9 . _ : / -",
                       what, empty_ok ? "empty or " : "", NAME_MAX_LEN);
    memcpy(out, text, len + 1);
    return 0;
}

int list_query_parse(const char *prefix, const char *limit, const char *cursor,
                     struct list_query *out, struct fg_error *err)
{
    out->limit = (int)integer_read(limit, LIST_LIMIT_DEFAULT);
    out->upto[0] = '\0';
    if (name_arg("prefix", prefix, true, out->prefix, err) != 0)
        return -1;
    if (cursor != NULL && cursor[0] != '\0' &&
        name_arg("cursor", cursor, false, out->after, err) != 0)
        return fg_fail(err, FG_ERR_INVALID_FIELD,
                       "query parameter 'cursor' must be the next_cursor of a previous page");
    if (cursor == NULL || cursor[0] == '\0')
        out->after[0] = '\0';
    return 0;
}
