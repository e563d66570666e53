/* SPDX-License-Identifier: Apache-2.0 */
/*
 * query.h - the query arguments of a GET that an endpoint reads, as the
 * server decoded them (http_request_query), bounded in length. Which
 * arguments an endpoint reads and what they mean is its handler's business.
 */
#ifndef FG_QUERY_H
#define FG_QUERY_H

#include <stddef.h>

#include "http/server.h"
#include "util/error.h"

/*
 * Points args[i] at the decoded value of query argument names[i] of req
 * (borrowed from req), or NULL when it is absent, for i in [0, n). An
 * argument longer than max_len bytes fails with FG_ERR_INVALID_FIELD naming
 * it.
 */
int http_query_args(const struct http_request *req, const char *const *names, size_t n,
                    size_t max_len, const char **args, struct fg_error *err) FG_WUR;

#endif
