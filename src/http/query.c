/* SPDX-License-Identifier: Apache-2.0 */
/*
 * query.c - gathers the query arguments an endpoint names, for the listings
 * and the audit views alike, and bounds their length. The server has decoded
 * them (query_args.h); this never decodes again nor interprets a value.
 */
#include "http/query.h"

#include <string.h>

int http_query_args(const struct http_request *req, const char *const *names, size_t n,
                    size_t max_len, const char **args, struct fg_error *err)
{
    for (size_t i = 0; i < n; i++) {
        args[i] = http_request_query(req, names[i]);
        if (args[i] != NULL && strlen(args[i]) > max_len)
            return fg_fail(err, FG_ERR_INVALID_FIELD,
                           "query parameter '%s' is longer than %zu bytes", names[i], max_len);
    }
    return 0;
}
