/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status_query.h - the query of a lease's status route (GET /v1/locks/{name}
 * and GET /v1/semaphores/{name}): the plain status, or a watch. Every
 * parameter the route describes is checked on every request, whichever of the
 * two it asks for, in the order of the description (docs/api.md "Members and
 * bounds of every route"). Pure: no I/O; the texts are borrowed.
 */
#ifndef FG_STATUS_QUERY_H
#define FG_STATUS_QUERY_H

#include <stdbool.h>

#include "http/strict.h"
#include "util/error.h"

/* The parameters as the request has them, decoded (http_request_query):
 * NULL when absent, as a name without a value or with an empty one is. */
struct status_query_text {
    const char *watch;   /* "true" or "false" */
    const char *fence;   /* the watched lease's fence */
    const char *wait_ms; /* the longest wait of a watch */
    const char *waiters; /* how many waiters a plain status lists */
};

/* The query, checked. */
struct status_query {
    bool watch;        /* wait for the lease with fence to end (watch=true) */
    long long fence;   /* the watched lease's fence, 1 ...; 0 when absent (no watch) */
    long long wait_ms; /* the longest wait of a watch (its default when absent) */
    long long waiters; /* how many waiters a plain status lists (0 when absent) */
};

/*
 * Reads text into *out with the bounds of the route (bounds: its generated
 * table, which describes wait_ms and waiters): watch is "true" or "false";
 * fence an integer >= 1 without leading zeros (integer_parse_exact), required
 * with watch=true; wait_ms and waiters integers within their bounds. Returns
 * 0, or -1 with FG_ERR_INVALID_FIELD naming the first parameter at fault.
 */
int status_query_parse(const struct status_query_text *text, const struct member_bound *bounds,
                       struct status_query *out, struct fg_error *err) FG_WUR;

#endif
