/* SPDX-License-Identifier: Apache-2.0 */
/*
 * query.c - decodes the query arguments an endpoint names, for the listings and
 * the audit views alike. It never interprets a value.
 */
#include "http/query.h"

#include <string.h>

#include "util/names.h"

int http_query_args(const struct http_request *req, const char *const *names, size_t n,
                    char *values, size_t cap, const char **args, struct fg_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const char *raw = http_request_query(req, names[i]);
        size_t len;
        args[i] = NULL;
        if (raw == NULL)
            continue;
        if (name_decode(raw, strlen(raw), values + i * cap, cap, &len, err) != 0)
            return fg_fail(err, FG_ERR_INVALID_FIELD,
                           "query argument '%s' is not well encoded or too long", names[i]);
        args[i] = values + i * cap;
    }
    return 0;
}
